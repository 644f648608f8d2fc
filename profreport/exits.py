"""How a command ends, declared once: the exit codes every command returns and a sweep reads back
from each point, the exception that means bad input, and the one error line of an exception.

| code | meaning |
|---:|---|
| 0 | done |
| 1 | done, but found a problem: a gate, the model itself failed, a sweep point failed, `analyze --keep-going` skipped a file |
| 2 | bad input: one line, nothing written |
| 3 | internal error (a bug): one line, `--debug` for the traceback; a run whose evidence was saved says where |
| 130 | interrupted (Ctrl-C or SIGTERM; 128 + SIGINT, as shells report it) |
"""

from __future__ import annotations

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


def evidence_saved(record: Path) -> str:
    """What an internal error after a run's evidence was written says of it: where it is, and
    how to get the findings once the bug is fixed."""
    return (
        f"the run's evidence was saved in {record}: `profreport render {record}` derives the "
        "findings again once the bug is fixed"
    )


def findings_failed(failures: str, record: Path) -> str:
    """The one line of a run whose findings failed to derive (`failures`: which, and what each
    raised; analysis.derive.failure_summary): an internal error, its evidence kept."""
    return (
        f"internal error: deriving findings failed ({failures}): a profreport bug, shown in the "
        f"report where each finding would be; {evidence_saved(record)}"
    )


class EvidenceSaved(Exception):
    """A bug ended a run after its evidence was written to `record` (run.json): exit code 3,
    one line that names the bug and where the evidence is. Raised from the bug's exception."""

    def __init__(self, record: Path, error: str) -> None:
        super().__init__(f"{error} (a profreport bug); {evidence_saved(record)}")
        self.record = record


def exit_code_of(exc: BaseException) -> int:
    """The exit code of a command that ended with `exc`: bad input, an interrupt, or a bug."""
    if isinstance(exc, UsageError):
        return EXIT_BAD_INPUT
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_INTERNAL


def error_of(exc: BaseException) -> str:
    """The one line that says why a command ended with `exc` (without the `error: ` prefix)."""
    code = exit_code_of(exc)
    if code == EXIT_BAD_INPUT:
        return str(exc)
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
