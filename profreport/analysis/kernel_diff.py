"""The review diff: which kernels appeared, disappeared or changed between base and head.

Pure functions over two kernel tables (a run mode's, or a trace's). Rows are paired by a list of
strategies tried in order, each a key on one kernel: the exact name; the eager ops the kernel
computes (the fusion map: Inductor names its generated kernels after the ops and a counter that
moves between builds, `cpp_fused_add_gelu_0` vs `_1`); the generated name without that counter
(traces, which have no fusion map). Every row says which strategy paired it. Rows are ordered by
impact: rows whose work changed (appeared, disappeared, other calls or bytes per step) first, then
those whose only difference is profiler time; each group by |Δ time| then |Δ bytes|.

Fusion changes (analysis `fusion_changes`) compare the two fusion maps' groups by the eager ops
they compute, and name what a reviewer asks: which ops head fuses that base ran apart, which
kernels are new.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

from profreport.format import fmt_bytes
from profreport.record.model import FusionMap, ModeResult

MatchedBy = Literal["name", "eager ops", "generated name"]
RowStatus = Literal["appeared", "disappeared", "changed", "time only"]
FusionChangeKind = Literal["fused", "split", "new", "gone", "more calls", "fewer calls"]

MODELED = "modeled"
MEASURED = "measured (Nsight Compute DRAM)"
TIME_SOURCE = "profiler"


@dataclass(frozen=True)
class KernelSide:
    """One kernel row of one side: its calls, profiler time and bytes per step, and the eager
    ops it computes (from the mode's fusion map; () where there is none)."""

    name: str
    kind: str  # kernel | memcpy | memset | cpu
    calls_per_step: float
    time_us_per_step: float | None  # profiler time
    modeled_bytes: int | None = None  # read + written per step (analysis/kernel_bytes)
    bytes_shared_by: int | None = None  # kernels sharing one operation's modeled bytes
    measured_bytes: int | None = None  # Nsight Compute's DRAM read + written per step
    eager_ops: tuple[str, ...] = ()


@dataclass(frozen=True)
class KernelChange:
    """One kernel in base and/or head, how the two were paired, and head - base per step (a
    missing side counts as zero calls, time and bytes; None where a present side has no
    number)."""

    status: RowStatus
    matched_by: MatchedBy | None  # None: only one side has the kernel
    base: KernelSide | None
    head: KernelSide | None
    calls_per_step_change: float
    time_us_per_step_change: float | None
    bytes_change: int | None
    bytes_source: str | None  # modeled | measured (both sides measured): what bytes_change is

    @property
    def name(self) -> str:
        side = self.head or self.base
        if side is None:
            raise ValueError("a kernel change with neither side")
        return side.name


@dataclass(frozen=True)
class FusionChange:
    """What the two fusion maps say changed for one set of eager ops, in one sentence
    (`summary`), with the kernels on each side and head - base calls and modeled bytes."""

    kind: FusionChangeKind
    eager_ops: tuple[str, ...]
    base_kernels: tuple[str, ...]
    head_kernels: tuple[str, ...]
    calls_per_step_change: int
    bytes_change: int | None  # modeled kernel bytes, head - base
    summary: str


@dataclass(frozen=True)
class ModeKernelDiff:
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


def _stem_key(k: KernelSide) -> Hashable | None:
    stem = generated_stem(k.name)
    return None if stem is None else (k.kind, stem)


STRATEGIES: tuple[MatchStrategy, ...] = (
    MatchStrategy("name", lambda k: (k.kind, k.name)),
    MatchStrategy("eager ops", lambda k: (k.kind, k.eager_ops) if k.eager_ops else None),
    MatchStrategy("generated name", _stem_key),
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


def _difference(base: float | None, head: float | None) -> float | None:
    return None if base is None or head is None else head - base


def _bytes_change(base: KernelSide | None, head: KernelSide | None) -> tuple[int | None, str]:
    """head - base bytes per step: measured where both present sides were measured."""
    sides = [s for s in (base, head) if s is not None]
    if all(s.measured_bytes is not None for s in sides):
        b = base.measured_bytes if base is not None else 0
        h = head.measured_bytes if head is not None else 0
        return (None if b is None or h is None else h - b), MEASURED
    b_mod = base.modeled_bytes if base is not None else 0
    h_mod = head.modeled_bytes if head is not None else 0
    return (None if b_mod is None or h_mod is None else h_mod - b_mod), MODELED


def kernel_change(
    base: KernelSide | None, head: KernelSide | None, matched_by: MatchedBy | None
) -> KernelChange:
    """One row of the diff: its status and head - base per step."""
    calls = (head.calls_per_step if head else 0.0) - (base.calls_per_step if base else 0.0)
    time = _difference(
        base.time_us_per_step if base else 0.0, head.time_us_per_step if head else 0.0
    )
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
        -abs(row.time_us_per_step_change or 0.0),
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
        if change.status != "time only" or change.time_us_per_step_change != 0
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


def mode_kernels(mode: ModeResult) -> tuple[KernelSide, ...]:
    """A derived mode's kernel rows as diff sides (its table, with today's modeled bytes)."""
    kernels = mode.ok_kernels
    steps = kernels.steps or 1
    ops = _eager_ops_by_kernel(mode.fusion)
    measured: dict[str, int] = {}
    if mode.bytes is not None and mode.bytes.measured is not None:
        for m in mode.bytes.measured.kernels:
            if m.read is not None and m.written is not None:
                measured[m.name] = m.read + m.written
    sides = []
    for row in kernels.table:
        calls = row.calls_per_step if row.calls_per_step is not None else row.calls / steps
        time = row.time_us_per_step
        if time is None and row.time_us is not None:
            time = row.time_us / steps
        modeled = (
            row.bytes_read + row.bytes_written
            if row.bytes_read is not None and row.bytes_written is not None
            else None
        )
        sides.append(
            KernelSide(
                name=row.name,
                kind=row.kind,
                calls_per_step=calls,
                time_us_per_step=time,
                modeled_bytes=modeled,
                bytes_shared_by=row.bytes_shared_by,
                measured_bytes=measured.get(row.name),
                eager_ops=ops.get(row.name, ()),
            )
        )
    return tuple(sides)


def mode_kernel_diff(name: str, base: ModeResult, head: ModeResult) -> ModeKernelDiff:
    """The kernel diff of one mode that ran on both sides (both derived: fusion maps and
    modeled bytes in place)."""
    rows, paired = diff_kernels(mode_kernels(base), mode_kernels(head))
    note = ""
    changes: tuple[FusionChange, ...] = ()
    if base.fusion is not None and head.fusion is not None:
        changes = fusion_changes(base.fusion, head.fusion)
    elif (base.fusion is None) != (head.fusion is None):
        side = "base" if base.fusion is None else "head"
        note = f"no fusion changes: {side} has no fusion map for this mode"
    return ModeKernelDiff(name, rows, paired, changes, note)


# ---------------------------------------------------------------- fusion changes


def _ops_text(ops: Sequence[str], most: int = 6) -> str:
    shown = " + ".join(ops[:most])
    return shown if len(ops) <= most else f"{shown} + … ({len(ops) - most} more)"


def _signed_bytes(n: int | None) -> str:
    if n is None:
        return "bytes not modeled"
    return f"{'+' if n >= 0 else '−'}{fmt_bytes(abs(n))} modeled"


@dataclass
class _Signature:
    """The groups of one side computing one eager-op sequence: calls per step, the kernels
    that compute it, and their modeled bytes per call (None: some call not modeled)."""

    calls: int = 0
    kernels: tuple[str, ...] = ()
    total_bytes: int | None = 0

    @property
    def bytes_per_call(self) -> int | None:
        if self.total_bytes is None or not self.calls:
            return None
        return round(self.total_bytes / self.calls)


def _signatures(fusion: FusionMap) -> dict[tuple[str, ...], _Signature]:
    out: dict[tuple[str, ...], _Signature] = {}
    for group in fusion.groups:
        if not group.kernels or not group.eager_ops:
            continue  # eager calls no kernel computes
        sig = out.setdefault(group.eager_ops, _Signature())
        sig.calls += 1
        sig.kernels = tuple(dict.fromkeys(sig.kernels + group.kernels))
        if sig.total_bytes is not None:
            sig.total_bytes = (
                None if group.kernel_bytes is None else sig.total_bytes + group.kernel_bytes
            )
    return out


def _covering(
    ops: tuple[str, ...], parts: Counter[tuple[str, ...]]
) -> list[tuple[str, ...]] | None:
    """Two or more of `parts` (available counts; each fewer ops than `ops`) whose ops add up to
    `ops` exactly; None when none do."""
    remaining = Counter(ops)
    chosen = []
    for part in sorted(parts, key=lambda p: (-len(p), p)):
        need = Counter(part)
        for _ in range(parts[part]):
            if len(part) >= len(ops) or any(remaining[op] < n for op, n in need.items()):
                break
            remaining -= need
            chosen.append(part)
        if not remaining:
            break
    return chosen if not remaining and len(chosen) >= 2 else None


def _times(n: int) -> str:
    return "" if n == 1 else f" ({n}× per step)"


def _scaled(n: int, per_call: int | None) -> int | None:
    return None if per_call is None else n * per_call


def _bytes_of(
    parts: Sequence[tuple[str, ...]], sigs: dict[tuple[str, ...], _Signature]
) -> int | None:
    total = 0
    for part in parts:
        b = sigs[part].bytes_per_call
        if b is None:
            return None
        total += b
    return total


def _regroupings(
    kind: Literal["fused", "split"],
    wholes: Counter[tuple[str, ...]],
    parts: Counter[tuple[str, ...]],
    whole_sigs: dict[tuple[str, ...], _Signature],
    part_sigs: dict[tuple[str, ...], _Signature],
) -> list[FusionChange]:
    """Op sequences one side runs in one kernel and the other in several (the counters hold
    each side's surplus calls and are used up as they are explained)."""
    out = []
    for ops in sorted(wholes, key=lambda o: (-len(o), o)):
        found: list[list[tuple[str, ...]]] = []
        while len(ops) >= 2 and wholes[ops] > 0:
            cover = _covering(ops, parts)
            if cover is None:
                break
            wholes[ops] -= 1
            parts.subtract(cover)
            found.append(cover)
        if not found:
            continue
        cover = found[0]
        together = whole_sigs[ops].kernels
        apart = tuple(dict.fromkeys(k for p in cover for k in part_sigs[p].kernels))
        one, several = whole_sigs[ops].bytes_per_call, _bytes_of(cover, part_sigs)
        per = None if one is None or several is None else one - several
        n = len(found)
        if kind == "fused":
            delta, calls = _scaled(n, per), n * (1 - len(cover))
            summary = (
                f"head fuses {_ops_text(ops)} in one kernel ({', '.join(together)}) that base "
                f"ran as {len(cover)} kernels ({', '.join(apart)}){_times(n)}; "
                f"{_signed_bytes(delta)}"
            )
            out.append(FusionChange(kind, ops, apart, together, calls, delta, summary))
        else:
            delta, calls = _scaled(n, None if per is None else -per), n * (len(cover) - 1)
            summary = (
                f"head runs {_ops_text(ops)} as {len(cover)} kernels ({', '.join(apart)}) that "
                f"base fused in one ({', '.join(together)}){_times(n)}; {_signed_bytes(delta)}"
            )
            out.append(FusionChange(kind, ops, together, apart, calls, delta, summary))
    return out


def fusion_changes(base: FusionMap, head: FusionMap) -> tuple[FusionChange, ...]:
    """What changed between two fusion maps, matched by the eager ops each group computes: ops
    head fuses that base ran apart (and the reverse), new and gone kernels, and kernels called
    more or fewer times per step. Largest modeled-bytes change first."""
    b_sigs, h_sigs = _signatures(base), _signatures(head)
    head_extra: Counter[tuple[str, ...]] = Counter()
    base_extra: Counter[tuple[str, ...]] = Counter()
    for ops in h_sigs.keys() | b_sigs.keys():
        h = h_sigs[ops].calls if ops in h_sigs else 0
        b = b_sigs[ops].calls if ops in b_sigs else 0
        if h > b:
            head_extra[ops] = h - b
        elif b > h:
            base_extra[ops] = b - h
    out = _regroupings("fused", head_extra, base_extra, h_sigs, b_sigs)
    out += _regroupings("split", base_extra, head_extra, b_sigs, h_sigs)
    for ops, n in head_extra.items():
        if n <= 0:
            continue
        s = h_sigs[ops]
        delta = _scaled(n, s.bytes_per_call)
        if ops not in b_sigs:
            kind: FusionChangeKind = "new"
            summary = (
                f"head's {_ops_text(ops)} is a new kernel ({', '.join(s.kernels)}; "
                f"+{n} per step, {_signed_bytes(delta)})"
            )
        else:
            kind = "more calls"
            summary = (
                f"head runs {_ops_text(ops)} ({', '.join(s.kernels)}) {n} more time"
                f"{'s' if n > 1 else ''} per step than base ({_signed_bytes(delta)})"
            )
        out.append(
            FusionChange(
                kind,
                ops,
                b_sigs[ops].kernels if ops in b_sigs else (),
                s.kernels,
                n,
                delta,
                summary,
            )
        )
    for ops, n in base_extra.items():
        if n <= 0:
            continue
        s = b_sigs[ops]
        per = s.bytes_per_call
        delta = None if per is None else -n * per
        if ops not in h_sigs:
            kind = "gone"
            summary = (
                f"base's {_ops_text(ops)} kernel ({', '.join(s.kernels)}) is gone in head "
                f"(−{n} per step, {_signed_bytes(delta)})"
            )
        else:
            kind = "fewer calls"
            summary = (
                f"head runs {_ops_text(ops)} ({', '.join(s.kernels)}) {n} fewer time"
                f"{'s' if n > 1 else ''} per step than base ({_signed_bytes(delta)})"
            )
        out.append(
            FusionChange(
                kind,
                ops,
                s.kernels,
                h_sigs[ops].kernels if ops in h_sigs else (),
                -n,
                delta,
                summary,
            )
        )
    return tuple(sorted(out, key=lambda c: (-abs(c.bytes_change or 0), c.summary)))
