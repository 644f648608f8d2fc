"""Inductor library calls without an operator: cuBLASLt's bias_addmm on CUDA.

Inductor's addmm autotuning offers `bias_addmm` (cuBLASLt's bias epilogue) as an extern kernel
choice registered with no `op_overload`. The capture must still say which eager call such a node
computes, and the fusion map must show it as a library call. The scheduler nodes here are stubs
with the class names Inductor uses (what the capture keys on) over a real FX graph; the last test
makes Inductor itself pick bias_addmm on CPU.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
from torch.fx import Graph, Node

from profreport.analysis.bytes_model import inductor_calls
from profreport.analysis.fusion import compile_fusion
from profreport.analysis.kernels import BOOKKEEPING_OPS
from profreport.capture.inductor_sizes import NodeSizes
from profreport.modes import inductor_capture
from profreport.modes.inductor_capture import KernelCalls
from profreport.record.model import InductorNode, TensorIO

aten = torch.ops.aten
F32 = 4
X, W, B, Y = 8 * 64 * F32, 64 * 64 * F32, 64 * F32, 8 * 64 * F32  # mat1, mat2, bias, out


class ExternKernelOut:
    """An extern kernel as an autotuned choice leaves it: origins, maybe an origin_node, and no
    operator for bias_addmm."""

    def __init__(self, origins: set[Node], origin_node: Node | None, op_overload: Any) -> None:
        self.origins = origins
        self.origin_node = origin_node
        self.op_overload = op_overload


class MultiOutput(ExternKernelOut):
    """The unpacking of a multi-output library call's result (runs no kernel)."""


class ExternKernelSchedulerNode:
    def __init__(self, name: str, node: ExternKernelOut) -> None:
        self.node, self._name = node, name

    def get_nodes(self) -> list[ExternKernelSchedulerNode]:
        return [self]

    def get_name(self) -> str:
        return self._name


class SchedulerNode(ExternKernelSchedulerNode):
    """A generated (Triton) kernel's node."""


def _graph() -> dict[str, Node]:
    """relu(addmm(bias.expand(8, 64), x, w.permute(1, 0))), as Inductor's graph holds it: each
    node's `original_aten` is the op it was traced from."""
    g = Graph()
    b, x, w = (g.placeholder(n) for n in ("b", "x", "w"))
    expand = g.call_function(aten.expand.default, (b, [8, 64]))
    permute = g.call_function(aten.permute.default, (w, [1, 0]))
    addmm = g.call_function(aten.addmm.default, (expand, x, permute))
    relu = g.call_function(aten.relu.default, (addmm,))
    g.output(relu)
    nodes = {"expand": expand, "permute": permute, "addmm": addmm, "relu": relu}
    for node in nodes.values():
        node.meta["original_aten"] = node.target
    return nodes


@pytest.fixture
def sized(monkeypatch):
    """Buffer sizes need a live Inductor graph: these are the bias_addmm's and the relu's."""

    def sizes(node: ExternKernelSchedulerNode) -> NodeSizes:
        read, written = (X + W + B, Y) if node.get_name() == "op0" else (Y, Y)
        return NodeSizes(read, written)

    monkeypatch.setattr(inductor_capture, "node_buffer_bytes", sizes)


def _bias_addmm(fx: dict[str, Node], origin_node: Node | None) -> ExternKernelSchedulerNode:
    origins = {fx["addmm"], fx["expand"], fx["permute"]}
    return ExternKernelSchedulerNode("op0", ExternKernelOut(origins, origin_node, None))


def _eager_ops(described: InductorNode) -> list[str]:
    return [e.op for e in described.eager_ops]


@pytest.mark.parametrize("origin_node", ["addmm", None])
def test_bias_addmm_claims_its_own_eager_call(sized, origin_node):
    fx = _graph()
    node = _bias_addmm(fx, fx[origin_node] if origin_node else None)

    described = inductor_capture._describe_inductor_node(node, 0, {})

    assert described.kind == "extern"
    assert described.origins == ("aten::addmm", "aten::expand", "aten::permute")
    # its own call only: the expand and the transpose produce its inputs
    assert [e.to_json() for e in described.eager_ops] == [
        {"op": "aten::addmm", "source": fx["addmm"].name, "pos": 5, "module": ""}
    ]
    assert (described.read, described.written) == (X + W + B, Y)


def test_an_extern_with_an_operator_still_keeps_to_it(sized):
    fx = _graph()
    origins = {fx["addmm"], fx["permute"]}
    node = ExternKernelSchedulerNode("op0", ExternKernelOut(origins, None, aten.addmm.out))
    assert _eager_ops(inductor_capture._describe_inductor_node(node, 0, {})) == ["aten::addmm"]


def test_unpacking_a_multi_output_result_claims_nothing(sized):
    fx = _graph()
    node = ExternKernelSchedulerNode("op2", MultiOutput({fx["addmm"]}, None, None))
    assert inductor_capture._describe_inductor_node(node, 0, {}).eager_ops == ()
    assert KernelCalls().of_node(node) == (None, None, True)


def test_bias_addmm_is_a_library_call_in_the_fusion_map(sized):
    fx = _graph()
    relu = SchedulerNode("op1", ExternKernelOut({fx["relu"]}, fx["relu"], None))
    nodes = []
    for node in (_bias_addmm(fx, None), relu):
        described = inductor_capture._describe_inductor_node(node, 0, {})
        kernel, call, nop = KernelCalls().of_node(node)  # an extern goes into no generated kernel
        nodes.append(dataclasses.replace(described, kernel=kernel, kernel_call=call, nop=nop))
    nodes[1] = dataclasses.replace(nodes[1], kernel="triton_poi_fused_relu_0", kernel_call=0)
    eager = [
        TensorIO(op="aten::addmm", read=X + W + B, written=Y, flops=2 * 8 * 64 * 64),
        TensorIO(op="aten::relu", read=Y, written=Y, flops=None),
    ]

    fusion = compile_fusion(nodes, eager, BOOKKEEPING_OPS, ["triton_poi_fused_relu_0"])

    library, relu_group = fusion.groups
    assert library.kernels == ("library addmm",) and library.eager_ops == ("addmm",)
    assert library.eager_bytes == X + W + B + Y == library.kernel_bytes
    assert relu_group.eager_ops == ("relu",)
    assert not any("no compiled kernel" in g.note for g in fusion.groups)
    calls, unsized = inductor_calls(nodes)
    assert [c.op for c in calls] == ["extern aten::addmm", "inductor aten::relu"] and not unsized


@pytest.mark.slow
def test_inductor_picks_bias_addmm_and_the_capture_names_its_call(monkeypatch):
    """Inductor on CPU, its addmm autotuning left only the bias_addmm choice: the node it makes
    has no op_overload, and the capture still finds its eager call."""
    import torch._inductor.kernel.mm as inductor_mm

    choose = inductor_mm.autotune_select_algorithm
    offered: list[str] = []

    def only_bias_addmm(name: str, choices: list[Any], *args: Any, **kwargs: Any) -> Any:
        offered.extend(str(getattr(c, "name", "")) for c in choices)
        picked = [c for c in choices if getattr(c, "name", "") == "bias_addmm"]
        return choose(name, picked or choices, *args, **kwargs)

    monkeypatch.setattr(inductor_mm, "autotune_select_algorithm", only_bias_addmm)

    class BiasAddmm(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(64, 64))
            self.b = torch.nn.Parameter(torch.randn(64))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(torch.addmm(self.b.expand(x.shape[0], 64), x, self.w))

    handler = inductor_capture.InductorNodeCapture()
    torch._dynamo.reset()
    with (
        torch._inductor.config.patch(max_autotune_gemm=True, force_disable_caches=True),
        inductor_capture.capturing_nodes(handler),
        torch.no_grad(),
    ):
        torch.compile(BiasAddmm())(torch.randn(8, 64))
    torch._dynamo.reset()

    assert "bias_addmm" in offered
    (extern,) = [n for n in handler.nodes if n.kind == "extern"]
    assert [e.op for e in extern.eager_ops] == ["aten::addmm"]
    assert extern.kernel is None and extern.written == Y
