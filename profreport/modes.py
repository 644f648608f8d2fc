"""How the model executes: build each execution mode and collect what its compiler produced.

Modes: eager, script (torch.jit.script), trace (torch.jit.trace), optimize (torch.jit.freeze +
torch.jit.optimize_for_inference) and compile (torch.compile with Inductor). Building a mode
includes its warm-up, so that what is profiled and timed afterwards is the optimized code: the
TorchScript profiling executor specialises only after two calls, and torch.compile compiles on the
first call (that call is timed separately as `compile_s`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import nn

from profreport.capture.inductor_kernels import KernelCalls, recording_kernel_calls
from profreport.capture.inductor_sizes import node_buffer_bytes
from profreport.script_errors import script_failure_line

MODES = ("eager", "script", "trace", "optimize", "compile")

# TorchScript's own warm-up: the profiling executor records shapes on the first call and runs its
# optimized graph from the third call on. We warm up a little beyond that.
JIT_WARMUP_CALLS = 3
WARMUP_CALLS = 3

# Graph node kinds that hold fused work. Their subgraph lists the operations fused together.
FUSION_GROUP_KINDS = frozenset(
    {
        "prim::TensorExprGroup",
        "prim::TensorExprDynamicGroup",
        "prim::FusionGroup",
        "prim::CudaFusionGroup",
        "prim::oneDNNFusionGroup",
        "prim::LlgaFusionGroup",
    }
)
# Library calls that TorchScript's optimization passes substitute for several eager operations.
FUSED_LIBRARY_PREFIXES = (
    "prim::mkldnn_convolution",
    "prim::MKLDNN",
    "aten::cudnn_convolution_relu",
    "aten::cudnn_convolution_add_relu",
    "mkldnn_prepacked::",
)
# Compute nodes the TorchScript interpreter runs without a profiler record (they bypass the
# dispatcher); on CPU we count them from the graph so they are not silently missing.
UNRECORDED_NODE_PREFIXES = ("prim::mkldnn_convolution", "prim::MKLDNN")
NOT_COMPUTE_KINDS = frozenset({"prim::ConstantMKLDNNTensor"})


class ModeError(Exception):
    """A mode cannot be built; the message is the one line the report shows."""


@dataclass
class PreparedMode:
    name: str
    fn: Callable[..., Any]
    compile_s: float | None = None
    compiler: dict[str, Any] = field(default_factory=dict)


@contextmanager
def quiet_torchscript_deprecations() -> Iterator[None]:
    """torch.jit.* warns that it is deprecated on every call; we use it on purpose, so silence
    exactly those messages and nothing else."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore",
            message=r"`torch\.jit\.\w+` is deprecated",
            category=DeprecationWarning,
        )
        yield


def _graph_nodes(graph: torch._C.Graph) -> Iterator[torch._C.Node]:
    for node in graph.nodes():
        yield node
        for block in node.blocks():
            yield from _block_nodes(block)


def _block_nodes(block: torch._C.Block) -> Iterator[torch._C.Node]:
    for node in block.nodes():
        yield node
        for inner in node.blocks():
            yield from _block_nodes(inner)


def _subgraph_ops(node: torch._C.Node) -> list[str]:
    if "Subgraph" not in node.attributeNames():
        return []
    ops: list[str] = []
    for inner in _graph_nodes(node.g("Subgraph")):
        kind = inner.kind()
        if kind in FUSION_GROUP_KINDS:
            ops.extend(_subgraph_ops(inner))
        elif not kind.startswith("prim::Constant"):
            ops.append(kind)
    return ops


def _value_bytes(value: torch._C.Value) -> int | None:
    """Bytes of a graph value from its (profiled) tensor type; 0 for non-tensors, None if the
    type carries no complete shape and dtype."""
    t = value.type()
    if not isinstance(t, torch._C.TensorType):
        return 0
    try:
        sizes, dtype = t.sizes(), t.dtype()
    except RuntimeError:
        return None
    if sizes is None or dtype is None or any(s is None for s in sizes):
        return None
    numel = 1
    for s in sizes:
        numel *= int(s)
    return numel * torch.empty((), dtype=dtype).element_size()


def _boundary_bytes(node: torch._C.Node) -> tuple[int | None, int | None]:
    """(read, written) of a fusion group: its distinct tensor inputs and its outputs."""
    seen: dict[str, int | None] = {}
    for v in node.inputs():
        seen.setdefault(v.debugName(), _value_bytes(v))
    outs = [_value_bytes(v) for v in node.outputs()]
    if any(b is None for b in seen.values()) or any(b is None for b in outs):
        return None, None
    return sum(b or 0 for b in seen.values()), sum(b or 0 for b in outs)


def describe_graph(graph: torch._C.Graph) -> dict[str, Any]:
    """What a TorchScript graph contains: fusion groups, fused library calls and op counts."""
    fusion_groups = []
    fused_library_ops = []
    unrecorded = []
    op_counts: Counter[str] = Counter()
    for node in _graph_nodes(graph):
        kind = node.kind()
        if kind.startswith("prim::Constant") or kind in {"prim::GetAttr", "prim::ListConstruct"}:
            continue
        op_counts[kind] += 1
        if kind in FUSION_GROUP_KINDS:
            ops = _subgraph_ops(node)
            if ops:  # a TensorExprDynamicGroup wraps the group that holds the ops
                read, written = _boundary_bytes(node)
                fusion_groups.append({"kind": kind, "ops": ops, "read": read, "written": written})
        elif kind.startswith(FUSED_LIBRARY_PREFIXES) and kind not in NOT_COMPUTE_KINDS:
            fused_library_ops.append(kind)
        if kind.startswith(UNRECORDED_NODE_PREFIXES) and kind not in NOT_COMPUTE_KINDS:
            unrecorded.append(kind)
    return {
        "graph": str(graph),
        "fusion_groups": fusion_groups,
        "fused_library_ops": fused_library_ops,
        "unrecorded_ops": unrecorded,
        "op_counts": dict(sorted(op_counts.items())),
    }


def _call(fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], sync: Callable[[], None]):
    out = fn(*inputs)
    sync()
    return out


def _warm(fn, inputs, sync, calls: int) -> None:
    for _ in range(calls):
        _call(fn, inputs, sync)


def _jit_graph_after_warmup(fn, inputs, sync) -> torch._C.Graph | None:
    _warm(fn, inputs, sync, JIT_WARMUP_CALLS)
    # Must be read right after a call of this module: it is the graph the executor just ran.
    return torch.jit.last_executed_optimized_graph()


@dataclass(frozen=True)
class FlatOutput:
    """A model output as the tensors it holds, in torch.utils._pytree order."""

    tensors: tuple[torch.Tensor, ...]
    container: str  # what held them: "tensor", "tuple", "dict", "ModelOutput (...)", ...
    dropped: tuple[str, ...]  # type names of the leaves that are not tensors
    plain: bool  # a tensor or (nested) tuples of tensors: what strict torch.jit.trace accepts

    def describe(self) -> str:
        n = len(self.tensors)
        text = f"flattened {self.container} to a tuple of {n} tensor{'s' if n != 1 else ''}"
        if self.dropped:
            counts = Counter(self.dropped)
            text += "; dropped " + ", ".join(f"{k} x{v}" if v > 1 else k for k, v in counts.items())
            several = len(self.dropped) > 1
            text += (
                " (not tensors, and torch.utils._pytree cannot look inside them)"
                if several
                else " (not a tensor, and torch.utils._pytree cannot look inside it)"
            )
        return text


def _container_name(out: Any) -> str:
    kind = type(out)
    if isinstance(out, torch.Tensor):
        return "tensor"
    if any(c.__name__ == "ModelOutput" for c in kind.__mro__[1:]):
        return f"ModelOutput ({kind.__name__})"
    if kind in (tuple, list, dict):
        return kind.__name__
    if isinstance(out, tuple) and hasattr(out, "_fields"):
        return f"namedtuple {kind.__name__}"
    if dataclasses.is_dataclass(out):
        return f"dataclass {kind.__name__}"
    return kind.__name__


def _is_plain(out: Any) -> bool:
    if isinstance(out, torch.Tensor):
        return True
    return type(out) is tuple and all(_is_plain(x) for x in out)


def _leaves(out: Any, tensors: list[torch.Tensor], dropped: list[str]) -> None:
    for leaf in pytree.tree_leaves(out):
        if isinstance(leaf, torch.Tensor):
            tensors.append(leaf)
        elif dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
            # a dataclass pytree does not know: its fields, in declaration order
            fields = [getattr(leaf, f.name) for f in dataclasses.fields(leaf)]
            _leaves(fields, tensors, dropped)
        else:
            dropped.append("None" if leaf is None else type(leaf).__name__)


def flatten_output(out: Any) -> FlatOutput:
    """The tensors of a model output (a tensor, tuples, lists, dicts, dataclasses, a transformers
    ModelOutput, which registers itself as a pytree node). Leaves that are not tensors are
    dropped: a transformers DynamicCache is one (pytree cannot open it), so its key/value tensors
    are not outputs; a cache class registered with pytree would have its tensors kept."""
    tensors: list[torch.Tensor] = []
    dropped: list[str] = []
    _leaves(out, tensors, dropped)
    return FlatOutput(tuple(tensors), _container_name(out), tuple(dropped), _is_plain(out))


class TensorOutputs(nn.Module):
    """Runs the model and returns its output's tensors as a tuple: what torch.jit.trace types."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *inputs: Any) -> tuple[torch.Tensor, ...]:
        return flatten_output(self.model(*inputs)).tensors


def _traceable(module: nn.Module, inputs, sync) -> tuple[nn.Module, str | None]:
    """The module to trace and, when its outputs had to be flattened, what was done.

    One eager call shows the output's structure. A tensor or tuples of tensors trace as they
    are (strict tracing, as before); anything else is wrapped in TensorOutputs."""
    flat = flatten_output(_call(module, inputs, sync))
    if flat.plain:
        return module, None
    if not flat.tensors:
        raise ModeError(
            f"torch.jit.trace needs tensor outputs, and {type(module).__name__}'s output "
            f"({flat.container}) holds none"
        )
    return TensorOutputs(module).eval(), flat.describe()


def _build_script(module: nn.Module, inputs, sync) -> PreparedMode:
    with quiet_torchscript_deprecations():
        try:
            scripted = torch.jit.script(module)
        except Exception as exc:
            raise ModeError(script_failure_line(exc, type(module).__name__)) from exc
        graph = _jit_graph_after_warmup(scripted, inputs, sync)
    compiler = describe_graph(graph) if graph is not None else {}
    return PreparedMode("script", scripted, compiler=compiler)


def _build_trace(module: nn.Module, inputs, sync) -> PreparedMode:
    with quiet_torchscript_deprecations():
        target, flattened = _traceable(module, inputs, sync)
        traced = torch.jit.trace(target, inputs)
        graph = _jit_graph_after_warmup(traced, inputs, sync)
    compiler = describe_graph(graph) if graph is not None else {}
    if flattened:
        compiler["outputs"] = flattened
    return PreparedMode("trace", traced, compiler=compiler)


def _build_optimize(module: nn.Module, inputs, sync) -> PreparedMode:
    notes = []
    flattened = None
    with quiet_torchscript_deprecations():
        try:
            base = torch.jit.script(module)
            notes.append("scripted, then frozen and optimized for inference")
        except Exception as exc:  # models that cannot be scripted can often be traced
            why = script_failure_line(exc, type(module).__name__)
            target, flattened = _traceable(module, inputs, sync)
            base = torch.jit.trace(target, inputs)
            notes.append(f"traced instead of scripted ({why})")
        before = describe_graph(base.inlined_graph)["op_counts"]
        frozen = torch.jit.freeze(base.eval())
        optimized = torch.jit.optimize_for_inference(frozen)
        _jit_graph_after_warmup(optimized, inputs, sync)
    compiler = describe_graph(optimized.graph)
    compiler["op_counts_before"] = before
    compiler["notes"] = notes
    if flattened:
        compiler["outputs"] = flattened
    return PreparedMode("optimize", optimized, compiler=compiler)


class _InductorNodeCapture(logging.Handler):
    """Receives Inductor's per-graph metrics log record and, while the graph being compiled is
    still current (the record is emitted during compilation), reads each scheduler node's read
    and written buffer bytes, and the generated kernel each went into (several nodes can share
    one kernel; see capture/inductor_kernels)."""

    def __init__(self) -> None:
        super().__init__(level=logging.INFO)
        self.nodes: list[dict[str, Any]] = []
        self.kernels = KernelCalls()  # filled during code generation

    def emit(self, record: logging.LogRecord) -> None:
        payload = record.args if isinstance(record.args, dict) else None
        if payload is None and isinstance(record.args, tuple) and record.args:
            payload = record.args[0] if isinstance(record.args[0], dict) else None
        if not payload or "nodes_num_elem" not in payload:
            return
        cache: dict[int, dict[Any, int]] = {}
        for node, num_elem in payload["nodes_num_elem"]:
            described = _describe_inductor_node(node, int(num_elem), cache)
            described.update(self.kernels.of_node(node))
            self.nodes.append(described)
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


def _module_path(origin: Any) -> str:
    """The module the eager call ran in ("layers.0.self_attn"), from Dynamo's module stack."""
    stack = (getattr(origin, "meta", None) or {}).get("nn_module_stack") or {}
    if not stack:
        return ""
    path = str(list(stack.values())[-1][0])
    for prefix in ("L['self'].", "L['args'][0].", "L['self']", "L['args'][0]"):
        if path.startswith(prefix):
            return path[len(prefix) :]
    return path


def _eager_instances(node: Any, cache: dict[int, dict[Any, int]]) -> list[dict[str, Any]]:
    """The eager operations whose computation this scheduler node performs.

    Every FX node Inductor lowered into the kernel carries `original_aten` (the ATen op before
    decomposition) and `from_node` (the Dynamo graph node it came from): together they name one
    eager op call. An extern (library) kernel's origins also list the producers of its inputs,
    so it keeps only its own call: the one its `origin_node` came from, else the call of its own
    operator; an extern with neither (a multi-output unpacking, say) claims no eager call.
    """
    own: set[tuple[str, str]] | None = None
    extern_op = None
    if type(node).__name__.startswith("Extern"):
        own_call = _eager_call(getattr(node.node, "origin_node", None))
        own = {own_call} if own_call is not None else set()
        extern_op = _op_name(getattr(node.node, "op_overload", None))
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for sub in node.get_nodes():
        for origin in getattr(sub.node, "origins", ()) or ():
            key = _eager_call(origin)
            if key is None:
                continue
            if own is not None and key not in own and (own or key[0] != extern_op):
                continue
            pos = _graph_positions(origin.graph, cache).get(origin, 0)
            entry = found.setdefault(
                key,
                {"op": key[0], "source": key[1], "pos": pos, "module": _module_path(origin)},
            )
            entry["pos"] = min(entry["pos"], pos)
    return sorted(found.values(), key=lambda e: e["pos"])


def _describe_inductor_node(
    node: Any, num_elem: int, cache: dict[int, dict[Any, int]] | None = None
) -> dict[str, Any]:
    cache = {} if cache is None else cache
    origins: list[str] = []
    for sub in node.get_nodes():
        for origin in sorted(getattr(sub.node, "origins", ()) or (), key=str):
            name = _op_name(getattr(origin, "target", None))
            if name is None:  # Python-level glue such as operator.getitem moves no data
                continue
            if name not in origins:
                origins.append(name)
    sizes = node_buffer_bytes(node)
    return {
        "name": node.get_name(),
        "kind": "extern" if type(node).__name__.startswith("Extern") else "generated",
        "origins": origins,
        "eager_ops": _eager_instances(node, cache),
        "read": sizes["read"],
        "written": sizes["written"],
        # Buffers reached through an index tensor, counted by the elements touched rather than
        # whole (profreport.capture.inductor_sizes): why `read` can be below Inductor's figure.
        "indirect_reads": sizes["indirect_reads"],
        "indirect_writes": sizes["indirect_writes"],
        # Buffers a fused kernel reads only a slice of, counted by the slice.
        "sliced_reads": sizes["sliced_reads"],
        # Inductor's own combined figure (its metrics keep num_bytes // 4 per node).
        "inductor_bytes": num_elem * 4,
    }


def _build_compile(module: nn.Module, inputs, sync) -> PreparedMode:
    import torch._inductor.config as inductor_config
    from torch._inductor import compile_fx, metrics

    torch._dynamo.reset()
    metrics.reset()
    inductor_config.cpp.enable_kernel_profile = True  # CPU kernels appear in the profiler
    inductor_config.fx_graph_cache = False  # a cache hit would skip codegen and its metrics
    logger = compile_fx.inductor_metrics_log
    handler = _InductorNodeCapture()
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        compiled = torch.compile(module)
        start = time.perf_counter()
        with recording_kernel_calls(handler.kernels):
            _call(compiled, inputs, sync)
        compile_s = time.perf_counter() - start
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = old_propagate
    from torch._dynamo.utils import counters

    compiler: dict[str, Any] = {
        "inductor_nodes": handler.nodes,
        "inductor_bytes_accessed": int(metrics.num_bytes_accessed),
        "generated_kernel_count": int(metrics.generated_kernel_count),
        "graphs": int(counters["stats"].get("unique_graphs", 0)),
        "graph_breaks": int(sum(counters["graph_break"].values())),
    }
    _warm(compiled, inputs, sync, WARMUP_CALLS)
    return PreparedMode("compile", compiled, compile_s=compile_s, compiler=compiler)


def _build_eager(module: nn.Module, inputs, sync) -> PreparedMode:
    _warm(module, inputs, sync, WARMUP_CALLS)
    return PreparedMode("eager", module)


BUILDERS: dict[str, Callable[..., PreparedMode]] = {
    "eager": _build_eager,
    "script": _build_script,
    "trace": _build_trace,
    "optimize": _build_optimize,
    "compile": _build_compile,
}


def prepare_mode(
    name: str, module: nn.Module, inputs: tuple[torch.Tensor, ...], sync: Callable[[], None]
) -> PreparedMode:
    """Build mode `name` and warm it up. Must run under torch.no_grad() with `module` in eval."""
    if name not in BUILDERS:
        raise ModeError(f"unknown mode {name!r}; choose from {', '.join(MODES)}")
    start = time.perf_counter()
    prepared = BUILDERS[name](module, inputs, sync)
    if prepared.compile_s is None and name != "eager":
        # For TorchScript modes: scripting/tracing/freezing plus warm-up calls.
        prepared.compile_s = time.perf_counter() - start
    return prepared
