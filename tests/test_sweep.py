"""`profreport sweep` without running points: the grid, the sweep record and its typed model, the
summary, the renderers, the comparison of two sweeps, and bad input. The end-to-end sweeps (local
and Ray executors) are in test_sweep_e2e.py."""

import dataclasses
import io
import json
import math
import re
import sys
from pathlib import Path

import pytest

from profreport.cli import main
from profreport.modes import mode_analyses
from profreport.record import load
from profreport.record.model import OkMode, Run
from profreport.sweep import lifecycle, model, render, summary
from profreport.sweep.compare import compare_sweeps
from profreport.sweep.grid import GridError, Point, SweepSpec, checked_spec, read_config
from profreport.sweep.model import Sweep, mode_rows, peak_memory_bytes


@pytest.fixture
def gated_run(recorded_gated_run):
    """In this module, the checked-in record of that run: these tests read a run record, the
    end-to-end sweeps (test_sweep_e2e.py) make real ones."""
    return recorded_gated_run


def test_axes_apply_to_the_models_that_take_them():
    spec = checked_spec(
        {
            "models": ["gated-residual", "hf:gpt2", "hf:vit", "my/model.py:build"],
            "batch_sizes": [1, 8],
            "seq_lens": [128, 512],
            "dtypes": ["float32", "bfloat16"],
        },
        "test",
    )
    points = spec.points()
    by_model = {m: [p for p in points if p.model == m] for m in spec.models}
    assert len(by_model["gated-residual"]) == 2 * 2  # batch x dtype; no sequence length
    assert {p.seq_len for p in by_model["gated-residual"]} == {None}
    assert len(by_model["hf:gpt2"]) == 2 * 2 * 2
    assert {p.seq_len for p in by_model["hf:vit"]} == {None} and len(by_model["hf:vit"]) == 4
    assert [(p.batch_size, p.seq_len) for p in by_model["my/model.py:build"]] == [(None, None)] * 2
    assert len({p.id for p in points}) == len(points)
    assert Point.at("hf:gpt2", 8, 512, "bfloat16").id == "hf-gpt2-b8-s512-bfloat16"
    request = spec.request(Point.at("hf:gpt2", 8, 512, "bfloat16"), Path("points/p"))
    assert (request.model, request.dtype, request.out) == ("hf:gpt2", "bfloat16", Path("points/p"))
    assert (request.batch_size, request.seq_len) == (8, 512)
    assert request.modes == ("eager", "compile")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({}, "no model given"),
        (
            {"models": ["simple"], "dtypes": ["float64"]},
            "expected one of float32, float16, bfloat16",
        ),
        ({"models": ["simple"], "modes": ["eager", "jit"]}, "unknown mode 'jit'"),
        ({"models": ["simple"], "batch_sizes": [0]}, "must be at least 1, found 0"),
        ({"models": ["simple"], "batch_size": [1]}, "unknown field 'batch_size'"),
        ({"models": ["simple"], "min_time_s": 0}, "min_time_s: must be above 0, found 0"),
        ({"models": ["simple"], "threads": 2.5}, "threads: expected an integer, found 2.5"),
        ({"models": ["simple"], "modes": []}, "modes: expected a non-empty list"),
        ({"models": ["x.py:f"], "batch_sizes": [1]}, "batch sizes apply to built-in and hf:"),
        ({"models": ["simple"], "seq_lens": [64]}, "sequence lengths apply to hf: language models"),
    ],
)
def test_bad_grids_are_one_line_errors(values, message):
    with pytest.raises(GridError, match=message):
        checked_spec(values, "test")


def test_the_grid_survives_sweep_json():
    spec = checked_spec({"models": ["simple"], "batch_sizes": [2, 1], "min_time_s": 0.5}, "t")
    again = SweepSpec.from_json(json.loads(json.dumps(spec.to_json())))
    assert again == spec and [p.batch_size for p in again.points()] == [2, 1]
    assert spec.cold_compile  # the default: every point compiles into an empty Inductor cache
    warm = checked_spec({"models": ["simple"], "cold_compile": False}, "t")
    assert SweepSpec.from_json(json.loads(json.dumps(warm.to_json()))).cold_compile is False
    with pytest.raises(GridError, match="cold_compile: expected true or false"):
        checked_spec({"models": ["simple"], "cold_compile": "no"}, "t")


def test_a_sweep_record_is_written_as_sweep_2_and_a_sweep_1_record_still_reads(tmp_path):
    """/2 drops the grid's generate_flags (always empty in /1, kept only to be refused) and
    holds the grid's own points; a /1 record is read as the /2 it differs from, and resumed."""
    spec = checked_spec({"models": ["simple"], "batch_sizes": [1]}, "t")
    new = lifecycle.SweepRun.new(spec, "local", tmp_path / "new")
    written = json.loads((new.root / "sweep.json").read_text())
    assert written["schema"] == "profreport.sweep/2" and "generate_flags" not in written["grid"]
    assert written["points"] == [
        {"id": "simple-b1-float32", "model": "simple", "batch_size": 1, "seq_len": None,
         "dtype": "float32", "status": "pending", "error": None, "exit_code": None, "run": None,
         "log": None, "duration_s": None, "worker": None}
    ]  # fmt: skip
    old = tmp_path / "old"
    old.mkdir()
    grid = {**written["grid"], "generate_flags": []}
    (old / "sweep.json").write_text(
        json.dumps({**written, "schema": "profreport.sweep/1", "grid": grid})
    )
    assert model.is_sweep(old)
    read = model.load_sweep(old)
    assert (
        read.schema == "profreport.sweep/2"
        and read.grid == spec
        and "generate_flags" not in read.grid.to_json()
    )
    resumed = lifecycle.SweepRun.resume(old)
    assert [p.id for p in resumed.todo()] == ["simple-b1-float32"]
    assert json.loads((old / "sweep.json").read_text())["schema"] == "profreport.sweep/2"


def test_config_file(tmp_path):
    path = tmp_path / "sweep.toml"
    path.write_text(
        'models = ["gated-residual", "simple"]\nbatch_sizes = [1, 4]\nmin_time = 0.2\n'
        'executor = "ray"\nray_address = "auto"\n'
    )
    grid, run = read_config(path)
    spec = checked_spec(grid, str(path))
    assert spec.models == ("gated-residual", "simple") and spec.min_time_s == 0.2
    assert run == {"executor": "ray", "ray_address": "auto"}
    assert len(spec.points()) == 4
    path.write_text("models = [")
    with pytest.raises(GridError, match="is not valid TOML"):
        read_config(path)


def test_peak_memory_is_read_only_where_recorded():
    def peak(entry):
        return peak_memory_bytes(OkMode.from_json(entry))

    assert peak({"status": "ok"}) is None  # a record from before peak memory
    assert peak({"peak_memory": {"bytes": 2048, "source": "profiler", "scope": "call"}}) == 2048
    assert peak({"peak_memory": {"bytes": None, "source": "profiler"}}) is None  # no event seen


def test_rows_come_from_the_run_record(gated_run):
    record = load(gated_run)
    point = dataclasses.replace(
        Point.at("gated-residual", 1, None, "float32"), status="ok", run="points/x/run"
    )
    rows = mode_rows(point, ("eager",), Run.from_json(record))
    assert [r.mode for r in rows] == list(record["modes"])
    eager = record["modes"]["eager"]
    first = rows[0]
    assert (first.point, first.model, first.run) == (point.id, "gated-residual", "points/x/run")
    assert first.kernels_per_step == eager["kernels"]["per_step"]
    assert first.bytes_per_step == eager["bytes"]["read"] + eager["bytes"]["written"]
    assert first.latency_ms.median == eager["latency_ms"]["median"]
    assert first.latency_ms.p90 == eager["latency_ms"]["p90"]
    assert first.device == "cpu"
    assert first.peak_memory_bytes == eager["peak_memory"]["bytes"] > 0
    comp = next(r for r in rows if r.mode == "compile")
    assert comp.speedup_vs_eager.median == record["modes"]["compile"]["speedup_vs_eager"]["median"]
    assert comp.speedup_vs_eager.ci95 == tuple(
        record["modes"]["compile"]["speedup_vs_eager"]["ci95"]
    )
    # A point without a run record: one failed row per mode it was to run, with its error.
    point = dataclasses.replace(point, status="failed", error="boom", run=None)
    failed = mode_rows(point, ("eager", "compile"), None)
    assert [(r.mode, r.status, r.error, r.device) for r in failed] == [
        ("eager", "failed", "boom", None),
        ("compile", "failed", "boom", None),
    ]


def _row(point, mode, batch, speedup=None, compile_s=None, peak=None, status="ok"):
    return {
        "point": point,
        "model": "m",
        "batch_size": batch,
        "seq_len": None,
        "dtype": "float32",
        "mode": mode,
        "status": status,
        "error": None if status == "ok" else "boom",
        "kernels_per_step": 3,
        "bytes_per_step": 2**20 * batch,
        "latency_ms": {"median": 1.0 * batch, "p10": 0.9 * batch, "p90": 1.2 * batch},
        "speedup_vs_eager": None
        if speedup is None
        else {"median": speedup, "ci95": [speedup * 0.9, speedup * 1.1]},
        "compile_s": compile_s,
        "peak_memory_bytes": peak,
    }


def _sweep(rows, points):
    return {
        "schema": model.Sweep.SCHEMA,
        "grid": {"models": ["m"], "modes": ["eager", "compile"], "device": "cpu"},
        "points": points,
        "rows": rows,
    }


def _typed(rows, points):
    return Sweep.from_json(_sweep(rows, points))


def _points(*statuses):
    return [
        {
            "id": f"p{i}",
            "model": "m",
            "batch_size": 2**i,
            "seq_len": None,
            "dtype": "float32",
            "status": s,
            "error": None if s == "ok" else "it raised",
            "run": None,
        }
        for i, s in enumerate(statuses)
    ]


def test_summary_in_the_dashboards_terms():
    rows = [
        _row("p0", "eager", 1, peak=100.0),
        _row("p0", "compile", 1, speedup=2.0, compile_s=3.0, peak=50.0),
        _row("p1", "eager", 2),
        _row("p1", "compile", 2, speedup=8.0, compile_s=5.0),
        _row("p2", "eager", 4, status="failed"),
        _row("p2", "compile", 4, status="failed"),
    ]
    sweep = _typed(rows, _points("ok", "ok", "failed"))
    s = summary.summarize(sweep)
    eager, comp = s.modes
    assert (eager.mode, comp.mode) == ("eager", "compile")
    assert comp.geomean_speedup == pytest.approx(4.0)  # sqrt(2 * 8)
    assert (comp.passed, comp.points) == (2, 3) and comp.pass_rate == pytest.approx(2 / 3)
    assert comp.mean_compile_s == pytest.approx(4.0)
    assert comp.compression_ratio == pytest.approx(2.0) and comp.compression_points == 1
    assert eager.geomean_speedup is None
    assert [f.label for f in s.failed] == ["m, batch 4, float32"] and s.failed[
        0
    ].error == "it raised"
    assert s.axis == "batch_size"
    lines = summary.series(sweep.rows, s.axis)
    assert [(ln.mode, ln.x) for ln in lines] == [("eager", (1, 2)), ("compile", (1, 2))]
    assert summary.geometric_mean([]) is None
    assert math.isclose(summary.geometric_mean([1.0, 100.0]), 10.0)


def test_a_model_without_the_swept_axis_stays_off_the_chart():
    rows = [
        {**_row("p0", "eager", 1), "model": "hf:gpt2", "seq_len": 32},
        {**_row("p1", "eager", 1), "model": "hf:gpt2", "seq_len": 64},
        {**_row("p2", "eager", 1), "model": "hf:vit"},  # an image model: no sequence length
    ]
    doc = _sweep(rows, _points("ok", "ok", "ok"))
    typed = Sweep.from_json(doc).rows
    assert summary.swept_axis(typed) == "seq_len"
    lines = summary.series(typed, "seq_len")
    assert [(ln.label, ln.x) for ln in lines] == [("hf:gpt2, batch 1, float32, eager", (32, 64))]
    assert render.render_html(Sweep.from_json(doc)).count("<svg") == 4


def test_compression_ratio_not_recorded_without_peak_memory():
    rows = [_row("p0", "eager", 1), _row("p0", "compile", 1, speedup=1.5)]
    view = render.build_view(_typed(rows, _points("ok")))
    comp = next(m for m in view["summary"] if m["mode"] == "compile")
    assert comp["compression"] == "not recorded"
    assert comp["geomean"] == "1.50x over 1 points"


def test_renderers(tmp_path):
    rows = [
        _row("p0", "eager", 1),
        _row("p0", "compile", 1, speedup=2.0, compile_s=3.0),
        _row("p1", "eager", 2),
        _row("p1", "compile", 2, speedup=3.0, compile_s=3.5),
        _row("p2", "eager", 4, status="failed"),
    ]
    sweep = _typed(rows, _points("ok", "ok", "failed"))
    html = render.render_html(sweep)
    assert html.count("<svg") == 4 and "<script" not in html
    assert "it raised" in html  # the failed point, with its error
    md = render.render_markdown(sweep)
    assert "| compile | 2/2 (100%) | 2.45x over 2 points | 3.25 s | not recorded |" in md
    assert "- ❌ m, batch 4, float32: failed: it raised" in md
    assert "compile times cold: each point compiled into an empty Inductor cache" in md


def test_compare_two_sweeps_gates_per_point(gated_run):
    from profreport.analysis.compare import Thresholds
    from profreport.analysis.derive import derived_run

    record = derived_run(load(gated_run), mode_analyses())
    base = _typed([], _points("ok", "ok"))
    head = _typed([], _points("ok", "failed"))
    runs = {"p0": record, "p1": record}
    c = compare_sweeps(base, head, runs, {"p0": record}, Thresholds(0, 0.0, None))
    assert [p.point for p in c.points] == ["m, batch 1, float32", "m, batch 2, float32"]
    assert c.points[0].comparison is not None and not c.points[0].comparison.regressed
    assert [r.message for r in c.regressions] == [
        "m, batch 2, float32: was ok, now failed: it raised"
    ]
    # Without thresholds a failed point is reported, not gated.
    assert not compare_sweeps(base, head, runs, {"p0": record}).regressed
    # Points match by model, batch, sequence length and dtype.
    other = _typed([], [{**p, "batch_size": 64} for p in _points("ok")])
    c = compare_sweeps(base, other, runs, {"p0": record})
    assert c.points == () and c.only_in_head == ("m, batch 64, float32",)


def test_sweep_json_round_trips_through_the_typed_record(gated_run, tmp_path, monkeypatch):
    """Every sweep.json the command writes (after each point, on Ctrl-C, with --resume, at the
    end) reads into the typed Sweep and back byte for byte. The points' runs are copies of a real
    run; the executor is replaced, so that one point can be interrupted on cue."""
    import shutil

    from profreport.record import dumps
    from profreport.sweep import lifecycle, local

    written = []
    real_save = lifecycle.save

    def save(sweep, root, final):
        kept = real_save(sweep, root, final)
        written.append((root / "sweep.json").read_text())
        return kept

    interrupt = [True]

    def run_local(spec, todo, root, on_start, on_done):
        for n, point in enumerate(todo):
            on_start(point)
            if interrupt[0] and n == 1:
                raise KeyboardInterrupt
            if point.model == "simple":
                shutil.copytree(gated_run, root / "points" / point.id / "run")
                run = f"points/{point.id}/run"
                on_done(
                    dataclasses.replace(point, status="ok", run=run, duration_s=1.5, worker="w")
                )
            else:
                on_done(
                    dataclasses.replace(
                        point, status="failed", error="boom", exit_code=2, duration_s=0.5
                    )
                )

    monkeypatch.setattr(lifecycle, "save", save)
    monkeypatch.setattr(local, "run_local", run_local)
    grid = ["--model", "simple", "--model", "mlp-block", "--batch-sizes", "1,2"]
    code, _out, err = _cli("sweep", *grid, "--device", "cpu", "--out", str(tmp_path), "--quiet")
    assert code == 130, err
    interrupted = Sweep.from_json(json.loads(written[-1]))
    assert [p.status for p in interrupted.points] == ["ok", "interrupted", "pending", "pending"]
    assert interrupted.points[1].error == "the sweep was interrupted"
    interrupt[0] = False
    (folder,) = tmp_path.iterdir()
    code, out, err = _cli("sweep", "--resume", str(folder), "--quiet")
    assert code == 1 and "(1 points already done were not run again)" in out, err
    assert len(written) == 8  # start, 1 point, Ctrl-C; start, 3 points, end
    for text in written:
        assert dumps(Sweep.from_json(json.loads(text)).to_json()) == text
    final = model.load_sweep(folder)
    raw = json.loads(written[-1])
    assert [(p.id, p.status, p.error) for p in final.points] == [
        (p["id"], p["status"], p["error"]) for p in raw["points"]
    ]
    assert [p.status for p in final.points] == ["ok", "ok", "failed", "failed"]
    record = load(gated_run)
    eager = final.rows[0]
    assert (eager.mode, eager.kernels_per_step) == ("eager", raw["rows"][0]["kernels_per_step"])
    assert eager.latency_ms.median == record["modes"]["eager"]["latency_ms"]["median"]
    assert final.summary.to_json() == raw["summary"] and final.summary.points == 4
    assert raw["summary"]["modes"][0]["pass_rate"] == final.summary.modes[0].pass_rate
    assert (final.rows[-1].status, final.rows[-1].error) == ("failed", "boom")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"rows": [1]}, "rows[0]: expected an object"),
        ({"rows": [{"latency_ms": 3}]}, "rows[0].latency_ms: expected an object"),
        ({"grid": {"models": "m"}}, "grid.models: expected a list"),
        ({"tool": "profreport"}, "tool: expected an object"),
    ],
)
def test_a_sweep_record_the_typed_record_cannot_read_is_one_line(change, message, tmp_path):
    (tmp_path / "sweep.json").write_text(json.dumps({**_sweep([], _points("ok")), **change}))
    with pytest.raises(model.SweepRecordError, match=re.escape(message)):
        model.load(tmp_path)


def _cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sweep"], "no model given"),
        (["sweep", "--model", "simple", "--batch-sizes", "1,x"], "expected positive integers"),
        (["sweep", "--model", "simple", "--dtypes", "int8"], "expected one of float32"),
        (["sweep", "--resume", "nowhere", "--model", "simple"], "drop --model"),
        (["sweep", "--resume", "nowhere"], "no such file: nowhere/sweep.json"),
        (["sweep", "--config", "missing.toml"], "no such file: missing.toml"),
        (["sweep", "--model", "simple", "--ray-address", "auto"], "applies to --executor ray"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(argv, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _out, err = _cli(*argv)
    assert code == 2
    assert err.count("\n") == 1 and message in err, err
    assert list(tmp_path.iterdir()) == []


def test_compare_refuses_a_sweep_against_a_run(gated_run, tmp_path):
    sweep = tmp_path / "sweep.json"
    sweep.write_text(json.dumps(_sweep([], _points("ok"))))
    code, _out, err = _cli("compare", str(sweep), str(gated_run / "run.json"))
    assert code == 2 and "is not a sweep.json" in err


def test_the_ray_executor_without_ray_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    code, _out, err = _cli(
        "sweep", "--model", "simple", "--executor", "ray", "--out", str(tmp_path / "o")
    )
    assert code == 2 and "pip install 'profreport[ray]'" in err
    assert not (tmp_path / "o").exists()


def test_an_out_that_is_a_file_is_refused(tmp_path):
    taken = tmp_path / "file"
    taken.write_text("mine")
    code, _out, err = _cli("sweep", "--model", "simple", "--out", str(taken))
    assert code == 2 and "exists and is not a folder" in err and taken.read_text() == "mine"


def test_compare_of_sweeps_takes_every_gate_the_command_accepts(monkeypatch, tmp_path):
    from profreport.sweep import compare as sweep_compare
    from profreport.sweep.model import SweepRecordError

    seen = []

    def spy(base, head, thresholds):
        seen.append(thresholds)
        raise SweepRecordError("stop here")

    monkeypatch.setattr(sweep_compare, "either_is_sweep", lambda *paths: True)
    monkeypatch.setattr(sweep_compare, "compare_sweep_files", spy)
    argv = ["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]
    gates = ["--max-kernel-increase", "1", "--max-bytes-increase", "2"]
    gates += ["--max-latency-regression", "3", "--max-peak-memory-increase", "4"]
    assert main([*argv, *gates]) == 2
    (t,) = seen
    assert (t.max_kernel_increase, t.max_bytes_increase_pct) == (1, 2.0)
    assert (t.max_latency_regression_pct, t.max_peak_memory_increase_pct) == (3.0, 4.0)


def test_a_sweep_is_a_library_call_new_and_resumed(gated_run, tmp_path, monkeypatch):
    """profreport.run_sweep owns the lifecycle the command used to: a new folder, each point
    recorded as it ends, the pages at the end, and a resume that runs nothing already done."""
    import shutil

    import profreport
    from profreport.sweep import local

    def run_local(spec, todo, root, on_start, on_done):
        for point in todo:
            on_start(point)
            shutil.copytree(gated_run, root / "points" / point.id / "run")
            run = f"points/{point.id}/run"
            on_done(dataclasses.replace(point, status="ok", run=run, duration_s=1.0, worker="w"))

    monkeypatch.setattr(local, "run_local", run_local)
    seen = []
    spec = profreport.SweepSpec(models=("simple",), batch_sizes=(1, 2))
    done = profreport.run_sweep(spec, out=tmp_path, on_done=lambda p: seen.append(p.id))
    assert seen == ["simple-b1-float32", "simple-b2-float32"]
    assert done.root.parent == tmp_path and (done.root / "sweep.html").is_file()
    written = model.load_sweep(done.root)
    assert [p.status for p in written.points] == ["ok", "ok"]
    assert written.summary is not None and written.summary.ok_points == 2
    assert len(written.rows) == 2 * len(load(gated_run)["modes"])
    again = profreport.run_sweep(resume=done.root)
    assert again.done_before == 2 and again.todo() == [] and again.sweep == written
    with pytest.raises(ValueError, match="a spec"):
        profreport.run_sweep()
