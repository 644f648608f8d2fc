"""The sweep record (`profreport.sweep/2`) as frozen dataclasses: what readers use instead of
string keys. Its points are the grid's own (`grid.Point`: the axes and how the point ended).

`Sweep.from_json(document)` reads a sweep.json document (validated by `document.load`);
`to_json()` gives back the same document: the same keys with the same values (declared fields in
declaration order, then the unknown keys: key order means nothing).
Like the run record's classes (profreport.record.model, whose `Section` these extend), keys a class
does not declare are kept in `extra` and written back. A row's latency and speedup are the run
record's own `Latency` and `Speedup`, holding the fields the row copied from its run.json.

The stored `summary` is a copy of the dashboard figures for other tools; profreport's readers
compute their own with `summary.summarize`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from profreport.record.model import Latency, Section, Speedup, Tool
from profreport.record.section import required, required_factory
from profreport.sweep.grid import Point, PointStatus, SweepSpec


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


@dataclass(frozen=True)
class Sweep(Section):
    """A whole sweep record (`profreport.sweep/2`)."""

    SCHEMA: ClassVar[str] = "profreport.sweep/2"  # /1: its grid had generate_flags, always []
    NOUN: ClassVar[str] = "sweep record"

    schema: str = SCHEMA
    tool: Tool | None = None
    created_utc: str | None = None  # when the sweep started, UTC (ISO 8601)
    executor: str | None = None  # local | ray: what ran the latest points
    grid: SweepSpec = required_factory(SweepSpec)
    points: tuple[Point, ...] = required(())
    rows: tuple[SweepRow, ...] = required(())
    summary: SweepSummary | None = None  # the dashboard figures (a copy for other tools)

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
