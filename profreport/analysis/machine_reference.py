"""The machine reference: its summary in a run, and two runs' references compared.

A run times a short fixed workload (a matmul, a large copy: capture/reference.py) in the same
rounds as its modes. Two runs made at different times (CI jobs, commits) can meet the machine in
different states: the same code took 13.2 ms in one process and 10.8 ms in the next (issue 40).
Their references are one more witness of the machine's state, never a divisor: a latency change
the runs' own spread calls is withheld when the reference moved the same way as far (the
machine may explain it), and a change is never created by dividing by the reference (issue 48:
the copy part moved 1.48x between two processes of the same code while eager moved 0.5%, and
the division manufactured a +37.5% regression). The reference measures its own process too.
Pure functions over typed records.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from profreport.analysis.processes import level, level_change
from profreport.record.model import MachineReference, ProcessBlocks, ReferencePart, Run
from profreport.record.section import Section


def summarize_reference(
    samples_ms: Mapping[str, Sequence[Sequence[float]]],
    work: Mapping[str, str],
    *,
    method: str,
    share: float,
    spent_s: float,
    timing_s: float,
    resamples: int = 2000,
) -> MachineReference:
    """The record's `machine_reference`: per part (its blocks in each timing process) the
    level (analysis/processes.level: one process, the median per-call time and the bootstrap
    interval of that median; several, across them, each kept); what the reference was allowed
    and what it cost."""
    parts = {}
    for name, per_process in samples_ms.items():
        groups = [tuple(g) for g in per_process if g]
        if not groups:
            continue
        found = level(groups, resamples)
        parts[name] = ReferencePart(
            work=work.get(name, ""),
            median_ms=found.estimate,
            ci95_ms=found.ci95,
            n=sum(len(g) for g in groups),
            samples_ms=tuple(x for g in groups for x in g),
            processes=tuple(ProcessBlocks(samples=g) for g in groups) if len(groups) > 1 else None,
        )
    return MachineReference(
        method=method,
        parts=parts,
        share=share,
        spent_s=round(spent_s, 6),
        timing_s=round(timing_s, 6),
    )


@dataclass(frozen=True)
class PartChange(Section):
    """One reference part in base and head: head/base time and that ratio's range when both
    medians may lie anywhere in their intervals."""

    part: str
    base_ms: float
    head_ms: float
    base_ci95_ms: tuple[float, float]
    head_ci95_ms: tuple[float, float]
    ratio: float  # head / base time: > 1 the machine was slower in head
    ratio_low: float
    ratio_high: float
    apart: bool  # the two intervals do not overlap

    @property
    def speed(self) -> float:
        """How many times faster head's machine did this part (base / head time)."""
        return 1.0 / self.ratio


@dataclass(frozen=True)
class MachineChange(Section):
    """Base's and head's references compared. `factor` (head/base time, the parts' geometric
    mean) is shown beside a latency's change, never divided by; [low, high] the range the parts
    moved, every part's interval counted; `explains` says whether the machine may account for a
    latency's change (a witness)."""

    parts: tuple[PartChange, ...]
    changed: bool  # some part's intervals lie apart
    factor: float
    low: float
    high: float
    summary: str  # one line

    @property
    def parts_text(self) -> str:
        """Each part's speed in head against base: `matmul reference 1.19x, copy ...`."""
        return ", ".join(f"{p.part} reference {p.speed:.2f}x" for p in self.parts)

    def explains(self, ci95: tuple[float, float]) -> bool:
        """Whether the machine may explain a latency change whose head/base interval is `ci95`:
        some part moved apart the same way, at least as far as the interval's near end."""
        lo, hi = ci95
        if lo > 1.0:  # slower in head
            return any(p.apart and p.ratio > 1.0 and p.ratio_high >= lo for p in self.parts)
        if hi < 1.0:  # faster in head
            return any(p.apart and p.ratio < 1.0 and p.ratio_low <= hi for p in self.parts)
        return False


def _part_change(name: str, base: ReferencePart, head: ReferencePart) -> PartChange:
    """One part in both runs: each run's processes when both timed several (their levels'
    change, across processes), else the two medians' intervals (apart: they do not overlap)."""
    b_groups, h_groups = base.process_samples(), head.process_samples()
    if len(b_groups) >= 2 and len(h_groups) >= 2:
        b, h = level(b_groups), level(h_groups)
        change = level_change(b, h)
        lo, hi = change.ci95
        sides = (b.estimate, h.estimate, b.ci95, h.ci95)
        ratio, apart = change.ratio, lo > 1.0 or hi < 1.0
    else:
        (b_lo, b_hi), (h_lo, h_hi) = base.ci95_ms, head.ci95_ms
        sides = (base.median_ms, head.median_ms, base.ci95_ms, head.ci95_ms)
        ratio, lo, hi = head.median_ms / base.median_ms, h_lo / b_hi, h_hi / b_lo
        apart = h_lo > b_hi or h_hi < b_lo
    return PartChange(name, *sides, ratio=ratio, ratio_low=lo, ratio_high=hi, apart=apart)


def _summary(parts: Sequence[PartChange], changed: bool, factor: float) -> str:
    each = ", ".join(f"{p.part} reference {p.speed:.2f}x" for p in parts)
    if not changed:
        return f"the machine reference did not move beyond its intervals ({each}, head vs base)"
    faster = [p.apart and p.ratio < 1 for p in parts]
    slower = [p.apart and p.ratio > 1 for p in parts]
    if any(faster) and not any(slower):
        return f"the machine ran {1 / factor - 1:.0%} faster in head: {each}"
    if any(slower) and not any(faster):
        return f"the machine ran {1 - 1 / factor:.0%} slower in head: {each}"
    return f"the machine changed between the runs: {each} (head vs base)"


def machine_change(base: Run, head: Run) -> tuple[MachineChange | None, str]:
    """The two runs' references compared, or None and the one line that says why the
    latencies cannot be checked against the machine's state."""
    b, h = base.machine_reference, head.machine_reference
    if b is None or h is None or not b.parts or not h.parts:
        missing = [side for side, ref in (("base", b), ("head", h)) if ref is None or not ref.parts]
        return None, (
            "latency across runs cannot be checked against the machine's state: "
            f"{' and '.join(missing)} {'has' if len(missing) == 1 else 'have'} no machine "
            "reference (a run recorded before profreport timed one, or one whose reference "
            "failed)"
        )
    names = [n for n in b.parts if n in h.parts and b.parts[n].work == h.parts[n].work]
    if not names:
        return None, (
            "latency across runs cannot be checked against the machine's state: the two "
            "machine references timed different work"
        )
    parts = tuple(_part_change(n, b.parts[n], h.parts[n]) for n in names)
    changed = any(p.apart for p in parts)
    factor = math.exp(sum(math.log(p.ratio) for p in parts) / len(parts))
    low = min(p.ratio_low for p in parts)
    high = max(p.ratio_high for p in parts)
    return MachineChange(parts, changed, factor, low, high, _summary(parts, changed, factor)), ""
