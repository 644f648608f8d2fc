"""Where a trace's time goes: pure, a loaded `Trace` in, frozen dataclasses out.

* **Device traces, whole trace**: as HTA 0.5 measures it (analysis/device_time): busy, idle,
  compute and non-compute time, each stream's idle split into host wait, kernel wait and other,
  and the launch overhead (time in launch calls, launch-to-start delay).
* **Per ProfilerStep** (record.model.StepTime): the host thread that recorded the step, each
  instant counted once, for the first of CPU kernel (cpu definition), launch call, other runtime
  call, dispatcher op, other profiled range (compiled-code wrappers, record_function ranges) that
  holds it, else Python (nothing profiled: the interpreter and unprofiled code); and on a device
  trace, the device's view of the step: its kernels, copies and fills (each in the step of its
  launch), busy = their union, idle split as HTA splits it, the leading and trailing gaps counted
  as host wait (the device waits for the host to start and to end the step). Without
  ProfilerSteps one window spans the busiest host thread.
* **Bound**, from the step of median wall time: device-bound when kernels (device busy, or CPU
  kernels) take at least 80% of it; else launch-bound when launching dominates (device: launch
  calls take at least half the host's time outside other runtime calls, or kernel wait is at
  least half the device's idle time; cpu: dispatcher time at least equals Python and wrapper
  time, the CPU's analogue of launching); else host-bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from profreport.analysis._intervals import clipped, layered_ns, merged
from profreport.analysis._linking import assign_to_spans, step_rows
from profreport.analysis.device_time import (
    KERNEL_WAIT_US,
    DeviceTime,
    LaunchOverhead,
    TraceTimes,
    category_rows,
    device_time,
    device_work_rows,
    gap_kinds,
    launch_calls,
    runtime_rows,
    us,
)
from profreport.analysis.kernel_definitions import LAUNCH_API_RE
from profreport.analysis.kernels import cpu_kernel_rows, dispatcher_mask
from profreport.analysis.step_events import ChargedEvents, charged_events
from profreport.record.model import KernelTime, Section, StepTime
from profreport.traceio import Trace
from profreport.traceio.categories import CPU_OP_CATS

DEVICE_BOUND_PCT = 80.0
LAUNCH_BOUND_SHARE = 0.5
ANNOTATION_CATS = frozenset({"user_annotation", "User annotation"})

Bound = Literal["host-bound", "launch-bound", "device-bound"]


@dataclass(frozen=True)
class BoundLabel(Section):
    label: Bound
    evidence: str


@dataclass(frozen=True)
class TraceTimeBreakdown(Section):
    """Everything :func:`time_breakdown` finds in one trace (one rank): `analyze`'s
    ``time_breakdown`` of each trace in its ``profreport.analysis/1`` document."""

    definition: str
    rank: int | None
    hta_rounding: bool
    device: DeviceTime | None
    launch: LaunchOverhead | None
    steps: tuple[StepTime, ...]
    typical: StepTime | None  # the step of median wall time (upper median)
    bound: BoundLabel | None
    notes: tuple[str, ...] = ()


class _LaneIndex:
    """One kind of host event, per lane sorted by start, for window queries that cost the
    window's events (plus the ranges open across its start), not the whole trace's."""

    def __init__(self, trace: Trace, rows: np.ndarray, times: TraceTimes) -> None:
        self._by_lane: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        rows = rows[np.lexsort((times.start[rows], trace.lane[rows]))]
        lanes = trace.lane[rows]
        cuts = np.flatnonzero(np.diff(lanes)) + 1
        for on in np.split(rows, cuts) if rows.size else ():
            end = times.end[on]
            lane = int(trace.lane[on[0]])
            self._by_lane[lane] = (times.start[on], end, np.maximum.accumulate(end))

    def overlapping(self, lane: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of the events on ``lane`` that overlap ``[lo, hi)``."""
        if lane not in self._by_lane:
            return _NONE, _NONE
        start, end, reach = self._by_lane[lane]
        first = int(np.searchsorted(reach, lo, side="right"))  # the first that reaches past lo
        last = int(np.searchsorted(start, hi, side="left"))
        s, e = start[first:last], end[first:last]
        keep = e > lo
        return s[keep], e[keep]

    def started(self, lane: int, lo: int, hi: int) -> int:
        """How many events on ``lane`` start in ``[lo, hi)``."""
        if lane not in self._by_lane:
            return 0
        start = self._by_lane[lane][0]
        return int(np.searchsorted(start, hi, "left") - np.searchsorted(start, lo, "left"))


_NONE = np.zeros(0, dtype=np.int64)
# The host parts of a step, in the order an instant held by several is counted.
HOST_PARTS = ("op", "launch", "runtime", "dispatch", "wrapper")


@dataclass(frozen=True)
class _HostEvents:
    """The host events the step breakdown reads, by part, and the ones it counts."""

    parts: tuple[_LaneIndex, ...]  # in HOST_PARTS order
    dispatcher: _LaneIndex  # every dispatcher op (kernels and bookkeeping)
    rows: tuple[np.ndarray, ...]  # each part's rows, in HOST_PARTS order

    @classmethod
    def of(cls, trace: Trace, definition: str, times: TraceTimes) -> _HostEvents:
        if definition not in ("device", "cpu"):
            raise ValueError(f"unknown definition {definition!r} (device or cpu)")
        ops = category_rows(trace, CPU_OP_CATS)
        annotations = np.setdiff1d(category_rows(trace, ANNOTATION_CATS), step_rows(trace))
        runtime = runtime_rows(trace)
        is_launch = trace.string_table_mask(LAUNCH_API_RE.match)[trace.name[runtime]]
        is_dispatcher = dispatcher_mask(trace, include_bookkeeping=True)[trace.name[ops]]
        kernels = cpu_kernel_rows(trace) if definition == "cpu" else _NONE
        rows = (
            kernels,
            runtime[is_launch],
            runtime[~is_launch],
            np.setdiff1d(ops[is_dispatcher], kernels),
            np.concatenate([ops[~is_dispatcher], annotations]),
        )
        return cls(
            tuple(_LaneIndex(trace, r, times) for r in rows),
            _LaneIndex(trace, ops[is_dispatcher], times),
            rows,
        )


def _step_times(
    trace: Trace,
    times: TraceTimes,
    definition: str,
    windows: list[tuple[str, int, int, int]],
    host: _HostEvents,
    charged: ChargedEvents | None,
) -> tuple[StepTime, ...]:
    device = definition == "device"
    work = device_work_rows(trace) if device else _NONE
    call_ts = step_of = _NONE
    if device:
        call = launch_calls(trace, work, runtime_rows(trace))
        call_ts = np.where(call >= 0, times.start[np.maximum(call, 0)], -1)
        starts = np.array([w[2] for w in windows], dtype=np.int64)
        ends = np.array([w[3] for w in windows], dtype=np.int64)
        order = np.argsort(starts, kind="stable")
        when = np.where(call >= 0, call_ts, times.start[work])
        assign = assign_to_spans(starts[order], ends[order], when)
        step_of = np.where(assign >= 0, order[np.maximum(assign, 0)], -1)
    out = []
    for i, (name, lane, lo, hi) in enumerate(windows):
        layers = [clipped(*index.overlapping(lane, lo, hi), lo, hi) for index in host.parts]
        parts = dict(zip(HOST_PARTS, layered_ns(layers), strict=True))
        wall = hi - lo
        values: dict[str, Any] = {
            "name": name,
            "wall_us": us(wall),
            "op_us": None if device else us(parts["op"]),
            "launch_us": us(parts["launch"]) if device else None,
            "runtime_us": us(parts["runtime"]) if device else None,
            "dispatch_us": us(parts["dispatch"]),
            "wrapper_us": us(parts["wrapper"]),
            "python_us": us(wall - sum(parts.values())),
            "dispatched_ops": host.dispatcher.started(lane, lo, hi),
            "launches": host.parts[1].started(lane, lo, hi),  # HOST_PARTS[1]: launch calls
        }
        if charged is not None:
            values["events"] = charged.counts(lane, lo, hi)
        if device:
            mine = step_of == i
            start, end = times.start[work[mine]], times.end[work[mine]]
            values.update(_device_step(start, end, call_ts[mine], lo, hi))
        out.append(StepTime(**values))
    return tuple(out)


def _device_step(
    start: np.ndarray, end: np.ndarray, call_ts: np.ndarray, lo: int, hi: int
) -> dict[str, float]:
    """The device's view of one step: busy, and idle split into host wait, kernel wait, other."""
    span_end = max(hi, int(end.max())) if end.size else hi
    ms, me = merged(start, end)
    host, kernel, other, busy = span_end - lo, 0, 0, 0  # no work: the device waited throughout
    if ms.size:
        # the call of the event that opens each busy interval (the earliest-starting one)
        order = np.argsort(start, kind="stable")
        opener = np.searchsorted(start[order], ms, side="left")
        opener_call = call_ts[order][opener]
        host, kernel, other = gap_kinds(
            ms[1:] - me[:-1], opener_call[1:], me[:-1], KERNEL_WAIT_US * 1000
        )
        host += max(int(ms[0]) - lo, 0) + max(span_end - int(me[-1]), 0)
        busy = int((me - ms).sum())
    return {
        "device_span_us": us(span_end - lo),
        "device_busy_us": us(busy),
        "host_wait_us": us(host),
        "kernel_wait_us": us(kernel),
        "other_idle_us": us(other),
    }


def _windows(trace: Trace, times: TraceTimes) -> tuple[list[tuple[str, int, int, int]], list[str]]:
    """(name, lane, start, end) of every ProfilerStep, or one window over the busiest host
    thread when the trace has none."""
    rows = step_rows(trace)
    rows = rows[np.argsort(times.start[rows], kind="stable")]
    if rows.size:
        names = [trace.strings[i] for i in trace.name[rows].tolist()]
        lanes, starts, ends = (a[rows].tolist() for a in (trace.lane, times.start, times.end))
        return list(zip(names, lanes, starts, ends, strict=True)), []
    host = np.concatenate([category_rows(trace, CPU_OP_CATS), runtime_rows(trace)])
    if not host.size:
        return [], ["no ProfilerStep and no host events: no per-step breakdown"]
    lanes = trace.lane[host]
    busiest = int(np.bincount(lanes, weights=times.end[host] - times.start[host]).argmax())
    on = host[lanes == busiest]
    lo, hi = int(times.start[on].min()), int(times.end[on].max())
    note = (
        "no ProfilerStep: one window from the first to the last host event on the busiest "
        f"host thread ({trace.lanes[busiest][1]})"
    )
    return [("whole trace", busiest, lo, hi)], [note]


def step_walls_us(trace: Trace) -> list[float]:
    """Each ProfilerStep's wall time (µs), in trace order."""
    return [us(int(trace.dur_ns[r])) for r in step_rows(trace).tolist()]


def typical_step(steps: tuple[StepTime, ...]) -> StepTime | None:
    """The step of median wall time (upper median: a step that really ran)."""
    ordered = sorted(steps, key=lambda s: s.wall_us)
    return ordered[len(ordered) // 2] if ordered else None


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else 0.0


def bound_of(step: StepTime) -> BoundLabel:
    """host-bound / launch-bound / device-bound for one step, with the numbers that decide it
    (thresholds in the module docstring)."""
    if step.op_us is not None:  # cpu definition: the ops are the device's work
        share = _pct(step.op_us, step.wall_us)
        head = f"CPU kernels {share:.0f}% of the {step.wall_us / 1000:.3g} ms step"
        if share >= DEVICE_BOUND_PCT:
            return BoundLabel("device-bound", f"{head} (>= {DEVICE_BOUND_PCT:.0f}%)")
        rest = step.python_us + step.wrapper_us
        facts = (
            f"{head} (< {DEVICE_BOUND_PCT:.0f}%); dispatcher {step.dispatch_us / 1000:.3g} ms "
            f"vs Python and wrappers {rest / 1000:.3g} ms"
        )
        if step.dispatch_us >= rest:
            return BoundLabel("launch-bound", f"{facts} (dispatch dominates)")
        return BoundLabel("host-bound", f"{facts} (Python and wrappers dominate)")
    span = step.device_span_us or step.wall_us
    busy = step.device_busy_us or 0.0
    share = _pct(busy, span)
    head = f"device busy {share:.0f}% of the {span / 1000:.3g} ms step"
    if share >= DEVICE_BOUND_PCT:
        return BoundLabel("device-bound", f"{head} (>= {DEVICE_BOUND_PCT:.0f}%)")
    idle = span - busy
    host_time = step.wall_us - (step.runtime_us or 0.0)
    launch = step.launch_us or 0.0
    kernel_wait = step.kernel_wait_us or 0.0
    facts = (
        f"{head} (< {DEVICE_BOUND_PCT:.0f}%); launch calls {launch / 1000:.3g} ms of "
        f"{host_time / 1000:.3g} ms host time outside runtime waits; kernel wait "
        f"{kernel_wait / 1000:.3g} ms of {idle / 1000:.3g} ms idle"
    )
    if launch >= LAUNCH_BOUND_SHARE * host_time or kernel_wait >= LAUNCH_BOUND_SHARE * idle:
        return BoundLabel("launch-bound", f"{facts} (launching dominates)")
    return BoundLabel("host-bound", f"{facts} (the device waits for the host)")


def _kernel_times(
    trace: Trace,
    times: TraceTimes,
    windows: list[tuple[str, int, int, int]],
    steps: tuple[StepTime, ...],
    kernels: np.ndarray,
    charged: ChargedEvents,
) -> tuple[KernelTime, ...]:
    """Each CPU kernel's calls, time and inside events in the step of median CPU kernel time
    (the lower median: its kernels sum to at most the median), longest first."""
    ops = [s.op_us or 0.0 for s in steps]
    median = int(np.argsort(ops, kind="stable")[(len(ops) - 1) // 2])
    _, lane, lo, hi = windows[median]
    inside = charged.inside_kernels()
    on = kernels[(trace.lane[kernels] == lane) & (times.start[kernels] >= lo)]
    on = on[times.start[on] < hi]
    found: dict[str, tuple[int, int, int]] = {}
    for row in on.tolist():
        name = trace.strings[trace.name[row]]
        calls, ns, events = found.get(name, (0, 0, 0))
        dur = int(times.end[row] - times.start[row])
        found[name] = (calls + 1, ns + dur, events + inside.get(row, 0))
    out = [
        KernelTime(name=name, calls=calls, time_us=us(ns), events=events, step=windows[median][0])
        for name, (calls, ns, events) in found.items()
    ]
    return tuple(sorted(out, key=lambda k: -k.time_us))


@dataclass(frozen=True)
class LabelledSteps:
    """The steps of a light pass that ran one thing (a mode, or the calibration's), each with
    its events by part, and (cpu) its CPU kernels in the step of median kernel time."""

    steps: tuple[StepTime, ...]
    kernels: tuple[KernelTime, ...] | None


def labelled_steps(
    trace: Trace, definition: str, labels: Mapping[str, str]
) -> dict[str, LabelledSteps]:
    """A light pass's steps by what ran in them (``labels``: ProfilerStep name -> label; steps
    without a label are not read), each step's events charged by part (analysis/step_events)."""
    times = TraceTimes.of(trace, hta_rounding=False)
    windows = [w for w in _windows(trace, times)[0] if w[0] in labels]
    host = _HostEvents.of(trace, definition, times)
    charged = charged_events(
        HOST_PARTS, host.rows, step_rows(trace), trace.lane, times.start, times.end
    )
    steps = _step_times(trace, times, definition, windows, host, charged)
    out = {}
    for label in dict.fromkeys(labels[w[0]] for w in windows):
        mine = [i for i, w in enumerate(windows) if labels[w[0]] == label]
        own_steps = tuple(steps[i] for i in mine)
        kernels = None
        if definition == "cpu":
            own_windows = [windows[i] for i in mine]
            kernels = _kernel_times(trace, times, own_windows, own_steps, host.rows[0], charged)
        out[label] = LabelledSteps(own_steps, kernels)
    return out


def time_breakdown(trace: Trace, definition: str, hta_rounding: bool = False) -> TraceTimeBreakdown:
    """Where ``trace``'s time goes under ``definition`` ("device" or "cpu", as the kernel count
    decided); ``hta_rounding`` rounds times to whole µs as HTA does (to reproduce its numbers)."""
    times = TraceTimes.of(trace, hta_rounding)
    device = launch = None
    if definition == "device":
        device, launch = device_time(trace, times, step_rows(trace))
    windows, notes = _windows(trace, times)
    host = _HostEvents.of(trace, definition, times)
    steps = _step_times(trace, times, definition, windows, host, None)
    typical = typical_step(steps)
    info = trace.metadata.get("distributedInfo")
    rank = info.get("rank") if isinstance(info, dict) else None
    return TraceTimeBreakdown(
        definition=definition,
        rank=rank if isinstance(rank, int) else None,
        hta_rounding=hta_rounding,
        device=device,
        launch=launch,
        steps=steps,
        typical=typical,
        bound=None if typical is None else bound_of(typical),
        notes=tuple(notes),
    )
