"""`profreport sweep` end to end: real points in child processes (local executor) and in a real
local Ray instance (no mock), failing and killed points, Ctrl-C and --resume, the page in
Chromium, and `compare` of two sweeps. Slow: each point is a real `generate` run."""

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profreport.cli import main
from profreport.record import dumps
from profreport.sweep import model
from profreport.sweep.model import Sweep
from tests.test_browser import _open, browser  # noqa: F401  (the Chromium fixture)

pytestmark = pytest.mark.slow

FAST = ["--device", "cpu", "--min-time", "0.05", "--quiet"]
GRID = ["--model", "gated-residual", "--batch-sizes", "1,4", "--modes", "eager,compile"]
# A cold compile of gated-residual costs ~15 s here; the cold cache is checked on its own below.
WARM = "--warm-compile-cache"
RAISES = """
import os

import torch
from torch import nn


class Raises(nn.Module):
    def forward(self, x):
        cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
        raise RuntimeError(f"this model raises on purpose; inductor cache {cache}")


def build():
    return Raises(), (torch.randn(2, 8),)
"""
KILLS = """
import os
import signal


def build():
    os.kill(os.getpid(), signal.SIGKILL)  # the process running this point dies here
"""


def _sweep(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["sweep", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _folder(parent: Path) -> Path:
    (folder,) = [p for p in parent.iterdir() if p.is_dir()]
    return folder


def _numbers(folder: Path) -> dict:
    rows = model.load(folder / "sweep.json")["rows"]
    return {(r["point"], r["mode"]): (r["kernels_per_step"], r["bytes_per_step"]) for r in rows}


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    code, stdout, err = _sweep(*GRID, *FAST, WARM, "--out", str(out))
    assert code == 0, err
    assert "compile: pass rate 2/2 (100%)" in stdout
    return _folder(out)


@pytest.fixture(scope="module")
def ray_instance():
    try:
        import ray
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("ray is required in CI (see .ci/run)")
        pytest.skip("ray not installed (pip install 'profreport[ray]')")
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=200 * 2**20
    )
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def ray_sweep(ray_instance, tmp_path_factory):
    out = tmp_path_factory.mktemp("ray")
    code, _stdout, err = _sweep(*GRID, *FAST, WARM, "--executor", "ray", "--out", str(out))
    assert code == 0, err
    return _folder(out)


def test_local_sweep_writes_a_run_per_point(local_sweep):
    doc = model.load(local_sweep / "sweep.json")
    assert doc["schema"] == "profreport.sweep/2" and doc["executor"] == "local"
    assert [(p["id"], p["status"]) for p in doc["points"]] == [
        ("gated-residual-b1-float32", "ok"),
        ("gated-residual-b4-float32", "ok"),
    ]
    for p in doc["points"]:
        run = local_sweep / p["run"]
        record = json.loads((run / "run.json").read_text())
        assert record["model"]["batch_size"] == p["batch_size"]
        assert (run / "report.html").is_file() and p["worker"].startswith("local pid")
    assert [(r["point"][-10:], r["mode"]) for r in doc["rows"]] == [
        ("b1-float32", "eager"), ("b1-float32", "compile"),
        ("b4-float32", "eager"), ("b4-float32", "compile"),
    ]  # fmt: skip
    numbers = _numbers(local_sweep)
    # Inductor fuses the pointwise chain into one kernel; eager's bytes grow with the batch.
    assert numbers[("gated-residual-b1-float32", "compile")][0] == 1
    assert (
        numbers[("gated-residual-b4-float32", "eager")][1]
        == 4 * numbers[("gated-residual-b1-float32", "eager")][1]
    )
    assert doc["summary"]["modes"][1]["mode"] == "compile"
    # The typed record reads the written sweep.json and writes it back byte for byte.
    text = (local_sweep / "sweep.json").read_text()
    sweep = Sweep.from_json(json.loads(text))
    assert dumps(sweep.to_json()) == text
    assert sweep.rows[1].speedup_vs_eager.median == doc["rows"][1]["speedup_vs_eager"]["median"]
    assert (
        (local_sweep / "sweep.md")
        .read_text()
        .startswith("### profreport sweep: gated-residual on cpu")
    )


def test_ray_sweep_equals_the_local_sweep(local_sweep, ray_sweep):
    doc = model.load(ray_sweep / "sweep.json")
    assert doc["executor"] == "ray"
    assert all(p["status"] == "ok" and p["worker"].startswith("ray ") for p in doc["points"])
    # The run folders came back as files and sit under the sweep folder on the driver.
    for p in doc["points"]:
        assert (ray_sweep / p["run"] / "run.json").is_file()
        assert (ray_sweep / p["run"] / "report.html").is_file()
    assert _numbers(ray_sweep) == _numbers(local_sweep)


def test_compare_gates_two_sweeps_point_by_point(local_sweep, ray_sweep, tmp_path):
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["compare", str(local_sweep / "sweep.json"), str(ray_sweep / "sweep.json"),
         "--max-kernel-increase", "0", "--max-bytes-increase", "0", "--format", "json"],
        out=out, err=err,
    )  # fmt: skip
    assert code == 0, err
    data = json.loads(out.getvalue())
    assert data["schema"] == "profreport.sweep-compare/1" and not data["regressed"]
    assert [p["point"] for p in data["points"]] == [
        "gated-residual, batch 1, float32",
        "gated-residual, batch 4, float32",
    ]
    kernels = [
        m for p in data["points"] for mode in p["comparison"]["modes"] for m in mode["metrics"]
        if m["metric"] == "kernels_per_step"
    ]  # fmt: skip
    assert len(kernels) == 4 and all(m["change"] == 0 for m in kernels)


def _config(tmp_path: Path, **model_files: str) -> Path:
    """sweep.toml: gated-residual and the given model files (name -> source), eager only."""
    models = ["gated-residual"]
    for name, source in model_files.items():
        (tmp_path / f"{name}.py").write_text(source)
        models.append(f"{tmp_path / name}.py:build")
    config = tmp_path / "sweep.toml"
    config.write_text(
        f'models = {json.dumps(models)}\nbatch_sizes = [1]\nmodes = ["eager"]\n'
        f'device = "cpu"\nmin_time = 0.05\nout = "{tmp_path / "out"}"\n'
    )
    return config


def _cold_cache_of(row: dict) -> str:
    """The Inductor cache folder the RAISES model saw (it names it in its error)."""
    return row["error"].rpartition("inductor cache ")[2]


def test_a_point_that_raises_is_recorded_and_the_sweep_completes(tmp_path):
    code, stdout, err = _sweep("--config", str(_config(tmp_path, raises=RAISES)), "--quiet")
    assert code == 1
    folder = _folder(tmp_path / "out")
    doc = model.load(folder / "sweep.json")
    statuses = {p["model"].rpartition("/")[2]: p["status"] for p in doc["points"]}
    assert statuses == {"gated-residual": "ok", "raises.py:build": "failed"}
    bad = next(p for p in doc["points"] if p["status"] == "failed")
    assert bad["exit_code"] == 1 and (folder / bad["run"] / "run.json").is_file()
    (row,) = [r for r in doc["rows"] if r["point"] == bad["id"]]
    assert row["status"] == "failed" and "this model raises on purpose" in row["error"]
    # The point ran with an empty Inductor cache folder of its own, removed afterwards.
    cache = _cold_cache_of(row)
    assert "profreport-inductor-" in cache and not os.path.exists(cache)
    assert f"error: point {bad['id']} failed" in err
    text = (folder / "sweep.json").read_text()
    assert dumps(Sweep.from_json(json.loads(text)).to_json()) == text
    assert "this model raises on purpose" in (folder / "sweep.html").read_text()
    assert "sweep: 1 of 2 points ran (1 failed, 0 not run)" in stdout


def test_a_killed_ray_worker_is_a_failed_point(ray_instance, tmp_path):
    code, _stdout, err = _sweep(
        "--config",
        str(_config(tmp_path, kills=KILLS, raises=RAISES)),
        "--executor",
        "ray",
        "--quiet",
    )
    assert code == 1
    doc = model.load(_folder(tmp_path / "out") / "sweep.json")
    by_model = {p["model"].rpartition("/")[2]: p for p in doc["points"]}
    assert by_model["gated-residual"]["status"] == "ok"
    # The raising point failed on its own, in a worker with an empty Inductor cache.
    raised = next(r for r in doc["rows"] if r["point"] == by_model["raises.py:build"]["id"])
    assert "this model raises on purpose" in raised["error"]
    assert "profreport-inductor-" in _cold_cache_of(raised)
    killed = by_model["kills.py:build"]
    assert killed["status"] == "failed" and killed["run"] is None
    assert "the Ray worker died while running this point" in killed["error"]
    assert "the Ray worker died" in err


def test_ctrl_c_keeps_finished_points_and_resume_runs_the_rest(tmp_path):
    out = tmp_path / "out"
    args = ["--model", "gated-residual", "--batch-sizes", "1,2", "--modes", "eager", *FAST]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "profreport", "sweep", *args, "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until the first point is recorded
        try:
            if model.load(_folder(out))["points"][0]["status"] == "ok":
                break
        except (ValueError, OSError, model.SweepRecordError):
            pass
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    folder = _folder(out)
    assert f"resume with: profreport sweep --resume {folder}" in err
    doc = model.load(folder)
    statuses = [p["status"] for p in doc["points"]]
    # The point running when Ctrl-C came is "interrupted" ("pending" had it not started yet).
    assert statuses[0] == "ok" and statuses[1] in ("interrupted", "pending"), statuses
    first_run = doc["points"][0]["run"]
    # Nothing half-written: no staging folder left in any point folder.
    assert not [p for p in (folder / "points").rglob(".*partial*")]
    assert (folder / "sweep.html").is_file()

    code, stdout, err = _sweep("--resume", str(folder), "--quiet")
    assert code == 0, err
    doc = model.load(folder)
    assert [p["status"] for p in doc["points"]] == ["ok", "ok"]
    assert doc["points"][0]["run"] == first_run  # not run again
    assert "points already done were not run again" in stdout
    assert len(doc["rows"]) == 2


def test_sweep_page_loads_clean_in_chromium(browser, local_sweep):  # noqa: F811
    page_file = local_sweep / "sweep.html"
    context, page, log = _open(browser, page_file)
    try:
        assert log.console_errors == [] and log.page_errors == []
        assert log.requests == [page_file.as_uri()]  # self-contained
        charts = page.locator(".charts svg")
        assert charts.count() == 4
        for i in range(4):
            box = charts.nth(i).bounding_box()
            assert box is not None and box["width"] > 200 and box["height"] > 100
        assert page.locator("#rows tr").count() == 1 + 4
        assert page.locator("#summary tr").count() == 1 + 2
    finally:
        context.close()
