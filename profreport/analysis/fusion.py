"""The fusion map: which eager operations ended up in which kernel, and what fusion saved.

Pure functions over the run record. Bytes are the modeled ones (see bytes_model): the eager side
of a group is what those operations move when each runs as its own kernel, the kernel side is
what the mode's kernels move; the difference is what fusion (or folding) saved, negative when
the mode added work such as layout conversions.

Sources of the mapping:
- compile: Inductor's scheduler nodes; each lists the eager op calls it computes (ATen op before
  decomposition + the Dynamo graph node it came from). Nodes that share an eager call (a fused
  producer recomputed by two kernels, say) form one group, so group savings add up.
- script / trace: TorchScript fusion groups (NNC `prim::TensorExprGroup`, ...); the group's
  boundary tensors come from the profiled graph's tensor types.
- optimize: freeze + optimize_for_inference leave no per-op mapping; the map compares the
  operations dispatched in eager and in the optimized graph: what disappeared (folded) and what
  appeared (fused library calls, layout conversions).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

# Inductor names some eager ops by their functional export-level variant.
_OP_ALIASES = {
    "aten::_native_batch_norm_legit_no_training": "aten::native_batch_norm",
    "aten::_native_batch_norm_legit": "aten::native_batch_norm",
    "aten::_native_batch_norm_legit_functional": "aten::native_batch_norm",
}


def _norm(op: str) -> str:
    return _OP_ALIASES.get(op, op)


def _short(op: str) -> str:
    return op.split("::", 1)[-1]


class _EagerCalls:
    """Eager op calls in execution order, handed out by name in order of first use."""

    def __init__(self, sequence: Sequence[dict[str, Any]]) -> None:
        self._by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for call in sequence:
            self._by_name[call["op"]].append(call)
        self._next: Counter[str] = Counter()

    def take(self, op: str) -> dict[str, Any] | None:
        calls = self._by_name.get(op, [])
        i = self._next[op]
        self._next[op] += 1
        return calls[i] if i < len(calls) else None

    def untaken(self) -> list[dict[str, Any]]:
        rest = []
        for op, calls in self._by_name.items():
            rest.extend(calls[self._next[op] :])
        return rest


def _traffic(call: dict[str, Any] | None) -> int | None:
    return None if call is None else int(call["read"]) + int(call["written"])


def _sum(values: Iterable[int | None]) -> int | None:
    total = 0
    for v in values:
        if v is None:
            return None
        total += v
    return total


def _group(
    eager_ops: list[str],
    kernels: list[str],
    eager_bytes: int | None,
    kernel_bytes: int | None,
    eager_flops: int | None = None,
    note: str = "",
) -> dict[str, Any]:
    saved = None if eager_bytes is None or kernel_bytes is None else eager_bytes - kernel_bytes
    return {
        "eager_ops": eager_ops,
        "kernels": kernels,
        "eager_bytes": eager_bytes,
        "kernel_bytes": kernel_bytes,
        "saved_bytes": saved,
        "flops": eager_flops,
        "note": note,
    }


def _without_kernel(eager_calls: Sequence[dict[str, Any]], note: str) -> dict[str, Any]:
    """A group of eager calls that no kernel of the mode performs: all their bytes are saved."""
    return _group(
        [_short(c["op"]) for c in eager_calls],
        [],
        _sum(_traffic(c) for c in eager_calls),
        0,
        note=note,
    )


def _summary(groups: list[dict[str, Any]], source: str) -> dict[str, Any]:
    fused = [g for g in groups if len(g["eager_ops"]) > 1]
    saved = _sum(g["saved_bytes"] for g in groups) if groups else 0
    return {
        "source": source,
        "groups": groups,
        "fused_groups": len(fused),
        "eager_ops_fused": sum(len(g["eager_ops"]) for g in fused),
        "saved_bytes": saved,
    }


def _kernel_label(node: dict[str, Any], kernel_names: Sequence[str]) -> str:
    """Name a scheduler node by the profiled kernel that ran it where the names tell: Inductor
    names a generated kernel after the eager ops it fuses (cpp_fused_relu_max_pool2d_..._1)."""
    if node["kind"] == "extern":
        names = sorted({_short(e["op"]) for e in node.get("eager_ops", [])})
        return "library " + (", ".join(names) or node["name"])
    fused = {_short(_norm(e["op"])) for e in node.get("eager_ops", [])}
    for kernel in kernel_names:
        if fused and all(op in kernel for op in fused):
            return kernel
    return node["name"]


def compile_fusion(
    nodes: Sequence[dict[str, Any]],
    eager_sequence: Sequence[dict[str, Any]],
    bookkeeping: frozenset[str],
    kernel_names: Sequence[str] = (),
) -> dict[str, Any]:
    """Fusion map of a torch.compile'd model from Inductor's scheduler nodes.

    `kernel_names` are the generated kernels seen in the profile, used to label nodes."""
    # Union scheduler nodes that compute a common eager call.
    parent = list(range(len(nodes)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[tuple[str, str], int] = {}
    for i, node in enumerate(nodes):
        for inst in node.get("eager_ops", []):
            if _norm(inst["op"]) in bookkeeping:
                continue
            key = (inst["op"], inst["source"])
            if key in owner:
                parent[find(i)] = find(owner[key])
            else:
                owner[key] = i
    members: dict[int, list[int]] = defaultdict(list)
    for i in range(len(nodes)):
        members[find(i)].append(i)

    calls = _EagerCalls(eager_sequence)
    first_pos: dict[tuple[str, str], int] = {}
    for node in nodes:
        for inst in node.get("eager_ops", []):
            key = (inst["op"], inst["source"])
            first_pos[key] = min(first_pos.get(key, inst["pos"]), inst["pos"])
    # Hand out eager calls in graph order so the k-th relu of the graph is the k-th eager relu.
    matched: dict[tuple[str, str], dict[str, Any] | None] = {
        key: calls.take(_norm(key[0])) for key in sorted(owner, key=lambda k: first_pos[k])
    }

    groups = []
    for root in sorted(members, key=lambda r: min(members[r])):
        idx = members[root]
        keys = sorted({k for k, o in owner.items() if find(o) == root}, key=lambda k: first_pos[k])
        kernel_bytes = _sum(
            None if nodes[i]["read"] is None else nodes[i]["read"] + nodes[i]["written"]
            for i in idx
        )
        eager_calls = [matched[k] for k in keys]
        eager_bytes = _sum(_traffic(c) for c in eager_calls) if keys else 0
        flops = _sum(c.get("flops") if c else None for c in eager_calls) if keys else None
        kinds = {nodes[i]["kind"] for i in idx}
        note = ""
        if kinds == {"extern"} or (len(keys) == 1 and "extern" in kinds and len(idx) > 1):
            note = "library call" + (" + operand layout conversion" if len(idx) > 1 else "")
        groups.append(
            _group(
                [_short(_norm(k[0])) for k in keys],
                list(dict.fromkeys(_kernel_label(nodes[i], kernel_names) for i in idx)),
                eager_bytes,
                kernel_bytes,
                flops,
                note,
            )
        )
    removed = [c for c in calls.untaken() if c["op"] not in bookkeeping]
    if removed:
        groups.append(
            _without_kernel(
                removed, "eager ops with no compiled kernel (eliminated, or not matched)"
            )
        )
    summary = _summary(groups, "Inductor scheduler nodes (original_aten provenance)")
    per_kernel: dict[str, dict[str, int | None]] = {}
    for node in nodes:
        label = _kernel_label(node, kernel_names)
        entry = per_kernel.setdefault(label, {"read": 0, "written": 0})
        for side in ("read", "written"):
            value = node.get(side)
            current = entry[side]
            entry[side] = None if value is None or current is None else current + value
    summary["per_kernel"] = per_kernel
    return summary


def script_fusion(
    fusion_groups: Sequence[dict[str, Any]], eager_sequence: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """Fusion map of a TorchScript mode from the fusion groups in its optimized graph."""
    calls = _EagerCalls(eager_sequence)
    groups = []
    for g in fusion_groups:
        eager_calls = [calls.take(op) for op in g["ops"]]
        boundary = g.get("boundary_bytes")
        groups.append(
            _group(
                [_short(op) for op in g["ops"]],
                [g["kind"]],
                _sum(_traffic(c) for c in eager_calls),
                boundary,
            )
        )
    return _summary(groups, "TorchScript optimized graph (fusion groups)")


def _family(op: str) -> str:
    """What an op computes, ignoring backend and in-place variants: aten::mkldnn_max_pool2d,
    aten::max_pool2d_with_indices -> max_pool2d; aten::relu_ -> relu."""
    name = _short(op).rstrip("_")
    for prefix in ("mkldnn_", "cudnn_", "miopen_", "_"):
        name = name.removeprefix(prefix)
    return name.removesuffix("_with_indices")


# Library calls that compute a chain of eager ops: the families they absorb after the first.
_FUSED_SUFFIXES = (("_add_relu", ("add", "relu")), ("_relu", ("relu",)))


def optimize_fusion(
    eager_sequence: Sequence[dict[str, Any]],
    mode_sequence: Sequence[dict[str, Any]],
    bookkeeping: frozenset[str],
) -> dict[str, Any]:
    """What freeze + optimize_for_inference did, call by call.

    Each optimized call is paired, in order, with the eager call(s) computing the same thing
    (same op family; a fused library call such as cudnn_convolution_relu also takes the eager
    relu). Eager calls left over were folded away (BatchNorm into convolution weights, dropout);
    optimized calls left over were added (layout conversions to and from MKLDNN).
    """
    pending: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in eager_sequence:
        if c["op"] not in bookkeeping:
            pending[_family(c["op"])].append(c)
    groups = []
    added = []
    for c in mode_sequence:
        if c["op"] in bookkeeping:
            continue
        family = _family(c["op"])
        absorbed: tuple[str, ...] = ()
        for suffix, extra in _FUSED_SUFFIXES:
            if family.endswith(suffix):
                family, absorbed = family.removesuffix(suffix), extra
                break
        if not pending.get(family):
            added.append(c)
            continue
        eager_calls = [pending[family].pop(0)]
        eager_calls += [pending[fam].pop(0) for fam in absorbed if pending.get(fam)]
        groups.append(
            _group(
                [_short(e["op"]) for e in eager_calls],
                [_short(c["op"])],
                _sum(_traffic(e) for e in eager_calls),
                _traffic(c),
                c.get("flops"),
                note="" if len(eager_calls) > 1 else "replaced",
            )
        )
    folded = [c for calls in pending.values() for c in calls]
    if folded:
        groups.append(_without_kernel(folded, "folded away by freezing (no kernel left)"))
    if added:
        groups.append(
            _group(
                [],
                [_short(c["op"]) for c in added],
                0,
                _sum(_traffic(c) for c in added),
                note="added by the optimization passes (layout conversions, ...)",
            )
        )
    return _summary(groups, "dispatched operations, eager vs optimized graph, paired by op family")
