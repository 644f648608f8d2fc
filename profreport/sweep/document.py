"""The sweep record (`profreport.sweep/1`, sweep.json): what a sweep ran and where its runs are.

`points` lists every point of the grid with its outcome (ok, failed, pending, interrupted), the
run folder it wrote (relative to sweep.json) and the error when it failed. `rows` holds one row per
point and mode, copied from the point's run.json (kernels from the profiler, bytes modeled,
latency measured) so other tools can plot a sweep without reading every run; profreport's own
comparison reads the run folders themselves.

This module writes the record's entries (`point_entry`, `mode_rows`) and checks a document before
it is typed (`validate`); readers take the typed `Sweep` (profreport.sweep.model) from
`load_sweep`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profreport.files import read_text
from profreport.record.model import ModeResult, Run
from profreport.record.section import schema_of
from profreport.sweep.grid import Point, SweepSpec
from profreport.sweep.model import Sweep

SCHEMA = "profreport.sweep/1"
FILENAME = "sweep.json"
POINT_STATUSES = ("ok", "failed", "pending", "interrupted")
# the grid's fields that are lists (its type says so: SweepSpec)
GRID_LISTS = tuple(s.name for s in schema_of(SweepSpec) if s.shape.kind == "list")
DONE = ("ok", "failed")  # a point `--resume` does not run again
NOT_RUN = ("pending", "interrupted")  # a point `--resume` runs


class SweepRecordError(Exception):
    """Not a readable sweep record; the message is one line for the user."""


@dataclass
class PointOutcome:
    """How one point's `generate` run ended, as an executor reports it. `run_dir` is the run
    folder on the driver's disk (None when generate wrote none)."""

    status: str  # ok | failed | interrupted
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


def _speedup(mode: ModeResult) -> dict[str, Any] | None:
    sp = mode.speedup_vs_eager
    if sp is None:
        return None
    return {"median": sp.median, "ci95": list(sp.ci95), "inconclusive": sp.inconclusive}


def mode_rows(
    point: Point,
    modes: tuple[str, ...],
    run: Run | None,
    outcome: PointOutcome,
    run_rel: str | None,
) -> list[dict[str, Any]]:
    """One row per mode of `point`: from its run record, or (no record) the point's error."""
    base = {
        "point": point.id,
        "model": point.model,
        "batch_size": point.batch_size,
        "seq_len": point.seq_len,
        "dtype": point.dtype,
    }
    if run is not None:
        base["device"] = run.device.type
        if point.batch_size is None:
            base["batch_size"] = run.model.batch_size  # the model's own size
    rows = []
    names = list(run.modes) if run is not None else list(modes)
    for name in names:
        m = run.modes[name] if run is not None else None
        row: dict[str, Any] = {**base, "mode": name, "run": run_rel}
        if m is None:
            row.update(status=outcome.status, error=outcome.error)
        elif not m.ok or m.kernels is None or m.bytes is None:
            row.update(status=m.status, error=m.error or m.status)
        else:
            lat = m.latency_ms
            row.update(
                status="ok",
                error=None,
                kernels_per_step=m.kernels.per_step,
                bytes_per_step=m.bytes.read + m.bytes.written,
                bytes_partial=bool(m.bytes.not_modeled),
                latency_ms=None
                if lat is None
                else {"median": lat.median, "p10": lat.p10, "p90": lat.p90},
                speedup_vs_eager=_speedup(m),
                compile_s=m.compile_s,
                peak_memory_bytes=peak_memory_bytes(m),
            )
        rows.append(row)
    return rows


def point_entry(point: Point, outcome: PointOutcome, root: Path) -> dict[str, Any]:
    def rel(path: Path | None) -> str | None:
        return None if path is None else path.relative_to(root).as_posix()

    return {
        **point.to_json(),
        "status": outcome.status,
        "error": outcome.error,
        "exit_code": outcome.exit_code,
        "run": rel(outcome.run_dir),
        "log": rel(outcome.log),
        "duration_s": outcome.duration_s,
        "worker": outcome.worker,
    }


def validate(data: Any, source: str) -> dict[str, Any]:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise SweepRecordError(
            f"{source} is not a profreport sweep record (schema {found!r}, want {SCHEMA!r})"
        )
    for key, kind in (("grid", dict), ("points", list), ("rows", list)):
        if not isinstance(data.get(key), kind):
            raise SweepRecordError(f"{source}: {key}: missing or of the wrong type")
    for key in GRID_LISTS:
        if not isinstance(data["grid"].get(key, []), list):
            raise SweepRecordError(f"{source}: grid.{key}: expected a list")
    for i, p in enumerate(data["points"]):
        if not isinstance(p, dict) or p.get("status") not in POINT_STATUSES:
            raise SweepRecordError(f"{source}: points[{i}]: not a point with a known status")
        for key in ("id", "model", "dtype"):
            if not isinstance(p.get(key), str):
                raise SweepRecordError(f"{source}: points[{i}].{key}: expected a string")
    for i, r in enumerate(data["rows"]):
        if not isinstance(r, dict):
            raise SweepRecordError(f"{source}: rows[{i}]: expected an object")
        for key in ("latency_ms", "speedup_vs_eager"):
            if not isinstance(r.get(key) or {}, dict):
                raise SweepRecordError(f"{source}: rows[{i}].{key}: expected an object")
    if not isinstance(data.get("tool") or {}, dict):
        raise SweepRecordError(f"{source}: tool: expected an object")
    return data


def read_json(path: Path) -> Any:
    """The parsed JSON of `path` (a sweep.json or a folder holding one); SweepRecordError if
    it cannot be read."""
    if path.is_dir():
        path = path / FILENAME
    try:
        return json.loads(read_text(path, SweepRecordError))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SweepRecordError(f"{path} is not valid JSON ({exc})") from None


def load(path: Path) -> dict[str, Any]:
    """Read and validate a sweep record document from sweep.json or its folder."""
    return validate(read_json(path), str(path))


def load_sweep(path: Path) -> Sweep:
    """Read, validate and type a sweep record from sweep.json or its folder."""
    return Sweep.from_json(load(path))


def is_sweep(path: Path) -> bool:
    """Whether `path` is a sweep.json (or a folder holding one), judged by its schema."""
    try:
        data = read_json(path)
    except SweepRecordError:
        return False
    return isinstance(data, dict) and data.get("schema") == SCHEMA
