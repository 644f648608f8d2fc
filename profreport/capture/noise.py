"""How busy the machine was while we timed: load average and other processes' CPU share.

Linux only (/proc/loadavg, /proc/stat, /proc/<pid>/stat); elsewhere every figure is None and the
sample says "unknown". Over the timing window, our process's share is its CPU time / all CPU
time; our children's share is that of profreport's own child processes (compile workers, a C++
compiler: capture/children.py), reported apart because they are ours yet should not run while we
time; the other processes' share is the machine's busy CPU time less both, / all CPU time.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from profreport.capture.children import children_cpu_ticks
from profreport.record.model import MachineLoad

PROC = Path("/proc")


@dataclass(frozen=True)
class Snapshot:
    """One reading: the 1-minute load average, the machine's busy and total CPU jiffies, our
    process's and our child processes' (None: not readable here)."""

    load1: float | None = None
    busy: int | None = None
    total: int | None = None
    ours: int | None = None
    children: int | None = None  # profreport's own descendants' CPU jiffies (capture/children.py)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def snapshot(proc: Path = PROC) -> Snapshot:
    """One reading of /proc (every figure None where it cannot be read)."""
    load1 = busy = total = ours = None
    loadavg = _read(proc / "loadavg")
    if loadavg:
        load1 = float(loadavg.split()[0])
    stat = _read(proc / "stat")
    if stat and stat.startswith("cpu "):
        fields = [int(v) for v in stat.splitlines()[0].split()[1:]]
        # user nice system idle iowait irq softirq steal [guest guest_nice: already in user]
        total = sum(fields[:8])
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        busy = total - idle
    own = _read(proc / "self" / "stat")
    if own:
        after_name = own.rsplit(")", 1)[-1].split()
        ours = int(after_name[11]) + int(after_name[12])  # utime + stime (fields 14, 15)
    return Snapshot(load1, busy, total, ours, children_cpu_ticks(proc))


def machine_load(before: Snapshot, after: Snapshot) -> MachineLoad:
    """The record's `timing_noise.load`: readings around the timing and other processes' share."""
    load = MachineLoad(
        source="/proc (Linux)",
        cpus=os.cpu_count(),
        load1_before=before.load1,
        load1_after=after.load1,
    )
    if (
        before.busy is None
        or after.busy is None
        or before.ours is None
        or after.ours is None
        or before.total is None
        or after.total is None
    ):
        return dataclasses.replace(load, source="unknown (no /proc on this system)")
    total = after.total - before.total
    if total <= 0:
        return load
    ours = after.ours - before.ours
    busy = after.busy - before.busy
    children = 0
    children_share = None
    if before.children is not None and after.children is not None:
        # a grandchild orphaned and reaped by init takes its ticks away: never below 0
        children = max(0, after.children - before.children)
        children_share = round(min(1.0, children / total), 4)
    return dataclasses.replace(
        load,
        ours_busy_share=round(min(1.0, ours / total), 4),
        other_busy_share=round(max(0.0, (busy - ours - children) / total), 4),
        children_busy_share=children_share,
    )


class LoadWatch:
    """The machine's load over a `with watch()` block: `load` is set when the block ends."""

    def __init__(self) -> None:
        self.load: MachineLoad | None = None


@contextmanager
def watch(read: Callable[[], Snapshot] = snapshot) -> Iterator[LoadWatch]:
    """`with watch() as watched:` sets `watched.load` to machine_load() over the block on exit."""
    watched = LoadWatch()
    before = read()
    try:
        yield watched
    finally:
        watched.load = machine_load(before, read())
