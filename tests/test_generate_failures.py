"""`generate` under bad input and failure: one line and exit 2 for what the user can fix, a
written report and exit 1 when the model itself is broken, and never a half-written or
overwritten run folder."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import torch

from profreport import cli, env, files, pipeline
from profreport.capture.timing import TimingConfig, TimingFailed, measure_latency
from profreport.modes import PreparedMode
from profreport.record import load
from profreport.record.model import OkMode
from tests.conftest import FAST, run_dir_in, setup

REPO = Path(__file__).resolve().parent.parent

MODEL_FILE = """
import sys
import time
import torch

class Tiny(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1

class Unscriptable(torch.nn.Module):
    def forward(self, x):
        return x * len({id(x): 1})

class Broken(torch.nn.Module):
    def forward(self, x):
        raise ValueError("shapes do not match\\nsecond line of the message")

class Slow(torch.nn.Module):
    def forward(self, x):
        time.sleep(0.02)
        return x + 1

def tiny():
    return Tiny(), (torch.randn(4, 4),)

def unscriptable():
    return Unscriptable(), (torch.randn(4, 4),)

def broken():
    return Broken(), (torch.randn(4, 4),)

def slow():
    return Slow(), (torch.randn(4, 4),)

def not_a_pair():
    return Tiny()

def no_inputs():
    return Tiny(), ()

def raises():
    raise RuntimeError("cannot download weights")

CONSTANT = 3
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    (folder / "m.py").write_text(MODEL_FILE)
    (folder / "syntax.py").write_text("def build(:\n")
    (folder / "exits.py").write_text("import sys\nsys.exit(3)\n")
    return folder


def _generate(out: Path, *args: str) -> list[str]:
    return ["generate", "--out", str(out), *FAST, *args]  # the last of a repeated option wins


def _one_line_exit_2(rc: int, err: str) -> None:
    assert rc == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nosuch", "unknown model 'nosuch': use a built-in name (simple, conv-bn-relu"),
        ("no_such_module_xyz:build", "cannot import module 'no_such_module_xyz': ModuleNotFound"),
        ("{d}/missing.py:build", "model file not found"),
        ("{d}/syntax.py:build", "importing {d}/syntax.py failed: SyntaxError"),
        ("{d}/exits.py:build", "importing {d}/exits.py failed: SystemExit: 3"),
        ("{d}/m.py:nosuch", "has no callable 'nosuch'"),
        ("{d}/m.py:CONSTANT", "has no callable 'CONSTANT'"),
        ("{d}/m.py:not_a_pair", "must return (torch.nn.Module, tuple_of_example_inputs)"),
        ("{d}/m.py:no_inputs", "example inputs must be a non-empty tuple of tensors"),
        ("{d}/m.py:raises", "raised RuntimeError: cannot download weights"),
    ],
)
def test_model_that_cannot_be_loaded(models, tmp_path, capsys, spec, message):
    rc = cli.main(_generate(tmp_path / "out", "--model", spec.format(d=models)))
    err = capsys.readouterr().err
    _one_line_exit_2(rc, err)
    assert message.format(d=models) in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch-size", "0"], "--batch-size: must be at least 1: 0"),
        (["--batch-size", "-3"], "--batch-size: must be at least 1: -3"),
        (["--batch-size", "two"], "--batch-size: not an integer: 'two'"),
        (["--active-steps", "2"], "--active-steps must be at least 3"),
        (["--min-time", "0"], "--min-time: must be above 0: 0"),
        (["--max-time", "nan"], "--max-time: must be a finite number: nan"),
        (["--threads", "0"], "--threads: must be at least 1: 0"),
        (["--modes", "eager,jit"], "unknown mode(s) jit; choose from eager, script"),
        (["--modes", ","], "unknown mode(s) (none)"),
        (["--modes", "eager,eager"], "a mode is listed twice"),
        (["--dtype", "float64"], "argument --dtype: invalid choice: 'float64'"),
        (["--device", "tpu"], "Expected one of cpu, cuda"),
        (["--device", "cuda:7"], "CUDA"),
    ],
)
def test_bad_options(tmp_path, capsys, args, message):
    if torch.cuda.device_count() > 7:
        pytest.skip("a machine with 8 GPUs accepts cuda:7")
    rc = cli.main(_generate(tmp_path / "out", "--model", "simple", *args))
    err = capsys.readouterr().err
    _one_line_exit_2(rc, err)
    assert message in err
    assert not (tmp_path / "out").exists()


def test_dtype_the_device_cannot_run(tmp_path, capsys, monkeypatch):
    def probe(device, dtype):
        if dtype == torch.float16:
            raise RuntimeError("\"addmm\" not implemented for 'Half'\nmore")

    monkeypatch.setattr(env, "_probe_dtype", probe)
    rc = cli.main(_generate(tmp_path / "out", "--model", "simple", "--dtype", "float16"))
    err = capsys.readouterr().err
    _one_line_exit_2(rc, err)
    assert "float16 does not run on cpu: \"addmm\" not implemented for 'Half'" in err
    assert env.dtype_problem(torch.device("cpu"), torch.float32) is None


@pytest.mark.parametrize("kind", ["file", "below-a-file"])
def test_output_folder_that_cannot_be_written(tmp_path, capsys, kind):
    blocker = tmp_path / "taken.txt"
    blocker.write_text("keep me\n")
    out = blocker if kind == "file" else blocker / "reports"
    rc = cli.main(_generate(out, "--model", "gated-residual", "--batch-size", "1"))
    err = capsys.readouterr().err
    _one_line_exit_2(rc, err)
    assert ("exists and is not a folder" if kind == "file" else f"cannot write to {out}") in err
    assert blocker.read_text() == "keep me\n"


def test_debug_shows_the_traceback_behind_the_line(tmp_path, capsys):
    rc = cli.main(_generate(tmp_path / "out", "--model", "no_such_module_xyz:f", "--debug"))
    err = capsys.readouterr().err
    assert rc == 2
    assert "Traceback (most recent call last)" in err and "ModuleNotFoundError" in err
    assert err.splitlines()[-1].startswith("error: cannot import module")


def test_internal_error_is_one_line_and_keeps_the_evidence_so_far(tmp_path, capsys, monkeypatch):
    """A bug after a mode finished (here in the timing) costs the timing, not the run: the
    folder is published with the evidence saved as each mode finished, the one line says where,
    and `profreport render` makes its report."""

    def crash(*_args, **_kwargs):
        raise ZeroDivisionError("a bug\nin profreport")

    monkeypatch.setattr(pipeline, "time_stages", crash)
    out = tmp_path / "out"
    rc = cli.main(
        _generate(out, "--model", "gated-residual", "--batch-size", "1", "--modes", "eager")
    )
    err = capsys.readouterr().err
    assert rc == cli.EXIT_INTERNAL
    (run,) = out.iterdir()
    assert not run.name.startswith(".")  # published, not left as a hidden staging folder
    record = run / "run.json"
    assert err == (
        "error: internal error: ZeroDivisionError: a bug (a profreport bug); the run's evidence "
        f"was saved in {record}: `profreport render {record}` derives the findings again once "
        "the bug is fixed; rerun with --debug for the traceback\n"
    )
    eager = load(record)["modes"]["eager"]
    assert eager["status"] == "ok" and eager["kernels"]["per_step"] > 0
    assert eager["bytes"]["read"] > 0 and "latency_ms" not in eager
    assert eager["not_timed"] == pipeline.NOT_TIMED_YET
    assert "verdict" not in eager  # evidence only: nothing derived before it was saved
    assert cli.main(["render", str(record)]) == cli.EXIT_OK
    assert "not timed" in (run / "summary.md").read_text()

    rc = cli.main(
        _generate(
            out, "--model", "gated-residual", "--batch-size", "1", "--modes", "eager", "--debug"
        )
    )
    err = capsys.readouterr().err
    assert rc == cli.EXIT_INTERNAL
    assert "Traceback" in err and "in crash" in err


def test_interrupt_mid_run_leaves_nothing(tmp_path, capsys, monkeypatch):
    seen: list[Path] = []

    def interrupt(stage, *_args, **_kwargs):
        seen.extend((tmp_path / "out").rglob("*.pt.trace.json"))
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "time_stages", interrupt)
    out = tmp_path / "out"
    rc = cli.main(
        _generate(out, "--model", "gated-residual", "--batch-size", "1", "--modes", "eager")
    )
    assert rc == 130
    assert "interrupted" in capsys.readouterr().err
    assert seen and ".partial-" in str(seen[0])  # the run was writing into its staging folder
    assert list(out.iterdir()) == []


@pytest.mark.slow
def test_sigterm_mid_run_removes_the_staging_folder(models, tmp_path):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "profreport", "generate", "--model", f"{models}/m.py:slow"]
    cmd += ["--modes", "eager", "--out", str(out), "--device", "cpu", "--min-time", "60", "--quiet"]
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob(".*.partial-*/tensorboard/eager/*.pt.trace.json")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run never started writing"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err.endswith("error: interrupted; nothing half-written was kept\n")
    assert list(out.iterdir()) == []


def test_broken_model_writes_its_report_and_exits_1(models, tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli.main(_generate(out, "--model", f"{models}/m.py:broken", "--modes", "eager,trace"))
    err = capsys.readouterr().err
    assert rc == 1
    assert "error: eager failed: ValueError: shapes do not match\n" in err
    assert "the model does not run in eager mode" in err
    run = run_dir_in(out)
    record = json.loads((run / "run.json").read_text())
    assert [m["status"] for m in record["modes"].values()] == ["failed", "failed"]
    html = (run / "report.html").read_text()
    notice = "The model does not run in eager mode (ValueError: shapes do not match), so there"
    assert notice in html
    assert f"**{notice}" in (run / "summary.md").read_text()


@pytest.mark.slow
def test_a_failed_mode_is_a_warning_unless_strict(models, tmp_path, capsys):
    args = ["--model", f"{models}/m.py:unscriptable", "--modes", "eager,script"]
    assert cli.main(_generate(tmp_path / "a", *args)) == 0
    assert "warning: script failed: " in capsys.readouterr().err
    assert cli.main([*_generate(tmp_path / "b", *args), "--strict"]) == 1
    assert "error: script failed: " in capsys.readouterr().err
    run = run_dir_in(tmp_path / "b")
    record = json.loads((run / "run.json").read_text())
    assert record["modes"]["eager"]["status"] == "ok"  # written all the same
    assert "1 of 2 modes failed (script)" in (run / "report.html").read_text()


def test_torchscript_errors_name_the_models_own_exception(models, tmp_path):
    out = tmp_path / "out"
    cli.main(_generate(out, "--model", f"{models}/m.py:broken", "--modes", "eager,script"))
    record = json.loads((run_dir_in(out) / "run.json").read_text())
    assert record["modes"]["script"]["error"] == (
        f"ValueError: shapes do not match (in the TorchScript interpreter: {models}/m.py:16 in "
        "forward)"
    )


@pytest.mark.slow
def test_two_runs_in_the_same_second_get_two_folders(models, tmp_path, monkeypatch):
    class FrozenClock(datetime):
        @classmethod
        def now(cls, tz=None):
            return datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)

    monkeypatch.setattr(cli.generate, "datetime", FrozenClock)
    out = tmp_path / "out"
    args = _generate(out, "--model", f"{models}/m.py:tiny", "--modes", "eager")
    assert cli.main(args) == 0
    first = out / "m-tiny-cpu-20260102T030405Z"
    before = {p: p.read_bytes() for p in first.rglob("*") if p.is_file()}
    assert cli.main(args) == 0
    assert sorted(p.name for p in out.iterdir()) == [first.name, f"{first.name}-2"]
    assert {p: p.read_bytes() for p in first.rglob("*") if p.is_file()} == before


def test_staged_folder_publishes_beside_existing_ones(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("earlier")
    (tmp_path / "run-2").write_text("a file, not a folder")
    with files.RunFolder.staged(tmp_path, "run") as staged:
        (staged.path / "run.json").write_text("new")
        assert staged.path.name.startswith(".run.partial-")
        published = staged.publish()
    assert published == tmp_path / "run-3"
    assert (tmp_path / "run" / "run.json").read_text() == "earlier"
    assert (tmp_path / "run-2").read_text() == "a file, not a folder"
    assert (published / "run.json").read_text() == "new"
    assert oct(published.stat().st_mode & 0o777) == oct(0o777 & ~_umask())
    with pytest.raises(RuntimeError), files.RunFolder.staged(tmp_path, "other") as staged:
        (staged.path / "half.json").write_text("{")
        raise RuntimeError
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "run-2", "run-3"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_timing_names_the_mode_that_raised():
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] > 3:
            raise RuntimeError("CUDA out of memory")

    cfg = TimingConfig(min_time_s=0.001, max_time_s=1, block_s=0.0001, min_blocks=2, warmup_s=0)
    with pytest.raises(TimingFailed) as failed:
        measure_latency({"eager": lambda: None, "compile": flaky}, lambda: None, cfg)
    assert failed.value.mode == "compile"
    assert "CUDA out of memory" in str(failed.value)


def test_a_mode_failing_while_timed_is_recorded_and_the_rest_timed():
    def oom(_x):
        raise RuntimeError("out of memory\nwhile allocating")

    prepared = {
        "eager": PreparedMode("eager", lambda x: x + 1),
        "trace": PreparedMode("trace", oom),
    }
    modes = {"eager": OkMode(), "trace": OkMode()}
    options = pipeline.RunOptions(
        timing=TimingConfig(min_time_s=0.01, max_time_s=5, block_s=0.001, min_blocks=3)
    )
    stage = pipeline.TimingStage(modes, prepared, lambda: None, setup(options, (torch.ones(2),)))
    timed = pipeline.time_stages({"": stage}, pipeline.ON_ITS_OWN, print)
    stage.store(timed.stage(""), timed)
    trace = stage.modes["trace"]
    assert trace.status == "failed"
    assert trace.error == "RuntimeError: out of memory"
    assert trace.latency_ms is None and list(prepared) == ["eager"]
    eager = stage.modes["eager"].latency_ms
    assert eager is not None and eager.n is not None and eager.n >= 3


@pytest.mark.slow
def test_render_never_overwrites_another_folders_reports(gated_run, tmp_path, capsys):
    (tmp_path / "summary.md").write_text("someone else's summary\n")
    rc = cli.main(["render", str(gated_run), "--out", str(tmp_path)])
    _one_line_exit_2(rc, capsys.readouterr().err)
    assert (tmp_path / "summary.md").read_text() == "someone else's summary\n"
    assert not (tmp_path / "report.html").exists()
    # Its own folder's reports are derived from its run.json: re-rendering them loses nothing.
    before = (gated_run / "report.html").read_text()
    assert cli.main(["render", str(gated_run)]) == 0
    assert (gated_run / "report.html").read_text() == before


def test_model_and_error_text_cannot_drive_the_terminal(tmp_path, capsys):
    model = tmp_path / "[red]x.py"
    model.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        raise ValueError('\\x1b[2J[/bold] cleared')\n"
        "def build():\n"
        "    return M(), (torch.ones(2),)\n"
    )
    rc = cli.main(_generate(tmp_path / "out", "--model", f"{model}:build", "--modes", "eager"))
    captured = capsys.readouterr()
    assert rc == 1
    assert "\x1b" not in captured.out + captured.err
    assert "error: eager failed: ValueError: ?[2J[/bold] cleared\n" in captured.err
    # Shown as text, not taken as Rich markup (an unmatched "[/bold]" would raise MarkupError).
    assert "[red]x:build on cpu" in captured.out and "[/bold] cleared" in captured.out


def test_analyze_debug_shows_the_traceback_too(tmp_path, capsys):
    (tmp_path / "t.json").write_text('{"traceEvents": 3}')
    assert cli.main(["analyze", str(tmp_path / "t.json")]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert cli.main(["analyze", str(tmp_path / "t.json"), "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err
    assert err.splitlines()[-1].startswith("error: ")


def test_a_disk_that_fills_up_is_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    def full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", full)  # every atomic write ends in os.replace
    out = tmp_path / "out"
    rc = cli.main(
        _generate(out, "--model", "gated-residual", "--batch-size", "1", "--modes", "eager")
    )
    err = capsys.readouterr().err
    _one_line_exit_2(rc, err)
    named = re.fullmatch(
        r"error: cannot write (\S+): No space left on device; nothing was kept\n", err
    )
    assert named is not None  # a path in the run folder as it would have been named
    assert Path(named[1]).relative_to(out).parts[0].startswith("gated-residual-cpu-")
    assert list(out.iterdir()) == []


# `profreport` with one more mode, whose build segfaults the process (as export did on an H200)
SEGFAULTING = """
import ctypes
import sys

from profreport import cli, modes
from profreport.modes import Mode


class Segfault(Mode):
    name = "segfault"

    def build(self, module, inputs, sync):
        ctypes.string_at(0)  # reads address 0: SIGSEGV, no Python exception to catch


modes.register(Segfault(), summary="segfaults while it builds (test only)")
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_segfault_keeps_the_evidence_of_the_modes_that_finished(models, tmp_path):
    """A process killed by a signal runs no clean-up: the staging folder stays, and its run.json
    holds every mode that finished (saved as each did), which `profreport render` reads."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", SEGFAULTING, "generate", "--model", f"{models}/m.py:tiny"]
    cmd += ["--modes", "eager,trace,segfault", "--out", str(out), "--device", "cpu"]
    proc = subprocess.run(
        [*cmd, "--min-time", "0.05"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == -signal.SIGSEGV, proc.stderr
    (staged,) = out.iterdir()
    assert staged.name.startswith(".m-tiny-cpu-") and ".partial-" in staged.name
    record = staged / "run.json"
    assert f"profreport: evidence so far: {record} (kept if the process dies" in proc.stderr
    saved = json.loads(record.read_text())
    assert list(saved["modes"]) == ["eager", "trace"]  # segfault never finished
    for mode in saved["modes"].values():
        assert mode["status"] == "ok" and mode["kernels"]["per_step"] > 0
        assert mode["bytes"]["read"] > 0 and mode["not_timed"] == pipeline.NOT_TIMED_YET
        assert (staged / mode["trace"]).is_file()
    rendered = subprocess.run(
        [sys.executable, "-m", "profreport", "render", str(record)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rendered.returncode == 0, rendered.stderr
    summary = (staged / "summary.md").read_text()
    assert "- trace: " in summary and "not timed" in summary


def test_an_interrupted_command_exits_130_without_the_interpreters_teardown(monkeypatch):
    """After an interrupt the command leaves with os._exit(130): torch's teardown after a
    profiler stopped mid-trace crashed once (SIGSEGV, exit -11, after the cleanup line)."""
    import runpy

    import profreport
    from profreport import cli

    entry = str(Path(profreport.__file__).parent / "__main__.py")

    exits = []

    def leave(code):
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", leave)
    for code, left in ((130, [130]), (0, [])):
        monkeypatch.setattr(cli, "main", lambda code=code: code)
        with pytest.raises(SystemExit) as ended:
            runpy.run_path(entry, run_name="__main__")
        assert ended.value.code == code and exits == left
        exits.clear()
