"""Modeled memory traffic: compulsory bytes each kernel reads and writes, from tensor sizes.

Model (a lower bound on what the memory system moves, not a measurement):
- read = bytes of every distinct tensor an operation takes as input (a tensor passed twice counts
  once); written = bytes of every tensor it returns, plus inputs it mutates in place;
- a tensor's bytes = numel x element size as the operation sees it; scalars count zero;
- bookkeeping operations (views, reshapes, allocations; the CPU kernel definition's list) and
  operations whose output aliases their input move nothing;
- for torch.compile, Inductor's scheduler reports, per kernel, the bytes of the buffers crossing
  its boundary (intermediates kept inside a fused kernel count zero): the same model, applied by
  the compiler to the kernels it generated.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from profreport.capture.opio import OpIO, TensorRef


@dataclass(frozen=True)
class OpBytes:
    op: str
    calls: int
    read: int  # bytes per step (all calls of this op in one forward)
    written: int


@dataclass
class BytesEstimate:
    read: int
    written: int
    source: str  # "modeled" or "measured"
    method: str  # how the numbers were obtained, one line
    table: list[OpBytes] = field(default_factory=list)
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
                {"op": r.op, "calls": r.calls, "read": r.read, "written": r.written}
                for r in self.table
            ],
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
    return _distinct_bytes(op.inputs), _distinct_bytes([*op.outputs, *op.mutated])


def _aggregate(rows: Iterable[tuple[str, int, int]]) -> list[OpBytes]:
    agg: dict[str, list[int]] = {}
    for name, read, written in rows:
        entry = agg.setdefault(name, [0, 0, 0])
        entry[0] += 1
        entry[1] += read
        entry[2] += written
    table = [OpBytes(name, c, r, w) for name, (c, r, w) in agg.items()]
    return sorted(table, key=lambda row: row.read + row.written, reverse=True)


def model_from_tensor_io(
    ops: Sequence[OpIO], bookkeeping: frozenset[str], unseen_kernels: Sequence[str] = ()
) -> BytesEstimate:
    """Bytes of one forward from the dispatcher's view of every operation."""
    rows = []
    for op in ops:
        if op.op in bookkeeping or op.aliases_input:
            continue
        read, written = op_traffic(op, bookkeeping)
        rows.append((op.op, read, written))
    table = _aggregate(rows)
    return BytesEstimate(
        read=sum(r.read for r in table),
        written=sum(r.written for r in table),
        source="modeled",
        method="tensor sizes of every dispatched operation in one forward (TorchDispatchMode)",
        table=table,
        not_modeled=list(unseen_kernels),
    )


def model_from_inductor_nodes(nodes: Sequence[dict[str, Any]]) -> BytesEstimate:
    """Bytes of one forward of a torch.compile'd model from Inductor's scheduler nodes
    (one node per generated or extern kernel, read and written buffers sized by Inductor)."""
    rows = []
    unsized = []
    for node in nodes:
        label = ("extern " if node["kind"] == "extern" else "inductor ") + (
            "+".join(node["origins"]) or node["name"]
        )
        if node.get("read") is None or node.get("written") is None:
            unsized.append(label)
            continue
        rows.append((label, int(node["read"]), int(node["written"])))
    table = _aggregate(rows)
    return BytesEstimate(
        read=sum(r.read for r in table),
        written=sum(r.written for r in table),
        source="modeled",
        method=(
            "Inductor scheduler nodes: buffers each generated or extern kernel reads and writes, "
            "intermediates kept inside a fused kernel excluded"
        ),
        table=table,
        not_modeled=unsized,
    )
