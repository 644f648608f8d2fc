"""Fusion map and the bytes model for more models and modes, each number derived by hand."""

import textwrap

import pytest
import torch

from profreport.analysis import fusion, fusion_optimize
from profreport.analysis.bytes_model import calls_from_tensor_io
from profreport.analysis.kernels import BOOKKEEPING_OPS
from profreport.capture.opio import record_tensor_io
from profreport.files import RunFolder
from profreport.models import load_model
from profreport.pipeline import RunOptions, RunSetup, quiet
from profreport.record import load
from profreport.record.model import InductorNode, OkMode, ScriptFusionGroup, TensorIO
from profreport.runner import profile_runs
from tests.conftest import generate_run

F32 = 4


# The fusion maps as a run record keeps them (JSON), from nodes and groups written as JSON.
def compile_fusion(nodes, *args):
    return fusion.compile_fusion([InductorNode.from_json(n) for n in nodes], *args).to_json()


def script_fusion(groups, eager):
    typed = [ScriptFusionGroup(g["kind"], tuple(g["ops"]), g["boundary_bytes"], 0) for g in groups]
    return fusion.script_fusion(typed, eager).to_json()


def optimize_fusion(*args):
    return fusion_optimize.optimize_fusion(*args).to_json()


def _call(op, read, written, flops=None):
    return TensorIO(op=op, read=read, written=written, flops=flops)


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


def _inst(op, src, pos, module=""):
    return {"op": op, "source": src, "pos": pos, "module": module}


def _node(name, kind, eager_ops, read, written, kernel=None, call=None):
    return {
        "name": name,
        "kind": kind,
        "eager_ops": eager_ops,
        "read": read,
        "written": written,
        "kernel": kernel,
        "kernel_call": call,
    }


def test_compile_fusion_one_group_per_kernel_call_and_savings_add_up():
    T = 1000
    eager = [
        _call("aten::convolution", 3 * T, T),
        _call("aten::relu", T, T),
        _call("aten::max_pool2d_with_indices", T, 3 * T),
    ]
    conv = _inst("aten::convolution", "c", 1)
    layout_kernel = "graph_0_cpp_fused_convolution_0"
    pool_kernel = "graph_0_cpp_fused_max_pool2d_with_indices_relu_1"
    nodes = [
        # Inductor's channels-last conversion of the convolution's input: its provenance is the
        # convolution, which the library call computes.
        _node("op0", "generated", [conv], 2 * T, 2 * T, layout_kernel, 0),
        _node("op1", "extern", [conv], 3 * T, T),
        # one C++ kernel holding two scheduler nodes
        _node("op2", "generated", [_inst("aten::relu", "r", 2)], T, T, pool_kernel, 1),
        _node(
            "op3",
            "generated",
            [_inst("aten::max_pool2d_with_indices", "p", 3)],
            T,
            T // 4,
            pool_kernel,
            1,
        ),
    ]
    fm = compile_fusion(nodes, eager, BOOKKEEPING_OPS, [layout_kernel, pool_kernel])
    layout, library, pool = fm["groups"]
    assert (layout["eager_ops"], layout["kernels"], layout["library_operands"]) == (
        [],
        [layout_kernel],
        ["convolution"],
    )
    assert (layout["eager_bytes"], layout["kernel_bytes"], layout["saved_bytes"]) == (
        0,
        4 * T,
        -4 * T,
    )
    assert "layout" in layout["note"] and not layout["fused"]
    assert library["eager_ops"] == ["convolution"] and library["kernels"] == ["library convolution"]
    assert library["note"] == "library call" and not library["fused"]
    assert (library["eager_bytes"], library["kernel_bytes"]) == (4 * T, 4 * T)
    assert pool["eager_ops"] == ["relu", "max_pool2d_with_indices"]
    assert pool["kernels"] == [pool_kernel] and pool["fused"]
    assert pool["kernel_bytes"] == 2 * T + T + T // 4
    assert pool["saved_bytes"] == (2 * T + 4 * T) - (3 * T + T // 4)
    assert fm["saved_bytes"] == -4 * T + 0 + pool["saved_bytes"]
    assert (fm["fused_groups"], fm["eager_ops_fused"]) == (1, 2)
    assert fm["per_kernel"] == {
        layout_kernel: {"read": 2 * T, "written": 2 * T},
        pool_kernel: {"read": 2 * T, "written": T + T // 4},
    }


def test_compile_fusion_recomputed_op_is_listed_in_each_kernel_and_counted_once():
    eager = [
        _call("aten::pow", 10, 10),
        _call("aten::mean", 10, 1),
        _call("aten::mul", 11, 10),
        _call("aten::add_", 20, 10),  # in place in eager, functional `add` in the graph
    ]
    pow_, mean = _inst("aten::pow", "pow_1", 0), _inst("aten::mean", "variance", 1)
    mul, add = _inst("aten::mul", "mul", 2), _inst("aten::add", "add", 3)
    nodes = [
        _node("op0", "generated", [pow_, mean, mul], 10, 10, "k_0", 0),
        _node("op1", "generated", [pow_, mean, add], 20, 10, "k_1", 1),
        # a node whose kernel code generation did not report: named by itself, never by k_1
        _node("op2", "generated", [add], 20, 10),
    ]
    fm = compile_fusion(nodes, eager, BOOKKEEPING_OPS, ["k_0", "k_1"])
    first, second, unknown = fm["groups"]
    assert first["eager_ops"] == ["pow", "mean", "mul"] and first["kernels"] == ["k_0"]
    assert first["recomputed"] == ["pow", "mean"] and first["counted_elsewhere"] == []
    assert first["eager_bytes"] == 20 + 11 + 21
    assert second["eager_ops"] == ["pow", "mean", "add"] and second["kernels"] == ["k_1"]
    assert second["recomputed"] == ["pow", "mean", "add"]
    assert second["counted_elsewhere"] == ["pow", "mean"]
    assert second["eager_bytes"] == 30  # the eager add_ only: pow and mean count in k_0
    assert "recomputed: pow, mean" in second["note"]
    assert unknown["kernels"] == ["op2"] and "not identified" in unknown["note"]
    assert unknown["eager_bytes"] == 0 and unknown["counted_elsewhere"] == ["add"]
    assert "op2" not in fm["per_kernel"] and set(fm["per_kernel"]) == {"k_0", "k_1"}
    # every eager byte counted once, every kernel byte once
    assert fm["saved_bytes"] == (20 + 11 + 21 + 30) - (20 + 30 + 30)
    assert not any(g["note"].startswith("eager ops with no compiled kernel") for g in fm["groups"])


def test_compile_fusion_keeps_library_ops_out_of_generated_kernels():
    eager = [_call("aten::mm", 30, 10), _call("aten::where", 10, 10)]
    sdpa_prep = [_inst("aten::where", "w", 0), _inst("aten::mm", "mm", 1)]
    nodes = [
        _node("op0", "generated", sdpa_prep, 10, 10, "k_0", 0),
        _node("op1", "extern", [_inst("aten::mm", "mm", 1)], 30, 10),
    ]
    fm = compile_fusion(nodes, eager, BOOKKEEPING_OPS, ["k_0"])
    prep, library = fm["groups"]
    assert prep["eager_ops"] == ["where"] and not prep["fused"]
    assert prep["library_operands"] == ["mm"] and "operands of library call mm" in prep["note"]
    assert library["eager_ops"] == ["mm"] and library["eager_bytes"] == 40


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


def _pointwise_chain(folder):
    """A model file whose forward is one pointwise chain NNC fuses into one group."""
    f = folder / "pointwise.py"
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
    return f


@pytest.mark.slow
def test_script_mode_with_a_real_nnc_fusion_group(tmp_path, nnc_on_cpu):
    f = _pointwise_chain(tmp_path)
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


@pytest.mark.slow
def test_optimize_mode_with_a_real_nnc_fusion_group(tmp_path, nnc_on_cpu):
    """What CUDA does to optimize (NNC fuses its pointwise chain), forced on CPU: the fused
    group's bytes are modeled (the H200 run modeled 0 bytes for optimize's one kernel) and the
    fusion map gives the group its eager ops."""
    f = _pointwise_chain(tmp_path)
    out = tmp_path / "out"
    rec = load(generate_run(out, "--model", f"{f}:build", "--modes", "eager,optimize"))
    optimize = rec["modes"]["optimize"]
    t = 4 * 16 * F32
    (group,) = optimize["compiler"]["fusion_groups"]
    assert (group["read"], group["written"]) == (2 * t, t)
    assert (optimize["bytes"]["read"], optimize["bytes"]["written"]) == (2 * t, t)
    (g,) = [g for g in optimize["fusion"]["groups"] if g["kernels"] == [group["kind"]]]
    assert sorted(g["eager_ops"]) == sorted(op.split("::")[1] for op in group["ops"])
    assert (g["eager_bytes"], g["kernel_bytes"]) == (17 * t, 3 * t)
    assert not [e for e in optimize["why_not_fused"] if e["kind"] == "unmatched"]


@pytest.mark.slow
def test_measured_bytes_say_why_they_are_missing(tmp_path):
    m = load_model("gated-residual", torch.device("cpu"), torch.float32, batch_size=1)
    opts = RunOptions(modes=("eager",), measure_bytes=True)
    setup = RunSetup(m, torch.device("cpu"), "float32", RunFolder(tmp_path), opts)
    rec = profile_runs({"": setup}, quiet, reports=False).runs[""].to_json()
    measured = rec["modes"]["eager"]["bytes"]["measured"]
    assert measured["available"] is False
    assert "device is cpu" in measured["reason"]
    assert measured["read"] is None  # never a silent zero


def test_kernel_rows_take_their_operations_bytes():
    from profreport.analysis.kernel_bytes import kernel_bytes

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
    a, b, c = (row.to_json() for row in kernel_bytes(OkMode.from_json(mode)))
    assert (a["bytes_read"], a["bytes_written"], a["bytes_op"], a["bytes_shared_by"]) == (
        300,
        100,
        "aten::convolution",
        2,
    )
    assert b["bytes_shared_by"] == 2
    assert c["bytes_read"] is None and c["bytes_op"] is None


def test_compile_fusion_pairs_an_extra_graph_op_without_shifting_the_rest():
    # the compiled graph builds something eager skips (an attention mask's add): the residual
    # add late in the graph still pairs with the late eager add, not the one before it
    eager = [_call("aten::add", 10, 10), _call("aten::mul", 1, 1), _call("aten::add", 500, 100)]
    nodes = [
        _node("op0", "generated", [_inst("aten::add", "embed_add", 0)], 20, 10, "k_0", 0),
        _node("op1", "generated", [_inst("aten::add", "mask_add", 1)], 1, 1, "k_1", 1),
        _node("op2", "generated", [_inst("aten::mul", "m", 2)], 1, 1, "k_2", 2),
        _node("op3", "generated", [_inst("aten::add", "residual", 3)], 500, 100, "k_3", 3),
    ]
    fm = compile_fusion(nodes, eager, BOOKKEEPING_OPS, ["k_0", "k_1", "k_2", "k_3"])
    embed, mask, _, residual = fm["groups"]
    # paired in order, the mask's add would take the residual's eager call
    assert (mask["eager_ops"], mask["graph_only"], mask["eager_bytes"]) == ([], ["add"], 0)
    assert "graph ops with no eager call: add" in mask["note"] and not mask["fused"]
    assert embed["eager_bytes"] == 20 and residual["eager_bytes"] == 600
    assert fm["saved_bytes"] == (20 + 2 + 600) - (30 + 2 + 2 + 600)


def test_compile_fusion_leaves_top_level_graph_ops_unpaired_first():
    # position alone would give the layer's eager add to the mask add the model builds in its
    # own forward; graph calls outside every submodule are the first left without a partner
    eager = [
        _call("aten::sub", 1, 1),
        _call("aten::add", 200, 100),
        _call("aten::mul", 1, 1),
        _call("aten::add", 500, 100),
    ]
    specs = [
        ("aten::add", "layer_add", "h.0"),
        ("aten::add", "mask_add", ""),
        ("aten::mul", "m", "h.0"),
        ("aten::add", "residual", "h.1"),
    ]
    nodes = [
        _node(f"op{i}", "generated", [_inst(op, src, i, module)], 1, 1, f"k_{i}", i)
        for i, (op, src, module) in enumerate(specs)
    ]
    fm = compile_fusion(nodes, eager, BOOKKEEPING_OPS, [f"k_{i}" for i in range(4)])
    layer, mask, _, residual = fm["groups"][:4]
    assert (layer["eager_bytes"], residual["eager_bytes"]) == (300, 600)
    assert layer["modules"] == ["h.0"]
    assert mask["graph_only"] == ["add"] and mask["eager_bytes"] == 0
    assert fm["groups"][-1]["eager_ops"] == ["sub"]  # no kernel computes it


def test_optimize_names_each_leftover_by_what_explains_it():
    from profreport.analysis import fusion_optimize as fo

    eager = [
        _call("aten::addmm", 30, 10),
        _call("aten::add", 20, 10),
        _call("aten::native_batch_norm", 12, 10),
        _call("aten::all", 4, 1),
        _call("aten::mul", 6, 3),
    ]
    mode = [
        _call("aten::mm", 25, 10),
        _call("aten::add", 20, 10),  # the bias add of the decomposed addmm
        _call("aten::add", 20, 10),  # eager's own add
        _call("aten::arange", 0, 8),
        _call("aten::to_mkldnn", 10, 10),
    ]
    before = {
        "aten::addmm": 1,
        "aten::add": 1,
        "aten::batch_norm": 1,
        "aten::arange": 1,
        "aten::mul": 1,
    }
    fm = optimize_fusion(eager, mode, BOOKKEEPING_OPS, before, "traced")
    by_note = {g["note"]: g for g in fm["groups"]}
    decomposed = by_note[fo.DECOMPOSED]
    assert (decomposed["eager_ops"], decomposed["kernels"]) == (["addmm"], ["mm", "add"])
    assert decomposed["saved_bytes"] == 40 - (35 + 30)
    assert by_note["replaced"]["eager_ops"] == ["add"] == by_note["replaced"]["kernels"]
    # batch_norm is in the graph before freezing (as batch_norm): freezing folded it
    assert by_note[fo.FOLDED]["eager_ops"] == ["native_batch_norm"]
    # `all` never was in the traced graph: tracing, not freezing, removed it
    assert by_note[fo.NOT_IN_GRAPH.format(graph="traced")]["eager_ops"] == ["all"]
    # the graph held mul, but no optimized call is left for it: said to be unmatched, not folded
    assert by_note[fo.UNMATCHED]["eager_ops"] == ["mul"]
    assert by_note[fo.LAYOUT_ADDED]["kernels"] == ["to_mkldnn"]
    assert by_note[fo.GRAPH_ONLY.format(graph="traced")]["kernels"] == ["arange"]
    assert fm["saved_bytes"] == (40 + 30 + 22 + 5 + 9) - (35 + 30 + 30 + 8 + 20)
    # An older record without the graph before freezing: BatchNorm still reads as folded, and
    # the other leftovers as unmatched and added.
    old = optimize_fusion(eager, mode, BOOKKEEPING_OPS)
    notes = {g["note"]: g for g in old["groups"]}
    assert set(notes) == {fo.DECOMPOSED, "replaced", fo.FOLDED, fo.UNMATCHED, fo.ADDED}
    assert notes[fo.FOLDED]["eager_ops"] == ["native_batch_norm"]
    assert notes[fo.UNMATCHED]["eager_ops"] == ["all", "mul"]


def test_optimize_tells_a_linear_rewrite_from_decompose_ops():
    from profreport.analysis import fusion_optimize as fo

    eager = [_call("aten::addmm", 30, 10), _call("aten::addmm", 30, 10)]
    mode = [_call("aten::mm", 25, 10), _call("aten::add", 20, 10)] * 2
    before = {"aten::linear": 1, "aten::addmm": 1}
    after = {"aten::matmul": 1, "aten::addmm": 1}  # one linear became matmul; one addmm stayed
    fm = optimize_fusion(eager, mode, BOOKKEEPING_OPS, before, "scripted", after)
    assert [g["note"] for g in fm["groups"]] == [fo.LINEAR_SPLIT, fo.DECOMPOSED]
    assert all(g["kernels"] == ["mm", "add"] for g in fm["groups"])
    without_after = optimize_fusion(eager, mode, BOOKKEEPING_OPS, before, "scripted")
    assert [g["note"] for g in without_after["groups"]] == [fo.DECOMPOSED] * 2


def test_optimize_pairs_mkldnn_global_pooling_with_eager_mean():
    # eager's adaptive_avg_pool2d to 1x1 forwards to mean; MKLDNN runs the same pooling
    eager = [_call("aten::mean", 64, 4)]
    mode = [_call("aten::mkldnn_adaptive_avg_pool2d", 64, 4)]
    fm = optimize_fusion(eager, mode, BOOKKEEPING_OPS, {"aten::adaptive_avg_pool2d": 1}, "traced")
    (g,) = fm["groups"]
    assert (g["eager_ops"], g["kernels"], g["note"]) == (
        ["mean"],
        ["mkldnn_adaptive_avg_pool2d"],
        "replaced",
    )


def test_optimize_gives_nnc_fusion_groups_their_eager_calls():
    """On CUDA, optimize's graph holds NNC fusion groups that dispatch no op: their eager calls
    are fused into the group's kernel, never left over as unmatched (a map with eager ops and no
    kernel made optimize's why-not-fused raise on real models)."""
    from profreport.analysis import fusion_optimize as fo

    eager = [
        _call("aten::mm", 30, 10),
        _call("aten::sigmoid", 10, 10),
        _call("aten::mul", 20, 10),
        _call("aten::add", 20, 10),
    ]
    mode = [_call("aten::mm", 30, 10)]
    group = ScriptFusionGroup(
        "prim::TensorExprGroup", ("aten::sigmoid", "aten::mul", "aten::add"), 30, 10
    )
    before = {"aten::mm": 1, "aten::sigmoid": 1, "aten::mul": 1, "aten::add": 1}
    fm = fo.optimize_fusion(eager, mode, BOOKKEEPING_OPS, before, "scripted", None, (group,))
    nnc = [g for g in fm.groups if g.kernels == ("prim::TensorExprGroup",)]
    assert [g.eager_ops for g in nnc] == [("sigmoid", "mul", "add")]
    assert nnc[0].saved_bytes == 80 - 40
    assert not [g for g in fm.groups if g.note == fo.UNMATCHED]
    assert fm.fused_groups == 1
