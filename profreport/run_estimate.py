"""How long a heavy run will take, said as soon as eager's first call has been measured."""

from __future__ import annotations

from profreport.capture.profiling import light_schedule
from profreport.capture.timing import TimingConfig, expected_timing_s
from profreport.format import plural
from profreport.modes.base import WARMUP_CALLS
from profreport.record.model import ProfileSchedule
from profreport.text import Notice

# A run expected to last this long (besides compiling) says so as soon as it knows.
HEAVY_RUN_S = 30.0
# Calls of each mode outside the profiled steps and the timing: peak memory, the bytes capture
# and the output check (eager's reference call stands for eager's check).
CHECK_CALLS = 3


def duration_notice(
    call_s: float, n_modes: int, schedule: ProfileSchedule, timing: TimingConfig
) -> Notice | None:
    """What a heavy run will cost, from eager's first call (`call_s`, measured): the calls each
    mode makes outside the timing (its warm-up, the profiled steps of both passes, peak
    memory, the bytes capture, the output check), then the latency timing within its budget; None for a light
    run. Compile time is not known before compiling and is left out."""
    light = light_schedule([[call_s * 1e6]] * n_modes, schedule.active).calls_per_mode
    calls_per_mode = WARMUP_CALLS + schedule.total_steps + light + CHECK_CALLS
    others_s = n_modes * calls_per_mode * call_s
    timing_s = expected_timing_s(call_s, n_modes, timing)
    if others_s + timing_s < HEAVY_RUN_S:
        return None
    budget = ""
    if timing_s > timing.max_time_s:
        budget = (
            f" (more than --max-time {timing.max_time_s:g} s: each mode is warmed up and timed "
            "at least once)"
        )
    elif timing_s == timing.max_time_s:
        budget = " (the --max-time budget)"
    return Notice(
        f"eager's first call took {call_s:.2f} s: expect about {_duration(others_s)} of warm-up, "
        f"profiling and checks for {plural(n_modes, 'mode')} (plus compile "
        f"time), then about {_duration(timing_s)} of latency timing{budget}"
    )


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"
