"""One sentence per mode that states what happened: derived from the run record, never assumed.

The sentence names the evidence (fusion groups in the TorchScript graph, fused library calls,
Inductor's generated kernels), the kernel and modeled-traffic changes against eager, and whether
the latency change is outside the bootstrap interval.
"""

from __future__ import annotations

from typing import Any

from profreport.format import fmt_bytes


def _fusion_evidence(name: str, mode: dict[str, Any], record: dict[str, Any]) -> str:
    """What the mode's compiler fused, in the mode's own words (see profreport.modes)."""
    from profreport.modes.registry import mode_for

    return mode_for(name).fusion_evidence(mode, record)


def _latency_clause(mode: dict[str, Any]) -> str:
    sp = mode.get("speedup_vs_eager")
    if not sp:
        return ""
    lo, hi = sp["ci95"]
    if sp.get("inconclusive"):
        return (
            f"latency inconclusive: {sp['inconclusive']} (paired speedup {sp['median']:.2f}, "
            f"95% CI {lo:.2f}-{hi:.2f})"
        )
    noisy = f", beyond the noise band although {sp['noise']}" if sp.get("noise") else ""
    if lo > 1.0:
        return f"{sp['median']:.2f}x faster than eager (95% CI {lo:.2f}-{hi:.2f}{noisy})"
    if hi < 1.0:
        return (
            f"{1 / sp['median']:.2f}x slower than eager "
            f"(95% CI of speedup {lo:.2f}-{hi:.2f}{noisy})"
        )
    return f"latency unchanged within noise (speedup {sp['median']:.2f}, 95% CI {lo:.2f}-{hi:.2f})"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def output_clause(mode: dict[str, Any]) -> str:
    """The first thing a verdict says when the mode's output is not eager's: a speedup that
    changes the result is not a speedup. Empty when it matches or was not checked."""
    check = mode.get("output_check")
    if not check or check.get("within_tolerance") is not False:
        return ""
    facts = []
    if check.get("compared_tensors"):
        facts.append(
            f"max abs err {_num(check.get('max_abs_err'))}, max rel err "
            f"{_num(check.get('max_rel_err'))}; tolerance rtol {_num(check.get('rtol'))}, "
            f"atol {_num(check.get('atol'))}"
        )
    if check.get("note"):
        facts.append(check["note"])
    return (
        f"OUTPUT DIFFERS from eager ({'; '.join(facts)}): "
        "a speedup that changes the result is not a speedup"
    )


def verdict_for(name: str, record: dict[str, Any]) -> str:
    mode = record["modes"][name]
    if mode["status"] == "failed":
        return f"{name}: failed - {mode.get('error')}"
    if mode["status"] == "skipped":
        return f"{name}: skipped - {mode.get('error')}"
    k = mode["kernels"]["per_step"]
    total = mode["bytes"]["read"] + mode["bytes"]["written"]
    eager = record["modes"].get("eager")
    if name == "eager" or not eager or eager.get("status") != "ok":
        lat = mode.get("latency_ms", {}).get("median")
        lat_s = f", median {lat:.3f} ms" if lat is not None else ""
        base = "baseline" if name == "eager" else "no eager baseline to compare"
        differs = output_clause(mode)
        base = f"{differs}; {base}" if differs else base
        return f"{name}: {base} - {k} kernels per step, {fmt_bytes(total)} modeled traffic{lat_s}"
    ek = eager["kernels"]["per_step"]
    etotal = eager["bytes"]["read"] + eager["bytes"]["written"]
    if k < ek:
        kernels = f"{ek} eager kernels ran as {k} kernel{'s' if k != 1 else ''}"
    elif k > ek:
        kernels = f"{k} kernels per step, more than eager's {ek}"
    else:
        kernels = f"kernel count unchanged ({k} per step)"
    parts = [output_clause(mode), kernels, _fusion_evidence(name, mode, record)]
    partial = sorted(
        set(mode["bytes"].get("not_modeled", []) + eager["bytes"].get("not_modeled", []))
    )
    if partial:
        parts.append(f"modeled traffic not comparable ({', '.join(partial)} not modeled)")
    elif etotal:
        change = (total - etotal) / etotal * 100
        parts.append(
            f"modeled traffic {change:+.0f}%" if round(change) else "modeled traffic unchanged"
        )
    lat = _latency_clause(mode)
    if lat:
        parts.append(lat)
    return f"{name}: " + "; ".join(p for p in parts if p)
