"""Tabular renderers: a run's kernel tables and per-mode summary as pandas DataFrames / CSV."""

from __future__ import annotations

from typing import Any

import pandas as pd

from profreport.record.model import KernelRow, ModeResult, OkMode, Run
from profreport.render.module_view import ROOT_LABEL

KERNEL_COLUMNS = [
    "name",
    "kind",
    "calls",
    "calls_per_step",
    "time_us",
    "time_us_per_step",
    "launched_by",
    "source",
    # modeled bytes and FLOPs, and the roofline against the measured ceilings (findings: empty
    # when the record has none)
    "bytes_read",
    "bytes_written",
    "bytes_shared_by",
    "flops",
    "flops_per_byte",
    "achieved_bytes_per_s",
    "achieved_flops_per_s",
    "bound",
    "ceiling_pct",
    "roofline_note",
    # where in the model (findings; space-separated named_modules() paths and file:line)
    "modules",
    "source_lines",
]

SUMMARY_COLUMNS = [
    "mode",
    "status",
    "kernels_per_step",
    "launches_per_step",
    "bytes_read",
    "bytes_written",
    "bytes_partial",
    "latency_median_ms",
    "latency_iqr_ms",
    "latency_n",
    "speedup_vs_eager",
    "latency_floor_ms",
    "x_of_floor",
    "floor_consistent",
    "peak_memory_bytes",
    "memory_compression",
    "compile_s",
    "verdict",
]


def _ok_mode(run: Run, mode: str) -> OkMode:
    modes = run.modes
    if mode not in modes:
        raise KeyError(f"mode {mode!r} is not in this run (have {', '.join(modes)})")
    entry = modes[mode]
    if not isinstance(entry, OkMode):
        raise ValueError(f"mode {mode!r} has no kernel table: {entry.error or entry.status}")
    return entry


def _kernel_record(row: KernelRow) -> dict[str, object]:
    record = {column: getattr(row, column) for column in KERNEL_COLUMNS}
    for column in ("modules", "source_lines"):
        places = record[column]
        if isinstance(places, tuple):  # one cell; the model's own path "" shown by its label
            record[column] = " ".join(p or ROOT_LABEL for p in places)
    return record


def kernel_frame(run: Run, mode: str) -> pd.DataFrame:
    """One row per distinct kernel of `mode`, as in `modes.<mode>.kernels.table`."""
    rows = _ok_mode(run, mode).kernels.table
    return pd.DataFrame([_kernel_record(r) for r in rows], columns=KERNEL_COLUMNS)


def kernel_table(run: Run) -> pd.DataFrame:
    """The kernel tables of every mode that ran, stacked, with a leading `mode` column."""
    frames = [kernel_frame(run, name).assign(mode=name) for name in run.ok_modes]
    if not frames:
        return pd.DataFrame(columns=["mode", *KERNEL_COLUMNS])
    return pd.concat(frames, ignore_index=True)[["mode", *KERNEL_COLUMNS]]


# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection), and kernel
# and operator names come from the model and its trace.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _inert(value: Any) -> Any:
    return "'" + value if isinstance(value, str) and value.startswith(_FORMULA_START) else value


def kernel_csv(run: Run, mode: str) -> str:
    """`kernel_frame` as CSV for spreadsheets: a text cell that would start a formula gets a
    leading `'` (the usual neutraliser, shown by spreadsheets as text). No real kernel or op name
    starts so; run.json and the DataFrames keep every name exactly."""
    frame = kernel_frame(run, mode)
    for column in frame.columns:
        frame[column] = frame[column].map(_inert)
    csv: str = frame.to_csv(index=False)
    return csv


def _peak(mode: ModeResult) -> int | None:
    return None if mode.peak_memory is None else mode.peak_memory.bytes


def summary_frame(run: Run) -> pd.DataFrame:
    """One row per mode: the numbers of the summary table, unformatted."""
    rows = []
    eager = run.modes.get("eager")
    eager_peak = _peak(eager) if isinstance(eager, OkMode) else None
    for name, m in run.modes.items():
        row: dict[str, object] = {c: None for c in SUMMARY_COLUMNS}
        row.update(mode=name, status=m.status, verdict=m.verdict)
        if isinstance(m, OkMode):
            lat, sp, floor, peak = m.latency_ms, m.speedup_vs_eager, m.roofline, _peak(m)
            row.update(
                kernels_per_step=m.kernels.per_step,
                launches_per_step=m.kernels.launches,
                bytes_read=m.bytes.read,
                bytes_written=m.bytes.written,
                bytes_partial=bool(m.bytes.not_modeled),
                latency_median_ms=None if lat is None else lat.median,
                latency_iqr_ms=None if lat is None else lat.iqr,
                latency_n=None if lat is None else lat.n,
                speedup_vs_eager=sp.median if sp else None,
                compile_s=m.compile_s,
                latency_floor_ms=None if floor is None else floor.floor_ms,
                x_of_floor=None if floor is None else floor.x_of_floor,
                floor_consistent=None if floor is None else floor.consistent,
                peak_memory_bytes=peak,
                memory_compression=eager_peak / peak if eager_peak and peak else None,
            )
        rows.append(row)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
