"""`generate --expect FILE` and `--update-expect FILE`: the kernel budget at the command line's
edge. The file is read before the run (a missing or malformed one is bad input, exit 2, before
anything runs), the check's lines are printed first, and `--update-expect` writes the file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from profreport.exits import UsageError
from profreport.text import terminal_text

if TYPE_CHECKING:
    from profreport.analysis.budget import BudgetCheck
    from profreport.record.expectation import Expectation, ExpectationFile
    from profreport.runner import Generated


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--expect",
        type=Path,
        default=None,
        metavar="FILE",
        help="check the run against the kernel budget in FILE: kernels and modeled bytes per "
        "step, fused groups, kernels by name (exit 1 on a breach; docs/ci.md)",
    )
    group.add_argument(
        "--update-expect",
        type=Path,
        default=None,
        metavar="FILE",
        help="write or refresh the kernel budget FILE from this run, keeping the tolerances, "
        "min_speedup and notes set in it",
    )


def read_budgets(args: argparse.Namespace) -> tuple[ExpectationFile | None, Expectation | None]:
    """Read before the run: the budget `--expect` names (UsageError: missing or malformed), or
    what `--update-expect` refreshes: the file as it is (None: a new file), read so that a
    malformed one (a person's edit) is reported, never overwritten. The flags exclude each other."""
    from profreport.record.expectation import ExpectationError, load

    path: Path | None = args.expect or args.update_expect
    if path is None or (args.update_expect is not None and not path.exists()):
        return None, None
    if not path.exists():
        raise UsageError(
            f"no expectation file {path}: create it by running the same command with "
            f"--update-expect {path} instead of --expect, then commit it"
        )
    try:
        budget = load(path)
    except ExpectationError as exc:
        raise UsageError(str(exc)) from None
    return (budget, None) if args.expect is not None else (None, budget.expectation)


def print_check(budget: BudgetCheck, out: TextIO, err: TextIO) -> None:
    """The check's outcome, counts, one line per breach and the notes (before the table); on a
    breach, one `error:` line on stderr too."""
    from profreport.render.budget import budget_text, budget_view

    for line in budget_text(budget_view(budget)):
        print(terminal_text(line), file=out)
    if not budget.passed:
        n = len(budget.breaches)
        print(
            f"error: over the kernel budget in {terminal_text(budget.source)}: {n} "
            f"breach{'es' if n != 1 else ''} (listed above)",
            file=err,
        )


def write_update(
    args: argparse.Namespace, old: Expectation | None, generated: Generated, out: TextIO
) -> None:
    """Write the `--update-expect` file from the run (not when eager failed: a broken model is
    no budget to keep; not when a finding failed to derive: a bug's record is no budget either)."""
    from profreport.analysis.budget_file import expectation_of
    from profreport.files import write_atomic
    from profreport.record.expectation import dumps

    path: Path | None = args.update_expect
    if path is None:
        return
    if generated.eager_failed:
        print(f"expectation: {path} not written (eager failed)", file=out)
        return
    if generated.findings_error is not None:
        print(f"expectation: {path} not written (a finding failed to derive)", file=out)
        return
    updated = expectation_of(generated.run, old)
    try:
        write_atomic(path, dumps(updated))
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    kind = generated.run.device.type
    modes = ", ".join(generated.run.modes)
    print(f"expectation: wrote {path} ({kind}: {modes})", file=out)
