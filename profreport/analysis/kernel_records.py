"""Side records a trace may carry next to its events: device properties, Inductor kernel records,
CUPTI range-profiler counters. Pure functions over a :class:`Trace`."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from profreport.analysis.counters import is_additive
from profreport.record.section import JSONObject
from profreport.traceio import Trace

_ROCM_NAME_HINTS = ("AMD", "Radeon", "Instinct")
# Args of a cuda_profiler_range event that identify it rather than measure it.
_ID_ARGS = frozenset({"External id", "correlation", "device", "context", "stream", "Ev Idx"})


def device_info(
    trace: Trace, dev_rows: np.ndarray, launch_api_counts: dict[str, int], device: bool = False
) -> JSONObject:
    """Describe the device the trace ran on, from ``deviceProperties`` and the events themselves.

    ``kind`` is ``cpu`` when the trace holds no device activity and ``device`` is false, else
    ``rocm`` (HIP launch calls or an AMD device name) or ``cuda``.
    """
    props = trace.metadata.get("deviceProperties")
    props = [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    if not dev_rows.size and not device:
        info: JSONObject = {"kind": "cpu", "name": "CPU"}
        if props:
            info["accelerators_present"] = sorted({str(p.get("name")) for p in props})
        return info
    pids = (trace.lanes[i][0] for i in np.unique(trace.lane[dev_rows]))
    used = sorted({v for v in pids if type(v) is int and v >= 0})
    chosen = next((p for p in props if p.get("id") in used), props[0] if props else {})
    name = chosen.get("name")
    hip = any(api.startswith("hip") for api in launch_api_counts)
    rocm = hip or any(h in str(name or "") for h in _ROCM_NAME_HINTS)
    info = {"kind": "rocm" if rocm else "cuda", "name": name, "device_ids": used}
    if props:
        info["count"] = len(props)
    if "computeMajor" in chosen:
        info["compute_capability"] = f"{chosen.get('computeMajor')}.{chosen.get('computeMinor', 0)}"
    keys = {"totalGlobalMem": "total_memory_bytes", "numSms": "num_sms", "warpSize": "warp_size"}
    info.update({dst: chosen[src] for src, dst in keys.items() if src in chosen})
    return info


def inductor_records(trace: Trace) -> list[JSONObject]:
    """Inductor kernel records (cpu_op events carrying ``kernel_backend``), one per kernel name."""
    out: dict[str, JSONObject] = {}
    for row, args in trace.extra_args.items():
        backend = args.get("kernel_backend")
        if backend is None:
            continue
        name = trace.strings[trace.name[row]]
        rec = out.get(name)
        if rec is None:
            rec = out[name] = {
                "name": name,
                "backend": str(backend),
                "file": args.get("kernel_file"),
                "hash": args.get("kernel_hash"),
                "calls": 0,
                "time_us": 0.0,
            }
        rec["calls"] += 1
        rec["time_us"] += max(int(trace.dur_ns[row]), 0) / 1000.0
    return sorted(out.values(), key=lambda r: (-r["time_us"], r["name"]))


def counter_ranges(trace: Trace) -> list[JSONObject]:
    """``cuda_profiler_range`` events grouped by name: range count, mean of each metric, and the
    sum over ranges of each additive (``.sum``) metric."""
    cat_id = trace.string_id("cuda_profiler_range")
    if cat_id < 0:
        return []
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, int] = defaultdict(int)
    for row, args in trace.extra_args.items():
        if trace.cat[row] != cat_id:
            continue
        name = trace.strings[trace.name[row]]
        counts[name] += 1
        for key, value in args.items():
            numeric = isinstance(value, int | float) and not isinstance(value, bool)
            if numeric and key not in _ID_ARGS:
                sums[name][key] += float(value)
    return [
        {
            "name": name,
            "ranges": n,
            "metrics": {k: v / n for k, v in sorted(sums[name].items())},
            "totals": {k: v for k, v in sorted(sums[name].items()) if is_additive(k)},
        }
        for name, n in sorted(counts.items())
    ]
