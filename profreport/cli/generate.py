"""`profreport generate`: profile a model in every mode and write a run folder.

`--expect FILE` and `--update-expect FILE` are the kernel budget at the command line's edge: the
file is read before the run (a missing or malformed one is bad input, exit 2, before anything
runs), the check's lines are printed first, and `--update-expect` writes the file."""

from __future__ import annotations

import argparse
import textwrap
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO, cast

from profreport.cli.common import (
    add_workers_argument,
    comma_list,
    findings_error,
    known_modes,
    positive_float,
    positive_int,
    terminal,
)
from profreport.exits import EXIT_OK, UsageError
from profreport.files import RECORD
from profreport.record.model import Run
from profreport.runner import EAGER_BROKEN, GenerateRequest, generate
from profreport.text import terminal_text

if TYPE_CHECKING:
    from profreport.analysis.budget import BudgetCheck
    from profreport.record.expectation import Expectation, ExpectationFile
    from profreport.runner import Generated

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    modes, defaults = known_modes()
    parser.add_argument(
        "--model",
        default="simple",
        help="built-in name, hf:<zoo model>, module:function or file.py:function",
    )
    parser.add_argument(
        "--device", default="auto", help="auto (CUDA if available), cpu or cuda[:N]"
    )
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument(
        "--modes",
        default=None,
        help=f"comma-separated modes, from: {', '.join(modes)} (`profreport modes`). Default "
        f"{','.join(defaults)}; decode: eager,compile,export, with compile-cudagraphs on CUDA",
    )
    parser.add_argument(
        "--workload",
        default="prefill",
        help="prefill (one forward over the input, the default), decode (one greedy token with "
        "a static KV cache, causal LMs) or prefill,decode (one run of each)",
    )
    parser.add_argument(
        "--channels-last", action="store_true", help="NHWC memory format for 4-D inputs and weights"
    )
    parser.add_argument(
        "--batch-size", type=positive_int, default=None, help="built-in and hf: models only"
    )
    parser.add_argument(
        "--layers", type=positive_int, default=None, help="hf: models: layers (blocks) to build"
    )
    parser.add_argument(
        "--seq-len",
        "--context",
        type=positive_int,
        default=None,
        help="hf: language models: tokens per input (decode: the prompt prefilled, the context)",
    )
    parser.add_argument(
        "--out", default="reports", help="parent folder of the run folder (default reports/)"
    )
    parser.add_argument(
        "--active-steps", type=int, default=3, help="profiled steps per mode (>= 3)"
    )
    parser.add_argument(
        "--min-time", type=positive_float, default=1.0, help="measured seconds per mode, at least"
    )
    parser.add_argument(
        "--max-time",
        type=positive_float,
        default=60.0,
        help="latency timing budget, seconds (bounds the timing rounds only)",
    )
    parser.add_argument("--threads", type=positive_int, default=None, help="torch intra-op threads")
    add_workers_argument(parser)
    parser.add_argument(
        "--measure-bytes",
        action="store_true",
        help="also measure DRAM bytes per kernel with Nsight Compute (CUDA + ncu)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.add_argument(
        "--remeasure-ceilings",
        action="store_true",
        help="measure memory bandwidth and matmul rate again instead of using the per-machine "
        "cache (PROFREPORT_CACHE_DIR, default ~/.cache/profreport)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when any mode fails (default: only eager)"
    )
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


TERMINAL_COLUMNS = 120


def _summary_table(run: Run, out: TextIO) -> None:
    """The report's headline as a terminal table: the same rows, words wrapped, never cut."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from profreport.render.headline import HeadlineCell, headline

    def cell(text: object) -> str:  # a model or error text must not act as Rich markup
        return escape(terminal_text(str(text)))

    def answer(c: HeadlineCell | None, detail: bool = True) -> str:
        if c is None:
            return ""
        style = {"good": "green", "bad": "red", "neutral": "", "muted": "dim"}[c["tone"]]
        text = f"[{style}]{cell(c['text'])}[/]" if style else cell(c["text"])
        return f"{text}\n[dim]{cell(c['detail'])}[/]" if detail and c["detail"] else text

    view = headline(run)
    table = Table(title=cell(f"{run.model.name} on {run.device.type}"))
    columns = ["mode", "status", f"{view['kernel_label']}/step\neager → mode (profiler)"]
    columns += ["launches/step\neager → mode (profiler)"] if view["show_launches"] else []
    columns += ["bytes vs eager", "speedup vs eager", "output vs eager"]
    for col in columns:
        table.add_column(col, overflow="fold")  # a word longer than its column folds, not "…"
    for r in view["rows"]:
        if r["kernels"] is None:
            blanks = [""] * (len(columns) - 3)
            table.add_row(cell(r["mode"]), answer(r["status"]), cell(r["error"]), *blanks)
            continue
        # counts: the column header says what and from where
        cells = [cell(r["mode"]), answer(r["status"]), answer(r["kernels"], detail=False)]
        cells += [answer(r["launches"], detail=False)] if view["show_launches"] else []
        cells += [answer(r["bytes"]), answer(r["speedup"]), answer(r["output"])]
        table.add_row(*cells)
    Console(file=out, width=TERMINAL_COLUMNS).print(table)


def _verdict_lines(run: Run) -> list[str]:
    """Each mode's verdict, wrapped at word boundaries to the table's width."""
    lines = []
    for name, mode in run.modes.items():
        verdict = terminal_text(str(mode.verdict) if mode.has("verdict") else name)
        lines += textwrap.wrap(
            verdict,
            width=TERMINAL_COLUMNS,
            initial_indent="  ",
            subsequent_indent="    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    return lines


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


def _decode_lines(run: Run, out: TextIO) -> None:
    """A decode run's per-token numbers first (render/decode_view.py)."""
    from profreport.render.decode_view import decode_view

    view = decode_view(run)
    if view is None:
        return
    print("decode, per token:", file=out)
    for row in view["rows"]:
        cells = [
            f"{h.split(' (')[0]} {c}" for h, c in zip(view["header"][1:], row[1:], strict=True)
        ]
        print(f"  {row[0]}: {'; '.join(cells)}", file=out)
    print(f"  {view['floor']}", file=out)
    for line in view["words"]:
        print(f"  {terminal_text(line)}", file=out)


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


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.active_steps < 3:
        raise UsageError("--active-steps must be at least 3")
    from profreport.decode import parse_workloads

    try:
        workloads = parse_workloads(args.workload)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    budget, old_budget = read_budgets(args)  # read before the run
    code = EXIT_OK
    for workload in workloads:  # one run (and one run folder) per workload
        if len(workloads) > 1:
            print(f"== {workload}", file=out)
        chosen = cast("Literal['prefill', 'decode']", workload)
        code = max(code, _generate(args, chosen, budget, old_budget, out, err))
    return code


def _generate(
    args: argparse.Namespace,
    workload: Literal["prefill", "decode"],
    budget: ExpectationFile | None,
    old_budget: Expectation | None,
    out: TextIO,
    err: TextIO,
) -> int:
    request = GenerateRequest(  # the run the flags ask for
        model=args.model,
        device=args.device,
        dtype=args.dtype,
        modes=None if args.modes is None else tuple(comma_list(args.modes)),
        workload=workload,
        batch_size=args.batch_size,
        layers=args.layers,
        seq_len=args.seq_len,
        channels_last=args.channels_last,
        out=Path(args.out),
        active_steps=args.active_steps,
        min_time_s=args.min_time,
        max_time_s=args.max_time,
        threads=args.threads,
        measure_bytes=args.measure_bytes,
        remeasure_ceilings=args.remeasure_ceilings,
        strict=args.strict,
        workers=args.workers,
    )
    generated = generate(
        request, terminal(args, err), now=datetime.now(timezone.utc), expect=budget
    )
    run, run_dir = generated.run, generated.run_dir
    if generated.budget is not None:  # the outcome first, then the usual headline
        print_check(generated.budget, out, err)
    _decode_lines(run, out)
    _summary_table(run, out)
    for line in _verdict_lines(run):
        print(line, file=out)
    if args.measure_bytes:
        reasons = {
            m.bytes.measured.reason or ""
            for m in run.ok_modes.values()
            if m.bytes.measured and not m.bytes.measured.available
        }
        for reason in sorted(reasons):
            print(f"warning: measured bytes not available: {reason}", file=err)
    print(f"report: {run_dir / 'report.html'}", file=out)
    print(f"record: {run_dir / RECORD}", file=out)
    print(f"tables: {run_dir / 'kernels_<mode>.csv'}", file=out)
    print(f"traces: tensorboard --logdir {run_dir / 'tensorboard'}", file=out)
    for failure in generated.failures:  # each named on stderr; fatal ones set the exit code
        print(f"{'error' if failure.fatal else 'warning'}: {terminal_text(failure.line)}", file=err)
    for name, mode in run.ok_modes.items():
        if mode.not_timed:
            print(f"warning: {name} not timed: {terminal_text(mode.not_timed)}", file=err)
    if generated.eager_failed:
        print(f"error: {EAGER_BROKEN}", file=err)
    findings_error(run, run_dir / RECORD, args.debug, err)
    write_update(args, old_budget, generated, out)
    return generated.exit_code
