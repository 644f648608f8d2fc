"""Fusion map and the bytes model for more models and modes, each number derived by hand."""

import textwrap

import pytest
import torch

from profreport.analysis.bytes_model import calls_from_tensor_io
from profreport.analysis.fusion import compile_fusion, optimize_fusion, script_fusion
from profreport.analysis.kernels import BOOKKEEPING_OPS
from profreport.capture.opio import record_tensor_io
from profreport.models import load_model
from profreport.pipeline import RunOptions, collect_run
from profreport.record import load
from tests.conftest import generate_run

F32 = 4


def _call(op, read, written, flops=None):
    return {"op": op, "read": read, "written": written, "flops": flops}


def test_conv_bn_relu_eager_bytes_from_shapes():
    m = load_model("conv-bn-relu", torch.device("cpu"), torch.float32, batch_size=2)
    with torch.no_grad():
        calls = calls_from_tensor_io(
            record_tensor_io(m.module, m.example_inputs, lambda: None), BOOKKEEPING_OPS
        )
    x = 2 * 32 * 28 * 28 * F32
    y = 2 * 64 * 28 * 28 * F32  # every activation after the first conv
    w1, w2 = 64 * 32 * 9 * F32, 64 * 64 * 9 * F32
    bn_params = 4 * 64 * F32  # weight, bias, running mean, running var
    expected = [
        ("aten::convolution", x + w1, y),  # bias=False
        ("aten::native_batch_norm", y + bn_params, y),  # eval: save_mean/invstd are empty
        ("aten::relu", y, y),
        ("aten::convolution", y + w2, y),
        ("aten::native_batch_norm", y + bn_params, y),
        ("aten::relu", y, y),
    ]
    assert [(c.op, c.read, c.written) for c in calls] == expected
    # FLOPs from torch's flop counter: 2 * N * C_out * H * W * C_in * k * k
    assert calls[0].flops == 2 * 2 * 64 * 28 * 28 * 32 * 9


def test_compile_fusion_groups_share_eager_calls_and_add_up():
    T = 1000
    eager = [
        _call("aten::convolution", 3 * T, T),
        _call("aten::relu", T, T),
        _call("aten::max_pool2d_with_indices", T, 3 * T),
    ]
    inst = lambda op, src, pos: {"op": op, "source": src, "pos": pos}  # noqa: E731
    nodes = [
        {
            "name": "op0",
            "kind": "generated",
            "eager_ops": [inst("aten::convolution", "c", 1)],
            "read": 2 * T,
            "written": 2 * T,
        },
        {
            "name": "op1",
            "kind": "extern",
            "eager_ops": [inst("aten::convolution", "c", 1)],
            "read": 3 * T,
            "written": T,
        },
        {
            "name": "op2",
            "kind": "generated",
            "eager_ops": [
                inst("aten::relu", "r", 2),
                inst("aten::max_pool2d_with_indices", "p", 3),
            ],
            "read": T,
            "written": T // 4,
        },
    ]
    fm = compile_fusion(
        nodes, eager, BOOKKEEPING_OPS, ["graph_0_cpp_fused_max_pool2d_with_indices_relu_1"]
    )
    conv, pool = fm["groups"]
    assert conv["eager_ops"] == ["convolution"] and conv["kernels"] == [
        "op0",
        "library convolution",
    ]
    assert (conv["eager_bytes"], conv["kernel_bytes"], conv["saved_bytes"]) == (
        4 * T,
        8 * T,
        -4 * T,
    )
    assert "layout" in conv["note"]
    assert pool["eager_ops"] == ["relu", "max_pool2d_with_indices"]
    assert pool["kernels"] == ["graph_0_cpp_fused_max_pool2d_with_indices_relu_1"]
    assert pool["saved_bytes"] == (2 * T + 4 * T) - (T + T // 4)
    assert fm["saved_bytes"] == conv["saved_bytes"] + pool["saved_bytes"]
    assert (fm["fused_groups"], fm["eager_ops_fused"]) == (1, 2)


def test_compile_fusion_reports_eager_ops_without_kernel():
    eager = [_call("aten::relu", 10, 10), _call("aten::gelu", 10, 10)]
    nodes = [
        {
            "name": "op0",
            "kind": "generated",
            "eager_ops": [{"op": "aten::relu", "source": "r", "pos": 0}],
            "read": 10,
            "written": 10,
        }
    ]
    fm = compile_fusion(nodes, eager, BOOKKEEPING_OPS)
    assert fm["groups"][-1]["eager_ops"] == ["gelu"]
    assert fm["groups"][-1]["kernels"] == []
    assert fm["groups"][-1]["saved_bytes"] == 20


def test_optimize_pairs_by_family_folds_and_adds():
    eager = [
        _call("aten::convolution", 100, 50),
        _call("aten::native_batch_norm", 51, 50),
        _call("aten::relu", 50, 50),
    ]
    mode = [
        _call("aten::to_mkldnn", 30, 30),
        _call("aten::cudnn_convolution_relu", 100, 50),
        _call("aten::_to_dense", 50, 50),
    ]
    fm = optimize_fusion(eager, mode, BOOKKEEPING_OPS)
    fused, folded, added = fm["groups"]
    assert fused["eager_ops"] == ["convolution", "relu"] and fused["kernels"] == [
        "cudnn_convolution_relu"
    ]
    assert fused["saved_bytes"] == (150 + 100) - 150
    assert folded["eager_ops"] == ["native_batch_norm"] and folded["saved_bytes"] == 101
    assert added["kernels"] == ["to_mkldnn", "_to_dense"] and added["saved_bytes"] == -160
    assert fm["saved_bytes"] == 100 + 101 - 160


def test_script_fusion_maps_group_ops_to_eager_calls():
    eager = [_call("aten::sigmoid", 4, 4), _call("aten::mul", 8, 4), _call("aten::add", 8, 4)]
    groups = [
        {
            "kind": "prim::TensorExprGroup",
            "ops": ["aten::sigmoid", "aten::mul"],
            "boundary_bytes": 12,
        }
    ]
    fm = script_fusion(groups, eager)
    (g,) = fm["groups"]
    assert g["eager_ops"] == ["sigmoid", "mul"] and g["kernels"] == ["prim::TensorExprGroup"]
    assert (g["eager_bytes"], g["kernel_bytes"], g["saved_bytes"]) == (20, 12, 8)


@pytest.fixture
def nnc_on_cpu():
    """Force TorchScript's NNC fuser on CPU through its interpreter (no LLVM needed)."""
    old_fuse = torch._C._jit_can_fuse_on_cpu()  # must-use-LLVM has no getter; its default is True
    torch._C._jit_override_can_fuse_on_cpu(True)
    torch._C._jit_set_te_must_use_llvm_cpu(False)
    try:
        yield
    finally:
        torch._C._jit_override_can_fuse_on_cpu(old_fuse)
        torch._C._jit_set_te_must_use_llvm_cpu(True)


def test_script_mode_with_a_real_nnc_fusion_group(tmp_path, nnc_on_cpu):
    f = tmp_path / "pointwise.py"
    f.write_text(
        textwrap.dedent(
            """
            import torch
            class Chain(torch.nn.Module):
                def forward(self, x, g):
                    y = torch.sigmoid(g) * torch.tanh(x)
                    return x + y * 0.5 - torch.relu(y)
            def build():
                return Chain(), (torch.randn(4, 16), torch.randn(4, 16))
            """
        )
    )
    rec = load(generate_run(tmp_path / "out", "--model", f"{f}:build", "--modes", "eager,script"))
    script = rec["modes"]["script"]
    t = 4 * 16 * F32
    (group,) = script["compiler"]["fusion_groups"]
    assert group["ops"] == [
        "aten::sigmoid",
        "aten::tanh",
        "aten::mul",
        "aten::mul",
        "aten::add",
        "aten::relu",
        "aten::sub",
    ]
    # boundary: reads x and g, writes the result; eager: 10 tensor reads and 7 writes
    assert (group["read"], group["written"]) == (2 * t, t)
    assert (script["bytes"]["read"], script["bytes"]["written"]) == (2 * t, t)
    (g,) = script["fusion"]["groups"]
    assert (g["eager_bytes"], g["kernel_bytes"], g["saved_bytes"]) == (17 * t, 3 * t, 14 * t)
    assert "TorchScript fused 1 group(s)" in script["verdict"]


def test_measured_bytes_say_why_they_are_missing(tmp_path):
    m = load_model("gated-residual", torch.device("cpu"), torch.float32, batch_size=1)
    opts = RunOptions(modes=("eager",), measure_bytes=True)
    rec = collect_run(m, torch.device("cpu"), "float32", tmp_path, opts)
    measured = rec["modes"]["eager"]["bytes"]["measured"]
    assert measured["available"] is False
    assert "device is cpu" in measured["reason"]
    assert measured["read"] is None  # never a silent zero


def test_kernel_rows_take_their_operations_bytes():
    from profreport.analysis.kernel_bytes import attach_kernel_bytes

    mode = {
        "bytes": {"table": [{"op": "aten::convolution", "read": 300, "written": 100}]},
        "kernels": {
            "table": [
                # a cuDNN convolution launching two kernels under aten::cudnn_convolution
                {
                    "name": "implicit_gemm_kernel",
                    "launched_by": "aten::cudnn_convolution",
                    "launched_by_top": "aten::conv2d",
                },
                {
                    "name": "nchwToNhwcKernel",
                    "launched_by": "aten::cudnn_convolution",
                    "launched_by_top": "aten::conv2d",
                },
                {"name": "mystery", "launched_by": None, "launched_by_top": None},
            ]
        },
    }
    attach_kernel_bytes(mode)
    a, b, c = mode["kernels"]["table"]
    assert (a["bytes_read"], a["bytes_written"], a["bytes_op"], a["bytes_shared_by"]) == (
        300,
        100,
        "aten::convolution",
        2,
    )
    assert b["bytes_shared_by"] == 2
    assert c["bytes_read"] is None and c["bytes_op"] is None
