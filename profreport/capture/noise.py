"""How busy the machine was while we timed: load average and other processes' CPU share.

Linux only (/proc/loadavg, /proc/stat, /proc/<pid>/stat); elsewhere every figure is None and the
sample says "unknown". Over the timing window, our process's share is its CPU time / all CPU
time; our children's share is that of profreport's own child processes (compile workers, a C++
compiler: capture/children.py), reported apart because they are ours yet should not run while we
time; the other processes' share is the machine's busy CPU time less both, / all CPU time.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from profreport.capture.children import children_cpu_ticks

PROC = Path("/proc")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def snapshot(proc: Path = PROC) -> dict[str, Any]:
    """One reading: loadavg, machine busy/total jiffies, our process's and our children's
    jiffies (None if unknown)."""
    snap: dict[str, Any] = {
        "load1": None,
        "busy": None,
        "total": None,
        "ours": None,
        "children": children_cpu_ticks(proc),
    }
    loadavg = _read(proc / "loadavg")
    if loadavg:
        snap["load1"] = float(loadavg.split()[0])
    stat = _read(proc / "stat")
    if stat and stat.startswith("cpu "):
        fields = [int(v) for v in stat.splitlines()[0].split()[1:]]
        # user nice system idle iowait irq softirq steal [guest guest_nice: already in user]
        total = sum(fields[:8])
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        snap["busy"], snap["total"] = total - idle, total
    own = _read(proc / "self" / "stat")
    if own:
        after_name = own.rsplit(")", 1)[-1].split()
        snap["ours"] = int(after_name[11]) + int(after_name[12])  # utime + stime (fields 14, 15)
    return snap


def machine_load(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The record's `timing_noise.load`: readings around the timing and other processes' share."""
    out: dict[str, Any] = {
        "source": "/proc (Linux)",
        "cpus": os.cpu_count(),
        "load1_before": before["load1"],
        "load1_after": after["load1"],
        "other_busy_share": None,
        "ours_busy_share": None,
        "children_busy_share": None,
    }
    if None in (before["busy"], after["busy"], before["ours"], after["ours"]):
        out["source"] = "unknown (no /proc on this system)"
        return out
    total = after["total"] - before["total"]
    if total <= 0:
        return out
    ours = after["ours"] - before["ours"]
    busy = after["busy"] - before["busy"]
    children = 0
    if before.get("children") is not None and after.get("children") is not None:
        # a grandchild orphaned and reaped by init takes its ticks away: never below 0
        children = max(0, after["children"] - before["children"])
        out["children_busy_share"] = round(min(1.0, children / total), 4)
    out["ours_busy_share"] = round(min(1.0, ours / total), 4)
    out["other_busy_share"] = round(max(0.0, (busy - ours - children) / total), 4)
    return out


@contextmanager
def watch(read: Callable[[], dict[str, Any]] = snapshot) -> Iterator[dict[str, Any]]:
    """`with watch() as load:` fills `load` with machine_load() over the block on exit."""
    load: dict[str, Any] = {}
    before = read()
    try:
        yield load
    finally:
        load.update(machine_load(before, read()))
