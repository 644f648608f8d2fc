"""`profreport sweep`: one `generate` run per point of a grid (models x batch sizes x sequence
lengths x dtypes), run by a local or a Ray executor, gathered into one sweep record.

- `grid`: the sweep's specification (flags or sweep.toml) and its points.
- `model`: the sweep record (`profreport.sweep/2`, sweep.json) as frozen dataclasses (`Sweep`,
  `SweepRow`; its grid is `grid.SweepSpec`, its points `grid.Point`): one row per point and mode,
  pointing at the run folders; read back for `--resume` and `compare`.
- `summary`: a pure analysis of the rows (geometric-mean speedup, pass rate, compile time,
  compression ratio; the series the charts draw).
- `local` / `ray_executor`: where the points run; both hand back the point as it ended.
- `render`: sweep.html and sweep.md; `compare`: two sweeps gated point by point.
- `lifecycle`: a sweep as a library (`run_sweep`, `SweepRun`: new or resumed, each point
  recorded, saved); the command's edge (arguments, progress, exit codes) is `profreport.cli.sweep`.
"""

from __future__ import annotations

from profreport.render.registry import SWEEP, SWEEP_COMPARISON, Renderer, register
from profreport.sweep.grid import SweepSpec
from profreport.sweep.lifecycle import SweepRun, run_sweep

__all__ = ["SweepRun", "SweepSpec", "run_sweep"]

# This package's renderers, in the one registry (render sits below sweep and names none of them):
# a sweep record typed (profreport.sweep.model.Sweep), two sweeps compared
# (profreport.sweep.compare.SweepComparison).
for _renderer in (
    Renderer("json", SWEEP, "sweep.json", "profreport.render.registry:render_json"),
    Renderer("html", SWEEP, "sweep.html", "profreport.sweep.render:render_html"),
    Renderer("md", SWEEP, "sweep.md", "profreport.sweep.render:render_markdown"),
    Renderer(
        "md", SWEEP_COMPARISON, "comparison.md", "profreport.sweep.compare_render:render_markdown"
    ),
    Renderer("json", SWEEP_COMPARISON, "comparison.json", "profreport.render.registry:render_json"),
    Renderer(
        "html", SWEEP_COMPARISON, "comparison.html", "profreport.sweep.compare_render:render_html"
    ),
):
    register(_renderer)
