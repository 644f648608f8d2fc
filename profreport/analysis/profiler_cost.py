"""The profiler's own cost, measured and removed: a mode's step as the clock would have seen it
(pure functions over the record's evidence and the calibration's trace).

* **Calibration** (:func:`calibration_cost`): inside the light pass, on this machine, in this
  run: each round one step of N tensor additions and one empty step; one recorded event costs
  (a loop step's wall - N x an unprofiled addition - an empty step's wall) / the events the
  loop step recorded, and a step costs an empty step's wall (medians).
* **Removal** (:func:`median_step`): from every step of the light pass, each part loses the
  cost of the events charged to it (analysis/step_events: an event's cost lands in the range
  that holds it), Python the step's own cost too, none below zero; on a device trace the host
  parts lose theirs and the device's wait for the host shrinks by as much (at most to zero:
  a device that never waited hid the cost). Then each part is the median over the steps, so
  one slow step moves nothing.
* **Inferred ops**: where the mode's graph runs ops the profiler cannot see (TorchScript's
  ``prim::mkldnn_convolution``: the kernel table's rows from the optimized graph), the time
  inside their enclosing frames with no child event (the wrapper part) is theirs, inferred;
  it counts as kernel time, never as host overhead (the interpreter's own steps between the
  recorded ops fall in it too: an upper bound).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from profreport.analysis.step_events import PYTHON
from profreport.record.model import MedianStep, OkMode, ProfilerCost, StepTime, TimeBreakdown

CPU_PARTS = ("op_us", "dispatch_us", "wrapper_us", "python_us")
HOST_PARTS = ("launch_us", "runtime_us", "dispatch_us", "wrapper_us", "python_us")
DEVICE_PARTS = ("device_busy_us", "host_wait_us", "kernel_wait_us", "other_idle_us")
# StepTime.events keys (analysis/time_breakdown.HOST_PARTS, and Python) -> StepTime fields
EVENT_PARTS = {field.removesuffix("_us"): field for field in ("op_us", *HOST_PARTS)}


def calibration_cost(
    loops: Sequence[StepTime],
    empties: Sequence[StepTime],
    calls: int,
    unprofiled_call_us: Sequence[float],
) -> ProfilerCost:
    """The profiler's cost from the calibration's steps of the light pass (``loops``: ``calls``
    additions each; ``empties``: nothing) and the unprofiled additions' per-call times."""
    if not loops or not empties or not unprofiled_call_us:
        raise ValueError("the calibration recorded no loop step, no empty step or no block")
    loop_us = float(np.median([s.wall_us for s in loops]))
    empty_us = float(np.median([s.wall_us for s in empties]))
    events = float(np.median([sum((s.events or {}).values()) for s in loops]))
    call_us = float(np.median(unprofiled_call_us))
    per_event = max(0.0, (loop_us - calls * call_us - empty_us) / events) if events else 0.0
    return ProfilerCost(
        per_event_us=round(per_event, 4),
        per_step_us=round(empty_us, 3),
        op="aten::add",
        calls=calls,
        events_per_step=events,
        unprofiled_call_us=round(call_us, 4),
        profiled_step_us=round(loop_us, 3),
        steps=len(loops),
    )


def _removed(step: StepTime, cost: ProfilerCost | None) -> dict[str, float]:
    """µs to take out of each host part of one step (never more than the part holds)."""
    if cost is None or step.events is None:
        return {}
    out: dict[str, float] = {}
    for key, field in EVENT_PARTS.items():
        held = getattr(step, field)
        if held is None:
            continue
        want = step.events.get(key, 0) * cost.per_event_us
        if key == PYTHON:
            want += cost.per_step_us
        out[field] = min(float(held), want)
    return out


def _corrected(step: StepTime, cost: ProfilerCost | None) -> tuple[dict[str, float], float]:
    """One step's parts with the profiler's cost removed, and how much was removed from the
    step's length."""
    removed = _removed(step, cost)
    fields = CPU_PARTS if step.op_us is not None else (*HOST_PARTS, *DEVICE_PARTS)
    parts = {f: float(getattr(step, f) or 0.0) - removed.get(f, 0.0) for f in fields}
    host_removed = sum(removed.values())
    parts["wall_us"] = step.wall_us - host_removed
    if step.op_us is not None:
        return parts, host_removed
    waited = float(step.host_wait_us or 0.0)
    parts["host_wait_us"] = max(0.0, waited - host_removed)
    shrink = waited - parts["host_wait_us"]
    parts["device_span_us"] = float(step.device_span_us or step.wall_us) - shrink
    return parts, shrink


def median_step(breakdown: TimeBreakdown, inferred_ops: Sequence[str] = ()) -> MedianStep | None:
    """The mode's median step, the profiler's cost removed (module docstring); None without
    steps."""
    steps = breakdown.steps or (() if breakdown.step is None else (breakdown.step,))
    if not steps:
        return None
    cost = breakdown.profiler_cost
    corrected = [_corrected(s, cost) for s in steps]
    cpu = steps[0].op_us is not None

    def med(key: str) -> float:
        return float(np.median([parts[key] for parts, _ in corrected]))

    inferred = tuple(inferred_ops) if cpu else ()
    values: dict[str, float | int | str | None] = {
        "name": f"median of {len(steps)} step(s)",
        "dispatched_ops": int(np.median([s.dispatched_ops for s in steps])),
        "launches": int(np.median([s.launches for s in steps])),
    }
    inferred_us = 0.0
    if cpu:
        parts = {f: med(f) for f in CPU_PARTS}
        if inferred:
            inferred_us, parts["wrapper_us"] = parts["wrapper_us"], 0.0
        values.update(parts, wall_us=sum(parts.values()) + inferred_us)
        op, *host = CPU_PARTS  # the inferred ops stacked on the CPU kernels
        stacked = {op: parts[op], **({"inferred_us": inferred_us} if inferred else {})}
        stacked.update({key: parts[key] for key in host})
    else:
        stacked = {f: med(f) for f in DEVICE_PARTS}
        values.update({f: med(f) for f in HOST_PARTS}, **stacked)
        values.update(wall_us=med("wall_us"), device_span_us=sum(stacked.values()))
    return MedianStep(
        step=StepTime(**values),  # type: ignore[arg-type]
        parts=stacked,
        inferred_us=inferred_us,
        inferred_ops=inferred,
        removed_us=float(np.median([r for _, r in corrected])),
        profiled_us=float(np.median([s.wall_us for s in steps])),
        steps=len(steps),
        corrected=cost is not None and all(s.events is not None for s in steps),
    )


def mode_median_step(mode: OkMode) -> MedianStep | None:
    """`median_step` of a mode's time breakdown, with the ops its graph runs unseen."""
    tb = mode.time_breakdown
    return None if tb is None else median_step(tb, tuple(dict.fromkeys(mode.kernels.unrecorded)))


def kernel_time_per_call(breakdown: TimeBreakdown) -> Mapping[str, float]:
    """Each CPU kernel's time per call in the light pass's step of median kernel time, the cost
    of the events inside it removed (µs); empty where the record has no light pass kernels."""
    cost = breakdown.profiler_cost
    per_event = 0.0 if cost is None else cost.per_event_us
    return {
        k.name: max(0.0, k.time_us - k.events * per_event) / k.calls
        for k in breakdown.kernels or ()
        if k.calls > 0
    }
