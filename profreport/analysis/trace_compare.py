"""Trace counts as a versioned JSON-ready document, and the comparison of traces to a baseline.

Pure functions: :class:`~profreport.analysis.kernels.TraceCounts` in, plain dicts out (the
``profreport.analysis/1`` schema read by ``profreport analyze --format json``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict
from typing import Any

from profreport.analysis.change import Change
from profreport.analysis.counters import derived
from profreport.analysis.kernel_diff import KernelSide, pair_kernels
from profreport.analysis.kernels import (
    CPU_DEFINITION_TEXT,
    DEVICE_DEFINITION_TEXT,
    UNRECORDED_FIELDS,
    KernelRow,
    TraceCounts,
    per_step,
)

SCHEMA = "profreport.analysis/1"
TOTAL_FIELDS = (
    "kernels",
    "memcpy",
    "memset",
    "launches",
    "graph_launches",
    "memcpy_bytes",
    "memset_bytes",
    "kernel_time_us",
    "unlinked_kernels",
)
PER_STEP_FIELDS = ("kernels", "launches", "memcpy", "memset", "graph_launches", "kernel_time_us")
DEFINITION_TEXT = {"device": DEVICE_DEFINITION_TEXT, "cpu": CPU_DEFINITION_TEXT}


def analysis_document(
    traces: list[tuple[str, TraceCounts]], top: int = 15, events: list[int] | None = None
) -> dict[str, Any]:
    """The whole ``analyze`` result: a summary per trace, later traces compared to the first.

    ``events``: how many events each trace held (after the ones no analysis reads were dropped).
    """
    summaries = [trace_summary(path, counts, top) for path, counts in traces]
    for summary, n in zip(summaries, events or [], strict=False):
        summary["events"] = n
    comparison = []
    if len(traces) > 1:
        base_path, base = traces[0]
        comparison = [compare_counts(base_path, base, path, c) for path, c in traces[1:]]
    used = sorted({c.definition for _, c in traces})
    return {
        "schema": SCHEMA,
        "traces": summaries,
        "comparison": comparison,
        "definitions": {d: DEFINITION_TEXT[d] for d in used},
    }


def trace_summary(path: str, counts: TraceCounts, top: int = 15) -> dict[str, Any]:
    """One trace's counts with its ``top`` kernels by time."""
    out: dict[str, Any] = {"path": path, "device": counts.device, "definition": counts.definition}
    out["definition_evidence"] = counts.evidence
    out["device_activity"] = counts.device_activity
    unknown = UNRECORDED_FIELDS if counts.device_activity == "not recorded" else frozenset()
    for name in TOTAL_FIELDS:
        out[name] = None if name in unknown else getattr(counts, name)
    out["notes"] = list(counts.notes)
    out["steps"] = [asdict(s) for s in counts.steps]
    out["per_step"] = per_step(counts)
    out["launch_api_counts"] = counts.launch_api_counts
    out["kernels_by_op"] = counts.kernels_by_op
    out["distinct_kernels"] = len(counts.table)
    out["top_kernels"] = [kernel_entry(r).to_json() for r in counts.table[:top]]
    if counts.inductor_kernels:
        out["inductor_kernels"] = counts.inductor_kernels
    if counts.counter_ranges:
        out["counter_ranges"] = counts.counter_ranges
    if counts.counters:
        out["counters"] = counts.counters
    return out


def kernel_entry(row: KernelRow, steps: int | None = None) -> KernelRow:
    """One kernel row as a record writes it: the one shape of `analyze`'s top kernels and the
    run record's kernel tables. With `steps` (a run's profiled steps), per-step calls and time
    are added and the row is marked as the profiler's; counter totals add the FLOPs and DRAM
    bytes derived from them."""
    entry = dataclasses.replace(row, counters=row.counters or None)
    if steps is not None:
        entry = dataclasses.replace(
            entry,
            calls_per_step=row.calls / steps,
            time_us_per_step=None if row.time_us is None else row.time_us / steps,
            source="profiler",
        )
    if row.counter_totals is not None:
        entry = entry.adding(**derived(row.counter_totals))
    return entry


def _delta(base: float | None, value: float | None) -> dict[str, Any]:
    """One count against the baseline; no difference stated when a side did not record it."""
    change = Change(base, value)
    delta = change.difference
    if isinstance(delta, float):
        delta = round(delta, 3)
    return {"baseline": base, "value": value, "delta": delta, "ratio": change.ratio}


def compare_counts(
    base_path: str, base: TraceCounts, path: str, other: TraceCounts
) -> dict[str, Any]:
    """Differences of ``other`` against ``base``: totals, per-step, per kernel, per launching op."""
    out: dict[str, Any] = {"baseline": base_path, "path": path}
    if base.definition != other.definition:
        out["note"] = (
            f"definitions differ ({base.definition} vs {other.definition}): "
            "the counts do not measure the same thing"
        )
    base_sum, other_sum = trace_summary(base_path, base, 0), trace_summary(path, other, 0)
    out["totals"] = {f: _delta(base_sum[f], other_sum[f]) for f in TOTAL_FIELDS}
    base_step, other_step = per_step(base), per_step(other)
    out["per_step"] = {f: _delta(base_step[f], other_step[f]) for f in PER_STEP_FIELDS}
    out["per_step"]["steps"] = {"baseline": base_step["steps"], "value": other_step["steps"]}
    out["kernels"] = _kernel_differences(base.table, other.table)
    out["launching_ops"] = _op_differences(base.kernels_by_op, other.kernels_by_op)
    return out


def _pairing_side(row: KernelRow) -> KernelSide:
    """What the kernel diff's strategies pair a trace's row by: its name and kind (a trace has
    no fusion map). The numbers reported are the row's own whole-trace totals."""
    return KernelSide(row.name, row.kind, calls_per_step=0.0, time_us_per_step=None)


def _kernel_differences(base: list[KernelRow], other: list[KernelRow]) -> list[dict[str, Any]]:
    """Kernels whose call count or time changed (including ones only one side has), paired by
    the kernel diff's strategies (analysis/kernel_diff: the name, else an Inductor-generated
    name without its counter); `matched_by` says which, `baseline_name` what base called it."""
    rows_of: dict[int, KernelRow] = {}
    sides: dict[str, list[KernelSide]] = {"base": [], "other": []}
    for which, table in (("base", base), ("other", other)):
        for row in table:
            side = _pairing_side(row)
            rows_of[id(side)] = row
            sides[which].append(side)
    pairs, only_base, only_other = pair_kernels(sides["base"], sides["other"])
    found: list[tuple[KernelRow | None, KernelRow | None, str | None]] = [
        (rows_of[id(b)], rows_of[id(o)], how) for b, o, how in pairs
    ]
    found += [(rows_of[id(b)], None, None) for b in only_base]
    found += [(None, rows_of[id(o)], None) for o in only_other]
    rows: list[dict[str, Any]] = []
    deltas: list[tuple[float, int]] = []
    for rb, ro, how in found:
        shown = ro if ro is not None else rb
        if shown is None:
            continue
        calls_b, calls_o = (rb.calls if rb else 0), (ro.calls if ro else 0)
        time_b, time_o = (rb.time_us if rb else 0.0), (ro.time_us if ro else 0.0)
        if rb is not None and ro is not None and calls_b == calls_o and time_b == time_o:
            continue
        dt = Change(time_b, time_o).difference
        rows.append(
            {
                "name": shown.name,
                "kind": shown.kind,
                "status": "removed" if ro is None else "added" if rb is None else "changed",
                "matched_by": how,
                "baseline_name": rb.name if rb is not None else None,
                "baseline_calls": calls_b,
                "calls": calls_o,
                "delta_calls": calls_o - calls_b,
                "baseline_time_us": time_b,
                "time_us": time_o,
                "delta_time_us": None if dt is None else round(dt, 3),
                "launched_by": shown.launched_by,
            }
        )
        deltas.append((abs(dt or 0.0), abs(calls_o - calls_b)))
    order = sorted(range(len(rows)), key=lambda i: (-deltas[i][0], -deltas[i][1], rows[i]["name"]))
    return [rows[i] for i in order]


def _op_differences(base: dict[str, int], other: dict[str, int]) -> list[dict[str, Any]]:
    """Kernels launched per CPU op, where the count differs."""
    changed = [
        (op, base.get(op, 0), other.get(op, 0))
        for op in base.keys() | other.keys()
        if base.get(op, 0) != other.get(op, 0)
    ]
    changed.sort(key=lambda r: (-abs(r[2] - r[1]), r[0]))
    return [{"op": op, "baseline_kernels": b, "kernels": o, "delta": o - b} for op, b, o in changed]
