"""The run's tensorboard/ folder in a real TensorBoard: the PyTorch Profiler plugin serves one run
per mode with its views, and the summary run holds the per-mode scalars and the Markdown text."""

import gzip
import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from profreport.modes import default_modes
from profreport.record import Run, load
from profreport.render.tensorboard_summary import TEXT_TAG, scalars

pytestmark = pytest.mark.slow  # a TensorBoard server over a real generate run

MODES = sorted(default_modes())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = resp.read()
        if resp.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return json.loads(body.decode())


@pytest.fixture(scope="module")
def tensorboard(gated_run):
    """A TensorBoard on the run's tensorboard/ folder, once every mode run is loaded; stopped after."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "tensorboard.main", "--logdir", str(gated_run / "tensorboard")),
            *("--host", "127.0.0.1", "--port", str(port)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        runs = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                data = _get(f"{base}/data/plugin/pytorch_profiler/runs")
                if not data.get("loading") and len(data.get("runs", [])) >= 5:
                    runs = data["runs"]
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert runs is not None, "TensorBoard did not list the runs in time"
        yield base, runs
    finally:
        proc.terminate()
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
            pytest.fail("TensorBoard did not stop on SIGTERM")
    assert rc is not None and proc.poll() is not None  # stopped, nothing left running


def test_profiler_plugin_lists_exactly_the_mode_runs(tensorboard, gated_run):
    base, runs = tensorboard
    assert sorted(runs) == MODES  # the summary/ run is not taken for a profile
    assert (gated_run / "tensorboard" / "summary").is_dir()
    plugin = f"{base}/data/plugin/pytorch_profiler"
    assert _get(f"{plugin}/views?run=compile") == ["Overview", "Operator", "Trace"]
    assert _get(f"{plugin}/workers?run=compile&view=Overview") == ["compile"]


def test_profiler_plugin_serves_overview_operators_and_trace(tensorboard, gated_run):
    base, _ = tensorboard
    plugin = f"{base}/data/plugin/pytorch_profiler"
    record = load(gated_run)
    (span,) = _get(f"{plugin}/spans?run=eager&worker=eager")
    query = f"run=eager&worker=eager&span={span}"

    overview = _get(f"{plugin}/overview?{query}")
    assert {"title": "Device Type", "value": "CPU"} in overview["environments"]
    assert len(overview["steps"]["rows"]) == record["settings"]["profile_schedule"]["active"]

    ops = {
        row["name"]: row
        for row in _get(f"{plugin}/operation/table?{query}&group_by=Operation")["data"]
    }
    ours = {row["name"]: row for row in record["modes"]["eager"]["kernels"]["table"]}
    for name in ("aten::sigmoid", "aten::tanh", "aten::sub"):
        assert ops[name]["calls"] == ours[name]["calls"] == 3, name

    (span,) = _get(f"{plugin}/spans?run=compile&worker=compile")
    trace = _get(f"{plugin}/trace?run=compile&worker=compile&span={span}")
    assert trace["distributedInfo"]["rank"] == 0
    (fused,) = [row["name"] for row in record["modes"]["compile"]["kernels"]["table"]]
    assert any(e.get("name") == fused for e in trace["traceEvents"])


def test_summary_run_has_the_scalars_and_the_markdown(tensorboard, gated_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    record = load(gated_run)
    acc = EventAccumulator(str(gated_run / "tensorboard" / "summary"), size_guidance={"tensors": 0})
    acc.Reload()
    expected = scalars(Run.from_json(record))
    assert set(acc.Tags()["scalars"]) == set(expected)
    assert acc.Scalars("kernels_per_step/eager")[0].value == 7
    assert acc.Scalars("kernels_per_step/compile")[0].value == 1
    assert acc.Scalars("bytes_per_step/compile")[0].value == 3 * 256 * 1024 * 4
    median = record["modes"]["trace"]["latency_ms"]["median"]
    assert acc.Scalars("latency_ms_median/trace")[0].value == pytest.approx(median, rel=1e-6)
    (text,) = acc.Tensors(f"{TEXT_TAG}/text_summary")
    assert text.tensor_proto.string_val[0].decode() == (gated_run / "summary.md").read_text()

    base, _ = tensorboard  # and TensorBoard itself serves them
    tags = _get(f"{base}/data/plugin/scalars/tags")
    assert "kernels_per_step/compile" in tags["summary"]
    assert _get(f"{base}/data/plugin/text/tags") == {"summary": [f"{TEXT_TAG}/text_summary"]}
