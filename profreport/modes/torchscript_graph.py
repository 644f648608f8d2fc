"""What a TorchScript graph holds (fusion groups, fused library calls, op counts) and the shared
warm-up helpers of the TorchScript modes."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from profreport.modes.base import PreparedMode, Sync, warm_up
from profreport.modes.outputs import with_tensor_outputs
from profreport.record.model import CompilerEvidence, ScriptFusionGroup

# TorchScript's own warm-up: the profiling executor records shapes on the first call and runs its
# optimized graph from the third call on. We warm up a little beyond that.
JIT_WARMUP_CALLS = 3


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


def _graph_nodes(graph: torch._C.Graph | torch._C.Block) -> Iterator[torch._C.Node]:
    for node in graph.nodes():
        yield node
        for block in node.blocks():
            yield from _graph_nodes(block)


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
    return math.prod(int(s) for s in sizes) * torch.empty((), dtype=dtype).element_size()


def _boundary_bytes(node: torch._C.Node) -> tuple[int | None, int | None]:
    """(read, written) of a fusion group: its distinct tensor inputs and its outputs."""
    seen: dict[str, int | None] = {}
    for v in node.inputs():
        seen.setdefault(v.debugName(), _value_bytes(v))
    outs = [_value_bytes(v) for v in node.outputs()]
    if any(b is None for b in seen.values()) or any(b is None for b in outs):
        return None, None
    return sum(b or 0 for b in seen.values()), sum(b or 0 for b in outs)


def describe_graph(graph: torch._C.Graph) -> CompilerEvidence:
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
                fusion_groups.append(ScriptFusionGroup(kind, tuple(ops), read, written))
        elif kind.startswith(FUSED_LIBRARY_PREFIXES) and kind not in NOT_COMPUTE_KINDS:
            fused_library_ops.append(kind)
        if kind.startswith(UNRECORDED_NODE_PREFIXES) and kind not in NOT_COMPUTE_KINDS:
            unrecorded.append(kind)
    return CompilerEvidence(
        graph=str(graph),
        fusion_groups=tuple(fusion_groups),
        fused_library_ops=tuple(fused_library_ops),
        unrecorded_ops=tuple(unrecorded),
        op_counts=dict(sorted(op_counts.items())),
    )


def jit_graph_after_warmup(
    fn: Callable[..., Any], inputs: tuple[Any, ...], sync: Sync
) -> torch._C.Graph | None:
    warm_up(fn, inputs, sync, JIT_WARMUP_CALLS)
    # Must be read right after a call of this module: it is the graph the executor just ran.
    # (torch.jit.last_executed_optimized_graph is this function, re-exported)
    graph: torch._C.Graph | None = torch._C._last_executed_optimized_graph()
    return graph


def traced(module: nn.Module, inputs: tuple[Any, ...], sync: Sync) -> tuple[Any, str | None]:
    """`module` traced by torch.jit.trace and, when its outputs had to be flattened, what was
    done.

    One eager call shows the output's structure. A tensor or tuples of tensors trace as they
    are (strict tracing, as before); anything else is wrapped in TensorOutputs."""
    target, flattened = with_tensor_outputs(
        module, warm_up(module, inputs, sync, 1), "torch.jit.trace"
    )
    trace: Callable[..., Any] = torch.jit.trace  # untyped in torch's stubs
    return trace(target, inputs), flattened


def prepared_after_warmup(
    name: str,
    jitted: Callable[..., Any],
    inputs: tuple[Any, ...],
    sync: Sync,
    flattened: str | None = None,
) -> PreparedMode:
    """A scripted or traced module, warmed up until the profiling executor runs its optimized
    graph, with what that graph holds (and how the outputs were flattened, if they were)."""
    with quiet_torchscript_deprecations():
        graph = jit_graph_after_warmup(jitted, inputs, sync)
    compiler = describe_graph(graph) if graph is not None else CompilerEvidence()
    if flattened:
        compiler = dataclasses.replace(compiler, outputs=flattened)
    return PreparedMode(name, jitted, compiler=compiler)
