"""The sweep record (`profreport.sweep/2`, sweep.json): what a sweep ran and where its runs are.

`points` lists every point of the grid with its outcome (ok, failed, pending, interrupted), the
run folder it wrote (relative to sweep.json) and the error when it failed. `rows` holds one row per
point and mode, copied from the point's run.json (kernels from the profiler, bytes modeled,
latency measured) so other tools can plot a sweep without reading every run; profreport's own
comparison reads the run folders themselves.

This module builds the record's rows (`mode_rows`: the typed `SweepRow` of
profreport.sweep.model) and reads a sweep.json (`load_sweep`: checked and typed by the record's
classes; a `profreport.sweep/1` record is read as the /2 it differs from by an always empty
`grid.generate_flags`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from profreport.record.model import Latency, ModeResult, OkMode, Run, Speedup
from profreport.record.section import JSONObject, read_json
from profreport.sweep.grid import Point
from profreport.sweep.model import Sweep, SweepRow

SCHEMA = Sweep.SCHEMA
SCHEMA_1 = "profreport.sweep/1"  # read still
FILENAME = "sweep.json"
DONE = ("ok", "failed")  # a point `--resume` does not run again
NOT_RUN = ("pending", "interrupted")  # a point `--resume` runs


class SweepRecordError(Exception):
    """Not a readable sweep record; the message is one line for the user."""


def peak_memory_bytes(mode: ModeResult) -> int | None:
    """A mode's peak memory of one call in bytes (capture/peak_memory), where its run record has
    one; None for older records and where no memory event was seen."""
    peak = mode.peak_memory
    return peak.bytes if peak is not None and peak.bytes else None


def _figures(mode: OkMode) -> SweepRow:
    """The row figures of a mode that ran: kernels, bytes, latency, speedup, compile time."""
    lat, sp = mode.latency_ms, mode.speedup_vs_eager
    return SweepRow(
        status="ok",
        kernels_per_step=mode.kernels.per_step,
        bytes_per_step=mode.bytes.traffic,
        bytes_partial=bool(mode.bytes.not_modeled),
        latency_ms=None
        if lat is None
        else Latency(median=lat.median, iqr=lat.iqr, p10=lat.p10, p90=lat.p90),
        speedup_vs_eager=None
        if sp is None
        else Speedup(median=sp.median, ci95=sp.ci95, noise=sp.noise, inconclusive=sp.inconclusive),
        compile_s=mode.compile_s,
        peak_memory_bytes=peak_memory_bytes(mode),
    )


def mode_rows(point: Point, modes: tuple[str, ...], run: Run | None) -> list[SweepRow]:
    """One row per mode of a finished `point`: from its run record, or (no record) the point's
    own status and error."""
    batch_size = point.batch_size
    if run is not None and batch_size is None:
        batch_size = run.model.batch_size  # the model's own size
    rows = []
    for name in list(run.modes) if run is not None else list(modes):
        m = run.modes[name] if run is not None else None
        if m is None:
            row = SweepRow(status=point.status, error=point.error)
        elif isinstance(m, OkMode):
            row = _figures(m)
        else:
            row = SweepRow(status=m.status, error=m.error or m.status)
        rows.append(
            dataclasses.replace(
                row,
                point=point.id,
                model=point.model,
                batch_size=batch_size,
                seq_len=point.seq_len,
                dtype=point.dtype,
                device=None if run is None else run.device.type,
                mode=name,
                run=None if run is None else point.run,
            )
        )
    return rows


def load(path: Path) -> JSONObject:
    """Read and validate a sweep record document from sweep.json or its folder (SweepRecordError
    naming the first wrong field)."""
    if path.is_dir():
        path = path / FILENAME
    document = read_json(path, SweepRecordError)
    if isinstance(document, dict) and document.get("schema") == SCHEMA_1:
        grid = document.get("grid")
        if isinstance(grid, dict) and grid.get("generate_flags") == []:
            grid = {k: v for k, v in grid.items() if k != "generate_flags"}
        document = {**document, "schema": SCHEMA, "grid": grid}
    return Sweep.checked(document, str(path), SweepRecordError)


def load_sweep(path: Path) -> Sweep:
    """Read, validate and type a sweep record from sweep.json or its folder."""
    return Sweep.from_json(load(path))


def is_sweep(path: Path) -> bool:
    """Whether `path` is a sweep.json (or a folder holding one), judged by its schema."""
    try:
        data = read_json(path / FILENAME if path.is_dir() else path, SweepRecordError)
    except SweepRecordError:
        return False
    return isinstance(data, dict) and data.get("schema") in (SCHEMA, SCHEMA_1)
