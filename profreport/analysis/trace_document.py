"""The ``profreport.analysis/1`` document of ``profreport analyze`` as frozen dataclasses.

`AnalysisDocument.to_json()` writes the document `analyze --format json` prints; `from_json`
reads one back (to re-render it), keeping its keys. Its renderers read these
classes by attribute. Keys a writer leaves out (a comparison's `note`, a trace's `counters`) are
absent, not null: they are `omitted()` fields, written only when set.

Counter evidence (Inductor kernel records, CUPTI counter ranges, the per-kernel counter metrics)
stays JSON (`Mapping`): it is passed through as Kineto and the counter analysis write it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from profreport.analysis.kernel_diff import KernelChange
from profreport.analysis.kernels import PerStepCounts, StepCounts
from profreport.analysis.time_breakdown import TraceTimeBreakdown
from profreport.record.model import JSON, KernelRow, Section
from profreport.record.section import omitted, schema_of

SCHEMA = "profreport.analysis/1"


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


@dataclass(frozen=True)
class CountChange(Section):
    """One number of a trace against the baseline's (analysis.change.Change as written)."""

    baseline: float | None = None
    value: float | None = None
    delta: float | None = None
    ratio: float | None = None


@dataclass(frozen=True)
class StepsPair(Section):
    baseline: int = 0
    value: int = 0


@dataclass(frozen=True)
class TotalChanges(Section):
    kernels: CountChange = field(default_factory=CountChange)
    memcpy: CountChange = field(default_factory=CountChange)
    memset: CountChange = field(default_factory=CountChange)
    launches: CountChange = field(default_factory=CountChange)
    graph_launches: CountChange = field(default_factory=CountChange)
    memcpy_bytes: CountChange = field(default_factory=CountChange)
    memset_bytes: CountChange = field(default_factory=CountChange)
    kernel_time_us: CountChange = field(default_factory=CountChange)
    unlinked_kernels: CountChange = field(default_factory=CountChange)


@dataclass(frozen=True)
class PerStepChanges(Section):
    kernels: CountChange = field(default_factory=CountChange)
    launches: CountChange = field(default_factory=CountChange)
    memcpy: CountChange = field(default_factory=CountChange)
    memset: CountChange = field(default_factory=CountChange)
    graph_launches: CountChange = field(default_factory=CountChange)
    kernel_time_us: CountChange = field(default_factory=CountChange)
    steps: StepsPair = field(default_factory=StepsPair)


# The whole-trace counts a comparison states, and the per-step ones (in document order).
TOTAL_FIELDS = tuple(f.name for f in schema_of(TotalChanges))
PER_STEP_FIELDS = tuple(f.name for f in schema_of(PerStepChanges) if f.name != "steps")


@dataclass(frozen=True)
class OpChange(Section):
    """Kernels launched by one CPU op, where the count differs."""

    op: str = ""
    baseline_kernels: int = 0
    kernels: int = 0
    delta: int = 0


@dataclass(frozen=True)
class TimeChanges(Section):
    """Where the time goes, against the baseline: each part of the median step, the whole
    trace's device idle share, and the bound of each side."""

    baseline_bound: str | None = None
    bound: str | None = None
    idle_pct: CountChange | None = None
    step: Mapping[str, CountChange] = field(default_factory=dict)


@dataclass(frozen=True)
class TraceComparison(Section):
    """One trace against the baseline (the first trace)."""

    baseline: str = ""
    path: str = ""
    note: str | None = omitted()
    totals: TotalChanges = field(default_factory=TotalChanges)
    per_step: PerStepChanges = field(default_factory=PerStepChanges)
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
    NOUN: ClassVar[str] = "trace analysis"

    schema: str = SCHEMA
    traces: tuple[TraceSummary, ...] = ()
    comparison: tuple[TraceComparison, ...] = ()
    definitions: Mapping[str, str] = field(default_factory=dict)
