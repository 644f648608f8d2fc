"""Findings derived from a run record's evidence: one pure function every reader calls.

Capture stores what was observed (kernel tables, the tensor-I/O sequence, compiler nodes and graphs,
timing samples, environment). `derive(record)` computes what we conclude from it: each mode's fusion
map (asked of the mode, see profreport.modes), the modeled bytes of each kernel row, and the
verdicts. Render, compare, the API and the CLI call it, so an old run.json shows today's analysis;
the copy of the findings that run.json keeps is for other tools, and is never read back as truth.

Speedups (`speedup_vs_eager`) are still the ones computed from the timing samples at capture time:
the bootstrap is the latency statistics' to own (analysis/latency.py).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from profreport.analysis.kernel_bytes import KERNEL_BYTES_FIELDS, attach_kernel_bytes
from profreport.analysis.roofline import KERNEL_ROOFLINE_FIELDS, Roofs, attach_roofline
from profreport.analysis.verdict import verdict_for
from profreport.record.model import Run

# Mode-entry keys that hold findings, not evidence: dropped before deriving, so nothing stale
# (an older release's fusion map or verdict) can leak into today's analysis.
FINDING_KEYS = ("fusion", "verdict", "why_not_fused", "roofline")
ROW_FINDING_FIELDS = KERNEL_BYTES_FIELDS + KERNEL_ROOFLINE_FIELDS


@dataclass(frozen=True)
class ModeFindings:
    """What one mode's evidence shows: its fusion map (None: eager, a failed mode, no eager
    baseline, or a mode that maps nothing), each kernel row's modeled bytes (in table order), and
    the verdict sentence, and why ops did not fuse (analysis/why_not_fused; None: the mode
    reports nothing, or it did not run); each kernel row's roofline fields and the mode's latency
    floor (analysis/roofline; None: the record has no measured ceilings)."""

    verdict: str
    fusion: dict[str, Any] | None = None
    kernel_bytes: tuple[dict[str, Any], ...] = ()
    why_not_fused: tuple[dict[str, Any], ...] | None = None
    kernel_roofline: tuple[dict[str, Any], ...] = ()
    roofline: dict[str, Any] | None = None


@dataclass(frozen=True)
class Findings:
    modes: MappingProxyType[str, ModeFindings] = field(default_factory=lambda: MappingProxyType({}))

    def verdict(self, mode: str) -> str:
        return self.modes[mode].verdict


# What a record written by another tool may lack: then that finding is kept as stored (there is
# no evidence to derive it from), never invented.
_MISSING_EVIDENCE = (KeyError, TypeError, IndexError, AttributeError)


def _strip(entry: dict[str, Any]) -> None:
    for key in FINDING_KEYS:
        entry.pop(key, None)
    for row in (entry.get("kernels") or {}).get("table") or []:
        for key in ROW_FINDING_FIELDS:
            row.pop(key, None)


def _derive_into(record: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of `record` whose findings are derived from its evidence."""
    from profreport.modes.registry import mode_for

    work = copy.deepcopy(record)
    modes = work["modes"]
    eager = modes.get("eager")
    eager_ok = eager is not None and eager.get("status") == "ok"
    roofs = Roofs.from_record(work.get("ceilings"))
    for name, entry in modes.items():
        stored = copy.deepcopy(entry)
        try:
            _strip(entry)
            if entry.get("status") == "ok":
                entry["fusion"] = (
                    mode_for(name).fusion_map(entry, eager)
                    if name != "eager" and eager_ok and eager is not None
                    else None
                )
                attach_kernel_bytes(entry)
                floor = attach_roofline(entry, roofs, eager if eager_ok else None)
                if floor is not None:
                    entry["roofline"] = floor
        except _MISSING_EVIDENCE:
            entry.clear()
            entry.update(stored)
    for name, entry in modes.items():
        try:
            if entry.get("status") == "ok" and name != "eager":
                why = mode_for(name).why_not_fused(entry, work)
                if why is not None:
                    entry["why_not_fused"] = why
        except _MISSING_EVIDENCE:
            pass  # a foreign record without the evidence: nothing derived, nothing invented
        try:
            entry["verdict"] = verdict_for(name, work)
        except _MISSING_EVIDENCE:
            original = record["modes"][name]
            if "verdict" in original:
                entry["verdict"] = original["verdict"]
    return work


def derive(record: dict[str, Any]) -> Findings:
    """The findings of `record` from its evidence alone (the record is not changed)."""
    work = _derive_into(record)
    found = {}
    for name, entry in work["modes"].items():
        rows = (
            (entry.get("kernels") or {}).get("table") or [] if entry.get("status") == "ok" else []
        )
        found[name] = ModeFindings(
            verdict=entry["verdict"],
            fusion=entry.get("fusion"),
            kernel_bytes=tuple({k: r[k] for k in KERNEL_BYTES_FIELDS if k in r} for r in rows),
            why_not_fused=(
                tuple(entry["why_not_fused"]) if entry.get("why_not_fused") is not None else None
            ),
            kernel_roofline=tuple(
                {k: r[k] for k in KERNEL_ROOFLINE_FIELDS if k in r} for r in rows
            ),
            roofline=entry.get("roofline"),
        )
    return Findings(MappingProxyType(found))


def derived_run(record: dict[str, Any]) -> Run:
    """The typed run with today's findings in place (each mode's `fusion`, `verdict`,
    `why_not_fused`, `roofline`, and each kernel row's bytes and roofline fields): what renderers
    and comparisons read."""
    return Run.from_json(_derive_into(record))


def with_findings(record: dict[str, Any]) -> dict[str, Any]:
    """A copy of `record` with today's findings written where run/1 keeps them (`fusion`,
    `verdict`, and the bytes fields of each kernel row): what renderers and comparisons read."""
    return _derive_into(record)
