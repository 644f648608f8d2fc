"""Run a prepared mode under torch.profiler and write its Kineto trace for TensorBoard and HTA."""

from __future__ import annotations

import gzip
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


# The light pass: enough steps that slow ones cannot move a median (5: two may be slow),
# about LIGHT_PASS_S in all; a model whose step takes over HEAVY_STEP_S gets one warm-up step
# and as many active steps as the run's --active-steps (a median of 3 still outvotes one).
LIGHT_PASS_S = 0.3
LIGHT_STEPS = (5, 20)  # at least, at most (never fewer than the run's --active-steps)
LIGHT_WARMUP = 2
HEAVY_STEP_S = 2.0


def light_schedule(step_walls_us: Sequence[float], at_least: int) -> tuple[int, int]:
    """(warm-up, active) steps of a mode's light pass, from its profiled steps' median wall."""
    walls = sorted(step_walls_us)
    step_s = walls[len(walls) // 2] / 1e6 if walls else 0.0
    if step_s > HEAVY_STEP_S:
        return 1, at_least
    wanted = math.ceil(LIGHT_PASS_S / step_s) if step_s > 0 else LIGHT_STEPS[1]
    return LIGHT_WARMUP, max(at_least, min(LIGHT_STEPS[1], max(LIGHT_STEPS[0], wanted)))


def profile_light(
    fn: Callable[[], Any],
    device: torch.device,
    trace_path: Path,
    sync: Callable[[], None],
    warmup: int,
    active: int,
    before_step: Callable[[int], None] | None = None,
    shapes: bool = False,
) -> Path:
    """Profile ``active`` steps after ``warmup`` ones with nothing but time recorded (no shapes,
    no FLOPs: the pass the time breakdown reads, whose own cost is small and calibrated) and
    write the trace to ``trace_path`` (gzipped when it ends in .gz). ``before_step(i)`` runs
    before step i's call, inside the step (the calibration's steps alternate with it);
    ``shapes`` records shapes and FLOPs as profile_mode does (bench/time_agreement.py compares)."""
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    with profile(
        activities=activities_for(device),
        schedule=schedule(wait=0, warmup=warmup, active=active, repeat=1),
        record_shapes=shapes,
        with_flops=shapes,
    ) as prof:
        for i in range(warmup + active):
            if before_step is not None:
                before_step(i)
            fn()
            sync()
            prof.step()
    plain = trace_path.with_name(trace_path.name.removesuffix(".gz"))
    prof.export_chrome_trace(str(plain))
    if plain != trace_path:
        trace_path.write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    add_rank_info(trace_path)
    return trace_path


CALIBRATION_OP = "aten::add"


@dataclass(frozen=True)
class CalibrationRun:
    """What the calibration measured on this machine (capture/profiling.calibrate): the trace of
    its light pass, whose steps alternate between `calls` calls of CALIBRATION_OP (even steps)
    and nothing (odd steps), and one unprofiled call's time, per block."""

    trace: Path
    calls: int
    unprofiled_call_us: tuple[float, ...]


def calibrate(
    device: torch.device,
    sync: Callable[[], None],
    trace_path: Path,
    calls: int = 200,
    steps: int = 20,
    blocks: int = 15,
    shapes: bool = False,
) -> CalibrationRun:
    """Measure what the light pass's profiler costs here: ``steps`` profiled steps of ``calls``
    tensor additions (two 4-element tensors on ``device``) alternating with as many empty steps,
    between ``blocks`` unprofiled blocks of the same calls (half before, half after)."""
    a = torch.ones(4, device=device)
    b = torch.ones(4, device=device)

    def loop() -> None:
        for _ in range(calls):
            torch.add(a, b)

    def unprofiled(n: int) -> list[float]:
        out = []
        for _ in range(n):
            sync()
            start = time.perf_counter()
            loop()
            sync()
            out.append((time.perf_counter() - start) / calls * 1e6)
        return out

    loop()  # warm: the first call of an op pays for its dispatch caches
    before = unprofiled(blocks // 2)
    empty = [False]

    def alternate(i: int) -> None:
        empty[0] = i % 2 == 1

    profile_light(
        lambda: None if empty[0] else loop(),
        device,
        trace_path,
        sync,
        warmup=2,
        active=2 * steps,
        before_step=alternate,
        shapes=shapes,
    )
    after = unprofiled(blocks - blocks // 2)
    return CalibrationRun(trace_path, calls, tuple(before + after))


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
