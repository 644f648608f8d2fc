"""HTML renderer: one self-contained page (inline CSS and SVG, no network, no scripts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from markupsafe import Markup

from profreport.record.model import Run
from profreport.render import charts
from profreport.render.jinja import render_page
from profreport.render.module_view import module_tree_view
from profreport.render.roofline_chart import roofline_chart
from profreport.render.roofline_view import chart_points
from profreport.render.time_view import chart_series
from profreport.render.viewmodel import build_view

if TYPE_CHECKING:
    from profreport.analysis.budget import BudgetCheck


def build_charts(run: Run) -> dict[str, Markup]:
    ok = run.ok_modes
    if not ok:
        return {}
    names = list(ok)
    kernel_label = "device kernels" if run.device.type == "cuda" else "CPU kernels"
    kernels = [m.kernels.per_step for m in ok.values()]
    read = [m.bytes.read / 2**20 for m in ok.values()]
    written = [m.bytes.written / 2**20 for m in ok.values()]
    out = {
        "kernels": charts.bar_chart(names, kernels, f"{kernel_label} per step", "count (profiler)"),
        "bytes": charts.stacked_bytes_chart(names, read, written, "Memory traffic per step"),
    }
    timed = {n: m.latency_ms for n, m in ok.items() if m.latency_ms is not None}
    if timed:
        lat = timed.values()
        out["latency"] = charts.latency_chart(
            list(timed), [t.median for t in lat], [t.p10 for t in lat], [t.p90 for t in lat]
        )
    series = chart_series(run)
    if series is not None:
        out["time"] = charts.time_breakdown_chart(*series)
    points = chart_points(run)
    if run.roofs is not None and points:
        out["roofline"] = roofline_chart(points, run.roofs)
    # The only unescaped content on the page: each SVG passed charts.checked_svg (drawing
    # elements only, no handlers, no outside links) and its labels are matplotlib-escaped text.
    return {k: Markup(v) for k, v in out.items()}


def render(run: Run, budget: BudgetCheck | None = None) -> str:
    """The report page of a run with findings; `budget`'s check opens it."""
    from profreport.render.budget import budget_view

    return render_page(
        "report.html.j2",
        **build_view(run),
        charts=build_charts(run),
        module_tree=module_tree_view(run),
        budget=None if budget is None else budget_view(budget),
    )
