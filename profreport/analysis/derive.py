"""Findings derived from a run record's evidence: one pure function every reader calls.

Capture stores what was observed (kernel tables, the tensor-I/O sequence, compiler nodes and graphs,
timing samples, environment). `derived_run(run)` computes what we conclude from it: each mode's
fusion map (asked of the mode, see profreport.modes), the modeled bytes and roofline of each
kernel row, the latency floor, why ops did not fuse, and the verdicts; `derive(run)` gives the same
findings on their own. Render, compare, the API and the CLI call them, so an old run.json shows
today's analysis; the copy of the findings that run.json keeps is for other tools, and is never
read back as truth.

Speedups (`speedup_vs_eager`) are still the ones computed from the timing samples at capture time:
the bootstrap is the latency statistics' to own (analysis/latency.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from profreport.analysis.kernel_bytes import KERNEL_BYTES_FIELDS, kernel_bytes
from profreport.analysis.roofline import KERNEL_ROOFLINE_FIELDS, Roofs, kernel_roofline
from profreport.analysis.speedup_breakdown import time_findings
from profreport.analysis.verdict import verdict_for
from profreport.record.model import KernelCounts, KernelRow, ModeResult, Run

# Mode fields that hold findings, not evidence: dropped before deriving, so nothing stale
# (an older release's fusion map or verdict) can leak into today's analysis.
FINDING_KEYS = ("fusion", "verdict", "why_not_fused", "roofline", "time_findings")
ROW_FINDING_FIELDS = KERNEL_BYTES_FIELDS + KERNEL_ROOFLINE_FIELDS


@dataclass(frozen=True)
class ModeFindings:
    """What one mode's evidence shows: its fusion map (None: eager, a failed mode, no eager
    baseline, or a mode that maps nothing), each kernel row's modeled bytes (in table order), and
    the verdict sentence, and why ops did not fuse (analysis/why_not_fused; None: the mode
    reports nothing, or it did not run); each kernel row's roofline fields and the mode's latency
    floor (analysis/roofline; None: the record has no measured ceilings)."""

    verdict: str
    fusion: Mapping[str, Any] | None = None
    kernel_bytes: tuple[dict[str, Any], ...] = ()
    why_not_fused: tuple[Mapping[str, Any], ...] | None = None
    kernel_roofline: tuple[dict[str, Any], ...] = ()
    roofline: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Findings:
    modes: MappingProxyType[str, ModeFindings] = field(default_factory=lambda: MappingProxyType({}))

    def verdict(self, mode: str) -> str:
        return self.modes[mode].verdict


# What a record written by another tool may lack: then that finding is kept as stored (there is
# no evidence to derive it from), never invented.
_MISSING_EVIDENCE = (KeyError, TypeError, IndexError, AttributeError)


def _with_table(
    mode: ModeResult, rows: Callable[[KernelCounts], Iterable[KernelRow]]
) -> ModeResult:
    """`mode` with its kernel table replaced by `rows(kernels)` (unchanged without kernels)."""
    kernels = mode.kernels
    if kernels is None:
        return mode
    return dataclasses.replace(
        mode, kernels=dataclasses.replace(kernels, table=tuple(rows(kernels)))
    )


def _with_rows(mode: ModeResult, fields: tuple[dict[str, Any], ...]) -> ModeResult:
    """`mode` with `fields[i]` added to its i-th kernel row."""
    return _with_table(
        mode, lambda k: (r.adding(**f) for r, f in zip(k.table, fields, strict=True))
    )


def _stripped(mode: ModeResult) -> ModeResult:
    """`mode` without its stored findings (its own and its kernel rows')."""
    return _with_table(
        mode.without(*FINDING_KEYS), lambda k: (r.without(*ROW_FINDING_FIELDS) for r in k.table)
    )


def _measured(
    name: str, mode: ModeResult, eager: ModeResult | None, roofs: Roofs | None, run: Run
) -> ModeResult:
    """A mode that ran, with the findings of its own evidence: fusion map, kernel bytes,
    roofline and floor, and where its step time went (when the record has its breakdown)."""
    from profreport.modes.registry import mode_for

    fusion = mode_for(name).fusion_map(mode, eager) if name != "eager" and eager else None
    mode = mode.adding(fusion=fusion)
    mode = _with_rows(mode, kernel_bytes(mode))
    timing = time_findings(name, mode, eager, run.ceilings)
    roofline = kernel_roofline(mode, roofs, None if name == "eager" else eager)
    if roofline is not None:
        rows, floor = roofline
        mode = _with_rows(mode, rows).adding(roofline=floor)
    return mode if timing is None else mode.adding(time_findings=timing)


def derived_run(record: Run | Mapping[str, Any]) -> Run:
    """The typed run with today's findings in place of the stored ones (each mode's `fusion`,
    `roofline`, `why_not_fused` and `verdict`; each kernel row's bytes and roofline fields): what
    renderers and comparisons read. Evidence a foreign record lacks leaves that finding as stored."""
    from profreport.modes.registry import mode_for

    run = record if isinstance(record, Run) else Run.from_json(record)
    stored = run.modes
    eager = stored.get("eager")
    baseline = _stripped(eager) if eager is not None and eager.ok else None
    roofs = Roofs.from_record(run.ceilings)
    modes: dict[str, ModeResult] = {}
    for name, mode in stored.items():
        try:
            modes[name] = (
                _measured(name, _stripped(mode), baseline, roofs, run)
                if mode.ok
                else _stripped(mode)
            )
        except _MISSING_EVIDENCE:
            modes[name] = mode
    # why-not-fused and verdicts read the run whose modes carry their fusion maps
    run = dataclasses.replace(run, modes=dict(modes))
    for name, mode in run.modes.items():
        try:
            if mode.ok and name != "eager":
                why = mode_for(name).why_not_fused(mode, run)
                if why is not None:
                    mode = mode.adding(why_not_fused=tuple(why))
        except _MISSING_EVIDENCE:
            pass  # a foreign record without the evidence: nothing derived, nothing invented
        # (a mode kept as stored keeps its verdict's place; a derived one gets it last)
        try:
            mode = mode.adding(verdict=verdict_for(name, run))
        except _MISSING_EVIDENCE:
            if stored[name].has("verdict"):
                mode = mode.adding(verdict=stored[name].verdict)
        modes[name] = mode
    return dataclasses.replace(run, modes=modes)


def _row_fields(row: KernelRow, names: tuple[str, ...]) -> dict[str, Any]:
    return {k: getattr(row, k) for k in names if row.has(k)}


def derive(record: Run | Mapping[str, Any]) -> Findings:
    """The findings of `record` from its evidence alone (the record is not changed)."""
    run = derived_run(record)
    found = {}
    for name, mode in run.modes.items():
        rows = mode.kernels.table if mode.ok and mode.kernels is not None else ()
        found[name] = ModeFindings(
            verdict=mode.verdict or "",
            fusion=mode.fusion,
            kernel_bytes=tuple(_row_fields(r, KERNEL_BYTES_FIELDS) for r in rows),
            why_not_fused=mode.why_not_fused,
            kernel_roofline=tuple(_row_fields(r, KERNEL_ROOFLINE_FIELDS) for r in rows),
            roofline=mode.roofline,
        )
    return Findings(MappingProxyType(found))


def with_findings(record: Run | Mapping[str, Any]) -> dict[str, Any]:
    """The run.json document of `record` with today's findings written where run/1 keeps them
    (`fusion`, `verdict`, and the bytes fields of each kernel row)."""
    return derived_run(record).to_json()
