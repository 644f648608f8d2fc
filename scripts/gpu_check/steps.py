"""What a gpu-check runs, each step a subprocess with its own log and time limit inside one
overall budget, so the whole check ends in time and its summary is always written.

A step's command is made when its turn comes (a step that needs an earlier one's output says
why it cannot run instead). A step that outlives its limit is ended with its whole process group
(ncu and its child included): SIGTERM (profreport removes its unfinished run folder), then SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gpu_check.evidence import (
    SALVAGED_PREFIX,
    Evidence,
    StepOutcome,
    partial_folder,
    read_json,
    read_traces,
    run_folder,
    traces_by_mode,
)
from gpu_check.spec import COMPARED, GENERATE_TIMING, RENDERED, RUNS, RunSpec

SCRIPTS = Path(__file__).resolve().parents[1]
TAIL_RESERVE_S = 15.0  # kept back from the steps for the checks, the summary and the archive
MIN_STEP_S = 5.0  # a step offered less than this is not started
KILL_GRACE_S = 5.0


@dataclass
class Workspace:
    """The work folder, the environment every step runs in, and what earlier steps left."""

    work: Path
    env: dict[str, str]
    site: Path | None = None  # where the carried wheels are installed, if they were
    python: str = sys.executable
    evidence: Evidence = field(default_factory=Evidence)

    def profreport(self, *args: str) -> list[str]:
        return [self.python, "-m", "profreport", *args]

    def run_dir(self, label: str) -> Path | None:
        return self.evidence.run_dirs.get(label)


Command = Callable[[Workspace], "list[str] | str"]  # argv, or why the step cannot run
Collect = Callable[[Workspace], None]  # reads the step's outputs into the evidence


@dataclass(frozen=True)
class Step:
    name: str
    cap_s: float
    command: Command
    collect: Collect | None = None
    # called at the step's time limit before it is ended: keeps what it wrote so far (a
    # generate's staged run folder, which profreport removes when it is stopped)
    salvage: Collect | None = None


def step_env(base: dict[str, str], work: Path, site: Path | None) -> dict[str, str]:
    """The environment of every step: the carried wheels' site first on PYTHONPATH (so the
    installed profreport is imported, never a source tree), this package importable, caches
    (ceilings, Inductor) shared by the steps inside the work folder, output unbuffered, and
    Python's fault handler on."""
    env = dict(base)
    paths = [str(site)] if site is not None else []
    paths.append(str(SCRIPTS))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    if site is not None:
        env["PATH"] = f"{site / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PROFREPORT_CACHE_DIR"] = str(work / "cache" / "profreport")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(work / "cache" / "inductor")
    env["PYTHONUNBUFFERED"] = "1"
    # a step that dies of a signal (SIGSEGV in a native library) leaves its Python stack in its log
    env["PYTHONFAULTHANDLER"] = "1"
    return env


def install_command(wheels: Path, site: Path) -> Command:
    """pip installs the carried wheels offline into `site` (no index, no dependencies resolved:
    the machine's own packages stay as they are)."""

    def command(ws: Workspace) -> list[str] | str:
        found = sorted(wheels.glob("*.whl"))
        if not found:
            return f"no wheels in {wheels} (run scripts/build-gpu-wheels and carry the folder)"
        return [
            ws.python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--target",
            str(site),
            *map(str, found),
        ]

    return command


def _preflight(ws: Workspace) -> list[str]:
    site = ["--wheels-site", str(ws.site)] if ws.site is not None else []
    return [ws.python, "-m", "gpu_check.preflight", "--out", str(ws.work / "preflight.json"), *site]


def _collect_preflight(ws: Workspace) -> None:
    ws.evidence.preflight = read_json(ws.work / "preflight.json")


def _generate(spec: RunSpec, device: str) -> Command:
    def command(ws: Workspace) -> list[str]:
        out = ws.work / "runs" / spec.label
        # --debug: an internal error's traceback in the step's log
        return ws.profreport(
            "generate", *spec.generate_args(), "--device", device, *GENERATE_TIMING,
            "--quiet", "--debug", "--out", str(out),
        )  # fmt: skip

    return command


def _runs_parent(ws: Workspace, label: str) -> Path:
    return ws.work / "runs" / label


def _collect_run(spec: RunSpec) -> Collect:
    """The published run folder; else the staged one a crashed generate left (its run.json holds
    the modes that finished), or the copy kept at the step's time limit."""

    def collect(ws: Workspace) -> None:
        parent = _runs_parent(ws, spec.label)
        found = run_folder(parent)
        partial = None
        if found is None:
            found = partial_folder(parent)
            partial = "the run did not finish: its staged record holds the modes that did"
        if found is None:
            return
        record = read_json(found / "run.json")
        if record is not None:
            ws.evidence.runs[spec.label] = record
            ws.evidence.run_dirs[spec.label] = found
            ws.evidence.traces[spec.label] = read_traces(record, found)
            if partial is not None:
                ws.evidence.partial[spec.label] = partial

    return collect


def _salvage_run(spec: RunSpec) -> Collect:
    """At the time limit: a copy of the staged run folder (profreport deletes it when stopped),
    read as the run's evidence by `_collect_run`."""

    def salvage(ws: Workspace) -> None:
        parent = _runs_parent(ws, spec.label)
        staged = partial_folder(parent, staged_only=True)
        if staged is not None:
            kept = parent / f"{SALVAGED_PREFIX}{staged.name.lstrip('.')}"
            # a file the run replaces meanwhile may fail to copy: the rest, run.json first, is
            # still worth keeping (its checkpoints are written whole, by rename)
            record = parent / f".{kept.name}.run.json"
            shutil.copy2(staged / "run.json", record)
            # some files may go meanwhile: keep what was copied
            with contextlib.suppress(shutil.Error):
                shutil.copytree(staged, kept, dirs_exist_ok=True)
            kept.mkdir(exist_ok=True)
            os.replace(record, kept / "run.json")
        _collect_run(spec)(ws)

    return salvage


def _analyze(label: str) -> Command:
    """`profreport analyze` of one run's traces, right after its generate."""

    def command(ws: Workspace) -> list[str] | str:
        record, run_dir = ws.evidence.runs.get(label), ws.run_dir(label)
        if record is None or run_dir is None:
            return f"no {label} run record"
        traces = [str(run_dir / rel) for rel in traces_by_mode(record).values()]
        if not traces:
            return f"{label}: no mode left a trace"
        out = ws.work / "analyze" / label
        return ws.profreport("analyze", "--format", "json", "--out", str(out), *traces)

    return command


def _collect_analysis(label: str) -> Collect:
    def collect(ws: Workspace) -> None:
        analysis = read_json(ws.work / "analyze" / label / "analysis.json")
        if analysis is not None:
            ws.evidence.analyses[label] = analysis

    return collect


def _compare(ws: Workspace) -> list[str] | str:
    """Two different runs (different models: every number changes), so the check can hold each
    change against the two runs' own traces."""
    base, head = (ws.run_dir(label) for label in COMPARED)
    if base is None or head is None:
        return f"no {' or '.join(COMPARED)} run folder"
    out = ws.work / "compare.json"
    return ws.profreport(
        "compare", str(base), str(head), "--allow-different-models",
        "--format", "json", "--out", str(out),
    )  # fmt: skip


def _collect_compare(ws: Workspace) -> None:
    ws.evidence.comparison = read_json(ws.work / "compare.json")


def _render(ws: Workspace) -> list[str] | str:
    run_dir = ws.run_dir(RENDERED)
    if run_dir is None:
        return f"no {RENDERED} run folder"
    return ws.profreport("render", str(run_dir), "--out", str(ws.work / "render"))


def _collect_render(ws: Workspace) -> None:
    folder = ws.work / "render"
    if folder.is_dir():
        ws.evidence.rendered = {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
        summary = folder / "summary.md"
        if summary.is_file():
            ws.evidence.rendered_summary = summary.read_text(encoding="utf-8")


def plan(
    device: str = "cuda",
    wheels: Path | None = None,
    site: Path | None = None,
    runs: tuple[RunSpec, ...] = RUNS,
    cap_scale: float = 1.0,
) -> list[Step]:
    """The steps in order: install (when wheels are carried), preflight, then each generate run
    in order of value, each followed by `analyze` of its traces; `render` right after the run it
    renders, `compare` right after the second of the runs it compares. `cap_scale` stretches
    every step's limit (a slow CPU machine, in tests); the budget still binds."""
    steps = []
    if wheels is not None and site is not None:
        steps.append(Step("install", 60, install_command(wheels, site)))
    steps.append(Step("preflight", 100, _preflight, _collect_preflight))
    done: set[str] = set()
    for s in runs:
        steps.append(
            Step(f"generate {s.label}", s.cap_s, _generate(s, device), _collect_run(s),
                 _salvage_run(s))
        )  # fmt: skip
        steps.append(Step(f"analyze {s.label}", 60, _analyze(s.label), _collect_analysis(s.label)))
        done.add(s.label)
        if s.label == RENDERED:
            steps.append(Step("render", 40, _render, _collect_render))
        if s.label in COMPARED and set(COMPARED) <= done:
            steps.append(Step("compare", 30, _compare, _collect_compare))
    return [Step(s.name, s.cap_s * cap_scale, s.command, s.collect, s.salvage) for s in steps]


def _log_name(step: str) -> str:
    return "logs/" + "".join(c if c.isalnum() or c in "-_." else "-" for c in step) + ".log"


def _last_line(path: Path) -> str:
    lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    """End the step's whole process group: SIGTERM, then SIGKILL what is left."""
    for sig, wait_s in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:  # the group ended meanwhile
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_step(
    step: Step, ws: Workspace, timeout_s: float, clock: Callable[[], float]
) -> StepOutcome:
    """Run one step with its output in its log; never raises for the step's own failure."""
    log = ws.work / _log_name(step.name)
    log.parent.mkdir(parents=True, exist_ok=True)
    command = step.command(ws)
    if isinstance(command, str):
        log.write_text(f"not run: {command}\n")
        return StepOutcome(step.name, "not run", reason=command, log=_log_name(step.name))
    start = clock()
    with log.open("wb") as out:
        out.write(("$ " + " ".join(command) + "\n").encode())
        out.flush()
        try:
            proc = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=ws.work,
                env=ws.env,
                start_new_session=True,
            )
        except OSError as exc:
            return StepOutcome(step.name, "failed", reason=f"could not start: {exc}")
        try:
            code = proc.wait(timeout=timeout_s)
        except BaseException as exc:
            if isinstance(exc, subprocess.TimeoutExpired) and step.salvage is not None:
                try:
                    step.salvage(ws)  # what it wrote so far, before it is ended
                except OSError as lost:
                    out.write(f"\ngpu-check: nothing kept at the time limit: {lost}\n".encode())
            _end_group(proc)  # never leave a step running behind the check
            if not isinstance(exc, subprocess.TimeoutExpired):
                raise
            return StepOutcome(
                step.name, "timeout", clock() - start, None, timeout_s,
                "ended at its time limit", _log_name(step.name),
            )  # fmt: skip
    seconds = clock() - start
    status = "ok" if code == 0 else "failed"
    reason = "" if code == 0 else _last_line(log)
    if step.collect is not None:
        try:
            step.collect(ws)
        except (OSError, ValueError) as exc:  # its output is there but unreadable: say so
            status, reason = "failed", f"its output could not be read: {exc}"
    return StepOutcome(step.name, status, seconds, code, timeout_s, reason, _log_name(step.name))


def run_plan(
    steps: list[Step],
    ws: Workspace,
    budget_s: float,
    clock: Callable[[], float] = time.monotonic,
    progress: Callable[[str], None] = lambda _line: None,
) -> Evidence:
    """Run the steps in order, each limited to its cap and to what is left of the budget (less
    the tail reserve); what is out of time is recorded as not run. Returns the evidence."""
    started = clock()
    ws.evidence.budget_s = budget_s
    for step in steps:
        left = budget_s - TAIL_RESERVE_S - (clock() - started)
        if left < MIN_STEP_S:
            outcome = StepOutcome(step.name, "not run", reason=f"out of time ({left:.0f} s left)")
        else:
            progress(f"{step.name} (limit {min(step.cap_s, left):.0f} s)")
            outcome = run_step(step, ws, min(step.cap_s, left), clock)
        ws.evidence.steps[step.name] = outcome
        progress(outcome.describe())
    ws.evidence.elapsed_s = clock() - started
    return ws.evidence
