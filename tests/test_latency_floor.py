"""On real runs of every built-in model in the five default modes: the measured median never
beats the latency floor (modeled bytes and FLOPs at the measured ceilings), every kernel with
modeled bytes and profiler time has its roofline columns, and peak memory is recorded; then the
peak-memory gate of `compare`, and `--remeasure-ceilings`."""

import copy

import pytest

import profreport
from profreport.analysis.compare import Thresholds, compare_runs
from profreport.analysis.derive import derived_run
from profreport.cli import main
from profreport.models import BUILTIN_MODELS
from profreport.modes import mode_analyses
from profreport.record import Run, load
from profreport.record.model import Ceiling, Ceilings
from profreport.render.compare import render_markdown
from profreport.render.tables import kernel_frame, summary_frame


def _check_floor(run_dir) -> None:
    record = derived_run(load(run_dir), mode_analyses()).to_json()
    c = record["ceilings"]
    assert c["source"] == "measured"
    for key in ("memory_bandwidth", "cache_bandwidth", "matmul_rate"):
        assert c[key]["value"] >= c[key]["median"] >= c[key]["worst"] > 0
    ran = {n: m for n, m in record["modes"].items() if m["status"] == "ok"}
    assert set(ran) == {"eager", "script", "trace", "optimize", "compile"}
    for name, mode in ran.items():
        floor = mode["roofline"]
        median = mode["latency_ms"]["median"]
        assert floor["floor_ms"] > 0, name
        assert median >= floor["floor_ms"], (name, median, floor)
        assert floor["consistent"] is True and floor["x_of_floor"] >= 1.0
        for row in mode["kernels"]["table"]:
            if row.get("bytes_read") is not None and row.get("time_us_per_step"):
                assert row["bound"] in ("memory", "cache", "compute"), (name, row["name"])
                assert row["ceiling_pct"] is not None and row["achieved_bytes_per_s"] > 0
        peak = mode["peak_memory"]
        assert peak["bytes"] is not None and peak["bytes"] > 0
        frame = kernel_frame(Run.from_json(record), name)
        timed = frame[frame["bytes_read"].notna() & (frame["time_us_per_step"] > 0)]
        assert timed["ceiling_pct"].notna().all()
    summary = summary_frame(Run.from_json(record)).set_index("mode")
    assert summary.loc["eager", "memory_compression"] == pytest.approx(1.0)
    assert (summary["x_of_floor"] >= 1.0).all()


@pytest.mark.slow
def test_every_builtin_model_runs_no_faster_than_its_floor(builtin_run):
    _check_floor(builtin_run)


@pytest.mark.slow
def test_gated_residual_runs_no_faster_than_its_floor(gated_run):
    _check_floor(gated_run)
    assert len(BUILTIN_MODELS) == 4  # simple, conv-bn-relu, mlp-block (builtin_run) + this


@pytest.mark.slow
def test_compare_gates_peak_memory(gated_run):
    document = load(gated_run)
    bigger = copy.deepcopy(document)
    bigger["modes"]["compile"]["peak_memory"]["bytes"] = int(
        document["modes"]["compile"]["peak_memory"]["bytes"] * 1.5
    )
    base, head = derived_run(document, mode_analyses()), derived_run(bigger, mode_analyses())
    report_only = compare_runs(base, head)
    peak = next(mc for mc in report_only.modes if mc.mode == "compile").metric("peak_memory_bytes")
    assert peak is not None and peak.change_pct == pytest.approx(50.0, abs=0.01)
    assert not report_only.regressed
    gated = compare_runs(base, head, Thresholds(max_peak_memory_increase_pct=10.0))
    assert [(r.mode, r.metric) for r in gated.regressions] == [("compile", "peak_memory_bytes")]
    assert (
        "peak memory" in gated.regressions[0].message and "+50.0%" in gated.regressions[0].message
    )
    assert "peak memory +10%" in render_markdown(gated)
    assert not compare_runs(base, head, Thresholds(max_peak_memory_increase_pct=60.0)).regressed


@pytest.mark.slow
def test_cli_compare_peak_memory_gate_exit_code(gated_run, tmp_path, capsys):
    import json

    head = json.loads((gated_run / "run.json").read_text())
    head["modes"]["eager"]["peak_memory"]["bytes"] *= 2
    (tmp_path / "run.json").write_text(json.dumps(head))
    argv = ["compare", str(gated_run), str(tmp_path), "--max-peak-memory-increase"]
    assert main([*argv, "150"]) == 0
    assert main([*argv, "50"]) == 1
    assert "regression: eager: peak memory" in capsys.readouterr().err


@pytest.mark.slow
def test_ceilings_come_from_the_cache_unless_remeasured(tmp_path, monkeypatch):
    """The plumbing from profile(remeasure_ceilings=...) to the cache, with the measurement
    itself replaced (a loaded machine is never cached: tests/test_ceilings.py)."""
    import torch

    from profreport.capture import ceilings

    measured = []

    def quiet_measurement(device, dtype, threads):
        measured.append(threads)
        rate = Ceiling(value=1e12, median=1e12, worst=1e12, samples=1, unit="x")
        return Ceilings(source="measured", memory_bandwidth=rate, matmul_rate=rate)

    monkeypatch.setenv("PROFREPORT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ceilings, "measure_quietly", quiet_measurement)

    def run(**options):
        return profreport.profile(
            torch.nn.ReLU(), torch.ones(64), modes=("eager",), device="cpu", min_time_s=0.02,
            **options,
        ).record  # fmt: skip

    assert run()["ceilings"]["cached"] is False and len(measured) == 1
    second = run()
    assert second["ceilings"]["cached"] is True and len(measured) == 1
    assert second["modes"]["eager"]["roofline"]["floor_ms"] > 0  # the run used them
    assert run(remeasure_ceilings=True)["ceilings"]["cached"] is False and len(measured) == 2
