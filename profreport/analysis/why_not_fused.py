"""Why it did not fuse: per mode, the graph breaks, the splits between adjacent kernels, and the
fuser's limits, each with the evidence it rests on. Pure functions over a mode entry (whose
`fusion` map is already derived) and its run.

Every entry is a `WhyNotFused` (record/findings.py): its `kind` (graph_break, split, refused,
not_fused, fused, layout, recompute, fuser_limit, applied, not_applied), the eager operations
involved, one sentence, what it rests on (a compiler log, the fusion map, the environment, or a
documented rule) and the evidence itself, and a hint only where a change is known to help. A split
nothing explains says "no reason recorded".

Over 400 lines on purpose: the four compilers' rules (Inductor, TorchScript NNC, optimize_for_inference
patterns, graph breaks) share the entry shape and the helpers that read a fusion map; one file keeps
every reason the report can give readable in one place.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

from profreport.analysis.fusion import short_op
from profreport.analysis.fusion_optimize import DECOMPOSED, LINEAR_SPLIT
from profreport.analysis.kernel_definitions import BOOKKEEPING_OPS
from profreport.record.model import (
    CompilerEvidence,
    FusionGroup,
    GraphBreak,
    OkMode,
    Run,
    WhyKind,
    WhyNotFused,
)

# Documented rules a reason may rest on (the id is shown beside the sentence).
RULES = {
    "inductor-extern": (
        "Inductor runs convolution, GEMM (mm/addmm/bmm) and SDPA as extern kernels (oneDNN, BLAS "
        "or ATen calls) unless it picks a generated template for them (max-autotune); it fuses no "
        "neighbouring operation into an extern kernel, so each extern call is a kernel boundary"
    ),
    "inductor-layout": (
        "a library call that needs its operands in another layout or contiguity gets them "
        "converted by a kernel Inductor generates in front of it"
    ),
    "inductor-recompute": (
        "Inductor may recompute a cheap producer inside each consumer kernel instead of "
        "materialising it once"
    ),
    "nnc-cpu-llvm": (
        "TorchScript's NNC fuser generates CPU code through LLVM; without LLVM "
        "(torch._C._llvm_enabled() False) torch._C._jit_can_fuse_on_cpu() is False and no CPU "
        "fusion group is formed"
    ),
}


def _entry(kind: WhyKind, ops: list[str], reason: str, source: str, evidence: str) -> WhyNotFused:
    return WhyNotFused(kind=kind, ops=tuple(ops), reason=reason, source=source, evidence=evidence)


def _at(entry: WhyNotFused, *groups: FusionGroup) -> WhyNotFused:
    """`entry` placed where its groups' eager calls ran: their modules, and their source lines
    (of a pair of groups: the last line of the first and the first of the second)."""
    modules = tuple(dict.fromkeys(m for g in groups for m in g.modules or ()))
    if len(groups) == 2:
        lines = (groups[0].source_lines or ())[-1:] + (groups[1].source_lines or ())[:1]
    else:
        lines = tuple(line for g in groups for line in g.source_lines or ())
    if not modules and not lines:
        return entry
    return entry.adding(modules=modules, source_lines=tuple(dict.fromkeys(lines)))


def _rule(kind: WhyKind, ops: list[str], reason: str, rule: str, seen: str = "") -> WhyNotFused:
    """An entry resting on a documented rule; `seen`: what the record shows, before the rule."""
    return _entry(kind, ops, reason, f"rule {rule}", seen + RULES[rule])


_GRAPH = re.compile(r"^graph_(\d+)_")


def _graph_of(group: FusionGroup) -> str | None:
    """The compiled graph a generated CPU kernel belongs to, from its name (graph_1_cpp_...)."""
    m = _GRAPH.match(group.kernels[0])
    return m.group(1) if m else None


def _is_library(group: FusionGroup) -> bool:
    return "library call" in group.note.split(";")[0] and group.kernels[0].startswith("library ")


def _is_layout(group: FusionGroup) -> bool:
    return not group.eager_ops and bool(group.library_operands)


# How to take a branch on a tensor's value out of a captured graph: compile's graph break and
# export's failure say the same.
VALUE_BRANCH_FIX = "compute the condition outside forward, or branch with torch.cond or torch.where"
_ITEM_HINT = (
    f"a branch on a tensor's value (.item()) breaks the graph: {VALUE_BRANCH_FIX}; "
    "the break then goes away"
)


def branches_on_a_value(reason: str, source_text: str) -> bool:
    """Dynamo's graph-break `reason` (its first line) at `source_text` is a branch on a tensor's
    value: a `.item()` on the line, Dynamo's own `Tensor.item()` break, or what it calls
    data-dependent branching (`if x.sum() > 0:`)."""
    return (
        ".item()" in source_text
        or "Tensor.item()" in reason
        or reason.startswith("Data-dependent branching")
    )


def _graph_break(gb: GraphBreak, entry_name: str) -> WhyNotFused:
    source_text = gb.source or ""
    item = branches_on_a_value(gb.reason, source_text)
    return WhyNotFused(
        kind="graph_break",
        reason=gb.reason or "no reason recorded",
        source="Dynamo graph_breaks log" + (f" ({gb.gb_id})" if gb.gb_id else ""),
        evidence=(gb.log or "").split("\nUser code traceback:")[0].strip(),
        where=f"{gb.file}:{gb.line}",
        source_text=source_text,
        hint=_ITEM_HINT if item else "",
        hint_test=f"--modes {entry_name}" if item else "",
    )


def _graph_breaks(compiler: CompilerEvidence, entry_name: str) -> list[WhyNotFused]:
    records = compiler.graph_break_records or ()
    found = [_graph_break(gb, entry_name) for gb in records]
    unexplained = int(compiler.graph_breaks or 0) - len(records)
    if unexplained > 0 and not records:
        why = f"{unexplained} graph break(s): no reason recorded"
        evidence = "counters['graph_break'] (this record keeps no break log)"
        found.append(_entry("graph_break", [], why, "Dynamo counters", evidence))
    return found


def _node_ops(compiler: CompilerEvidence) -> dict[str, list[str]]:
    """Scheduler node name (op3; a fused node is named op0_op1_...) -> its eager ops, only when
    the names are unique (one compiled graph: each graph numbers its nodes from op0)."""
    names: dict[str, list[str]] = {}
    for node in compiler.inductor_nodes or ():
        for part in node.name.split("_"):
            if part in names:
                return {}
            names[part] = [
                e.op.split("::")[-1] for e in node.eager_ops if e.op not in BOOKKEEPING_OPS
            ]
    return names


def _refusals(compiler: CompilerEvidence) -> list[WhyNotFused]:
    """Inductor's own "cannot fuse" decisions, one per distinct (operations, reason)."""
    ops_of = _node_ops(compiler)
    # where each node ended up: its generated kernel (codegen may merge nodes), else its final
    # scheduler node
    final_of = {
        part: n.kernel or n.name
        for n in compiler.inductor_nodes or ()
        for part in n.name.split("_")
    }
    refusals = compiler.fusion_refusals or ()
    if refusals and (not ops_of or len(final_of) != len(ops_of)):
        # several graphs reuse node names: neither the ops nor the outcome can be attributed
        why = (
            f"{len(refusals)} scheduler refusal(s) logged in several compiled graphs; "
            "not attributed to operations (node names repeat across graphs)"
        )
        logs = "\n".join(r.log for r in refusals[:20])
        return [_entry("refused", [], why, "Inductor scheduler fusion log", logs)]
    found: list[WhyNotFused] = []
    seen: set[tuple[tuple[str, ...], str]] = set()
    for r in refusals:
        names = (r.first, r.second)
        sides = [
            list(dict.fromkeys(op for part in name.split("_") for op in ops_of.get(part, [])))
            for name in names
        ]
        finals = [{final_of.get(part) for part in name.split("_")} - {None} for name in names]
        if finals[0] & finals[1]:
            continue  # refused once, yet in one kernel in the end: not why anything stayed apart
        ops = list(dict.fromkeys(op for side in sides for op in side))
        reason = r.log.split(": ", 1)[-1]
        key = (tuple(ops), reason)
        if key in seen:
            continue
        seen.add(key)
        named = [
            f"{name} ({' + '.join(side)})" if side else name
            for name, side in zip(names, sides, strict=True)
        ]
        why = f"Inductor's scheduler refused to fuse {named[0]} with {named[1]}: {reason}"
        found.append(_entry("refused", ops, why, "Inductor scheduler fusion log", r.log))
    return found


def inductor_why_not(entry: OkMode, run: Run, mode: str = "compile") -> list[WhyNotFused]:
    """Graph breaks, and for each pair of adjacent kernel calls in the fusion map
    why they stayed apart; fused kernels and layout conversions with what caused them."""
    compiler = entry.compiler or CompilerEvidence()
    device = run.device.type
    channels_last = run.model.memory_format == "channels_last"
    found = _graph_breaks(compiler, mode)
    groups = [
        g
        for g in (entry.fusion.groups if entry.fusion is not None else ())
        if g.kernels and (g.eager_ops or _is_layout(g))
    ]
    for g in groups:
        kernel = g.kernels[0]
        if g.fused:
            fused = f"{' + '.join(g.eager_ops)} fused into one generated kernel"
            e = _entry("fused", list(g.eager_ops), fused, "fusion map", f"kernel {kernel}")
            found.append(_at(e, g))
        if _is_layout(g):
            ops = list(g.library_operands or ())
            layout = (
                f"layout conversion: {kernel} converts the operands of library call "
                f"{', '.join(ops)} before it runs; it is work eager does not do, and it keeps "
                f"the library call apart from what precedes it"
            )
            e = _rule("layout", ops, layout, "inductor-layout", f"kernel {kernel} ({g.note}); ")
            if device == "cpu" and not channels_last and "convolution" in ops:
                e = dataclasses.replace(
                    e,
                    hint="channels-last inputs and weights remove the layout conversion in front "
                    "of oneDNN convolutions on CPU",
                    hint_test="--channels-last",
                )
            found.append(_at(e, g))
        if g.recomputed:
            recompute = (
                f"{', '.join(g.recomputed)} recomputed in {kernel} instead of fused into "
                "one producer (its eager bytes are counted once, in the first kernel)"
            )
            e = _rule("recompute", list(g.recomputed), recompute, "inductor-recompute")
            found.append(_at(e, g))
    refusals = _refusals(compiler)
    for a, b in itertools.pairwise(groups):
        pair = [a.eager_ops[-1], b.eager_ops[0]] if a.eager_ops and b.eager_ops else []
        if not pair:
            continue
        library = [g for g in (a, b) if _is_library(g)]
        if library:
            names = ", ".join(g.eager_ops[0] for g in library)
            apart = (
                f"{pair[0]} -> {pair[1]} stayed apart: {names} is a library call (extern kernel) "
                f"that Inductor does not fuse into on {device or 'this device'} in this "
                "configuration"
            )
            seen = f"scheduler node kind extern: {', '.join(g.kernels[0] for g in library)}; "
            e = _rule("split", pair, apart, "inductor-extern", seen)
            if device == "cuda":
                e = dataclasses.replace(
                    e,
                    hint="max-autotune can fuse epilogues into GEMM / convolution templates",
                    hint_test="--modes compile-max-autotune",
                )
            found.append(_at(e, a, b))
            continue
        graphs = (_graph_of(a), _graph_of(b))
        logged = [r for r in refusals if set(pair) <= set(r.ops)]
        if None not in graphs and graphs[0] != graphs[1]:
            breaks = int(compiler.graph_breaks or 0)
            why = "they are in different compiled graphs" + (
                " (split by the graph break above)" if breaks else ""
            )
            source = "fusion map"
            evidence = (
                f"kernels {a.kernels[0]} (graph {graphs[0]}) and {b.kernels[0]} (graph {graphs[1]})"
            )
        elif logged:
            why = "; ".join(r.evidence.split(": ", 1)[-1] for r in logged)
            source = "Inductor scheduler fusion log"
            evidence = "\n".join(r.evidence for r in logged)
        else:
            why, source = "no reason recorded", "fusion map"
            evidence = f"kernels {a.kernels[0]} and {b.kernels[0]}"
        split = f"{pair[0]} -> {pair[1]} stayed apart: {why}"
        found.append(_at(_entry("split", pair, split, source, evidence), a, b))
    found.extend(refusals)  # every distinct decision, as the scheduler logged it
    return found


def torchscript_why_not(entry: OkMode, run: Run) -> list[WhyNotFused]:
    """Why TorchScript's fuser took no (or only some) eager ops."""
    fusion_groups = (entry.compiler.fusion_groups if entry.compiler is not None else None) or ()
    device = run.device.type
    fusers = run.env.fusers
    fused = [[short_op(op) for op in g.ops] for g in fusion_groups]
    found = [
        _entry("fused", ops, f"{' + '.join(ops)} fused", "TorchScript graph", f"node {g.kind}")
        for g, ops in zip(fusion_groups, fused, strict=True)
    ]
    eager = run.modes.get("eager")
    eager_calls = [
        short_op(c.op)
        for c in (eager.bytes.sequence if isinstance(eager, OkMode) else ())
        if c.op not in BOOKKEEPING_OPS
    ]
    eager_ops = list(dict.fromkeys(eager_calls))
    if (
        device == "cpu"
        and fusers is not None
        and fusers.recorded
        and not fusers.nnc_can_fuse_on_cpu
    ):
        why = (
            "has no LLVM on this PyTorch build"
            if not fusers.llvm_available
            else "is disabled (torch._C._jit_override_can_fuse_on_cpu)"
        )
        none = f"no fusion group: TorchScript's CPU fuser (NNC) {why}, so no op is fused here"
        seen = (
            f"env.fusers: llvm_available={fusers.llvm_available}, "
            f"nnc_can_fuse_on_cpu={fusers.nnc_can_fuse_on_cpu}; "
        )
        found.append(_rule("fuser_limit", eager_ops, none, "nnc-cpu-llvm", seen))
    elif fusion_groups:
        # ops the fuser left out: TorchScript records no reason, so none is stated
        left = list(eager_calls)
        for op in itertools.chain.from_iterable(fused):
            if op in left:
                left.remove(op)
        groups = "; ".join(" + ".join(ops) for ops in fused)
        evidence = f"fusion groups of the optimized graph: {groups}"
        for op in dict.fromkeys(left):
            why = f"{op} is in no fusion group: no reason recorded"
            found.append(_entry("not_fused", [op], why, "TorchScript graph", evidence))
    else:
        why = "no fusion group in the optimized graph: no reason recorded"
        evidence = "optimized graph has no fusion group node"
        found.append(_entry("fuser_limit", eager_ops, why, "TorchScript graph", evidence))
    return found


# Why optimize's calls split eager's addmm in two, by the fusion map's note.
_SPLIT_BY = {
    LINEAR_SPLIT: "optimize_for_inference's FrozenLinearTranspose rewrites linear as matmul by a "
    "transposed weight + add",
    DECOMPOSED: "TorchScript's DecomposeOps pass runs addmm (alpha = beta = 1) as mm followed by add",
}


def optimize_why_not(entry: OkMode, run: Run) -> list[WhyNotFused]:
    """Which freeze + optimize_for_inference patterns applied (from the fusion map) and which
    visibly did not (a convolution followed by a ReLU that stayed a separate call)."""
    found = []
    groups = entry.fusion.groups if entry.fusion is not None else ()
    src = "fusion map (dispatched ops, eager vs optimized)"
    for g in groups:
        ops, evidence = list(g.eager_ops), g.note
        kind: WhyKind = "applied"
        if g.note.startswith("folded"):
            reason = f"folded away by freezing: {', '.join(ops)}"
        elif len(ops) > 1 and g.kernels:
            first = g.kernels[0]
            by = f"one {first} kernel (TorchScript's fuser)" if first.startswith("prim::") else ""
            reason = f"{' + '.join(ops)} fused into {by or f'library call {first}'}"
            evidence = f"optimized op {first}"
        elif ops and not g.kernels:
            # eager calls paired with nothing optimized (unmatched, or never in the graph): the
            # map says what it can tell, and claims no pattern
            kind, reason = "unmatched", f"{' + '.join(ops)}: {g.note}"
        elif g.note.startswith("added"):
            ops, reason = (
                [],
                f"added {', '.join(g.kernels)} (layout conversions to and from MKLDNN)",
            )
        elif g.note in _SPLIT_BY:
            kind, reason = "split", f"{_SPLIT_BY[g.note]}, so the bias add is a call of its own"
            evidence = f"dispatched {' + '.join(g.kernels)} where eager called addmm"
        else:
            continue
        found.append(_entry(kind, ops, reason, src, evidence))
    conv_alone = [
        g
        for g in groups
        if g.note == "replaced" and g.eager_ops and "convolution" in g.eager_ops[0]
    ]
    relu_alone = [
        g for g in groups if g.note == "replaced" and g.eager_ops[:1] in (("relu",), ("relu_",))
    ]
    if conv_alone and relu_alone:
        why = (
            "convolution and relu stayed separate calls (no conv+ReLU library call): "
            "no reason recorded"
        )
        evidence = f"{conv_alone[0].kernels[0]} and {relu_alone[0].kernels[0]} dispatched"
        found.append(_entry("not_applied", ["convolution", "relu"], why, src, evidence))
    return found
