"""Command line: the only edge with side effects (arguments, progress, files, exit codes).

One module per command (generate, listing: models and modes, render, compare, ab, sweep,
analyze), each named in `COMMANDS`, the static table the parser is built from; what they share
(the parser, argument types, gates, progress and terminal text) is in `cli.common`; the exit
codes and the bad-input exception are `profreport.exits`.

Importing this package loads no command: `main` installs the signal handler first, then imports
the chosen command's module alone (which imports what it needs to run only when it runs), so
`--help` loads the CLI only and a SIGTERM while anything loads is an interrupt (130).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from profreport import __version__, interrupts
from profreport.exits import (
    EXIT_BAD_INPUT,
    EXIT_GATE,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    error_of,
    exit_code_of,
)
from profreport.text import terminal_text

__all__ = [
    "COMMANDS",
    "EXIT_BAD_INPUT",
    "EXIT_GATE",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "Command",
    "build_parser",
    "main",
]


@dataclass(frozen=True)
class Command:
    """A subcommand as data: its name, its help line, and `profreport.cli.<module>`, imported only
    when the command is chosen, whose function `arguments` declares its arguments (None: it takes
    none) and whose function `run` runs it (returning the exit code; bad input raised as
    UsageError)."""

    name: str
    help: str
    module: str
    run: str = "run"
    arguments: str | None = "add_arguments"

    def load(self, function: str) -> Any:
        return getattr(importlib.import_module(f"profreport.cli.{self.module}"), function)


# Every subcommand, in the order `--help` lists them.
COMMANDS = (
    Command("generate", "profile a model in every mode and write a report", "generate"),
    Command("models", "list the built-in models", "listing", "run_models", None),
    Command("modes", "list the execution modes", "listing", "run_modes", None),
    Command("render", "re-render report.html and summary.md from a run record", "render"),
    Command(
        "compare",
        "compare two runs of one model; exit 1 on a regression beyond a threshold",
        "compare",
    ),
    Command(
        "ab", "profile base and head in one process, timed interleaved; compare and gate", "ab"
    ),
    Command("sweep", "one generate run per point of a grid", "sweep"),
    Command("analyze", "analyze Kineto traces (CUDA, ROCm, CPU)", "analyze"),
)


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """Every command, with the arguments of the one `argv` names only (its first word that is
    not an option: nothing at the top level takes a value), so that no other command loads."""
    from profreport.cli.common import DEBUG_HELP, Parser

    parser = Parser(prog="profreport", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"profreport {__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    # Accepted after the command too; SUPPRESS keeps a subcommand from resetting the flag.
    debug = Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    chosen = next((word for word in argv if not word.startswith("-")), None)
    for command in COMMANDS:
        arguments = sub.add_parser(command.name, parents=[debug], help=command.help)
        if command.name == chosen and command.arguments is not None:
            command.load(command.arguments)(arguments)
    return parser


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run one command. Exit codes: 0 ok, 1 a gate or the model failed, 2 bad input (one line
    on stderr), 3 an internal error (a bug: one line, `--debug` for the traceback), 130 interrupted."""
    # First of all, so that SIGTERM while a model loads or torch imports is an interrupt too.
    with interrupts.signals_as_interrupt():
        return _main(
            list(sys.argv[1:] if argv is None else argv), out or sys.stdout, err or sys.stderr
        )


def _main(argv: list[str], out: TextIO, err: TextIO) -> int:
    debug = "--debug" in argv  # known even when parsing itself fails
    try:
        # Whatever a library made of an interrupt (an error loading the model, say), it is the
        # interrupt.
        with interrupts.unmasked():
            args = build_parser(argv).parse_args(argv)
            command = next(c for c in COMMANDS if c.name == args.command)
            code: int = command.load(command.run)(args, out, err)
            return code
    except (KeyboardInterrupt, Exception) as exc:
        code = exit_code_of(exc)
        if debug and code != EXIT_INTERRUPTED:
            from profreport.cli.common import print_traceback

            print_traceback(exc, err)
        hint = (
            "; rerun with --debug for the traceback" if code == EXIT_INTERNAL and not debug else ""
        )
        print(f"error: {terminal_text(error_of(exc))}{hint}", file=err)
        return code
