"""A mode that fails leaves nothing running and no state behind: while the other modes are timed,
no child process of profreport uses the CPU (read through psutil during the timing phase), and
Inductor's and Dynamo's global config is what it was before the run."""

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import profreport
from profreport import modes, pipeline
from profreport.capture import noise
from profreport.modes import Mode, PreparedMode

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc only")


class DataDependentBranch(nn.Module):
    """torch.export cannot capture a branch on a tensor's value."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        if y.sum() > 0:
            return torch.relu(y)
        return y * 2


class WorkersThenExport(Mode):
    """Starts Inductor's subprocess compile workers as Inductor does on a build with Triton (a
    sidecar that starts one worker per compile thread and keeps them for a minute), then fails
    the way export does on this model. It resets nothing itself: the pipeline must."""

    name = "workers-then-export"

    def build(self, module: Any, inputs: tuple[Any, ...], sync: Any) -> PreparedMode:
        from torch._inductor.async_compile import AsyncCompile

        AsyncCompile.warm_pool()
        AsyncCompile.wakeup()
        return modes.mode_for("export").build(module, inputs, sync)


@pytest.fixture
def failing_mode(mode_registry):
    import torch._inductor.config as inductor_config

    # a pool even on one core (config.patch, not monkeypatch: its undo deletes a config entry)
    with inductor_config.patch(compile_threads=2):
        yield modes.register(WorkersThenExport())


def _configs() -> dict[str, dict[str, Any]]:
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    return {
        "inductor": inductor_config.get_config_copy(),
        "dynamo": dynamo_config.get_config_copy(),
    }


@pytest.mark.slow  # torch.compile, a failing torch.export, Inductor's worker pool
def test_failed_modes_leave_no_child_busy_while_the_others_are_timed(failing_mode, monkeypatch):
    seen: dict[str, Any] = {}
    measure = pipeline.measure_latency

    def measured_with_children(*args: Any, **kwargs: Any) -> Any:
        start = {c.pid: c.cpu_s for c in noise.live_descendants() or []}
        try:
            return measure(*args, **kwargs)
        finally:
            end = {c.pid: c.cpu_s for c in noise.live_descendants() or []}
            seen["at_start"], seen["at_end"] = start, end

    monkeypatch.setattr(pipeline, "measure_latency", measured_with_children)
    before = _configs()
    torch.manual_seed(0)
    result = profreport.profile(
        DataDependentBranch(),
        (torch.randn(16, 64),),
        modes=("eager", "compile", "export", failing_mode.name),
        device="cpu",
        min_time_s=0.5,
        bootstrap_resamples=100,
    )
    record = result.record
    assert record["modes"]["compile"]["status"] == "ok"
    for name in ("export", failing_mode.name):
        assert record["modes"][name]["status"] == "failed"
        assert "data-dependent" in record["modes"][name]["error"]

    # nothing of ours ran while timing: no child left, or none that used a tick meanwhile
    busy = {
        pid: cpu_s - seen["at_start"].get(pid, 0.0)
        for pid, cpu_s in seen["at_end"].items()
        if cpu_s - seen["at_start"].get(pid, 0.0) > 0
    }
    assert busy == {}
    assert seen["at_start"] == {}  # the workers were stopped before timing began
    # No child was busy while timing (above). The share can still be a tick or a few: a stopped
    # worker's exit is reaped inside the window (seen at 1.2% on a quiet CI machine); it stays
    # far below the guard's 10% limit, where the failed runs of the issue were at 27-49%.
    load = record["timing_noise"]["load"]
    assert load["children_busy_share"] is not None and load["children_busy_share"] <= 0.05
    assert _configs() == before
