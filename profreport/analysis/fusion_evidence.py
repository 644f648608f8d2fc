"""The verdict's clause about what each kind of compiler fused, from the run record's evidence.

Pure functions over a typed mode and its run; each mode (profreport.modes) names the one it uses.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from profreport.analysis import fusion_optimize as fo
from profreport.analysis.fusion import short_op
from profreport.analysis.kernel_definitions import BOOKKEEPING_OPS
from profreport.format import fmt_bytes
from profreport.record.model import FusionGroup, OkMode, Run


def _counted(verb: str, ops: list[str]) -> str:
    counts = Counter(ops)
    return verb + " " + ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())


# How many fused groups and ops per group a verdict names before it says "+N more".
_SHOWN_GROUPS = 4
_SHOWN_OPS = 6


def _fused_sets(fused: Sequence[FusionGroup]) -> str:
    """ "[a + b] x2, [c + d + e + 3 more] and 5 more fused kernel(s)": the eager ops of each fused
    kernel (the first few; identical sets once, with a count), for the first few kernels."""
    counts = Counter(g.eager_ops for g in fused)
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


def torchscript_evidence(mode: OkMode, run: Run, kind: str) -> str:
    """TorchScript fusion groups (NNC, ...) in the optimized graph, or why there are none and
    what else makes its calls differ from eager's (`kind`: "traced" or "scripted")."""
    device = run.device.type
    fusers = run.env.fusers
    groups = (mode.compiler.fusion_groups if mode.compiler is not None else None) or ()
    if groups:
        sets = "; ".join(" + ".join(short_op(o) for o in g.ops) for g in groups)
        return f"TorchScript fused {len(groups)} group(s): {sets}"
    if device == "cpu" and not (fusers is not None and fusers.nnc_can_fuse_on_cpu):
        why = (
            "needs LLVM, which this PyTorch build lacks"
            if not (fusers is not None and fusers.llvm_available)
            else "is disabled"
        )
        text = f"nothing fused (TorchScript's CPU fuser {why})"
    else:
        text = "nothing fused (NNC fuses pointwise chains only, never convolutions or GEMMs)"
    return "; ".join(filter(None, [text, _graph_differences(mode, run, kind)]))


def _decomposed_clause(eager_ops: list[str]) -> str:
    """ "TorchScript ran addmm x8 as mm + add (DecomposeOps)": eager calls the graph ran as
    their decomposition (fusion_optimize's table)."""
    return "; ".join(
        _counted("TorchScript ran", [op] * n) + f" as {fo.decomposition_text(op)} (DecomposeOps)"
        for op, n in Counter(eager_ops).items()
    )


def _graph_differences(mode: OkMode, run: Run, kind: str) -> str:
    """Why an unfused TorchScript graph runs other calls than eager: addmm split by
    DecomposeOps, and what the graph holds that eager's Python did not run (or the reverse)."""
    eager = run.modes.get("eager")
    if not isinstance(eager, OkMode):
        return ""
    eager_calls, mode_calls = eager.bytes.sequence, mode.bytes.sequence
    if not eager_calls or not mode_calls:
        return ""
    decomposed, lacks, adds = fo.dispatch_differences(eager_calls, mode_calls, BOOKKEEPING_OPS)
    parts = [_decomposed_clause(list(decomposed.elements()))] if decomposed else []
    parts += _differs(f"the {kind} graph", list(lacks.elements()), list(adds.elements()))
    return "; ".join(parts)


def _differs(graph: str, lacks: list[str], adds: list[str]) -> list[str]:
    """ "<graph> differs from eager: it lacks ... and adds ..." (none when it lacks and adds
    nothing)."""
    diff = [_counted(verb, ops) for verb, ops in (("lacks", lacks), ("adds", adds)) if ops]
    return [f"{graph} differs from eager: it {' and '.join(diff)}"] if diff else []


def optimize_evidence(mode: OkMode, run: Run) -> str:
    """What freeze + optimize_for_inference folded, fused, added or replaced; then what TorchScript
    itself changed (addmm run as mm + add), and how the graph it started from differs from eager."""
    groups = mode.fusion.groups if mode.fusion is not None else ()
    kind = fo.graph_kind(mode)
    found: list[str] = []
    decomposed: list[str] = []
    unmatched: list[str] = []
    lacks: list[str] = []
    adds: list[str] = []
    rewritten: list[str] = []
    for g in groups:
        note = g.note
        if note == fo.DECOMPOSED:
            decomposed += g.eager_ops
        elif note == fo.LINEAR_SPLIT:
            rewritten.append("linear")
        elif note == fo.UNMATCHED:
            unmatched += g.eager_ops
        elif note == fo.NOT_IN_GRAPH.format(graph=kind):
            lacks += g.eager_ops
        elif note == fo.GRAPH_ONLY.format(graph=kind):
            adds += g.kernels
        elif note.startswith("folded"):
            found.append(_counted("folded away", list(g.eager_ops)))
        elif len(g.eager_ops) > 1:
            found.append(f"fused {' + '.join(g.eager_ops)} into {g.kernels[0]}")
        elif note.startswith("added"):
            found.append(_counted("added", list(g.kernels)))
    replaced = sorted(
        {
            f"{g.eager_ops[0]} -> {g.kernels[0]}"
            for g in groups
            if g.note == "replaced"
            and g.eager_ops[0].rstrip("_") != g.kernels[0].rstrip("_")  # not in-place only
        }
    )
    if replaced:
        found.append("replaced " + ", ".join(replaced))
    if rewritten:
        found.append(
            _counted("rewrote", rewritten) + " as matmul + add (FrozenLinearTranspose), so "
            "eager's addmm ran as mm + add"
        )
    parts = [
        "freeze + optimize_for_inference " + "; ".join(found)
        if found
        else "freeze + optimize_for_inference changed no dispatched operation"
    ]
    if decomposed:
        parts.append(_decomposed_clause(decomposed))
    if unmatched:
        parts.append(_counted("no optimized call matched eager's", unmatched))
    parts += _differs(f"the {kind} graph itself", lacks, adds)
    return "; ".join(parts)


def inductor_evidence(mode: OkMode, run: Run) -> str:
    """The eager ops each Inductor kernel fused, layout conversions, traffic saved, breaks."""
    groups = mode.fusion.groups if mode.fusion is not None else ()
    fused = [g for g in groups if g.counts_as_fused]
    layout = [g for g in groups if "layout" in g.note]
    parts = [
        f"Inductor fused {_fused_sets(fused)}" if fused else "Inductor fused no operations together"
    ]
    if layout:
        ops = sorted({op for g in layout for op in g.library_operands or g.eager_ops})
        parts.append(f"it added layout conversion for {', '.join(ops)}")
    saved = mode.fusion.saved_bytes if mode.fusion is not None else None
    if fused and saved is not None:
        parts.append(
            f"fusion map: {fmt_bytes(saved)} modeled traffic saved"
            if saved >= 0
            else f"fusion map: {fmt_bytes(-saved)} more modeled traffic"
        )
    compiler = mode.compiler
    breaks = (compiler.graph_breaks if compiler is not None else None) or 0
    if breaks and compiler is not None:
        records = compiler.graph_break_records or ()
        first = records[0] if records else None
        where = (
            f", first at {first.file.rsplit('/', 1)[-1]}:{first.line}: {first.reason}"
            if first is not None and first.file
            else ""
        )
        parts.append(f"{breaks} graph break(s){where}")
    return "; ".join(parts)
