"""HTML renderer: one self-contained page (inline CSS and SVG, no network, no scripts)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from profreport.analysis.roofline import Roofs
from profreport.render import charts
from profreport.render.jinja import render_page
from profreport.render.roofline_chart import roofline_chart
from profreport.render.roofline_view import chart_points
from profreport.render.viewmodel import build_view


def build_charts(record: dict[str, Any]) -> dict[str, Markup]:
    ok = {n: m for n, m in record["modes"].items() if m["status"] == "ok"}
    if not ok:
        return {}
    names = list(ok)
    kernel_label = "device kernels" if record["device"].get("type") == "cuda" else "CPU kernels"
    out = {
        "kernels": charts.bar_chart(
            names,
            [m["kernels"]["per_step"] for m in ok.values()],
            f"{kernel_label} per step",
            "count (profiler)",
        ),
        "bytes": charts.stacked_bytes_chart(
            names,
            [m["bytes"]["read"] / 2**20 for m in ok.values()],
            [m["bytes"]["written"] / 2**20 for m in ok.values()],
            "Memory traffic per step",
        ),
    }
    timed = {n: m["latency_ms"] for n, m in ok.items() if m.get("latency_ms")}
    if timed:
        out["latency"] = charts.latency_chart(
            list(timed),
            [t["median"] for t in timed.values()],
            [t["p10"] for t in timed.values()],
            [t["p90"] for t in timed.values()],
        )
    roofs = Roofs.from_record(record.get("ceilings"))
    points = chart_points(record)
    if roofs is not None and points:
        out["roofline"] = roofline_chart(points, roofs)
    # The only unescaped content on the page: each SVG passed charts.checked_svg (drawing
    # elements only, no handlers, no outside links) and its labels are matplotlib-escaped text.
    return {k: Markup(v) for k, v in out.items()}


def render(record: dict[str, Any]) -> str:
    view = build_view(record)
    view["charts"] = build_charts(record)
    return render_page("report.html.j2", **view)
