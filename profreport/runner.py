"""Profiling a run below the command line: the one driver, and `generate` on it.

`profile_runs` is the one driver (collect, time, finish, save the evidence, derive the findings,
save the reports) that `generate`, `profreport ab` (ab.py) and `profreport.profile` (api.py) run
on; `staged_run` is a command's run folder from staging to publishing; `run_point` is a
`generate` as the data a sweep point hands back, never terminal text.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TextIO, TypeVar, cast

import orjson

from profreport import interrupts
from profreport.exits import (
    EXIT_GATE,
    EXIT_INTERNAL,
    EXIT_OK,
    EvidenceSaved,
    Status,
    UsageError,
    disk_error,
    error_of,
    exit_code_of,
    findings_failed,
    refused_line,
    status_of,
)
from profreport.files import (
    RECORD,
    RUN_LOG,
    TENSORBOARD,
    TIMELINE_NAME,
    RunFolder,
    run_folder_name,
    write_tensorboard_summary,
)
from profreport.record.section import Section, omitted, required
from profreport.text import Notice, Progress, error_line

# Only what a command's edge needs is imported here, so that `generate --help` and a sweep's
# documents stay light; the driver imports torch and the pipeline when it runs.
if TYPE_CHECKING:
    import torch

    from profreport.analysis.budget import BudgetCheck
    from profreport.capture.workers import TimingWorkers
    from profreport.models import LoadedModel
    from profreport.pipeline import RunOptions, RunSetup, TimingPlan
    from profreport.record.expectation import ExpectationFile
    from profreport.record.model import MachineLoad, Run

_T = TypeVar("_T")
# Given the stream that still reaches the terminal while library output goes to run.log, the
# progress callable to use for the run (the CLI's is a status line or plain lines).
ProgressDisplay = Callable[[TextIO], AbstractContextManager[Progress]]

EAGER_BROKEN = "the model does not run in eager mode; the report says so"
# what a run's checkpointed run.json is, should the process die before the folder is published
KEPT_IF_IT_DIES = "kept if the process dies; `profreport render` reads it"
KEPT_PARTIAL = "the evidence so far is kept in {} (a partial run: `profreport render` reads it)"
# the run renderers that open with a kernel-budget check when the run was checked
_CHECKED = ("html", "md")


# ---------------------------------------------------------------- the one driver


def run_options(
    modes: Sequence[str] | None = None,
    *,
    active_steps: int = 3,
    min_time_s: float = 1.0,
    max_time_s: float = 60.0,
    bootstrap_resamples: int = 2000,
    measure_bytes: bool = False,
    remeasure_ceilings: bool = False,
    time_latency: bool = True,
    workers: int | None = None,
    workload: str = "prefill",
    device_type: str = "cpu",
) -> RunOptions:
    """Options of one run; ValueError on an unknown mode or a schedule too short.
    `modes` None: the registry's defaults for the `workload` (decode's on `device_type`:
    modes.DECODE_DEFAULT_MODES).
    `time_latency=False`: no latency timing (each mode's record says so in `not_timed`), for
    a check that needs only the profiled counts and bytes (the kernel-budget fixture).
    `workers`: the fresh processes the latency is timed in (capture/workers.py; None: the
    default, PROFREPORT_WORKERS or 3; 0: this process)."""
    from profreport.capture.workers import default_workers
    from profreport.modes import DECODE_DEFAULT_MODES, default_modes, mode_names
    from profreport.pipeline import RunOptions
    from profreport.record.model import ProfileSchedule, TimingSettings

    known = mode_names()
    if modes is not None:
        chosen = tuple(modes)
    elif workload == "decode":
        chosen = DECODE_DEFAULT_MODES.get(device_type, DECODE_DEFAULT_MODES["cpu"])
    else:
        chosen = default_modes()
    unknown = [m for m in chosen if m not in known]
    if unknown or not chosen:
        raise ValueError(
            f"unknown mode(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(known)}"
        )
    if len(set(chosen)) != len(chosen):
        raise ValueError("a mode is listed twice")
    if active_steps < 3:
        raise ValueError("active_steps must be at least 3")
    if not (min_time_s > 0 and max_time_s > 0):
        raise ValueError("min_time_s and max_time_s must be positive")
    workers = default_workers() if workers is None else workers
    if workers < 0:
        raise ValueError(f"workers must be 0 or more, not {workers}")
    return RunOptions(
        modes=chosen,
        profile=ProfileSchedule(wait=1, warmup=1, active=active_steps),
        timing=TimingSettings(min_time_s=min_time_s, max_time_s=max_time_s),
        bootstrap_resamples=bootstrap_resamples,
        measure_bytes=measure_bytes,
        remeasure_ceilings=remeasure_ceilings,
        time_latency=time_latency,
        workers=workers,
    )


def workers_ahead(
    workers: int | None, device: str, modes: Sequence[str] | None, workload: str
) -> AbstractContextManager[TimingWorkers | None]:
    """The timing workers of a run (capture/workers.workers_ahead), started before this process
    imports torch; `modes` None: the workload's defaults (decode's on the CPU: the same
    compilers as on a GPU)."""
    from profreport.capture import workers as timing_workers
    from profreport.modes import DECODE_DEFAULT_MODES, default_modes

    if modes is None:
        modes = DECODE_DEFAULT_MODES["cpu"] if workload == "decode" else default_modes()
    return timing_workers.workers_ahead(workers, device, modes)


@dataclass(frozen=True)
class Profiled:
    """What `profile_runs` made: each side's run with today's findings (and the timeline its
    reports link), each side's kernel-budget check where one was asked for, and the machine's
    load over the shared timing in each timing process (none: nothing was timed)."""

    runs: dict[str, Run]
    loads: tuple[MachineLoad | None, ...] = ()
    budgets: dict[str, BudgetCheck] = field(default_factory=dict)


def profile_runs(
    setups: Mapping[str, RunSetup],
    progress: Progress,
    *,
    plan: TimingPlan | None = None,
    reports: bool = True,
    expect: ExpectationFile | None = None,
) -> Profiled:
    """Profile one run, or several timed together (the sides of `profreport ab`), each into its
    setup's folder. In order: every side's modes built, profiled and counted (the evidence
    checkpointed after each mode); all sides timed in shared rounds (`pipeline.time_stages`:
    the timing step, prepared stages in, each side's latency out); each side finished and its
    evidence saved (run.json, the kernel tables) before any finding of any side is derived, so
    a bug in a finding costs one `profreport render`, never a run; then each side's findings,
    its check against the kernel budget `expect` and, with `reports`, its reports. `plan`:
    how the sides share the timing rounds (None: one run, its modes judged against eager)."""
    import torch

    from profreport import pipeline
    from profreport.analysis.derive import failure_summary
    from profreport.record.model import AbSide

    plan = plan or pipeline.ON_ITS_OWN
    for setup in setups.values():  # nothing of theirs runs beside the capture
        if setup.workers is not None:
            setup.workers.imported()
    collectors = {}
    for side, setup in setups.items():  # every side's decode step built before any capture
        with _side_named(side):
            collectors[side] = pipeline.RunCollector(setup)
    folders = " and ".join(str(setup.folder.record) for setup in setups.values())
    progress(Notice(f"evidence so far: {folders} ({KEPT_IF_IT_DIES})"))
    stages = {}
    for i, (side, collector) in enumerate(collectors.items()):
        # one clear of the compilers' caches for all sides: a later side's builds keep the code
        # of an earlier one, which is timed with it
        with _side_named(side):
            stages[side] = collector.prepare(fresh_compilers=not i)
    with ExitStack() as timing:
        for collector in collectors.values():
            timing.enter_context(collector.phases.phase("timing"))
        timing.enter_context(torch.no_grad())
        timed = pipeline.time_stages(stages, plan, progress)
        for side, stage in stages.items():
            stage.store(timed.stage(side), timed)
    evidence = {}
    for side, collector in collectors.items():
        ab = None
        if plan.order_name is not None and stages[side].machine_reference is not None:
            ab = AbSide(side=cast("Literal['base', 'head']", side), order=plan.order_name)
        evidence[side] = collector.finish(ab)
        save_evidence(evidence[side], setups[side].folder)
    done = Profiled({}, timed.loads)
    for side, run in evidence.items():
        setup = setups[side]
        again = pipeline.ceilings_again(setup.device, setup.dtype)
        derived = pipeline.derive_findings(run, remeasure=again, progress=setup.progress)
        if expect is not None and not failure_summary(derived):
            from profreport.analysis.budget import check_budget

            done.budgets[side] = check_budget(expect.expectation, derived, str(expect.path))
        if reports:
            derived = save_reports(derived, setup.folder, done.budgets.get(side))
        done.runs[side] = derived
    return done


@contextmanager
def _side_named(side: str) -> Iterator[None]:
    """A model the capture cannot build or record (a decode step; models.ModelError), named by
    its side of `profreport ab` ("": a run on its own)."""
    from profreport.models import ModelError

    try:
        yield
    except ModelError as exc:
        if not side:
            raise
        raise ModelError(f"{side}: {exc}") from None


def save_evidence(evidence: Run, folder: RunFolder) -> None:
    """A run's evidence, before anything is derived from it: each mode's kernel table
    (kernels_<mode>.csv, its finding columns empty until the reports are saved) and run.json."""
    from profreport.render.tables import kernel_csv

    for name in evidence.ok_modes:
        folder.write(f"kernels_{name}.csv", kernel_csv(evidence, name))
    folder.checkpoint(evidence)


def save_reports(run: Run, folder: RunFolder, budget: BudgetCheck | None = None) -> Run:
    """Write a run with its findings into `folder`: run.json, report.html, summary.md,
    kernels_<mode>.csv, the TensorBoard summary and all_modes.timeline.json (every mode's
    profiled step in one trace, linked from the report). With `budget` (analysis/budget.py),
    report.html and summary.md open with that check. Returns the run as written (with its
    timeline)."""
    from profreport.render import tensorboard_summary as tb
    from profreport.render.registry import RUN, renderers
    from profreport.render.tables import kernel_csv

    # the timeline is no evidence: the findings stand, only the link is added
    run = run.adding(timeline=_write_timeline(run, folder))
    outputs = {
        r.filename: r.render(run, **({"budget": budget} if budget and r.name in _CHECKED else {}))
        for r in renderers(RUN)
    }
    for name in run.ok_modes:
        outputs[f"kernels_{name}.csv"] = kernel_csv(run, name)
    for name, content in outputs.items():
        folder.write(name, content)
    summary = outputs["summary.md"]  # also the TensorBoard summary's text
    if not isinstance(summary, str):
        raise TypeError("the summary.md renderer gave bytes")
    write_tensorboard_summary(
        folder.path / TENSORBOARD / "summary",
        tb.scalars(run),
        tb.TEXT_TAG,
        summary,
        tb.walltime(run),
    )
    return run


def _write_timeline(run: Run, folder: RunFolder) -> str | None:
    """Every mode's profiled step as one trace (render/timeline); its file name, or None when
    no mode left a trace."""
    from profreport.render import timeline
    from profreport.traceio.load import read_document

    traces = {}
    for mode, entry in run.ok_modes.items():
        if entry.trace and (folder.path / entry.trace).is_file():
            traces[mode] = read_document(folder.path / entry.trace)
    if not traces:
        return None
    folder.write(TIMELINE_NAME, orjson.dumps(timeline.build(traces)))
    return TIMELINE_NAME


# ---------------------------------------------------------------- a command's run folder


_PROCESS_FDS = (1, 2)


def _fileno(stream: TextIO) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # StringIO and other in-memory streams
        return None


@contextmanager
def library_output(log_path: Path, err: TextIO, debug: bool, earlier: str = "") -> Iterator[TextIO]:
    """Libraries' own lines (Kineto, Inductor, the model's prints) go to run.log in the run
    folder, after the `earlier` lines (those printed while the model was built); with --debug
    they stay on the terminal.

    Kineto prints `USDT: ... profiler_start` lines from C++, Inductor's compile workers and the
    model's own code may print too; none of it is profreport's. Until the block ends, file
    descriptors 1 and 2 point at `log_path` (so C++ writes and child processes land there as
    well). Yields the stream profreport itself should write progress to: `err` unchanged when it
    is not the process's stdout or stderr (a test's StringIO), else a stream on a duplicate of
    that descriptor, so it still reaches the terminal while fd 1/2 go to the log.
    """
    if debug:
        yield err
        return
    if earlier:
        log_path.write_text(earlier, encoding="utf-8")
    for stream in (sys.stdout, sys.stderr, err):
        stream.flush()
    saved = {fd: os.dup(fd) for fd in _PROCESS_FDS}
    term_fd = _fileno(err)
    progress: TextIO = err
    own: TextIO | None = None
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        if term_fd in saved:
            own = os.fdopen(os.dup(saved[term_fd]), "w", buffering=1, encoding="utf-8")
            progress = own
        for fd in _PROCESS_FDS:
            os.dup2(log_fd, fd)
        yield progress
    finally:
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):
                stream.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        os.close(log_fd)
        if own is not None:
            own.close()


@dataclass(frozen=True)
class Terminal:
    """Where a command's run shows itself: `err`, the stream library output is kept off (see
    `library_output`; with `debug` it is not); `progress`, the display of the run's progress
    messages, given the stream that still reaches the terminal."""

    err: TextIO
    progress: ProgressDisplay = lambda _terminal: nullcontext(lambda _msg: None)
    debug: bool = False

    def built(self, build: Callable[[], _T]) -> tuple[_T, str]:
        """`build()`'s result and what libraries printed meanwhile: a model's own prints,
        transformers' and Python's warnings while it is built are library output too, kept in a
        temporary log (the run folder is named after the model, so it comes later) whose text
        then opens the run's run.log. A build that fails leaves nothing behind."""
        with tempfile.TemporaryDirectory(prefix="profreport-build-") as folder:
            log = Path(folder) / RUN_LOG
            with library_output(log, self.err, self.debug):
                built = build()
            return built, log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""


@contextmanager
def staged_run(folder: RunFolder, terminal: Terminal, build_log: str = "") -> Iterator[Progress]:
    """A command's staged run folder for the block: libraries' output to its run.log (see
    `library_output`), profreport's progress to the terminal's display, and the folder
    published when the block ends. An interrupt (one a library swallowed too) leaves nothing; a disk that
    refused a file is bad input (UsageError naming it; the evidence so far kept as
    `<name>-partial` when there is any); a bug after some evidence was saved publishes the
    folder and says where (EvidenceSaved); a bug before that leaves nothing. A model the
    capture cannot build or record (models.ModelError: a decode step) is bad input too."""
    from profreport.models import ModelError

    started = interrupts.mark()
    with (
        folder,
        library_output(folder.path / RUN_LOG, terminal.err, terminal.debug, build_log) as shown,
        terminal.progress(shown) as progress,
    ):
        try:
            yield progress
            if interrupts.since(started):  # an interrupt some library swallowed: not a whole run
                raise KeyboardInterrupt
            folder.publish()
        except (UsageError, KeyboardInterrupt):
            raise
        except ModelError as exc:  # bad input: nothing is left, as when found before
            folder.unstage()
            raise UsageError(str(exc)) from None
        except Exception as exc:
            interrupts.reraise_if_interrupted(exc, started)
            refused = disk_error(exc)
            if refused is not None:
                kept = folder.keep_partial(refused)
                where = folder.shown(refused.filename or folder.path)
                said = "nothing was kept" if kept is None else KEPT_PARTIAL.format(kept)
                raise UsageError(f"{refused_line(refused, where)}; {said}") from exc
            if not folder.records():
                raise
            folder.publish()
            raise EvidenceSaved(tuple(folder.records()), error_line(exc)) from exc


# ---------------------------------------------------------------- generate


class ResultError(ValueError):
    """A result file that is not a generate result (one line)."""


@dataclass(frozen=True)
class GenerateRequest(Section):
    """What one `generate` is asked for: the model and its size, how it runs, and the folder the
    run folder goes under (`out`). One field per `generate` flag; a sweep point's request.json."""

    SCHEMA: ClassVar[str] = "profreport.generate-request/1"
    NOUN: ClassVar[str] = "generate request"

    schema: str = SCHEMA
    model: str = "simple"
    device: str = "auto"  # auto | cpu | cuda[:N]
    dtype: str = "float32"
    modes: tuple[str, ...] | None = None  # None: the default modes
    batch_size: int | None = None
    layers: int | None = None
    seq_len: int | None = None  # decode: the prompt's tokens prefilled (the context)
    channels_last: bool = False
    workload: Literal["prefill", "decode"] = "prefill"
    out: Path = Path("reports")  # the folder the run folder is made in
    active_steps: int = 3
    min_time_s: float = 1.0
    max_time_s: float = 60.0
    threads: int | None = None
    measure_bytes: bool = False
    remeasure_ceilings: bool = False
    strict: bool = False
    workers: int | None = omitted()  # timing processes (None: the default, runner.run_options)

    def options(self, device_type: str = "cpu") -> RunOptions:
        """How the run goes (UsageError: a mode unknown, a schedule too short). Decode's default
        modes are those that run on real LMs on `device_type` (run_options)."""
        try:
            return run_options(
                self.modes,
                active_steps=self.active_steps,
                min_time_s=self.min_time_s,
                max_time_s=self.max_time_s,
                measure_bytes=self.measure_bytes,
                remeasure_ceilings=self.remeasure_ceilings,
                workers=self.workers,
                workload=self.workload,
                device_type=device_type,
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    def load(self, device: torch.device) -> LoadedModel:
        """The model, built on `device` (UsageError: it cannot be)."""
        from profreport.env import DTYPES
        from profreport.models import ModelError, load_model

        try:
            return load_model(
                self.model,
                device,
                DTYPES[self.dtype],
                self.batch_size,
                self.channels_last,
                layers=self.layers,
                seq_len=self.seq_len,
                workload=self.workload,
            )
        except ModelError as exc:
            raise UsageError(str(exc)) from None


@dataclass(frozen=True)
class ModeFailure:
    """A mode that did not run. `fatal`: it makes the run's exit code 1 (eager, or any mode
    with `strict`); otherwise it is a warning and the run counts."""

    mode: str
    status: str
    error: str
    fatal: bool

    @property
    def line(self) -> str:
        return f"{self.mode} {self.status}: {self.error}"


@dataclass(frozen=True)
class Generated:
    """A published run: its folder, its record as stored, typed, and how `generate` ends on it."""

    run_dir: Path
    run: Run
    exit_code: int
    failures: tuple[ModeFailure, ...]
    # findings that raised while being derived (a bug: exit 3), which and what each raised
    findings_failed: str | None = None
    budget: BudgetCheck | None = None  # the run against its expectation file (--expect)

    @classmethod
    def of(
        cls, run_dir: Path, run: Run, strict: bool, budget: BudgetCheck | None = None
    ) -> Generated:
        """How a published run ends: 0 when eager ran (or, without eager, any mode did); 1 when
        the model itself is broken, with `strict` when any mode failed, or over the budget; 3
        when a finding failed to derive."""
        from profreport.analysis.derive import failure_summary

        failures = tuple(
            ModeFailure(name, m.status, m.error or m.status, strict or name == "eager")
            for name, m in run.modes.items()
            if m.status != "ok"
        )
        broken = any(f.mode == "eager" for f in failures) or len(failures) == len(run.modes)
        over = budget is not None and not budget.passed
        code = EXIT_GATE if broken or (strict and failures) or over else EXIT_OK
        failed = failure_summary(run)
        return cls(run_dir, run, EXIT_INTERNAL if failed else code, failures, failed, budget)

    @property
    def eager_failed(self) -> bool:
        return any(f.mode == "eager" for f in self.failures)

    @property
    def findings_error(self) -> str | None:
        """The one line of findings that failed to derive (None when none did)."""
        if self.findings_failed is None:
            return None
        return findings_failed(self.findings_failed, self.run_dir / RECORD)

    @property
    def error(self) -> str | None:
        """Why the exit code is not 0, in one line (None when it is)."""
        if self.exit_code == EXIT_OK:
            return None
        if self.findings_error is not None:
            return self.findings_error
        lines = [f.line for f in self.failures if f.fatal] or [f.line for f in self.failures]
        if self.budget is not None and not self.budget.passed:
            lines.append(f"over the kernel budget in {self.budget.source}")
        return "; ".join([*lines, EAGER_BROKEN] if self.eager_failed else lines)


def generate(
    request: GenerateRequest,
    terminal: Terminal,
    *,
    now: datetime | None = None,
    expect: ExpectationFile | None = None,
) -> Generated:
    """Profile the requested model in every requested mode and publish its run folder under
    `request.out`. Bad input raises UsageError before anything is written; an interrupt leaves
    nothing half-written. `now` names the run folder and stamps the record. With `expect`, the
    run is checked against that kernel budget (analysis/budget.py): the reports open with the
    check, and a breach makes the exit code 1."""
    # the timing workers import torch while this process does (capture/workers.TimingWorkers)
    with workers_ahead(request.workers, request.device, request.modes, request.workload) as ahead:
        from profreport.env import device_for
        from profreport.pipeline import RunSetup

        device = device_for(request.device, request.dtype, request.threads)
        options = request.options(device.type)
        model, build_log = terminal.built(lambda: request.load(device))
        stamp = now or datetime.now(timezone.utc)
        folder = RunFolder.staged(request.out, run_folder_name(model.name, device.type, stamp))
        with staged_run(folder, terminal, build_log) as progress:
            setup = RunSetup(
                model,
                device,
                request.dtype,
                folder,
                options,
                progress,
                lambda: stamp,
                workers=ahead,
            )
            done = profile_runs({"": setup}, progress, expect=expect)
    return Generated.of(folder.path, done.runs[""], request.strict, done.budgets.get(""))


@dataclass(frozen=True)
class GenerateResult(Section):
    """How one `generate` ended, as data: what a sweep point writes to its result file and the
    sweep reads back. `run_dir` is None when no run folder was published."""

    SCHEMA: ClassVar[str] = "profreport.generate-result/1"
    NOUN: ClassVar[str] = "generate result"

    schema: str = SCHEMA
    status: Status = required("failed")  # ok | failed | interrupted: the exit code's
    exit_code: int = required(0)
    run_dir: Path | None = required(None, null=True)  # the published run folder
    record: Path | None = required(None, null=True)  # its run.json
    error: str | None = required(None, null=True)  # why the exit code is not 0, one line

    @classmethod
    def made(
        cls, exit_code: int, run_dir: Path | None = None, error: str | None = None
    ) -> GenerateResult:
        """The result of a run that ended with `exit_code` (its status follows from it)."""
        record = None if run_dir is None else run_dir / RECORD
        return cls(
            status=status_of(exit_code),
            exit_code=exit_code,
            run_dir=run_dir,
            record=record,
            error=error,
        )

    @classmethod
    def ended_by(cls, exc: BaseException) -> GenerateResult:
        """The result of a run that raised `exc` (bad input, an interrupt, a bug; a bug after
        the run's evidence was saved names its folder)."""
        run_dir = exc.record.parent if isinstance(exc, EvidenceSaved) else None
        return cls.made(exit_code_of(exc), run_dir, error_of(exc))

    @classmethod
    def parse(
        cls,
        data: Any,
        source: str = "generate result",
        error: type[Exception] = ResultError,
        closed: bool = False,
    ) -> GenerateResult:
        """`Section.parse`, and a status that is its exit code's."""
        result = super().parse(data, source, error, closed)
        if result.status != status_of(result.exit_code):
            raise error(f"{source}: status {result.status!r} for exit {result.exit_code}")
        return result


def run_point(request: GenerateRequest, err: TextIO) -> GenerateResult:
    """`generate`, and how it ended as data, whatever ended it (a sweep point's whole run)."""
    try:
        with interrupts.unmasked():
            done = generate(request, Terminal(err))
            return GenerateResult.made(done.exit_code, done.run_dir, done.error)
    except (KeyboardInterrupt, Exception) as exc:  # every ending is a result, as the CLI's is
        return GenerateResult.ended_by(exc)
