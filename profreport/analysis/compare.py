"""Compare two run records of the same model: what changed per mode, and what crossed a threshold.

A pure function over two typed runs (the result's types: analysis/comparison.py). Kernels and
launches come from the profiler, bytes from the model, latency from the timed samples: each
median gets its own 95% bootstrap interval. Two runs made at different times can meet the
machine in different states, so when both carry a machine reference (analysis/machine_reference)
a latency change is called only beyond what the reference moved, both intervals counted, and
gated on its change relative to the reference; runs recorded before it compare their
intervals alone. A change counts as a regression only beyond the threshold *and* the noise, so
noise never fails a gate. `ab` (base and head in the same rounds) gates on paired ratios.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from profreport.analysis.change import Change
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
from profreport.analysis.latency import bootstrap_median_ci
from profreport.analysis.machine_reference import MachineChange, machine_change
from profreport.analysis.paired import (
    NOISE_BAND,
    PairedGate,
    paired_gate,
    record_noise,
    resolution_note,
)
from profreport.format import fmt_bytes, fmt_ms, fmt_pct
from profreport.record.model import (
    Bytes,
    KernelCounts,
    Latency,
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


def _pct_limit(limit_pct: float | None) -> str | None:
    return None if limit_pct is None else f"+{limit_pct:g}%"


def _metric(metric: str, source: str, change: Change, **gate: Any) -> MetricChange:
    """One metric's numbers in base and head, their difference and relative change; `gate`: the
    limit applied, whether it was crossed, and a note."""
    return MetricChange(
        metric, source, change.base, change.head, change.difference, change.pct, **gate
    )


def _relative(
    metric: str, source: str, change: Change, limit_pct: float | None, note: str = ""
) -> MetricChange:
    """A metric gated on its growth relative to base (modeled bytes, peak memory)."""
    regression = limit_pct is not None and change.grew_beyond_pct(limit_pct)
    return _metric(
        metric, source, change, limit=_pct_limit(limit_pct), regression=regression, note=note
    )


def _kernels(base: KernelCounts, head: KernelCounts, limit: int | None) -> MetricChange:
    b, h = base.per_step, head.per_step
    return _metric(
        "kernels_per_step",
        "profiler",
        Change(b, h),
        limit=None if limit is None else f"+{limit} kernels",
        regression=limit is not None and h - b > limit,
    )


def _bytes(base: Bytes, head: Bytes, limit_pct: float | None) -> MetricChange:
    partial = [side for side, b in (("base", base), ("head", head)) if b.not_modeled]
    return _relative(
        "bytes_per_step",
        "modeled",
        Change(base.read + base.written, head.read + head.written),
        limit_pct,
        note=f"partial in {' and '.join(partial)} (some kernels not modeled)" if partial else "",
    )


def _peak_memory(
    base: PeakMemory | None, head: PeakMemory | None, limit_pct: float | None
) -> MetricChange:
    """Peak memory of one call (capture/peak_memory); gated like modeled bytes."""
    b_source = _as_stored(base, "source") if base is not None else None
    h_source = _as_stored(head, "source") if head is not None else None
    change = Change(
        base.bytes if base is not None else None, head.bytes if head is not None else None
    )
    source = h_source or b_source or "measured"
    if change.difference is None:
        missing = " and ".join(
            side for side, v in (("base", change.base), ("head", change.head)) if v is None
        )
        return _metric("peak_memory_bytes", source, change, note=f"not measured in {missing}")
    note = "" if b_source == h_source else "measured differently"
    return _relative("peak_memory_bytes", source, change, limit_pct, note=note)


def _latency(
    base: Latency | None,
    head: Latency | None,
    limit_pct: float | None,
    resamples: int,
    noise: list[str],
    load: MachineLoad | None,
    machine: MachineChange | None,
) -> MetricChange:
    bs = tuple(base.samples or ()) if base is not None else ()
    hs = tuple(head.samples or ()) if head is not None else ()
    if base is None or head is None or not bs or not hs:
        return _metric("latency_median_ms", "measured", Change(None, None), note="no timed samples")
    change = Change(base.median, head.median)
    b_ci = bootstrap_median_ci(bs, resamples=resamples)
    h_ci = bootstrap_median_ci(hs, resamples=resamples)
    pct = change.pct
    inconclusive: str | None = None
    paired: PairedGate | None = None
    relative_pct: float | None = None
    if load is not None:  # base and head timed in the same rounds (`ab`)
        gate = paired_gate(bs, hs, limit_pct, load)
        lo, hi = gate.ratio.ci95
        note = f"paired head/base {gate.ratio.median:.3f} (95% CI {lo:.3f}-{hi:.3f})"
        within = resolution_note((lo, hi))
        if within:
            note = f"{note}: {within}"
        regression, inconclusive, paired = gate.regression, gate.inconclusive, gate
        if inconclusive:
            note = f"latency inconclusive: {inconclusive}; {note}"
    elif machine is not None:  # two runs, each with its machine reference
        ratio_low, ratio_high = h_ci[0] / b_ci[1], h_ci[1] / b_ci[0]
        # the head/base ratio with the machine's own move taken out
        relative_pct = (head.median / base.median / machine.factor - 1) * 100
        beyond = machine.beyond(ratio_low, ratio_high)
        moved = f"{machine.low:.3f}-{machine.high:.3f}x"
        numbers = f"{fmt_pct(pct)} raw, {fmt_pct(relative_pct)} relative to the machine reference"
        within = "beyond" if beyond else "within"
        note = f"{numbers}: {within} what the reference moved (head/base {moved})"
        regression = limit_pct is not None and relative_pct > limit_pct and beyond > 0
        changed = f"the machine changed (head vs base: {machine.parts_text})"
        why = [changed] if machine.changed and not beyond else []
        if noise and not ratio_low > machine.high * NOISE_BAND:  # noisy timing: only a huge change
            why += noise
        if why:
            inconclusive, regression = "; ".join(why), False
            note = f"latency inconclusive: {inconclusive}; {numbers}"
    else:
        overlap = b_ci[0] <= h_ci[1] and h_ci[0] <= b_ci[1]
        note = "intervals overlap: within noise" if overlap else "intervals do not overlap"
        # Slower beyond the limit, and the head's whole interval lies above the base's.
        regression = (
            limit_pct is not None and pct is not None and pct > limit_pct and h_ci[0] > b_ci[1]
        )
        if noise and not h_ci[0] > b_ci[1] * NOISE_BAND:  # noisy timing: only a huge change
            inconclusive, regression = "; ".join(noise), False
            note = f"latency inconclusive: {inconclusive}"
    return _metric(
        "latency_median_ms",
        "measured",
        change,
        base_ci95=b_ci,
        head_ci95=h_ci,
        limit=_pct_limit(limit_pct),
        regression=regression,
        note=note,
        inconclusive=inconclusive,
        paired=paired,
        relative_change_pct=relative_pct,
    )


def _regression_message(mode: str, m: MetricChange) -> str:
    pct = fmt_pct(m.change_pct)
    limit = f"limit {m.limit}"
    if m.metric == "kernels_per_step":
        return f"{mode}: kernels per step {m.base:g} -> {m.head:g} ({m.change:+g}), {limit}"
    if m.metric in ("bytes_per_step", "peak_memory_bytes"):
        what = "modeled bytes per step" if m.metric == "bytes_per_step" else "peak memory"
        return f"{mode}: {what} {fmt_bytes(m.base)} -> {fmt_bytes(m.head)} ({pct}), {limit}"
    moved = f"{mode}: latency median {fmt_ms(m.base)} -> {fmt_ms(m.head)}"
    if m.paired is not None:
        ratio = m.paired.ratio
        return (
            f"{moved} ({pct}), {limit}, paired head/base {ratio.median:.3f}, "
            f"95% CI from {ratio.ci95[0]:.3f}"
        )
    if m.relative_change_pct is not None:
        return (
            f"{moved} ({pct} raw, {fmt_pct(m.relative_change_pct)} relative to the machine "
            f"reference), {limit}, beyond what the reference moved"
        )
    return f"{moved} ({pct}), {limit}, 95% intervals do not overlap"


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
    paired_load: MachineLoad | None = None,
    allow_different_models: bool = False,
) -> Comparison:
    """Compare two validated runs (derived: fusion maps and kernel bytes in place); raise
    CompareError if they cannot be compared: different device types, or different models
    (DifferentModels) unless `allow_different_models`.

    `paired_load` (from `ab`, which timed base and head in the same rounds) switches the latency
    gate to per-round head/base ratios; the machine load it carries feeds the noise guard.
    Otherwise the runs' machine references (when both have one) say what the machine alone did
    to a latency.
    """
    if base.model.name != head.model.name and not allow_different_models:
        raise DifferentModels(
            f"different models: base {base.model.name!r}, head {head.model.name!r}"
        )
    if base.device.type != head.device.type:
        raise CompareError(
            f"different device types: base {base.device.type!r}, head {head.device.type!r}"
        )

    machine, machine_note = (None, "") if paired_load is not None else machine_change(base, head)
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
            metrics = [
                _kernels(b.kernels, h.kernels, thresholds.max_kernel_increase),
                _metric(
                    "launches_per_step", "profiler", Change(b.kernels.launches, h.kernels.launches)
                ),
                _bytes(b.bytes, h.bytes, thresholds.max_bytes_increase_pct),
                _peak_memory(b.peak_memory, h.peak_memory, thresholds.max_peak_memory_increase_pct),
                _latency(
                    b.latency_ms,
                    h.latency_ms,
                    thresholds.max_latency_regression_pct,
                    resamples,
                    noise,
                    paired_load,
                    machine,
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
        machine_note=machine.summary if machine is not None else machine_note,
    )
