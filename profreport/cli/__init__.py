"""Command line: the only edge with side effects (arguments, progress, files, exit codes).

One module per command (generate, models/modes, render, compare, ab, sweep, analyze), each a `Command`
in `COMMANDS`; what they share (the parser, argument types, gates, progress and terminal text)
is in `cli.common`; the exit codes and the bad-input exception are `profreport.exits`.

Exit codes (the table is profreport.exits): 0 success, 1 the run finished but found a problem,
2 bad input (one line on stderr, nothing written), 3 internal error, 130 interrupted.

Importing this package loads no command: `main` installs the signal handler first, then imports
the commands (each imports what it needs to run only when it runs), so `--help` stays light and
a SIGTERM while anything loads is an interrupt (130).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

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

if TYPE_CHECKING:
    from profreport.cli.common import Command

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_GATE",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "build_parser",
    "commands",
    "main",
]


def commands() -> tuple[Command, ...]:
    """Every subcommand, in the order `--help` lists them."""
    from profreport.cli import ab, analyze, compare, generate, listing, render, sweep

    return (
        generate.COMMAND,
        listing.MODELS,
        listing.MODES,
        render.COMMAND,
        compare.COMMAND,
        ab.COMMAND,
        sweep.COMMAND,
        analyze.COMMAND,
    )


def build_parser() -> argparse.ArgumentParser:
    from profreport.cli.common import DEBUG_HELP, Parser

    parser = Parser(prog="profreport", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"profreport {__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    # Accepted after the command too; SUPPRESS keeps a subcommand from resetting the flag.
    debug = Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in commands():
        command.add_arguments(sub.add_parser(command.name, parents=[debug], help=command.help))
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
            args = build_parser().parse_args(argv)
            command = next(c for c in commands() if c.name == args.command)
            return command.run(args, out, err)
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
