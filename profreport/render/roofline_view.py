"""View-model pieces of the roofline, the latency floor and peak memory: plain strings the HTML
template and the Markdown renderer lay out, and the points of the roofline chart."""

from __future__ import annotations

from profreport.format import fmt_bytes, fmt_ms
from profreport.record.model import Ceiling, KernelRow, ModeResult, OkMode, Run
from profreport.render.roofline_chart import Point
from profreport.render.views import FloorCells, KernelCells

BOUND_NAMES = {
    "memory": "memory bandwidth",
    "cache": "in-cache bandwidth",
    "compute": "matmul rate",
}


def fmt_rate(value: float | None, unit: str) -> str:
    """`value` per second with an SI prefix: fmt_rate(2.6e10, "B") -> "26.0 GB/s"."""
    if value is None:
        return "-"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {prefix}{unit}/s"
    return f"{value:.0f} {unit}/s"


def _ceiling_text(c: Ceiling, unit: str) -> str:
    samples = "?" if c.samples is None else c.samples
    return (
        f"{fmt_rate(c.value, unit)} measured (best of {samples}; median "
        f"{fmt_rate(c.median, unit)}, worst {fmt_rate(c.worst, unit)}, spread "
        f"{c.spread_pct or 0:.1f}%): {c.method}"
    )


def ceiling_rows(run: Run) -> list[tuple[str, str]]:
    """Rows of the environment table: each measured ceiling with its method and spread."""
    c = run.ceilings
    if c is None:
        return [("ceilings", "not measured (record written before ceilings were measured)")]
    if run.roofs is None or c.memory_bandwidth is None or c.matmul_rate is None:
        return [("ceilings", f"not available: {c.reason or 'no measurement'}")]
    rows = [("memory bandwidth", _ceiling_text(c.memory_bandwidth, "B"))]
    if c.cache_bandwidth:
        rows.append(("in-cache bandwidth", _ceiling_text(c.cache_bandwidth, "B")))
    rows.append(("matmul rate", _ceiling_text(c.matmul_rate, "FLOP")))
    when = c.measured_utc or "?"
    cached = " (reused from the per-machine cache)" if c.cached else ""
    share = c.other_busy_share
    if share is not None:
        cached += (
            f"; other processes used {share:.0%} of the CPU time while measuring "
            f"({c.attempts or 1} attempt(s), each ceiling the best of them)"
        )
    sizes_from = "?" if c.cache_sizes_from is None else c.cache_sizes_from
    llc = f"{fmt_bytes(c.last_level_cache_bytes)} ({sizes_from})"
    measured = f"{when} UTC{cached}; {c.timer or ''}; last-level cache {llc}"
    rows.append(("ceilings measured", measured))
    return rows


def kernel_cells(row: KernelRow) -> KernelCells:
    """The roofline columns of one kernel row (with findings)."""
    pct = row.ceiling_pct
    return {
        "achieved_bw": fmt_rate(row.achieved_bytes_per_s, "B"),
        "achieved_flops": fmt_rate(row.achieved_flops_per_s, "FLOP")
        if row.achieved_flops_per_s is not None
        else ("FLOPs unknown" if row.bound else "-"),
        "bound": BOUND_NAMES.get(str(row.bound), "-"),
        "ceiling_pct": "-" if pct is None else (f"{pct:.0f}%" if pct >= 10 else f"{pct:.2g}%"),
        "over": bool(pct is not None and pct > 100.0),
        "note": str(row.roofline_note or ""),
    }


def floor_cells(mode: ModeResult) -> FloorCells:
    """The floor and "x of the floor" of a mode, or why there is none."""
    r = mode.roofline
    if r is None or not r.to_json():
        return {"floor": "n/a", "x_of_floor": "n/a", "inconsistent": ""}
    ratio = r.x_of_floor
    return {
        "floor": fmt_ms(r.floor_ms),
        "x_of_floor": "n/a" if ratio is None else f"{ratio:.2f}x of the floor",
        "inconsistent": r.note if r.consistent is False else "",
    }


def peak_cells(mode: ModeResult, eager: ModeResult | None) -> dict[str, str]:
    """Peak memory of a mode and its compression ratio (eager peak / mode peak)."""
    peak = None if mode.peak_memory is None else mode.peak_memory.bytes
    base = None if eager is None or eager.peak_memory is None else eager.peak_memory.bytes
    ratio = "-"
    if peak and base and isinstance(eager, OkMode):
        ratio = f"{base / peak:.2f}"
    return {"peak": fmt_bytes(peak), "compression": ratio}


def peak_method(run: Run) -> str:
    """How peak memory was measured, from the first mode that has it."""
    for mode in run.modes.values():
        p = mode.peak_memory
        if p:
            return (
                f"{p.source}: {p.scope}. Compression ratio = eager's peak / "
                "the mode's peak (above 1: the mode needs less memory)."
            )
    return "not measured in this record."


def chart_points(run: Run) -> list[Point]:
    """One point per kernel row (or shared-bytes group) with modeled bytes and profiler time."""
    points = []
    for name, mode in run.ok_modes.items():
        seen: set[str] = set()
        for row in mode.kernels.table:
            bw, time_us = row.achieved_bytes_per_s, row.time_us_per_step
            if bw is None or not time_us:
                continue
            shared = (row.bytes_shared_by or 0) > 1
            if shared and row.bytes_op in seen:
                continue  # the group is one point
            seen.add(str(row.bytes_op))
            traffic = (row.bytes_read or 0) + (row.bytes_written or 0)
            time_s = traffic / bw if bw else time_us / 1e6
            fl = row.achieved_flops_per_s
            points.append(Point(name, traffic, None if fl is None else fl * time_s, time_s))
    return points
