"""How busy the machine was while we timed: load average and other processes' CPU share.

Read with psutil (Linux, macOS, Windows): the machine's CPU times, our process's, and the load
average; where a figure cannot be read it is None and the sample says "unknown". Over the
timing window, our process's share is its CPU time / all CPU time; our children's share is that
of profreport's own child processes (compile workers, a C++ compiler: capture/children.py),
reported apart because they are ours yet should not run while we time; the other processes'
share is the machine's busy CPU time less both, / all CPU time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psutil

from profreport.capture.children import children_cpu_s
from profreport.record.model import MachineLoad

SOURCE = "psutil"  # the machine's and our processes' CPU times
# CPU time fields psutil reports that another field already counts (Linux: guest time is in user)
_COUNTED_TWICE = ("guest", "guest_nice")
_IDLE = ("idle", "iowait")


@dataclass(frozen=True)
class Snapshot:
    """One reading: the 1-minute load average, the machine's busy and total CPU seconds (summed
    over its CPUs), our process's and our child processes' (None: not readable here)."""

    load1: float | None = None
    busy: float | None = None
    total: float | None = None
    ours: float | None = None
    children: float | None = None  # profreport's own descendants' CPU (capture/children.py)


def snapshot() -> Snapshot:
    """One reading through psutil (every figure None where it cannot be read)."""
    try:
        load1: float | None = psutil.getloadavg()[0]
    except (OSError, AttributeError):
        load1 = None
    try:
        times = psutil.cpu_times()
        own = psutil.Process().cpu_times()
    except (psutil.Error, OSError):
        return Snapshot(load1)
    total = sum(getattr(times, k) for k in times._fields if k not in _COUNTED_TWICE)
    idle = sum(getattr(times, k, 0.0) for k in _IDLE)
    return Snapshot(load1, total - idle, total, own.user + own.system, children_cpu_s())


def machine_load(before: Snapshot, after: Snapshot) -> MachineLoad:
    """The record's `timing_noise.load`: readings around the timing and other processes' share."""
    load = MachineLoad(
        source=SOURCE,
        cpus=psutil.cpu_count(),
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
        return dataclasses.replace(load, source="unknown (psutil cannot read CPU times here)")
    total = after.total - before.total
    if total <= 0:
        return load
    ours = after.ours - before.ours
    busy = after.busy - before.busy
    children = 0.0
    children_share = None
    if before.children is not None and after.children is not None:
        # a grandchild orphaned and reaped by init takes its time away: never below 0
        children = max(0.0, after.children - before.children)
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
