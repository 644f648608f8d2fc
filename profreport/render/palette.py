"""The colour each execution mode has in the charts: the built-in modes' own, and for any other
mode (one registered later, or a foreign record's) a colour picked from its name, the same on
every run and machine, so a mode keeps its colour from one report to the next."""

from __future__ import annotations

import hashlib

MODE_COLORS = {
    "eager": "#7f7f7f",
    "script": "#1f77b4",
    "trace": "#17becf",
    "optimize": "#9467bd",
    "compile": "#d62728",
    "export": "#8c564b",
    "compile-max-autotune": "#ff7f0e",
    "compile-cudagraphs": "#e377c2",
    "compile-dynamic": "#bcbd22",
    "compile-fullgraph": "#98df8a",
}
# matplotlib's tab20 less the colours above: what another mode's name picks from
OTHER_COLORS = (
    "#2ca02c",
    "#aec7e8",
    "#ffbb78",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#c7c7c7",
    "#dbdb8d",
    "#9edae5",
)


def mode_color(name: str) -> str:
    if name in MODE_COLORS:
        return MODE_COLORS[name]
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).digest()
    return OTHER_COLORS[int.from_bytes(digest[:4], "big") % len(OTHER_COLORS)]


# The headline's tones: better than eager, worse (or failed, or output differs), no change, and
# nothing to say (baseline, not checked, inconclusive). Text colours with at least 4.5:1 contrast
# on white (WCAG AA), each paired with a light background for the cell.
TONE_COLORS = {
    "good": "#116329",
    "good_bg": "#e6f4ea",
    "bad": "#b00020",
    "bad_bg": "#fdecee",
    "neutral": "#1d1d1f",
    "neutral_bg": "#ffffff",
    "muted": "#595959",
    "muted_bg": "#f4f4f6",
}
