"""`profreport compare` of two sweep.json files: every point matched by model, batch size,
sequence length and dtype, then compared and gated mode by mode on its two run records with the
run comparison (analysis/compare.py). A point that ran in base and failed in head is a regression
when any threshold is set, as a mode that stopped working is in a run comparison.

`compare_sweeps` is pure (the records come in loaded); `compare_sweep_files` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from profreport.analysis.compare import (
    CompareError,
    Comparison,
    Regression,
    Thresholds,
    compare_runs,
)
from profreport.record.model import Run
from profreport.record.section import Section, required, required_factory
from profreport.sweep.model import Sweep, SweepRecordError, is_sweep, load_sweep


@dataclass(frozen=True)
class PointEntry(Section):
    """One point of both sweeps: its two statuses, and its run comparison where both have a run
    record (or why there is none)."""

    point: str = required("")  # the point's label: model, batch size, sequence length, dtype
    base_status: str = required("")
    head_status: str = required("")
    note: str = ""
    # the two runs compared (a profreport.compare/2 document), where both sides have one
    comparison: Comparison | None = required(None, null=True)


@dataclass(frozen=True)
class SweepComparison(Section):
    """Two sweep records compared point by point (`profreport.sweep-compare/1`): what
    `profreport compare --format json` writes for two sweep.json files."""

    SCHEMA: ClassVar[str] = "profreport.sweep-compare/1"
    NOUN: ClassVar[str] = "sweep comparison"

    schema: str = SCHEMA
    base: str = required("")  # where the base sweep came from, as the caller named it
    head: str = required("")
    thresholds: Thresholds = required_factory(Thresholds)  # the gates applied
    points: tuple[PointEntry, ...] = required(())
    only_in_base: tuple[str, ...] = required(())  # points of one sweep only, by label
    only_in_head: tuple[str, ...] = required(())
    regressions: tuple[Regression, ...] = required(())
    regressed: bool = required(False)
    inconclusive: tuple[str, ...] = required(())  # latencies the gates could not judge


def compare_sweeps(
    base: Sweep,
    head: Sweep,
    base_runs: dict[str, Run],
    head_runs: dict[str, Run],
    thresholds: Thresholds | None = None,
    base_label: str = "base",
    head_label: str = "head",
) -> SweepComparison:
    """Compare two sweep records; `*_runs` map a point id to its (derived) run, for the points
    that have one."""
    thresholds = thresholds or Thresholds()
    head_points = {p.key: p for p in head.points}
    base_keys = {p.key for p in base.points}
    out: list[PointEntry] = []
    regressions: list[Regression] = []
    for bp in base.points:
        hp = head_points.get(bp.key)
        if hp is None:
            continue
        label = bp.label
        b_run, h_run = base_runs.get(bp.id), head_runs.get(hp.id)
        if b_run is not None and h_run is not None:
            try:
                c = compare_runs(
                    b_run, h_run, thresholds, f"{base_label}:{bp.id}", f"{head_label}:{hp.id}"
                )
            except CompareError as exc:
                out.append(PointEntry(label, bp.status, hp.status, f"not compared: {exc}"))
                continue
            regressions += [
                Regression(r.mode, r.metric, f"{label}: {r.message}") for r in c.regressions
            ]
            out.append(PointEntry(label, bp.status, hp.status, comparison=c))
            continue
        note = "no run record on " + " and ".join(
            side for side, run in (("base", b_run), ("head", h_run)) if run is None
        )
        if b_run is not None and thresholds.any_set:
            error = hp.error or hp.status
            regressions.append(
                Regression("*", "status", f"{label}: was ok, now {hp.status}: {error}")
            )
        out.append(PointEntry(label, bp.status, hp.status, note))
    return SweepComparison(
        base=base_label,
        head=head_label,
        thresholds=thresholds,
        points=tuple(out),
        only_in_base=tuple(p.label for p in base.points if p.key not in head_points),
        only_in_head=tuple(p.label for p in head.points if p.key not in base_keys),
        regressions=tuple(regressions),
        regressed=bool(regressions),
        inconclusive=tuple(
            f"{p.point}: {line}"
            for p in out
            if p.comparison is not None
            for line in p.comparison.inconclusive
        ),
    )


# ---------------------------------------------------------------- the command's edge


def either_is_sweep(*paths: str) -> bool:
    return any(Path(p).is_file() and is_sweep(Path(p)) for p in paths)


def _runs(sweep: Sweep, sweep_path: Path) -> dict[str, Run]:
    from profreport.analysis.derive import compared_run
    from profreport.modes import mode_analyses
    from profreport.record import RecordError, load

    root = sweep_path.parent
    runs = {}
    for p in sweep.points:
        if p.run:
            try:
                record = load(root / p.run)
            except RecordError:
                continue  # the point is then compared as having no run record
            runs[p.id] = compared_run(record, mode_analyses(), root / p.run)
    return runs


def compare_sweep_files(base: str, head: str, thresholds: Thresholds) -> SweepComparison:
    """Load two sweep.json files (and the run records they point at) and compare them;
    SweepRecordError when either is not a readable sweep record."""
    for source in (base, head):
        if not either_is_sweep(source):
            raise SweepRecordError(
                f"cannot compare a sweep with a run: {source} is not a sweep.json"
            )
    b, h = load_sweep(Path(base)), load_sweep(Path(head))
    return compare_sweeps(b, h, _runs(b, Path(base)), _runs(h, Path(head)), thresholds, base, head)
