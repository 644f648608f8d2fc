"""The kernel diff: which kernels appeared, disappeared or changed between base and head.

Pure functions over two kernel tables: a run mode's (`compare`, `ab`: per profiled step) or a
trace's (`analyze A B`: over the whole trace); one row type for both, which the
`profreport.analysis/2` document writes as it is. Rows are paired by a list of
strategies tried in order, each a key on one kernel: the exact name; the eager ops the kernel
computes (the fusion map: Inductor names its generated kernels after the ops and a counter that
moves between builds, `cpp_fused_add_gelu_0` vs `_1`); the generated name without that counter
(traces, which have no fusion map). Every row says which strategy paired it. Rows are ordered by
impact: rows whose work changed (appeared, disappeared, other calls or bytes per step) first, then
those whose only difference is profiler time; each group by |Δ time| then |Δ bytes|.

Each mode's diff carries the fusion changes behind its rows (analysis/fusion_changes.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

from profreport.analysis.change import difference
from profreport.analysis.fusion import sum_known
from profreport.analysis.fusion_changes import FusionChange, fusion_changes
from profreport.record.model import FusionMap, OkMode, Section
from profreport.record.section import omitted, required

MatchedBy = Literal["name", "eager ops", "generated name", "module"]
RowStatus = Literal["appeared", "disappeared", "changed", "time only"]

MODELED = "modeled"
MEASURED = "measured (Nsight Compute DRAM)"
TIME_SOURCE = "profiler"


@dataclass(frozen=True)
class KernelSide(Section):
    """One kernel row of one side: its calls, profiler time and bytes (per profiled step in a
    run's diff, over the whole trace in a trace's), and the eager ops it computes (from the
    mode's fusion map; () where there is none)."""

    name: str = required("")
    kind: str = required("")  # kernel | memcpy | memset | cpu
    calls: float = required(0.0)
    time_us: float | None = required(None, null=True)  # profiler time
    modeled_bytes: int | None = omitted()  # read + written (analysis/kernel_bytes)
    bytes_shared_by: int | None = omitted()  # kernels sharing one operation's modeled bytes
    measured_bytes: int | None = omitted()  # Nsight Compute's DRAM read + written
    eager_ops: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()  # where in the model (analysis/attribution); () not recorded
    launched_by: str | None = omitted()  # a trace's row: the op that launched the kernel


@dataclass(frozen=True)
class KernelChange(Section):
    """One kernel in base and/or head, how the two were paired, and head - base (a missing
    side counts as zero calls, time and bytes; None where a present side has no number)."""

    status: RowStatus = required("changed")
    # how base's row was paired with head's; None: only one side has the kernel
    matched_by: MatchedBy | None = required(None, null=True)
    base: KernelSide | None = required(None, null=True)
    head: KernelSide | None = required(None, null=True)
    calls_change: float = required(0.0)
    time_us_change: float | None = required(None, null=True)
    bytes_change: int | None = omitted()
    bytes_source: str | None = omitted()  # modeled | measured (both sides measured)
    # where the runs' machine references differ (analysis/machine_reference; compare/2)
    time_ratio_vs_machine: float | None = omitted()  # head/base time over the machine's move

    @property
    def name(self) -> str:
        side = self.head or self.base
        if side is None:
            raise ValueError("a kernel change with neither side")
        return side.name


@dataclass(frozen=True)
class ModeKernelDiff(Section):
    """One mode's kernel diff: the rows that differ in work or time, ordered by impact, how many
    were paired, and the fusion changes (() where a side has no fusion map)."""

    mode: str
    rows: tuple[KernelChange, ...]
    paired: int
    fusion_changes: tuple[FusionChange, ...] = ()
    note: str = ""

    def of_status(self, status: RowStatus) -> tuple[KernelChange, ...]:
        return tuple(r for r in self.rows if r.status == status)


@dataclass(frozen=True)
class MatchStrategy:
    """One way to pair kernels: rows of base and head with the same non-None key pair up, in
    table order."""

    matched_by: MatchedBy
    key: Callable[[KernelSide], Hashable | None]


# Inductor's generated kernels: triton_poi_fused_add_0, cpp_fused_gelu_3, graph_0_cpp_fused_mul_1
_GENERATED = re.compile(r"^(?:graph_\d+_)?((?:triton|cpp)_\w*?)_\d+$")


def generated_stem(name: str) -> str | None:
    """An Inductor-generated kernel's name without its graph prefix and counter; None for any
    other name."""
    m = _GENERATED.match(name)
    return m.group(1) if m else None


def _module_key(k: KernelSide) -> Hashable | None:
    """The same operations, in any order, in the same modules: a kernel whose fused ops were
    reordered (add + layer_norm, then layer_norm + add) in one place of the model. Never the
    module alone: relu and gelu in one activation module are two kernels, one gone, one new."""
    if not k.modules or not k.eager_ops:
        return None
    return (k.kind, k.modules, frozenset(k.eager_ops))


STRATEGIES: tuple[MatchStrategy, ...] = (
    MatchStrategy("name", lambda k: (k.kind, k.name)),
    MatchStrategy("eager ops", lambda k: (k.kind, k.eager_ops) if k.eager_ops else None),
    MatchStrategy(
        "generated name", lambda k: (k.kind, s) if (s := generated_stem(k.name)) else None
    ),
    MatchStrategy("module", _module_key),
)


def pair_kernels(
    base: Sequence[KernelSide],
    head: Sequence[KernelSide],
    strategies: Sequence[MatchStrategy] = STRATEGIES,
) -> tuple[list[tuple[KernelSide, KernelSide, MatchedBy]], list[KernelSide], list[KernelSide]]:
    """(paired rows with their strategy, base rows left, head rows left)."""
    left_base, left_head = list(base), list(head)
    pairs: list[tuple[KernelSide, KernelSide, MatchedBy]] = []
    for strategy in strategies:
        waiting: dict[Hashable, list[KernelSide]] = {}
        for k in left_base:
            key = strategy.key(k)
            if key is not None:
                waiting.setdefault(key, []).append(k)
        taken: set[int] = set()
        rest_head = []
        for k in left_head:
            key = strategy.key(k)
            candidates = waiting.get(key) if key is not None else None
            if candidates:
                b = candidates.pop(0)
                taken.add(id(b))
                pairs.append((b, k, strategy.matched_by))
            else:
                rest_head.append(k)
        left_base = [k for k in left_base if id(k) not in taken]
        left_head = rest_head
    return pairs, left_base, left_head


def _bytes_change(
    base: KernelSide | None, head: KernelSide | None
) -> tuple[int | None, str | None]:
    """head - base bytes: measured where both present sides were measured; (None, None)
    where no side has bytes (a trace's rows)."""
    sides = [s for s in (base, head) if s is not None]
    if all(s.measured_bytes is None and s.modeled_bytes is None for s in sides):
        return None, None
    measured = all(s.measured_bytes is not None for s in sides)
    b, h = (
        0 if s is None else s.measured_bytes if measured else s.modeled_bytes for s in (base, head)
    )
    return (None if b is None or h is None else h - b), MEASURED if measured else MODELED


def kernel_change(
    base: KernelSide | None, head: KernelSide | None, matched_by: MatchedBy | None
) -> KernelChange:
    """One row of the diff: its status and head - base."""
    calls = (head.calls if head else 0.0) - (base.calls if base else 0.0)
    time = difference(base.time_us if base else 0.0, head.time_us if head else 0.0)
    delta_bytes, source = _bytes_change(base, head)
    status: RowStatus
    if base is None:
        status = "appeared"
    elif head is None:
        status = "disappeared"
    elif calls != 0 or (delta_bytes is not None and delta_bytes != 0):
        status = "changed"
    else:
        status = "time only"
    return KernelChange(status, matched_by, base, head, calls, time, delta_bytes, source)


def _impact(row: KernelChange) -> tuple[int, float, int, str]:
    return (
        row.status == "time only",
        -abs(row.time_us_change or 0.0),
        -abs(row.bytes_change or 0),
        row.name,
    )


def diff_kernels(
    base: Sequence[KernelSide],
    head: Sequence[KernelSide],
    strategies: Sequence[MatchStrategy] = STRATEGIES,
) -> tuple[tuple[KernelChange, ...], int]:
    """Every kernel of base and head that differs, as a change by impact (a pair with the same
    calls, time and bytes is no row); and how many pairs the strategies found."""
    pairs, only_base, only_head = pair_kernels(base, head, strategies)
    rows = [
        change
        for change in (kernel_change(b, h, how) for b, h, how in pairs)
        if change.status != "time only" or change.time_us_change != 0
    ]
    rows += [kernel_change(b, None, None) for b in only_base]
    rows += [kernel_change(None, h, None) for h in only_head]
    return tuple(sorted(rows, key=_impact)), len(pairs)


# ---------------------------------------------------------------- a run mode's kernels


def _eager_ops_by_kernel(fusion: FusionMap | None) -> dict[str, tuple[str, ...]]:
    """Each kernel's eager ops: those of the fusion-map groups listing it, each distinct group
    once (a kernel Inductor reuses for identical layers computes the same ops each call)."""
    if fusion is None:
        return {}
    seen: dict[str, list[tuple[str, ...]]] = {}
    for group in fusion.groups:
        for kernel in group.kernels:
            signatures = seen.setdefault(kernel, [])
            if group.eager_ops not in signatures:
                signatures.append(group.eager_ops)
    return {k: tuple(op for sig in sigs for op in sig) for k, sigs in seen.items()}


def mode_kernels(mode: OkMode) -> tuple[KernelSide, ...]:
    """A derived mode's kernel rows as diff sides (its table, with today's modeled bytes)."""
    kernels = mode.kernels
    steps = kernels.steps or 1
    ops = _eager_ops_by_kernel(mode.fusion)
    measured = {
        m.name: m.read + m.written
        for m in (mode.bytes.measured.kernels if mode.bytes.measured is not None else ())
        if m.read is not None and m.written is not None
    }
    sides = []
    for row in kernels.table:
        calls = row.calls_per_step if row.calls_per_step is not None else row.calls / steps
        time = row.time_us_per_step
        if time is None and row.time_us is not None:
            time = row.time_us / steps
        sides.append(
            KernelSide(
                name=row.name,
                kind=row.kind,
                calls=calls,
                time_us=time,
                modeled_bytes=sum_known((row.bytes_read, row.bytes_written)),
                bytes_shared_by=row.bytes_shared_by,
                measured_bytes=measured.get(row.name),
                eager_ops=ops.get(row.name, ()),
                modules=row.modules or (),
            )
        )
    return tuple(sides)


def relative_to_machine(row: KernelChange, factor: float) -> KernelChange:
    """`row` with its time ratio relative to the machine (head/base time of its reference)."""
    b, h = row.base, row.head
    if b is None or h is None or not b.time_us or h.time_us is None:
        return row
    return row.adding(time_ratio_vs_machine=h.time_us / factor / b.time_us)


def mode_kernel_diff(
    name: str, base: OkMode, head: OkMode, machine_factor: float | None = None
) -> ModeKernelDiff:
    """The kernel diff of one mode that ran on both sides (both derived: fusion maps and
    modeled bytes in place); with `machine_factor` (the runs' machine references differ), each
    row's time relative to the machine's move too."""
    rows, paired = diff_kernels(mode_kernels(base), mode_kernels(head))
    if machine_factor is not None:
        rows = tuple(relative_to_machine(r, machine_factor) for r in rows)
    note = ""
    changes: tuple[FusionChange, ...] = ()
    if base.fusion is not None and head.fusion is not None:
        changes = fusion_changes(base.fusion, head.fusion)
    elif (base.fusion is None) != (head.fusion is None):
        side = "base" if base.fusion is None else "head"
        note = f"no fusion changes: {side} has no fusion map for this mode"
    return ModeKernelDiff(name, rows, paired, changes, note)
