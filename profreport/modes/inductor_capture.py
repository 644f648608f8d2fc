"""What Inductor produced while it compiled: each scheduler node's read and written bytes and the
eager calls it computes (read from Inductor's metrics log record while the graph is still
current), and the generated kernel it went into (read at code generation: `KernelCalls`).

On CPU one C++ kernel holds every scheduler node between two library calls (the C++ backend
flushes only at an extern call, a template or a device change), and identical kernel source is
reused under one name, so a node's kernel cannot be told from the node or from the kernel's
descriptive name (which Inductor truncates and which many kernels share a prefix of). Every
scheduling backend announces each kernel it emits through `codegen_comment(node_schedule,
kernel_name)`; we listen there while torch.compile compiles, and name the kernel as the profiler
records it (`graph_<id>_cpp_fused_..._<n>` for C++ kernels with `cpp.enable_kernel_profile`, the
Triton kernel name on GPU).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from profreport.capture.inductor_sizes import node_buffer_bytes
from profreport.capture.provenance import attribution_enabled, node_module, stack_trace_lines
from profreport.record.model import EagerCall, InductorNode


class KernelCalls:
    """Scheduler node -> (kernel name as profiled, kernel call number) for one graph."""

    def __init__(self) -> None:
        self._of: dict[Any, tuple[str, int]] = {}
        self._calls = 0

    def record(self, scheduling: Any, node_schedule: Any, kernel_name: Any) -> None:
        """One emitted kernel call: its name and the scheduler nodes it holds."""
        if not kernel_name:
            return
        from torch._inductor.virtualized import V

        name = str(kernel_name)
        graph_id = getattr(V.graph, "graph_id", None)
        if type(scheduling).__name__ == "CppScheduling" and graph_id is not None:
            # The C++ kernel's RECORD_FUNCTION is "graph_<id>_<kernel name>" (codegen/cpp.py).
            name = f"graph_{graph_id}_{name}"
        call = self._calls
        self._calls += 1
        for snode in node_schedule:
            get_nodes = getattr(snode, "get_nodes", None)
            if get_nodes is None:  # EnableReduction / DisableReduction markers
                continue
            for sub in get_nodes():
                self._of[sub] = (name, call)

    def of_node(self, node: Any) -> tuple[str | None, int | None, bool]:
        """(kernel, kernel call) of a scheduler node, None when it went into no single
        generated kernel (extern calls, no-op nodes, an unannounced kernel), and whether the
        node runs no kernel at all (a no-op node, or the unpacking of a library call's
        outputs)."""
        nop = type(node).__name__ == "NopKernelSchedulerNode" or (
            type(getattr(node, "node", None)).__name__ == "MultiOutput"
        )
        found = {self._of.get(sub) for sub in node.get_nodes()}
        kernel, call = (found.pop() if len(found) == 1 else None) or (None, None)
        return kernel, call, nop

    def clear(self) -> None:
        self._of.clear()


def _scheduling_classes() -> list[type]:
    """Inductor's scheduling backends that define `codegen_comment`."""
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.scheduler import BaseScheduling

    classes: list[type] = [BaseScheduling, CppScheduling]
    try:
        from torch._inductor.codegen.triton import TritonScheduling

        classes.append(TritonScheduling)
    except Exception:  # no Triton in this build: no Triton kernels either
        pass
    return [c for c in classes if "codegen_comment" in vars(c)]


@contextmanager
def recording_kernel_calls(calls: KernelCalls) -> Iterator[None]:
    """While Inductor generates code, record into `calls` which kernel each node went into.
    A backend that stops announcing leaves its nodes without a kernel: reported as not
    identified, never guessed."""
    originals = {cls: vars(cls)["codegen_comment"] for cls in _scheduling_classes()}

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def codegen_comment(self: Any, node_schedule: Any, kernel_name: Any = None) -> Any:
            with suppress(Exception):  # bookkeeping must never break compilation
                calls.record(self, node_schedule, kernel_name)
            return original(self, node_schedule, kernel_name)

        return codegen_comment

    for cls, original in originals.items():
        cls.codegen_comment = wrap(original)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls.codegen_comment = original  # type: ignore[attr-defined]


class InductorNodeCapture(logging.Handler):
    """Receives Inductor's per-graph metrics log record and, while the graph being compiled is
    still current (the record is emitted during compilation), reads each scheduler node's read
    and written buffer bytes, and the generated kernel each went into (several nodes can share
    one kernel; see KernelCalls)."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.nodes: list[InductorNode] = []
        self.kernels = KernelCalls()  # filled during code generation

    def emit(self, record: logging.LogRecord) -> None:
        payload = record.args  # logging unpacks a lone dict argument into `args`
        if not isinstance(payload, dict) or "nodes_num_elem" not in payload:
            return
        cache: dict[int, dict[Any, int]] = {}
        for node, num_elem in payload["nodes_num_elem"]:
            kernel, call, nop = self.kernels.of_node(node)
            described = _describe_inductor_node(node, int(num_elem), cache)
            self.nodes.append(
                dataclasses.replace(described, kernel=kernel, kernel_call=call, nop=nop)
            )
        self.kernels.clear()  # the next graph's nodes are new objects


def _op_name(target: Any) -> str | None:
    schema = getattr(target, "_schema", None)
    return None if schema is None else str(schema.name)


def _graph_positions(graph: Any, cache: dict[int, dict[Any, int]]) -> dict[Any, int]:
    key = id(graph)
    if key not in cache:
        cache[key] = {n: i for i, n in enumerate(graph.nodes)}
    return cache[key]


def _eager_call(origin: Any) -> tuple[str, str] | None:
    """(ATen op, Dynamo node) of the eager call an FX node of Inductor's graph came from."""
    meta = getattr(origin, "meta", None) or {}
    aten = _op_name(meta.get("original_aten"))
    if aten is None:
        return None
    parents = meta.get("from_node") or []
    return aten, parents[0].name if parents else origin.name


def _place(origin: Any, enabled: bool) -> tuple[str, tuple[str, ...]]:
    """The module the eager call ran in ("layers.0.self_attn") and its user source lines, from
    Dynamo's node meta (nn_module_stack, stack_trace)."""
    if not enabled:
        return "", ()
    meta = getattr(origin, "meta", None) or {}
    return node_module(meta), stack_trace_lines(meta.get("stack_trace"))


def _eager_instances(node: Any, cache: dict[int, dict[Any, int]]) -> list[EagerCall]:
    """The eager operations whose computation this scheduler node performs.

    Every FX node Inductor lowered into the kernel carries `original_aten` (the ATen op before
    decomposition) and `from_node` (the Dynamo graph node it came from): together they name one
    eager op call. An extern (library) kernel's origins also list the producers of its inputs,
    so it keeps only its own call: the one its `origin_node` came from, else the call of its own
    operator (`op_overload`), else the calls of its last origins (those no other origin of it
    consumes): a library call picked by autotuning, such as cuBLASLt's bias_addmm, has no
    operator. The unpacking of a multi-output result claims no eager call.
    """
    own: set[tuple[str, str]] | None = None
    extern_op = None
    if type(node).__name__.startswith("Extern"):
        kernel = node.node
        own_call = _eager_call(getattr(kernel, "origin_node", None))
        own = {own_call} if own_call is not None else set()
        extern_op = _op_name(getattr(kernel, "op_overload", None))
        if own_call is None and extern_op is None and type(kernel).__name__ != "MultiOutput":
            own = {c for o in _last_origins(kernel) if (c := _eager_call(o)) is not None}
    found: dict[tuple[str, str], EagerCall] = {}
    enabled = attribution_enabled()
    for sub in node.get_nodes():
        for origin in getattr(sub.node, "origins", ()) or ():
            key = _eager_call(origin)
            if key is None:
                continue
            if own is not None and key not in own and (own or key[0] != extern_op):
                continue
            pos = _graph_positions(origin.graph, cache).get(origin, 0)
            seen = found.get(key)
            if seen is None:
                module, lines = _place(origin, enabled)
                found[key] = EagerCall(key[0], key[1], pos, module, lines or None)
            elif pos < seen.pos:
                found[key] = dataclasses.replace(seen, pos=pos)
    return sorted(found.values(), key=lambda e: e.pos)


def _last_origins(kernel: Any) -> list[Any]:
    """The FX nodes among a kernel's origins that no other of its origins consumes: the call
    itself, not the producers of its inputs (a transpose, an expanded bias)."""
    origins = set(getattr(kernel, "origins", ()) or ())
    return [o for o in origins if not origins.intersection(getattr(o, "users", {}))]


def _describe_inductor_node(
    node: Any, num_elem: int, cache: dict[int, dict[Any, int]]
) -> InductorNode:
    origins: list[str] = []
    for sub in node.get_nodes():
        for origin in sorted(getattr(sub.node, "origins", ()) or (), key=str):
            name = _op_name(getattr(origin, "target", None))
            if name is None:  # Python-level glue such as operator.getitem moves no data
                continue
            if name not in origins:
                origins.append(name)
    sizes = node_buffer_bytes(node)
    return InductorNode(
        name=node.get_name(),
        kind="extern" if type(node).__name__.startswith("Extern") else "generated",
        origins=tuple(origins),
        eager_ops=tuple(_eager_instances(node, cache)),
        read=sizes.read,
        written=sizes.written,
        # Buffers reached through an index tensor, counted by the elements touched rather than
        # whole (profreport.capture.inductor_sizes): why `read` can be below Inductor's figure.
        indirect_reads=sizes.indirect_reads,
        indirect_writes=sizes.indirect_writes,
        # Buffers a fused kernel reads only a slice of, counted by the slice.
        sliced_reads=sizes.sliced_reads,
        # Inductor's own combined figure (its metrics keep num_bytes // 4 per node).
        inductor_bytes=num_elem * 4,
    )


@contextmanager
def capturing_nodes(handler: InductorNodeCapture) -> Iterator[None]:
    """While Inductor compiles (torch.compile's first call, or AOTInductor's ahead-of-time build,
    which emits the same per-graph metrics record), route its metrics log to `handler` and record
    which kernel each scheduler node went into."""
    from torch._inductor import compile_fx

    from profreport.modes.compile_logs import routing_logs

    with (
        routing_logs(handler, [compile_fx.inductor_metrics_log], logging.INFO),
        recording_kernel_calls(handler.kernels),
    ):
        yield
