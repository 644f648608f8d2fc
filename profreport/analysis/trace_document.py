"""The ``profreport.analysis/2`` document of ``profreport analyze`` as frozen dataclasses.

`AnalysisDocument.to_json()` writes the document `analyze --format json` prints; `parse` reads
one back (to re-render it), keeping its keys; an analysis/1 document is read too, its changes
(`{baseline, value, delta, ratio}` there) read as today's `Change`s. Its renderers read these
classes by attribute. Keys a writer leaves out (a comparison's `note`, a trace's `counters`) are
absent, not null: they are `omitted()` fields, written only when set.

Counter evidence (Inductor kernel records, CUPTI counter ranges, the per-kernel counter metrics)
stays JSON (`Mapping`): it is passed through as Kineto and the counter analysis write it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from profreport.analysis.change import Change
from profreport.analysis.kernel_diff import KernelChange
from profreport.analysis.kernels import PerStepCounts, StepCounts
from profreport.analysis.time_breakdown import TraceTimeBreakdown
from profreport.record.model import JSON, KernelRow, Section
from profreport.record.section import JSONObject, omitted, required, schema_of

SCHEMA = "profreport.analysis/2"
ANALYSIS_1 = "profreport.analysis/1"


@dataclass(frozen=True)
class CounterSummary(Section):
    """Trace-wide CUPTI counter totals (analysis.counters.summarize as written)."""

    source: str = ""
    ranges: int = 0
    totals: JSON = field(default_factory=dict)
    not_additive: tuple[str, ...] = ()
    flops: float | None = None
    dram_bytes_read: float | None = None
    dram_bytes_written: float | None = None
    flops_formula: str = ""
    dram_text: str = ""


@dataclass(frozen=True)
class TraceSummary(Section):
    """One trace: its counts, its top kernels, and where its time goes."""

    path: str = ""
    device: JSON = field(default_factory=dict)
    definition: str = ""
    definition_evidence: str = ""
    device_activity: str = ""
    kernels: int | None = None
    memcpy: int | None = None
    memset: int | None = None
    launches: int | None = None
    graph_launches: int | None = None
    memcpy_bytes: int | None = None
    memset_bytes: int | None = None
    kernel_time_us: float | None = None
    unlinked_kernels: int | None = None
    notes: tuple[str, ...] = ()
    steps: tuple[StepCounts, ...] = ()
    per_step: PerStepCounts = field(default_factory=PerStepCounts)
    launch_api_counts: Mapping[str, int] = field(default_factory=dict)
    kernels_by_op: Mapping[str, int] = field(default_factory=dict)
    distinct_kernels: int = 0
    top_kernels: tuple[KernelRow, ...] = ()  # trace_compare.kernel_entry, as a run writes rows
    inductor_kernels: tuple[JSON, ...] | None = omitted()
    counter_ranges: tuple[JSON, ...] | None = omitted()
    counters: CounterSummary | None = omitted()
    events: int | None = omitted()
    time_breakdown: TraceTimeBreakdown | None = omitted()


def count_change(base: float | None, head: float | None) -> Change:
    """A trace's number against the baseline's: its `Change`, a float difference written to 3
    places (no 0.19999999999999998; µs are shown to 2)."""
    found = Change.of(base, head)
    if isinstance(found.change, float):
        return replace(found, change=round(found.change, 3))
    return found


# The whole-trace counts a comparison states, and the per-step ones (in document order).
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
PER_STEP_FIELDS = tuple(f.name for f in schema_of(PerStepCounts) if f.name != "steps")


@dataclass(frozen=True)
class OpChange(Change):
    """Kernels launched by one CPU op in the baseline and in this trace, where they differ."""

    op: str = required("")


@dataclass(frozen=True)
class TimeChanges(Section):
    """Where the time goes, against the baseline: each part of the median step, the whole
    trace's device idle share, and the bound of each side."""

    baseline_bound: str | None = None
    bound: str | None = None
    idle_pct: Change | None = None
    step: Mapping[str, Change] = field(default_factory=dict)  # by TIME_PARTS name


@dataclass(frozen=True)
class TraceComparison(Section):
    """One trace against the baseline (the first trace)."""

    baseline: str = ""
    path: str = ""
    note: str | None = omitted()
    totals: Mapping[str, Change] = field(default_factory=dict)  # by TOTAL_FIELDS name
    # by PER_STEP_FIELDS name, and `steps`: the ProfilerSteps of each trace
    per_step: Mapping[str, Change] = field(default_factory=dict)
    # the kernels that differ, by impact (analysis/kernel_diff, over the whole trace), and how
    # many pairs its strategies found
    kernels: tuple[KernelChange, ...] = ()
    kernels_paired: int = 0
    launching_ops: tuple[OpChange, ...] = ()
    time_breakdown: TimeChanges | None = omitted()


@dataclass(frozen=True)
class AnalysisDocument(Section):
    """The whole ``analyze`` result: a summary per trace, later traces against the first."""

    SCHEMA: ClassVar[str] = SCHEMA
    EARLIER: ClassVar[tuple[str, ...]] = (ANALYSIS_1,)
    NOUN: ClassVar[str] = "trace analysis"

    schema: str = SCHEMA
    traces: tuple[TraceSummary, ...] = ()
    comparison: tuple[TraceComparison, ...] = ()
    definitions: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def upgraded(cls, data: JSONObject) -> JSONObject:
        """An analysis/1 document in today's shape: a change there was `{baseline, value,
        delta, ratio}` (a launching op's `{op, baseline_kernels, kernels, delta}`, the steps
        `{baseline, value}`), each read as the `Change` of its two numbers; a top kernel had no
        per-step keys (null today: a trace's row is over the whole trace)."""
        if data.get("schema") != ANALYSIS_1:
            return data
        new = {**data, "schema": SCHEMA}
        if isinstance(data.get("traces"), list):
            new["traces"] = [_trace_1(t) for t in data["traces"]]
        if isinstance(data.get("comparison"), list):
            new["comparison"] = [_comparison_1(c) for c in data["comparison"]]
        return new


def _trace_1(old: Any) -> Any:
    """One analysis/1 trace summary, its top kernels given today's null per-step keys."""
    if not isinstance(old, dict) or not isinstance(old.get("top_kernels"), list):
        return old
    per_step = {"calls_per_step": None, "time_us_per_step": None}
    rows = [{**per_step, **k} if isinstance(k, dict) else k for k in old["top_kernels"]]
    return {**old, "top_kernels": rows}


def _change_1(old: Any, base: str = "baseline", head: str = "value") -> Any:
    """One analysis/1 change as a `Change` (anything else as it is, for the shape check)."""
    if not isinstance(old, dict) or base not in old:
        return old
    numbers = (old[base], old.get(head))
    if not all(v is None or type(v) in (int, float) for v in numbers):
        return old
    rest = {k: v for k, v in old.items() if k not in (base, head, "delta", "ratio")}
    return {**rest, **count_change(*numbers).to_json()}


def _comparison_1(old: Any) -> Any:
    """One analysis/1 comparison with its changes read as `Change`s (only the keys it has)."""
    if not isinstance(old, dict):
        return old
    new = dict(old)
    for key in ("totals", "per_step"):
        if isinstance(old.get(key), dict):
            new[key] = {k: _change_1(v) for k, v in old[key].items()}
    if isinstance(old.get("launching_ops"), list):
        new["launching_ops"] = [
            _change_1(o, "baseline_kernels", "kernels") for o in old["launching_ops"]
        ]
    time = old.get("time_breakdown")
    if isinstance(time, dict):
        time = new["time_breakdown"] = dict(time)
        if "idle_pct" in time:
            time["idle_pct"] = _change_1(time["idle_pct"])
        if isinstance(time.get("step"), dict):
            time["step"] = {k: _change_1(v) for k, v in time["step"].items()}
    return new
