"""View-model of "where each mode's time goes": the stacked parts of each mode's median step (the
profiler's cost removed: the mode's `median_step` finding), its bound and the decomposition of
its timed saving (its `time_findings`).

One piece of the report page of its own (templates/_time_breakdown.html.j2, its chart in
render/charts.time_breakdown_chart), so a page layout can place it anywhere."""

from __future__ import annotations

from typing import Any

from profreport.record.model import MedianStep, ModeResult, Run

# Every part a step can have (record StepTime's fields, and the inferred ops), as the report's
# chart and `analyze` label it: the one label table for a step's time parts.
PART_LABELS = {
    "wall_us": "step wall time",
    "op_us": "CPU kernels",
    "inferred_us": "inferred ops (no profiler record)",
    "launch_us": "launch calls",
    "runtime_us": "other runtime calls",
    "dispatch_us": "dispatch",
    "wrapper_us": "wrappers",
    "python_us": "Python",
    "device_busy_us": "device busy",
    "host_wait_us": "idle: host wait",
    "kernel_wait_us": "idle: kernel wait",
    "other_idle_us": "idle: other",
    "dispatched_ops": "dispatched ops",
    "launches": "launch calls (count)",
}


def _ms(us: float | None) -> str:
    return "n/a" if us is None else f"{us / 1000:.3g} ms"


def parts_of(median: MedianStep) -> tuple[tuple[str, float], ...]:
    """(label, µs) of each stacked part of a median step, bottom up."""
    return tuple((PART_LABELS[key], us) for key, us in median.parts.items())


def _profiled(median: MedianStep, mode: ModeResult) -> str:
    """How the step was profiled and what was removed: one line under its numbers."""
    tb = mode.time_breakdown
    cost = None if tb is None else tb.profiler_cost
    if not median.corrected or cost is None:
        return (
            f"as profiled, {median.steps} step(s) with shapes recorded; the profiler's cost "
            "inside (not measured: a record written before)"
        )
    return (
        f"light pass, median of {median.steps} steps per part; profiled {_ms(median.profiled_us)}, "
        f"{_ms(median.removed_us)} of profiler cost removed ({cost.per_event_us:.3g} µs per "
        f"recorded event, {cost.per_step_us:.3g} µs per step, measured in this run)"
    )


def time_rows(run: Run) -> list[dict[str, Any]]:
    """One row per mode that ran and has a time breakdown, in record order."""
    rows = []
    for name, mode in run.ok_modes.items():
        median = mode.median_step
        if median is None:
            continue
        rows.append(
            {
                "mode": name,
                "wall": _ms(median.total_us),
                "profiled": _profiled(median, mode),
                "timed": _ms(None if mode.latency_ms is None else mode.latency_ms.median * 1000),
                "parts": [(label, _ms(us)) for label, us in parts_of(median)],
                "ops": median.ops,
                "ops_label": "dispatched ops" if median.cpu else "launches",
                # the mode's time findings, "" where it has none
                **{
                    key: getattr(mode.time_findings, key, None) or ""
                    for key in ("bound", "bound_evidence", "clause", "detail")
                },
                "busy": "; ".join(getattr(mode.time_breakdown, "busy", None) or ()),
            }
        )
    return rows


def chart_series(run: Run) -> tuple[list[str], dict[str, list[float]]] | None:
    """(modes, label -> ms per mode) for the stacked chart; None without breakdowns or when the
    modes mix definitions (no run does: one device per run)."""
    medians = {name: mode.median_step for name, mode in run.ok_modes.items()}
    steps = {name: s for name, s in medians.items() if s is not None}
    if not steps or len({s.cpu for s in steps.values()}) != 1:
        return None
    have = [dict(parts_of(s)) for s in steps.values()]
    labels = dict.fromkeys(label for parts in have for label in parts)
    return list(steps), {label: [p.get(label, 0.0) / 1000 for p in have] for label in labels}
