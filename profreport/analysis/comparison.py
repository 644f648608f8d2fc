"""What a comparison of two runs is: its thresholds, per-metric changes, regressions and the gate
outcome it shares with a comparison of two sweeps (`profreport.compare/2` as dataclasses).

The computation that fills them is analysis/compare.py; renderers (render/compare.py) and the
CLI's gate read these; `Comparison.to_json()` is the document `compare --format json` writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from profreport.analysis.change import Change
from profreport.analysis.kernel_diff import ModeKernelDiff
from profreport.analysis.machine_reference import MachineChange
from profreport.analysis.speedups import PairedGate
from profreport.record.section import Section, omitted, required, required_factory, schema_of

SCHEMA = "profreport.compare/2"


class CompareError(ValueError):
    """The two records cannot be compared (different model or device type); one line."""


class DifferentModels(CompareError):
    """The two records are of different models, and the caller did not ask to compare them."""


@dataclass(frozen=True)
class Thresholds(Section):
    """The gates applied (null: not gated)."""

    max_kernel_increase: int | None = None  # kernels per step, absolute
    max_bytes_increase_pct: float | None = None  # modeled read + written bytes per step
    max_latency_regression_pct: float | None = None  # latency median
    max_peak_memory_increase_pct: float | None = None  # peak memory of one call
    # a regular expression: a kernel that appears in head and matches it (re.search) regresses
    new_kernel_pattern: str | None = None
    # a latency the gate could not judge fails it too (CI jobs that want a decision)
    fail_on_inconclusive: bool | None = omitted()

    @property
    def any_set(self) -> bool:
        """Some gate is applied (`fail_on_inconclusive` is a rule about the others)."""
        return any(
            getattr(self, f.name) is not None
            for f in schema_of(Thresholds)
            if f.name != "fail_on_inconclusive"
        )


@dataclass(frozen=True)
class MetricChange(Change):
    """One metric of one mode in base and head (its `Change`), and whether it regressed."""

    metric: str = required("")  # kernels_per_step | launches_per_step | bytes_per_step
    # | latency_median_ms | peak_memory_bytes
    source: str = required("")  # profiler | modeled | measured
    base_ci95: tuple[float, float] | None = None
    head_ci95: tuple[float, float] | None = None
    limit: str | None = None  # the threshold applied, as text ("+2 kernels", "+5%")
    regression: bool = False
    note: str = ""
    # Set when the noise guard tripped: the gate neither passed nor failed this metric.
    inconclusive: str | None = None
    paired: PairedGate | None = None  # `ab`: head/base per-round ratio and its interval
    # two runs with machine references: the change with the machine's own move taken out
    # (shown for information; never gated on: the reference is a witness, not a divisor)
    relative_change_pct: float | None = None
    # latency: the head/base interval a call rests on, and the timing processes of each run
    ratio_ci95: tuple[float, float] | None = omitted()
    base_processes: int | None = omitted()
    head_processes: int | None = omitted()


@dataclass(frozen=True)
class ModeComparison(Section):
    """One mode of both runs: its statuses, metrics and kernel diff (both sides ran)."""

    mode: str
    base_status: str
    head_status: str
    metrics: list[MetricChange] = required_factory(list)
    kernel_diff: ModeKernelDiff | None = required(None, null=True)  # both ran: kernel by kernel

    def metric(self, name: str) -> MetricChange | None:
        return next((m for m in self.metrics if m.metric == name), None)


@dataclass(frozen=True)
class Regression(Section):
    """One gate that failed: where, on which metric, and the line that says so."""

    mode: str
    metric: str
    message: str


@dataclass(frozen=True)
class RunIdentity(Section):
    """Which run one side is: where it came from, when, with which torch, on which device."""

    label: str  # where the record came from (a path), as the caller names it
    created_utc: str | None
    torch: str | None
    device_name: str | None


class GateOutcome(Protocol):
    """What a gate reads of a comparison, of two runs or of two sweeps: its regressions and the
    latencies it could not judge (cli.common.gate_exit names both and exits on `regressed`)."""

    @property
    def regressions(self) -> Sequence[Regression]: ...

    @property
    def regressed(self) -> bool: ...

    @property
    def inconclusive(self) -> Sequence[str]:
        """One line for each latency the gate could not judge, naming where and why."""
        ...


def inconclusive_latencies(modes: Sequence[ModeComparison]) -> list[str]:
    """`<mode>: latency inconclusive: <why>` for each latency the gate could not judge."""
    return [
        f"{mc.mode}: latency inconclusive: {m.inconclusive}"
        for mc in modes
        for m in mc.metrics
        if m.inconclusive
    ]


@dataclass(frozen=True)
class Comparison(Section):
    """Two run records compared mode by mode (`profreport.compare/2`; compare/1, without the
    kernel rows' `time_ratio_vs_machine`, is read too): what `profreport compare --format json`
    writes for two runs, and `ab` beside its two runs."""

    SCHEMA: ClassVar[str] = SCHEMA
    EARLIER: ClassVar[tuple[str, ...]] = ("profreport.compare/1",)
    NOUN: ClassVar[str] = "run comparison"

    model: str
    device_type: str
    base: RunIdentity
    head: RunIdentity
    thresholds: Thresholds
    modes: list[ModeComparison]
    only_in_base: list[str]
    only_in_head: list[str]
    warnings: list[str]
    regressions: list[Regression]
    regressed: bool  # some gate failed: the command exits 1
    inconclusive: list[str]  # latencies the gates could not judge (inconclusive_latencies)
    # what differs between the two models (name, spec, parameters, inputs): one line each
    model_differences: list[str] = required_factory(list)
    # the two runs' machine references compared (analysis/machine_reference), None without
    # them or in `ab`; machine_note: its one line, or why latency could not be checked
    machine: MachineChange | None = required(None, null=True)
    machine_note: str = required("")
    schema: str = SCHEMA
