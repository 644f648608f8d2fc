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
from typing import Any

from profreport.analysis.attribution import common_module
from profreport.analysis.fusion import sum_known
from profreport.capture.opio import OpIO, TensorRef
from profreport.record.model import Bytes, InductorNode, OpBytes, TensorIO


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


def calls_from_tensor_io(ops: Sequence[OpIO], bookkeeping: frozenset[str]) -> list[TensorIO]:
    """The dispatched operations that move data, in execution order."""
    calls = []
    for op in ops:
        if op.op in bookkeeping or op.aliases_input:
            continue
        read, written = op_traffic(op, bookkeeping)
        call = TensorIO(op.op, read, written, op.flops, "dispatcher")
        if op.module is not None:
            call = call.adding(module=op.module)
        if op.lines:
            call = call.adding(lines=op.lines)
        calls.append(call)
    return calls


def _sum_traffic(calls: Sequence[TensorIO]) -> tuple[int, int]:
    """(read, written) bytes of `calls`, an unsized side counted as 0."""
    return sum(c.read or 0 for c in calls), sum(c.written or 0 for c in calls)


def _intensity(read: int, written: int, flops: float | None) -> float | None:
    """Arithmetic intensity: FLOPs per modeled byte."""
    total = read + written
    return None if flops is None or total == 0 else flops / total


def estimate(
    calls: Sequence[TensorIO],
    method: str,
    not_modeled: Sequence[str] = (),
    attribution: str | None = None,
) -> Bytes:
    """Totals and a per-op table (largest traffic first) from the calls of one forward."""
    by_op: dict[str, list[TensorIO]] = {}
    for c in calls:
        by_op.setdefault(c.op, []).append(c)
    table = []
    for op, op_calls in by_op.items():
        r, w = _sum_traffic(op_calls)
        f = sum_known(c.flops for c in op_calls)  # None when any call has no FLOP formula
        table.append(OpBytes(op, len(op_calls), r, w, f, _intensity(r, w, f)))
    table.sort(key=lambda row: row.read + row.written, reverse=True)
    read, written = _sum_traffic(calls)
    est = Bytes(
        read=read,
        written=written,
        total=read + written,
        source="modeled",
        method=method,
        not_modeled=tuple(not_modeled),
        table=tuple(table),
        sequence=tuple(calls),
    )
    return est if attribution is None else est.adding(attribution=attribution)


DISPATCH_METHOD = "tensor sizes of every dispatched operation in one forward (TorchDispatchMode)"
INDUCTOR_METHOD = (
    "Inductor scheduler nodes: buffers each generated or extern kernel reads and writes, "
    "intermediates kept inside a fused kernel excluded"
)


def inductor_calls(nodes: Sequence[InductorNode]) -> tuple[list[TensorIO], list[str]]:
    """One call per Inductor scheduler node (generated or extern kernel); unsized nodes apart."""
    calls, unsized = [], []
    for node in nodes:
        # Name a node by the eager ops it computes (an extern node's origins also list the
        # producers of its inputs; its eager ops do not).
        ops = list(dict.fromkeys(e.op for e in node.eager_ops)) or list(node.origins)
        label = ("extern " if node.kind == "extern" else "inductor ") + ("+".join(ops) or node.name)
        if node.read is None or node.written is None:
            unsized.append(label)
            continue
        call = TensorIO(label, int(node.read), int(node.written), None, "inductor")
        # "" is an eager call with no module stack: nothing recorded, never the model itself
        modules = [e.module for e in node.eager_ops if e.module]
        lines = tuple(dict.fromkeys(line for e in node.eager_ops for line in e.lines or ()))
        if modules:
            call = call.adding(module=common_module(modules))
        if lines:
            call = call.adding(lines=lines)
        calls.append(call)
    return calls, unsized
