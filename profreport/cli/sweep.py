"""`profreport sweep`: its arguments and its edge: the sweep folder, progress, Ctrl-C, exit codes.

Exit codes follow `generate`: 0 every point ran, 1 the sweep finished but some point failed
(each named on stderr), 2 bad input, 130 interrupted (the points already done stay recorded;
`--resume` runs the rest).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from profreport.cli.common import comma_list, positive_float, positive_int, progress_display
from profreport.exits import EXIT_GATE, EXIT_INTERRUPTED, EXIT_OK, UsageError
from profreport.sweep.grid import RUN_KEYS, GridError, Point, SweepSpec, checked_spec, read_config
from profreport.sweep.lifecycle import EXECUTORS, SweepRun
from profreport.sweep.model import FILENAME, Sweep

EXIT_FAILED = EXIT_GATE  # the sweep finished, but some point failed
# Flags that describe the grid: with --resume the grid comes from sweep.json instead.
GRID_FLAGS = {
    "models": "--model",
    "batch_sizes": "--batch-sizes",
    "seq_lens": "--seq-lens",
    "dtypes": "--dtypes",
    "modes": "--modes",
    "device": "--device",
    "min_time_s": "--min-time",
    "max_time_s": "--max-time",
    "threads": "--threads",
    "cold_compile": "--warm-compile-cache",
    "workload": "--workload",
}


def _int_list(text: str) -> list[int]:
    values = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if not part.isdigit() or int(part) < 1:
            raise argparse.ArgumentTypeError(f"expected positive integers, found {part!r}")
        values.append(int(part))
    if not values:
        raise argparse.ArgumentTypeError("expected a comma-separated list of positive integers")
    return values


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        dest="models",
        action="append",
        default=None,
        help="model to sweep, as generate --model takes it; repeat for several",
    )
    p.add_argument(
        "--batch-sizes",
        type=_int_list,
        default=None,
        help="comma-separated batch sizes (built-in and hf: models)",
    )
    p.add_argument(
        "--seq-lens",
        "--context",
        type=_int_list,
        default=None,
        help="comma-separated sequence lengths (hf: language models; decode: the context)",
    )
    p.add_argument(
        "--workload",
        choices=("prefill", "decode"),
        default=None,
        help="prefill (default) or decode: one greedy decode step per point (causal LMs)",
    )
    p.add_argument(
        "--dtypes", type=comma_list, default=None, help="comma-separated dtypes (default float32)"
    )
    p.add_argument(
        "--modes",
        type=comma_list,
        default=None,
        help="comma-separated modes (default eager,compile)",
    )
    p.add_argument("--device", default=None, help="auto (default), cpu or cuda[:N]")
    p.add_argument("--min-time", dest="min_time_s", type=positive_float, default=None)
    p.add_argument("--max-time", dest="max_time_s", type=positive_float, default=None)
    p.add_argument("--threads", type=positive_int, default=None)
    p.add_argument(
        "--warm-compile-cache",
        dest="cold_compile",
        action="store_const",
        const=False,
        default=None,
        help="let points share Inductor's on-disk cache (default: each point compiles cold)",
    )
    p.add_argument(
        "--config",
        default=None,
        help="sweep.toml: the grid (several models), and "
        "executor / ray_address / out; flags given too take precedence",
    )
    p.add_argument("--executor", choices=EXECUTORS, default=None, help="local (default) or ray")
    p.add_argument(
        "--ray-address",
        default=None,
        help="Ray cluster to join (e.g. ray://head:10001 or auto); default: start "
        "a local Ray on this machine",
    )
    p.add_argument(
        "--out", default=None, help="parent folder of the sweep folder (default reports/)"
    )
    p.add_argument(
        "--resume",
        default=None,
        metavar="SWEEP_DIR",
        help="finish an interrupted sweep: run its points not done yet",
    )
    p.add_argument("--quiet", action="store_true", help="no progress output")


def _spec_and_settings(args: argparse.Namespace) -> tuple[SweepSpec, dict[str, Any]]:
    values, run = read_config(Path(args.config)) if args.config else ({}, {})
    for key in [*GRID_FLAGS, *RUN_KEYS]:
        if getattr(args, key) is not None:
            (run if key in RUN_KEYS else values)[key] = getattr(args, key)
    if run.get("ray_address") and run.get("executor", "local") != "ray":
        raise UsageError("--ray-address applies to --executor ray only")
    return checked_spec(values, args.config or "sweep"), run


@contextmanager
def _progress(quiet: bool, total: int, stream: TextIO) -> Iterator[Callable[[str, bool], None]]:
    """A progress bar over points on a terminal; otherwise one line per event."""
    from profreport.text import terminal_text

    if quiet or not stream.isatty():  # nothing, or the plain lines of every command
        with progress_display(quiet, stream) as show:
            yield lambda msg, _advance: show(f"sweep: {terminal_text(msg)}")
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (
        TextColumn("sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
    )
    with Progress(*columns, console=Console(file=stream)) as bar:
        task = bar.add_task("", total=total)
        yield lambda msg, advance: bar.update(
            task, description=escape(terminal_text(msg)), advance=int(advance)
        )


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from profreport.text import terminal_text

    if args.resume:
        given = [flag for key, flag in GRID_FLAGS.items() if getattr(args, key) is not None]
        if given or args.config or args.out:
            raise UsageError(
                f"--resume takes the grid from its sweep.json: drop {(given or ['--config/--out'])[0]}"
            )
        sweep_run = SweepRun.resume(Path(args.resume), args.executor)
        address = args.ray_address
    else:
        try:
            spec, settings = _spec_and_settings(args)
        except GridError as exc:
            raise UsageError(str(exc)) from None
        address = settings.get("ray_address")
        sweep_run = SweepRun.new(
            spec, settings.get("executor", "local"), Path(settings.get("out", "reports"))
        )
    root = sweep_run.root
    with _progress(args.quiet, len(sweep_run.todo()), err) as progress:

        def on_start(point: Point) -> None:
            progress(f"{point.label}: running", False)

        def on_done(point: Point) -> None:
            took = f" ({point.duration_s:.1f} s)" if point.duration_s is not None else ""
            progress(f"{point.label}: {point.status}{took}", True)

        started = time.monotonic()
        try:
            sweep = sweep_run.run(address, on_start, on_done)
        except KeyboardInterrupt:
            print(
                f"error: interrupted after {sweep_run.finished} of {len(sweep_run.sweep.points)} "
                f"points; resume with: profreport sweep --resume {root}",
                file=err,
            )
            return EXIT_INTERRUPTED
    _print_summary(sweep, root, out, sweep_run.done_before, time.monotonic() - started)
    failed = [p for p in sweep.points if not p.ok]
    for p in failed:
        print(
            f"error: point {terminal_text(p.id)} {p.status}: {terminal_text(p.error or p.status)}",
            file=err,
        )
    return EXIT_FAILED if failed else EXIT_OK


def _print_summary(sweep: Sweep, root: Path, out: TextIO, skipped: int, took_s: float) -> None:
    from profreport.sweep import render, summary

    for line in render.summary_lines(summary.summarize(sweep)):
        print(line, file=out)
    print(f"  compile times {render.compile_cache_note(sweep)}", file=out)
    if skipped:
        print(f"  ({skipped} points already done were not run again)", file=out)
    print(f"sweep took {took_s:.1f} s (wall clock)", file=out)
    print(f"sweep: {root / 'sweep.html'}", file=out)
    print(f"record: {root / FILENAME}", file=out)
    print(f"summary: {root / 'sweep.md'}", file=out)
