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
    if name == "optimize":
        before = compiler.get("op_counts_before") or {}
        after = compiler.get("op_counts") or {}
        found = []
        for op in ("aten::batch_norm", "aten::dropout"):
            if before.get(op) and not after.get(op):
                found.append(f"{_short(op)} folded away")
        fused = sorted(set(compiler.get("fused_library_ops") or []))
        if fused:
            found.append("library calls " + ", ".join(fused))
        groups = compiler.get("fusion_groups") or []
        if groups:
            found.append(f"{len(groups)} fusion group(s)")
        if not found:
            return "the frozen graph changed no operations"
        return "freeze + optimize_for_inference: " + "; ".join(found)
    if name == "compile":
        nodes = compiler.get("inductor_nodes") or []
        extern = [n for n in nodes if n["kind"] == "extern"]
        extern_ops = {o for n in extern for o in n.get("origins", [])}
        generated = [n for n in nodes if n["kind"] == "generated"]
        fused = [n for n in generated if len(n.get("origins", [])) > 1]
        # A generated node made only from a library call's own op prepares that call's operands
        # (Inductor converts conv inputs/weights to channels-last on CPU, for instance).
        layout = [n for n in generated if n.get("origins") and set(n["origins"]) <= extern_ops]
        parts = []
        if fused:
            sets = ", ".join("[" + " + ".join(_short(o) for o in n["origins"]) + "]" for n in fused)
            parts.append(f"Inductor fused {sets}")
        else:
            parts.append("Inductor fused no operations together")
        if layout:
            ops = sorted({_short(o) for n in layout for o in n["origins"]})
            parts.append(f"it added layout-conversion code for {', '.join(ops)}")
        if extern:
            parts.append(f"{len(extern)} library call(s) kept")
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
    if lo > 1.0:
        return f"{sp['median']:.2f}x faster than eager (95% CI {lo:.2f}-{hi:.2f})"
    if hi < 1.0:
        return f"{1 / sp['median']:.2f}x slower than eager (95% CI of speedup {lo:.2f}-{hi:.2f})"
    return f"latency unchanged within noise (speedup {sp['median']:.2f}, 95% CI {lo:.2f}-{hi:.2f})"


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
        return f"{name}: {base} - {k} kernels per step, {fmt_bytes(total)} modeled traffic{lat_s}"
    ek = eager["kernels"]["per_step"]
    etotal = eager["bytes"]["read"] + eager["bytes"]["written"]
    if k < ek:
        kernels = f"{ek} eager kernels ran as {k} kernel{'s' if k != 1 else ''}"
    elif k > ek:
        kernels = f"{k} kernels per step, more than eager's {ek}"
    else:
        kernels = f"kernel count unchanged ({k} per step)"
    parts = [kernels, _fusion_evidence(name, mode, record)]
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
