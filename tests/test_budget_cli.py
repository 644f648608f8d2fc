"""`profreport generate --expect FILE` / `--update-expect FILE` through the command line's edge,
without profiling: the pipeline hands back the recorded relu_block run, then (the model
"changed") the gelu_norm_block run (tests/data/kernel_diff; see tests/test_budget.py). The real
runs are in the slow tier (tests/test_budget_e2e.py). Also: the pipeline's switch that skips the
latency timing, and the pytest plugin's registration."""

import copy
import io
import subprocess
import sys
from pathlib import Path

import pytest

from profreport import cli, pipeline
from profreport.pytest_plugin import snapshot_path
from profreport.record import load
from profreport.runner import run_options
from tests.conftest import FAST, evidence_of, replay_collection, run_dir_in, setup

DATA = Path(__file__).parent / "data" / "kernel_diff"
ROOT = Path(__file__).parent.parent


@pytest.fixture
def recorded_runs(monkeypatch):
    """The pipeline replaced: each call hands back the next of the runs in `queue` (by name)."""
    queue: list[str] = []

    def collected(_setup):
        return evidence_of(copy.deepcopy(load(DATA / queue.pop(0))))  # findings derived after

    replay_collection(monkeypatch, collected)
    return queue


def _generate(out, *args):
    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["generate", "--model", "simple", "--modes", "eager,compile", "--out", str(out)]
    code = cli.main([*argv, *FAST, *args], out=stdout, err=stderr)
    return code, stdout.getvalue(), stderr.getvalue()


def test_update_then_expect_passes_and_a_changed_model_fails_naming_kernels(
    recorded_runs, tmp_path
):
    budget = tmp_path / "budgets" / "block.json"
    recorded_runs += ["relu_block", "relu_block", "gelu_norm_block"]
    code, out, err = _generate(tmp_path / "a", "--update-expect", str(budget))
    assert (code, err) == (0, "")
    assert f"expectation: wrote {budget} (cpu: eager, compile)" in out
    assert '"cpp_fused_relu": {"calls_per_step": 1}' in budget.read_text()
    before = budget.read_text()

    code, out, err = _generate(tmp_path / "b", "--expect", str(budget))
    assert (code, err) == (0, "")
    assert out.startswith(
        f"kernel budget {budget} (cpu): within budget: 2 modes within budget · 0 over · "
        "0 new kernels · 0 gone kernels\n"
    )
    assert (
        (run_dir_in(tmp_path / "b") / "summary.md")
        .read_text()
        .startswith("**✅ Kernel budget: within budget**")
    )

    code, out, err = _generate(tmp_path / "c", "--expect", str(budget))
    assert code == 1
    assert err == f"error: over the kernel budget in {budget}: 10 breaches (listed above)\n"
    lines = out.splitlines()
    assert lines[0].startswith(f"kernel budget {budget} (cpu): OVER BUDGET: 0 modes within")
    assert (
        "  over budget: compile: kernel cpp_fused_gelu (calls / step, profiler): — → 1 "
        "(new; allowed exact)"
    ) in lines
    assert (
        "  over budget: eager: kernel aten::relu (calls / step, profiler): 1 → — "
        "(gone; allowed exact)"
    ) in lines
    # the outcome first, then the usual headline
    assert out.index("over budget:") < out.index("gelu_norm_block:build on cpu")
    run = run_dir_in(tmp_path / "c")
    summary = (run / "summary.md").read_text()
    assert summary.startswith("**❌ Kernel budget: OVER BUDGET**")
    assert "cpp_fused_native_layer_norm" in summary.split("### profreport")[0]
    page = (run / "report.html").read_text()
    assert page.index('id="budget"') < page.index('id="headline"')
    assert budget.read_text() == before  # --expect never writes the file


def test_update_refreshes_the_file_and_keeps_what_a_person_set(recorded_runs, tmp_path):
    budget = tmp_path / "block.json"
    recorded_runs += ["relu_block", "gelu_norm_block"]
    assert _generate(tmp_path / "a", "--update-expect", str(budget))[0] == 0
    text = budget.read_text().replace(
        '"status": "ok",', '"status": "ok",\n          "min_speedup": 0.5,', 1
    )
    budget.write_text(text)
    code, out, _err = _generate(tmp_path / "b", "--update-expect", str(budget))
    assert code == 0 and "expectation: wrote" in out and "kernel budget" not in out
    refreshed = budget.read_text()
    assert '"min_speedup": 0.5' in refreshed and '"cpp_fused_gelu"' in refreshed
    assert '"cpp_fused_relu"' not in refreshed


def test_a_missing_file_is_bad_input_saying_how_to_create_it(recorded_runs, tmp_path):
    code, out, err = _generate(tmp_path / "out", "--expect", str(tmp_path / "none.json"))
    assert (code, out) == (2, "")
    assert err == (
        f"error: no expectation file {tmp_path / 'none.json'}: create it by running the same "
        f"command with --update-expect {tmp_path / 'none.json'} instead of --expect, then "
        "commit it\n"
    )
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written


@pytest.mark.parametrize("flag", ["--expect", "--update-expect"])
def test_a_malformed_file_is_bad_input_with_its_position(recorded_runs, tmp_path, flag):
    budget = tmp_path / "block.json"
    budget.write_text('{\n  "schema": "profreport.expect/1",\n  "devices": {"cpu": 3}\n}\n')
    code, out, err = _generate(tmp_path / "out", flag, str(budget))
    assert (code, out) == (2, "")
    assert err == f"error: {budget}:3: devices.cpu: expected an object, found 3\n"
    assert budget.read_text().endswith('{"cpu": 3}\n}\n')  # a person's file is never overwritten
    budget.write_text('{"schema": "profreport.expect/1",, }')
    code, _out, err = _generate(tmp_path / "out", flag, str(budget))
    assert (
        code == 2
        and err
        == f"error: {budget}:1:34: not valid JSON (Expecting property name enclosed in double quotes)\n"
    )


def test_expect_and_update_expect_exclude_each_other(tmp_path):
    code, _out, err = _generate(tmp_path, "--expect", "a.json", "--update-expect", "a.json")
    assert code == 2 and "not allowed with argument" in err and len(err.splitlines()) == 1


# ---------------------------------------------------------------- timing skipped


def test_a_run_without_latency_timing_never_times_and_says_why(monkeypatch):
    def never(*_args, **_kwargs):
        raise AssertionError("timed")

    monkeypatch.setattr(pipeline, "measure_latency", never)
    modes = {"eager": pipeline.OkMode(), "compile": pipeline.OkMode()}
    options = run_options(["eager", "compile"], time_latency=False)
    stage = pipeline.TimingStage(dict(modes), dict.fromkeys(modes), lambda: None, setup(options))
    timed = pipeline.time_stages({"": stage}, pipeline.ON_ITS_OWN, print)
    assert {m.not_timed for m in stage.modes.values()} == {pipeline.NOT_TIMED}
    assert timed.reference is None and not timed.processes
    assert run_options(["eager"]).time_latency  # timed unless asked


# ---------------------------------------------------------------- the pytest plugin


def test_the_fixture_is_registered_through_the_pytest11_entry_point():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"profreport": "profreport.pytest_plugin"}
    # loaded into every pytest session where profreport is installed: it must stay light
    code = (
        "import sys, profreport.pytest_plugin; print(sorted({'torch', 'numpy'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_snapshots_lie_beside_the_test_file_named_after_the_test():
    test_file = Path("/repo/tests/test_block.py")
    assert snapshot_path(test_file, "test_block") == Path(
        "/repo/tests/__profreport__/test_block.json"
    )
    assert snapshot_path(test_file, "test_block[cuda-bf16]") == Path(
        "/repo/tests/__profreport__/test_block_cuda-bf16.json"
    )
    assert snapshot_path(test_file, "test_block", "budgets/b.json") == Path(
        "/repo/tests/budgets/b.json"
    )
