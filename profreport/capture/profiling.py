"""Run a prepared mode under torch.profiler and write its Kineto trace for TensorBoard and HTA."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

from profreport.record.model import ProfileSchedule


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
    add_rank_info(written[0])
    return written[0]


# Kineto writes this key only under torch.distributed; one process alone is rank 0 of 1.
SINGLE_PROCESS_RANK = {"backend": "none", "rank": 0, "world_size": 1}


def add_rank_info(trace_path: Path) -> bool:
    """Add `distributedInfo` (rank 0 of 1) to a Kineto trace that has none; True if it changed.

    Holistic Trace Analysis maps trace files to ranks by finding `"rank": N` in them and warns
    (older releases refuse) when there is none. TensorBoard's profiler plugin only reads the key to
    build its distributed view, which needs communication kernels and so stays hidden. The key is
    inserted as text at the top of the object, in Kineto's own spacing: the rest of the file is
    kept byte for byte, and it comes before any `"rank"` inside event arguments.
    """
    gz = trace_path.name.endswith(".gz")
    raw = trace_path.read_bytes()
    text = (gzip.decompress(raw) if gz else raw).decode("utf-8")
    data = json.loads(text)
    if not isinstance(data, dict) or not data or "distributedInfo" in data:
        return False
    brace = text.index("{")
    entry = '\n  "distributedInfo": ' + json.dumps(SINGLE_PROCESS_RANK) + ","
    out = (text[: brace + 1] + entry + text[brace + 1 :]).encode("utf-8")
    tmp = trace_path.with_name(f".{trace_path.name}.tmp")
    tmp.write_bytes(gzip.compress(out) if gz else out)
    os.replace(tmp, trace_path)
    return True
