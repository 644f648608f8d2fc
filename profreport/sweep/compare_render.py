"""Renderers of a sweep comparison (Markdown, HTML): each point's run comparison laid out by the
run comparison's own view-model, under the point's label. They are the renderer registry's
SWEEP_COMPARISON entries (profreport.render.registry; its JSON: registry.render_json)."""

from __future__ import annotations

from typing import Any

from profreport.format import md_cell, md_line
from profreport.render import compare as run_compare
from profreport.render.jinja import render_page
from profreport.sweep.compare import SweepComparison


def _outcome(c: SweepComparison) -> run_compare.Outcome:
    return run_compare.gate_outcome(len(c.regressions), len(c.inconclusive), c.thresholds)


def render_markdown(c: SweepComparison) -> str:
    outcome = _outcome(c)
    lines = [
        f"## {md_line(f'profreport compare: sweep {c.base} → {c.head}')}",
        "",
        f"{outcome.mark} **{md_cell(outcome.text)}** over {len(c.points)} matched points",
        "",
    ]
    for p in c.points:
        lines += [f"#### {md_line(p.point)}", ""]
        if p.comparison is not None:
            lines.append(run_compare.render_markdown(p.comparison))
        else:
            lines += [f"{md_cell(p.base_status)} → {md_cell(p.head_status)}: {md_cell(p.note)}", ""]
    lines += [f"- ❌ {md_cell(r.message)}" for r in c.regressions]
    lines += run_compare.only_in_lines("; ".join(c.only_in_base), "; ".join(c.only_in_head))
    return "\n".join(lines) + "\n"


def build_view(c: SweepComparison) -> dict[str, Any]:
    return {
        "title": f"profreport compare: sweep {c.base} → {c.head}",
        "outcome": _outcome(c).text,
        "outcome_class": _outcome(c).css,
        "points": [
            {
                "label": p.point,
                "status": f"{p.base_status} → {p.head_status}",
                "note": p.note,
                "view": run_compare.build_compare_view(p.comparison) if p.comparison else None,
            }
            for p in c.points
        ],
        "regressions": [r.message for r in c.regressions],
        "only_in_base": "; ".join(c.only_in_base),
        "only_in_head": "; ".join(c.only_in_head),
    }


def render_html(c: SweepComparison) -> str:
    return render_page("sweep_compare.html.j2", **build_view(c))
