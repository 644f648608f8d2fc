"""Modeled memory traffic: compulsory bytes each kernel reads and writes, from tensor sizes.

Model (a lower bound on what the memory system moves, not a measurement):
- read = bytes of every distinct tensor an operation takes as input (a tensor passed twice counts
  once); written = bytes of every tensor it returns, plus inputs it mutates in place;
- a tensor's bytes = numel x element size as the operation sees it; scalars count zero;
- bookkeeping operations (views, reshapes, allocations; the CPU kernel definition's list) and
  operations whose output aliases their input move nothing;
- indirect access counts what it touches, never more than the whole tensor. A gather (embedding,
  embedding_bag, index_select, gather, index.Tensor, take_along_dim) reads its indices plus the
  gathered elements (elements gathered x element size; embedding: indices x embedding_dim). An
  in-place scatter (scatter_, scatter_add_, scatter_reduce_, index_put_, index_add_, index_copy_)
  writes only the elements it scatters and reads them first only when it combines with them (add,
  accumulate, reduce); its other inputs count as usual. Exact when the indices are distinct; a
  repeated index is counted each time (a cache may serve the repeat), hence capped at the
  tensor's bytes. A tensor that is also passed in another role counts in full. Out-of-place
  scatters copy the destination whole, so the usual full count is exact for them;
- for torch.compile, Inductor's scheduler reports, per kernel, the bytes of the buffers crossing
  its boundary (intermediates kept inside a fused kernel count zero): the same model, applied by
  the compiler to the kernels it generated; a buffer it loads through an indirect index counts
  the elements loaded (see profreport.capture.inductor_sizes), as above; so does a library
  call of one of the operators above.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from profreport.capture.opio import OpIO, TensorRef


@dataclass(frozen=True)
class OpCall:
    """One kernel-level call in one forward, with its modeled traffic."""

    op: str
    read: int
    written: int
    flops: int | None = None
    source: str = "dispatcher"  # dispatcher | inductor | graph types | derived

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "read": self.read,
            "written": self.written,
            "flops": self.flops,
            "source": self.source,
        }


@dataclass(frozen=True)
class OpBytes:
    op: str
    calls: int
    read: int  # bytes per step (all calls of this op in one forward)
    written: int
    flops: int | None

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity: FLOPs per modeled byte."""
        total = self.read + self.written
        return None if self.flops is None or total == 0 else self.flops / total


@dataclass
class BytesEstimate:
    read: int
    written: int
    source: str  # "modeled" or "measured"
    method: str  # how the numbers were obtained, one line
    table: list[OpBytes] = field(default_factory=list)
    sequence: list[OpCall] = field(default_factory=list)
    not_modeled: list[str] = field(default_factory=list)  # kernels whose bytes are unknown

    def to_dict(self) -> dict[str, Any]:
        return {
            "read": self.read,
            "written": self.written,
            "total": self.read + self.written,
            "source": self.source,
            "method": self.method,
            "not_modeled": list(self.not_modeled),
            "table": [
                {
                    "op": r.op,
                    "calls": r.calls,
                    "read": r.read,
                    "written": r.written,
                    "flops": r.flops,
                    "flops_per_byte": r.intensity,
                }
                for r in self.table
            ],
            "sequence": [c.to_dict() for c in self.sequence],
        }


def _distinct_bytes(refs: Iterable[TensorRef]) -> int:
    seen: dict[tuple[Any, ...], int] = {}
    for ref in refs:
        seen.setdefault(ref.key, ref.nbytes)
    return sum(seen.values())


def op_traffic(op: OpIO, bookkeeping: frozenset[str]) -> tuple[int, int]:
    """(read, written) bytes of one dispatched operation under the model."""
    if op.op in bookkeeping or op.aliases_input:
        return 0, 0
    # An in-place op returns the tensor it mutates: _distinct_bytes counts that write once.
    outputs = [*op.outputs, *op.mutated]
    access = op.indirect
    if access is None:
        return _distinct_bytes(op.inputs), _distinct_bytes(outputs)
    key = access.target.key
    others = [r for r in op.inputs if r.key != key]
    touched = min(access.target.nbytes, access.touched_bytes)
    if len(op.inputs) - len(others) > 1:  # also passed in another role: read whole
        target_read = access.target.nbytes
    elif access.writes:
        target_read = touched if access.read_modify_write else 0
    else:
        target_read = touched
    if not access.writes:
        return _distinct_bytes(others) + target_read, _distinct_bytes(outputs)
    written = _distinct_bytes(r for r in outputs if r.key != key) + touched
    return _distinct_bytes(others) + target_read, written


def calls_from_tensor_io(ops: Sequence[OpIO], bookkeeping: frozenset[str]) -> list[OpCall]:
    """The dispatched operations that move data, in execution order."""
    calls = []
    for op in ops:
        if op.op in bookkeeping or op.aliases_input:
            continue
        read, written = op_traffic(op, bookkeeping)
        calls.append(OpCall(op.op, read, written, op.flops))
    return calls


def _add_flops(a: int | None, b: int | None, first: bool) -> int | None:
    if first:
        return b
    return None if a is None or b is None else a + b


def estimate(
    calls: Sequence[OpCall], method: str, not_modeled: Sequence[str] = ()
) -> BytesEstimate:
    """Totals and a per-op table from the calls of one forward."""
    agg: dict[str, list[Any]] = {}
    for c in calls:
        entry = agg.setdefault(c.op, [0, 0, 0, None])
        entry[3] = _add_flops(entry[3], c.flops, entry[0] == 0)
        entry[0] += 1
        entry[1] += c.read
        entry[2] += c.written
    table = sorted(
        (OpBytes(op, n, r, w, f) for op, (n, r, w, f) in agg.items()),
        key=lambda row: row.read + row.written,
        reverse=True,
    )
    return BytesEstimate(
        read=sum(c.read for c in calls),
        written=sum(c.written for c in calls),
        source="modeled",
        method=method,
        table=table,
        sequence=list(calls),
        not_modeled=list(not_modeled),
    )


DISPATCH_METHOD = "tensor sizes of every dispatched operation in one forward (TorchDispatchMode)"
INDUCTOR_METHOD = (
    "Inductor scheduler nodes: buffers each generated or extern kernel reads and writes, "
    "intermediates kept inside a fused kernel excluded"
)


def model_from_tensor_io(
    ops: Sequence[OpIO], bookkeeping: frozenset[str], unseen_kernels: Sequence[str] = ()
) -> BytesEstimate:
    """Bytes of one forward from the dispatcher's view of every operation."""
    return estimate(calls_from_tensor_io(ops, bookkeeping), DISPATCH_METHOD, unseen_kernels)


def inductor_calls(nodes: Sequence[dict[str, Any]]) -> tuple[list[OpCall], list[str]]:
    """One call per Inductor scheduler node (generated or extern kernel); unsized nodes apart."""
    calls, unsized = [], []
    for node in nodes:
        # Name a node by the eager ops it computes (an extern node's origins also list the
        # producers of its inputs; its eager ops do not).
        ops = list(dict.fromkeys(e["op"] for e in node.get("eager_ops", []))) or node["origins"]
        label = ("extern " if node["kind"] == "extern" else "inductor ") + (
            "+".join(ops) or node["name"]
        )
        if node.get("read") is None or node.get("written") is None:
            unsized.append(label)
            continue
        calls.append(OpCall(label, int(node["read"]), int(node["written"]), None, "inductor"))
    return calls, unsized


def model_from_inductor_nodes(nodes: Sequence[dict[str, Any]]) -> BytesEstimate:
    """Bytes of one forward of a torch.compile'd model from Inductor's scheduler nodes
    (one node per generated or extern kernel, read and written buffers sized by Inductor)."""
    calls, unsized = inductor_calls(nodes)
    return estimate(calls, INDUCTOR_METHOD, unsized)
