"""The bytes model checked by hand: every expected number is derived here from shapes."""

from collections.abc import Sequence

import torch

from profreport.analysis.bytes_model import (
    DISPATCH_METHOD,
    INDUCTOR_METHOD,
    calls_from_tensor_io,
    estimate,
    inductor_calls,
)
from profreport.analysis.kernels import BOOKKEEPING_OPS
from profreport.capture.opio import OpIO, record_tensor_io
from profreport.models import load_model
from profreport.record.model import Bytes, InductorNode

F32 = 4


def model_from_tensor_io(
    ops: Sequence[OpIO], bookkeeping: frozenset[str], unseen_kernels: Sequence[str] = ()
) -> Bytes:
    """Bytes of one forward from the dispatcher's view, as the dispatch bytes source makes them
    (profreport.modes.bytes_sources, then the pipeline's estimate)."""
    return estimate(calls_from_tensor_io(ops, bookkeeping), DISPATCH_METHOD, unseen_kernels)


def model_from_inductor_nodes(nodes: Sequence[InductorNode]) -> Bytes:
    """Bytes of one forward of a torch.compile'd model from Inductor's scheduler nodes, as the
    Inductor bytes source makes them."""
    calls, unsized = inductor_calls(nodes)
    return estimate(calls, INDUCTOR_METHOD, unsized)


def _numel(*shape):
    n = 1
    for s in shape:
        n *= s
    return n


def test_simple_eager_matches_hand_derivation():
    m = load_model("simple", torch.device("cpu"), torch.float32, batch_size=8)
    with torch.no_grad():
        ops = record_tensor_io(m.module, m.example_inputs, lambda: None)
    est = model_from_tensor_io(ops, BOOKKEEPING_OPS)
    x = _numel(8, 32, 56, 56) * F32
    w = _numel(64, 32, 3, 3) * F32
    b = 64 * F32
    y = _numel(8, 64, 56, 56) * F32  # conv output = relu input/output = pool input
    pooled = _numel(8, 64, 28, 28) * F32
    indices = _numel(8, 64, 28, 28) * 8  # max_pool2d_with_indices writes int64 indices too
    read = (x + w + b) + y + y
    written = y + y + (pooled + indices)
    assert (read, written) == (16_130_304, 17_661_952)  # the figures the issue quotes
    assert est.read == read
    assert est.written == written
    assert est.source == "modeled"
    by_op = {r.op: r for r in est.table}
    assert by_op["aten::convolution"].read == x + w + b
    assert by_op["aten::max_pool2d_with_indices"].written == pooled + indices


def test_tensor_passed_twice_counts_once_and_views_move_nothing():
    x = torch.randn(16, 32)

    def fn(t):
        v = t.view(32, 16)  # a view: no bytes
        return (t * t).sum() + v.t().contiguous().sum()

    ops = record_tensor_io(fn, (x,), lambda: None)
    est = model_from_tensor_io(ops, BOOKKEEPING_OPS)
    rows = {r.op: r for r in est.table}
    assert "aten::view" not in rows and "aten::t" not in rows
    assert rows["aten::mul"].read == x.numel() * F32  # x passed twice, read once
    assert rows["aten::mul"].written == x.numel() * F32
    assert rows["aten::clone"].read == x.numel() * F32  # contiguous() of a transpose copies


def test_in_place_op_writes_the_tensor_it_mutates_once():
    x = torch.randn(1000)
    ops = record_tensor_io(lambda t: t.relu_(), (x.clone(),), lambda: None)
    est = model_from_tensor_io(ops, BOOKKEEPING_OPS)
    assert [r.op for r in est.table] == ["aten::relu_"]
    assert est.read == 4000 and est.written == 4000


def test_unrecorded_kernels_are_listed_not_zeroed():
    est = model_from_tensor_io([], BOOKKEEPING_OPS, unseen_kernels=["prim::mkldnn_convolution"])
    assert est.not_modeled == ("prim::mkldnn_convolution",)
    assert est.to_json()["not_modeled"] == ["prim::mkldnn_convolution"]


def test_inductor_nodes_sum_and_unsized_nodes_are_reported():
    nodes = [
        {
            "name": "op0",
            "kind": "generated",
            "origins": ["aten::relu", "aten::max_pool2d"],
            "read": 100,
            "written": 25,
        },
        {
            "name": "op1",
            "kind": "extern",
            "origins": ["aten::convolution"],
            "read": 40,
            "written": 100,
        },
        {"name": "op2", "kind": "generated", "origins": [], "read": None, "written": None},
    ]
    est = model_from_inductor_nodes([InductorNode.from_json(n) for n in nodes])
    assert (est.read, est.written) == (140, 125)
    assert est.not_modeled == ("inductor op2",)
    assert {r.op for r in est.table} == {
        "inductor aten::relu+aten::max_pool2d",
        "extern aten::convolution",
    }
