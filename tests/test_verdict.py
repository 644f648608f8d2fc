"""Verdict sentences follow the evidence in the record."""

from profreport.analysis.traffic import traffic_change
from profreport.analysis.verdict import verdict_for
from profreport.modes import mode_for
from profreport.record.model import OkMode, Run


def _run(record) -> Run:
    """The record with each mode's traffic change against eager, the finding derive makes
    before the verdicts (the rest of a verdict's input is in the hand-made record)."""
    run = Run.from_json(record)
    eager = run.modes["eager"]
    assert isinstance(eager, OkMode)
    modes = {
        name: m.adding(traffic=traffic_change(name, m, eager))
        if isinstance(m, OkMode) and name != "eager"
        else m
        for name, m in run.modes.items()
    }
    return run.adding(modes=modes)


def _mode(kernels, read, written, speedup=None, **compiler):
    m = {
        "status": "ok",
        "kernels": {"per_step": kernels},
        "bytes": {"read": read, "written": written, "not_modeled": []},
        "compiler": compiler,
    }
    if speedup:
        m["speedup_vs_eager"] = {"median": speedup[0], "ci95": [speedup[1], speedup[2]]}
    return m


def _record(device="cpu", llvm=False, **modes):
    return {
        "device": {"type": device},
        "env": {"fusers": {"nnc_can_fuse_on_cpu": llvm, "llvm_available": llvm}},
        "modes": {"eager": _mode(3, 100, 100), **modes},
    }


def test_script_on_cpu_without_llvm_says_nothing_fused():
    rec = _record(script=_mode(3, 100, 100, (1.01, 0.97, 1.05), fusion_groups=[]))
    v = verdict_for("script", _run(rec), mode_for("script"))
    assert "nothing fused" in v and "LLVM" in v
    assert "kernel count unchanged (3 per step)" in v
    assert "latency unchanged within noise" in v


def test_script_on_cuda_names_the_fusion_groups():
    groups = [{"kind": "prim::TensorExprGroup", "ops": ["aten::sigmoid", "aten::mul"]}]
    rec = _record(device="cuda", script=_mode(2, 100, 50, fusion_groups=groups))
    v = verdict_for("script", _run(rec), mode_for("script"))
    assert "TorchScript fused 1 group(s): sigmoid + mul" in v
    assert "3 eager kernels ran as 2 kernels" in v
    assert "modeled traffic -25%" in v


def _fusion(*groups):
    return {"groups": [{"eager_ops": e, "kernels": k, "note": n} for e, k, n in groups]}


def test_compile_reports_fusion_layout_and_speedup():
    m = _mode(3, 80, 60, (2.1, 2.0, 2.2))
    m["fusion"] = _fusion(
        (
            ["convolution"],
            ["cpp_fused_convolution_0", "library convolution"],
            "library call + operand layout conversion",
        ),
        (["relu", "max_pool2d_with_indices"], ["cpp_fused_max_pool2d_with_indices_relu_1"], ""),
    )
    v = verdict_for("compile", _run(_record(compile=m)), mode_for("compile"))
    assert "Inductor fused [relu + max_pool2d_with_indices]" in v
    assert "layout conversion for convolution" in v
    assert "2.10x faster than eager (95% CI 2.00-2.20, one process)" in v
    assert "modeled traffic -30%" in v


def test_optimize_names_folding_fusion_and_added_conversions():
    m = _mode(4, 90, 90)
    m["fusion"] = _fusion(
        (["convolution", "relu"], ["cudnn_convolution_relu"], ""),
        (["convolution"], ["mkldnn_convolution"], "replaced"),
        (["native_batch_norm", "native_batch_norm"], [], "folded away by freezing"),
        ([], ["to_mkldnn", "_to_dense"], "added by the optimization passes"),
    )
    v = verdict_for("optimize", _run(_record(optimize=m)), mode_for("optimize"))
    assert "fused convolution + relu into cudnn_convolution_relu" in v
    assert "folded away native_batch_norm x2" in v
    assert "added to_mkldnn, _to_dense" in v
    assert "replaced convolution -> mkldnn_convolution" in v


def test_partial_bytes_are_not_compared():
    m = _mode(5, 10, 10, fused_library_ops=["prim::mkldnn_convolution"])
    m["bytes"]["not_modeled"] = ["prim::mkldnn_convolution"]
    v = verdict_for("optimize", _run(_record(optimize=m)), mode_for("optimize"))
    assert "not comparable (prim::mkldnn_convolution not modeled)" in v
    assert "5 kernels per step, more than eager's 3" in v


def test_failed_mode():
    rec = _record(compile={"status": "failed", "error": "BackendCompilerFailed: boom"})
    assert (
        verdict_for("compile", _run(rec), mode_for("compile"))
        == "compile: failed - BackendCompilerFailed: boom"
    )


def test_optimize_tells_freezing_from_decomposition_and_tracing():
    from profreport.analysis import fusion_optimize as fo

    m = _mode(6, 90, 90)
    m["compiler"] = {"notes": ["traced instead of scripted (torch.jit.script cannot compile M)"]}
    m["fusion"] = _fusion(
        (["addmm"], ["mm", "add"], fo.DECOMPOSED),
        (["addmm"], ["mm", "add"], fo.DECOMPOSED),
        (["native_batch_norm"], [], fo.FOLDED),
        (["add"], [], fo.UNMATCHED),
        (["all"], [], fo.NOT_IN_GRAPH.format(graph="traced")),
        ([], ["arange", "where"], fo.GRAPH_ONLY.format(graph="traced")),
    )
    v = verdict_for("optimize", _run(_record(optimize=m)), mode_for("optimize"))
    assert "freeze + optimize_for_inference folded away native_batch_norm;" in v
    assert "TorchScript ran addmm x2 as mm + add (DecomposeOps)" in v
    assert "no optimized call matched eager's add" in v
    assert "the traced graph itself differs from eager: it lacks all and adds arange, where" in v
    assert "folded away all" not in v and "folded away addmm" not in v


def test_trace_names_the_decomposition_and_the_graph_differences():
    seq = [{"op": op, "read": 1, "written": 1} for op in ("aten::addmm", "aten::all", "aten::add")]
    traced = [
        {"op": op, "read": 1, "written": 1}
        for op in ("aten::mm", "aten::add", "aten::add", "aten::arange", "aten::where")
    ]
    record = _record(trace=_mode(5, 10, 10))
    record["modes"]["eager"]["bytes"]["sequence"] = seq
    record["modes"]["trace"]["bytes"]["sequence"] = traced
    v = verdict_for("trace", _run(record), mode_for("trace"))
    assert "TorchScript ran addmm as mm + add (DecomposeOps)" in v
    assert "the traced graph differs from eager: it lacks all and adds arange, where" in v


def test_optimize_does_not_call_an_in_place_variant_a_replacement():
    m = _mode(4, 90, 90)
    m["fusion"] = _fusion((["add"], ["add_"], "replaced"), (["relu"], ["relu_"], "replaced"))
    v = verdict_for("optimize", _run(_record(optimize=m)), mode_for("optimize"))
    assert "replaced" not in v
    assert "freeze + optimize_for_inference changed no dispatched operation" in v
