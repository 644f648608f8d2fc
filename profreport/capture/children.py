"""profreport's own child processes, read from /proc: what the noise guard counts as ours.

Compilers start helpers (Inductor's compile workers, the C++ compiler AOTInductor runs); their
CPU time is profreport's, not another process's. A descendant is found by its parent pid chain in
`/proc/<pid>/stat`, so no kernel option (`/proc/<pid>/task/*/children`) is needed. Linux only;
elsewhere the readings are None.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")

# Fields after the command name in /proc/<pid>/stat (0-based): ppid, utime, stime, cutime, cstime.
_PPID, _UTIME, _STIME, _CUTIME, _CSTIME = 1, 11, 12, 13, 14


@dataclass(frozen=True)
class ChildProcess:
    """A live descendant of this process and the CPU it has used (itself and the children it
    waited for), in clock ticks."""

    pid: int
    name: str
    cpu_ticks: int


def _stat_fields(text: str) -> tuple[int, str, list[str]]:
    """(pid, command name, the fields after the name) of one /proc/<pid>/stat line (the name
    may hold spaces and parentheses, so it is cut at the last ')')."""
    head, _, rest = text.rpartition(")")
    pid, _, name = head.partition(" (")
    return int(pid), name, rest.split()


def _read_stat(path: Path) -> tuple[int, str, list[str]] | None:
    try:
        return _stat_fields(path.read_text())
    except OSError:  # the process exited between listing and reading
        return None


def live_descendants(pid: int | None = None, proc: Path = PROC) -> list[ChildProcess] | None:
    """Every live (or not yet reaped) descendant of `pid` (default: this process), or None
    where /proc cannot be listed."""
    root = os.getpid() if pid is None else pid
    try:
        entries = [p for p in proc.iterdir() if p.name.isdigit()]
    except OSError:
        return None
    by_parent: dict[int, list[ChildProcess]] = {}
    for entry in entries:
        stat = _read_stat(entry / "stat")
        if stat is None:
            continue
        _, name, fields = stat
        ticks = sum(int(fields[i]) for i in (_UTIME, _STIME, _CUTIME, _CSTIME))
        by_parent.setdefault(int(fields[_PPID]), []).append(
            ChildProcess(int(entry.name), name, ticks)
        )
    found: list[ChildProcess] = []
    parents = [root]
    while parents:
        children = [c for p in parents for c in by_parent.get(p, [])]
        found += children
        parents = [c.pid for c in children]
    return found


def children_cpu_ticks(proc: Path = PROC) -> int | None:
    """CPU clock ticks of this process's children so far: the live descendants' own (with the
    children they waited for) plus those this process already waited for (its cutime and
    cstime). A child reaped in between moves from the first sum into the second, so the total
    only grows; None without /proc."""
    own = _read_stat(proc / "self" / "stat")
    if own is None:
        return None
    pid, _, fields = own
    descendants = live_descendants(pid, proc)
    if descendants is None:
        return None
    return int(fields[_CUTIME]) + int(fields[_CSTIME]) + sum(c.cpu_ticks for c in descendants)
