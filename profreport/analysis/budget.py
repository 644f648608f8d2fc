"""Kernel budgets: a run compared with its checked-in expectation (record/expectation.py; what a
run puts in it is analysis/budget_file.py). Pure: (expectation, run with findings) -> BudgetCheck.

Per mode of the run's device kind: a mode expected ok that did not run is a breach; kernels per
step (profiler) and modeled bytes per step are compared within their tolerances (exact and ±1%
by default); a fused group expected and found fewer times is a breach (a new one is reported);
kernels are compared by name, an Inductor-generated name without its graph prefix and counter,
paired by the kernel diff (analysis/kernel_diff.py): one that appeared, disappeared or changed
its calls per step is a breach; `min_speedup`, where a person set one, against the paired
speedup's 95% lower bound. A device kind or mode the file does not hold, and a mode it holds
that this run did not ask for, are reported, never breaches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from profreport.analysis.budget_file import fused_groups, kernels_by_name, union
from profreport.analysis.kernel_diff import KernelChange, KernelSide, MatchStrategy, diff_kernels
from profreport.record.expectation import (
    DEFAULT_TOLERANCES,
    DeviceExpectation,
    Expectation,
    KernelExpectation,
    ModeExpectation,
    Tolerances,
)
from profreport.record.model import ModeResult, OkMode, Run

BreachKind = Literal[
    "status", "kernels per step", "bytes per step", "fused group", "kernel", "speedup"
]
ModeOutcome = Literal["within budget", "over budget", "not in file", "not run"]
KernelStatus = Literal["appeared", "disappeared", "changed"]


@dataclass(frozen=True)
class Breach:
    """One way a mode is over its budget: what (`kind`, and the kernel or fused group's name in
    `subject`), expected and actual (numbers per step; a status as text; 0 calls for a kernel
    missing on one side), the tolerance applied, and where in the model it ran."""

    mode: str
    kind: BreachKind
    subject: str
    expected: float | str
    actual: float | str
    tolerance: float = 0.0  # kernels: count; bytes: percent; speedup: the minimum
    modules: tuple[str, ...] = ()
    kernel_status: KernelStatus | None = None  # a kernel: appeared, disappeared or changed
    error: str | None = None  # a mode that did not run: why


@dataclass(frozen=True)
class FusedGroupChange:
    """A fused group the run has more of than expected (new: none expected): reported."""

    mode: str
    eager_ops: str
    expected: int
    actual: int
    modules: tuple[str, ...]


@dataclass(frozen=True)
class ModeCheck:
    """One mode's outcome, its breaches, the kernel changes behind them (from the kernel diff,
    breaches or not) and the fused groups it gained; `note` says why a mode was not compared."""

    mode: str
    outcome: ModeOutcome
    breaches: tuple[Breach, ...] = ()
    kernel_changes: tuple[KernelChange, ...] = ()
    new_fused_groups: tuple[FusedGroupChange, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class BudgetCheck:
    """A run against its expectation file: one ModeCheck per mode of the run (then per mode the
    file holds that the run did not ask for), on the run's device kind."""

    source: str  # the expectation file, as given
    device: str  # the run's device kind
    modes: tuple[ModeCheck, ...]
    device_in_file: bool = True
    # what the file was written with, and this run's, where they differ (not compared: noted)
    torch_then: str | None = None
    torch_now: str | None = None
    device_then: str | None = None
    device_now: str | None = None

    @property
    def breaches(self) -> tuple[Breach, ...]:
        return tuple(b for m in self.modes for b in m.breaches)

    @property
    def passed(self) -> bool:
        return not self.breaches

    def count(self, outcome: ModeOutcome) -> int:
        return sum(m.outcome == outcome for m in self.modes)

    def kernels(self, status: KernelStatus) -> int:
        return sum(c.status == status for m in self.modes for c in m.kernel_changes)


# ---------------------------------------------------------------- the check


@dataclass(frozen=True)
class Allowed:
    """The tolerances in force for one mode (its own, else the file's, else the defaults)."""

    kernels_per_step: int
    bytes_pct: float
    kernel_names: int

    @classmethod
    def of(cls, *layers: Tolerances | None) -> Allowed:
        """The first value set, from the most specific layer to the defaults."""
        chain = [t for t in layers if t is not None] + [DEFAULT_TOLERANCES]
        kernels = next(t.kernels_per_step for t in chain if t.kernels_per_step is not None)
        bytes_pct = next(t.bytes_pct for t in chain if t.bytes_pct is not None)
        names = next(t.kernel_names for t in chain if t.kernel_names is not None)
        return cls(kernels, bytes_pct, names)


BY_NAME = (MatchStrategy("name", lambda k: k.name),)


def _sides(kernels: dict[str, KernelExpectation]) -> list[KernelSide]:
    return [
        KernelSide(name, "kernel", k.calls_per_step, None, modules=k.modules or ())
        for name, k in kernels.items()
    ]


def kernel_changes(
    expected: dict[str, KernelExpectation], actual: dict[str, KernelExpectation]
) -> tuple[KernelChange, ...]:
    """Kernels by name that appeared, disappeared or changed their calls per step (the kernel
    diff, paired by budget name, expected as base and the run as head)."""
    rows, _ = diff_kernels(_sides(expected), _sides(actual), BY_NAME)
    return tuple(r for r in rows if r.status in ("appeared", "disappeared", "changed"))


def _kernel_breach(mode: str, change: KernelChange, allowed: int) -> Breach:
    status: KernelStatus = "changed" if change.status == "time only" else change.status
    base, head = (0 if side is None else side.calls for side in (change.base, change.head))
    where = _places([change])
    return Breach(mode, "kernel", change.name, base, head, allowed, where, kernel_status=status)


def _places(changes: Iterable[KernelChange]) -> tuple[str, ...]:
    """Where the changed kernels ran (the run's side, else the file's)."""
    sides = (c.head or c.base for c in changes)
    return union(side.modules for side in sides if side is not None)


def _over_count(expected: float, actual: float, allowed: float) -> bool:
    return abs(actual - expected) > allowed


def _over_pct(expected: int, actual: int, pct: float) -> bool:
    if expected == 0:
        return actual != 0
    return abs(actual - expected) / expected * 100 > pct


def _speedup_breach(name: str, e: ModeExpectation, m: ModeResult) -> Breach | None:
    """A `min_speedup` the paired speedup's 95% lower bound does not reach (or no speedup)."""
    if e.min_speedup is None or name == "eager":  # eager is the reference
        return None
    speedup = m.speedup_vs_eager
    error: str | None
    actual: float | str
    if speedup is None:
        error = m.not_timed or "no paired timing against eager in this run"
        actual = "not timed"
    elif speedup.ci95[0] < e.min_speedup:
        error, actual = speedup.inconclusive, speedup.ci95[0]
    else:
        return None
    minimum = e.min_speedup
    return Breach(name, "speedup", "speedup vs eager", minimum, actual, minimum, error=error)


def _check_mode(name: str, e: ModeExpectation, m: ModeResult, allowed: Allowed) -> ModeCheck:
    if e.status != "ok":
        note = (
            f"runs now; the file expects it {e.status} (--update-expect records its counts)"
            if isinstance(m, OkMode)
            else ""
        )
        return ModeCheck(name, "within budget", note=note)
    if not isinstance(m, OkMode):
        breach = Breach(name, "status", "status", "ok", m.status, error=m.error)
        return ModeCheck(name, "over budget", (breach,))
    changes = kernel_changes(dict(e.kernels or {}), kernels_by_name(m))
    where = _places(changes)
    counted: tuple[tuple[BreachKind, int, int, Callable[[int, int, float], bool]], ...] = (
        ("kernels per step", e.kernels_per_step or 0, m.kernels.per_step, _over_count),
        ("bytes per step", e.bytes_per_step or 0, m.bytes.traffic, _over_pct),
    )
    tolerance: dict[BreachKind, float] = {
        "kernels per step": allowed.kernels_per_step,
        "bytes per step": allowed.bytes_pct,
    }
    breaches = [
        Breach(name, kind, kind, expected, actual, tolerance[kind], where)
        for kind, expected, actual, over in counted
        if over(expected, actual, tolerance[kind])
    ]
    actual_groups = fused_groups(m)
    for ops, group in (e.fused_groups or {}).items():
        found = actual_groups[ops].per_step if ops in actual_groups else 0
        if found < group.per_step:
            breaches.append(
                Breach(name, "fused group", ops, group.per_step, found, modules=group.modules or ())
            )
    gained = tuple(
        FusedGroupChange(name, ops, old.per_step if old else 0, group.per_step, group.modules or ())
        for ops, group in actual_groups.items()
        for old in [(e.fused_groups or {}).get(ops)]
        if old is None or group.per_step > old.per_step
    )
    if len(changes) > allowed.kernel_names:
        breaches += [_kernel_breach(name, c, allowed.kernel_names) for c in changes]
    speedup = _speedup_breach(name, e, m)
    breaches += [speedup] if speedup is not None else []
    outcome: ModeOutcome = "over budget" if breaches else "within budget"
    return ModeCheck(name, outcome, tuple(breaches), changes, gained)


def check_budget(expectation: Expectation, run: Run, source: str) -> BudgetCheck:
    """`run` (with findings: analysis.derive.derived_run) against `expectation`, read from
    `source`."""
    kind = run.device.type
    device: DeviceExpectation | None = expectation.devices.get(kind)
    if device is None:
        missing = tuple(ModeCheck(n, "not in file") for n in run.modes)
        return BudgetCheck(source, kind, missing, device_in_file=False)
    checks = []
    for name, mode in run.modes.items():
        expected = device.modes.get(name)
        if expected is None:
            checks.append(ModeCheck(name, "not in file"))
            continue
        allowed = Allowed.of(expected.tolerances, expectation.tolerances)
        checks.append(_check_mode(name, expected, mode, allowed))
    checks += [ModeCheck(n, "not run") for n in device.modes if n not in run.modes]
    torch_now, device_now = run.env.torch, run.device.name
    other_torch = device.torch is not None and device.torch != torch_now
    other_device = device.device is not None and device.device != device_now
    return BudgetCheck(
        source,
        kind,
        tuple(checks),
        torch_then=device.torch if other_torch else None,
        torch_now=torch_now if other_torch else None,
        device_then=device.device if other_device else None,
        device_now=device_now if other_device else None,
    )
