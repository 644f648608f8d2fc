"""The whole generate path on CPU with small shapes, in-process and once as a subprocess."""

import json
import os
import subprocess
import sys

import pytest
import torch

from profreport.cli import main
from profreport.record import SCHEMA, load
from tests.conftest import FAST, generate_run, run_dir_in


@pytest.mark.slow
def test_all_five_modes_ok_and_outputs_written(gated_run):
    rec = json.loads((gated_run / "run.json").read_text())
    assert rec["schema"] == SCHEMA
    assert list(rec["modes"]) == ["eager", "script", "trace", "optimize", "compile"]
    assert {m["status"] for m in rec["modes"].values()} == {"ok"}
    assert gated_run.name.startswith("gated-residual-cpu-")
    for name in rec["modes"]:
        traces = list((gated_run / "tensorboard" / name).glob("*.pt.trace.json"))
        assert len(traces) == 1, name
        assert rec["modes"][name]["trace"] == str(traces[0].relative_to(gated_run))
    html = (gated_run / "report.html").read_text()
    assert "<svg" in html and "Method" in html
    assert (gated_run / "summary.md").read_text().startswith("### profreport: gated-residual")


@pytest.mark.slow
def test_run_record_contract(gated_run):
    rec = load(gated_run / "run.json")
    assert rec["device"]["type"] == "cpu"
    assert rec["env"]["threads"] == torch.get_num_threads()
    assert set(rec["env"]["fusers"]) >= {"nnc_enabled", "llvm_available", "inductor_cpp_compiler"}
    for name, m in rec["modes"].items():
        k, b, lat = m["kernels"], m["bytes"], m["latency_ms"]
        assert isinstance(k["per_step"], int) and k["per_step"] > 0
        assert k["launches"] == 0 and k["memcpy"] == 0 and k["memset"] == 0  # CPU run
        assert isinstance(k["table"], list) and k["table"]
        assert isinstance(b["read"], int) and isinstance(b["written"], int)
        assert b["source"] == "modeled"
        assert lat["n"] == len(lat["samples"]) >= 15
        assert lat["p10"] <= lat["median"] <= lat["p90"]
        if name == "eager":
            assert "speedup_vs_eager" not in m
        else:
            lo, hi = m["speedup_vs_eager"]["ci95"]
            assert lo <= m["speedup_vs_eager"]["median"] <= hi
            assert m["compile_s"] > 0


@pytest.mark.slow
def test_fusion_story_of_a_pointwise_chain(gated_run):
    rec = load(gated_run / "run.json")
    modes = rec["modes"]
    # sigmoid, tanh, mul, mul, add, relu, sub: seven eager kernels; Inductor fuses them into one.
    assert modes["eager"]["kernels"]["per_step"] == 7
    assert modes["compile"]["kernels"]["per_step"] == 1
    # Bytes by hand: 1 x 256 x 1024 float32 tensors of 1 MiB; eager reads 10 and writes 7 of them,
    # the fused kernel reads x and gate and writes the result.
    t = 256 * 1024 * 4
    assert (modes["eager"]["bytes"]["read"], modes["eager"]["bytes"]["written"]) == (10 * t, 7 * t)
    assert (modes["compile"]["bytes"]["read"], modes["compile"]["bytes"]["written"]) == (2 * t, t)
    assert "7 eager kernels ran as 1 kernel" in modes["compile"]["verdict"]
    if not rec["env"]["fusers"]["nnc_can_fuse_on_cpu"]:
        assert modes["script"]["kernels"]["per_step"] == 7
        assert "nothing fused" in modes["script"]["verdict"]
        assert "LLVM" in modes["script"]["verdict"]


@pytest.mark.slow
def test_render_rewrites_reports_from_the_record(gated_run, tmp_path):
    rc = main(["render", str(gated_run / "run.json"), "--out", str(tmp_path)])
    assert rc == 0
    assert (tmp_path / "report.html").read_text() == (gated_run / "report.html").read_text()


@pytest.mark.slow
def test_simple_model_kernels_are_named_and_honest(builtin_runs):
    rec = load(builtin_runs("simple"))  # all five modes: eager, optimize and compile read here
    names = {m: {r["name"] for r in rec["modes"][m]["kernels"]["table"]} for m in rec["modes"]}
    # named by the op the model called, as the bytes table names it (not mkldnn_convolution or
    # the clamp_min that relu runs)
    assert names["eager"] == {
        "aten::convolution",
        "aten::relu",
        "aten::max_pool2d_with_indices",
    }
    fused = [n for n in names["compile"] if "cpp_fused" in n and "relu" in n and "max_pool2d" in n]
    assert len(fused) == 1, names["compile"]
    # per-kernel modeled bytes in the kernel table: the convolution kernel reads x, w and b
    conv_row = next(
        r for r in rec["modes"]["eager"]["kernels"]["table"] if r["name"] == "aten::convolution"
    )
    x, w, b, y = 32 * 56 * 56 * 4, 64 * 32 * 9 * 4, 64 * 4, 64 * 56 * 56 * 4
    assert (conv_row["bytes_read"], conv_row["bytes_written"]) == (x + w + b, y)
    # FLOPs of a 3x3 conv, 32 -> 64 channels, 56 x 56 output, batch 1: 2 * MACs
    assert conv_row["flops"] == 2 * 64 * 56 * 56 * 32 * 9
    assert conv_row["flops_per_byte"] == conv_row["flops"] / (x + w + b + y)
    fused_row = next(r for r in rec["modes"]["compile"]["kernels"]["table"] if "relu" in r["name"])
    assert (fused_row["bytes_read"], fused_row["bytes_written"]) == (y, y // 4)  # no indices
    opt = rec["modes"]["optimize"]
    # optimize_for_inference's MKLDNN convolution runs without a profiler record: it is counted
    # from the graph, and its bytes are those of the matching eager convolution (same shapes).
    assert "prim::mkldnn_convolution" in opt["kernels"]["unrecorded"]
    assert opt["bytes"]["not_modeled"] == []
    conv = [c for c in opt["bytes"]["sequence"] if c["op"] == "prim::mkldnn_convolution"]
    eager_conv = [
        c for c in rec["modes"]["eager"]["bytes"]["sequence"] if c["op"] == "aten::convolution"
    ]
    assert len(conv) == 1 and conv[0]["read"] == eager_conv[0]["read"]
    assert conv[0]["source"] == "derived from eager convolution"
    assert "replaced convolution -> mkldnn_convolution" in opt["verdict"]
    assert "added to_mkldnn, _to_dense" in opt["verdict"]
    # compile: relu and max-pool fused into one generated kernel; the convolution stays a
    # library call with an added layout conversion, so the kernel count does not drop.
    comp = rec["modes"]["compile"]
    fused = [g for g in comp["fusion"]["groups"] if len(g["eager_ops"]) > 1]
    assert [sorted(g["eager_ops"]) for g in fused] == [["max_pool2d_with_indices", "relu"]]
    assert fused[0]["saved_bytes"] > 0
    assert "layout conversion for convolution" in comp["verdict"]


@pytest.mark.slow
def test_a_mode_that_fails_does_not_stop_the_others(tmp_path):
    model = tmp_path / "unscriptable.py"
    model.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return x * len({id(x): 1})\n"
        "def build():\n"
        "    return M(), (torch.randn(8, 8),)\n"
    )
    run = generate_run(
        tmp_path / "out", "--model", f"{model}:build", "--modes", "eager,script,trace"
    )
    rec = load(run)
    assert rec["modes"]["script"]["status"] == "failed"
    assert rec["modes"]["script"]["error"]
    assert rec["modes"]["eager"]["status"] == "ok"
    assert rec["modes"]["trace"]["status"] == "ok"
    assert "failed" in (run / "report.html").read_text()


def _cli(*args, cwd=None):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    return subprocess.run(
        [sys.executable, "-m", "profreport", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )


@pytest.mark.slow
def test_subprocess_models_andgenerate_run(tmp_path):
    listing = _cli("models")
    assert listing.returncode == 0
    assert listing.stdout.splitlines()[0].startswith("simple ")
    run = _cli(
        "generate",
        "--model",
        "gated-residual",
        "--batch-size",
        "1",
        "--modes",
        "eager,trace",
        "--out",
        str(tmp_path),
        *FAST,
    )
    assert run.returncode == 0, run.stderr
    assert "report: " in run.stdout
    assert (run_dir_in(tmp_path) / "report.html").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["generate", "--model", "nosuch"], "unknown model"),
        (["generate", "--modes", "eager,jit"], "unknown mode"),
        (["generate", "--batch-size", "0"], "must be at least 1"),
        (["generate", "--device", "cuda"], "CUDA is not available"),
        (["render", "missing.json"], "no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    if "cuda" in args and torch.cuda.is_available():
        pytest.skip("CUDA present")
    rc = main([*args, "--out", str(tmp_path / "o")] if args[0] == "generate" else args)
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "o").exists()  # nothing written


def test_render_of_a_non_record_is_exit_2(tmp_path, capsys):
    bad = tmp_path / "run.json"
    bad.write_text('{"schema": "something/else"}')
    assert main(["render", str(bad)]) == 2
    assert "not a profreport run record" in capsys.readouterr().err
    assert not (tmp_path / "report.html").exists()


def test_subprocess_bad_input_has_no_traceback():
    res = _cli("generate", "--model", "nosuch")
    assert res.returncode == 2
    assert res.stderr.startswith("error: ") and "Traceback" not in res.stderr


@pytest.mark.slow
def test_measure_bytes_without_a_gpu_says_why(tmp_path, capsys):
    run = generate_run(
        tmp_path,
        "--model",
        "gated-residual",
        "--batch-size",
        "1",
        "--modes",
        "eager",
        "--measure-bytes",
    )
    err = capsys.readouterr().err
    assert "warning: measured bytes not available: device is cpu" in err
    measured = load(run)["modes"]["eager"]["bytes"]["measured"]
    assert measured["available"] is False and measured["read"] is None
    assert "Measured bytes: not available (device is cpu" in (run / "report.html").read_text()


def test_phase_clock_sums_each_phase_with_an_injected_clock():
    from profreport.pipeline import PhaseClock

    ticks = iter([0.0, 1.5, 2.0, 2.25, 10.0, 11.0])
    phases = PhaseClock(lambda: next(ticks))
    with phases.phase("build"):
        pass
    with phases.phase("bytes"):
        pass
    with phases.phase("build"):
        pass
    assert phases.seconds == {"build": 2.5, "bytes": 0.25}


@pytest.mark.slow
def test_run_record_says_where_the_time_went(gated_run):
    phases = load(gated_run / "run.json")["phases_s"]
    assert set(phases) == {
        "ceilings",
        "build",
        "profile",
        "kernels",
        "time_breakdown",
        "peak_memory",
        "bytes",
        "timing",
        "fusion_map",
    }
    assert all(v >= 0 for v in phases.values())
    assert phases["build"] > 0 and phases["timing"] > 0
