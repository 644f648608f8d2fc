"""CUPTI per-kernel counters (``cuda_profiler_range`` events) and the figures they make exact.

Kineto's range profiler (``torch.profiler._ExperimentalConfig(profiler_metrics=[...],
profiler_measure_per_kernel=True)``, removed in PyTorch 2.14) writes one ``cuda_profiler_range``
event per kernel launch, named after the kernel (``__missing__`` when CUPTI ran out of names),
whose ``args`` are the counter values. Their timestamps are synthetic: Kineto divides the profiled
span evenly among the ranges (``CuptiRangeProfilerSession::addRangeEvents``), so a range's
duration is no kernel time. Pure functions; nothing here reads files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from profreport.record.section import JSONObject

SOURCE = "measured (CUPTI)"
# smsp__ (per sub-partition, summed) and sm__ name the same count; smsp__ wins when both are there.
FLOP_COUNTER_RE = re.compile(
    r"^(smsp|sm)__sass_thread_inst_executed_op_([hfd])(fma|add|mul)_pred_on\.sum$"
)
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"
FLOPS_FORMULA = (
    "FLOPs = 2 × (ffma + hfma + dfma) + (fadd + fmul + hadd + hmul + dadd + dmul), each term the "
    "counter smsp__sass_thread_inst_executed_op_<op>_pred_on.sum (sm__ when smsp__ is absent): "
    "thread-level instructions executed with the predicate on; an FMA is a multiply and an add. "
    "Tensor-core instructions are not in these counters, and a packed half2 instruction counts "
    "once, so half-precision work may be undercounted. Missing counters count as absent, not zero."
)
DRAM_TEXT = (
    "DRAM bytes = dram__bytes_read.sum and dram__bytes_write.sum, bytes the device memory "
    "actually moved for the kernel, measured (CUPTI)."
)


def is_additive(metric: str) -> bool:
    """A ``.sum`` counter adds up over launches; ``.avg``, ``.max``, ratios and rates do not."""
    return metric.endswith(".sum")


def flops(metrics: Mapping[str, float]) -> float | None:
    """FLOPs from the SASS instruction counters (see :data:`FLOPS_FORMULA`); ``None`` without any."""
    terms: dict[tuple[str, str], tuple[str, float]] = {}
    for name, value in metrics.items():
        m = FLOP_COUNTER_RE.match(name)
        if m is None:
            continue
        prefix, precision, op = m.groups()
        key = (precision, op)
        if key not in terms or prefix == "smsp":
            terms[key] = (prefix, value)
    found = sum((2.0 if op == "fma" else 1.0) * v for (_, op), (_, v) in terms.items())
    return found if terms else None


def derived(totals: Mapping[str, float]) -> dict[str, float]:
    """FLOPs and DRAM bytes from additive counter totals; keys only for what was recorded."""
    found = {
        "flops": flops(totals),
        "dram_bytes_read": totals.get(DRAM_READ),
        "dram_bytes_written": totals.get(DRAM_WRITE),
    }
    return {k: v for k, v in found.items() if v is not None}


def summarize(ranges: list[JSONObject]) -> JSONObject | None:
    """Trace-wide counter totals from :func:`kernel_records.counter_ranges` groups.

    Additive counters are summed over every range; the others cannot be added and are listed by
    name only (their per-kernel means are in the kernel rows).
    """
    if not ranges:
        return None
    totals: dict[str, float] = {}
    other: set[str] = set()
    for group in ranges:
        for name, value in group["totals"].items():
            totals[name] = totals.get(name, 0.0) + value
        other.update(k for k in group["metrics"] if not is_additive(k))
    return {
        "source": SOURCE,
        "ranges": sum(g["ranges"] for g in ranges),
        "totals": dict(sorted(totals.items())),
        "not_additive": sorted(other),
        **derived(totals),
        "flops_formula": FLOPS_FORMULA,
        "dram_text": DRAM_TEXT,
    }
