"""Fusion changes between two fusion maps of one mode: which eager ops head fuses that base
ran apart (and the reverse), which kernels are new or gone, which run more or fewer times per
step. Pure; the groups of each map are matched by the eager-op sequence they compute, counted
per step, so a renamed kernel is no change and one more layer is "more calls"."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from profreport.analysis.fusion import sum_known
from profreport.format import fmt_bytes
from profreport.record.model import FusionMap
from profreport.record.section import Section

FusionChangeKind = Literal["fused", "split", "new", "gone", "more calls", "fewer calls"]


@dataclass(frozen=True)
class FusionChange(Section):
    """What the two fusion maps say changed for one set of eager ops, in one sentence
    (`summary`), with the kernels on each side and head - base calls and modeled bytes."""

    kind: FusionChangeKind
    eager_ops: tuple[str, ...]
    base_kernels: tuple[str, ...]
    head_kernels: tuple[str, ...]
    calls_per_step_change: int
    bytes_change: int | None  # modeled kernel bytes, head - base
    summary: str


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
        sig.total_bytes = sum_known((sig.total_bytes, group.kernel_bytes))
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
        one = whole_sigs[ops].bytes_per_call
        several = sum_known(part_sigs[p].bytes_per_call for p in cover)
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
    b_calls = Counter({ops: sig.calls for ops, sig in b_sigs.items()})
    h_calls = Counter({ops: sig.calls for ops, sig in h_sigs.items()})
    head_extra, base_extra = h_calls - b_calls, b_calls - h_calls
    out = _regroupings("fused", head_extra, base_extra, h_sigs, b_sigs)
    out += _regroupings("split", base_extra, head_extra, b_sigs, h_sigs)
    # What the regroupings left: calls only one side makes (sign: of head - base).
    for sign, extra, sigs, other in (
        (1, head_extra, h_sigs, b_sigs),
        (-1, base_extra, b_sigs, h_sigs),
    ):
        for ops, n in extra.items():
            if n <= 0:
                continue
            s = sigs[ops]
            delta = _scaled(sign * n, s.bytes_per_call)
            kernels, bytes_text = ", ".join(s.kernels), _signed_bytes(delta)
            kind: FusionChangeKind
            if ops not in other:
                kind = "new" if sign > 0 else "gone"
                summary = (
                    f"head's {_ops_text(ops)} is a new kernel ({kernels}; +{n} per step, "
                    f"{bytes_text})"
                    if sign > 0
                    else f"base's {_ops_text(ops)} kernel ({kernels}) is gone in head "
                    f"(−{n} per step, {bytes_text})"
                )
            else:
                kind = "more calls" if sign > 0 else "fewer calls"
                summary = (
                    f"head runs {_ops_text(ops)} ({kernels}) {n} {kind.split()[0]} time"
                    f"{'s' if n > 1 else ''} per step than base ({bytes_text})"
                )
            sides = (other[ops].kernels if ops in other else (), s.kernels)
            base_kernels, head_kernels = sides if sign > 0 else sides[::-1]
            out.append(
                FusionChange(kind, ops, base_kernels, head_kernels, sign * n, delta, summary)
            )
    return tuple(sorted(out, key=lambda c: (-abs(c.bytes_change or 0), c.summary)))
