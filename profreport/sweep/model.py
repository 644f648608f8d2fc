"""The sweep record (`profreport.sweep/2`, sweep.json): what a sweep ran and where its runs are,
as frozen dataclasses (the run record's `Section`s): its rows built, the file read.

`points` are the grid's own (`grid.Point`: the axes, how the point ended, the run folder relative
to sweep.json, the error). `rows` holds one row per point and mode, copied from the point's
run.json (kernels from the profiler, bytes modeled, latency measured) so other tools can plot a
sweep without reading every run; profreport's own comparison reads the run folders themselves.
The stored `summary` is a copy of the dashboard figures for other tools; profreport's readers
compute their own with `summary.summarize`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from profreport.analysis.decode_tokens import overhead_bound
from profreport.record.model import (
    DecodeTokens,
    Latency,
    ModeResult,
    OkMode,
    Run,
    Section,
    Speedup,
    Tool,
)
from profreport.record.section import (
    JSONObject,
    omitted,
    read_json,
    required,
    required_factory,
)
from profreport.sweep.grid import Point, PointStatus, SweepSpec

FILENAME = "sweep.json"
DONE = ("ok", "failed")  # a point `--resume` does not run again
NOT_RUN = ("pending", "interrupted")  # a point `--resume` runs


class SweepRecordError(Exception):
    """Not a readable sweep record; the message is one line for the user."""


@dataclass(frozen=True)
class SweepRow(Section):
    """One point and mode: a copy of the figures of the mode in the point's run record (kernels
    from the profiler, bytes modeled, latency measured), or the error when it has none. `device`
    is there when the point has a run record."""

    point: str = ""
    model: str = ""
    batch_size: int | None = None
    seq_len: int | None = None
    dtype: str = ""
    device: str | None = None
    mode: str = ""
    run: str | None = None
    status: str = ""
    error: str | None = None
    kernels_per_step: int | None = None
    bytes_per_step: int | None = None
    bytes_partial: bool | None = None
    latency_ms: Latency | None = None  # median, iqr, p10, p90
    speedup_vs_eager: Speedup | None = None  # median, ci95, noise, inconclusive
    compile_s: float | None = None
    peak_memory_bytes: int | None = None
    # a decode point: the mode's row of the run's derived per-token finding (run.decode_tokens)
    ms_per_token: float | None = omitted()  # measured median step latency / tokens a step
    achieved: float | None = omitted()  # bandwidth floor / latency (floor modeled, measured)
    host_share: float | None = omitted()  # of the profiled median step, outside kernels
    overhead_bound: bool | None = omitted()  # analysis.decode_tokens.overhead_bound
    time_bound: str | None = omitted()  # the time breakdown's bound it read, where derived

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def on_axis(self, axis: str) -> int | str | None:
        """The row's value on a swept axis: batch_size, seq_len or dtype."""
        value: int | str | None = getattr(self, axis)
        return value


@dataclass(frozen=True)
class ModeSummary(Section):
    """One mode over the sweep, in the PyTorch compile dashboard's terms (sweep/summary.py)."""

    mode: str = required("")
    points: int = required(0)  # points that were to run this mode
    passed: int = required(0)
    geomean_speedup: float | None = None  # over eager, measured; None for eager or no data
    speedup_points: int = 0
    speedup_inconclusive: int = 0  # of those, timed under noise the run flagged
    mean_compile_s: float | None = None
    compression_ratio: float | None = None  # eager peak / mode peak; None: not recorded
    compression_points: int = 0
    pass_rate: float = 0.0  # passed / points


@dataclass(frozen=True)
class DecodeCrossing(Section):
    """One model and mode of a decode sweep over context: the contexts it was classified at (in
    order, from the points' rows), which of them were overhead-bound (the decode report's
    classification, analysis.decode_tokens.overhead_bound), and the context from which it is
    bandwidth-bound (bound by its kernels) through the largest context swept; None where it is
    never, or already at the smallest context, or goes back and forth."""

    model: str = required("")
    mode: str = required("")
    contexts: tuple[int, ...] = required(())
    overhead_bound: tuple[bool, ...] = required(())
    crosses_at: int | None = None


@dataclass(frozen=True)
class FailedPoint(Section):
    """A point that failed: its id, label and error."""

    point: str = required("")
    label: str = ""
    status: str = ""
    error: str = ""


@dataclass(frozen=True)
class SweepSummary(Section):
    """The dashboard figures of a sweep (what sweep.html opens with)."""

    points: int = required(0)
    ok_points: int = required(0)
    modes: tuple[ModeSummary, ...] = required(())
    failed: tuple[FailedPoint, ...] = ()
    axis: str | None = None  # the swept axis the charts put on x
    pending: int = 0  # points not run, or stopped by an interrupt (`--resume` runs them)
    decode: tuple[DecodeCrossing, ...] | None = omitted()  # a decode sweep over context


@dataclass(frozen=True)
class Sweep(Section):
    """A whole sweep record (`profreport.sweep/2`)."""

    SCHEMA: ClassVar[str] = "profreport.sweep/2"
    EARLIER: ClassVar[tuple[str, ...]] = ("profreport.sweep/1",)
    NOUN: ClassVar[str] = "sweep record"

    schema: str = SCHEMA
    tool: Tool | None = None
    created_utc: str | None = None  # when the sweep started, UTC (ISO 8601)
    executor: str | None = None  # local | ray: what ran the latest points
    grid: SweepSpec = required_factory(SweepSpec)
    points: tuple[Point, ...] = required(())
    rows: tuple[SweepRow, ...] = required(())
    summary: SweepSummary | None = None  # the dashboard figures (a copy for other tools)

    @classmethod
    def upgraded(cls, data: JSONObject) -> JSONObject:
        """A sweep/1 record as the /2 it differs from by an always empty `grid.generate_flags`."""
        if data.get("schema") not in cls.EARLIER:
            return data
        grid = data.get("grid")
        if isinstance(grid, dict) and grid.get("generate_flags") == []:
            grid = {k: v for k, v in grid.items() if k != "generate_flags"}
        return {**data, "schema": cls.SCHEMA, "grid": grid}

    def status(self, point_id: str) -> PointStatus:
        """The status of the point `point_id` ("pending" for a point the record does not hold)."""
        return next((p.status for p in self.points if p.id == point_id), "pending")

    def with_point(self, point: Point, rows: Sequence[SweepRow] | None = None) -> Sweep:
        """A copy with `point` in place of the point of its id, and `rows` (None: the rows it
        has) in place of that point's rows; rows stay in the order of the points."""
        points = tuple(point if p.id == point.id else p for p in self.points)
        if rows is None:
            return dataclasses.replace(self, points=points)
        order = [p.id for p in points]
        kept = [r for r in self.rows if r.point != point.id]
        ordered = sorted([*kept, *rows], key=lambda r: order.index(r.point))
        return dataclasses.replace(self, points=points, rows=tuple(ordered))


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


def _decode_figures(row: SweepRow, name: str, tokens: DecodeTokens | None) -> SweepRow:
    """`row` with the mode's per-token figures from a decode run's derived finding (None: the
    run is not a decode run)."""
    cost = next((c for c in tokens.rows if c.mode == name), None) if tokens else None
    if tokens is None or cost is None:
        return row
    return dataclasses.replace(
        row,
        ms_per_token=None if cost.latency_ms is None else cost.latency_ms / tokens.batch,
        achieved=cost.achieved,
        host_share=cost.host_share,
        overhead_bound=overhead_bound(cost),
        time_bound=cost.bound,
    )


def mode_rows(point: Point, modes: tuple[str, ...], run: Run | None) -> list[SweepRow]:
    """One row per mode of a finished `point`: from its run record (a decode run's per-token
    figures too), or (no record) the point's own status and error."""
    batch_size = point.batch_size
    if run is not None and batch_size is None:
        batch_size = run.model.batch_size  # the model's own size
    rows = []
    for name in list(run.modes) if run is not None else list(modes):
        m = run.modes[name] if run is not None else None
        if m is None or run is None:
            row = SweepRow(status=point.status, error=point.error)
        elif isinstance(m, OkMode):
            row = _decode_figures(_figures(m), name, run.decode_tokens)
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
    return isinstance(data, dict) and data.get("schema") in (Sweep.SCHEMA, *Sweep.EARLIER)
