"""One `generate` below the command line: a typed request in, a published run folder out.

`profreport generate` (cli/generate.py) and every sweep point (sweep/point.py, in a child process
or a Ray worker) call `generate`. `run_point` turns however a run ended (a run folder, bad input,
an interrupt, a bug) into a `GenerateResult`: the data a sweep reads, never terminal text.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TextIO, TypeVar

from profreport import interrupts
from profreport.exits import (
    EXIT_GATE,
    EXIT_INTERNAL,
    EXIT_OK,
    EvidenceSaved,
    Status,
    UsageError,
    error_of,
    exit_code_of,
    findings_failed,
    status_of,
)
from profreport.files import StagedFolder, not_a_file
from profreport.record.section import Section, required
from profreport.text import Notice, error_line, first_line

if TYPE_CHECKING:
    import torch

    from profreport.analysis.budget import BudgetCheck
    from profreport.record.expectation import ExpectationFile
    from profreport.record.model import Run

Progress = Callable[[str], None]
_T = TypeVar("_T")
# Given the stream that still reaches the terminal while library output goes to run.log, the
# progress callable to use for the run (the CLI's is a status line or plain lines).
ProgressDisplay = Callable[[TextIO], AbstractContextManager[Progress]]

LOG_NAME = "run.log"
EAGER_BROKEN = "the model does not run in eager mode; the report says so"
# what the staged run.json is, should the process die before the run folder is published
KEPT_IF_IT_DIES = "kept if the process dies; `profreport render` reads it"
# With the device, the time, a `-N` suffix and the staging folder's `.<name>.partial-XXXXXXXX`,
# a slug this long stays far below the 255-byte limit on a file name.
SLUG_MAX = 96


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
    seq_len: int | None = None
    channels_last: bool = False
    out: Path = Path("reports")  # the folder the run folder is made in
    active_steps: int = 3
    min_time_s: float = 1.0
    max_time_s: float = 60.0
    threads: int | None = None
    measure_bytes: bool = False
    remeasure_ceilings: bool = False
    strict: bool = False


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

    @property
    def eager_failed(self) -> bool:
        return any(f.mode == "eager" for f in self.failures)

    @property
    def findings_error(self) -> str | None:
        """The one line of findings that failed to derive (None when none did)."""
        if self.findings_failed is None:
            return None
        return findings_failed(self.findings_failed, self.run_dir / "run.json")

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
        record = None if run_dir is None else run_dir / "run.json"
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


def run_name(model: str, device: str, now: datetime) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", model).strip("-.") or "model"  # ASCII: chars = bytes
    if len(slug) > SLUG_MAX:  # recognisable by its start, told apart by a hash of the whole name
        digest = hashlib.sha256(model.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        slug = f"{slug[: SLUG_MAX - len(digest) - 1].rstrip('-.')}-{digest}"
    return f"{slug}-{device}-{now.strftime('%Y%m%dT%H%M%SZ')}"


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


def built_off_the_terminal(build: Callable[[], _T], err: TextIO, debug: bool) -> tuple[_T, str]:
    """`build()`'s result and what libraries printed meanwhile: a model's own prints,
    transformers' and Python's warnings while it is built are library output too, kept in a
    temporary log (the run folder is named after the model, so it comes later) whose text
    then opens the run's run.log. A build that fails leaves nothing behind."""
    with tempfile.TemporaryDirectory(prefix="profreport-build-") as folder:
        log = Path(folder) / LOG_NAME
        with library_output(log, err, debug):
            built = build()
        return built, log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""


def staging(parent: Path, name: str) -> StagedFolder:
    not_a_file(parent)
    try:
        return StagedFolder(parent, name)
    except OSError as exc:
        raise UsageError(f"cannot write to --out {parent}: {exc.strerror or exc}") from None


def device_for(device_name: str, dtype_name: str, threads: int | None) -> torch.device:
    """`threads` applied, `device_name` resolved and checked to run `dtype_name` (UsageError
    if not)."""
    import torch

    from profreport.env import DTYPES, dtype_problem, resolve_device

    if threads:
        torch.set_num_threads(threads)
    try:
        device = resolve_device(device_name)
    except (ValueError, RuntimeError) as exc:
        raise UsageError(first_line(exc)) from None
    problem = dtype_problem(device, DTYPES[dtype_name])
    if problem:
        raise UsageError(problem)
    return device


def mode_failures(run: Run, strict: bool) -> tuple[int, tuple[ModeFailure, ...]]:
    """The exit code of a finished run and the modes that failed: 0 when eager ran (or, without
    eager, any mode did); 1 when the model itself is broken, or with `strict` any mode failed."""
    failures = tuple(
        ModeFailure(name, m.status, m.error or m.status, strict or name == "eager")
        for name, m in run.modes.items()
        if m.status != "ok"
    )
    broken = any(f.mode == "eager" for f in failures) or len(failures) == len(run.modes)
    return (EXIT_GATE if broken or (strict and failures) else EXIT_OK), failures


def _silent(_terminal: TextIO) -> AbstractContextManager[Progress]:
    return nullcontext(lambda _msg: None)


def generate(
    request: GenerateRequest,
    err: TextIO,
    *,
    progress_display: ProgressDisplay = _silent,
    debug: bool = False,
    now: datetime | None = None,
    expect: ExpectationFile | None = None,
) -> Generated:
    """Profile the requested model in every requested mode and publish its run folder under
    `request.out`. Bad input raises UsageError before anything is written; an interrupt leaves
    nothing half-written. `err` is the terminal stream library output is kept off (see
    `library_output`); `now` names the run folder and stamps the record. With `expect`, the run
    is checked against that kernel budget (analysis/budget.py): the reports open with the check,
    and a breach makes the exit code 1."""
    from profreport import api
    from profreport.analysis.derive import failure_summary
    from profreport.env import DTYPES
    from profreport.models import LoadedModel, ModelError, load_model
    from profreport.pipeline import RunSetup, ceilings_again, collect_run, derive_findings

    started = interrupts.mark()
    try:
        options = api.run_options(
            request.modes,
            active_steps=request.active_steps,
            min_time_s=request.min_time_s,
            max_time_s=request.max_time_s,
            measure_bytes=request.measure_bytes,
            remeasure_ceilings=request.remeasure_ceilings,
        )
    except ValueError as exc:
        raise UsageError(str(exc).replace("active_steps", "--active-steps")) from None
    device = device_for(request.device, request.dtype, request.threads)

    def build() -> LoadedModel:
        try:
            return load_model(
                request.model,
                device,
                DTYPES[request.dtype],
                request.batch_size,
                request.channels_last,
                layers=request.layers,
                seq_len=request.seq_len,
            )
        except ModelError as exc:
            raise UsageError(str(exc)) from None

    model, build_log = built_off_the_terminal(build, err, debug)

    stamp = now or datetime.now(timezone.utc)
    with (
        staging(request.out, run_name(model.name, device.type, stamp)) as staged,
        library_output(staged.path / LOG_NAME, err, debug, build_log) as terminal,
        progress_display(terminal) as progress,
    ):
        folder = staged.path
        progress(Notice(f"evidence so far: {folder / 'run.json'} ({KEPT_IF_IT_DIES})"))
        budget = None
        try:
            setup = RunSetup(
                model,
                device,
                request.dtype,
                folder,
                options,
                progress,
                now=lambda: stamp,
                checkpoint=partial(_checkpoint, folder=folder, out=request.out),
            )
            evidence = collect_run(setup)
            _saved(lambda: api.save_evidence(evidence, folder), request.out)
            # a finding that raises is recorded in its mode
            again = ceilings_again(device, request.dtype)
            run = derive_findings(evidence, remeasure=again, progress=progress)
            if expect is not None and not failure_summary(run):
                from profreport.analysis.budget import check_budget

                budget = check_budget(expect.expectation, run, str(expect.path))
            result = api.RunResult(run, folder)
            _saved(lambda: result.save(folder, budget=budget), request.out)
            if interrupts.since(started):  # an interrupt some library swallowed: not a whole run
                raise KeyboardInterrupt
            run_dir = _saved(staged.publish, request.out)
        except (UsageError, KeyboardInterrupt):
            raise
        except Exception as exc:  # a bug: what was saved of the run is kept, and said where
            interrupts.reraise_if_interrupted(exc, started)
            if not (folder / "run.json").is_file():
                raise
            record = _saved(staged.publish, request.out) / "run.json"
            raise EvidenceSaved(record, error_line(exc)) from exc
    code, failures = mode_failures(run, request.strict)
    failed = failure_summary(run)
    if budget is not None and not budget.passed:
        code = EXIT_GATE
    return Generated(run_dir, run, EXIT_INTERNAL if failed else code, failures, failed, budget)


def _checkpoint(evidence: Run, folder: Path, out: Path) -> None:
    """The evidence so far as the staged run.json: what a process that dies leaves behind in
    its `.<name>.partial-*` folder (`profreport render` reads it)."""
    from profreport import api

    _saved(lambda: api.save_record(evidence, folder), out)


def _saved(write: Callable[[], _T], out: Path) -> _T:
    """`write()`; a full disk or a folder made read-only meanwhile is no bug but bad input."""
    try:
        return write()
    except OSError as exc:
        raise UsageError(f"cannot write the run under {out}: {exc.strerror or exc}") from exc


def run_point(request: GenerateRequest, err: TextIO) -> GenerateResult:
    """`generate`, and how it ended as data, whatever ended it (a sweep point's whole run)."""
    try:
        with interrupts.unmasked():
            done = generate(request, err)
            return GenerateResult.made(done.exit_code, done.run_dir, done.error)
    except (KeyboardInterrupt, Exception) as exc:  # every ending is a result, as the CLI's is
        return GenerateResult.ended_by(exc)
