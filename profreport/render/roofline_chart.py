"""The roofline chart of a run: every timed kernel of every mode against the measured ceilings.

Two log-log panels in one SVG. Left, the classic roofline: arithmetic intensity (modeled FLOPs /
modeled bytes) against achieved FLOP/s, under the matmul-rate roof and the two bandwidth roofs.
Right, the kernels whose FLOPs are unknown (no flop-counter formula): modeled bytes per step
against achieved bandwidth, under the bandwidth roofs. Each point is one kernel (or one group of
kernels sharing an operation's bytes), its area proportional to its time per step, its colour its
mode's. Pure drawing: the points come from the record's roofline findings.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from profreport.record.model import Roofs
from profreport.render.charts import figure_svg
from profreport.render.palette import mode_color


@dataclass(frozen=True)
class Point:
    mode: str
    traffic: float  # modeled bytes per step
    flops: float | None
    time_s: float

    @property
    def intensity(self) -> float | None:
        return self.flops / self.traffic if self.flops and self.traffic else None


def _scatter(
    ax: Axes,
    points: Sequence[Point],
    x: Callable[[Point], float],
    y: Callable[[Point], float],
    sizes: dict[int, float],
) -> None:
    for mode in dict.fromkeys(p.mode for p in points):
        mine = [p for p in points if p.mode == mode]
        ax.scatter(
            [x(p) for p in mine],
            [y(p) for p in mine],
            s=[sizes[id(p)] for p in mine],
            color=mode_color(mode),
            alpha=0.65,
            edgecolors="black",
            linewidths=0.4,
        )


def _plain_log_ticks(ax: Axes) -> None:
    """Log axes labelled as plain numbers (math text is off, so no 10^n markup)."""
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10))
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())


def _roof(
    ax: Axes, lo: float, hi: float, bytes_per_s: float, flops_per_s: float, style: str
) -> None:
    """One roof in GFLOP/s over intensity lo..hi: bandwidth x intensity up to the ridge, then
    the matmul rate."""
    grid = [lo, flops_per_s / bytes_per_s, hi]
    ax.plot(grid, [min(flops_per_s, x * bytes_per_s) / 1e9 for x in grid], "#444", lw=1, ls=style)


def roofline_chart(points: Sequence[Point], roofs: Roofs) -> str:
    """The SVG of `points` (kernels with time and modeled bytes) under `roofs`."""
    with_flops = [p for p in points if p.intensity is not None]
    without = [p for p in points if p.intensity is None and p.traffic > 0]
    longest = max((p.time_s for p in points), default=1.0)
    sizes = {id(p): 12.0 + 250.0 * p.time_s / longest for p in points}
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8), gridspec_kw={"wspace": 0.35})
    xs = [p.intensity for p in with_flops if p.intensity is not None]
    lo = min([0.01, *xs]) / 2
    hi = max([1000.0, *xs]) * 2
    _roof(left, lo, hi, roofs.memory_bytes_per_s, roofs.flops_per_s, "-")
    if roofs.cache_bytes_per_s:
        _roof(left, lo, hi, roofs.cache_bytes_per_s, roofs.flops_per_s, "--")
    # every point of with_flops has FLOPs, so an intensity
    _scatter(
        left,
        with_flops,
        lambda p: p.intensity or 0.0,
        lambda p: (p.flops or 0.0) / p.time_s / 1e9,
        sizes,
    )
    left.set(xscale="log", yscale="log", xlim=(lo, hi))
    left.set_title("Kernels with modeled FLOPs")
    left.set_xlabel("FLOP / byte (modeled)")
    left.set_ylabel("GFLOP/s (achieved: modeled FLOPs / profiler time)")
    right.axhline(roofs.memory_bytes_per_s / 1e9, color="#444", lw=1, ls="-")
    if roofs.cache_bytes_per_s:
        right.axhline(roofs.cache_bytes_per_s / 1e9, color="#444", lw=1, ls="--")
    _scatter(
        right, without, lambda p: p.traffic / 2**20, lambda p: p.traffic / p.time_s / 1e9, sizes
    )
    right.set(xscale="log", yscale="log")
    if without:  # whole decades, so that a log axis whose data spans less than one has ticks
        decades = [math.floor(math.log10(p.traffic / 2**20)) for p in without]
        right.set_xlim(10.0 ** min(decades), 10.0 ** (max(decades) + 1))
    right.set_title("Kernels with FLOPs unknown")
    right.set_xlabel("MiB per step (modeled)")
    right.set_ylabel("GB/s (achieved)")
    for ax in (left, right):
        ax.spines[["top", "right"]].set_visible(False)
        _plain_log_ticks(ax)
    modes = list(dict.fromkeys(p.mode for p in points))
    handles = [
        Line2D([], [], marker="o", ls="", color=mode_color(m), markeredgecolor="black", label=m)
        for m in modes
    ]
    handles += [
        Line2D([], [], color="#444", lw=1, label="memory copy roof (measured)"),
        Line2D([], [], color="#444", lw=1, ls="--", label="in-cache copy roof (measured)"),
    ]
    fig.legend(
        handles=handles, loc="lower center", ncol=min(len(handles), 5), frameon=False, fontsize=7
    )
    fig.subplots_adjust(bottom=0.3)
    fig.suptitle("Roofline: point area = time per step (profiler), colour = mode", fontsize=9)
    return figure_svg(fig)
