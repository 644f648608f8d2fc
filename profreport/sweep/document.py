"""The sweep record (`profreport.sweep/1`, sweep.json): what a sweep ran and where its runs are.

`points` lists every point of the grid with its outcome (ok, failed, pending, interrupted), the
run folder it wrote (relative to sweep.json) and the error when it failed. `rows` holds one row per
point and mode, copied from the point's run.json (kernels from the profiler, bytes modeled,
latency measured) so other tools can plot a sweep without reading every run; profreport's own
comparison reads the run folders themselves.

This module builds the record's entries (`point_entry`, `mode_rows`: the typed `SweepPoint` and
`SweepRow` of profreport.sweep.model) and reads a sweep.json (`load_sweep`: checked and typed by
the record's classes).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from profreport.record.model import Latency, ModeResult, OkMode, Run, Speedup
from profreport.record.section import JSONObject, read_json
from profreport.sweep.grid import Point
from profreport.sweep.model import PointStatus, Sweep, SweepPoint, SweepRow

SCHEMA = Sweep.SCHEMA
FILENAME = "sweep.json"
DONE = ("ok", "failed")  # a point `--resume` does not run again
NOT_RUN = ("pending", "interrupted")  # a point `--resume` runs


class SweepRecordError(Exception):
    """Not a readable sweep record; the message is one line for the user."""


@dataclass
class PointOutcome:
    """How one point's `generate` run ended, as an executor reports it. `run_dir` is the run
    folder on the driver's disk (None when generate wrote none)."""

    status: PointStatus  # ok | failed | interrupted
    error: str | None = None
    exit_code: int | None = None
    run_dir: Path | None = None
    log: Path | None = None
    duration_s: float | None = None
    worker: str | None = None


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


def mode_rows(
    point: Point,
    modes: tuple[str, ...],
    run: Run | None,
    outcome: PointOutcome,
    run_rel: str | None,
) -> list[SweepRow]:
    """One row per mode of `point`: from its run record, or (no record) the point's error."""
    batch_size = point.batch_size
    if run is not None and batch_size is None:
        batch_size = run.model.batch_size  # the model's own size
    rows = []
    for name in list(run.modes) if run is not None else list(modes):
        m = run.modes[name] if run is not None else None
        if m is None:
            row = SweepRow(status=outcome.status, error=outcome.error)
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
                run=run_rel,
            )
        )
    return rows


def point_entry(point: Point, outcome: PointOutcome, root: Path) -> SweepPoint:
    """The record's entry of a finished point (its run and log relative to sweep.json)."""

    def rel(path: Path | None) -> str | None:
        return None if path is None else path.relative_to(root).as_posix()

    return dataclasses.replace(
        pending_entry(point),
        status=outcome.status,
        error=outcome.error,
        exit_code=outcome.exit_code,
        run=rel(outcome.run_dir),
        log=rel(outcome.log),
        duration_s=outcome.duration_s,
        worker=outcome.worker,
    )


def pending_entry(point: Point) -> SweepPoint:
    """The record's entry of a point not run yet: its axis values."""
    return SweepPoint(
        id=point.id,
        model=point.model,
        batch_size=point.batch_size,
        seq_len=point.seq_len,
        dtype=point.dtype,
    )


def load(path: Path) -> JSONObject:
    """Read and validate a sweep record document from sweep.json or its folder (SweepRecordError
    naming the first wrong field)."""
    if path.is_dir():
        path = path / FILENAME
    return Sweep.checked(read_json(path, SweepRecordError), str(path), SweepRecordError)


def load_sweep(path: Path) -> Sweep:
    """Read, validate and type a sweep record from sweep.json or its folder."""
    return Sweep.from_json(load(path))


def is_sweep(path: Path) -> bool:
    """Whether `path` is a sweep.json (or a folder holding one), judged by its schema."""
    try:
        data = read_json(path / FILENAME if path.is_dir() else path, SweepRecordError)
    except SweepRecordError:
        return False
    return isinstance(data, dict) and data.get("schema") == SCHEMA
