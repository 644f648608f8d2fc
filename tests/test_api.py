"""The library API: profreport.profile() on a module, the RunResult's tables, reports and save()."""

import json
import subprocess
import sys

import pandas as pd
import pytest
import torch
from torch import nn

import profreport
from profreport.files import TIMELINE_NAME
from profreport.record import load
from profreport.render.tables import KERNEL_COLUMNS


class Gate(nn.Module):
    """Pointwise gate: three eager kernels."""

    def forward(self, x, g):
        return torch.sigmoid(g) * torch.tanh(x)


@pytest.fixture(scope="module")
def result():
    model = Gate().train()
    inputs = (torch.randn(4, 64), torch.randn(4, 64))
    res = profreport.profile(model, inputs, modes=("eager", "trace"), device="cpu", min_time_s=0.05)
    assert model.training  # the caller's training flag is restored
    return res


@pytest.mark.slow
def test_profile_returns_the_record_of_the_modes_asked(result):
    rec = result.record
    assert list(rec["modes"]) == ["eager", "trace"]
    assert {m["status"] for m in rec["modes"].values()} == {"ok"}
    assert rec["model"]["name"] == "Gate"
    assert rec["model"]["description"] == "Pointwise gate: three eager kernels."
    assert rec["model"]["inputs"] == [{"shape": [4, 64], "dtype": "float32"}] * 2
    assert rec["modes"]["eager"]["kernels"]["per_step"] == 3  # sigmoid, tanh, mul
    assert rec["settings"]["profile_schedule"]["active"] == 3
    assert result.owns_run_dir and (result.run_dir / "tensorboard" / "eager").is_dir()


@pytest.mark.slow
def test_kernel_tables_are_dataframes_of_the_record(result):
    eager = result.kernels("eager")
    assert isinstance(eager, pd.DataFrame)
    assert set(eager["name"]) == {"aten::sigmoid", "aten::tanh", "aten::mul"}
    assert list(eager["calls_per_step"]) == [1.0, 1.0, 1.0]
    table = result.kernel_table()
    assert list(table.columns[:2]) == ["mode", "name"]
    assert sorted(table["mode"].unique()) == ["eager", "trace"]
    assert len(table) == len(eager) + len(result.kernels("trace"))
    summary = result.summary()
    assert list(summary["kernels_per_step"]) == [3, 3]
    with pytest.raises(KeyError, match="compile"):
        result.kernels("compile")


@pytest.mark.slow
def test_reports_and_notebook_view(result):
    assert result.to_markdown().startswith("### profreport: Gate on ")
    page = result.to_html()
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 5
    view = result._repr_html_()
    assert "<table" in view and "<html" not in view  # a fragment, not a whole page
    assert "eager: baseline" in view


@pytest.mark.slow
def test_save_moves_traces_and_writes_every_output(result, tmp_path):
    old_dir = result.run_dir
    before = result.run
    assert before.timeline is None
    folder = result.save(tmp_path / "run")
    assert folder == tmp_path / "run" and result.run_dir == folder
    assert not old_dir.exists()  # the temporary folder was emptied and removed
    rec = load(folder)
    assert rec == json.loads(json.dumps(result.record))
    # save added the timeline to the record, and the run its reports read has it too
    assert result.record["timeline"] == result.run.timeline == TIMELINE_NAME
    assert rec == result.run.to_json()
    assert f'<a href="{TIMELINE_NAME}">' in (folder / "report.html").read_text()
    for mode in ("eager", "trace"):
        assert (folder / rec["modes"][mode]["trace"]).is_file()
        csv = pd.read_csv(folder / f"kernels_{mode}.csv")
        assert list(csv["name"]) == [r["name"] for r in rec["modes"][mode]["kernels"]["table"]]
    assert (folder / "summary.md").read_text() == result.to_markdown()
    assert (folder / "report.html").is_file()
    assert len(list((folder / "tensorboard" / "summary").glob("events.out.tfevents.*"))) == 1
    # Saving again in place rewrites the summary, it does not pile up event files.
    result.save()
    assert len(list((folder / "tensorboard" / "summary").glob("events.out.tfevents.*"))) == 1
    with pytest.raises(FileExistsError, match="already holds a run record"):
        profreport.RunResult(result.run, tmp_path / "elsewhere").save(folder)


def test_bad_arguments_raise_before_any_work(tmp_path):
    x = torch.randn(2, 2)
    with pytest.raises(TypeError, match=r"nn\.Module"):
        profreport.profile(lambda t: t, (x,))
    with pytest.raises(TypeError, match="tuple of tensors"):
        profreport.profile(nn.ReLU(), ([1, 2],))
    with pytest.raises(ValueError, match="unknown mode"):
        profreport.profile(nn.ReLU(), x, modes=("eager", "jit"))
    with pytest.raises(ValueError, match="unsupported dtype"):
        profreport.profile(nn.ReLU(), x, dtype=torch.float64)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("")
    with pytest.raises(FileExistsError, match="not empty"):
        profreport.profile(nn.ReLU(), x, run_dir=busy)
    with pytest.raises(TypeError, match="unexpected keyword"):
        profreport.profile(nn.ReLU(), x, no_such_option=1)


def test_a_model_that_does_not_run_is_one_clear_error(tmp_path):
    with pytest.raises(profreport.api.ModelRunError, match="does not run in eager mode on cpu"):
        profreport.profile(nn.Linear(3, 3), torch.randn(2, 5), run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()  # no folder for a run that never started


def test_import_profreport_stays_light():
    code = "import sys, profreport; print('torch' in sys.modules, callable(profreport.profile))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"]


@pytest.mark.slow
def test_cli_generate_saves_through_the_api(gated_run):
    rec = load(gated_run)
    for mode, entry in rec["modes"].items():
        csv = pd.read_csv(gated_run / f"kernels_{mode}.csv")
        assert list(csv.columns) == KERNEL_COLUMNS
        assert csv["calls_per_step"].tolist() == [
            r["calls_per_step"] for r in entry["kernels"]["table"]
        ]
    (event_file,) = (gated_run / "tensorboard" / "summary").glob("events.out.tfevents.*")
    assert event_file.stat().st_size > 0
