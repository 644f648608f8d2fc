"""Run records whose fields have the wrong type are bad input (one line naming the field, exit
2) for render and compare, never an internal error; what the writers write stays valid."""

import copy
import json
from pathlib import Path

import pytest

from profreport import cli
from profreport.record import RecordError, validate
from tests.conftest import FAST, run_dir_in

MODEL = """
import torch

class Tiny(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1

def build():
    return Tiny(), (torch.randn(4, 4),)

class Broken(torch.nn.Module):
    def forward(self, x):
        raise ValueError("no")

def broken():
    return Broken(), (torch.randn(4, 4),)
"""


@pytest.fixture
def run(recorded_gated_run) -> Path:
    """A run (the checked-in gated-residual one: its records are edited by the tests)."""
    return recorded_gated_run


@pytest.fixture()
def record(run) -> dict:
    return json.loads((run / "run.json").read_text())


def _set(record: dict, path: str, value: object) -> None:
    *parents, last = path.split(".")
    node = record
    for key in parents:
        node = node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value


# ---------------------------------------------------------------- malformed run records

BAD_FIELDS = [
    ("modes.eager.kernels.per_step", "three", 'expected an integer, found "three"'),
    ("modes.script.latency_ms.median", "fast", 'expected a number, found "fast"'),
    ("modes.script.speedup_vs_eager.ci95", [1.0], "expected a list of two numbers, found a list"),
    ("modes.eager.bytes.read", None, "expected a number, found null"),
    ("modes.eager.bytes.written", KeyError, "missing (expected a number)"),
    ("modes.eager.kernels.table", {"a": 1}, "expected a list, found an object"),
    ("modes.eager.kernels", KeyError, "missing (expected an object)"),
    ("model.name", 7, "expected a string, found 7"),
    ("device.type", True, "expected a string, found true"),
    ("settings.timing.block_s", "20ms", 'expected a number, found "20ms"'),
    ("modes.eager.latency_ms.samples", [0.1, "x"], 'expected a number, found "x"'),
]


def _field_shown(path: str, message: str) -> str:
    if path.endswith("samples"):
        return f"{path}[1]: {message}"
    return f"{path}: {message}"


@pytest.mark.parametrize(("path", "value", "message"), BAD_FIELDS)
def test_render_of_a_record_with_a_wrong_field_is_one_line_exit_2(
    record, tmp_path, capsys, path, value, message
):
    _set(record, path, value)
    bad = tmp_path / "run.json"
    bad.write_text(json.dumps(record))
    rc = cli.main(["render", str(bad)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err == f"error: {bad}: {_field_shown(path, message)}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]  # nothing written


@pytest.mark.parametrize(("path", "value", "message"), BAD_FIELDS[:2])
def test_compare_of_a_record_with_a_wrong_field_is_one_line_exit_2(
    record, tmp_path, capsys, path, value, message
):
    good = tmp_path / "base.json"
    good.write_text(json.dumps(record))
    _set(record, path, value)
    bad = tmp_path / "head.json"
    bad.write_text(json.dumps(record))
    rc = cli.main(["compare", str(good), str(bad)])
    captured = capsys.readouterr()
    assert rc == 2, captured.err
    assert captured.err == f"error: {bad}: {path}: {message}\n"
    assert captured.out == ""


def test_what_the_writers_write_is_valid(record, tmp_path, capsys):
    """Optional fields the writers leave out or null stay accepted: a failed mode (error and
    traceback, no kernels), a mode not timed (no latency), no speedup, no compiler output."""
    validate(copy.deepcopy(record))
    failed = copy.deepcopy(record)
    failed["modes"]["script"] = {
        "status": "failed",
        "error": "RuntimeError: cannot script this",
        "compile_s": None,
        "traceback": "Traceback ...",
        "verdict": "script: failed - RuntimeError: cannot script this",
    }
    for key in ("latency_ms", "speedup_vs_eager", "fusion", "compiler", "trace"):
        failed["modes"]["eager"].pop(key, None)
    failed["modes"]["eager"]["bytes"]["measured"] = None
    failed["modes"]["eager"]["kernels"]["table"][0]["time_us_per_step"] = None
    validate(failed)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(failed))
    assert cli.main(["render", str(path), "--out", str(tmp_path / "r")]) == 0, capsys.readouterr()


@pytest.mark.slow
def test_a_real_failed_mode_record_validates(tmp_path, capsys):
    model = tmp_path / "m.py"
    model.write_text(MODEL)
    out = tmp_path / "out"
    assert cli.main(["generate", "--out", str(out), *FAST, "--model", f"{model}:broken"]) == 1
    capsys.readouterr()
    assert cli.main(["render", str(run_dir_in(out))]) == 0


def test_validate_names_a_mode_without_a_valid_status(record):
    record["modes"]["eager"]["status"] = "fine"
    with pytest.raises(RecordError, match=r"modes\.eager\.status: expected one of ok, failed"):
        validate(record)


def test_render_of_a_file_that_is_not_utf8_is_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "run.json"
    bad.write_bytes(b"\xff\xfe{")
    rc = cli.main(["render", str(bad)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err == f"error: {bad} is not UTF-8 text (invalid start byte at byte 0)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]
