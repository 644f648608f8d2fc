"""Interrupts and exits: Ctrl-C or SIGTERM in any phase of `generate` is exit 130 with nothing
published; `sys.exit()` inside a model is that model failing, not the tool ending.

Signals are sent when the run reaches a point it announces (a marker file the model writes, or
a patched phase), never after a fixed sleep, so the tests hold on a busy machine."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from profreport import api, cli, interrupts, pipeline
from profreport.capture import timing
from profreport.cli import listing
from profreport.render import html as html_render
from tests.conftest import FAST, run_dir_in

REPO = Path(__file__).resolve().parent.parent

MODEL_FILE = """
import os
import sys
import time
import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

MARK = os.environ.get("PROFREPORT_TEST_MARK", "")
BLOCK_IN = os.environ.get("PROFREPORT_TEST_BLOCK_IN", "")
seen = {"profiled": False, "calls": 0}


def _block(phase):
    if phase == BLOCK_IN:
        with open(MARK, "w") as f:
            f.write(phase)
        while True:  # until a signal ends it
            time.sleep(0.02)


class Blocks(torch.nn.Module):
    def forward(self, x):
        if torch.autograd.profiler._is_profiler_enabled:
            seen["profiled"] = True
            _block("profiling")
        elif _get_current_dispatch_mode() is not None:
            _block("bytes")
        elif seen["profiled"]:
            _block("timing")
        return x + 1


class ExitsInForward(torch.nn.Module):
    def forward(self, x):
        sys.exit(3)


class ExitsLater(torch.nn.Module):
    def forward(self, x):
        seen["calls"] += 1
        if seen["calls"] > 300:  # past building, both profiling passes (the light one twice, if
            # the machine was busy) and bytes: while being timed
            sys.exit(4)
        return x + 1


def blocks():
    return Blocks(), (torch.randn(4, 4),)


def hangs():
    _block("loading")
    return Blocks(), (torch.randn(4, 4),)


def exits_in_forward():
    return ExitsInForward(), (torch.randn(4, 4),)


def exits_later():
    return ExitsLater(), (torch.randn(4, 4),)
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("models")
    (folder / "m.py").write_text(MODEL_FILE)
    return folder


def _generate(out: Path, *args: str) -> list[str]:
    return ["generate", "--out", str(out), *FAST, *args]


# ---------------------------------------------------------------- real signals, real process


@pytest.mark.slow
@pytest.mark.parametrize(
    ("factory", "phase", "sig"),
    [
        ("hangs", "loading", signal.SIGTERM),  # before any run folder exists
        ("blocks", "profiling", signal.SIGTERM),
        ("blocks", "timing", signal.SIGINT),
    ],
)
def test_a_signal_in_any_phase_is_exit_130_and_publishes_nothing(
    models, tmp_path, factory, phase, sig
):
    out, mark = tmp_path / "out", tmp_path / "mark"
    cmd = [sys.executable, "-m", "profreport", "generate", "--model", f"{models}/m.py:{factory}"]
    cmd += ["--modes", "eager", "--out", str(out), *FAST, "--min-time", "60"]
    env = dict(os.environ, PROFREPORT_TEST_MARK=str(mark), PROFREPORT_TEST_BLOCK_IN=phase)
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not (mark.exists() and mark.read_text() == phase):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"the run never reached {phase}"
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert err.endswith("error: interrupted; nothing half-written was kept\n"), err
    assert not out.exists() or list(out.iterdir()) == []


# ---------------------------------------------------------------- in process, every phase


def _raise_sigterm_inside(monkeypatch, owner, attr: str, disguise: bool) -> None:
    """Deliver a real SIGTERM when `owner.attr` is called; with `disguise`, the way a library
    does it that turns the KeyboardInterrupt into an ordinary exception."""
    original = getattr(owner, attr)

    def wrapper(*args, **kwargs):
        if not disguise:
            signal.raise_signal(signal.SIGTERM)
            return original(*args, **kwargs)
        try:
            signal.raise_signal(signal.SIGTERM)
            time.sleep(5)  # the handler raises before this ends
        except KeyboardInterrupt as exc:
            raise RuntimeError("the library caught the interrupt") from exc
        raise AssertionError("no signal arrived")

    monkeypatch.setattr(owner, attr, wrapper)


def test_interrupt_while_the_profiler_starts_is_not_a_model_failure(tmp_path, capsys, monkeypatch):
    """The issue's case: the signal lands in torch.profiler's start-up, whose `__exit__` then
    fails with `AssertionError: Profiler must be initialized before starting trace`."""
    original = torch.profiler.profile.prepare_trace
    calls = []

    def prepare_then_interrupt(self, *args, **kwargs):
        calls.append(1)
        signal.raise_signal(signal.SIGTERM)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.profiler.profile, "prepare_trace", prepare_then_interrupt)
    out = tmp_path / "out"
    rc = cli.main(
        _generate(out, "--model", "gated-residual", "--batch-size", "1", "--modes", "eager")
    )
    err = capsys.readouterr().err
    assert calls, "the profiler never prepared"
    assert rc == 130, err
    assert "failed" not in err and "does not run in eager mode" not in err
    assert err.endswith("error: interrupted; nothing half-written was kept\n")
    assert list(out.iterdir()) == []


PHASES = {
    "building": (pipeline, "prepare_mode"),
    "profiling": (pipeline, "profile_mode"),
    "bytes": (pipeline, "estimate"),  # the bytes model, inside the bytes phase
    "timing": (timing, "_time_block"),
    "rendering": (html_render, "render"),  # what RunResult.save renders report.html with
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("phase", "disguise"),
    [(phase, False) for phase in PHASES] + [(p, True) for p in PHASES if p != "rendering"],
)
def test_sigterm_in_each_phase_is_exit_130(tmp_path, capsys, monkeypatch, phase, disguise):
    """Plain: the KeyboardInterrupt unwinds. Disguised: a library turned it into an exception,
    which the run must not record as the mode failing."""
    owner, attr = PHASES[phase]
    _raise_sigterm_inside(monkeypatch, owner, attr, disguise)
    out = tmp_path / "out"
    args = ["--model", "gated-residual", "--batch-size", "1", "--modes", "eager,script"]
    rc = cli.main(_generate(out, *args))
    err = capsys.readouterr().err
    assert rc == 130, err
    assert err.endswith("error: interrupted; nothing half-written was kept\n"), err
    assert list(out.iterdir()) == []


def test_signal_handlers_are_restored_after_main(tmp_path, capsys):
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    cli.main(["models"])
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


def test_an_interrupt_seen_only_in_the_exception_chain_counts():
    start = interrupts.mark()
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("wrapped") from None
    except RuntimeError as exc:
        with pytest.raises(KeyboardInterrupt):
            interrupts.reraise_if_interrupted(exc, start)
    interrupts.reraise_if_interrupted(ValueError("a real failure"), start)  # no interrupt


# ---------------------------------------------------------------- sys.exit() in the model


def test_sys_exit_in_forward_is_the_model_failing(models, tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli.main(_generate(out, "--model", f"{models}/m.py:exits_in_forward", "--modes", "eager"))
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "error: eager failed: SystemExit: 3\n" in err
    record = json.loads((run_dir_in(out) / "run.json").read_text())
    assert record["modes"]["eager"]["status"] == "failed"
    assert record["modes"]["eager"]["error"] == "SystemExit: 3"


def test_sys_exit_while_timed_is_recorded_for_that_mode(models, tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli.main(_generate(out, "--model", f"{models}/m.py:exits_later", "--modes", "eager"))
    err = capsys.readouterr().err
    assert rc == 1, err
    record = json.loads((run_dir_in(out) / "run.json").read_text())
    eager = record["modes"]["eager"]
    assert (eager["status"], eager["error"]) == ("failed", "SystemExit: 4")
    assert "capture/timing.py" in eager["traceback"]  # it failed while being timed


def test_timing_blames_a_mode_that_calls_sys_exit():
    def exits():
        sys.exit(5)

    with pytest.raises(timing.TimingFailed) as info:
        timing.measure_latency({"a": lambda: None, "b": exits}, lambda: None)
    assert info.value.mode == "b" and isinstance(info.value.error, SystemExit)


def test_library_profile_reports_sys_exit_as_a_model_error():
    class Exits(torch.nn.Module):
        def forward(self, x):
            sys.exit(2)

    with pytest.raises(api.ModelRunError, match="SystemExit: 2"):
        api.profile(Exits(), torch.randn(2, 2), modes=("eager",), device="cpu")


def test_the_handlers_are_in_place_before_the_command_starts(monkeypatch):
    """Before arguments are parsed, torch is imported or the model loads."""
    seen = []

    def dispatch(*_args):
        seen.append((signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)))
        return 0

    monkeypatch.setattr(listing, "run_models", dispatch)
    assert cli.main(["models"]) == 0
    assert seen == [(interrupts._interrupt, interrupts._interrupt)]


def test_library_ctrl_c_in_the_profiler_start_is_not_a_model_failure(monkeypatch):
    """profreport.profile installs no handler (a notebook keeps its own); the KeyboardInterrupt
    behind torch.profiler's AssertionError still ends the run."""

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(torch.profiler.profile, "prepare_trace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        api.profile(
            torch.nn.ReLU(), torch.randn(4, 4), modes=("eager",), device="cpu", min_time_s=0.05
        )
