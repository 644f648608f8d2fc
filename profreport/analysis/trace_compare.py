"""Trace counts as a versioned JSON-ready document, and the comparison of traces to a baseline.

Pure functions: :class:`~profreport.analysis.kernels.TraceCounts` (and each trace's time
breakdown) in, the typed ``profreport.analysis/2`` document out (analysis/trace_document.py;
``profreport analyze --format json`` writes its ``to_json()``). `kernel_entry` is the one JSON
shape of a kernel row that the run record's kernel tables share.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from profreport.analysis.change import Change
from profreport.analysis.counters import derived
from profreport.analysis.kernel_diff import KernelSide, diff_kernels
from profreport.analysis.kernels import (
    CPU_DEFINITION_TEXT,
    DEVICE_DEFINITION_TEXT,
    UNRECORDED_FIELDS,
    KernelRow,
    TraceCounts,
    per_step,
)
from profreport.analysis.time_breakdown import TraceTimeBreakdown
from profreport.analysis.trace_document import (
    PER_STEP_FIELDS,
    TOTAL_FIELDS,
    AnalysisDocument,
    CounterSummary,
    OpChange,
    TimeChanges,
    TraceComparison,
    TraceSummary,
    count_change,
)

DEFINITION_TEXT = {"device": DEVICE_DEFINITION_TEXT, "cpu": CPU_DEFINITION_TEXT}


def analysis_document(
    traces: list[tuple[str, TraceCounts]],
    top: int = 15,
    events: list[int] | None = None,
    times: list[TraceTimeBreakdown] | None = None,
) -> AnalysisDocument:
    """The whole ``analyze`` result: a summary per trace, later traces compared to the first.

    ``events``: how many events each trace held (after the ones no analysis reads were dropped);
    ``times``: where each trace's time goes (analysis/time_breakdown), in the same order.
    """
    n = len(traces)
    counted = events if events is not None else [None] * n
    timed = times if times is not None else [None] * n
    summaries = [
        trace_summary(path, counts, top, count, time)
        for (path, counts), count, time in zip(traces, counted, timed, strict=True)
    ]
    comparison: list[TraceComparison] = []
    if n > 1:
        base_path, base = traces[0]
        comparison = [
            compare_counts(base_path, base, path, c, timed[0], time)
            for (path, c), time in zip(traces[1:], timed[1:], strict=True)
        ]
    used = sorted({c.definition for _, c in traces})
    return AnalysisDocument(
        traces=tuple(summaries),
        comparison=tuple(comparison),
        definitions={d: DEFINITION_TEXT[d] for d in used},
    )


def trace_summary(
    path: str,
    counts: TraceCounts,
    top: int = 15,
    events: int | None = None,
    time: TraceTimeBreakdown | None = None,
) -> TraceSummary:
    """One trace's counts with its ``top`` kernels by time (and where its time goes)."""
    unknown = UNRECORDED_FIELDS if counts.device_activity == "not recorded" else frozenset()
    totals: dict[str, Any] = {
        name: None if name in unknown else getattr(counts, name) for name in TOTAL_FIELDS
    }
    return TraceSummary(
        path=path,
        device=counts.device,
        definition=counts.definition,
        definition_evidence=counts.evidence,
        device_activity=counts.device_activity,
        **totals,
        notes=tuple(counts.notes),
        steps=tuple(counts.steps),
        per_step=per_step(counts),
        launch_api_counts=counts.launch_api_counts,
        kernels_by_op=counts.kernels_by_op,
        distinct_kernels=len(counts.table),
        top_kernels=tuple(kernel_entry(r) for r in counts.table[:top]),
        inductor_kernels=tuple(counts.inductor_kernels) or None,
        counter_ranges=tuple(counts.counter_ranges) or None,
        counters=CounterSummary.from_json(counts.counters) if counts.counters else None,
        events=events,
        time_breakdown=time,
    )


def kernel_entry(row: KernelRow, steps: int | None = None) -> KernelRow:
    """One kernel row as a record writes it: the one shape of `analyze`'s top kernels and the
    run record's kernel tables. With `steps` (a run's profiled steps), per-step calls and time
    are added and the row is marked as the profiler's; without, they are null (a trace's row is
    over the whole trace); counter totals add the FLOPs and DRAM bytes derived from them."""
    entry = dataclasses.replace(row, counters=row.counters or None)
    if steps is None:
        entry = entry.adding(calls_per_step=None, time_us_per_step=None)
    else:
        entry = dataclasses.replace(
            entry,
            calls_per_step=row.calls / steps,
            time_us_per_step=None if row.time_us is None else row.time_us / steps,
            source="profiler",
        )
    if row.counter_totals is not None:
        entry = entry.adding(**derived(row.counter_totals))
    return entry


def compare_counts(
    base_path: str,
    base: TraceCounts,
    path: str,
    other: TraceCounts,
    base_time: TraceTimeBreakdown | None = None,
    time: TraceTimeBreakdown | None = None,
) -> TraceComparison:
    """Differences of ``other`` against ``base``: totals, per-step, per kernel, per launching op,
    and where the time goes (when both time breakdowns are given)."""
    note = None
    if base.definition != other.definition:
        note = (
            f"definitions differ ({base.definition} vs {other.definition}): "
            "the counts do not measure the same thing"
        )
    base_sum, other_sum = trace_summary(base_path, base, 0), trace_summary(path, other, 0)
    base_step, other_step = per_step(base), per_step(other)
    totals = {f: count_change(getattr(base_sum, f), getattr(other_sum, f)) for f in TOTAL_FIELDS}
    steps = {
        f: count_change(getattr(base_step, f), getattr(other_step, f)) for f in PER_STEP_FIELDS
    }
    steps["steps"] = count_change(base_step.steps, other_step.steps)
    # A trace's rows as sides of the kernel diff: their whole-trace calls and time (a trace has
    # no fusion map: rows pair by name, else an Inductor-generated name without its counter).
    base_rows, rows = (
        [KernelSide(r.name, r.kind, r.calls, r.time_us, launched_by=r.launched_by) for r in t.table]
        for t in (base, other)
    )
    kernels, paired = diff_kernels(base_rows, rows)
    return TraceComparison(
        baseline=base_path,
        path=path,
        note=note,
        totals=totals,
        per_step=steps,
        kernels=kernels,
        kernels_paired=paired,
        launching_ops=tuple(_op_differences(base.kernels_by_op, other.kernels_by_op)),
        time_breakdown=None if base_time is None or time is None else time_changes(base_time, time),
    )


# The parts of a median step compared between two traces, in the order they are shown.
TIME_PARTS = (
    "wall_us",
    "op_us",
    "launch_us",
    "runtime_us",
    "dispatch_us",
    "wrapper_us",
    "python_us",
    "device_busy_us",
    "host_wait_us",
    "kernel_wait_us",
    "other_idle_us",
    "dispatched_ops",
    "launches",
)


def time_changes(base: TraceTimeBreakdown, other: TraceTimeBreakdown) -> TimeChanges:
    """Each part of the two median steps, and the whole-trace device idle share, side by side
    (a part neither side has is left out)."""
    step: dict[str, Change] = {}
    if base.typical is not None and other.typical is not None:
        for part in TIME_PARTS:
            b, o = getattr(base.typical, part), getattr(other.typical, part)
            if b is not None or o is not None:
                step[part] = count_change(b, o)
    idle = None
    if base.device is not None or other.device is not None:
        idle = count_change(
            None if base.device is None else base.device.idle_pct,
            None if other.device is None else other.device.idle_pct,
        )
    return TimeChanges(
        baseline_bound=None if base.bound is None else base.bound.label,
        bound=None if other.bound is None else other.bound.label,
        idle_pct=idle,
        step=step,
    )


def _op_differences(base: dict[str, int], other: dict[str, int]) -> list[OpChange]:
    """Kernels launched per CPU op, where the count differs."""
    changed = [
        OpChange.of(base.get(op, 0), other.get(op, 0), op=op)
        for op in base.keys() | other.keys()
        if base.get(op, 0) != other.get(op, 0)
    ]
    return sorted(changed, key=lambda c: (-abs(c.change or 0), c.op))
