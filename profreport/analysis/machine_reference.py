"""The machine reference: its summary in a run, and two runs' references compared.

A run times a short fixed workload (a matmul, a large copy: capture/reference.py) in the same
rounds as its modes. Two runs made at different times (CI jobs, commits) can meet the machine in
different states: the same code took 13.2 ms in one process and 10.8 ms in the next (issue 40).
Their references say how much the machine moved; a latency change is called only beyond that,
both intervals counted. Pure functions over typed records.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from profreport.analysis.latency import bootstrap_median_ci
from profreport.record.model import MachineReference, ReferencePart, Run
from profreport.record.section import Section


def summarize_reference(
    samples_ms: Mapping[str, Sequence[float]],
    work: Mapping[str, str],
    *,
    method: str,
    share: float,
    spent_s: float,
    timing_s: float,
    resamples: int = 2000,
) -> MachineReference:
    """The record's `machine_reference`: per part the median per-call time and the bootstrap
    interval of that median; what the reference was allowed and what it cost."""
    parts = {}
    for name, samples in samples_ms.items():
        if not samples:
            continue
        parts[name] = ReferencePart(
            work=work.get(name, ""),
            median_ms=statistics.median(samples),
            ci95_ms=bootstrap_median_ci(samples, resamples=resamples),
            n=len(samples),
            samples_ms=tuple(samples),
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
    mean) is what the machine alone did to a latency; [low, high] the range the machine may have
    moved a latency by, every part's interval counted."""

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

    def beyond(self, ratio_low: float, ratio_high: float) -> int:
        """+1 when a latency's head/base range lies wholly above what the machine moved, -1
        wholly below, 0 when they overlap (the machine may explain it)."""
        if ratio_low > self.high:
            return 1
        if ratio_high < self.low:
            return -1
        return 0


def _part_change(name: str, base: ReferencePart, head: ReferencePart) -> PartChange:
    (b_lo, b_hi), (h_lo, h_hi) = base.ci95_ms, head.ci95_ms
    return PartChange(
        part=name,
        base_ms=base.median_ms,
        head_ms=head.median_ms,
        base_ci95_ms=base.ci95_ms,
        head_ci95_ms=head.ci95_ms,
        ratio=head.median_ms / base.median_ms,
        ratio_low=h_lo / b_hi,
        ratio_high=h_hi / b_lo,
        apart=h_lo > b_hi or h_hi < b_lo,
    )


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
