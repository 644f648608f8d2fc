"""The generate pipeline's CUDA path for kernel counts, fed with real recorded GPU traces."""

from pathlib import Path

import torch

from profreport.modes import PreparedMode
from profreport.pipeline import _kernel_counts

DATA = Path(__file__).parent / "data"
CUDA = torch.device("cuda")  # only a label here: nothing runs on it


def _record(name: str) -> dict:
    return _kernel_counts(DATA / name, PreparedMode("eager", fn=lambda: None), CUDA).to_json()


def test_alexnet_trace_counts_device_work():
    k = _record("a100_alexnet_inference.json.gz")
    assert k["definition"] == "device"
    assert k["steps"] == 0  # no ProfilerStep ranges: the whole trace is one step
    assert (k["per_step"], k["launches"], k["memcpy"], k["memset"]) == (79, 79, 16, 3)
    assert k["unrecorded"] == []  # graph-only CPU ops matter for the CPU definition only
    assert sum(r["calls"] for r in k["table"] if r["kind"] == "kernel") == 79
    assert all(r["source"] == "profiler" for r in k["table"])


def test_triton_trace_counts_driver_launch():
    k = _record("a100_torch_compile_triton.json.gz")
    assert (k["per_step"], k["launches"]) == (1, 1)
    (kernel,) = [r for r in k["table"] if r["kind"] == "kernel"]
    assert kernel["name"].startswith("triton_")


def test_rocm_trace_counts_hip_launches():
    k = _record("mi250_rocm_train.json.gz")
    assert k["whole_trace"]["kernels"] == 14
    assert k["whole_trace"]["launches"] == 14
    assert k["whole_trace"]["memcpy"] == 2
