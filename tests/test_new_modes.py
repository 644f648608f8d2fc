"""The modes of issue 13: export (torch.export -> AOTInductor), compile variants and CUDA graphs."""

from __future__ import annotations

import gzip
import inspect
import io
from functools import partial
from pathlib import Path

import orjson
import pytest
import torch
from torch import nn

import profreport
from profreport import cli, modes
from profreport.models import GatedResidual, load_model
from profreport.modes import PreparedMode
from profreport.modes.capture_errors import failure_line
from profreport.modes.compile import cuda_graph_evidence
from profreport.modes.export import package_clause
from profreport.pipeline import _kernel_counts
from profreport.record.model import OkMode, Run
from profreport.traceio import load_trace
from tests.counter_trace import x_event


def _profile(module, inputs, mode_names):
    return profreport.profile(
        module, inputs, modes=mode_names, device="cpu", min_time_s=0.02, bootstrap_resamples=100
    )


class DataDependentBranch(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # the line export names
            return torch.relu(x) * 2
        return x - 1


BRANCH_LINE = inspect.getsourcelines(DataDependentBranch.forward)[1] + 1


def test_new_modes_are_registered_but_not_default():
    names = modes.mode_names()
    for name in ("export", "compile-max-autotune", "compile-cudagraphs", "compile-dynamic"):
        assert name in names
        assert name not in modes.default_modes()
    assert modes.default_modes() == ("eager", "script", "trace", "optimize", "compile")
    assert modes.mode_for("compile-max-autotune").compile_kwargs == {
        "mode": "max-autotune-no-cudagraphs"
    }
    assert modes.mode_for("compile-fullgraph").compile_kwargs == {"fullgraph": True}


def test_modes_command_lists_every_mode_with_its_devices_and_bytes_source():
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["modes"], out, err) == 0, err.getvalue()
    lines = {ln.split()[0]: ln for ln in out.getvalue().splitlines() if ln.strip()}
    assert set(modes.mode_names()) <= set(lines)
    assert "[cuda; bytes: inductor]" in lines["compile-cudagraphs"]
    assert "[cpu/cuda; bytes: inductor]" in lines["export"]
    assert "[default, cpu/cuda; bytes: dispatcher]" in lines["eager"]
    assert "default (no --modes): eager,script,trace,optimize,compile" in out.getvalue()


@pytest.mark.slow
def test_compile_cudagraphs_is_skipped_on_cpu_with_its_reason():
    inputs = (torch.randn(2, 8), torch.randn(2, 8))
    entry = _profile(GatedResidual(), inputs, ("eager", "compile-cudagraphs")).record["modes"]
    assert entry["eager"]["status"] == "ok"
    skipped = entry["compile-cudagraphs"]
    assert skipped["status"] == "skipped"
    assert skipped["error"] == "CUDA graphs need a CUDA device (this run is on cpu)"


@pytest.mark.slow
def test_export_failure_on_a_data_dependent_branch_is_one_line_and_eager_is_reported():
    rec = _profile(DataDependentBranch(), (torch.randn(16),), ("eager", "export")).record
    assert rec["modes"]["eager"]["status"] == "ok"
    failed = rec["modes"]["export"]
    assert failed["status"] == "failed"
    line = failed["error"]
    assert "\n" not in line
    assert line.startswith("torch.export failed: GuardOnDataDependentSymNode: Could not guard on")
    assert f"{Path(__file__).name}:{BRANCH_LINE}: if x.sum() > 0:" in line


def test_export_failure_line_keeps_the_users_line_when_the_reason_is_long():
    text = (
        "Could not guard on data-dependent expression " + "Eq(u0, 1) " * 60 + "\n\n"
        "The following call raised this error:\n"
        '  File "/very/long/' + "dir/" * 40 + 'model.py", line 12, in forward\n'
        "    if x.sum() > 0:\n"
    )
    line = failure_line("torch.export", RuntimeError(text))
    assert len(line) <= 300
    assert line.startswith("torch.export failed: RuntimeError: Could not guard on")
    assert "dir/model.py:12: if x.sum() > 0:); control flow on a value computed from" in line


def test_export_failure_line_without_a_user_frame_keeps_the_first_line():
    exc = RuntimeError("Unsupported: call to an op export cannot trace\n\nmore detail\n")
    assert failure_line("torch.export", exc) == (
        "torch.export failed: RuntimeError: Unsupported: call to an op export cannot trace"
    )


@pytest.mark.slow  # one AOTInductor build (~15-25 s on 2 cores)
def test_gated_residual_runs_as_one_kernel_under_export_and_compile():
    inputs = (torch.randn(1, 16, 64), torch.randn(1, 16, 64))
    rec = _profile(GatedResidual(), inputs, ("eager", "compile", "export")).record
    eager = rec["modes"]["eager"]
    assert eager["kernels"]["per_step"] == 7  # sigmoid tanh mul mul add relu sub
    for name in ("compile", "export"):
        entry = rec["modes"][name]
        assert entry["status"] == "ok", entry.get("error")
        assert entry["kernels"]["per_step"] == 1
        (kernel,) = [r["name"] for r in entry["kernels"]["table"]]
        assert kernel.startswith("graph_") and "_cpp_fused_" in kernel
        (group,) = [g for g in entry["fusion"]["groups"] if g["eager_ops"]]
        assert sorted(group["eager_ops"]) == sorted(
            ["sigmoid", "tanh", "mul", "mul", "add", "relu", "sub"]
        )
        # modeled: read x and gate once, write the result once (float32)
        assert (entry["bytes"]["read"], entry["bytes"]["written"]) == (2 * 1024 * 4, 1024 * 4)
    compiler = rec["modes"]["export"]["compiler"]
    assert compiler["package_bytes"] > 10_000
    assert 0 < compiler["export_s"] < compiler["aot_build_s"]
    assert rec["modes"]["export"]["compile_s"] >= compiler["aot_build_s"]
    assert "; AOTInductor package " in rec["modes"]["export"]["verdict"]


@pytest.mark.slow  # one AOTInductor build
def test_export_counts_the_weights_it_holds_as_constants_like_compile():
    """AOTInductor holds parameters as graph constants, which Inductor's own byte accounting
    skips; counted whole, export's modeled bytes equal compile's for the same kernels."""
    simple = load_model("simple", torch.device("cpu"), torch.float32, 1)
    module, inputs = simple.module, simple.example_inputs
    rec = _profile(module, inputs, ("eager", "compile", "export")).record["modes"]
    conv_weight = 64 * 32 * 3 * 3 * 4
    nodes = rec["export"]["compiler"]["inductor_nodes"]
    # the kernel converting the weight's layout reads it once, as compile's does
    assert [n["read"] for n in nodes if n["written"] == conv_weight] == [conv_weight]
    assert rec["export"]["bytes"]["read"] == rec["compile"]["bytes"]["read"]
    assert rec["export"]["bytes"]["written"] == rec["compile"]["bytes"]["written"]


def test_export_verdict_names_the_package_size_and_build_time():
    entry = {"compiler": {"package_bytes": 3 * 2**20, "aot_build_s": 12.34, "export_s": 0.056}}
    assert (
        package_clause(OkMode.from_json(entry))
        == "AOTInductor package 3.00 MiB, built in 12.3 s (export 0.06 s)"
    )
    assert package_clause(OkMode.from_json({"compiler": {}})) == ""


class GraphBreak(nn.Module):
    def forward(self, x):
        y = torch.tanh(x)
        torch._dynamo.graph_break()
        return torch.sigmoid(y) * x


@pytest.mark.slow
def test_compile_options_as_modes_fullgraph_refuses_a_graph_break_dynamic_runs():
    rec = _profile(
        GraphBreak(),
        (torch.randn(4, 32),),
        ("eager", "compile", "compile-fullgraph", "compile-dynamic"),
    ).record["modes"]
    assert rec["compile"]["status"] == "ok"
    assert rec["compile"]["compiler"]["graph_breaks"] == 1
    assert rec["compile-dynamic"]["status"] == "ok"
    assert rec["compile-dynamic"]["compiler"]["graph_breaks"] == 1
    failed = rec["compile-fullgraph"]
    assert failed["status"] == "failed"
    assert "\n" not in failed["error"] and "graph_break" in failed["error"]


# --- compile-cudagraphs on CUDA: a synthetic Kineto trace ----------------------------------------
# No recorded trace here (tests/data, ../shared/traces/gpu) has a cudaGraphLaunch, so this one is
# written in Kineto's shape: per step, the static-input copy, then one graph launch replaying the
# Inductor kernels, correlated by id.


_x = partial(x_event, pid=100)


def _dev(name, ts, dur, cat, corr):
    return _x(name, ts, dur, cat, pid=0, tid=7, device=0, stream=7, correlation=corr)


def _cuda_graph_trace(path: Path, steps: int, kernels: list[str]) -> Path:
    events = []
    corr = 1
    for s in range(steps):
        t0 = 1000 * s
        events.append(_x(f"ProfilerStep#{s + 1}", t0, 900, "user_annotation"))
        events.append(_x("aten::copy_", t0 + 10, 20, "cpu_op"))
        events.append(_x("cudaMemcpyAsync", t0 + 12, 5, "cuda_runtime", correlation=corr))
        events.append(_dev("Memcpy DtoD (Device -> Device)", t0 + 40, 3, "gpu_memcpy", corr))
        corr += 1
        events.append(_x("CUDAGraphNode.replay", t0 + 50, 40, "cpu_op"))
        events.append(_x("cudaGraphLaunch", t0 + 55, 8, "cuda_runtime", correlation=corr))
        for i, name in enumerate(kernels):
            events.append(_dev(name, t0 + 100 + 20 * i, 10, "kernel", corr))
        corr += 1
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100"}],
        "traceEvents": events,
    }
    path.write_bytes(gzip.compress(orjson.dumps(doc)))
    return path


def test_compile_cudagraphs_reports_one_graph_launch_replaying_many_kernels(tmp_path):
    kernels = ["triton_poi_fused_relu_0", "triton_red_fused_sum_1", "sm80_xmma_gemm", "k3"]
    trace = _cuda_graph_trace(tmp_path / "t.json.gz", 3, kernels)
    entry = {
        "kernels": _kernel_counts(
            load_trace(trace), PreparedMode("compile-cudagraphs", abs), torch.device("cuda")
        ).to_json()
    }
    k = entry["kernels"]
    assert (k["per_step"], k["launches"], k["graph_launches"], k["memcpy"]) == (4, 1, 1, 1)
    assert cuda_graph_evidence(OkMode.from_json(entry)) == (
        "4 kernel(s)/step from 1 launch call(s), 1 of them CUDA graph launch(es): "
        "3 launch call(s)/step saved against one launch per kernel"
    )
    entry["fusion"] = {"groups": []}
    verdict = modes.mode_for("compile-cudagraphs").fusion_evidence(OkMode.from_json(entry), Run())
    assert verdict.endswith("3 launch call(s)/step saved against one launch per kernel")


def test_a_compile_run_without_graph_launches_says_so():
    entry = {"kernels": {"per_step": 5, "launches": 5, "graph_launches": 0}}
    assert cuda_graph_evidence(OkMode.from_json(entry)) == (
        "no CUDA graph launch recorded (5 kernel(s), 5 launch(es)/step)"
    )


def test_export_records_cpp_kernels_on_cpu_only():
    """The C++ wrapper's kernel profiling is what makes CPU kernels visible; on CUDA the profiler
    records kernels itself, and the setting's GPU path is kept off (suspected of the H200
    SIGSEGV)."""
    from profreport.modes.export import aoti_capture_config

    assert aoti_capture_config("cpu")["cpp.enable_kernel_profile"] is True
    assert aoti_capture_config("cuda")["cpp.enable_kernel_profile"] is False
    assert aoti_capture_config("cuda")["fx_graph_cache"] is False
