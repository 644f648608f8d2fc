"""A sweep in the PyTorch compile dashboard's terms, and the series its charts draw: pure
functions over a typed sweep record's points and rows (profreport.sweep.model).

Per mode: pass rate (points where the mode ran ok, over the points that finished), geometric-mean
speedup over eager across passing points (each point's measured median), mean compile time
(measured, seconds), and the compression ratio (eager peak memory / mode peak memory, geometric
mean) over the points whose run records hold a peak-memory figure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from profreport.sweep.model import (
    NOT_RUN,
    DecodeCrossing,
    FailedPoint,
    ModeSummary,
    Sweep,
    SweepRow,
    SweepSummary,
)

AXES = ("batch_size", "seq_len", "dtype")
AXIS_LABELS = {"batch_size": "batch size", "seq_len": "sequence length", "dtype": "dtype"}


def geometric_mean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, vals)) / len(vals)) if vals else None


def swept_axis(rows: Sequence[SweepRow]) -> str | None:
    """The first axis (batch size, sequence length, dtype) with more than one value."""
    for axis in AXES:
        if len({v for r in rows if (v := r.on_axis(axis)) is not None}) > 1:
            return axis
    return None


def _mode_summary(mode: str, rows: list[SweepRow], eager: dict[str, int]) -> ModeSummary:
    passed = [r for r in rows if r.ok]
    speedups = [r.speedup_vs_eager for r in passed if r.speedup_vs_eager is not None]
    compile_s = [r.compile_s for r in passed if r.compile_s is not None]
    ratios = [
        eager[r.point] / r.peak_memory_bytes
        for r in passed
        if r.peak_memory_bytes and eager.get(r.point)
    ]
    return ModeSummary(
        mode=mode,
        points=len(rows),
        passed=len(passed),
        pass_rate=len(passed) / len(rows) if rows else 0.0,
        geomean_speedup=geometric_mean(s.median for s in speedups) if mode != "eager" else None,
        speedup_points=len(speedups) if mode != "eager" else 0,
        speedup_inconclusive=sum(1 for s in speedups if s.inconclusive),
        mean_compile_s=sum(compile_s) / len(compile_s) if compile_s else None,
        compression_ratio=geometric_mean(ratios) if mode != "eager" else None,
        compression_points=len(ratios) if mode != "eager" else 0,
    )


def crossing_at(contexts: Sequence[int], overhead: Sequence[bool]) -> int | None:
    """The context from which a mode is bandwidth-bound through the largest one swept, after
    being overhead-bound below it (contexts ascending); None: no such single crossing."""
    for i in range(1, len(overhead)):
        if overhead[i - 1] and not any(overhead[i:]) and all(overhead[:i]):
            return contexts[i]
    return None


def decode_crossings(rows: Sequence[SweepRow]) -> tuple[DecodeCrossing, ...] | None:
    """Per model and mode of a decode sweep, its classification at each context (the points'
    rows, ascending) and where it crosses from overhead- to bandwidth-bound; None: no row holds
    a decode classification. Points of one model at other batch sizes or dtypes each form
    their own line, as on the charts."""
    groups: dict[tuple[str, int | None, str, str], dict[int, bool]] = {}
    for r in rows:
        if r.ok and r.overhead_bound is not None and r.seq_len is not None:
            key = (r.model, r.batch_size, r.dtype, r.mode)
            groups.setdefault(key, {})[r.seq_len] = r.overhead_bound
    if not groups:
        return None
    out = []
    for (model, _, _, mode), by_context in groups.items():
        contexts = tuple(sorted(by_context))
        overhead = tuple(by_context[c] for c in contexts)
        out.append(DecodeCrossing(model, mode, contexts, overhead, crossing_at(contexts, overhead)))
    return tuple(out)


def summarize(sweep: Sweep) -> SweepSummary:
    """The dashboard figures of a sweep record (`profreport.sweep/2`)."""
    rows, points = sweep.rows, sweep.points
    modes = list(dict.fromkeys([*sweep.grid.modes, *(r.mode for r in rows)]))
    eager_peak = {
        r.point: r.peak_memory_bytes
        for r in rows
        if r.mode == "eager" and r.ok and r.peak_memory_bytes
    }
    by_mode = {m: [r for r in rows if r.mode == m] for m in modes}
    failed = tuple(
        FailedPoint(p.id, p.label, p.status, p.error or p.status)
        for p in points
        if p.status == "failed"
    )
    return SweepSummary(
        points=len(points),
        ok_points=sum(1 for p in points if p.ok),
        modes=tuple(_mode_summary(m, by_mode[m], eager_peak) for m in modes if by_mode[m]),
        failed=failed,
        axis=swept_axis(rows),
        pending=sum(1 for p in points if p.status in NOT_RUN),
        decode=decode_crossings(rows),
    )


@dataclass(frozen=True)
class Series:
    """One line of a chart: a mode at fixed other settings, over the swept axis."""

    label: str
    mode: str
    x: tuple[Any, ...]
    rows: tuple[SweepRow, ...] = field(repr=False)


def series(rows: Sequence[SweepRow], axis: str | None) -> list[Series]:
    """The passing rows grouped into lines over `axis` (one line per model, mode and the values
    of the other axes), each ordered along the axis; rows without a value on the axis are left
    out."""
    others = [a for a in AXES if a != axis]
    groups: dict[tuple[Any, ...], list[SweepRow]] = {}
    for r in rows:
        # A model the axis does not apply to (a vision model on a sequence-length axis) is in
        # the table, not on the chart.
        if r.ok and (axis is None or r.on_axis(axis) is not None):
            groups.setdefault((r.model, *(r.on_axis(a) for a in others), r.mode), []).append(r)
    out = []
    for key, members in groups.items():
        if axis == "dtype":
            members.sort(key=lambda r: ("float32", "bfloat16", "float16").index(r.dtype))
        elif axis is not None:
            name = axis
            members.sort(key=lambda r: r.on_axis(name) or 0)
        fixed = [
            f"{AXIS_LABELS[a].split()[0]} {v}" if a != "dtype" else str(v)
            for a, v in zip(others, key[1:-1], strict=True)
            if v is not None
        ]
        label = ", ".join([key[0], *fixed, key[-1]])
        xs = tuple(r.on_axis(axis) if axis else None for r in members)
        out.append(Series(label, key[-1], xs, tuple(members)))
    return out
