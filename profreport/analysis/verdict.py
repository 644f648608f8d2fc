"""One sentence per mode that states what happened: derived from the run record, never assumed.

The sentence names the evidence (fusion groups in the TorchScript graph, fused library calls,
Inductor's generated kernels), the kernel and modeled-traffic changes against eager, and whether
the latency change is outside the bootstrap interval.
"""

from __future__ import annotations

from profreport.analysis.mode_analysis import NO_ANALYSIS, ModeAnalysis
from profreport.analysis.paired import beyond_resolution, resolution_note
from profreport.analysis.traffic import measured_total
from profreport.format import fmt_bytes, signed_pct
from profreport.record.model import FailedFinding, ModeResult, OkMode, Run


def _latency_clause(mode: ModeResult) -> str:
    """The latency change in a few words: the numbers are in the headline, the noise guard's
    measurements in its own section; the clause names the first reason a change is not called."""
    sp = mode.speedup_vs_eager
    if sp is None:
        return ""
    lo, hi = sp.ci95
    if sp.inconclusive:
        reasons = sp.inconclusive.split("; ")
        more = f" and {len(reasons) - 1} more noise signal(s)" if len(reasons) > 1 else ""
        return f"latency inconclusive: {reasons[0]}{more} (see the noise guard)"
    noisy = ", widened for noise" if sp.widened else ", beyond the noise band" if sp.noise else ""
    # one process: its rounds only, a rerun may differ by more (issue 48); a call says so
    scope = f", {sp.covers}"
    unstable = f"; {sp.unstable}" if sp.unstable else ""
    called = beyond_resolution((lo, hi))
    if called > 0:
        return (
            f"{sp.median:.2f}x faster than eager (95% CI {lo:.2f}-{hi:.2f}{noisy}{scope}){unstable}"
        )
    if called < 0:
        return (
            f"{1 / sp.median:.2f}x slower than eager (95% CI of speedup {lo:.2f}-{hi:.2f}"
            f"{noisy}{scope}){unstable}"
        )
    within = resolution_note((lo, hi))
    if within:
        return f"latency: {within} (speedup {sp.median:.3f}, 95% CI {lo:.3f}-{hi:.3f})"
    return f"latency unchanged within noise (speedup {sp.median:.2f}, 95% CI {lo:.2f}-{hi:.2f})"


def _traffic_clause(mode: OkMode, eager: OkMode) -> str:
    """The traffic change from the source the headline shows (the mode's `traffic` finding:
    analysis/traffic.py), the modeled change beside a measured one, and why they disagree where
    they do."""
    change = mode.traffic
    if change is None:
        partial = sorted(set(mode.bytes.not_modeled + eager.bytes.not_modeled))
        return f"modeled traffic not comparable ({', '.join(partial)} not modeled)"
    percent = change.percent
    if percent is None:
        return ""
    said = f"{change.source} traffic {signed_pct(percent)}"
    if change.source == "modeled" or change.modeled_percent is None:
        return said
    modeled = f"modeled {signed_pct(change.modeled_percent)}"
    if change.differs:
        return f"{said} (Nsight Compute DRAM), {modeled}: {change.differs}"
    return f"{said} (Nsight Compute DRAM; {modeled})"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def output_clause(mode: ModeResult) -> str:
    """The first thing a verdict says when the mode's output is not eager's: a speedup that
    changes the result is not a speedup. Empty when it matches or was not checked."""
    check = mode.output_check
    if check is None or check.within_tolerance is not False:
        return ""
    facts = []
    if check.compared_tensors:
        facts.append(
            f"max abs err {_num(check.max_abs_err)}, max rel err "
            f"{_num(check.max_rel_err)}; tolerance rtol {_num(check.rtol)}, "
            f"atol {_num(check.atol)}"
        )
    if check.note:
        facts.append(check.note)
    return (
        f"OUTPUT DIFFERS from eager ({'; '.join(facts)}): "
        "a speedup that changes the result is not a speedup"
    )


def failed_finding_verdict(name: str, failed: FailedFinding) -> str:
    """The sentence in a verdict's place when deriving one of the mode's findings raised: which
    finding, what it raised, and that it is profreport's bug (the evidence stands)."""
    return (
        f"{name}: FINDING FAILED - deriving {failed.finding} raised {failed.error}; a profreport "
        "bug, not the model's: the evidence is kept, and `profreport render` derives the "
        "findings again once it is fixed"
    )


def verdict_for(name: str, run: Run, analysis: ModeAnalysis = NO_ANALYSIS) -> str:
    """The mode's verdict sentence; `analysis` says what its compiler fused (in its own words)."""
    mode = run.modes[name]
    if not isinstance(mode, OkMode):
        return f"{name}: {mode.status} - {mode.error}"
    traffic = mode.bytes
    k = mode.kernels.per_step
    total = traffic.read + traffic.written
    eager = run.modes.get("eager")
    if name == "eager" or not isinstance(eager, OkMode):
        lat_s = "" if mode.latency_ms is None else f", median {mode.latency_ms.median:.3f} ms"
        base = "baseline" if name == "eager" else "no eager baseline to compare"
        differs = output_clause(mode)
        base = f"{differs}; {base}" if differs else base
        measured = measured_total(mode)
        traffic_s = f"{fmt_bytes(total)} modeled traffic"
        if measured is not None:
            traffic_s = f"{fmt_bytes(measured)} measured traffic ({fmt_bytes(total)} modeled)"
        return f"{name}: {base} - {k} kernels per step, {traffic_s}{lat_s}"
    ek = eager.kernels.per_step
    if k < ek:
        kernels_text = f"{ek} eager kernels ran as {k} kernel{'s' if k != 1 else ''}"
    elif k > ek:
        kernels_text = f"{k} kernels per step, more than eager's {ek}"
    else:
        kernels_text = f"kernel count unchanged ({k} per step)"
    parts = [output_clause(mode), kernels_text, analysis.fusion_evidence(mode, run)]
    parts.append(_traffic_clause(mode, eager))
    parts.append(_latency_clause(mode))
    if mode.time_findings is not None:
        parts.append(mode.time_findings.clause)
    return f"{name}: " + "; ".join(p for p in parts if p)
