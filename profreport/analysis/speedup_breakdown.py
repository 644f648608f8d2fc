"""What a mode's speedup is made of: a finding from the record's evidence (pure).

The quantity explained is the clock's: the timed saving per call, eager's timed median x
(1 - 1 / the paired speedup), i.e. eager's median minus the mode's as the paired rounds estimate
it (the headline's number). The profiled steps supply its parts, each mode's step taken as the
median over its light pass's steps of each part with the profiler's own cost removed
(analysis/profiler_cost): Δ step = Δ kernel time (CPU kernels and the ops the profiler cannot
see, inferred, on a CPU run; the device's busy time on a GPU run) + Δ host overhead and idle
(the rest). The profiled saving is decomposed only where it agrees with the timed one: within
AGREE_SHARE of eager's timed median and of the same sign; otherwise both are stated and nothing
is split. Of the kernel time saved, the most the saved bytes can explain is the modeled bytes
saved ÷ the measured memory bandwidth (the run's ceilings); never more than that, nor more than
the kernel time saved; without measured ceilings their share is unknown.

A mode with a build time and a timed saving pays it back after compile_s ÷ the saving per call.
"""

from __future__ import annotations

import dataclasses
import math

from profreport.analysis.paired import beyond_resolution
from profreport.analysis.profiler_cost import mode_median_step
from profreport.analysis.time_breakdown import bound_of
from profreport.record.model import Ceilings, MedianStep, ModeResult, OkMode, TimeFindings

AGREE_SHARE = 0.25  # of eager's timed median: the Done-when of issue 35


def _ms(us: float, at_most: bool = False) -> str:
    """Milliseconds to 3 significant digits, no exponent; ``at_most`` rounds down, so a bound
    is never stated above its value."""
    ms = us / 1000
    if ms == 0:
        return "0 ms"
    digits = max(0, 2 - math.floor(math.log10(abs(ms))))
    if at_most:
        ms = math.floor(ms * 10**digits) / 10**digits
    text = f"{ms:,.{digits}f}"
    return f"{text.rstrip('0').rstrip('.') if '.' in text else text} ms"


def _down(us: float) -> float:
    """To the ns below: a bound is kept at or under its value."""
    return math.floor(us * 1000) / 1000


def _bytes_saved(mode: OkMode, eager: OkMode) -> int | None:
    """Modeled traffic eager - mode; None when either side left kernels unmodeled."""
    if mode.bytes.not_modeled or eager.bytes.not_modeled:
        return None
    return eager.bytes.traffic - mode.bytes.traffic


def bytes_credit_us(work_saved_us: float, bound_us: float) -> float:
    """Time the saved bytes are credited with: at most bytes ÷ bandwidth (``bound_us``), at
    most the kernel time saved, never negative."""
    return max(0.0, min(work_saved_us, bound_us))


def timed_saving_us(mode: ModeResult, eager: ModeResult) -> float | None:
    """The timed saving per call (µs): eager's median x (1 - 1 / the paired speedup); the
    medians' difference where the record has no paired speedup; None where either is untimed."""
    if eager.latency_ms is None:
        return None
    base = eager.latency_ms.median * 1000
    sp = mode.speedup_vs_eager
    if sp is not None and sp.median > 0:
        return base * (1 - 1 / sp.median)
    if mode.latency_ms is None:
        return None
    return base - mode.latency_ms.median * 1000


def agrees(profiled_us: float, timed_us: float, eager_timed_us: float) -> bool:
    """The profiled saving is within AGREE_SHARE of eager's timed median of the timed one, and
    not of the opposite sign."""
    if profiled_us * timed_us < 0:
        return False
    return abs(profiled_us - timed_us) <= AGREE_SHARE * eager_timed_us


def _busy(mode: ModeResult) -> tuple[str, ...]:
    tb = mode.time_breakdown
    return () if tb is None or not tb.busy else tb.busy


def _no_clear_change(mode: ModeResult) -> bool:
    """The verdict calls no latency change (inconclusive, or the interval not wholly beyond the
    paired timer's resolution): then no part of the time is decomposed, anywhere."""
    sp = mode.speedup_vs_eager
    return sp is not None and (bool(sp.inconclusive) or beyond_resolution(sp.ci95) == 0)


def payback_calls(mode: ModeResult, saved_us: float | None) -> float | None:
    """Calls after which the mode's build time is paid back: compile_s ÷ the timed saving per
    call; None without a build time, a timed saving or a clear speedup."""
    if saved_us is None or saved_us <= 0 or mode.compile_s is None or _no_clear_change(mode):
        return None
    return None if mode.speedup_vs_eager is None else round(mode.compile_s * 1e6 / saved_us, 1)


def time_findings(
    name: str, mode: OkMode, eager: OkMode | None, ceilings: Ceilings | None
) -> TimeFindings | None:
    """The bound of ``mode``'s median step and, against eager's, what its timed saving is made
    of; None when the record has no time breakdown for the mode (records written before)."""
    step = mode_median_step(mode)
    if step is None:
        return None
    bound = bound_of(step.with_inferred_as_kernels)
    own = TimeFindings(
        bound=bound.label,
        bound_evidence=bound.evidence,
        step_us=round(step.total_us, 3),
        profiler_cost_us=round(step.removed_us, 3) if step.corrected else None,
        inferred_us=round(step.inferred_us, 3) if step.inferred_ops else None,
        inferred_ops=step.inferred_ops or None,
        steps=step.steps,
        busy=_busy(mode) or None,
    )
    base = None if eager is None or name == "eager" else mode_median_step(eager)
    if eager is None or base is None:
        return own
    profiled = base.total_us - step.total_us
    work_saved = base.work_us - step.work_us
    timed = timed_saving_us(mode, eager)
    saved = profiled if timed is None else timed
    eager_timed = None if eager.latency_ms is None else eager.latency_ms.median * 1000
    bytes_saved = _bytes_saved(mode, eager)
    measured = None if ceilings is None else ceilings.memory_bandwidth
    bandwidth = None if measured is None else measured.value
    bytes_bound = (
        None
        if bytes_saved is None or bandwidth is None or bandwidth <= 0
        else max(bytes_saved, 0) / bandwidth * 1e6
    )
    findings = dataclasses.replace(
        own,
        basis=_basis(base, step, eager, mode),
        eager_step_us=round(base.total_us, 3),
        saved_us=round(saved, 3),
        work_saved_us=round(work_saved, 3),
        overhead_saved_us=round(profiled - work_saved, 3),
        eager_ops=base.ops,
        ops=step.ops,
        bytes_saved=bytes_saved,
        bandwidth_bytes_per_s=bandwidth,
        bytes_bound_us=None if bytes_bound is None else _down(bytes_bound),
        bytes_credit_us=None
        if bytes_bound is None
        else _down(bytes_credit_us(work_saved, bytes_bound)),
        profiled_saved_us=round(profiled, 3),
        unexplained_us=None if timed is None else round(timed - profiled, 3),
        agrees=None
        if timed is None or eager_timed is None
        else agrees(profiled, timed, eager_timed),
        eager_profiler_cost_us=round(base.removed_us, 3) if base.corrected else None,
        busy=tuple(dict.fromkeys(_busy(mode) + _busy(eager))) or None,
        payback_calls=payback_calls(mode, timed),
    )
    return dataclasses.replace(
        findings,
        clause=_clause(findings, mode, step),
        detail=_detail(findings, mode, eager, base, step),
    )


def _basis(base: MedianStep, step: MedianStep, eager: ModeResult, mode: ModeResult) -> str:
    timed = [
        f"{m.latency_ms.median:.3g} ms" if m.latency_ms is not None else "not timed"
        for m in (eager, mode)
    ]
    clock = f"timed without the profiler: eager {timed[0]}, this mode {timed[1]}"
    if base.corrected and step.corrected:
        steps = f"{base.steps} and {step.steps}" if base.steps != step.steps else f"{step.steps}"
        return (
            f"{clock}; profiled: a light pass (no shapes, no FLOPs), each part the median of "
            f"{steps} steps with the profiler's cost (measured in this run) removed"
        )
    return (
        f"{clock}; profiled: each mode's ProfilerStep of median wall time, the profiler's own "
        "cost inside (not measured: a record written before)"
    )


def _work_words(cpu: bool) -> tuple[str, str]:
    return ("kernel time", "host overhead") if cpu else ("kernel time", "host overhead and idle")


def _signed(us: float) -> str:
    return f"{'+' if us >= 0 else '−'}{_ms(abs(us))}"


def _clause(f: TimeFindings, mode: ModeResult, step: MedianStep) -> str:
    """The verdict's short clause: the timed saving, kernel time's share of it and what the
    bytes explain; or why it is not decomposed."""
    saved, profiled = f.saved_us or 0.0, f.profiled_saved_us or 0.0
    work, overhead = f.work_saved_us or 0.0, f.overhead_saved_us or 0.0
    busy = " (profiled while the machine was busy)" if f.busy else ""
    if _no_clear_change(mode):
        return f"no clear timed change: time not decomposed{busy}"
    verb = "saved" if saved >= 0 else "lost"
    head = f"{verb} {_ms(abs(saved))}"
    if f.agrees is False:
        other = "saved" if profiled >= 0 else "lost"
        other = "" if other == verb else f"{other} "
        return f"{head} timed but {other}{_ms(abs(profiled))} profiled: not decomposed{busy}"
    if mode.speedup_vs_eager is None and mode.latency_ms is None:
        head = f"profiled step {verb} {_ms(abs(saved))} (not timed)"
    work_name, overhead_name = _work_words(step.cpu)
    credit = f.bytes_credit_us
    bytes_part = (
        f"bytes explain at most {_ms(credit, at_most=True)}"
        if credit is not None and work > 0 and (f.bytes_saved or 0) > 0
        else ""
    )
    if profiled > 0 and work >= 0 and overhead >= 0:
        text = f"{head}: {work / profiled:.0%} {work_name}"
        return text + (f", of which {bytes_part}" if bytes_part else "") + busy
    of_it = f" ({bytes_part})" if bytes_part else ""
    return (
        f"{head}: {work_name} {_signed(-work)}{of_it}, {overhead_name} {_signed(-overhead)}{busy}"
    )


def _detail(
    f: TimeFindings, mode: ModeResult, eager: OkMode, base: MedianStep, step: MedianStep
) -> str:
    """The whole decomposition, for the "Where the time goes" section; for a change the verdict
    does not call, only the timed numbers and that it is not decomposed."""
    saved, profiled = f.saved_us or 0.0, f.profiled_saved_us or 0.0
    work, overhead = f.work_saved_us or 0.0, f.overhead_saved_us or 0.0
    work_name, overhead_name = _work_words(step.cpu)
    parts = []
    sp = mode.speedup_vs_eager
    if eager.latency_ms is not None and mode.latency_ms is not None:
        ratio = f", paired speedup {sp.median:.2f}x" if sp is not None else ""
        parts.append(
            f"timed: eager {_ms(eager.latency_ms.median * 1000)} → "
            f"{_ms(mode.latency_ms.median * 1000)}, {_signed(-saved)} per call{ratio}"
        )
    if _no_clear_change(mode):
        parts.append("not decomposed: the verdict calls no latency change")
        if f.busy:
            parts.append(f"profiled while the machine was busy: {f.busy[0]}")
        return "; ".join(parts)
    removed = (
        f", the profiler's cost removed: {_ms(base.removed_us)} of eager's step, "
        f"{_ms(step.removed_us)} of this one's"
        if base.corrected and step.corrected
        else ", the profiler's own cost inside: not measured in this record"
    )
    profiled_text = (
        f"profiled (median of {step.steps} steps per part{removed}): eager "
        f"{_ms(base.total_us)} → {_ms(step.total_us)}, {_signed(-profiled)}"
    )
    if f.unexplained_us is not None and eager.latency_ms is not None:
        share = abs(f.unexplained_us) / (eager.latency_ms.median * 1000)
        profiled_text += (
            f" ({_ms(abs(f.unexplained_us))} from the timed change, {share:.0%} of eager's "
            f"timed median{'' if f.agrees else ': too far to decompose'})"
        )
    parts.append(profiled_text)
    inferred = (
        f" (of it {_ms(step.inferred_us)} inferred: {', '.join(step.inferred_ops)}, which the "
        "profiler cannot see, from the unrecorded time of its enclosing frame)"
        if step.inferred_ops
        else ""
    )
    ops = f"{base.ops} → {step.ops} {'dispatched ops' if step.cpu else 'launches'}"
    parts.append(
        f"{work_name} {_ms(base.work_us)} → {_ms(step.work_us)}{inferred}, {_signed(-work)}; "
        f"{overhead_name} {_signed(-overhead)} ({ops})"
    )
    parts.append(_bytes_words(f, work_name, eager))
    if f.payback_calls is not None and mode.compile_s is not None:
        parts.append(payback_text(mode.compile_s, f.payback_calls, saved))
    if f.busy:
        parts.append(f"profiled while the machine was busy: {f.busy[0]}")
    return "; ".join(parts)


def payback_text(compile_s: float, calls: float, saved_us: float) -> str:
    """ "the 3.7 s build is paid back after 1,700 calls (3.7 s ÷ 2.2 ms saved per call)"."""
    return (
        f"the {compile_s:.3g} s build is paid back after {math.ceil(calls):,} calls "
        f"({compile_s:.3g} s ÷ {_ms(saved_us)} saved per call)"
    )


def _bytes_words(f: TimeFindings, work: str, eager: OkMode) -> str:
    if f.bytes_saved is None:
        return "the bytes' share is unknown (modeled traffic not comparable)"
    if f.bandwidth_bytes_per_s is None or f.bytes_bound_us is None:
        return "the bytes' share is unknown (bandwidth not measured)"
    if f.bytes_saved <= 0:
        return "no modeled bytes saved"
    before = eager.bytes.traffic
    fewer = f"the {f.bytes_saved / before:.0%} fewer modeled bytes" if before else "the bytes"
    rate = f"at {f.bandwidth_bytes_per_s / 1e9:.3g} GB/s measured"
    work_saved = f.work_saved_us or 0.0
    if work_saved <= 0:
        bound = _ms(f.bytes_bound_us, at_most=True)
        return f"{fewer} could explain at most {bound} ({rate}), but {work} did not drop"
    credit = f.bytes_credit_us or 0.0
    rest = work_saved - credit
    tail = f", the other {_ms(rest)} is compute or a different library call" if rest > 0 else ""
    return f"{fewer} explain at most {_ms(credit, at_most=True)} of it ({rate}){tail}"
