"""Compare two run records of the same model: what changed per mode, and what crossed a threshold.

A pure function over two typed runs (the result's types: analysis/comparison.py). Kernels and
launches come from the profiler, bytes from the model, latency from the timed samples
(analysis/compare_latency.py): two runs made apart are judged across their timing processes,
the machine reference a witness that can withhold a change and never create one; `ab` (base and
head in the same rounds) gates on paired ratios. A change counts as a regression only beyond
the threshold *and* the noise, so noise never fails a gate; a change beyond the threshold that
cannot be judged is inconclusive.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from profreport.analysis.compare_latency import (
    METRIC,
    latency_change,
    pct_limit,
    regression_message,
)
from profreport.analysis.comparison import (
    CompareError,
    Comparison,
    DifferentModels,
    GateOutcome,
    MetricChange,
    ModeComparison,
    Regression,
    RunIdentity,
    Thresholds,
    inconclusive_latencies,
)
from profreport.analysis.kernel_diff import ModeKernelDiff, mode_kernel_diff
from profreport.analysis.machine_reference import MachineChange, machine_change
from profreport.analysis.paired import beyond_resolution, busy_band, record_noise
from profreport.analysis.speedups import mode_processes
from profreport.format import fmt_bytes, fmt_pct
from profreport.record.model import (
    Bytes,
    KernelCounts,
    MachineLoad,
    OkMode,
    PeakMemory,
    Run,
    Section,
)

__all__ = [
    "CompareError",
    "Comparison",
    "DifferentModels",
    "GateOutcome",
    "MetricChange",
    "ModeComparison",
    "Regression",
    "RunIdentity",
    "Thresholds",
    "compare_runs",
]

NO_THRESHOLDS = Thresholds()  # report every change, gate on none


def _identity(run: Run, label: str) -> RunIdentity:
    return RunIdentity(
        label=label,
        created_utc=run.created_utc,
        torch=run.env.torch,
        device_name=run.device.name,
    )


def _as_stored(section: Section, name: str) -> Any:
    """`section.<name>` as its document held it, None when the key was absent: a record written
    before a field existed (memory_format, inputs) differs from one that has it."""
    return section.to_json().get(name)


# What makes numbers less comparable but is a legitimate thing to compare: (what, section, field).
_SETUP: tuple[tuple[str, Callable[[Run], Section], str], ...] = (
    ("inputs", lambda r: r.model, "inputs"),
    ("dtype", lambda r: r.model, "dtype"),
    ("memory format", lambda r: r.model, "memory_format"),
    ("device", lambda r: r.device, "name"),
    ("torch", lambda r: r.env, "torch"),
    ("intra-op threads", lambda r: r.env, "threads"),
)


def _inputs_text(run: Run) -> str:
    inputs = run.model.inputs
    if not inputs:
        return "not recorded"
    return ", ".join(f"{tuple(i.shape)} {i.dtype}" for i in inputs)


def model_differences(base: Run, head: Run) -> list[str]:
    """What differs between the two runs' models: name, spec, parameter count, inputs (a spec
    or parameter count one record does not hold is no difference: an older record, or a model
    passed as an object)."""
    b, h = base.model, head.model
    out = []
    for what in ("name", "spec", "parameters"):
        b_value, h_value = getattr(b, what), getattr(h, what)
        if b_value is not None and h_value is not None and b_value != h_value:
            if isinstance(b_value, int) and isinstance(h_value, int):
                out.append(f"{what}: base {b_value:,}, head {h_value:,} ({h_value - b_value:+,})")
            else:
                out.append(f"{what}: base {b_value!r}, head {h_value!r}")
    if _as_stored(b, "inputs") != _as_stored(h, "inputs"):
        out.append(f"inputs: base {_inputs_text(base)}, head {_inputs_text(head)}")
    return out


def _setup_warnings(base: Run, head: Run, models_differ: bool) -> list[str]:
    out = []
    for what, section, name in _SETUP:
        if models_differ and what == "inputs":
            continue  # two models: stated with the model differences
        a, b = _as_stored(section(base), name), _as_stored(section(head), name)
        if a != b:
            out.append(f"{what} differ: base {a!r}, head {b!r}")
    return out


def _relative(
    metric: str,
    source: str,
    base: float | None,
    head: float | None,
    limit_pct: float | None,
    note: str = "",
) -> MetricChange:
    """A metric gated on its growth relative to base (modeled bytes, peak memory)."""
    m = MetricChange.of(base, head, metric=metric, source=source, limit=pct_limit(limit_pct))
    regression = limit_pct is not None and m.grew_beyond_pct(limit_pct)
    return replace(m, regression=regression, note=note)


def _kernels(base: KernelCounts, head: KernelCounts, limit: int | None) -> MetricChange:
    b, h = base.per_step, head.per_step
    return MetricChange.of(
        b,
        h,
        metric="kernels_per_step",
        source="profiler",
        limit=None if limit is None else f"+{limit} kernels",
        regression=limit is not None and h - b > limit,
    )


def _bytes(base: Bytes, head: Bytes, limit_pct: float | None) -> MetricChange:
    partial = [side for side, b in (("base", base), ("head", head)) if b.not_modeled]
    return _relative(
        "bytes_per_step",
        "modeled",
        base.read + base.written,
        head.read + head.written,
        limit_pct,
        note=f"partial in {' and '.join(partial)} (some kernels not modeled)" if partial else "",
    )


def _peak_memory(
    base: PeakMemory | None, head: PeakMemory | None, limit_pct: float | None
) -> MetricChange:
    """Peak memory of one call (capture/peak_memory); gated like modeled bytes."""
    b_source = _as_stored(base, "source") if base is not None else None
    h_source = _as_stored(head, "source") if head is not None else None
    b, h = (None if side is None else side.bytes for side in (base, head))
    source = h_source or b_source or "measured"
    if b is None or h is None:
        missing = " and ".join(side for side, v in (("base", b), ("head", h)) if v is None)
        note = f"not measured in {missing}"
        return MetricChange.of(b, h, metric="peak_memory_bytes", source=source, note=note)
    note = "" if b_source == h_source else "measured differently"
    return _relative("peak_memory_bytes", source, b, h, limit_pct, note=note)


def _regression_message(mode: str, m: MetricChange) -> str:
    pct = fmt_pct(m.change_pct)
    limit = f"limit {m.limit}"
    if m.metric == "kernels_per_step":
        return f"{mode}: kernels per step {m.base:g} -> {m.head:g} ({m.change:+g}), {limit}"
    if m.metric in ("bytes_per_step", "peak_memory_bytes"):
        what = "modeled bytes per step" if m.metric == "bytes_per_step" else "peak memory"
        return f"{mode}: {what} {fmt_bytes(m.base)} -> {fmt_bytes(m.head)} ({pct}), {limit}"
    return regression_message(mode, m)


def _new_kernels(mode: str, kernels: ModeKernelDiff, pattern: str | None) -> list[Regression]:
    """A regression for each kernel that appeared in head and matches `pattern` (re.search)."""
    if pattern is None:
        return []
    return [
        Regression(
            mode,
            "new_kernel",
            f"{mode}: new kernel {row.name} ({row.calls_change:+g} per step) matches "
            f"the new-kernel pattern {pattern!r}",
        )
        for row in kernels.of_status("appeared")
        if re.search(pattern, row.name)
    ]


def compare_runs(
    base: Run,
    head: Run,
    thresholds: Thresholds = NO_THRESHOLDS,
    base_label: str = "base",
    head_label: str = "head",
    resamples: int = 2000,
    paired_loads: Sequence[MachineLoad | None] | None = None,
    allow_different_models: bool = False,
) -> Comparison:
    """Compare two validated runs (derived: fusion maps and kernel bytes in place); raise
    CompareError if they cannot be compared: different device types, or different models
    (DifferentModels) unless `allow_different_models`.

    `paired_loads` (from `ab`, which timed base and head in the same rounds: the machine load
    of each timing process) switches the latency gate to per-round head/base ratios; the loads
    feed the noise guard. Otherwise latency is judged across the two runs' processes, the
    machine references (when both have one) a witness (analysis/compare_latency.py).
    """
    if base.model.name != head.model.name and not allow_different_models:
        raise DifferentModels(
            f"different models: base {base.model.name!r}, head {head.model.name!r}"
        )
    if base.device.type != head.device.type:
        raise CompareError(
            f"different device types: base {base.device.type!r}, head {head.device.type!r}"
        )

    machine, machine_note = (None, "") if paired_loads is not None else machine_change(base, head)
    factor = machine.factor if machine is not None and machine.changed else None
    modes: list[ModeComparison] = []
    regressions: list[Regression] = []
    for name in [m for m in base.modes if m in head.modes]:
        b, h = base.mode(name), head.mode(name)
        metrics: list[MetricChange] = []
        kernels = None
        if isinstance(b, OkMode) and isinstance(h, OkMode):
            noise = [f"base: {r}" for r in record_noise(base, name)]
            noise += [f"head: {r}" for r in record_noise(head, name)]
            loads = [r.timing_noise.load if r.timing_noise else None for r in (base, head)]
            metrics = [
                _kernels(b.kernels, h.kernels, thresholds.max_kernel_increase),
                MetricChange.of(
                    b.kernels.launches,
                    h.kernels.launches,
                    metric="launches_per_step",
                    source="profiler",
                ),
                _bytes(b.bytes, h.bytes, thresholds.max_bytes_increase_pct),
                _peak_memory(b.peak_memory, h.peak_memory, thresholds.max_peak_memory_increase_pct),
                latency_change(
                    mode_processes(base, name),
                    mode_processes(head, name),
                    thresholds.max_latency_regression_pct,
                    resamples,
                    noise,
                    paired_loads,
                    machine,
                    busy_band(loads),
                ),
            ]
            kernels = mode_kernel_diff(name, b, h, factor)
            regressions += _new_kernels(name, kernels, thresholds.new_kernel_pattern)
            regressions += [
                Regression(name, m.metric, _regression_message(name, m))
                for m in metrics
                if m.regression
            ]
        elif isinstance(b, OkMode) and thresholds.any_set:
            # A mode that worked and now does not is worse than any number: gate on it too.
            error = h.error or h.status
            regressions.append(Regression(name, "status", f"{name}: was ok, now {error}"))
        modes.append(ModeComparison(name, b.status, h.status, metrics, kernels))

    differences = model_differences(base, head)
    names = (base.model.name, head.model.name)
    return Comparison(
        model=names[0] if names[0] == names[1] else f"{names[0]} vs {names[1]}",
        device_type=base.device.type,
        base=_identity(base, base_label),
        head=_identity(head, head_label),
        thresholds=thresholds,
        modes=modes,
        only_in_base=[m for m in base.modes if m not in head.modes],
        only_in_head=[m for m in head.modes if m not in base.modes],
        warnings=_setup_warnings(base, head, names[0] != names[1]),
        regressions=regressions,
        regressed=bool(regressions),
        inconclusive=inconclusive_latencies(modes),
        model_differences=differences,
        machine=machine,
        machine_note=_machine_note(machine, modes) if machine is not None else machine_note,
    )


def _machine_note(machine: MachineChange, modes: Sequence[ModeComparison]) -> str:
    """The references' one line; when they moved and no mode's latency did, said so: the
    reference measured its own process as much as the machine (issue 48: its copy part moved
    1.48x between two processes of the same code, eager 0.5%)."""
    latencies = [m for mc in modes if (m := mc.metric(METRIC)) is not None and m.ratio_ci95]
    if not machine.changed or not latencies:
        return machine.summary
    if any(beyond_resolution(m.ratio_ci95) for m in latencies if m.ratio_ci95 is not None):
        return machine.summary
    return (
        f"{machine.summary}; no mode's latency moved beyond what the runs can tell apart: the "
        "reference moved when the model did not (it measures its own process as much as the "
        "machine)"
    )
