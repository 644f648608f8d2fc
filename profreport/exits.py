"""How a command ends, declared once: the exit codes every command returns and a sweep reads back
from each point, the exception that means bad input, and the one error line of an exception.

| code | meaning |
|---:|---|
| 0 | done |
| 1 | done, but found a problem: a gate, the model itself failed, a sweep point failed, `analyze --keep-going` skipped a file |
| 2 | bad input: one line, nothing written (a disk that refuses a file is bad input too) |
| 3 | internal error (a bug): one line, `--debug` for the traceback; a run whose evidence was saved says where |
| 130 | interrupted (Ctrl-C or SIGTERM; 128 + SIGINT, as shells report it) |
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from profreport.text import error_line

EXIT_OK = 0
EXIT_GATE = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130

INTERRUPTED_LINE = "interrupted; nothing half-written was kept"

Status = Literal["ok", "failed", "interrupted"]


class UsageError(Exception):
    """Bad input: reported as one line ("error: ..."), exit code 2."""


# A disk that refuses a file for one of these reasons is the user's to fix: bad input (exit 2).
DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES)


def disk_error(exc: BaseException) -> OSError | None:
    """The OSError among the exceptions that led to `exc` that says a disk refused a file (no
    space left, over quota, read-only, not writable): the user's to fix, never a bug."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in DISK_ERRNOS:
            return current
        current = current.__cause__ or current.__context__
    return None


def refused_line(refused: OSError, where: Path | None = None) -> str:
    """The one line of a disk that refused a file: the file (`where`, else the error's), and
    why."""
    path = where or refused.filename
    return f"cannot write{f' {path}' if path else ''}: {refused.strerror or refused}"


def evidence_saved(records: Sequence[Path]) -> str:
    """What an internal error after a run's evidence was written says of it: where it is (one
    record, or each side's of `ab`), and how to get the findings once the bug is fixed."""
    if len(records) == 1:
        return (
            f"the run's evidence was saved in {records[0]}: `profreport render {records[0]}` "
            "derives the findings again once the bug is fixed"
        )
    return (
        f"the runs' evidence was saved in {' and '.join(map(str, records))}: `profreport "
        "render` of each derives its findings again once the bug is fixed"
    )


def findings_failed(failures: str, record: Path) -> str:
    """The one line of a run whose findings failed to derive (`failures`: which, and what each
    raised; analysis.derive.failure_summary): an internal error, its evidence kept."""
    return (
        f"internal error: deriving findings failed ({failures}): a profreport bug, shown in the "
        f"report where each finding would be; {evidence_saved([record])}"
    )


class EvidenceSaved(Exception):
    """A bug ended a run after its evidence was written to `records` (run.json, one per side of
    `ab`): exit code 3, one line that names the bug and where the evidence is. Raised from the
    bug's exception."""

    def __init__(self, records: Path | Sequence[Path], error: str) -> None:
        self.records = (records,) if isinstance(records, Path) else tuple(records)
        super().__init__(f"{error} (a profreport bug); {evidence_saved(self.records)}")

    @property
    def record(self) -> Path:
        return self.records[0]


def exit_code_of(exc: BaseException) -> int:
    """The exit code of a command that ended with `exc`: bad input (a disk that refused a file
    too), an interrupt, or a bug."""
    if isinstance(exc, UsageError) or disk_error(exc) is not None:
        return EXIT_BAD_INPUT
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_INTERNAL


def error_of(exc: BaseException) -> str:
    """The one line that says why a command ended with `exc` (without the `error: ` prefix)."""
    code = exit_code_of(exc)
    refused = disk_error(exc)
    if code == EXIT_BAD_INPUT:
        return str(exc) if isinstance(exc, UsageError) or refused is None else refused_line(refused)
    if code == EXIT_INTERRUPTED:
        return INTERRUPTED_LINE
    if isinstance(exc, EvidenceSaved):
        return f"internal error: {exc}"
    return f"internal error: {error_line(exc)}"


def status_of(exit_code: int) -> Status:
    """How a run that exited with `exit_code` counts in a sweep: ok, interrupted or failed."""
    if exit_code == EXIT_OK:
        return "ok"
    return "interrupted" if exit_code == EXIT_INTERRUPTED else "failed"
