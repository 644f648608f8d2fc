"""Size the buffers an Inductor scheduler node reads and writes, gather-aware.

Must run while the graph being compiled is current (inside Inductor's metrics log record).
Inductor's own per-buffer figure (`get_read_write_buffer_accesses`) is min(buffer size, the
node's iteration count x its dependencies on that buffer), but a fused node has no iteration
count and gets the whole buffer: a token table looked up inside a fused LayerNorm kernel counts
whole although the kernel loads a few rows. A dependency whose index holds an indirect symbol
(`tmpN`/`indirect`, see torch/_inductor/dependencies.py) is a load or store through an index
tensor; it touches at most one element per iteration of its ranges. So a buffer reached only
through such dependencies counts min(buffer bytes, the largest dependency's iterations x element
size), once per kernel (a lookup recomputed in several loops of one kernel touches the same
elements). A buffer reached only through direct dependencies (a slice, a row range: GPT-2's
position table read for 128 of its 1,024 positions) counts min(Inductor's figure, the distinct
elements its dependencies can touch: each dependency's ranges over the variables its index
uses, summed over distinct dependencies) x element size; Inductor itself applies that bound only
to unfused nodes and counts whole buffers in fused ones. Every other buffer (star or weak
dependencies) keeps Inductor's figure.

A library (extern) kernel that runs an indexing operator of profreport.capture.opio.INDIRECT_OPS
(a FallbackKernel such as `_embedding_bag`, or a ScatterFallback `scatter_`/`scatter_reduce_`)
is sized by the dispatcher rule instead: its call is rebuilt on meta tensors of its input
buffers' shapes. Inductor's IndexPutFallback is not rebuilt and keeps Inductor's figure.

Weights held as graph constants (AOTInductor's package, Inductor's `freezing`) are not in
Inductor's accounting at all: each enters whole, then the same rules apply, so an export and a
torch.compile of one model that run the same kernels model the same bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from profreport.capture.opio import indirect_target
from profreport.record.model import ResizedAccess


@dataclass(frozen=True)
class NodeSizes:
    """The bytes one scheduler node reads and writes (None: Inductor cannot size its buffers),
    and the buffers counted by the elements touched rather than whole."""

    read: int | None
    written: int | None
    indirect_reads: tuple[ResizedAccess, ...] = ()
    indirect_writes: tuple[ResizedAccess, ...] = ()
    sliced_reads: tuple[ResizedAccess, ...] = ()


def _full_bytes(name: str) -> int:
    """Bytes of buffer `name`; a mutation's output names the buffer it mutates."""
    from torch._inductor.utils import get_dtype_size
    from torch._inductor.virtualized import V

    graph = V.graph
    name = getattr(graph.scheduler, "mutation_real_name", {}).get(name, name)
    buf = graph.name_to_buffer.get(name)
    if buf is not None and not buf.has_tensor_output() and buf.get_mutation_names():
        name = buf.get_mutation_names()[0]
    numel = graph.sizevars.optimization_hint(graph.get_numel(name), fallback=0)
    return numel * get_dtype_size(graph.get_dtype(name))


def _resized(name: str, full: int, accesses: dict[str, int], counted: int) -> ResizedAccess:
    entry = ResizedAccess(
        buffer=name, full_bytes=full, scheduler_bytes=accesses[name], counted_bytes=counted
    )
    accesses[name] = counted
    return entry


def _extern_call(kernel: Any) -> tuple[Any, Any, Mapping[str, Any], dict[int, str]] | None:
    """(op overload, args, kwargs, {id(meta tensor): buffer name}) of an extern kernel's call,
    its tensors replaced by meta tensors of the same shapes; None if it cannot be rebuilt."""
    from torch._inductor import ir
    from torch._inductor.virtualized import V

    op = getattr(kernel, "op_overload", None)
    if not isinstance(kernel, ir.ScatterFallback | ir.FallbackKernel) or op is None:
        return None
    hint = V.graph.sizevars.optimization_hint
    metas, names = [], {}
    for x in kernel.inputs:
        if not isinstance(x, ir.IRNode):  # a list argument (index_put's indices): not rebuilt
            return None
        meta = torch.empty_strided(
            [hint(s) for s in x.get_size()],
            [hint(s) for s in x.get_stride()],
            dtype=x.get_dtype(),
            device="meta",
        )
        metas.append(meta)
        names[id(meta)] = x.get_name()
    if isinstance(kernel, ir.FallbackKernel):
        args, kwargs = kernel.unflatten_args(metas, kernel.constant_args)
        return op, args, kwargs, names
    dim, *scalar = kernel.constant_args  # ScatterFallback: (self, dim, index, src) + reduce
    src = metas[2] if kernel.src_is_tensor else scalar[0]
    wanted = {a.name for a in op._schema.arguments}
    kwargs = {k: v for k, v in kernel.kwargs.items() if k in wanted and v is not None}
    return op, (metas[0], dim, metas[1], src), kwargs, names


def _extern_indirect(
    node: Any, reads: dict[str, int], writes: dict[str, int]
) -> tuple[list[ResizedAccess], list[ResizedAccess]]:
    """Re-size an extern indexing kernel's target buffer by the dispatcher rule."""
    try:
        call = _extern_call(node.node)
        if call is None:
            return [], []
        op, args, kwargs, names = call
        out = op(*args, **kwargs)
        found = indirect_target(str(op._schema.name), op._schema, args, kwargs, out)
    except Exception:  # a call that cannot be rebuilt keeps Inductor's sizing
        return [], []
    name = None if found is None else names.get(id(found[0]))
    if found is None or name not in reads:
        return [], []
    access = found[1]
    full = _full_bytes(name)
    counted = min(full, access.touched_bytes)
    if not access.writes:
        return [_resized(name, full, reads, counted)], []
    read = counted if access.read_modify_write else 0
    # the kernel's only write is the mutated target (Inductor sizes it whole)
    return [_resized(name, full, reads, read)], [_resized(w, full, writes, counted) for w in writes]


def _per_buffer(deps: Any, accesses: dict[str, int]) -> Any:
    """(buffer name, its dependencies, size hint) for each buffer in `accesses`."""
    from torch._inductor.virtualized import V

    by_buffer: dict[str, list[Any]] = {}
    for dep in deps:
        by_buffer.setdefault(dep.name, []).append(dep)
    hint = V.graph.sizevars.optimization_hint
    yield from ((name, by_buffer[name], hint) for name in list(accesses) if name in by_buffer)


def _element_size(name: str) -> int:
    from torch._inductor.utils import get_dtype_size
    from torch._inductor.virtualized import V

    return int(get_dtype_size(V.graph.get_dtype(name)))


def _sized(deps: Any, accesses: dict[str, int]) -> list[ResizedAccess]:
    """The buffers of one direction (reads or writes) reached only through an indirect index,
    re-sized in `accesses`."""
    from torch._inductor.dependencies import MemoryDep
    from torch._inductor.utils import sympy_product

    resized = []
    for name, found, hint in _per_buffer(deps, accesses):
        if not all(isinstance(d, MemoryDep) and d.is_indirect() for d in found):
            continue
        element = _element_size(name)
        full = _full_bytes(name)
        touched = max(hint(sympy_product(d.size), fallback=0) for d in found)
        resized.append(_resized(name, full, accesses, min(full, touched * element)))
    return resized


def _sliced(deps: Any, accesses: dict[str, int]) -> list[ResizedAccess]:
    """The buffers of one direction reached only through direct dependencies whose index
    ranges cover less than Inductor counted, re-sized in `accesses`."""
    from torch._inductor.dependencies import MemoryDep

    resized = []
    for name, found, hint in _per_buffer(deps, accesses):
        if not all(isinstance(d, MemoryDep) and not d.is_indirect() for d in found):
            continue
        try:
            touched = sum(hint(d.get_numel(), fallback=0) for d in set(found)) * _element_size(name)
        except Exception:  # a buffer Inductor cannot type here keeps Inductor's figure
            continue
        if 0 < touched < accesses[name]:
            resized.append(_resized(name, _full_bytes(name), accesses, touched))
    return resized


def _add_constants(deps: Any, accesses: dict[str, int]) -> set[str]:
    """Weights held as graph constants (AOTInductor's, or under Inductor's `freezing`) are neither
    buffers nor graph inputs, so Inductor's accounting skips them: add each one read whole, as
    Inductor counts a graph input, so that the gather and slice rules below size it as they size
    torch.compile's parameters (an embedding table counts the rows looked up). Returns the names
    added."""
    from torch._inductor.virtualized import V

    constants = getattr(V.graph, "constants", None) or {}
    added: set[str] = set()
    for dep in deps:
        tensor = constants.get(dep.name)
        if tensor is not None and dep.name not in accesses:
            accesses[dep.name] = int(tensor.numel() * tensor.element_size())
            added.add(dep.name)
    return added


def _mark_constants(resized: list[ResizedAccess], constants: set[str]) -> list[ResizedAccess]:
    """Tag the re-sized entries of graph constants: their `scheduler_bytes` is the whole
    constant (Inductor itself counts nothing for a constant)."""
    return [
        dataclasses.replace(entry, constant=True) if entry.buffer in constants else entry
        for entry in resized
    ]


def node_buffer_bytes(node: Any) -> NodeSizes:
    """The read and written bytes of one scheduler node; None when Inductor cannot size the
    buffers (no graph context)."""
    try:
        reads = dict(node.get_read_write_buffer_accesses(include_reads=True, include_writes=False))
        writes = dict(node.get_read_write_buffer_accesses(include_reads=False, include_writes=True))
        constants = _add_constants(node.read_writes.reads, reads)
        indirect_reads, indirect_writes = _extern_indirect(node, reads, writes)
        indirect_reads += _sized(node.read_writes.reads, reads)
        indirect_writes += _sized(node.read_writes.writes, writes)
        sliced_reads = _sliced(node.read_writes.reads, reads)
        indirect_reads = _mark_constants(indirect_reads, constants)
        sliced_reads = _mark_constants(sliced_reads, constants)
    except Exception:  # outside a graph context Inductor cannot size buffers
        return NodeSizes(None, None)
    return NodeSizes(
        int(sum(reads.values())),
        int(sum(writes.values())),
        tuple(indirect_reads),
        tuple(indirect_writes),
        tuple(sliced_reads),
    )
