"""Model names and paths longer than the file system allows: the run folder's name is shortened
(recognisable and unique), and a path too long to exist is "not found", not an internal error."""

import json
from datetime import datetime, timezone

import pytest

from profreport import cli
from profreport.files import run_folder_name as run_name
from tests.conftest import FAST, run_dir_in

MODEL = """
import torch

def build():
    return torch.nn.ReLU(), (torch.randn(4, 4),)
"""


def test_run_folder_names_stay_under_the_file_name_limit():
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    long_a, long_b = "m" * 230 + "a:build", "m" * 230 + "b:build"
    name_a, name_b = (run_name(n, "cuda", now) for n in (long_a, long_b))
    staging = f".{name_a}.partial-12345678-999"  # RunFolder's hidden name, and a -N suffix
    assert len(staging.encode()) <= 255
    assert name_a != name_b  # unique: a short hash of the whole name
    assert name_a.startswith("m" * 40) and name_a.endswith("-cuda-20260102T030405Z")
    assert run_name("simple", "cpu", now) == "simple-cpu-20260102T030405Z"  # unchanged


@pytest.mark.slow
def test_a_model_file_with_a_233_character_name_runs(tmp_path, capsys):
    model = tmp_path / ("m" * 230 + ".py")
    assert len(model.name) == 233
    model.write_text(MODEL)
    out = tmp_path / "out"
    rc = cli.main(["generate", "--out", str(out), *FAST, "--model", f"{model}:build"])
    err = capsys.readouterr().err
    assert rc == 0, err
    run = run_dir_in(out)
    assert run.name.startswith("m" * 40) and len(run.name) <= 200
    assert json.loads((run / "run.json").read_text())["model"]["name"] == "m" * 230 + ":build"


def test_a_6000_character_model_path_is_not_found(tmp_path, capsys):
    spec = "/".join(["d"] * 3000) + "/m.py:build"
    rc = cli.main(["generate", "--out", str(tmp_path / "out"), *FAST, "--model", spec])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("error: model file not found: d/d/d/") and err.count("\n") == 1
    assert len(err) < 400  # the path is shortened in the message
    assert not (tmp_path / "out").exists()
