"""Run a prepared mode under torch.profiler and write its Kineto trace for TensorBoard and HTA."""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, tensorboard_trace_handler
from torch.profiler import schedule as profiler_schedule

from profreport.capture.timing import rotated
from profreport.files import library_writes
from profreport.record.model import ProfileSchedule


def activities_for(device: torch.device) -> list[ProfilerActivity]:
    return [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if device.type == "cuda" else [])]


def cpu_trace_events(
    run: Callable[[], Any], *, profile_memory: bool = False, with_modules: bool = False
) -> list[dict[str, Any]]:
    """The trace events of `run()` under the CPU profiler (with memory events, or module
    hierarchies), read back from the Chrome trace it exports."""
    with profile(
        activities=[ProfilerActivity.CPU], profile_memory=profile_memory, with_modules=with_modules
    ) as prof:
        run()
    with (
        tempfile.TemporaryDirectory(prefix="profreport-") as folder,
        library_writes(Path(folder)),
    ):
        path = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(path))
        events: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8")).get(
            "traceEvents", []
        )
    return events


def profile_mode(
    fn: Callable[..., Any],
    inputs: tuple[torch.Tensor, ...],
    device: torch.device,
    trace_dir: Path,
    worker_name: str,
    sync: Callable[[], None],
    steps: ProfileSchedule,
) -> Path:
    """Profile `steps.active` steps after wait/warm-up and return the path of the trace written
    (read back whole: on a disk that takes no more, the disk's OSError).

    Shapes and FLOPs are recorded; each step is one forward call, marked `ProfilerStep#N`.
    """
    trace_dir.mkdir(parents=True, exist_ok=True)
    before = set(trace_dir.glob("*.pt.trace.json*"))
    with profile(
        activities=activities_for(device),
        schedule=profiler_schedule(
            wait=steps.wait, warmup=steps.warmup, active=steps.active, repeat=1
        ),
        on_trace_ready=tensorboard_trace_handler(str(trace_dir), worker_name=worker_name),
        record_shapes=True,
        with_flops=True,
    ) as prof:
        for _ in range(steps.total_steps):
            fn(*inputs)
            sync()
            prof.step()
    with library_writes(trace_dir):  # the exporter writes short on a full disk, and says nothing
        written = sorted(set(trace_dir.glob("*.pt.trace.json*")) - before)
        if len(written) != 1:
            raise RuntimeError(f"expected one trace in {trace_dir}, found {len(written)}")
        add_rank_info(written[0])
    return written[0]


# The light pass: every mode's steps in interleaved rounds, so that a load coming and going
# hits them alike (as the timing does); where steps are short (under REPEAT_BELOW_S) each step
# read follows a call of the same mode (`repeat` 2: warm caches, as in a timed block). Enough
# rounds that slow steps cannot move a median (5: two may be slow), about LIGHT_PASS_S per mode;
# a model whose step takes over HEAVY_STEP_S gets --active-steps rounds and no warm-up round (a
# median of 3 still outvotes one slow step).
LIGHT_PASS_S = 0.3
LIGHT_ROUNDS = (5, 20)  # at least, at most (never fewer than the run's --active-steps)
REPEAT_BELOW_S = 0.1
HEAVY_STEP_S = 2.0
CALIBRATION_LOOP = "(calibration: additions)"
EMPTY_STEP = "(calibration: empty step)"


@dataclass(frozen=True)
class LightSchedule:
    """How a light pass runs: `warmup_rounds` unused rounds, then `rounds` rounds, each mode
    `repeat` times a round (the last call of each is the one read)."""

    rounds: int
    warmup_rounds: int = 1
    repeat: int = 2

    @property
    def calls_per_mode(self) -> int:
        return (self.warmup_rounds + self.rounds) * self.repeat


def light_schedule(step_walls_us: Sequence[Sequence[float]], at_least: int) -> LightSchedule:
    """The light pass of modes whose profiled steps took ``step_walls_us`` (each mode's)."""
    step_s = [sorted(w)[len(w) // 2] / 1e6 for w in step_walls_us if w]
    longest = max(step_s, default=0.0)
    if longest > HEAVY_STEP_S:
        return LightSchedule(rounds=at_least, warmup_rounds=0, repeat=1)
    repeat = 2 if longest < REPEAT_BELOW_S else 1
    round_s = repeat * sum(step_s)
    wanted = math.ceil(LIGHT_PASS_S * len(step_s) / round_s) if round_s > 0 else LIGHT_ROUNDS[1]
    rounds = max(at_least, min(LIGHT_ROUNDS[1], max(LIGHT_ROUNDS[0], wanted)))
    return LightSchedule(rounds, repeat=repeat)


class ProfilingFailed(Exception):
    """A mode raised during the light pass (out of memory, say); `mode` names it."""

    def __init__(self, mode: str, error: BaseException) -> None:
        super().__init__(f"{mode} failed while profiled: {type(error).__name__}: {error}")
        self.mode, self.error = mode, error


@dataclass(frozen=True)
class LightSession:
    """What a light pass recorded: its trace, which ProfilerStep ran what (a mode,
    CALIBRATION_LOOP or EMPTY_STEP; the steps not read are left out), and the calibration's
    `calls` additions per loop step, one addition's time per unprofiled block."""

    trace: Path
    labels: dict[str, str]
    schedule: LightSchedule
    calls: int
    unprofiled_call_us: tuple[float, ...]
    modes: tuple[str, ...] = ()  # in the order given


def profile_interleaved(
    fns: Mapping[str, Callable[[], Any]],
    device: torch.device,
    sync: Callable[[], None],
    trace_path: Path,
    schedule: LightSchedule,
    calls: int = 200,
    blocks: int = 15,
    shapes: bool = False,
) -> LightSession:
    """The light pass: with nothing but time recorded (no shapes, no FLOPs: its own cost is
    small, and measured here), every mode of ``fns`` in rounds of rotated order, each round
    also one step of ``calls`` tensor additions (two 4-element tensors on ``device``) and one
    empty step: the profiler's cost, against the additions timed without the profiler in
    ``blocks`` blocks (half before, half after). ``shapes`` records shapes and FLOPs as
    profile_mode does (bench/time_agreement.py compares). A mode that raises stops it with
    ProfilingFailed. The trace is written to ``trace_path`` (gzipped when it ends in .gz)."""
    a, b = torch.ones(4, device=device), torch.ones(4, device=device)

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
    timed = unprofiled(blocks // 2)
    steps: dict[str, Callable[[], Any]] = {**fns, CALIBRATION_LOOP: loop, EMPTY_STEP: lambda: None}
    plan: list[tuple[str, bool]] = []  # (what runs, whether the step is read)
    for round_no in range(schedule.warmup_rounds + schedule.rounds):
        read = round_no >= schedule.warmup_rounds
        for name in rotated(round_no, list(steps)):
            repeat = schedule.repeat if name in fns else 1
            plan += [(name, read and i == repeat - 1) for i in range(repeat)]
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    with profile(
        activities=activities_for(device),
        schedule=profiler_schedule(wait=0, warmup=1, active=len(plan), repeat=1),
        record_shapes=shapes,
        with_flops=shapes,
    ) as prof:
        prof.step()  # the profiler's own warm-up step
        for name, _ in plan:
            try:
                steps[name]()
                sync()
            except (Exception, SystemExit) as exc:  # sys.exit() in a model: that model failing
                raise ProfilingFailed(name, exc) from exc
            prof.step()
    plain = trace_path.with_name(trace_path.name.removesuffix(".gz"))
    with library_writes(trace_path.parent):  # its exporter writes short on a full disk, silently
        prof.export_chrome_trace(str(plain))
        if plain != trace_path:
            trace_path.write_bytes(gzip.compress(plain.read_bytes()))
            plain.unlink()
        add_rank_info(trace_path)
    timed += unprofiled(blocks - blocks // 2)
    labels = {f"ProfilerStep#{i + 1}": name for i, (name, read) in enumerate(plan) if read}
    return LightSession(trace_path, labels, schedule, calls, tuple(timed), tuple(fns))


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
