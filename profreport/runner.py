"""One `generate` below the command line: a typed request in, a published run folder out.

`profreport generate` (cli/generate.py) and every sweep point (sweep/point.py, in a child process
or a Ray worker) call `generate`. `run_point` turns however a run ended (a run folder, bad input,
an interrupt, a bug) into a `GenerateResult`: the data a sweep reads, never terminal text.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from profreport import interrupts
from profreport.exits import (
    EXIT_GATE,
    EXIT_OK,
    Status,
    UsageError,
    error_of,
    exit_code_of,
    status_of,
)
from profreport.files import StagedFolder, not_a_file
from profreport.text import first_line

if TYPE_CHECKING:
    import torch

    from profreport.analysis.budget import BudgetCheck
    from profreport.record.expectation import ExpectationFile
    from profreport.record.model import Run

Progress = Callable[[str], None]
# Given the stream that still reaches the terminal while library output goes to run.log, the
# progress callable to use for the run (the CLI's is a status line or plain lines).
ProgressDisplay = Callable[[TextIO], AbstractContextManager[Progress]]

LOG_NAME = "run.log"
RESULT_SCHEMA = "profreport.generate-result/1"
EAGER_BROKEN = "the model does not run in eager mode; the report says so"
# With the device, the time, a `-N` suffix and the staging folder's `.<name>.partial-XXXXXXXX`,
# a slug this long stays far below the 255-byte limit on a file name.
SLUG_MAX = 96


class ResultError(ValueError):
    """A result file that is not a generate result (one line)."""


@dataclass(frozen=True)
class GenerateRequest:
    """What one `generate` is asked for: the model and its size, how it runs, and the folder the
    run folder goes under (`out`). One field per `generate` flag; JSON for a sweep point."""

    model: str = "simple"
    device: str = "auto"
    dtype: str = "float32"
    modes: tuple[str, ...] | None = None  # None: the default modes
    batch_size: int | None = None
    layers: int | None = None
    seq_len: int | None = None
    channels_last: bool = False
    out: Path = Path("reports")
    active_steps: int = 3
    min_time_s: float = 1.0
    max_time_s: float = 60.0
    threads: int | None = None
    measure_bytes: bool = False
    remeasure_ceilings: bool = False
    strict: bool = False

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["modes"] = None if self.modes is None else list(self.modes)
        data["out"] = str(self.out)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GenerateRequest:
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"generate request: unknown field {unknown[0]!r}")
        modes = data.get("modes")
        return cls(
            **{
                **data,
                "modes": None if modes is None else tuple(modes),
                "out": Path(data.get("out", "reports")),
            }
        )


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
    budget: BudgetCheck | None = None  # the run against its expectation file (--expect)

    @property
    def eager_failed(self) -> bool:
        return any(f.mode == "eager" for f in self.failures)

    @property
    def error(self) -> str | None:
        """Why the exit code is not 0, in one line (None when it is)."""
        if self.exit_code == EXIT_OK:
            return None
        lines = [f.line for f in self.failures if f.fatal] or [f.line for f in self.failures]
        if self.budget is not None and not self.budget.passed:
            lines.append(f"over the kernel budget in {self.budget.source}")
        return "; ".join([*lines, EAGER_BROKEN] if self.eager_failed else lines)


@dataclass(frozen=True)
class GenerateResult:
    """How one `generate` ended, as data: what a sweep point writes to its result file and the
    sweep reads back. `run_dir` is None when no run folder was published."""

    exit_code: int
    status: Status
    run_dir: Path | None = None
    error: str | None = None

    @property
    def record(self) -> Path | None:
        return None if self.run_dir is None else self.run_dir / "run.json"

    @classmethod
    def of(cls, generated: Generated) -> GenerateResult:
        code = generated.exit_code
        return cls(code, status_of(code), generated.run_dir, generated.error)

    @classmethod
    def ended_by(cls, exc: BaseException) -> GenerateResult:
        """The result of a run that raised `exc` (bad input, an interrupt, a bug)."""
        code = exit_code_of(exc)
        return cls(code, status_of(code), None, error_of(exc))

    def to_json(self) -> dict[str, Any]:
        record = self.record
        return {
            "schema": RESULT_SCHEMA,
            "status": self.status,
            "exit_code": self.exit_code,
            "run_dir": None if self.run_dir is None else str(self.run_dir),
            "record": None if record is None else str(record),
            "error": self.error,
        }

    @classmethod
    def from_json(cls, data: Any) -> GenerateResult:
        if not isinstance(data, dict) or data.get("schema") != RESULT_SCHEMA:
            raise ResultError(f"not a generate result (schema {RESULT_SCHEMA!r})")
        code, run_dir, error = data.get("exit_code"), data.get("run_dir"), data.get("error")
        if not isinstance(code, int) or isinstance(code, bool):
            raise ResultError("generate result: exit_code: expected an integer")
        if not isinstance(run_dir, str | None) or not isinstance(error, str | None):
            raise ResultError("generate result: run_dir and error: expected text or null")
        if data.get("status") != status_of(code):
            raise ResultError(f"generate result: status {data.get('status')!r} for exit {code}")
        return cls(code, status_of(code), None if run_dir is None else Path(run_dir), error)


def run_name(model: str, device: str, now: datetime) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", model).strip("-.") or "model"  # ASCII: chars = bytes
    if len(slug) > SLUG_MAX:  # recognisable by its start, told apart by a hash of the whole name
        digest = hashlib.sha256(model.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        slug = f"{slug[: SLUG_MAX - len(digest) - 1].rstrip('-.')}-{digest}"
    return f"{slug}-{device}-{now.strftime('%Y%m%dT%H%M%SZ')}"


@contextmanager
def library_output(log_path: Path, err: TextIO, debug: bool, earlier: str = "") -> Iterator[TextIO]:
    """Libraries' own lines (Kineto, Inductor, the model's prints) go to run.log in the run
    folder, after the `earlier` lines (those printed while the model was built); with --debug
    they stay on the terminal."""
    if debug:
        yield err
        return
    from profreport.liboutput import library_output_to

    if earlier:
        log_path.write_text(earlier, encoding="utf-8")

    with library_output_to(log_path, err) as terminal:
        yield terminal


Built = TypeVar("Built")


def built_off_the_terminal(
    build: Callable[[], Built], err: TextIO, debug: bool
) -> tuple[Built, str]:
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
        if not m.ok
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
    from profreport.env import DTYPES
    from profreport.models import LoadedModel, ModelError, load_model

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
        result = api.profile_loaded(
            model, device, request.dtype, staged.path, options, progress, now=lambda: stamp
        )
        budget = None
        if expect is not None:
            from profreport.analysis.budget import check_budget

            budget = check_budget(expect.expectation, result.run, str(expect.path))
        try:
            result.save(staged.path, budget=budget)
            if interrupts.since(started):  # an interrupt some library swallowed: not a whole run
                raise KeyboardInterrupt
            run_dir = result.run_dir = staged.publish()
        except OSError as exc:  # a full disk, a folder made read-only meanwhile: not a bug
            raise UsageError(
                f"cannot write the run under {request.out}: {exc.strerror or exc}"
            ) from exc
    run = result.run  # the findings the reports read
    code, failures = mode_failures(run, request.strict)
    if budget is not None and not budget.passed:
        code = EXIT_GATE
    return Generated(run_dir, run, code, failures, budget)


def run_point(request: GenerateRequest, err: TextIO) -> GenerateResult:
    """`generate`, and how it ended as data, whatever ended it (a sweep point's whole run)."""
    try:
        with interrupts.unmasked():
            return GenerateResult.of(generate(request, err))
    except (KeyboardInterrupt, Exception) as exc:  # every ending is a result, as the CLI's is
        return GenerateResult.ended_by(exc)
