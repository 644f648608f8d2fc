"""Charts as inline SVG strings (matplotlib, no network, no JavaScript).

The report inlines these strings unescaped, so every chart is checked before it leaves here: only
drawing elements, no event-handler attributes, no link outside the SVG. Labels are mode names from
the record; matplotlib escapes text, and math parsing is off so a `$` in a label stays text.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from profreport.render.palette import mode_color

plt.rcParams.update(
    {"svg.fonttype": "none", "font.size": 9, "svg.hashsalt": "profreport", "text.parse_math": False}
)

# No Dublin Core block: an inline chart needs none, and it would be one more thing to vet.
_NO_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}


def figure_svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata=_NO_METADATA)
    plt.close(fig)
    text = buf.getvalue()
    return checked_svg(text[text.index("<svg") :])  # no XML prologue or DOCTYPE inline


# What matplotlib's SVG backend writes for bars, text, legends and error bars; none of these can
# run script or fetch anything.
_SVG_ELEMENTS = frozenset(
    [
        "svg",
        "g",
        "defs",
        "path",
        "rect",
        "circle",
        "ellipse",
        "line",
        "polyline",
        "polygon",
        "text",
        "tspan",
        "use",
        "clipPath",
        "pattern",
        "style",
    ]
)
_NONLOCAL_URL = re.compile(r"url\(\s*(?!['\"]?#)")


def checked_svg(svg: str) -> str:
    """Return `svg` unchanged if it holds only drawing elements and local references; raise
    ValueError otherwise (the HTML renderer inlines it without escaping)."""
    for element in ET.fromstring(svg).iter():
        tag = element.tag.rpartition("}")[2]
        if tag not in _SVG_ELEMENTS:
            raise ValueError(f"unexpected <{tag}> element in a chart")
        if tag == "style" and _NONLOCAL_URL.search(element.text or ""):
            raise ValueError("external reference in a chart's style sheet")
        for attribute, value in element.attrib.items():
            name = attribute.rpartition("}")[2].lower()
            if name.startswith("on"):
                raise ValueError(f"event-handler attribute {name!r} in a chart")
            if (name == "href" and not value.startswith("#")) or _NONLOCAL_URL.search(value):
                raise ValueError(f"external reference {value!r} in a chart")
    return svg


def axes(title: str, ylabel: str, figsize: tuple[float, float] = (4.2, 2.6)) -> tuple[Figure, Axes]:
    """One chart's figure and axes: titled, its y axis labelled, no top or right spine."""
    fig, ax = plt.subplots(figsize=figsize)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.spines[["top", "right"]].set_visible(False)
    return fig, ax


def bar_chart(modes: Sequence[str], values: Sequence[float], title: str, ylabel: str) -> str:
    fig, ax = axes(title, ylabel)
    bars = ax.bar(modes, values, color=[mode_color(m) for m in modes])
    ax.bar_label(bars, labels=[f"{v:g}" for v in values], fontsize=8)
    return figure_svg(fig)


def stacked_bytes_chart(
    modes: Sequence[str], read_mib: Sequence[float], written_mib: Sequence[float], title: str
) -> str:
    fig, ax = axes(title, "MiB per step (modeled)")
    ax.bar(modes, read_mib, color="#1f77b4", label="read")
    ax.bar(modes, written_mib, bottom=read_mib, color="#ff7f0e", label="written")
    for i, (r, w) in enumerate(zip(read_mib, written_mib, strict=True)):
        ax.text(i, r + w, f"{r + w:.1f}", ha="center", va="bottom", fontsize=8)
    ax.legend(frameon=False, fontsize=8)
    return figure_svg(fig)


def latency_chart(
    modes: Sequence[str], median: Sequence[float], p10: Sequence[float], p90: Sequence[float]
) -> str:
    fig, ax = axes("Latency: median, whiskers p10-p90", "ms per call (measured)")
    lower = [m - lo for m, lo in zip(median, p10, strict=True)]
    upper = [hi - m for m, hi in zip(median, p90, strict=True)]
    ax.bar(modes, median, color=[mode_color(m) for m in modes])
    ax.errorbar(modes, median, yerr=[lower, upper], fmt="none", ecolor="black", capsize=3)
    return figure_svg(fig)


# One colour per part of a step, in stacking order (kernels darkest at the bottom).
_PART_COLORS = ("#1f4e79", "#e69f00", "#9467bd", "#bdbdbd")


def time_breakdown_chart(modes: Sequence[str], parts: Mapping[str, Sequence[float]]) -> str:
    """A stacked bar per mode: where its profiled step's time went, parts bottom up."""
    fig, ax = axes("Where a profiled step's time goes", "ms per step (profiled)", (4.8, 2.9))
    bottom = [0.0] * len(modes)
    for (label, values), color in zip(parts.items(), _PART_COLORS, strict=False):
        ax.bar(modes, values, bottom=bottom, color=color, label=label)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    for i, total in enumerate(bottom):
        ax.text(i, total, f"{total:.3g}", ha="center", va="bottom", fontsize=8)
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return figure_svg(fig)
