"""`profreport sweep`: one `generate` run per point of a grid (models x batch sizes x sequence
lengths x dtypes), run by a local or a Ray executor, gathered into one sweep record.

- `grid`: the sweep's specification (flags or sweep.toml) and its points.
- `document`: the sweep record (`profreport.sweep/1`, sweep.json): one row per point and mode,
  pointing at the run folders; read back for `--resume` and `compare`.
- `model`: that record as frozen dataclasses (`Sweep`, `SweepPoint`, `SweepRow`; its grid is
  `grid.SweepSpec`) with `from_json`/`to_json`; readers use attributes.
- `summary`: a pure analysis of the rows (geometric-mean speedup, pass rate, compile time,
  compression ratio; the series the charts draw).
- `local` / `ray_executor`: where the points run; both hand back a `PointOutcome`.
- `render`: sweep.html and sweep.md; `compare`: two sweeps gated point by point.
- the command's edge (arguments, progress, Ctrl-C, files, exit codes) is `profreport.cli.sweep`.
"""
