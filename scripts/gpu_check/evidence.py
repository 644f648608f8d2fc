"""What the checks read: each step's outcome and the outputs it left, parsed into plain values.

Reading is separate from checking so the checks stay pure functions over `Evidence`, testable on
records made by hand or from recorded traces.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_check import rawtrace
from gpu_check.rawtrace import RawTrace

JSON = dict[str, Any]
SALVAGED_PREFIX = "salvaged-"  # a staged run folder gpu-check copied at its step's time limit


@dataclass(frozen=True)
class StepOutcome:
    """How one step ended: `status` is ok, failed (non-zero exit), timeout or not run."""

    name: str
    status: str
    seconds: float = 0.0
    returncode: int | None = None
    timeout_s: float | None = None
    reason: str = ""  # why it failed or did not run, one line
    log: str = ""  # its log, relative to the work folder

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def describe(self) -> str:
        if self.status == "ok":
            return f"{self.name}: ok in {self.seconds:.0f} s"
        if self.status == "timeout":
            return (
                f"{self.name}: timed out after {self.seconds:.0f} s (limit {self.timeout_s:.0f} s)"
            )
        if self.status == "not run":
            return f"{self.name}: not run ({self.reason})"
        return f"{self.name}: exit {self.returncode} after {self.seconds:.0f} s ({self.reason})"


@dataclass
class Evidence:
    """Everything one gpu-check left behind, by step: run records by run label, each mode's
    trace read raw (rawtrace), `analyze` outputs by run label, the comparison, the rendered
    report, the preflight readings."""

    steps: dict[str, StepOutcome] = field(default_factory=dict)
    preflight: JSON | None = None
    runs: dict[str, JSON] = field(default_factory=dict)
    run_dirs: dict[str, Path] = field(default_factory=dict)
    # run label -> mode -> its trace's raw events, counted (None: the file could not be read)
    traces: dict[str, dict[str, RawTrace | str]] = field(default_factory=dict)
    # run label -> why its record is a staged one (the run did not finish)
    partial: dict[str, str] = field(default_factory=dict)
    analyses: dict[str, JSON] = field(default_factory=dict)
    comparison: JSON | None = None
    rendered: dict[str, int] | None = None  # file name -> size in bytes
    rendered_summary: str | None = None  # the rendered summary.md
    budget_s: float = 480.0
    elapsed_s: float = 0.0

    def missing(self, step: str) -> str:
        """Why the output of `step` is absent, for a FAIL line."""
        outcome = self.steps.get(step)
        if outcome is None:
            return f"step {step} was not in the plan"
        if outcome.ok:
            return f"step {step} ran but left no output"
        return outcome.describe()


def read_json(path: Path) -> JSON | None:
    """A JSON object from `path`, None when the file is absent (a step that did not get there)."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def run_folder(parent: Path) -> Path | None:
    """The one run folder `generate --out parent` published (None when it published none)."""
    if not parent.is_dir():
        return None
    runs = sorted(
        p
        for p in parent.iterdir()
        if p.is_dir()
        and not p.name.startswith((".", SALVAGED_PREFIX))
        and (p / "run.json").is_file()
    )
    return runs[-1] if runs else None


def partial_folder(parent: Path, staged_only: bool = False) -> Path | None:
    """A run folder generate staged and never published, with the run.json it checkpoints after
    each mode: its own `.<name>.partial-*` (left by a crash), or the copy gpu-check kept of it at
    the step's time limit (`salvaged-*`; not with `staged_only`)."""
    if not parent.is_dir():
        return None
    prefixes = (".",) if staged_only else (".", SALVAGED_PREFIX)
    found = sorted(
        p
        for p in parent.iterdir()
        if p.is_dir()
        and p.name.startswith(prefixes)
        and ".partial-" in p.name
        and (p / "run.json").is_file()
    )
    kept = [p for p in found if p.name.startswith(SALVAGED_PREFIX)]
    chosen = kept or found
    return chosen[-1] if chosen else None


def read_traces(record: JSON, run_dir: Path) -> dict[str, RawTrace | str]:
    """Each ok mode's trace read raw; a trace that cannot be read is the line saying why."""
    found: dict[str, RawTrace | str] = {}
    for mode, rel in traces_by_mode(record).items():
        try:
            found[mode] = rawtrace.read(run_dir / rel)
        except (OSError, ValueError) as exc:
            found[mode] = f"{rel}: {type(exc).__name__}: {exc}"
    return found


def traces_by_mode(record: JSON) -> dict[str, str]:
    """Each ok mode's trace file, relative to its run folder, in record order."""
    return {
        name: str(mode["trace"])
        for name, mode in record.get("modes", {}).items()
        if mode.get("status") == "ok" and mode.get("trace")
    }


def analysis_by_mode(analysis: JSON, record: JSON, run_dir: Path) -> dict[str, JSON]:
    """`profreport analyze --format json` results keyed by the mode whose trace each one read."""
    by_path = {str((run_dir / rel).resolve()): name for name, rel in traces_by_mode(record).items()}
    found: dict[str, JSON] = {}
    for trace in analysis.get("traces", []):
        name = by_path.get(str(Path(trace.get("path", "")).resolve()))
        if name is not None:
            found[name] = trace
    return found
