"""Sweep charts as inline SVG: one line per series over the swept axis, with an optional band
(a 95% interval, or p10-p90). Drawn like render/charts.py (matplotlib, checked before inlining)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from profreport.render.charts import axes, figure_svg
from profreport.render.palette import mode_color

_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_STYLES = ("-", "--", ":", "-.")


@dataclass(frozen=True)
class Line:
    label: str
    mode: str
    x: Sequence[int]  # positions on the axis (indexes into the tick labels)
    y: Sequence[float]
    low: Sequence[float] | None = None  # band, where there is one
    high: Sequence[float] | None = None


def line_chart(
    lines: Sequence[Line],
    ticks: Sequence[str],
    title: str,
    xlabel: str,
    ylabel: str,
    reference: float | None = None,
) -> str:
    fig, ax = axes(title, ylabel, (4.6, 3.0))
    seen: dict[str, int] = {}
    for line in lines:
        n = seen[line.mode] = seen.get(line.mode, -1) + 1
        color = mode_color(line.mode)
        marker, style = _MARKERS[n % len(_MARKERS)], _STYLES[n % len(_STYLES)]
        ax.plot(line.x, line.y, color=color, marker=marker, linestyle=style, label=line.label)
        if line.low is not None and line.high is not None:
            ax.fill_between(line.x, line.low, line.high, color=color, alpha=0.18, linewidth=0)
    if reference is not None:
        ax.axhline(reference, color="#888", linewidth=0.8, linestyle=":")
    ax.set_xticks(range(len(ticks)), list(ticks))
    ax.set_xlim(-0.3, max(len(ticks) - 0.7, 0.3))
    ax.set_xlabel(xlabel)
    if lines:
        ax.legend(frameon=False, fontsize=7)
    return figure_svg(fig)
