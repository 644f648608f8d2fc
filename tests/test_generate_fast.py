"""`profreport generate` and a sweep point end to end through the edge, without profiling: the
collection (pipeline.RunCollector) hands back the checked-in gated-residual run, so the fast tier
still stages and publishes a run folder with every output, prints the table and the paths, and
sets the exit code from the modes that failed. The real runs are in the slow tier
(test_generate_e2e.py, test_generate_failures.py, test_sweep_e2e.py)."""

import copy
import io
import json
import re
import shutil
from pathlib import Path

import pytest

from profreport import cli
from profreport.modes import mode_for
from profreport.record import load
from profreport.runner import GenerateRequest, run_point
from tests.conftest import FAST, RECORDED_GATED_RUN, evidence_of, replay_collection, run_dir_in

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

    def collected(setup):
        calls.append((setup.model.name, setup.device.type, setup.dtype, setup.options.modes))
        shutil.copytree(RECORDED_GATED_RUN / "tensorboard", setup.folder.path / "tensorboard")
        return evidence_of(copy.deepcopy(record))  # no findings: derived after saving

    replay_collection(monkeypatch, collected)
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


def test_a_disk_that_fills_up_before_any_evidence_is_one_line_and_keeps_nothing(
    recorded_pipeline, tmp_path, monkeypatch
):
    from profreport import files

    def full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", full)
    code, _out, err = _generate(tmp_path / "out")
    assert code == 2
    named = re.fullmatch(
        r"error: cannot write (\S+)/run\.json: No space left on device; nothing was kept\n", err
    )
    assert named is not None  # the run folder as it would have been named
    assert Path(named[1]).parent == tmp_path / "out"
    assert Path(named[1]).name.startswith("gated-residual-cpu-")
    assert list((tmp_path / "out").iterdir()) == []


def test_a_disk_that_fills_up_after_the_evidence_keeps_a_partial_record(
    recorded_pipeline, tmp_path, monkeypatch
):
    """Issue 46: a full disk is bad input (exit 2, one line naming the file and the disk), and
    what is kept is a complete record named as partial: the evidence checkpointed so far."""
    from profreport import files

    replace = files.os.replace

    def full_for_reports(src, dst):
        if Path(dst).name == "report.html":
            raise OSError(28, "No space left on device")
        replace(src, dst)

    monkeypatch.setattr(files.os, "replace", full_for_reports)
    out = tmp_path / "out"
    code, _out, err = _generate(out)
    assert code == 2
    (kept,) = out.iterdir()
    assert kept.name.startswith("gated-residual-cpu-") and kept.name.endswith("-partial")
    assert err == (
        f"error: cannot write {kept / 'report.html'}: No space left on device; the evidence so "
        f"far is kept in {kept} (a partial run: `profreport render` reads it)\n"
    )
    record = load(kept)  # validates
    assert set(record["modes"]) == {"eager", "script", "trace", "optimize", "compile"}
    assert not list(kept.glob("report.html*")) and not list(kept.glob(".*.tmp"))


def test_a_checkpoint_the_disk_refuses_keeps_the_one_before(
    recorded_pipeline, tmp_path, monkeypatch
):
    """run.json is written atomically: the evidence saved after the timing failing on a full
    disk leaves the checkpoint before it whole, and that is what the partial folder keeps."""
    from profreport import files

    replace, records = files.os.replace, []

    def full_after_the_first_record(src, dst):
        if Path(dst).name == "run.json":
            records.append(dst)
            if len(records) > 1:
                raise OSError(28, "No space left on device")
        replace(src, dst)

    monkeypatch.setattr(files.os, "replace", full_after_the_first_record)
    out = tmp_path / "out"
    code, _out, err = _generate(out)
    assert code == 2
    (kept,) = out.iterdir()
    assert err.startswith(f"error: cannot write {kept / 'run.json'}: No space left on device;")
    assert set(load(kept)["modes"]) == {"eager", "script", "trace", "optimize", "compile"}


def test_a_finding_that_raises_keeps_the_evidence_and_exits_3(
    recorded_pipeline, tmp_path, monkeypatch
):
    """Issue 34: a bug in deriving one finding (compile's fusion map here) costs a `profreport
    render` after the fix, never the run. The evidence is on disk before anything is derived,
    the failure is shown where the finding would be, and the run exits 3 with one line."""
    record, _calls = recorded_pipeline
    out = tmp_path / "out"
    on_disk = {}

    def raising(mode, eager):
        (staged,) = out.glob(".gated-residual-cpu-*.partial-*")
        on_disk["run"] = load(staged)  # what the run folder held when deriving began
        on_disk["csv"] = sorted(p.name for p in staged.glob("kernels_*.csv"))
        raise IndexError("tuple index out of range")

    monkeypatch.setattr(mode_for("compile"), "fusion_map", raising)
    code, stdout, err = _generate(out)
    assert code == 3
    run = run_dir_in(out)
    record_path = run / "run.json"
    assert err.splitlines() == [
        "error: internal error: deriving findings failed (compile: fusion raised IndexError: "
        "tuple index out of range): a profreport bug, shown in the report where each finding "
        f"would be; the run's evidence was saved in {record_path}: `profreport render "
        f"{record_path}` derives the findings again once the bug is fixed"
    ]
    # every mode's evidence was saved before deriving, with no finding in it
    saved = on_disk["run"]["modes"]
    assert (
        list(saved) == list(record["modes"]) == ["eager", "script", "trace", "optimize", "compile"]
    )
    evidence = evidence_of(record).to_json()["modes"]
    for name, mode in saved.items():
        assert mode == evidence[name]  # kernels, bytes, latency, ...: all of it, and no finding
        assert "verdict" not in mode and "fusion" not in mode and mode["latency_ms"]
    assert on_disk["csv"] == [f"kernels_{name}.csv" for name in sorted(saved)]
    # the published record: the failed finding in its mode, the others derived
    modes = load(record_path)["modes"]
    failed = modes["compile"]["failed_finding"]
    assert (failed["finding"], failed["error"]) == (
        "fusion",
        "IndexError: tuple index out of range",
    )
    assert "in raising" in failed["traceback"]
    assert modes["compile"]["kernels"] == evidence["compile"]["kernels"]
    assert "fusion" not in modes["compile"] and "why_not_fused" not in modes["compile"]
    assert modes["trace"]["verdict"].startswith("trace: ") and "fusion" in modes["trace"]
    sentence = (
        "compile: FINDING FAILED - deriving fusion raised IndexError: tuple index out of range"
    )
    assert modes["compile"]["verdict"].startswith(sentence)
    for report in ("report.html", "summary.md"):
        text = (run / report).read_text()
        assert sentence in text and "Deriving findings failed (compile: fusion)" in text
    assert "traceback of the finding that failed" in (run / "report.html").read_text()
    assert sentence in stdout  # the verdict lines under the terminal table

    monkeypatch.undo()  # the bug fixed: the same record renders with every finding
    assert cli.main(["render", str(record_path)], out=io.StringIO()) == 0
    modes = load(record_path)["modes"]  # render writes the reports, never the record
    assert "failed_finding" in modes["compile"]
    summary = (run / "summary.md").read_text()
    assert "FINDING FAILED" not in summary and "- compile: 7 eager kernels ran as" in summary


def test_render_of_a_record_whose_finding_raises_exits_3(recorded_gated_run, monkeypatch):
    def raising(mode, run):
        raise KeyError("a bug")

    monkeypatch.setattr(mode_for("script"), "why_not_fused", raising)
    stdout, stderr = io.StringIO(), io.StringIO()
    assert cli.main(["render", str(recorded_gated_run)], out=stdout, err=stderr) == 3
    record = recorded_gated_run / "run.json"
    assert stderr.getvalue().splitlines() == [
        "error: internal error: deriving findings failed (script: why_not_fused raised KeyError: "
        "'a bug'): a profreport bug, shown in the report where each finding would be; the run's "
        f"evidence was saved in {record}: `profreport render {record}` derives the findings "
        "again once the bug is fixed"
    ]
    assert (
        "script: FINDING FAILED - deriving why_not_fused raised KeyError"
        in (recorded_gated_run / "summary.md").read_text()
    )


def test_compare_refuses_a_run_whose_finding_raises(recorded_gated_run, monkeypatch, tmp_path):
    """A comparison would read a finding that failed as one that changed: exit 3, one line."""
    monkeypatch.setattr(mode_for("compile"), "fusion_map", lambda mode, eager: 1 / 0)
    stderr = io.StringIO()
    out = tmp_path / "comparison.md"
    argv = ["compare", str(recorded_gated_run), str(recorded_gated_run), "--out", str(out)]
    assert cli.main(argv, out=io.StringIO(), err=stderr) == 3
    record = recorded_gated_run / "run.json"
    assert stderr.getvalue() == (
        "error: internal error: deriving findings failed (compile: fusion raised "
        "ZeroDivisionError: division by zero) (a profreport bug); the run's evidence was saved "
        f"in {record}: `profreport render {record}` derives the findings again once the bug is "
        "fixed; rerun with --debug for the traceback\n"
    )
    assert not out.exists()
