"""The light pass: every mode's time breakdown, from one profiling session of its own.

After every mode is built and before the timing, the modes run in interleaved rounds under the
profiler with nothing but time recorded (capture/profiling.profile_interleaved), each round also
measuring the profiler's own cost; the noise guard's load check watches it, and a pass run while
the machine was busy runs once more (then says so). Each mode's steps, their events charged by
part and its CPU kernels (analysis/time_breakdown.labelled_steps) and the measured cost
(analysis/profiler_cost.calibration_cost) become its record's `time_breakdown`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from profreport.analysis.paired import machine_reasons
from profreport.analysis.profiler_cost import calibration_cost
from profreport.analysis.time_breakdown import labelled_steps, typical_step
from profreport.capture.noise import LoadWatch, watch
from profreport.capture.profiling import (
    CALIBRATION_LOOP,
    EMPTY_STEP,
    LightSchedule,
    LightSession,
    profile_interleaved,
)
from profreport.files import LIGHT_TRACE_NAME, LIGHT_TRACES
from profreport.record.model import MachineLoad, TimeBreakdown
from profreport.traceio import Trace, load_trace

SOURCE = (
    "profiler, light pass (no shapes, no FLOPs; the modes in interleaved rounds): this mode's "
    "steps by part, µs of profiled time; `step` is the one of median wall time (upper median); "
    "the profiler's cost per event and per step, measured in the same pass, in `profiler_cost`"
)
ATTEMPTS = 2


def light_pass(
    fns: Mapping[str, Callable[[], Any]],
    device: torch.device,
    sync: Callable[[], None],
    run_dir: Path,
    schedule: LightSchedule,
    watching: Callable[[], Any] = watch,
) -> dict[str, TimeBreakdown]:
    """Each mode's time breakdown from one light pass (once more when the machine was busy);
    ProfilingFailed names a mode that raised."""
    trace_path = run_dir / LIGHT_TRACES / LIGHT_TRACE_NAME
    attempts = 0
    while True:
        attempts += 1
        watched: LoadWatch
        with watching() as watched:
            session = profile_interleaved(fns, device, sync, trace_path, schedule)
        reasons = machine_reasons(watched.load, during="profiling")
        if not reasons or attempts == ATTEMPTS:
            break
    return breakdowns(
        load_trace(session.trace),
        device,
        session,
        str(trace_path.relative_to(run_dir)),
        watched.load,
        attempts,
        reasons,
    )


def breakdowns(
    trace: Trace,
    device: torch.device,
    session: LightSession,
    trace_name: str,
    load: MachineLoad | None = None,
    attempts: int = 1,
    busy: list[str] | None = None,
) -> dict[str, TimeBreakdown]:
    """Each mode's record of a light pass's trace (the calibration's steps give the cost)."""
    definition = "device" if device.type == "cuda" else "cpu"
    found = labelled_steps(trace, definition, session.labels)
    loops, empties = found.pop(CALIBRATION_LOOP), found.pop(EMPTY_STEP)
    cost = calibration_cost(loops.steps, empties.steps, session.calls, session.unprofiled_call_us)
    return {
        mode: TimeBreakdown(
            definition=definition,
            source=SOURCE,
            step=typical_step(own.steps),
            step_walls_us=tuple(s.wall_us for s in own.steps),
            trace=trace_name,
            steps=own.steps,
            warmup_rounds=session.schedule.warmup_rounds,
            repeat=session.schedule.repeat,
            profiler_cost=cost,
            kernels=own.kernels,
            load=load,
            attempts=attempts,
            busy=tuple(busy or ()) or None,
        )
        for mode, own in sorted(found.items(), key=lambda item: session.modes.index(item[0]))
    }
