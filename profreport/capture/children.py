"""profreport's own child processes, read with psutil: what the noise guard counts as ours.

Compilers start helpers (Inductor's compile workers, the C++ compiler AOTInductor runs); their
CPU time is profreport's, not another process's. A descendant is found by the process tree
(psutil, on Linux, macOS and Windows); the CPU a process used is its user and system time plus
that of the children it waited for (where the platform keeps that: Linux).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psutil


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
