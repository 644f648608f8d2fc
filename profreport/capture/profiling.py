"""Run a prepared mode under torch.profiler and write its Kineto trace for TensorBoard."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler


@dataclass(frozen=True)
class ProfileSchedule:
    wait: int = 1
    warmup: int = 1
    active: int = 3

    @property
    def total_steps(self) -> int:
        return self.wait + self.warmup + self.active


def activities_for(device: torch.device) -> list[ProfilerActivity]:
    acts = [ProfilerActivity.CPU]
    if device.type == "cuda":
        acts.append(ProfilerActivity.CUDA)
    return acts


def profile_mode(
    fn: Callable[..., Any],
    inputs: tuple[torch.Tensor, ...],
    device: torch.device,
    trace_dir: Path,
    worker_name: str,
    sync: Callable[[], None],
    steps: ProfileSchedule,
) -> Path:
    """Profile `steps.active` steps after wait/warm-up and return the path of the trace written.

    Shapes and FLOPs are recorded; each step is one forward call, marked `ProfilerStep#N`.
    """
    trace_dir.mkdir(parents=True, exist_ok=True)
    before = set(trace_dir.glob("*.pt.trace.json*"))
    with profile(
        activities=activities_for(device),
        schedule=schedule(wait=steps.wait, warmup=steps.warmup, active=steps.active, repeat=1),
        on_trace_ready=tensorboard_trace_handler(str(trace_dir), worker_name=worker_name),
        record_shapes=True,
        with_flops=True,
    ) as prof:
        for _ in range(steps.total_steps):
            fn(*inputs)
            sync()
            prof.step()
    written = sorted(set(trace_dir.glob("*.pt.trace.json*")) - before)
    if len(written) != 1:
        raise RuntimeError(f"expected one trace in {trace_dir}, found {len(written)}")
    return written[0]
