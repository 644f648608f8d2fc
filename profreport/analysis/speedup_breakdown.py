"""What a mode's speedup is made of: a finding from the record's evidence (pure).

From each mode's time breakdown (the profiled step of median wall time, record.TimeBreakdown):
Δ step time = Δ kernel time (CPU kernels on a CPU run, the device's busy time on a GPU run) +
Δ host overhead and idle (the rest of the step: dispatch, wrappers, Python, launch and runtime
calls, device idle). Of the kernel time saved, the most the saved bytes can explain is the
modeled bytes saved ÷ the measured memory bandwidth (the run's ceilings); the rest is compute or
a different library call. The bytes are never credited with more than that, nor with more than
the kernel time saved; without measured ceilings their share is stated as unknown.

The decomposition uses profiled step times (the profiler on): they are longer than the timed
latency, by the profiler's per-op overhead most where ops are many, so the finding names both.
"""

from __future__ import annotations

import dataclasses
import math

from profreport.analysis.time_breakdown import bound_of
from profreport.record.model import Ceilings, ModeResult, StepTime, TimeFindings


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


def _step(mode: ModeResult) -> StepTime | None:
    return None if mode.time_breakdown is None else mode.time_breakdown.step


def _work_us(step: StepTime) -> float:
    """Kernel time of a step: CPU kernels (cpu definition) or device busy time (device)."""
    if step.op_us is not None:
        return step.op_us
    return step.device_busy_us or 0.0


def _ops(step: StepTime) -> int:
    return step.dispatched_ops if step.op_us is not None else step.launches


def _bandwidth(ceilings: Ceilings | None) -> float | None:
    if ceilings is None or ceilings.memory_bandwidth is None:
        return None
    return ceilings.memory_bandwidth.value


def _bytes_saved(mode: ModeResult, eager: ModeResult) -> int | None:
    """Modeled traffic eager - mode; None when either side left kernels unmodeled."""
    if mode.bytes is None or eager.bytes is None:
        return None
    if mode.bytes.not_modeled or eager.bytes.not_modeled:
        return None
    return eager.bytes.traffic - mode.bytes.traffic


def bytes_credit_us(work_saved_us: float, bound_us: float | None) -> float | None:
    """Time the saved bytes are credited with: at most bytes ÷ bandwidth (``bound_us``), at
    most the kernel time saved, never negative; None when the bound is unknown."""
    if bound_us is None:
        return None
    return max(0.0, min(work_saved_us, bound_us))


def time_findings(
    name: str, mode: ModeResult, eager: ModeResult | None, ceilings: Ceilings | None
) -> TimeFindings | None:
    """The bound of ``mode``'s profiled step and, against eager's, what its time saved is made
    of; None when the record has no time breakdown for the mode (records written before)."""
    step = _step(mode)
    if step is None:
        return None
    bound = bound_of(step)
    base = None if eager is None or name == "eager" else _step(eager)
    if eager is None or base is None:
        return TimeFindings(bound=bound.label, bound_evidence=bound.evidence)
    saved = base.wall_us - step.wall_us
    work_saved = _work_us(base) - _work_us(step)
    bytes_saved = _bytes_saved(mode, eager)
    bandwidth = _bandwidth(ceilings)
    bytes_bound = (
        None
        if bytes_saved is None or bandwidth is None or bandwidth <= 0
        else max(bytes_saved, 0) / bandwidth * 1e6
    )
    findings = TimeFindings(
        bound=bound.label,
        bound_evidence=bound.evidence,
        basis=_basis(mode, eager),
        eager_step_us=base.wall_us,
        step_us=step.wall_us,
        saved_us=round(saved, 3),
        work_saved_us=round(work_saved, 3),
        overhead_saved_us=round(saved - work_saved, 3),
        eager_ops=_ops(base),
        ops=_ops(step),
        bytes_saved=bytes_saved,
        bandwidth_bytes_per_s=bandwidth,
        bytes_bound_us=None if bytes_bound is None else _down(bytes_bound),
        bytes_credit_us=None
        if bytes_bound is None
        else _down(bytes_credit_us(work_saved, bytes_bound) or 0.0),
    )
    return dataclasses.replace(findings, clause=_clause(findings, step, mode, eager))


def _basis(mode: ModeResult, eager: ModeResult) -> str:
    timed = [
        f"{m.latency_ms.median:.3g} ms" if m.latency_ms is not None else "not timed"
        for m in (eager, mode)
    ]
    return (
        "profiled steps (profiler on): each mode's ProfilerStep of median wall time; "
        f"timed without the profiler: eager {timed[0]}, this mode {timed[1]}"
    )


def _clause(f: TimeFindings, step: StepTime, mode: ModeResult, eager: ModeResult) -> str:
    assert f.saved_us is not None and f.work_saved_us is not None
    assert f.overhead_saved_us is not None and f.eager_step_us is not None
    cpu = step.op_us is not None
    work, overhead = (
        ("op time", "host overhead")
        if cpu
        else (
            "kernel time",
            "host overhead and device idle",
        )
    )
    ops = f"{f.eager_ops} → {f.ops} {'dispatched ops' if cpu else 'launches'}"
    head = f"profiled step {_ms(f.eager_step_us)} → {_ms(f.step_us or 0.0)} (profiler on)"
    saved, w, o = f.saved_us, f.work_saved_us, f.overhead_saved_us
    refused = _not_decomposed(mode, saved)
    if refused:
        return f"{head}, not decomposed: {refused}"
    if saved > 0 and w >= 0 and o >= 0:
        parts = (
            f"{head}: {o / saved:.0%} of the {_ms(saved)} saved is {overhead} ({ops}), "
            f"{w / saved:.0%} {work}"
        )
    else:
        verb = "saved" if saved > 0 else "lost"
        parts = (
            f"{head}, {_ms(abs(saved))} {verb}: {work} {_signed(-w)}, "
            f"{overhead} {_signed(-o)} ({ops})"
        )
    return f"{parts}; {_bytes_words(f, work, eager)}"


def _not_decomposed(mode: ModeResult, saved_us: float) -> str:
    """Why the profiled difference is not decomposed, or "": a timed latency with no clear
    change, or one that points the other way, leaves the profiled difference unexplained."""
    sp = mode.speedup_vs_eager
    if sp is None or len(sp.ci95) != 2:
        return ""  # not timed: the profiled steps are all there is (the basis says so)
    lo, hi = sp.ci95
    if sp.inconclusive or lo <= 1.0 <= hi:
        return "the timed latency shows no clear change"
    if (lo > 1.0) != (saved_us > 0):
        return "the timed latency and the profiled steps disagree (profiler overhead or noise)"
    return ""


def _signed(us: float) -> str:
    return f"{'+' if us >= 0 else '−'}{_ms(abs(us))}"


def _bytes_words(f: TimeFindings, work: str, eager: ModeResult) -> str:
    if f.bytes_saved is None:
        return "the bytes' share is unknown (modeled traffic not comparable)"
    if f.bandwidth_bytes_per_s is None or f.bytes_bound_us is None:
        return "the bytes' share is unknown (bandwidth not measured)"
    if f.bytes_saved <= 0:
        return "no modeled bytes saved"
    before = eager.bytes.traffic if eager.bytes is not None else 0
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
