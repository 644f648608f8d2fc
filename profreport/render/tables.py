"""Tabular renderers: a run record's kernel tables and per-mode summary as pandas DataFrames / CSV."""

from __future__ import annotations

from typing import Any

import pandas as pd

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


def _ok_mode(record: dict[str, Any], mode: str) -> dict[str, Any]:
    modes = record["modes"]
    if mode not in modes:
        raise KeyError(f"mode {mode!r} is not in this run (have {', '.join(modes)})")
    entry = modes[mode]
    if entry["status"] != "ok":
        raise ValueError(
            f"mode {mode!r} has no kernel table: {entry.get('error') or entry['status']}"
        )
    return entry


def kernel_frame(record: dict[str, Any], mode: str) -> pd.DataFrame:
    """One row per distinct kernel of `mode`, as in `modes.<mode>.kernels.table`."""
    rows = _ok_mode(record, mode)["kernels"]["table"]
    return pd.DataFrame(
        [{c: r.get(c) for c in KERNEL_COLUMNS} for r in rows], columns=KERNEL_COLUMNS
    )


def kernel_table(record: dict[str, Any]) -> pd.DataFrame:
    """The kernel tables of every mode that ran, stacked, with a leading `mode` column."""
    frames = [
        kernel_frame(record, name).assign(mode=name)
        for name, m in record["modes"].items()
        if m["status"] == "ok"
    ]
    if not frames:
        return pd.DataFrame(columns=["mode", *KERNEL_COLUMNS])
    out = pd.concat(frames, ignore_index=True)
    return out[["mode", *KERNEL_COLUMNS]]


# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection), and kernel
# and operator names come from the model and its trace.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _inert(value: Any) -> Any:
    return "'" + value if isinstance(value, str) and value.startswith(_FORMULA_START) else value


def kernel_csv(record: dict[str, Any], mode: str) -> str:
    """`kernel_frame` as CSV for spreadsheets: a text cell that would start a formula gets a
    leading `'` (the usual neutraliser, shown by spreadsheets as text). No real kernel or op name
    starts so; run.json and the DataFrames keep every name exactly."""
    frame = kernel_frame(record, mode)
    for column in frame.columns:
        frame[column] = frame[column].map(_inert)
    return frame.to_csv(index=False)


def summary_frame(record: dict[str, Any]) -> pd.DataFrame:
    """One row per mode: the numbers of the summary table, unformatted."""
    rows = []
    eager = record["modes"].get("eager") or {}
    eager_peak = (
        (eager.get("peak_memory") or {}).get("bytes") if eager.get("status") == "ok" else None
    )
    for name, m in record["modes"].items():
        row: dict[str, Any] = {c: None for c in SUMMARY_COLUMNS}
        row.update(mode=name, status=m["status"], verdict=m.get("verdict"))
        if m["status"] == "ok":
            lat = m.get("latency_ms") or {}
            sp = m.get("speedup_vs_eager")
            row.update(
                kernels_per_step=m["kernels"]["per_step"],
                launches_per_step=m["kernels"].get("launches"),
                bytes_read=m["bytes"]["read"],
                bytes_written=m["bytes"]["written"],
                bytes_partial=bool(m["bytes"].get("not_modeled")),
                latency_median_ms=lat.get("median"),
                latency_iqr_ms=lat.get("iqr"),
                latency_n=lat.get("n"),
                speedup_vs_eager=sp["median"] if sp else None,
                compile_s=m.get("compile_s"),
            )
            floor = m.get("roofline") or {}
            peak = (m.get("peak_memory") or {}).get("bytes")
            row.update(
                latency_floor_ms=floor.get("floor_ms"),
                x_of_floor=floor.get("x_of_floor"),
                floor_consistent=floor.get("consistent"),
                peak_memory_bytes=peak,
                memory_compression=eager_peak / peak if eager_peak and peak else None,
            )
        rows.append(row)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
