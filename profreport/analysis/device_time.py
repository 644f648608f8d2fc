"""A device trace's time as HTA 0.5 measures it (`get_temporal_breakdown`,
`get_idle_time_breakdown`): pure, a loaded `Trace` in, frozen dataclasses out.

The window runs from the first device event's start to the last one's end; when the trace has two
or more distinct ProfilerStep names, only device events whose launch call began before the last
step began count (HTA drops the last step as possibly incomplete; an event with no launch call
found is dropped then too). Device events are kernels, copies and fills, and a stream's sync
records (``cuda_sync`` on a stream), which HTA counts as non-compute time. Idle = window - union
of them; compute = union of the kernels that are not communication (``nccl…Kernel``) or memory
(``…Memcpy…``, ``Memset…``, ``…Sync…``) by name; non-compute = the rest of the union. Per stream
(kernels, copies, fills; no sync records), each gap between consecutive events is host wait when
the next event's launch call began after the previous event ended, else kernel wait when shorter
than 30 µs (HTA's default ``consecutive_kernel_delay=30``, documented as ns but compared with the
trace's µs), else other. Times are exact (ns); HTA rounds every start up and every end down to a
whole µs, which ``TraceTimes.of(trace, hta_rounding=True)`` reproduces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from profreport.analysis._intervals import covered_ns
from profreport.analysis._linking import link_by_flow, match_ids
from profreport.analysis.kernel_definitions import KIND_CODE, LAUNCH_API_RE
from profreport.record.model import Section
from profreport.traceio import Trace
from profreport.traceio.categories import DEVICE_KINDS, RUNTIME_CATS

KERNEL_WAIT_US = 30.0
SYNC_CAT = "cuda_sync"
# Names HTA never counts as compute: communication, memory and sync by name.
_NOT_COMPUTE_RE = re.compile(r"^(?:nccl.*Kernel|.*Memcpy|Memset|.*Sync|dma)")


@dataclass(frozen=True)
class StreamTime(Section):
    """One stream's idle time as HTA's `get_idle_time_breakdown` splits it (µs)."""

    device: Any  # the device (pid of the stream's lane)
    stream: Any  # the stream (tid of its lane)
    events: int
    busy_us: float
    idle_us: float
    host_wait_us: float
    kernel_wait_us: float
    other_us: float


@dataclass(frozen=True)
class DeviceTime(Section):
    """The whole trace's device time as HTA's `get_temporal_breakdown` splits it (µs)."""

    window: str
    span_us: float
    busy_us: float  # union of kernels, copies, fills and stream sync records
    compute_us: float
    non_compute_us: float
    sync_us: float  # the part of non-compute that is sync records alone
    idle_us: float
    idle_pct: float
    compute_pct: float
    non_compute_pct: float
    host_wait_us: float  # summed over streams
    kernel_wait_us: float
    other_us: float
    streams: tuple[StreamTime, ...]


@dataclass(frozen=True)
class LaunchOverhead(Section):
    """Launch calls in the window and how long after its call each kernel started (µs)."""

    launches: int
    call_us: float  # total time inside launch calls
    call_median_us: float | None
    delay_median_us: float | None  # kernel start - launch call start
    delay_p90_us: float | None
    kernels_linked: int


def us(ns: float) -> float:
    return round(float(ns) / 1000.0, 3)


@dataclass(frozen=True)
class TraceTimes:
    """Every row's start and end (ns), rounded as HTA rounds when asked."""

    start: np.ndarray
    end: np.ndarray

    @classmethod
    def of(cls, trace: Trace, hta_rounding: bool) -> TraceTimes:
        start = trace.ts_ns.copy()
        end = start + np.maximum(trace.dur_ns, 0)
        if hta_rounding:
            start = -((-start) // 1000) * 1000
            end = np.maximum((end // 1000) * 1000, start)
        return cls(start, end)


def category_rows(trace: Trace, cats: frozenset[str] | set[str]) -> np.ndarray:
    mask = trace.string_table_mask(lambda c: c in cats)
    return np.flatnonzero((trace.ph == ord("X")) & mask[trace.cat] & (trace.dur_ns >= 0))


def runtime_rows(trace: Trace) -> np.ndarray:
    return category_rows(trace, {c for c in trace.strings if c.lower() in RUNTIME_CATS})


def device_work_rows(trace: Trace) -> np.ndarray:
    """Rows of kernels, copies and fills (complete events with a duration)."""
    return category_rows(trace, frozenset(DEVICE_KINDS))


def launch_calls(trace: Trace, rows: np.ndarray, runtime: np.ndarray) -> np.ndarray:
    """The runtime call of each device row (correlation id, then ac2g flow); -1: none found."""
    call = match_ids(trace.correlation[rows], trace.correlation[runtime], runtime)
    link_by_flow(trace, rows, call, runtime)
    return call


def hta_window(trace: Trace, steps: np.ndarray, times: TraceTimes) -> tuple[int | None, str]:
    """The time before which launch calls count (None: every device event counts), in words."""
    names = {trace.strings[i] for i in trace.name[steps].tolist()}
    if len(names) < 2:
        return None, "first to last device event (fewer than two ProfilerSteps: whole trace)"
    last = int(times.start[steps].max())
    return last, (
        "first to last device event launched before the last ProfilerStep began "
        "(HTA's window: the last step is dropped)"
    )


def gap_kinds(
    gaps: np.ndarray, call_ts: np.ndarray, prev_end: np.ndarray, threshold_ns: float
) -> tuple[int, int, int]:
    """(host wait, kernel wait, other) ns of ``gaps`` before events launched at ``call_ts``
    (-1: no call found, which is never host wait) after events ending at ``prev_end``."""
    host = (call_ts >= 0) & (call_ts > prev_end)
    kernel = ~host & (gaps < threshold_ns)
    other = ~host & ~kernel
    return int(gaps[host].sum()), int(gaps[kernel].sum()), int(gaps[other].sum())


def device_time(
    trace: Trace, times: TraceTimes, steps: np.ndarray
) -> tuple[DeviceTime | None, LaunchOverhead | None]:
    runtime = runtime_rows(trace)
    work = device_work_rows(trace)
    sync = category_rows(trace, {SYNC_CAT})
    on_stream = np.array([isinstance(t, int) and t >= 0 for _, t in trace.lanes], dtype=bool)
    sync = sync[on_stream[trace.lane[sync]]] if sync.size else sync
    rows = np.concatenate([work, sync])
    call = launch_calls(trace, rows, runtime)
    before, window = hta_window(trace, steps, times)
    if before is not None:
        keep = (call >= 0) & (times.start[np.maximum(call, 0)] < before)
        rows, call = rows[keep], call[keep]
    if not rows.size:
        return None, None
    start, end = times.start[rows], times.end[rows]
    is_work = np.isin(rows, work)
    span = int(end.max() - start.min())
    busy = covered_ns(start, end)
    code = np.array([KIND_CODE.get(DEVICE_KINDS.get(s, ""), 0) for s in trace.strings])
    kernel = is_work & (code[trace.cat[rows]] == KIND_CODE["kernel"])
    not_compute = trace.string_table_mask(_NOT_COMPUTE_RE.match)
    compute = kernel & ~not_compute[trace.name[rows]]
    compute_ns = covered_ns(start[compute], end[compute])
    work_ns = covered_ns(start[is_work], end[is_work])
    call_ts = np.where(call >= 0, times.start[np.maximum(call, 0)], -1)
    streams = _streams(trace, rows[is_work], start[is_work], end[is_work], call_ts[is_work])
    idle = span - busy

    def pct(ns: int) -> float:
        return round(100.0 * ns / span, 2) if span else 0.0

    device = DeviceTime(
        window=window,
        span_us=us(span),
        busy_us=us(busy),
        compute_us=us(compute_ns),
        non_compute_us=us(busy - compute_ns),
        sync_us=us(busy - work_ns),
        idle_us=us(idle),
        idle_pct=pct(idle),
        compute_pct=pct(compute_ns),
        non_compute_pct=pct(busy - compute_ns),
        host_wait_us=round(sum(s.host_wait_us for s in streams), 3),
        kernel_wait_us=round(sum(s.kernel_wait_us for s in streams), 3),
        other_us=round(sum(s.other_us for s in streams), 3),
        streams=streams,
    )
    launch_name = trace.string_table_mask(LAUNCH_API_RE.match)
    launches = runtime[launch_name[trace.name[runtime]]]
    if before is not None:
        launches = launches[times.start[launches] < before]
    linked = kernel & (call >= 0)
    delay = (start[linked] - call_ts[linked]) / 1000.0
    durs = (times.end[launches] - times.start[launches]) / 1000.0
    launch = LaunchOverhead(
        launches=int(launches.size),
        call_us=round(float(durs.sum()), 3),
        call_median_us=round(float(np.median(durs)), 3) if durs.size else None,
        delay_median_us=round(float(np.median(delay)), 3) if delay.size else None,
        delay_p90_us=round(float(np.percentile(delay, 90)), 3) if delay.size else None,
        kernels_linked=int(linked.sum()),
    )
    return device, launch


def _streams(
    trace: Trace, rows: np.ndarray, start: np.ndarray, end: np.ndarray, call_ts: np.ndarray
) -> tuple[StreamTime, ...]:
    out = []
    lanes = trace.lane[rows]
    for lane in np.unique(lanes).tolist():
        on = np.flatnonzero(lanes == lane)
        on = on[np.argsort(start[on], kind="stable")]
        s, e, c = start[on], end[on], call_ts[on]
        gaps = s[1:] - e[:-1]
        host, kernel, other = gap_kinds(gaps, c[1:], e[:-1], KERNEL_WAIT_US * 1000)
        pid, tid = trace.lanes[lane]
        out.append(
            StreamTime(
                device=pid,
                stream=tid,
                events=int(on.size),
                busy_us=us(covered_ns(s, e)),
                idle_us=us(int(gaps.sum())),
                host_wait_us=us(host),
                kernel_wait_us=us(kernel),
                other_us=us(other),
            )
        )
    return tuple(sorted(out, key=lambda st: (str(st.device), str(st.stream))))
