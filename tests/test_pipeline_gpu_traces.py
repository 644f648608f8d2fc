"""The generate pipeline's CUDA path for kernel counts, fed with real recorded GPU traces."""

from pathlib import Path

import torch

from profreport.modes import PreparedMode
from profreport.pipeline import _kernel_counts, _time_breakdown
from profreport.record.model import TimeBreakdown
from profreport.traceio import load_trace

DATA = Path(__file__).parent / "data"
CUDA = torch.device("cuda")  # only a label here: nothing runs on it


def _record(name: str) -> dict:
    return _kernel_counts(
        load_trace(DATA / name), PreparedMode("eager", fn=lambda: None), CUDA
    ).to_json()


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


def test_time_breakdown_record_of_a_real_rocm_trace():
    """The device path of the pipeline's time breakdown: the median step's device view."""
    breakdown = _time_breakdown(load_trace(DATA / "mi250_rocm_train.json.gz"), CUDA)
    assert breakdown.definition == "device" and breakdown.step is not None
    assert TimeBreakdown.from_json(breakdown.to_json()) == breakdown  # it round-trips
    step = breakdown.step
    assert breakdown.step_walls_us == (9288.291, 49.073)  # two host ProfilerSteps
    assert step.wall_us == 9288.291  # the upper median of two
    assert step.op_us is None and step.launch_us is not None
    host = (step.launch_us or 0) + (step.runtime_us or 0) + step.dispatch_us
    host += step.wrapper_us + step.python_us
    assert abs(host - step.wall_us) < 0.01  # the host parts sum to the step
    assert step.device_span_us is not None and step.device_busy_us is not None
    idle = (step.host_wait_us or 0) + (step.kernel_wait_us or 0) + (step.other_idle_us or 0)
    assert abs(step.device_busy_us + idle - step.device_span_us) < 0.01
