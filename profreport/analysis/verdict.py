"""One sentence per mode that states what happened: derived from the run record, never assumed.

The sentence names the evidence (fusion groups in the TorchScript graph, fused library calls,
Inductor's generated kernels), the kernel and modeled-traffic changes against eager, and whether
the latency change is outside the bootstrap interval.
"""

from __future__ import annotations

from typing import Any

from profreport.format import fmt_bytes


def _short(op: str) -> str:
    return op.split("::", 1)[-1]


def _counted(verb: str, ops: list[str]) -> str:
    counts: dict[str, int] = {}
    for op in ops:
        counts[op] = counts.get(op, 0) + 1
    return verb + " " + ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())


# How many fused groups and ops per group a verdict names before it says "+N more".
_SHOWN_GROUPS = 4
_SHOWN_OPS = 6


def _fused_sets(fused: list[dict[str, Any]]) -> str:
    """ "[a + b] x2, [c + d + e + 3 more] and 5 more fused kernel(s)": the eager ops of each fused
    kernel (the first few; identical sets once, with a count), for the first few kernels."""
    counts: dict[tuple[str, ...], int] = {}
    for g in fused:
        key = tuple(g["eager_ops"])
        counts[key] = counts.get(key, 0) + 1
    sets = []
    for ops, n in list(counts.items())[:_SHOWN_GROUPS]:
        shown = " + ".join(ops[:_SHOWN_OPS])
        if len(ops) > _SHOWN_OPS:
            shown += f" + {len(ops) - _SHOWN_OPS} more"
        sets.append(f"[{shown}]" + (f" x{n}" if n > 1 else ""))
    text = ", ".join(sets)
    rest = sum(list(counts.values())[_SHOWN_GROUPS:])
    if rest:
        text += f" and {rest} more fused kernel(s)"
    return text


def _fusion_evidence(name: str, mode: dict[str, Any], record: dict[str, Any]) -> str:
    compiler = mode.get("compiler") or {}
    device = record["device"].get("type")
    fusers = record["env"].get("fusers", {})
    if name in ("script", "trace"):
        groups = compiler.get("fusion_groups") or []
        if groups:
            sets = "; ".join(" + ".join(_short(o) for o in g["ops"]) for g in groups)
            return f"TorchScript fused {len(groups)} group(s): {sets}"
        if device == "cpu" and not fusers.get("nnc_can_fuse_on_cpu"):
            why = (
                "needs LLVM, which this PyTorch build lacks"
                if not fusers.get("llvm_available")
                else "is disabled"
            )
            return f"nothing fused (TorchScript's CPU fuser {why})"
        return "nothing fused (NNC fuses pointwise chains only, never convolutions or GEMMs)"
    groups = (mode.get("fusion") or {}).get("groups") or []
    if name == "optimize":
        found = []
        for g in groups:
            if g["note"].startswith("folded"):
                found.append(_counted("folded away", g["eager_ops"]))
            elif len(g["eager_ops"]) > 1:
                found.append(f"fused {' + '.join(g['eager_ops'])} into {g['kernels'][0]}")
            elif g["note"].startswith("added"):
                found.append(_counted("added", g["kernels"]))
        replaced = sorted(
            {
                f"{g['eager_ops'][0]} -> {g['kernels'][0]}"
                for g in groups
                if g["note"] == "replaced" and g["eager_ops"][0] != g["kernels"][0]
            }
        )
        if replaced:
            found.append("replaced " + ", ".join(replaced))
        if not found:
            return "freeze + optimize_for_inference changed no operation"
        return "freeze + optimize_for_inference " + "; ".join(found)
    if name == "compile":
        fused = [g for g in groups if g.get("fused", len(g["eager_ops"]) > 1)]
        layout = [g for g in groups if "layout" in g["note"]]
        parts = []
        if fused:
            parts.append(f"Inductor fused {_fused_sets(fused)}")
        else:
            parts.append("Inductor fused no operations together")
        if layout:
            ops = sorted({op for g in layout for op in g.get("library_operands") or g["eager_ops"]})
            parts.append(f"it added layout conversion for {', '.join(ops)}")
        saved = (mode.get("fusion") or {}).get("saved_bytes")
        if fused and saved is not None:
            parts.append(
                f"fusion map: {fmt_bytes(saved)} modeled traffic saved"
                if saved >= 0
                else f"fusion map: {fmt_bytes(-saved)} more modeled traffic"
            )
        compiler = mode.get("compiler") or {}
        breaks = compiler.get("graph_breaks") or 0
        if breaks:
            parts.append(f"{breaks} graph break(s)")
        return "; ".join(parts)
    return ""


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
