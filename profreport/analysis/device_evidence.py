"""Which kernel definition a trace calls for, and the evidence, in words; how CUPTI counter
ranges, which carry no correlation id, are tied to their launch calls. Pure functions."""

from __future__ import annotations

import numpy as np

from profreport.traceio import Trace

COUNTER_RANGE_CAT = "cuda_profiler_range"
COUNTER_KERNELS_NOTE = (
    "This trace holds CUPTI per-kernel counter ranges (cuda_profiler_range) and no kernel events: "
    "each range is one kernel launch and is counted as a kernel. Kernel time is not shown: Kineto "
    "gives the ranges synthetic timestamps (the profiled span divided evenly among them), so "
    "their durations measure nothing."
)
NOT_RECORDED_NOTE = (
    "Device activity was not recorded: the trace holds launch calls but no device-side events "
    "(no kernel, memcpy, memset or counter-range events), so kernel, memcpy and memset counts "
    "and kernel time are unknown, not zero. Profile with ProfilerActivity.CUDA to record them."
)


def device_evidence(
    trace: Trace, dev_codes: np.ndarray, range_rows: np.ndarray, launch_rows: np.ndarray
) -> tuple[str, bool]:
    """What in the trace shows device work, in words, and whether anything does."""
    parts = []
    for code, what in ((1, "kernel"), (2, "memcpy"), (3, "memset")):
        n = int(np.count_nonzero(dev_codes == code))
        if n:
            parts.append(f"{n:,} {what} event{'s' if n != 1 else ''}")
    if range_rows.size:
        parts.append(f"{range_rows.size:,} cuda_profiler_range events (CUPTI counters)")
    if launch_rows.size:
        parts.append(f"{launch_rows.size:,} launch call{'s' if launch_rows.size != 1 else ''}")
    gpus = _gpu_names(trace)
    if parts:
        text = ", ".join(parts)
        if gpus:
            text += f"; deviceProperties lists {', '.join(gpus)}"
        return text, True
    if gpus:
        return (
            f"no device events and no launch calls; deviceProperties lists {', '.join(gpus)}, "
            "which Kineto writes into every trace of a CUPTI build, CPU-only profiles included "
            "(if the model ran on the GPU with only CPU activity profiled, these counts are "
            "CPU operators, not GPU kernels)"
        ), False
    return "no device events, no launch calls, no GPU in deviceProperties", False


def _gpu_names(trace: Trace) -> list[str]:
    props = trace.metadata.get("deviceProperties")
    if not isinstance(props, list):
        return []
    names = [str(p.get("name")) for p in props if isinstance(p, dict) and p.get("name")]
    counted = {n: names.count(n) for n in names}
    return [f"{n} × {c}" if c > 1 else n for n, c in counted.items()]


def pair_ranges_with_launches(
    trace: Trace, range_rows: np.ndarray, launch_rows: np.ndarray, is_graph: np.ndarray
) -> np.ndarray | None:
    """The launch call of each counter range, by order, or ``None`` when no pairing is sound.

    Counter ranges carry no correlation id. In auto-range kernel replay CUPTI profiles kernels
    one at a time in launch order, so the i-th range (by time) is the i-th launch call: HTA's
    CUPTI counter analysis pairs them the same way, and only when the counts are equal. A graph
    launch runs several kernels, and ranges of several devices have no common order: no pairing.
    """
    # is_graph: per launch row, a graph launch
    if range_rows.size != launch_rows.size or not range_rows.size or is_graph.any():
        return None
    if len({trace.lanes[i][0] for i in np.unique(trace.lane[range_rows]).tolist()}) > 1:
        return None
    by_time = launch_rows[np.argsort(trace.ts_ns[launch_rows], kind="stable")]
    out = np.empty(range_rows.size, dtype=np.int64)
    out[np.argsort(trace.ts_ns[range_rows], kind="stable")] = by_time
    return out
