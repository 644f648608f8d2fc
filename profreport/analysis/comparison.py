"""What a comparison of two runs is: its thresholds, per-metric changes, regressions and the gate
outcome it shares with a comparison of two sweeps (`profreport.compare/1` as dataclasses).

The computation that fills them is analysis/compare.py; renderers (render/compare.py) and the
CLI's gate read these.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field

from profreport.analysis.kernel_diff import ModeKernelDiff
from profreport.analysis.machine_reference import MachineChange
from profreport.record.section import JSONObject

SCHEMA = "profreport.compare/1"


class CompareError(ValueError):
    """The two records cannot be compared (different model or device type); one line."""


class DifferentModels(CompareError):
    """The two records are of different models, and the caller did not ask to compare them."""


@dataclass(frozen=True)
class Thresholds:
    max_kernel_increase: int | None = None  # kernels per step, absolute
    max_bytes_increase_pct: float | None = None  # modeled read + written bytes per step
    max_latency_regression_pct: float | None = None  # latency median
    max_peak_memory_increase_pct: float | None = None  # peak memory of one call
    # a regular expression: a kernel that appears in head and matches it (re.search) regresses
    new_kernel_pattern: str | None = None

    @property
    def any_set(self) -> bool:
        return any(
            v is not None
            for v in (
                self.max_kernel_increase,
                self.max_bytes_increase_pct,
                self.max_latency_regression_pct,
                self.max_peak_memory_increase_pct,
                self.new_kernel_pattern,
            )
        )


@dataclass(frozen=True)
class MetricChange:
    metric: str  # kernels_per_step | launches_per_step | bytes_per_step | latency_median_ms
    # | peak_memory_bytes
    source: str  # profiler | modeled | measured
    base: float | None
    head: float | None
    change: float | None  # head - base
    change_pct: float | None  # relative to base; None when base is 0 or a side is missing
    base_ci95: tuple[float, float] | None = None
    head_ci95: tuple[float, float] | None = None
    limit: str | None = None  # the threshold applied, as text ("+2 kernels", "+5%")
    regression: bool = False
    note: str = ""
    # Set when the noise guard tripped: the gate neither passed nor failed this metric.
    inconclusive: str | None = None
    paired: JSONObject | None = None  # `ab`: head/base per-round ratio and its interval
    # two runs with machine references: the change with the machine's own move taken out
    relative_change_pct: float | None = None


@dataclass(frozen=True)
class ModeComparison:
    mode: str
    base_status: str
    head_status: str
    metrics: list[MetricChange] = field(default_factory=list)
    kernel_diff: ModeKernelDiff | None = None  # both sides ran: kernel by kernel

    def metric(self, name: str) -> MetricChange | None:
        return next((m for m in self.metrics if m.metric == name), None)


@dataclass(frozen=True)
class Regression:
    mode: str
    metric: str
    message: str


@dataclass(frozen=True)
class RunIdentity:
    label: str  # where the record came from (a path), as the caller names it
    created_utc: str | None
    torch: str | None
    device_name: str | None


class GateOutcome(ABC):
    """What a gate reads of a comparison, of two runs or of two sweeps: its regressions and the
    latencies it could not judge (cli.common.gate_exit names both and exits on `regressed`)."""

    regressions: list[Regression]

    @property
    @abstractmethod
    def inconclusive(self) -> list[str]:
        """One line for each latency the gate could not judge, naming where and why."""

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def outcome(self) -> JSONObject:
        """The gate's outcome as the comparison documents end with it."""
        return {"regressed": self.regressed, "inconclusive": self.inconclusive}


@dataclass(frozen=True)
class Comparison(GateOutcome):
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
    # what differs between the two models (name, spec, parameters, inputs): one line each
    model_differences: list[str] = field(default_factory=list)
    # the two runs' machine references compared (analysis/machine_reference), None without
    # them or in `ab`; machine_note: its one line, or why latency could not be checked
    machine: MachineChange | None = None
    machine_note: str = ""

    @property
    def inconclusive(self) -> list[str]:
        """`<mode>: latency inconclusive: <why>` for each latency the gate could not judge."""
        return [
            f"{mc.mode}: latency inconclusive: {m.inconclusive}"
            for mc in self.modes
            for m in mc.metrics
            if m.inconclusive
        ]

    def to_dict(self) -> JSONObject:
        return {"schema": SCHEMA, **asdict(self, dict_factory=_fields), **self.outcome()}


def _fields(items: list[tuple[str, object]]) -> JSONObject:
    """A dataclass's fields as `asdict` writes them, less a Section's own bookkeeping (the kernel
    diff's rows are Sections: the analysis document writes them too)."""
    return {k: v for k, v in items if k not in ("json_keys", "extra")}
