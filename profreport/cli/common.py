"""What every command shares: the parser, argument types, gates, terminal output (the exit codes
and UsageError are profreport.exits')."""

from __future__ import annotations

import argparse
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from profreport.exits import EXIT_GATE, EXIT_OK, UsageError, findings_failed
from profreport.text import Notice, terminal_text

if TYPE_CHECKING:
    from pathlib import Path

    from profreport.record.model import Run

DEBUG_HELP = "on any error, print the full traceback (for bug reports)"

# The modes profreport.modes registers, the default ones first, in its order: --help names them
# without loading the registry and the modes behind it (tests/test_cli_light.py keeps them equal).
DEFAULT_MODES = ("eager", "script", "trace", "optimize", "compile")
BUILTIN_MODES: tuple[str, ...] = (*DEFAULT_MODES, "export", "compile-max-autotune")
BUILTIN_MODES += ("compile-cudagraphs", "compile-dynamic", "compile-fullgraph")


def known_modes() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Every mode and the default ones: the registry's once this process has loaded it (a program
    may register modes before it calls `main`), else the table, all the registry holds before a
    registration. --modes is checked against the registry when the command runs."""
    registry = sys.modules.get("profreport.modes.registry")
    if registry is None:
        return BUILTIN_MODES, DEFAULT_MODES
    return registry.mode_names(), registry.default_modes()


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every other bad input
        raise UsageError(f"{self.prog}: {message}")


def number(convert: type, minimum: float, strict: bool) -> Callable[[str], Any]:
    """An argparse type: `convert` the text, then require a finite value above (`strict`) or
    at least `minimum`."""
    noun = "an integer" if convert is int else "a number"
    rule = f"must be {'above' if strict else 'at least'} {minimum:g}"

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise argparse.ArgumentTypeError(f"must be a finite number: {text}")
        if value <= minimum if strict else value < minimum:
            raise argparse.ArgumentTypeError(f"{rule}: {text}")
        return value

    return parse


positive_int = number(int, 1, strict=False)
positive_float = number(float, 0, strict=True)
non_negative_int = number(int, 0, strict=False)
non_negative_float = number(float, 0, strict=False)


def comma_list(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def regular_expression(text: str) -> str:
    """An argument that must compile as a Python regular expression."""
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"not a regular expression: {text!r} ({exc})") from None
    return text


def add_workers_argument(parser: argparse.ArgumentParser) -> None:
    """--workers, for the commands that time latency (generate, ab)."""
    parser.add_argument(
        "--workers",
        type=non_negative_int,
        default=None,
        metavar="K",
        help="fresh processes the latency is timed in, one after another, the budget split "
        "among them (default 3, or PROFREPORT_WORKERS; 0: in this process): the interval "
        "then covers what a rerun sees",
    )


def add_gate_arguments(parser: argparse.ArgumentParser, latency_help: str) -> None:
    """The regression gates `compare` and `ab` share (read back with `thresholds`)."""
    gates: tuple[tuple[str, Callable[[str], Any], str, str], ...] = (
        (
            "--max-kernel-increase",
            non_negative_int,
            "N",
            "gate: kernels per step may grow by at most N in any mode",
        ),
        (
            "--max-bytes-increase",
            non_negative_float,
            "PCT",
            "gate: modeled bytes per step may grow by at most PCT percent",
        ),
        ("--max-latency-regression", non_negative_float, "PCT", latency_help),
        (
            "--max-peak-memory-increase",
            non_negative_float,
            "PCT",
            "gate: peak memory of one call may grow by at most PCT percent in any mode",
        ),
        (
            "--fail-on-new-kernel",
            regular_expression,
            "PATTERN",
            "gate: no kernel that appears in head may match PATTERN (a Python regular "
            "expression, searched in the kernel's name), in any mode",
        ),
    )
    for flag, kind, metavar, text in gates:
        parser.add_argument(flag, type=kind, default=None, metavar=metavar, help=text)
    parser.add_argument(
        "--fail-on-inconclusive",
        action="store_true",
        help="gate: a latency the gate could not judge (noise, processes that disagree, a change "
        "beyond the limit the runs cannot tell apart) fails it too (exit 1); by default it "
        "neither passes nor fails",
    )


def thresholds(args: argparse.Namespace) -> Any:
    """The analysis.compare.Thresholds the gate arguments ask for."""
    from profreport.analysis.compare import Thresholds

    return Thresholds(
        max_kernel_increase=args.max_kernel_increase,
        max_bytes_increase_pct=args.max_bytes_increase,
        max_latency_regression_pct=args.max_latency_regression,
        max_peak_memory_increase_pct=args.max_peak_memory_increase,
        new_kernel_pattern=args.fail_on_new_kernel,
        fail_on_inconclusive=args.fail_on_inconclusive or None,
    )


@contextmanager
def progress_display(quiet: bool, stream: TextIO) -> Iterator[Any]:
    """A `progress(message)` callable: a Rich status line on a terminal, plain lines otherwise."""
    if quiet:
        yield lambda _msg: None
        return
    if stream.isatty():
        from rich.console import Console
        from rich.markup import escape  # printed as it is, never as markup

        console = Console(file=stream)

        def show(msg: str) -> None:
            if isinstance(msg, Notice):  # printed above the status line, where it stays
                console.print(escape(terminal_text(msg)), highlight=False)
            else:
                status.update(escape(terminal_text(msg)))

        with console.status("starting") as status:
            yield show
        return
    yield lambda msg: print(f"profreport: {msg}", file=stream, flush=True)


def terminal(args: argparse.Namespace, err: TextIO) -> Any:
    """The runner.Terminal of a command that profiles: `err`, its progress display (none with
    --quiet), --debug."""
    from profreport.runner import Terminal

    return Terminal(err, partial(progress_display, args.quiet), args.debug)


def gate_exit(comparison: Any, err: TextIO, fail_on_inconclusive: bool = False) -> int:
    """Name each regression and each inconclusive latency on stderr; 1 when a gate failed (an
    inconclusive latency too, with `fail_on_inconclusive`)."""
    for regression in comparison.regressions:  # stderr, so a CI log names mode and metric
        print(f"regression: {regression.message}", file=err)
    verdict = "latency neither passes nor fails"
    if fail_on_inconclusive:
        verdict = "fails the gate: --fail-on-inconclusive"
    for line in comparison.inconclusive:  # neither passed nor failed on that evidence
        print(f"inconclusive: {terminal_text(line)} ({verdict})", file=err)
    failed = comparison.regressed or (fail_on_inconclusive and bool(comparison.inconclusive))
    return EXIT_GATE if failed else EXIT_OK


def findings_error(run: Run, record: Path, debug: bool, err: TextIO) -> bool:
    """Whether findings of the run (its record at `record`) failed to derive, a bug (exit 3)
    shown in its reports: then its one line on stderr; with --debug, each failed finding's
    traceback first (run.json keeps them too)."""
    from profreport.analysis.derive import failure_summary

    failed = failure_summary(run)
    if failed is None:
        return False
    if debug:
        for mode in run.modes.values():
            if mode.failed_finding is not None and mode.failed_finding.traceback:
                print(mode.failed_finding.traceback, file=err, end="")
    print(f"error: {terminal_text(findings_failed(failed, record))}", file=err)
    return True


def print_traceback(exc: BaseException, err: TextIO) -> None:
    # A usage error is raised `from None` to keep its line short; --debug shows what caused it.
    hidden = exc.__context__ if exc.__suppress_context__ and exc.__cause__ is None else None
    if hidden is not None:
        traceback.print_exception(type(hidden), hidden, hidden.__traceback__, file=err)
    traceback.print_exception(type(exc), exc, exc.__traceback__, file=err)
