"""How busy the machine was while we timed: load average and other processes' CPU share.

Read with psutil (Linux, macOS, Windows): the machine's CPU times, our process's, and the load
average; where a figure cannot be read it is None and the sample says "unknown". Over the
timing window, our process's share is its CPU time / all CPU time; our children's share is that
of profreport's own child processes (compile workers, a C++ compiler), reported apart because
they are ours yet should not run while we time; the other processes' share is the machine's busy
CPU time less both, / all CPU time.

Compilers start helpers (Inductor's compile workers, the C++ compiler AOTInductor runs); their
CPU time is profreport's, not another process's. A descendant is found by the process tree
(psutil, on Linux, macOS and Windows); the CPU a process used is its user and system time plus
that of the children it waited for (where the platform keeps that: Linux).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psutil

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
    children: float | None = None  # profreport's own descendants' CPU (children_cpu_s)


@dataclass(frozen=True)
class ChildProcess:
    """A live descendant of this process and the CPU it has used (itself and the children it
    waited for), in seconds."""

    pid: int
    name: str
    cpu_s: float


def _cpu_s(times: Any) -> float:
    """User + system seconds of a process and of the children it waited for."""
    waited = getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0)
    return float(times.user + times.system + waited)


def live_descendants(pid: int | None = None) -> list[ChildProcess] | None:
    """Every live (or not yet reaped) descendant of `pid` (default: this process), or None
    where the process tree cannot be read."""
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return None
    out = []
    for child in found:
        try:
            with child.oneshot():
                out.append(ChildProcess(child.pid, child.name(), _cpu_s(child.cpu_times())))
        except psutil.Error:  # it exited between listing and reading
            continue
    return out


def children_cpu_s() -> float | None:
    """CPU seconds of this process's children so far: the live descendants' own (with the
    children they waited for) plus those this process already waited for. A child reaped in
    between moves from the first sum into the second, so the total only grows (where the
    platform keeps the waited-for children's time: Linux); None where it cannot be read."""
    try:
        own = psutil.Process().cpu_times()
    except psutil.Error:
        return None
    descendants = live_descendants()
    if descendants is None:
        return None
    waited = _cpu_s(own) - float(own.user + own.system)
    return waited + sum(c.cpu_s for c in descendants)


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


@dataclass
class LoadWatch:
    """The machine's load over a `with watch()` block: `load` is set when the block ends."""

    load: MachineLoad | None = None


@contextmanager
def watch(read: Callable[[], Snapshot] = snapshot) -> Iterator[LoadWatch]:
    """`with watch() as watched:` sets `watched.load` to machine_load() over the block on exit."""
    watched = LoadWatch()
    before = read()
    try:
        yield watched
    finally:
        watched.load = machine_load(before, read())
