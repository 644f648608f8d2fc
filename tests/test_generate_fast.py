"""`profreport generate` and a sweep point end to end through the edge, without profiling: the
pipeline (api.profile_loaded) hands back the checked-in gated-residual run, so the fast tier
still stages and publishes a run folder with every output, prints the table and the paths, and
sets the exit code from the modes that failed. The real runs are in the slow tier
(test_generate_e2e.py, test_generate_failures.py, test_sweep_e2e.py)."""

import copy
import io
import json
import shutil

import pytest

from profreport import api, cli
from profreport.record import load
from profreport.runner import GenerateRequest, run_point
from tests.conftest import FAST, RECORDED_GATED_RUN, run_dir_in

FAILED = {
    "status": "failed",
    "error": "RuntimeError: this mode broke",
    "compile_s": None,
    "traceback": "Traceback ...",
}


@pytest.fixture
def recorded_pipeline(monkeypatch):
    """Replace the pipeline with the recorded run; returns the record it hands back, to edit."""
    record = load(RECORDED_GATED_RUN)
    calls = []

    def profile_loaded(model, device, dtype_name, run_dir, options, progress, now=None):
        calls.append((model.name, device.type, dtype_name, options.modes))
        shutil.copytree(RECORDED_GATED_RUN / "tensorboard", run_dir / "tensorboard")
        return api.RunResult.of_record(copy.deepcopy(record), run_dir)

    monkeypatch.setattr(api, "profile_loaded", profile_loaded)
    return record, calls


def _generate(out, *args):
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["generate", "--model", "gated-residual", "--batch-size", "1", "--out", str(out)]
    code = cli.main([*argv, *FAST, *args], out=stdout, err=stderr)
    return code, stdout.getvalue(), stderr.getvalue()


def test_generate_publishes_every_output_and_prints_the_table(recorded_pipeline, tmp_path):
    record, calls = recorded_pipeline
    code, out, err = _generate(tmp_path / "out", "--modes", "eager,compile")
    assert code == 0, err
    assert calls == [("gated-residual", "cpu", "float32", ("eager", "compile"))]
    run = run_dir_in(tmp_path / "out")
    assert run.name.startswith("gated-residual-cpu-")
    names = {p.name for p in run.iterdir()}
    assert {"run.json", "report.html", "summary.md", "all_modes.timeline.json"} <= names
    assert {f"kernels_{mode}.csv" for mode in record["modes"]} <= names
    assert load(run)["modes"]["compile"]["kernels"] == record["modes"]["compile"]["kernels"]
    assert "gated-residual on cpu" in out and f"record: {run / 'run.json'}" in out
    assert out.count("\n  compile: ") == 1  # the verdict lines, one per mode
    assert err == ""
    # the headline's row: kernels eager -> mode and the bytes change, as in the report
    (row,) = [line for line in out.splitlines() if line.startswith("│ compile ")]
    assert "7 → 1" in row and "-82%" in row
    # verdicts wrap at words inside the table's width: every word of the sentence is whole
    verdict = load(run)["modes"]["compile"]["verdict"]
    start = out.index("\n  compile: ") + 3
    wrapped = out[start : out.index("\nreport: ")].splitlines()
    assert all(len(line) <= 120 for line in wrapped)
    assert " ".join(line.strip() for line in wrapped).split() == verdict.split()


@pytest.mark.parametrize(
    ("failed", "strict", "code", "lines"),
    [
        ("compile", False, 0, ["warning: compile failed: RuntimeError: this mode broke"]),
        ("compile", True, 1, ["error: compile failed: RuntimeError: this mode broke"]),
        (
            "eager",
            False,
            1,
            [
                "error: eager failed: RuntimeError: this mode broke",
                "error: the model does not run in eager mode; the report says so",
            ],
        ),
    ],
)
def test_a_failed_mode_sets_the_exit_code_and_is_named(
    recorded_pipeline, tmp_path, failed, strict, code, lines
):
    record, _calls = recorded_pipeline
    record["modes"][failed] = dict(FAILED)
    exit_code, out, err = _generate(tmp_path / "out", *(["--strict"] if strict else []))
    assert exit_code == code
    assert err.splitlines() == lines
    assert f"record: {run_dir_in(tmp_path / 'out') / 'run.json'}" in out  # the run is kept


def test_a_sweep_point_gets_the_same_run_as_data(recorded_pipeline, tmp_path):
    record, _calls = recorded_pipeline
    record["modes"]["eager"] = dict(FAILED)
    request = GenerateRequest(model="gated-residual", device="cpu", batch_size=1, out=tmp_path)
    result = run_point(request, io.StringIO())
    assert (result.exit_code, result.status) == (1, "failed")
    assert result.run_dir == run_dir_in(tmp_path) and result.record.is_file()
    assert result.error == (
        "eager failed: RuntimeError: this mode broke; "
        "the model does not run in eager mode; the report says so"
    )
    assert json.loads(json.dumps(result.to_json()))["record"] == str(result.record)


def test_a_disk_that_fills_up_while_saving_is_one_line(recorded_pipeline, tmp_path, monkeypatch):
    from profreport import files

    def full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", full)
    code, _out, err = _generate(tmp_path / "out")
    assert code == 2
    assert err == f"error: cannot write the run under {tmp_path / 'out'}: No space left on device\n"
    assert list((tmp_path / "out").iterdir()) == []
