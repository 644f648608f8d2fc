"""Findings derived from a run record's evidence: one pure function every reader calls.

Capture stores what was observed (kernel tables, the tensor-I/O sequence, compiler nodes and graphs,
timing samples, environment). `derived_run(run, analyses)` computes what we conclude from it:
the roofs, each mode's speedup call and median step, its fusion map (asked of the mode's
analysis, handed in by name: analysis/mode_analysis.py), the modeled bytes, places and roofline
of each kernel row, where the step time went, the latency floor, why ops did not fuse, the
verdicts, and the module tree. Render, compare, the API and the CLI call it, so an old run.json
shows today's analysis, and renderers format these findings, computing none. The copy of the
findings that run.json keeps is for other tools, and is never read back as truth.

A finding that raises is a profreport bug, never a fact about the model: it is recorded as its
mode's `failed_finding` (which finding, what it raised, the traceback), the mode's later findings
are not derived, and `failure_summary` gives the caller what to report (the CLI
exits 3). Nothing here turns a bug into a missing or stale finding.

Speedups (`speedup_vs_eager`) are still the ones computed from the timing samples at capture time:
the bootstrap is the latency statistics' to own (analysis/latency.py).
"""

from __future__ import annotations

import dataclasses
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from profreport.analysis.attribution import kernel_places
from profreport.analysis.decode_tokens import decode_tokens
from profreport.analysis.kernel_bytes import kernel_bytes
from profreport.analysis.mode_analysis import NO_ANALYSIS, ModeAnalyses, ModeAnalysis
from profreport.analysis.module_tree import module_tree, top_savings
from profreport.analysis.paired import speedup_call
from profreport.analysis.profiler_cost import mode_median_step
from profreport.analysis.roofline import kernel_roofline, roofs_of
from profreport.analysis.speedup_breakdown import time_findings
from profreport.analysis.traffic import traffic_change
from profreport.analysis.verdict import failed_finding_verdict, verdict_for
from profreport.exits import EvidenceSaved
from profreport.record.model import (
    FailedFinding,
    KernelCounts,
    KernelRow,
    ModeEntry,
    ModeResult,
    OkMode,
    Run,
    Section,
)
from profreport.text import error_line

# Mode and kernel row fields that hold findings, not evidence (declared with `finding()`):
# dropped before deriving, so nothing stale (an older release's fusion map or verdict) can leak
# into today's analysis.
FINDING_KEYS = ModeEntry.finding_keys()
ROW_FINDING_FIELDS = KernelRow.finding_keys()
RUN_FINDING_FIELDS = Run.finding_keys()
_M = TypeVar("_M", bound=ModeEntry)
_S = TypeVar("_S", bound=Section)


def _with_table(mode: _M, rows: Callable[[KernelCounts], Iterable[KernelRow]]) -> _M:
    """`mode` with its kernel table replaced by `rows(kernels)` (unchanged without kernels: a
    mode that failed before it was profiled, or did not run)."""
    kernels = mode.kernels
    if kernels is None:
        return mode
    return dataclasses.replace(
        mode, kernels=dataclasses.replace(kernels, table=tuple(rows(kernels)))
    )


def _found(section: _S, **findings: Any) -> _S:
    """`section` with the findings that were found (a None one is left out, not written)."""
    return section.adding(**{k: v for k, v in findings.items() if v is not None})


def stripped(mode: _M) -> _M:
    """`mode` without its stored findings (its own and its kernel rows')."""
    return _with_table(
        mode.without(*FINDING_KEYS), lambda k: (r.without(*ROW_FINDING_FIELDS) for r in k.table)
    )


def _derived(mode: _M, finding: str, step: Callable[[_M], _M]) -> _M:
    """`step(mode)`: one finding of a mode. Once one of its findings has failed, the mode's
    later ones are not derived (each may read the one before, and a finding read off a missing
    one would be a wrong one). A step that raises is a profreport bug: recorded as the mode's
    `failed_finding` (its exception and traceback), which the reports show where the finding
    would be and every command that derives reports as an internal error (`failure_summary`);
    the evidence is untouched."""
    if mode.failed_finding is not None:
        return mode
    try:
        return step(mode)
    except Exception as exc:  # a bug, recorded and reported loudly: never a missing finding
        failed = FailedFinding(
            finding=finding,
            error=error_line(exc),
            traceback="".join(traceback.format_exception(exc)),
        )
        return mode.adding(failed_finding=failed)


def _measured(
    name: str, mode: OkMode, eager: OkMode | None, run: Run, analyses: ModeAnalyses
) -> OkMode:
    """A mode that ran, with the findings of its own evidence: its speedup's call, median step,
    fusion map, kernel bytes and places, where its step time went (when the record has its
    breakdown), roofline and floor."""
    analysis = analyses.get(name, NO_ANALYSIS)

    def fusion(m: OkMode) -> OkMode:
        return m.adding(fusion=analysis.fusion_map(m, eager) if name != "eager" and eager else None)

    def time(m: OkMode) -> OkMode:
        return _found(m, time_findings=time_findings(name, m, eager, run.ceilings))

    def roofline(m: OkMode) -> OkMode:
        found = kernel_roofline(m, run.roofs, None if name == "eager" else eager)
        if found is None:
            return m
        return _with_table(m, lambda _: found.rows).adding(roofline=found.floor)

    steps: tuple[tuple[str, Callable[[OkMode], OkMode]], ...] = (
        ("speedup_call", lambda m: _found(m, speedup_call=speedup_call(m.speedup_vs_eager))),
        ("median_step", lambda m: _found(m, median_step=mode_median_step(m))),
        ("fusion", fusion),
        ("kernel_bytes", lambda m: _with_table(m, lambda _: kernel_bytes(m))),
        ("kernel_places", lambda m: _with_table(m, lambda _: kernel_places(m))),
        ("time_findings", time),
        ("roofline", roofline),
    )
    for finding, step in steps:
        mode = _derived(mode, finding, step)
    return mode


def derived_run(record: Run | Mapping[str, Any], analyses: ModeAnalyses) -> Run:
    """The typed run with today's findings in place of the stored ones (every `finding()` field:
    the run's roofs and module tree, each mode's and each kernel row's), as today's schema: what
    renderers, comparisons and the library read. A mode's finding that raises is recorded as its
    `failed_finding` (see `_derived`; `failure_summary` lists them for the caller to report).
    `analyses`: each mode's analysis by name (`profreport.modes.mode_analyses()`)."""
    run = record if isinstance(record, Run) else Run.from_json(record)
    run = dataclasses.replace(run.without(*RUN_FINDING_FIELDS), schema=Run.SCHEMA)
    run = _found(run, roofs=roofs_of(run.ceilings))
    eager = run.modes.get("eager")
    baseline = stripped(eager) if isinstance(eager, OkMode) else None
    modes: dict[str, ModeResult] = {
        name: _measured(name, stripped(mode), baseline, run, analyses)
        if isinstance(mode, OkMode)
        else stripped(mode)
        for name, mode in run.modes.items()
    }
    # the traffic change reads eager's kernel rows with their bytes (which share one op's)
    derived_eager = modes.get("eager")
    if isinstance(derived_eager, OkMode):
        l2 = run.ceilings.l2_bytes if run.ceilings is not None else None
        for name, mode in modes.items():
            if name != "eager" and isinstance(mode, OkMode):

                def traffic(m: OkMode, name: str = name, eager: OkMode = derived_eager) -> OkMode:
                    return _found(m, traffic=traffic_change(name, m, eager, l2))

                modes[name] = _derived(mode, "traffic", traffic)
    # why-not-fused and verdicts read the run whose modes carry their fusion maps
    run = dataclasses.replace(run, modes=dict(modes))
    for name, mode in run.modes.items():
        analysis = analyses.get(name, NO_ANALYSIS)

        def why(m: ModeResult, name: str = name, analysis: ModeAnalysis = analysis) -> ModeResult:
            found = None
            if isinstance(m, OkMode) and name != "eager":
                found = analysis.why_not_fused(m, run)
            return m if found is None else m.adding(why_not_fused=tuple(found))

        def verdict(
            m: ModeResult, name: str = name, analysis: ModeAnalysis = analysis
        ) -> ModeResult:
            return m.adding(verdict=verdict_for(name, run, analysis))

        mode = _derived(_derived(mode, "why_not_fused", why), "verdict", verdict)
        if mode.failed_finding is not None:  # the sentence says which finding failed, and why
            mode = mode.adding(verdict=failed_finding_verdict(name, mode.failed_finding))
        modes[name] = mode
    # the module tree reads every mode's fusion map and median step
    run = dataclasses.replace(run, modes=modes)
    return _found(
        run,
        module_tree=module_tree(run),
        module_savings=top_savings(run) or None,
        decode_tokens=decode_tokens(run),
    )


def failure_summary(run: Run) -> str | None:
    """Which findings of a derived run failed (a profreport bug each) and what each raised, on
    one line (None: none did): `optimize: why_not_fused raised IndexError: ...; trace: ...`."""
    failed = [(n, m.failed_finding) for n, m in run.modes.items() if m.failed_finding is not None]
    return "; ".join(f"{n}: {f.finding} raised {f.error}" for n, f in failed) if failed else None


def compared_run(record: Run | Mapping[str, Any], analyses: ModeAnalyses, path: Path) -> Run:
    """`derived_run` for a comparison, where a finding that is missing would read as a change:
    EvidenceSaved (exit 3, naming the record at `path`) when a finding failed to derive."""
    run = derived_run(record, analyses)
    failed = failure_summary(run)
    if failed is not None:
        raise EvidenceSaved(path, f"deriving findings failed ({failed})")
    return run
