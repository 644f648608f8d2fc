"""The fusion map of freeze + optimize_for_inference: what it did, call by call, and what differs
from eager for other reasons.

The optimized graph leaves no per-op mapping, so the map compares the operations dispatched in
eager and in the optimized graph, paired in order by op family (a fused library call such as
cudnn_convolution_relu also takes the eager relu). What is left over on either side is named by
what explains it, from the graph before freezing (`op_counts_before`) where the record has it:

- eager calls of the ops a fusion group of the optimized graph holds (NNC's
  `prim::TensorExprGroup` on CUDA): fused into that group's one kernel; the group launches no
  dispatched op, so its calls cannot pair by family and are taken by the group's op list;
- an eager BatchNorm (or dropout) with no call left after freezing: folded away by freezing (into
  the convolution's weights); any other eager call whose op the graph held, with no optimized call
  to pair with: unmatched, and said so (TorchScript's own passes may have removed it, or eager and
  the graph split the work differently; nothing here tells which);
- an eager call whose op the graph never held: the Python code ran it and the traced (or scripted)
  graph did not record it (a data-dependent check that tracing froze for the example input);
- addmm in eager, mm + add when optimized: where the graph before freezing held linear and the
  optimized graph holds matmul instead, optimize_for_inference's FrozenLinearTranspose rewrote
  each linear as matmul by a pre-transposed weight + add; otherwise TorchScript's DecomposeOps
  pass ran an explicit addmm (alpha = beta = 1) as `self + mat1.mm(mat2)`;
- a layout conversion (to_mkldnn, to_dense): added by the optimization passes (MKLDNN weights);
- any other call only the optimized graph dispatched: the graph computes what eager's Python
  skipped for this input (an attention mask a fast path never built), or a call an op made
  while running it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence

from profreport.analysis.fusion import (
    fusion_group,
    script_group,
    short_op,
    sum_known,
    summarize_groups,
    traffic,
    without_kernel,
)
from profreport.record.model import FusionGroup, FusionMap, OkMode, ScriptFusionGroup, TensorIO

FOLDED = "folded away by freezing (no kernel left)"
UNMATCHED = "no optimized call of this op left to pair with"
NOT_IN_GRAPH = "called by eager, not in the {graph} graph (Python code the graph did not record)"
DECOMPOSED = "TorchScript ran addmm as mm + add (its DecomposeOps pass)"
LINEAR_SPLIT = (
    "optimize_for_inference rewrote linear as matmul + add (FrozenLinearTranspose: the weight "
    "transposed once)"
)
GRAPH_ONLY = (
    "in the {graph} graph, not called by eager (work eager's Python skipped, or an op's own call)"
)
# Layout conversions; also every optimized-only call in records without the graph before freezing.
ADDED = LAYOUT_ADDED = "added by the optimization passes (layout conversions, ...)"

# Library calls that compute a chain of eager ops: the families they absorb after the first.
_FUSED_SUFFIXES = (("_add_relu", ("add", "relu")), ("_relu", ("relu",)))
# A library call's family -> the eager families it computes the same thing as (eager's
# adaptive_avg_pool2d to 1x1 forwards to mean; MKLDNN runs it as mkldnn_adaptive_avg_pool2d).
_SAME_WORK = {"adaptive_avg_pool2d": ("mean",)}
# Eager op family -> the families TorchScript runs it as, in dispatch order.
_DECOMPOSITIONS: dict[str, tuple[str, ...]] = {"addmm": ("mm", "add")}
_LAYOUT_FAMILIES = frozenset({"to_mkldnn", "to_dense", "reorder_conv2d_weight"})
# What freezing folds away (optimize_for_inference's conv-BatchNorm folding; dropout in eval).
_FOLDABLE = frozenset({"batch_norm", "dropout", "feature_dropout"})


def graph_kind(mode: OkMode) -> str:
    """How the optimize mode's graph was made: "traced" when scripting failed, else "scripted"."""
    notes = (mode.compiler.notes if mode.compiler is not None else None) or ()
    traced = any(n.startswith("traced instead of scripted") for n in notes)
    return "traced" if traced else "scripted"


def _family(op: str) -> str:
    """What an op computes, ignoring backend and in-place variants: aten::mkldnn_max_pool2d,
    aten::max_pool2d_with_indices -> max_pool2d; aten::relu_ -> relu."""
    name = short_op(op).rstrip("_")
    for prefix in ("mkldnn_", "cudnn_", "miopen_", "_"):
        name = name.removeprefix(prefix)
    return name.removesuffix("_with_indices")


def _graph_family(op: str) -> str:
    """The family of a graph node or a dispatched call, as the graph names it (the graph holds
    batch_norm and layer_norm where the dispatcher runs native_batch_norm, native_layer_norm)."""
    return _family(op).removeprefix("native_")


def optimize_fusion(
    eager_sequence: Sequence[TensorIO],
    mode_sequence: Sequence[TensorIO],
    bookkeeping: frozenset[str],
    graph_before: Mapping[str, int] | None = None,
    graph_kind: str = "scripted",
    graph_after: Mapping[str, int] | None = None,
    script_groups: Sequence[ScriptFusionGroup] = (),
) -> FusionMap:
    """What freeze + optimize_for_inference did, call by call (see the module docstring).

    `graph_before`: op counts of the graph before freezing (None in records without them: the
    leftovers are then read as folded and added, as releases before this one did); `graph_kind`:
    "traced" or "scripted", how that graph was made; `graph_after`: the optimized graph's op
    counts (which linear nodes became matmul); `script_groups`: the optimized graph's fusion
    groups (NNC), which take the eager calls of their ops before the leftovers are named."""
    pending: dict[str, list[TensorIO]] = defaultdict(list)
    for c in eager_sequence:
        if c.op not in bookkeeping:
            pending[_family(c.op)].append(c)
    calls = [c for c in mode_sequence if c.op not in bookkeeping]
    groups: list[FusionGroup] = []
    added: list[TensorIO] = []
    linear_rewrites = _linear_rewrites(graph_before, graph_after)
    i = 0
    while i < len(calls):
        c = calls[i]
        i += 1
        family = _family(c.op)
        absorbed: tuple[str, ...] = ()
        for suffix, extra in _FUSED_SUFFIXES:
            if family.endswith(suffix):
                family, absorbed = family.removesuffix(suffix), extra
                break
        if not pending.get(family):
            family = next((f for f in _SAME_WORK.get(family, ()) if pending.get(f)), family)
        if not pending.get(family):
            decomposed = _decomposition_of(family, pending)
            if decomposed is None:
                added.append(c)
                continue
            eager_call = pending[decomposed].pop(0)
            parts = [c]
            rest: tuple[str, ...] = _DECOMPOSITIONS[decomposed][1:]
            while rest and i < len(calls) and _family(calls[i].op) == rest[0]:
                parts.append(calls[i])
                i, rest = i + 1, rest[1:]
            note = LINEAR_SPLIT if linear_rewrites > 0 else DECOMPOSED
            linear_rewrites -= 1
            eager = [short_op(eager_call.op)]
            kernels, kernel_bytes = [short_op(p.op) for p in parts], sum_known(map(traffic, parts))
            group = fusion_group(eager, kernels, traffic(eager_call), kernel_bytes, note=note)
            groups.append(group)
            continue
        eager_calls = [pending[family].pop(0)]
        eager_calls += [pending[fam].pop(0) for fam in absorbed if pending.get(fam)]
        eager_bytes = sum_known(map(traffic, eager_calls))
        note = "" if len(eager_calls) > 1 else "replaced"
        ops = [short_op(e.op) for e in eager_calls]
        groups.append(fusion_group(ops, [short_op(c.op)], eager_bytes, traffic(c), c.flops, note))
    # The optimized graph's fusion groups, each with the pending eager calls of its ops (in eager
    # order, one per op node); a group none of whose ops eager left pending still shows.
    groups += [
        script_group(g, [pending[f].pop(0) for f in map(_graph_family, g.ops) if pending.get(f)])
        for g in script_groups
    ]
    left = [c for calls_left in pending.values() for c in calls_left]
    groups += _leftover_eager(left, graph_before, graph_kind)
    groups += _leftover_mode(added, graph_before, graph_kind)
    return summarize_groups(
        groups, "dispatched operations, eager vs optimized graph, paired by op family"
    )


def dispatch_differences(
    eager_sequence: Sequence[TensorIO],
    mode_sequence: Sequence[TensorIO],
    bookkeeping: frozenset[str],
) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """How a TorchScript graph's dispatched calls differ from eager's, counted by op family:
    (eager calls run as their decomposition, e.g. addmm as mm + add; eager calls with no
    counterpart; the graph's with none)."""
    eager = Counter(_family(c.op) for c in eager_sequence if c.op not in bookkeeping)
    mode = Counter(_family(c.op) for c in mode_sequence if c.op not in bookkeeping)
    decomposed: Counter[str] = Counter()
    for family, (first, *rest) in _DECOMPOSITIONS.items():
        n = max(0, min(eager[family] - mode[family], mode[first] - eager[first]))
        if n:
            decomposed[family] = n
            eager[family] -= n
            mode[first] -= n
            for part in rest:
                mode[part] -= min(n, mode[part])
    return decomposed, eager - mode, mode - eager


def _linear_rewrites(before: Mapping[str, int] | None, after: Mapping[str, int] | None) -> int:
    """How many linear nodes the optimized graph turned into matmul (FrozenLinearTranspose)."""
    if before is None or after is None:
        return 0
    gone = before.get("aten::linear", 0) - after.get("aten::linear", 0)
    new = after.get("aten::matmul", 0) - before.get("aten::matmul", 0)
    return max(0, min(gone, new))


def decomposition_text(eager_family: str) -> str:
    """ "mm + add": what TorchScript runs an eager op of `eager_family` as."""
    return " + ".join(_DECOMPOSITIONS[eager_family])


def _decomposition_of(family: str, pending: Mapping[str, list[TensorIO]]) -> str | None:
    """The eager op family a call of `family` starts the decomposition of, if one is pending."""
    for eager_family, parts in _DECOMPOSITIONS.items():
        if parts[0] == family and pending.get(eager_family):
            return eager_family
    return None


def _partition(
    calls: list[TensorIO], keep: Callable[[TensorIO], bool]
) -> tuple[list[TensorIO], list[TensorIO]]:
    return [c for c in calls if keep(c)], [c for c in calls if not keep(c)]


def _leftover_eager(
    left: list[TensorIO], graph_before: Mapping[str, int] | None, graph_kind: str
) -> list[FusionGroup]:
    """Eager calls nothing optimized computes: folded by freezing, never in the graph, or
    unmatched. Without the graph before freezing (older records) every op counts as held."""
    in_graph = None if graph_before is None else {_graph_family(op) for op in graph_before}
    held, unrecorded = _partition(
        left, lambda c: in_graph is None or _graph_family(c.op) in in_graph
    )
    folded, unmatched = _partition(held, lambda c: _graph_family(c.op) in _FOLDABLE)
    named = (
        (folded, FOLDED),
        (unmatched, UNMATCHED),
        (unrecorded, NOT_IN_GRAPH.format(graph=graph_kind)),
    )
    return [without_kernel(calls, note) for calls, note in named if calls]


def _leftover_mode(
    added: list[TensorIO], graph_before: Mapping[str, int] | None, graph_kind: str
) -> list[FusionGroup]:
    """Optimized calls with no eager partner: layout conversions, or the graph's own work."""
    if graph_before is None:
        return [_only_in_mode(added, ADDED)] if added else []
    layout, others = _partition(added, lambda c: _family(c.op) in _LAYOUT_FAMILIES)
    named = ((layout, LAYOUT_ADDED), (others, GRAPH_ONLY.format(graph=graph_kind)))
    return [_only_in_mode(calls, note) for calls, note in named if calls]


def _only_in_mode(calls: list[TensorIO], note: str) -> FusionGroup:
    return fusion_group(
        [], [short_op(c.op) for c in calls], 0, sum_known(traffic(c) for c in calls), note=note
    )
