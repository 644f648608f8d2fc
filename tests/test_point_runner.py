"""One generate below the CLI (profreport.runner) and how a sweep learns how each point ended: a
result file (local executor) or the result as data (Ray task), never generate's terminal text.
No point here profiles a model: they end before (bad input) or are handed a result."""

import io
import json
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from profreport import exits
from profreport.record.model import Run
from profreport.runner import (
    EAGER_BROKEN,
    Generated,
    GenerateRequest,
    GenerateResult,
    ResultError,
    run_point,
)
from profreport.sweep import local, point, ray_executor
from profreport.sweep.grid import GridError, Point, checked_spec

RUN_JSON = {"schema": "profreport.run/1"}


def test_a_request_round_trips_through_json_and_refuses_unknown_fields(tmp_path):
    request = GenerateRequest(model="hf:gpt2", modes=("eager", "compile"), out=tmp_path, seq_len=64)
    data = json.loads(json.dumps(request.to_json()))
    assert data["modes"] == ["eager", "compile"] and data["out"] == str(tmp_path)
    assert GenerateRequest.parse(data, closed=True) == request
    simple = {"schema": "profreport.generate-request/1", "model": "simple"}
    assert GenerateRequest.parse(simple).modes is None  # the default modes
    with pytest.raises(ValueError, match="unknown field 'batch'"):
        GenerateRequest.parse({**simple, "batch": 8}, closed=True)
    with pytest.raises(ValueError, match="is not a profreport generate request"):
        GenerateRequest.parse({"model": "simple"})


def test_a_result_round_trips_and_a_wrong_one_is_one_line(tmp_path):
    result = GenerateResult.made(0, tmp_path / "run-1")
    data = json.loads(json.dumps(result.to_json()))
    assert data == {
        "schema": "profreport.generate-result/1",
        "status": "ok",
        "exit_code": 0,
        "run_dir": str(tmp_path / "run-1"),
        "record": str(tmp_path / "run-1" / "run.json"),
        "error": None,
    }
    assert GenerateResult.parse(data) == result
    with pytest.raises(ResultError, match="not a profreport generate result"):
        GenerateResult.parse([data])
    with pytest.raises(ResultError, match="status 'ok' for exit 130"):
        GenerateResult.parse({**data, "exit_code": 130})
    with pytest.raises(ResultError, match="exit_code: expected an integer"):
        GenerateResult.parse({**data, "exit_code": "0"})
    with pytest.raises(ResultError, match="run_dir: missing"):
        GenerateResult.parse({k: v for k, v in data.items() if k != "run_dir"})


@pytest.mark.parametrize(
    ("exc", "code", "status", "error"),
    [
        (exits.UsageError("unknown model 'x'"), 2, "failed", "unknown model 'x'"),
        (KeyboardInterrupt(), 130, "interrupted", exits.INTERRUPTED_LINE),
        (RuntimeError("boom\nmore"), 3, "failed", "internal error: RuntimeError: boom"),
    ],
)
def test_how_a_run_ended_is_one_exit_code_table(exc, code, status, error):
    result = GenerateResult.ended_by(exc)
    assert (result.exit_code, result.status, result.error, result.run_dir) == (
        code,
        status,
        error,
        None,
    )


def test_the_cli_and_the_sweep_share_the_exit_codes():
    from profreport import cli
    from profreport.cli import sweep as cli_sweep

    assert (cli.EXIT_INTERRUPTED, cli.EXIT_BAD_INPUT) == (exits.EXIT_INTERRUPTED, 2)
    assert cli_sweep.EXIT_INTERRUPTED is exits.EXIT_INTERRUPTED
    assert [exits.status_of(c) for c in (0, 1, 2, 3, 130, -9)] == [
        "ok", "failed", "failed", "failed", "interrupted", "failed",
    ]  # fmt: skip


def _run_with(statuses: dict[str, str]) -> Run:
    modes = {
        name: {"status": status, **({} if status == "ok" else {"error": f"{name} broke"})}
        for name, status in statuses.items()
    }
    return Run.from_json({**RUN_JSON, "modes": modes})


def _ending(states: dict[str, str], strict: bool = False) -> Generated:
    return Generated.of(Path("run"), _run_with(states), strict)


def test_mode_failures_set_the_exit_code_as_generate_documents():
    done = _ending({"eager": "ok", "compile": "failed"})
    assert done.exit_code == 0 and [(f.line, f.fatal) for f in done.failures] == [
        ("compile failed: compile broke", False)
    ]
    done = _ending({"eager": "ok", "compile": "failed"}, strict=True)
    assert done.exit_code == 1 and done.failures[0].fatal
    done = _ending({"eager": "failed", "compile": "ok"})
    assert done.exit_code == 1 and done.failures[0].fatal
    assert _ending({"script": "failed", "compile": "failed"}).exit_code == 1  # none ran at all


def test_a_generate_that_failed_says_why_in_one_line(tmp_path):
    generated = Generated.of(tmp_path, _run_with({"eager": "failed", "compile": "failed"}), False)
    assert generated.error == f"eager failed: eager broke; {EAGER_BROKEN}"
    result = GenerateResult.made(generated.exit_code, generated.run_dir, generated.error)
    assert (result.exit_code, result.status, result.run_dir) == (1, "failed", tmp_path)


def test_run_point_turns_bad_input_into_a_result_and_writes_nothing(tmp_path):
    err = io.StringIO()
    result = run_point(GenerateRequest(model="no-such-model", device="cpu", out=tmp_path), err)
    assert (result.exit_code, result.status, result.run_dir) == (2, "failed", None)
    assert "no-such-model" in result.error
    assert list(tmp_path.iterdir()) == []


def test_a_point_spec_becomes_a_request():
    spec = checked_spec(
        {"models": ["simple"], "batch_sizes": [4], "min_time_s": 0.5, "threads": 2}, "t"
    )
    request = spec.request(Point.at("simple", 4, None, "float32"), Path("p"))
    assert (request.model, request.batch_size, request.min_time_s) == ("simple", 4, 0.5)
    assert (request.max_time_s, request.threads, request.out) == (60.0, 2, Path("p"))
    for flags in (["--strict"], []):  # never taken (a sweep/1 record's empty list: Sweep.upgraded)
        with pytest.raises(GridError, match="unknown field 'generate_flags'"):
            checked_spec({"models": ["simple"], "generate_flags": flags}, "t")


POINT = Point.at("m", None, None, "float32")


def test_the_outcome_comes_from_the_result_never_from_output(tmp_path):
    run = tmp_path / "points" / POINT.id / "m-cpu-20260101T000000Z"
    run.mkdir(parents=True)
    (run / "run.json").write_text("{}")
    # The result names the folder where its process wrote it; the executor looks it up by name.
    result = GenerateResult.made(1, Path("/elsewhere/m-cpu-20260101T000000Z"), "eager failed")
    ended = local.ended(POINT, result, 1, tmp_path, worker="w")
    assert (ended.status, ended.error, ended.exit_code) == ("failed", "eager failed", 1)
    assert ended.run == f"points/{POINT.id}/m-cpu-20260101T000000Z" and ended.worker == "w"
    missing = GenerateResult.made(0, Path("/elsewhere/never-written"))
    assert local.ended(POINT, missing, 0, tmp_path).run is None


@pytest.mark.parametrize(
    ("exit_code", "status", "error"),
    [
        (-signal.SIGKILL, "failed", "killed by signal 9 (SIGKILL)"),
        (130, "interrupted", "exited with code 130 without a result (see generate.log)"),
        (0, "failed", "exited with code 0 without a result"),
    ],
)
def test_a_point_without_a_result_is_named_by_its_exit(tmp_path, exit_code, status, error):
    ended = local.ended(POINT, None, exit_code, tmp_path)
    assert ended.status == status and error in ended.error and ended.run is None
    assert ended.exit_code == exit_code


def test_an_unreadable_result_file_is_one_line(tmp_path):
    assert local.read_result(tmp_path / "result.json") is None
    (tmp_path / "result.json").write_text("{not json")
    with pytest.raises(ResultError, match=r"result\.json is not valid JSON"):
        local.read_result(tmp_path / "result.json")
    (tmp_path / "result.json").write_text('{"schema": "other"}')
    with pytest.raises(ResultError, match="not a profreport generate result"):
        local.read_result(tmp_path / "result.json")


def test_the_point_child_writes_its_result_file(tmp_path):
    """The local executor's child, once as a real process: bad input is exit 2, a result file
    saying so, and the error line in its output for people."""
    spec = checked_spec({"models": ["no-such-model"], "device": "cpu"}, "t")
    (todo,) = spec.points()
    ended = local.run_point(spec, todo, tmp_path)
    assert (ended.status, ended.exit_code, ended.run) == ("failed", 2, None)
    assert "no-such-model" in ended.error and ended.worker.startswith("local pid")
    folder = tmp_path / "points" / todo.id
    assert ended.log == f"points/{todo.id}/generate.log"
    result = json.loads((folder / "result.json").read_text())
    assert result["exit_code"] == 2 and result["error"] == ended.error
    request = json.loads((folder / "request.json").read_text())
    assert request["model"] == "no-such-model" and request["out"] == str(folder)
    assert f"error: {ended.error}" in (folder / "generate.log").read_text()
    # the child is runnable by hand on the files it left
    proc = subprocess.run(
        [sys.executable, "-m", "profreport.sweep.point", str(folder / "request.json"),
         str(tmp_path / "again.json")],
        capture_output=True, text=True, env=local.child_environment(), check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and json.loads((tmp_path / "again.json").read_text()) == result


def test_the_ray_task_runs_below_the_cli_and_returns_data(tmp_path):
    """The Ray task's function, called in this process (Ray is not needed to call it)."""
    request = GenerateRequest(model="no-such-model", device="cpu", out=tmp_path / "driver")
    task = ray_executor.run_point_task(request.to_json(), cold_compile=False)
    assert task["result"]["exit_code"] == 2 and task["result"]["status"] == "failed"
    ended = ray_executor._unpack(task, POINT, tmp_path)
    assert (ended.status, ended.run) == ("failed", None)
    folder = tmp_path / "points" / POINT.id
    assert json.loads((folder / "result.json").read_text()) == task["result"]
    assert not (tmp_path / "driver").exists()


def test_the_driver_unpacks_a_run_folder_a_task_sent(tmp_path):
    run = tmp_path / "worker" / "m-cpu-20260101T000000Z"
    run.mkdir(parents=True)
    (run / "run.json").write_text("{}")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(run, arcname=run.name)
    result = GenerateResult.made(0, run)
    task = {"result": result.to_json(), "tar": buf.getvalue(), "duration_s": 1.5, "worker": "ray x"}
    ended = ray_executor._unpack(task, POINT, tmp_path)
    assert ended.status == "ok" and ended.run == f"points/{POINT.id}/{run.name}"
    assert (tmp_path / ended.run / "run.json").is_file() and ended.duration_s == 1.5
    log = tmp_path / "points" / POINT.id / "generate.log"
    assert log.read_text() == f"{point.summary_line(result)}\n"
