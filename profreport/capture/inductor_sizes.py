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
elements). Every other buffer keeps Inductor's figure.
"""

from __future__ import annotations

from typing import Any


def _indirect_only(deps: list[Any]) -> bool:
    from torch._inductor.dependencies import MemoryDep

    return all(isinstance(d, MemoryDep) and d.is_indirect() for d in deps)


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


def _sized(node: Any, deps: Any, accesses: dict[str, int]) -> tuple[int, list[dict[str, Any]]]:
    """Total bytes of one direction (reads or writes) and the indirect buffers re-sized."""
    from torch._inductor.utils import get_dtype_size, sympy_product
    from torch._inductor.virtualized import V

    by_buffer: dict[str, list[Any]] = {}
    for dep in deps:
        by_buffer.setdefault(dep.name, []).append(dep)
    hint = V.graph.sizevars.optimization_hint
    resized = []
    for name, bytes_ in accesses.items():
        if not _indirect_only(by_buffer.get(name, [None])):
            continue
        element = get_dtype_size(V.graph.get_dtype(name))
        full = _full_bytes(name)
        touched = max(hint(sympy_product(d.size), fallback=0) for d in by_buffer[name])
        counted = min(full, touched * element)
        resized.append(
            {
                "buffer": name,
                "full_bytes": full,
                "scheduler_bytes": bytes_,
                "counted_bytes": counted,
            }
        )
        accesses[name] = counted
    return sum(accesses.values()), resized


def node_buffer_bytes(node: Any) -> dict[str, Any]:
    """{"read", "written", "indirect_reads", "indirect_writes"} of one scheduler node; read and
    written are None when Inductor cannot size the buffers (no graph context)."""
    try:
        reads = dict(node.get_read_write_buffer_accesses(include_reads=True, include_writes=False))
        writes = dict(node.get_read_write_buffer_accesses(include_reads=False, include_writes=True))
        read, indirect_reads = _sized(node, node.read_writes.reads, reads)
        written, indirect_writes = _sized(node, node.read_writes.writes, writes)
    except Exception:  # outside a graph context Inductor cannot size buffers
        return {"read": None, "written": None, "indirect_reads": [], "indirect_writes": []}
    return {
        "read": int(read),
        "written": int(written),
        "indirect_reads": indirect_reads,
        "indirect_writes": indirect_writes,
    }
