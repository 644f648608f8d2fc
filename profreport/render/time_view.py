"""View-model of "where each mode's time goes": the stacked parts of each mode's profiled step,
its bound and the decomposition of its speedup (analysis/time_breakdown, speedup_breakdown).

One piece of the report page of its own (templates/_time_breakdown.html.j2, its chart in
render/charts.time_breakdown_chart), so a page layout can place it anywhere."""

from __future__ import annotations

from typing import Any

from profreport.record.model import Run, StepTime
from profreport.render.methods import method_templates

# The parts of a step the chart stacks, bottom up, by definition: (field, label).
CPU_PARTS = (
    ("op_us", "CPU kernels"),
    ("dispatch_us", "dispatch"),
    ("wrapper_us", "wrappers"),
    ("python_us", "Python"),
)
DEVICE_PARTS = (
    ("device_busy_us", "device busy"),
    ("host_wait_us", "idle: host wait"),
    ("kernel_wait_us", "idle: kernel wait"),
    ("other_idle_us", "idle: other"),
)
# the method paragraph: render/methods.md, the one source of the method text
METHOD = method_templates()["time"]


def _ms(us: float | None) -> str:
    return "n/a" if us is None else f"{us / 1000:.3g} ms"


def parts_of(step: StepTime) -> tuple[tuple[str, str, float], ...]:
    """(field, label, µs) of each stacked part of one step."""
    parts = CPU_PARTS if step.op_us is not None else DEVICE_PARTS
    return tuple((key, label, float(getattr(step, key) or 0.0)) for key, label in parts)


def time_rows(run: Run) -> list[dict[str, Any]]:
    """One row per mode that ran and has a time breakdown, in record order."""
    rows = []
    for name, mode in run.ok_modes.items():
        breakdown = mode.time_breakdown
        if breakdown is None or breakdown.step is None:
            continue
        step = breakdown.step
        findings = mode.time_findings
        rows.append(
            {
                "mode": name,
                "step": step.name,
                "wall": _ms(step.wall_us),
                "timed": _ms(None if mode.latency_ms is None else mode.latency_ms.median * 1000),
                "parts": [(label, _ms(us)) for _, label, us in parts_of(step)],
                "ops": step.dispatched_ops if step.op_us is not None else step.launches,
                "ops_label": "dispatched ops" if step.op_us is not None else "launches",
                "bound": "" if findings is None else findings.bound,
                "bound_evidence": "" if findings is None else findings.bound_evidence,
                "clause": "" if findings is None else findings.clause,
                "basis": "" if findings is None or findings.basis is None else findings.basis,
            }
        )
    return rows


def chart_series(run: Run) -> tuple[list[str], dict[str, list[float]]] | None:
    """(modes, label -> ms per mode) for the stacked chart; None without breakdowns or when the
    modes mix definitions (no run does: one device per run)."""
    modes: list[str] = []
    series: dict[str, list[float]] = {}
    kinds = set()
    for name, mode in run.ok_modes.items():
        if mode.time_breakdown is None or mode.time_breakdown.step is None:
            continue
        step = mode.time_breakdown.step
        kinds.add(step.op_us is not None)
        modes.append(name)
        for _, label, us in parts_of(step):
            series.setdefault(label, []).append(us / 1000)
    if not modes or len(kinds) != 1:
        return None
    return modes, series
