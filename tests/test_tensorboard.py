"""The traces generate writes load in a real TensorBoard with the PyTorch Profiler plugin."""

import json
import socket
import subprocess
import sys
import time
import urllib.request


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read().decode())


def test_profiler_plugin_lists_one_run_per_mode(gated_run):
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tensorboard.main",
            "--logdir",
            str(gated_run / "tensorboard"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/data/plugin/pytorch_profiler"
    try:
        runs = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                data = _get(f"{base}/runs")
                if not data.get("loading") and len(data.get("runs", [])) == 5:
                    runs = data["runs"]
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert runs is not None, "TensorBoard did not list the runs in time"
        assert sorted(runs) == ["compile", "eager", "optimize", "script", "trace"]
        views = _get(f"{base}/views?run=compile")
        assert "Trace" in views and "Overview" in views
        assert _get(f"{base}/workers?run=compile&view=Overview") == ["compile"]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
