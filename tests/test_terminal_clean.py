"""Nothing but profreport's own lines reaches the terminal, from the moment the model is built:
what a model file prints, warns or logs through transformers while it builds goes to run.log."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from profreport.cli.common import UsageError
from profreport.files import RUN_LOG as LOG_NAME
from profreport.runner import Terminal, library_output

MODEL_FILE = """
import sys
import warnings

import torch
import transformers
from torch import nn


def build():
    print("MODEL-PRINT while building")
    print("MODEL-STDERR while building", file=sys.stderr)
    warnings.warn("MODEL-WARNING while building")
    # transformers' own logger: an end-of-sequence id outside a 1,000-token vocabulary
    transformers.Phi3Config(vocab_size=1000, pad_token_id=None, eos_token_id=32000)
    return nn.Linear(8, 8), (torch.randn(2, 8),)
"""

MODEL_LINES = (
    "MODEL-PRINT while building",
    "MODEL-STDERR while building",
    "MODEL-WARNING while building",
    "eos_token_id must be `None` or an integer within the vocabulary",
)


@pytest.mark.slow  # a real `generate` in a child process
def test_output_while_the_model_is_built_goes_to_the_run_log(tmp_path):
    pytest.importorskip("transformers")
    model = tmp_path / "noisy.py"
    model.write_text(MODEL_FILE)
    out = tmp_path / "reports"
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONWARNINGS="default")
    command = [sys.executable, "-m", "profreport", "generate", "--model", f"{model}:build"]
    command += ["--modes", "eager", "--device", "cpu", "--min-time", "0.05", "--out", str(out)]
    proc = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    terminal = proc.stdout + proc.stderr
    for line in MODEL_LINES:
        assert line not in terminal
    # stderr holds profreport's progress lines and nothing else
    assert proc.stderr.strip()
    assert all(ln.startswith("profreport: ") for ln in proc.stderr.splitlines()), proc.stderr
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    assert run.name.startswith("noisy-build-cpu-")  # named after the model, once it was built
    log = (run / LOG_NAME).read_text()
    for line in MODEL_LINES:
        assert line in log


def test_what_the_build_prints_is_kept_for_the_run_log(tmp_path, capfd):
    err = open(os.devnull, "w")  # noqa: SIM115 - not the process's stderr: left as it is
    debug_results = []

    def build():
        os.write(1, b"fd 1 while building\n")
        os.write(2, b"fd 2 while building\n")  # C++ code and child processes write to the fds
        return "the model"

    try:
        model, log = Terminal(err).built(build)
        with library_output(tmp_path / LOG_NAME, err, False, log):
            os.write(1, b"fd 1 while running\n")
        debug_results.append(Terminal(err, debug=True).built(lambda: 1))
    finally:
        err.close()
    assert model == "the model"
    assert log == "fd 1 while building\nfd 2 while building\n"
    captured = capfd.readouterr()
    assert "while building" not in captured.out + captured.err
    assert (tmp_path / LOG_NAME).read_text() == log + "fd 1 while running\n"
    assert debug_results == [(1, "")]  # --debug: nothing redirected, nothing logged


def test_a_build_that_fails_leaves_no_log(tmp_path):
    err = open(os.devnull, "w")  # noqa: SIM115
    before = set(Path(tempfile.gettempdir()).glob("profreport-build-*"))

    def build():
        os.write(1, b"about to fail\n")
        raise UsageError("no such model")

    try:
        with pytest.raises(UsageError, match="no such model"):
            Terminal(err).built(build)
    finally:
        err.close()
    assert set(Path(tempfile.gettempdir()).glob("profreport-build-*")) == before
