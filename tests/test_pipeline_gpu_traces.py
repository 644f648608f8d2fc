"""The generate pipeline's CUDA path for kernel counts, fed with real recorded GPU traces."""

from pathlib import Path

import torch

from profreport.analysis.profiler_cost import median_step
from profreport.analysis.time_breakdown import labelled_steps, typical_step
from profreport.modes import PreparedMode
from profreport.pipeline import _kernel_counts
from profreport.record.model import ProfilerCost, TimeBreakdown
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
    """The device path of the light pass's reading: each step's device view, its events charged
    by part, and the profiler's cost removed from the host's wait only."""
    trace = load_trace(DATA / "mi250_rocm_train.json.gz")
    labels = {"ProfilerStep#1": "eager", "ProfilerStep#2": "eager"}
    found = labelled_steps(trace, "device", labels)["eager"]
    assert found.kernels is None  # CPU kernels' times: the cpu definition only
    cost = ProfilerCost(per_event_us=1.0, per_step_us=5.0)
    breakdown = TimeBreakdown(
        definition="device",
        step=typical_step(found.steps),
        step_walls_us=tuple(s.wall_us for s in found.steps),
        steps=found.steps,
        profiler_cost=cost,
    )
    assert TimeBreakdown.from_json(breakdown.to_json()) == breakdown  # it round-trips
    busy, idle = found.steps
    # 36 dispatcher ops, 7 launches and their runtime calls: each charged where it was opened
    # (launches inside ops: dispatch), ten ops opened by Python, one inside a wrapper
    assert busy.events == {"dispatch": 37, "wrapper": 1, "python": 10}
    assert idle.events == {}  # an empty step recorded nothing
    median = median_step(breakdown)
    assert median is not None and median.corrected and not median.cpu
    raw = [s.device_busy_us or 0 for s in found.steps]
    assert median.work_us == sum(raw) / 2  # device busy time: nothing removed from it
    assert median.removed_us <= sum(s.host_wait_us or 0 for s in found.steps) / 2
    step = breakdown.step
    assert step is not None
    assert breakdown.step_walls_us == (9288.291, 49.073)  # two host ProfilerSteps
    assert step.wall_us == 9288.291  # the upper median of two
    assert step.op_us is None and step.launch_us is not None
    host = (step.launch_us or 0) + (step.runtime_us or 0) + step.dispatch_us
    host += step.wrapper_us + step.python_us
    assert abs(host - step.wall_us) < 0.01  # the host parts sum to the step
    assert step.device_span_us is not None and step.device_busy_us is not None
    idle = (step.host_wait_us or 0) + (step.kernel_wait_us or 0) + (step.other_idle_us or 0)
    assert abs(step.device_busy_us + idle - step.device_span_us) < 0.01
