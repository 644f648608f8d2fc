"""View-model pieces of the roofline, the latency floor and peak memory: plain strings the HTML
template and the Markdown renderer lay out, and the points of the roofline chart."""

from __future__ import annotations

from typing import Any

from profreport.analysis.roofline import BOUND_NAMES, Roofs
from profreport.format import fmt_bytes, fmt_ms
from profreport.render.roofline_chart import Point


def fmt_rate(value: float | None, unit: str) -> str:
    """`value` per second with an SI prefix: fmt_rate(2.6e10, "B") -> "26.0 GB/s"."""
    if value is None:
        return "-"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.1f} {prefix}{unit}/s"
    return f"{value:.0f} {unit}/s"


def _ceiling_text(c: dict[str, Any], unit: str) -> str:
    return (
        f"{fmt_rate(c['value'], unit)} measured (best of {c.get('samples', '?')}; median "
        f"{fmt_rate(c.get('median'), unit)}, worst {fmt_rate(c.get('worst'), unit)}, spread "
        f"{c.get('spread_pct', 0):.1f}%): {c.get('method', '')}"
    )


def ceiling_rows(record: dict[str, Any]) -> list[tuple[str, str]]:
    """Rows of the environment table: each measured ceiling with its method and spread."""
    c = record.get("ceilings")
    if not isinstance(c, dict):
        return [("ceilings", "not measured (record written before ceilings were measured)")]
    if Roofs.from_record(c) is None:
        return [("ceilings", f"not available: {c.get('reason') or 'no measurement'}")]
    rows = [("memory bandwidth", _ceiling_text(c["memory_bandwidth"], "B"))]
    if c.get("cache_bandwidth"):
        rows.append(("in-cache bandwidth", _ceiling_text(c["cache_bandwidth"], "B")))
    rows.append(("matmul rate", _ceiling_text(c["matmul_rate"], "FLOP")))
    when = c.get("measured_utc") or "?"
    cached = " (reused from the per-machine cache)" if c.get("cached") else ""
    share = c.get("other_busy_share")
    if share is not None:
        cached += (
            f"; other processes used {share:.0%} of the CPU time while measuring "
            f"({c.get('attempts', 1)} attempt(s), each ceiling the best of them)"
        )
    rows.append(
        (
            "ceilings measured",
            f"{when} UTC{cached}; {c.get('timer', '')}; last-level cache "
            f"{fmt_bytes(c.get('last_level_cache_bytes'))} ({c.get('cache_sizes_from', '?')})",
        )
    )
    return rows


def kernel_cells(row: dict[str, Any]) -> dict[str, Any]:
    """The roofline columns of one kernel row (with findings)."""
    pct = row.get("ceiling_pct")
    return {
        "achieved_bw": fmt_rate(row.get("achieved_bytes_per_s"), "B"),
        "achieved_flops": fmt_rate(row.get("achieved_flops_per_s"), "FLOP")
        if row.get("achieved_flops_per_s") is not None
        else ("FLOPs unknown" if row.get("bound") else "-"),
        "bound": BOUND_NAMES.get(str(row.get("bound")), "-"),
        "ceiling_pct": "-" if pct is None else (f"{pct:.0f}%" if pct >= 10 else f"{pct:.2g}%"),
        "over": bool(pct is not None and pct > 100.0),
        "note": str(row.get("roofline_note") or ""),
    }


def floor_cells(mode: dict[str, Any]) -> dict[str, Any]:
    """The floor and "x of the floor" of a mode, or why there is none."""
    r = mode.get("roofline")
    if not r:
        return {"floor": "n/a", "x_of_floor": "n/a", "inconsistent": "", "note": ""}
    ratio = r.get("x_of_floor")
    without = r.get("kernels_without_bytes") or 0
    note = f"{without} kernel(s) without modeled bytes add nothing" if without else ""
    return {
        "floor": fmt_ms(r.get("floor_ms")),
        "x_of_floor": "n/a" if ratio is None else f"{ratio:.2f}x of the floor",
        "inconsistent": (r.get("note") or "") if r.get("consistent") is False else "",
        "note": note,
    }


def peak_cells(mode: dict[str, Any], eager: dict[str, Any] | None) -> dict[str, str]:
    """Peak memory of a mode and its compression ratio (eager peak / mode peak)."""
    peak = (mode.get("peak_memory") or {}).get("bytes")
    base = ((eager or {}).get("peak_memory") or {}).get("bytes")
    ratio = "-"
    if peak and base and (eager or {}).get("status") == "ok":
        ratio = f"{base / peak:.2f}"
    return {
        "peak": fmt_bytes(peak) if peak is not None else "n/a",
        "compression": ratio,
        "source": (mode.get("peak_memory") or {}).get("source", ""),
    }


def peak_method(record: dict[str, Any]) -> str:
    """How peak memory was measured, from the first mode that has it."""
    for mode in record["modes"].values():
        p = mode.get("peak_memory")
        if p:
            return (
                f"{p.get('source', '')}: {p.get('scope', '')}. Compression ratio = eager's peak / "
                "the mode's peak (above 1: the mode needs less memory)."
            )
    return "not measured in this record."


def chart_points(record: dict[str, Any]) -> list[Point]:
    """One point per kernel row (or shared-bytes group) with modeled bytes and profiler time."""
    points = []
    for name, mode in record["modes"].items():
        if mode.get("status") != "ok":
            continue
        seen: set[str] = set()
        for row in mode["kernels"]["table"]:
            bw, time_us = row.get("achieved_bytes_per_s"), row.get("time_us_per_step")
            if bw is None or not time_us:
                continue
            shared = (row.get("bytes_shared_by") or 0) > 1
            if shared and row.get("bytes_op") in seen:
                continue  # the group is one point
            seen.add(str(row.get("bytes_op")))
            traffic = row["bytes_read"] + row["bytes_written"]
            time_s = traffic / bw if bw else time_us / 1e6
            fl = row.get("achieved_flops_per_s")
            points.append(Point(name, traffic, None if fl is None else fl * time_s, time_s))
    return points
