"""The fusion map: which eager operations ended up in which kernel, and what fusion saved.

Pure functions over the run record. Bytes are the modeled ones (see bytes_model): the eager side
of a group is what those operations move when each runs as its own kernel, the kernel side is
what the mode's kernels move; the difference is what fusion (or folding) saved, negative when
the mode added work such as layout conversions.

Sources of the mapping:
- compile: one group per kernel call Inductor emitted: a generated kernel (all the scheduler
  nodes code generation put into it, named as the profiler records it) or a library (extern)
  call. Each node lists the eager op calls it computes (ATen op before decomposition + the
  Dynamo graph node it came from), paired with the eager calls of the same op: in order where
  the counts agree, else by nearest relative position (the graph may build what eager skips);
  in-place eager ops pair with their functional lowering.
  Counting, so that group savings add up to eager total - compiled total:
  - an eager call computed by several kernels (a norm recomputed in each consumer) is listed in
    each, marked `recomputed`, and its eager bytes are counted once: in its library call if it
    is one, else in the first kernel computing it (`counted_elsewhere` in the others);
  - a library call is its own group ("library call"); the library op is never listed in a
    generated kernel, whose part of it (operand layout conversion, an attention mask made
    additive) is noted as `library_operands`;
  - a graph op with no eager call to pair with (`graph_only`: an attention mask the compiled
    graph builds and eager skips) is not listed as an eager op and adds no eager bytes; eager
    calls no kernel computes end in one last group with no kernel;
  - `fused`: a generated kernel computing at least two eager calls.
- script / trace: TorchScript fusion groups (NNC `prim::TensorExprGroup`, ...); the group's
  boundary tensors come from the profiled graph's tensor types.
- optimize: see analysis/fusion_optimize.py.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

from profreport.record.model import (
    FusionGroup,
    FusionMap,
    InductorNode,
    KernelTraffic,
    ScriptFusionGroup,
    TensorIO,
)

if TYPE_CHECKING:
    import numpy as np

# Inductor names some eager ops by their functional export-level variant.
_OP_ALIASES = {
    "aten::_native_batch_norm_legit_no_training": "aten::native_batch_norm",
    "aten::_native_batch_norm_legit": "aten::native_batch_norm",
    "aten::_native_batch_norm_legit_functional": "aten::native_batch_norm",
}


def _norm(op: str) -> str:
    """The functional op an eager call is lowered as: aliases resolved, and an in-place variant
    (aten::add_, relu_) named by its functional form (add, relu), as functionalization does."""
    op = _OP_ALIASES.get(op, op)
    return op[:-1] if op.endswith("_") and not op.endswith("__") else op


def short_op(op: str) -> str:
    return op.split("::", 1)[-1]


def traffic(call: TensorIO | None) -> int | None:
    """A call's modeled bytes, read + written (None: no call, or a side not sized)."""
    if call is None or call.read is None or call.written is None:
        return None
    return call.read + call.written


_N = TypeVar("_N", int, float)


def sum_known(values: Iterable[_N | None]) -> _N | None:
    """The values summed; None when any is None."""
    total: _N = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def fusion_group(
    eager_ops: list[str],
    kernels: list[str],
    eager_bytes: int | None,
    kernel_bytes: int | None,
    eager_flops: float | None = None,
    note: str = "",
) -> FusionGroup:
    saved = None if eager_bytes is None or kernel_bytes is None else eager_bytes - kernel_bytes
    return FusionGroup(
        eager_ops=tuple(eager_ops),
        kernels=tuple(kernels),
        eager_bytes=eager_bytes,
        kernel_bytes=kernel_bytes,
        saved_bytes=saved,
        flops=eager_flops,
        note=note,
        # Several eager calls computed by one kernel (a compiled group may say otherwise).
        fused=bool(kernels) and len(eager_ops) > 1,
    )


def without_kernel(eager_calls: Sequence[TensorIO], note: str) -> FusionGroup:
    """A group of eager calls that no kernel of the mode performs: all their bytes are saved."""
    eager_bytes = sum_known(traffic(c) for c in eager_calls)
    return fusion_group([short_op(c.op) for c in eager_calls], [], eager_bytes, 0, note=note)


def summarize_groups(groups: list[FusionGroup], source: str) -> FusionMap:
    fused = [g for g in groups if g.fused]
    saved = sum_known(g.saved_bytes for g in groups) if groups else 0
    return FusionMap(
        source=source,
        groups=tuple(groups),
        fused_groups=len(fused),
        eager_ops_fused=sum(len(g.eager_ops) for g in fused),
        saved_bytes=saved,
    )


def _kernel_calls(nodes: Sequence[InductorNode]) -> list[list[int]]:
    """Scheduler nodes grouped by the kernel call they were emitted into, in execution order.

    A generated node knows its kernel call from code generation (`kernel_call`); an extern node
    is its own call; a node with neither stays alone (its kernel is not identified). Nodes that
    generate no code (Inductor's NopKernelSchedulerNode) are left out."""
    calls: list[list[int]] = []
    index: dict[int, int] = {}
    for i, node in enumerate(nodes):
        if node.nop:
            continue
        call = node.kernel_call
        if node.kind != "extern" and call is not None:
            if call in index:
                calls[index[call]].append(i)
                continue
            index[call] = len(calls)
        calls.append([i])
    return calls


def _call_label(members: list[InductorNode], own_ops: list[str]) -> tuple[str, str]:
    """(kernel name, note) of one kernel call: the profiled name Inductor gave the generated
    kernel, "library <op>" for an extern call, the scheduler node's name when unidentified."""
    first = members[0]
    if first.kind == "extern":
        return "library " + (", ".join(own_ops) or first.name), "library call"
    if first.kernel:
        return first.kernel, ""
    return "+".join(m.name for m in members), "generated kernel not identified"


def _monotone_pairs(
    short: np.ndarray, long: np.ndarray, long_cost: np.ndarray | None = None
) -> list[int]:
    """For each of `short` (relative positions, ascending), the index in `long` it pairs with:
    every short item paired, order kept, total position distance (plus `long_cost` of each
    `long` item used) smallest (dynamic programming, one cumulative minimum per row)."""
    import numpy as np  # here: the CLI imports the modes (and this) to declare its arguments

    extra = np.zeros(len(long)) if long_cost is None else long_cost
    n, m = len(short), len(long)
    idx = np.arange(m)
    prev = np.zeros(m)  # cost of pairing the first i short items within long[:j+1]
    choices = []
    for i in range(n):
        before = np.concatenate(([0.0] if i == 0 else [np.inf], prev[:-1]))
        vals = before + np.abs(long - short[i]) + extra
        vals[:i] = np.inf  # i items before need i places
        best = np.minimum.accumulate(vals)
        choices.append(np.maximum.accumulate(np.where(vals == best, idx, -1)))
        prev = best
    pairs = [0] * n
    j = m - 1
    for i in range(n - 1, -1, -1):
        k = int(choices[i][j])
        pairs[i] = k
        j = k - 1
    return pairs


def pair_with_eager(
    keys: list[tuple[str, str]],
    eager_sequence: Sequence[TensorIO],
    top_level: frozenset[tuple[str, str]] = frozenset(),
) -> tuple[dict[tuple[str, str], TensorIO | None], list[TensorIO]]:
    """Pair the graph's op calls (in graph order) with eager calls of the same op.

    Where the counts agree, the k-th relu of the graph is the k-th eager relu. Where they do not
    (the compiled graph builds an attention mask eager skips, say), each op's calls are paired in
    order with the eager calls nearest in relative position, so an extra graph add does not shift
    every later add onto the wrong eager call; graph calls made outside every submodule
    (`top_level`: mask building in the model's own forward) are the first left unpaired. An eager
    op is named as the graph names it (`_norm`: add_ -> add). Returns the pairs and the eager
    calls left over."""
    graph_at: dict[str, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        graph_at[key[0]].append(i)
    eager_at: dict[str, list[int]] = defaultdict(list)
    for j, call in enumerate(eager_sequence):
        eager_at[_norm(call.op)].append(j)
    matched: dict[tuple[str, str], TensorIO | None] = {key: None for key in keys}
    taken: set[int] = set()
    for op, graph_idx in graph_at.items():
        eager_idx = eager_at.get(op, [])
        pairs: list[tuple[int, int]]
        if len(graph_idx) == len(eager_idx):
            pairs = list(zip(graph_idx, eager_idx, strict=True))
        elif eager_idx:
            import numpy as np

            g = np.array(graph_idx) / max(len(keys), 1)
            e = np.array(eager_idx) / max(len(eager_sequence), 1)
            if len(graph_idx) < len(eager_idx):
                pairs = [(graph_idx[a], eager_idx[b]) for a, b in enumerate(_monotone_pairs(g, e))]
            else:
                cost = np.array([float(keys[i] in top_level) for i in graph_idx])
                pairs = [
                    (graph_idx[b], eager_idx[a]) for a, b in enumerate(_monotone_pairs(e, g, cost))
                ]
        else:
            pairs = []
        for gi, ej in pairs:
            matched[keys[gi]] = eager_sequence[ej]
            taken.add(ej)
    untaken = [c for j, c in enumerate(eager_sequence) if j not in taken]
    return matched, untaken


def compile_fusion(
    nodes: Sequence[InductorNode],
    eager_sequence: Sequence[TensorIO],
    bookkeeping: frozenset[str],
    kernel_names: Sequence[str] = (),
) -> FusionMap:
    """Fusion map of a torch.compile'd model: one group per kernel call Inductor emitted.

    `kernel_names` (the kernels seen in the profile) are only checked against: a generated
    kernel's name comes from code generation, and one missing from the profile is noted."""
    calls = _kernel_calls(nodes)
    keys_of: list[list[tuple[str, str]]] = []
    first_pos: dict[tuple[str, str], int] = {}
    module_of: dict[tuple[str, str], str] = {}
    lines_of: dict[tuple[str, str], tuple[str, ...]] = {}
    for idx in calls:
        keys: dict[tuple[str, str], None] = {}
        for i in idx:
            for inst in nodes[i].eager_ops:
                if inst.op in bookkeeping or _norm(inst.op) in bookkeeping:
                    continue
                key = (_norm(inst.op), inst.source)
                keys[key] = None
                first_pos[key] = min(first_pos.get(key, inst.pos), inst.pos)
                module_of.setdefault(key, inst.module)
                lines_of.setdefault(key, inst.lines or ())
        keys_of.append(sorted(keys, key=lambda k: first_pos[k]))

    # Who counts each eager call's bytes: its library call, else the first kernel computing it.
    owner: dict[tuple[str, str], int] = {}
    for c, idx in enumerate(calls):
        if nodes[idx[0]].kind == "extern":
            for key in keys_of[c]:
                owner.setdefault(key, c)
    library = set(owner)
    computed_by: Counter[tuple[str, str]] = Counter()
    for c, idx in enumerate(calls):
        if nodes[idx[0]].kind != "extern":
            for key in keys_of[c]:
                if key not in library:
                    owner.setdefault(key, c)
                    computed_by[key] += 1

    matched, untaken = pair_with_eager(
        sorted(owner, key=lambda k: first_pos[k]),
        eager_sequence,
        frozenset(k for k in owner if not module_of.get(k)),
    )

    profiled = set(kernel_names)
    groups = []
    per_kernel: dict[str, KernelTraffic] = {}
    for c, idx in enumerate(calls):
        members = [nodes[i] for i in idx]
        is_extern = members[0].kind == "extern"
        own = [k for k in keys_of[c] if is_extern or k not in library]
        prepares = [k for k in keys_of[c] if not is_extern and k in library]
        kernel_bytes = sum_known(m.traffic for m in members)
        if is_extern and not own and not kernel_bytes:
            continue  # an extern that runs no library call (unpacking a multi-output result)
        label, note = _call_label(members, [short_op(k[0]) for k in own])
        # A graph op with no eager call to pair with (code eager does not run, such as the
        # attention mask a compiled graph builds and eager skips) is no eager op: it adds no
        # eager bytes and does not make a kernel fused.
        graph_only = [k for k in own if matched[k] is None]
        own = [k for k in own if matched[k] is not None]
        counted = [k for k in own if owner[k] == c]
        eager_calls = [call for k in counted if (call := matched[k]) is not None]
        recomputed = [k for k in own if computed_by[k] > 1]
        notes = [note] if note else []
        if graph_only:
            notes.append(
                "graph ops with no eager call: "
                + ", ".join(dict.fromkeys(short_op(k[0]) for k in graph_only))
            )
        if not is_extern and members[0].kernel and profiled and label not in profiled:
            notes.append("kernel not seen in the profile")
        if prepares:
            what = ", ".join(dict.fromkeys(short_op(k[0]) for k in prepares))
            # Work Inductor lowered from a library op outside the library call itself: operand
            # layout (or dtype) conversion, or an attention mask made additive.
            notes.append(
                f"operand layout conversion for library call {what}"
                if not own and not graph_only
                else f"also prepares operands of library call {what}"
            )
        if recomputed:
            notes.append(
                "recomputed: "
                + ", ".join(short_op(k[0]) for k in recomputed)
                + " (eager bytes counted once, in the first kernel computing them)"
            )
        group = fusion_group(
            [short_op(k[0]) for k in own],
            [label],
            sum_known(traffic(e) for e in eager_calls),
            kernel_bytes,
            # the calls' FLOPs; None when any has no formula (or there are no calls)
            sum_known(e.flops for e in eager_calls) if eager_calls else None,
            "; ".join(notes),
        )
        group = dataclasses.replace(
            group,
            fused=not is_extern and len(own) > 1,
            recomputed=tuple(short_op(k[0]) for k in recomputed),
            counted_elsewhere=tuple(short_op(k[0]) for k in own if owner[k] != c),
            library_operands=tuple(short_op(k[0]) for k in prepares),
            graph_only=tuple(short_op(k[0]) for k in graph_only),
            modules=tuple(sorted({module_of[k] for k in own if module_of.get(k)})),
            source_lines=tuple(dict.fromkeys(line for k in own for line in lines_of[k])) or None,
        )
        groups.append(group)
        if not is_extern and members[0].kernel:
            entry = per_kernel.get(label, KernelTraffic(read=0, written=0))
            per_kernel[label] = KernelTraffic(
                read=sum_known([entry.read, *(m.read for m in members)]),
                written=sum_known([entry.written, *(m.written for m in members)]),
            )
    removed = [c for c in untaken if c.op not in bookkeeping and _norm(c.op) not in bookkeeping]
    if removed:
        note = "eager ops with no compiled kernel (eliminated, or not matched)"
        groups.append(without_kernel(removed, note))
    source = "Inductor kernel calls (scheduler nodes, original_aten provenance)"
    return dataclasses.replace(summarize_groups(groups, source), per_kernel=per_kernel)


def script_fusion(
    fusion_groups: Sequence[ScriptFusionGroup], eager_sequence: Sequence[TensorIO]
) -> FusionMap:
    """Fusion map of a TorchScript mode from the fusion groups in its optimized graph (each
    group's kernel bytes: the tensors crossing its boundary)."""
    calls: dict[str, list[TensorIO]] = defaultdict(list)  # eager calls in order, by op
    for call in eager_sequence:
        calls[call.op].append(call)
    groups = [
        script_group(g, [calls[op].pop(0) if calls[op] else None for op in g.ops])
        for g in fusion_groups
    ]
    return summarize_groups(groups, "TorchScript optimized graph (fusion groups)")


def script_group(g: ScriptFusionGroup, eager_calls: Sequence[TensorIO | None]) -> FusionGroup:
    """A TorchScript fusion group (one kernel) with the eager calls of its ops: their bytes
    against the tensors crossing the group's boundary."""
    eager_bytes = sum_known(traffic(c) for c in eager_calls)
    boundary = sum_known((g.read, g.written))
    return fusion_group([short_op(op) for op in g.ops], [g.kind], eager_bytes, boundary)
