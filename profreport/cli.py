"""Command line: the only edge with side effects (arguments, progress, files, exit codes).

Exit codes: 0 success, 1 the run finished but found a problem (a gate, or the model itself
failed), 2 bad input (one line on stderr, nothing written), 3 internal error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NoReturn, TextIO

from profreport import __version__, interrupts, roofline_cli
from profreport.files import StagedFolder, write_atomic
from profreport.modes import default_modes, mode_names
from profreport.record.model import Run
from profreport.render.registry import COMPARISON, formats, report_renderers
from profreport.text import error_line, first_line, terminal_text

EXIT_OK, EXIT_GATE, EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
DEBUG_HELP = "on any error, print the full traceback (for bug reports)"


class UsageError(Exception):
    """Bad input: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, like every other bad input
        raise UsageError(f"{self.prog}: {message}")


def _number(convert: type, minimum: float, strict: bool) -> Callable[[str], Any]:
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


_positive_int = _number(int, 1, strict=False)
_positive_float = _number(float, 0, strict=True)
_non_negative_int = _number(int, 0, strict=False)
_non_negative_float = _number(float, 0, strict=False)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="profreport", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"profreport {__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    # Accepted after the command too; SUPPRESS keeps a subcommand from resetting the flag.
    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    gen = sub.add_parser(
        "generate", parents=[debug], help="profile a model in every mode and write a report"
    )
    gen.add_argument(
        "--model",
        default="simple",
        help="built-in name, hf:<zoo model>, module:function or file.py:function",
    )
    gen.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda[:N]")
    gen.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    gen.add_argument(
        "--modes",
        default=",".join(default_modes()),
        help=f"comma-separated modes, from: {', '.join(mode_names())} (`profreport modes`)",
    )
    gen.add_argument(
        "--channels-last", action="store_true", help="NHWC memory format for 4-D inputs and weights"
    )
    gen.add_argument(
        "--batch-size", type=_positive_int, default=None, help="built-in and hf: models only"
    )
    gen.add_argument(
        "--layers", type=_positive_int, default=None, help="hf: models: layers (blocks) to build"
    )
    gen.add_argument(
        "--seq-len", type=_positive_int, default=None, help="hf: language models: tokens per input"
    )
    gen.add_argument(
        "--out", default="reports", help="parent folder of the run folder (default reports/)"
    )
    gen.add_argument("--active-steps", type=int, default=3, help="profiled steps per mode (>= 3)")
    gen.add_argument(
        "--min-time", type=_positive_float, default=1.0, help="measured seconds per mode, at least"
    )
    gen.add_argument(
        "--max-time",
        type=_positive_float,
        default=60.0,
        help="latency timing budget, seconds (bounds the timing rounds only)",
    )
    gen.add_argument("--threads", type=_positive_int, default=None, help="torch intra-op threads")
    gen.add_argument(
        "--measure-bytes",
        action="store_true",
        help="also measure DRAM bytes per kernel with Nsight Compute (CUDA + ncu)",
    )
    gen.add_argument("--quiet", action="store_true", help="no progress output")
    roofline_cli.add_generate_arguments(gen)
    gen.add_argument(
        "--strict", action="store_true", help="exit 1 when any mode fails (default: only eager)"
    )

    sub.add_parser("models", parents=[debug], help="list the built-in models")
    sub.add_parser("modes", parents=[debug], help="list the execution modes")

    ren = sub.add_parser(
        "render", parents=[debug], help="re-render report.html and summary.md from a run record"
    )
    ren.add_argument("record", help="run.json or a run folder")
    ren.add_argument(
        "--out", default=None, help="folder to write into (default: beside the record)"
    )

    cmp = sub.add_parser(
        "compare",
        parents=[debug],
        help="compare two runs of one model; exit 1 on a regression beyond a threshold",
    )
    cmp.add_argument("base", help="run.json or run folder of the baseline")
    cmp.add_argument("head", help="run.json or run folder of the change")
    cmp.add_argument("--format", default="md", choices=list(formats(COMPARISON)))
    cmp.add_argument("--out", default=None, help="file to write (default: standard output)")
    cmp.add_argument(
        "--max-kernel-increase",
        type=_non_negative_int,
        default=None,
        metavar="N",
        help="gate: kernels per step may grow by at most N in any mode",
    )
    cmp.add_argument(
        "--max-bytes-increase",
        type=_non_negative_float,
        default=None,
        metavar="PCT",
        help="gate: modeled bytes per step may grow by at most PCT percent",
    )
    cmp.add_argument(
        "--max-latency-regression",
        type=_non_negative_float,
        default=None,
        metavar="PCT",
        help="gate: latency median may grow by at most PCT percent (beyond noise)",
    )
    roofline_cli.add_gate_arguments(cmp, _non_negative_float)

    from profreport import ab_cli

    ab_cli.add_arguments(
        sub.add_parser(
            "ab",
            parents=[debug],
            help="profile base and head in one process, timed interleaved; compare and gate",
        ),
        {
            "positive_int": _positive_int,
            "positive_float": _positive_float,
            "non_negative_int": _non_negative_int,
            "non_negative_float": _non_negative_float,
        },
    )

    ana = sub.add_parser("analyze", parents=[debug], help="analyze Kineto traces (CUDA, ROCm, CPU)")
    from profreport import analyze

    analyze.add_arguments(ana)
    return parser


# ---------------------------------------------------------------- terminal text


def escape(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)


# ---------------------------------------------------------------- progress


@contextmanager
def progress_display(quiet: bool, stream: TextIO) -> Iterator[Any]:
    if quiet:
        yield lambda _msg: None
        return
    if stream.isatty():
        from rich.console import Console

        console = Console(file=stream)
        with console.status("starting") as status:
            yield lambda msg: status.update(escape(terminal_text(msg)))
        return
    yield lambda msg: print(f"profreport: {msg}", file=stream, flush=True)


# ---------------------------------------------------------------- commands


def _cmd_models(out: TextIO) -> int:
    from profreport.models import BUILTIN_MODELS
    from profreport.zoo import HF_PREFIX, INSTALL_HINT, ZOO

    width = max(len(n) for n in [*BUILTIN_MODELS, *(HF_PREFIX + z for z in ZOO)])
    for name, m in BUILTIN_MODELS.items():
        batches = ", ".join(f"N={b} on {d}" for d, b in m.default_batch.items())
        print(f"{name:<{width}}  {m.description} ({batches})", file=out)
    print(f"\nzoo (transformers configs, random weights; {INSTALL_HINT}):", file=out)
    for name, z in ZOO.items():
        print(f"{HF_PREFIX + name:<{width}}  {z.describe(z.default)}", file=out)
    return EXIT_OK


def _cmd_modes(out: TextIO) -> int:
    from profreport.modes import get_mode

    defaults = default_modes()
    width = max(len(n) for n in mode_names())
    for name in mode_names():
        mode = get_mode(name)
        devices = [d for d in ("cpu", "cuda") if mode.unavailable_reason(d) is None]
        source = mode.bytes_source.name if mode.bytes_source else "dispatcher"
        tags = ("default, " if name in defaults else "") + "/".join(devices)
        print(f"{name:<{width}}  {mode.summary} [{tags}; bytes: {source}]", file=out)
    print(f"\ndefault (no --modes): {','.join(defaults)}", file=out)
    return EXIT_OK


def _write_reports(record: dict[str, Any], folder: Path) -> list[Path]:
    written = []
    for renderer in report_renderers():
        write_atomic(folder / renderer.filename, renderer.render(record))
        written.append(folder / renderer.filename)
    return written


def _cmd_render(args: argparse.Namespace, out: TextIO) -> int:
    from profreport import record as run_record
    from profreport.analysis.derive import with_findings

    try:
        rec = run_record.load(Path(args.record))
    except run_record.RecordError as exc:
        raise UsageError(str(exc)) from None
    rec = with_findings(rec)  # today's analysis of the stored evidence, not the stored verdicts
    src = Path(args.record)
    own = src if src.is_dir() else src.parent
    folder = Path(args.out) if args.out else own
    _not_a_file(folder)
    if folder.resolve() != own.resolve():  # the record's own reports may be re-rendered; others not
        taken = [r.filename for r in report_renderers() if (folder / r.filename).exists()]
        if taken:
            raise UsageError(f"{folder / taken[0]} exists: render into another --out folder")
    for path in _write_reports(rec, folder):
        print(path, file=out)
    return EXIT_OK


def _summary_table(run: Run, out: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table

    from profreport.format import fmt_bytes, fmt_ms
    from profreport.render.noise_view import speedup_cell

    def cell(text: object) -> str:  # a model or error text must not act as Rich markup
        return escape(terminal_text(str(text)))

    table = Table(title=cell(f"{run.model.name} on {run.device.type}"))
    for col in (
        "mode",
        "status",
        "kernels/step",
        "modeled bytes/step",
        "latency median",
        "speedup (95% CI)",
    ):
        table.add_column(col)
    for name, m in run.modes.items():
        if not m.ok or m.kernels is None or m.bytes is None:
            table.add_row(cell(name), m.status, cell((m.error or "")[:60]), "", "", "")
            continue
        sp = m.speedup_vs_eager
        table.add_row(
            name,
            "ok",
            str(m.kernels.per_step),
            fmt_bytes(m.bytes.read + m.bytes.written),
            fmt_ms(m.latency_ms.median if m.latency_ms is not None else None),
            speedup_cell(sp.to_json() if sp is not None else None),
        )
    Console(file=out, width=120).print(table)


# With the device, the time, a `-N` suffix and the staging folder's `.<name>.partial-XXXXXXXX`,
# a slug this long stays far below the 255-byte limit on a file name.
SLUG_MAX = 96


def _run_name(model: str, device: str, now: datetime) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", model).strip("-.") or "model"  # ASCII: chars = bytes
    if len(slug) > SLUG_MAX:  # recognisable by its start, told apart by a hash of the whole name
        digest = hashlib.sha256(model.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        slug = f"{slug[: SLUG_MAX - len(digest) - 1].rstrip('-.')}-{digest}"
    return f"{slug}-{device}-{now.strftime('%Y%m%dT%H%M%SZ')}"


LOG_NAME = "run.log"


@contextmanager
def _library_output(log_path: Path, err: TextIO, debug: bool) -> Iterator[TextIO]:
    """Libraries' own lines (Kineto, Inductor, the model's prints) go to run.log in the run
    folder; with --debug they stay on the terminal."""
    if debug:
        yield err
        return
    from profreport.liboutput import library_output_to

    with library_output_to(log_path, err) as terminal:
        yield terminal


def _not_a_file(out: Path) -> None:
    """An --out folder (made if missing) cannot be an existing file."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a folder")


def _staging(parent: Path, name: str) -> StagedFolder:
    _not_a_file(parent)
    try:
        return StagedFolder(parent, name)
    except OSError as exc:
        raise UsageError(f"cannot write to --out {parent}: {exc.strerror or exc}") from None


def _exit_code(run: Run, strict: bool, err: TextIO) -> int:
    """0 when eager ran (or, without eager, any mode did); 1 when the model itself is broken,
    or with --strict when any mode failed. Each failure is named on stderr."""
    failed = {name: m for name, m in run.modes.items() if not m.ok}
    for name, mode in failed.items():
        print(
            f"{'error' if strict or name == 'eager' else 'warning'}: {name} {mode.status}: "
            f"{terminal_text(mode.error or mode.status)}",
            file=err,
        )
    if "eager" in failed:
        print("error: the model does not run in eager mode; the report says so", file=err)
        return EXIT_GATE
    if len(failed) == len(run.modes) or (strict and failed):
        return EXIT_GATE
    return EXIT_OK


def _device_for(args: argparse.Namespace) -> Any:
    """--threads applied, --device resolved and checked to run --dtype (UsageError if not)."""
    import torch

    from profreport.env import dtype_problem, resolve_device
    from profreport.pipeline import DTYPES

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        device = resolve_device(args.device)
    except (ValueError, RuntimeError) as exc:
        raise UsageError(first_line(exc)) from None
    problem = dtype_problem(device, DTYPES[args.dtype])
    if problem:
        raise UsageError(problem)
    return device


def _cmd_generate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from profreport import api

    started = interrupts.mark()

    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    try:
        options = api.run_options(
            modes,
            active_steps=args.active_steps,
            min_time_s=args.min_time,
            max_time_s=args.max_time,
            measure_bytes=args.measure_bytes,
            remeasure_ceilings=args.remeasure_ceilings,
        )
    except ValueError as exc:
        raise UsageError(str(exc).replace("active_steps", "--active-steps")) from None

    from profreport.models import ModelError, load_model
    from profreport.pipeline import DTYPES

    device = _device_for(args)
    try:
        model = load_model(
            args.model,
            device,
            DTYPES[args.dtype],
            args.batch_size,
            args.channels_last,
            layers=args.layers,
            seq_len=args.seq_len,
        )
    except ModelError as exc:
        raise UsageError(str(exc)) from None

    now = datetime.now(timezone.utc)
    with (
        _staging(Path(args.out), _run_name(model.name, device.type, now)) as staged,
        _library_output(staged.path / LOG_NAME, err, args.debug) as terminal,
        progress_display(args.quiet, terminal) as progress,
    ):
        result = api.profile_loaded(
            model, device, args.dtype, staged.path, options, progress, now=lambda: now
        )
        try:
            result.save(staged.path)
            if interrupts.since(started):  # an interrupt some library swallowed: not a whole run
                raise KeyboardInterrupt
            run_dir = result.run_dir = staged.publish()
        except OSError as exc:  # a full disk, a folder made read-only meanwhile: not a bug
            raise UsageError(
                f"cannot write the run under {args.out}: {exc.strerror or exc}"
            ) from exc
    run = Run.from_json(result.record)
    _summary_table(run, out)
    for name, mode in run.modes.items():
        print(f"  {terminal_text(str(mode.verdict) if mode.has('verdict') else name)}", file=out)
    if args.measure_bytes:
        reasons = {
            m.bytes.measured["reason"]
            for m in run.modes.values()
            if m.ok and m.bytes and m.bytes.measured and not m.bytes.measured["available"]
        }
        for reason in sorted(reasons):
            print(f"warning: measured bytes not available: {reason}", file=err)
    print(f"report: {run_dir / 'report.html'}", file=out)
    print(f"record: {run_dir / 'run.json'}", file=out)
    print(f"tables: {run_dir / 'kernels_<mode>.csv'}", file=out)
    print(f"traces: tensorboard --logdir {run_dir / 'tensorboard'}", file=out)
    return _exit_code(run, args.strict, err)


def _cmd_compare(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from profreport import record as run_record
    from profreport.analysis.compare import CompareError, Thresholds, compare_runs
    from profreport.analysis.derive import with_findings
    from profreport.render import compare as compare_render

    out_path = Path(args.out) if args.out else None
    if out_path is not None and out_path.is_dir():
        raise UsageError(f"--out {out_path} is a folder: give a file name")
    records = []
    for source in (args.base, args.head):
        try:
            records.append(with_findings(run_record.load(Path(source))))
        except run_record.RecordError as exc:
            raise UsageError(str(exc)) from None
    thresholds = Thresholds(
        max_kernel_increase=args.max_kernel_increase,
        max_bytes_increase_pct=args.max_bytes_increase,
        max_latency_regression_pct=args.max_latency_regression,
        max_peak_memory_increase_pct=args.max_peak_memory_increase,
    )
    try:
        comparison = compare_runs(
            records[0], records[1], thresholds, base_label=args.base, head_label=args.head
        )
    except CompareError as exc:
        raise UsageError(f"cannot compare: {exc}") from None
    content = compare_render.render(comparison, args.format)
    if out_path is None:
        out.write(content)
    else:
        write_atomic(out_path, content)
        print(f"comparison: {out_path}", file=out)
    return _gate_exit(comparison, err)


def _gate_exit(comparison: Any, err: TextIO) -> int:
    for regression in comparison.regressions:  # stderr, so a CI log names mode and metric
        print(f"regression: {regression.message}", file=err)
    for line in comparison.inconclusive:  # neither passed nor failed on that evidence
        print(f"inconclusive: {terminal_text(line)} (latency neither passes nor fails)", file=err)
    return EXIT_GATE if comparison.regressed else EXIT_OK


def _dispatch(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.command == "models":
        return _cmd_models(out)
    if args.command == "modes":
        return _cmd_modes(out)
    if args.command == "render":
        return _cmd_render(args, out)
    if args.command == "analyze":
        from profreport import analyze

        return analyze.run(args, out)
    if args.command == "compare":
        return _cmd_compare(args, out, err)
    if args.command == "ab":
        from profreport import ab_cli

        return ab_cli.run(args, out, err)
    return _cmd_generate(args, out, err)


def _print_traceback(exc: BaseException, err: TextIO) -> None:
    # A usage error is raised `from None` to keep its line short; --debug shows what caused it.
    hidden = exc.__context__ if exc.__suppress_context__ and exc.__cause__ is None else None
    if hidden is not None:
        traceback.print_exception(type(hidden), hidden, hidden.__traceback__, file=err)
    traceback.print_exception(type(exc), exc, exc.__traceback__, file=err)


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
    started = interrupts.mark()
    debug = "--debug" in argv  # known even when parsing itself fails
    try:
        try:
            return _dispatch(build_parser().parse_args(argv), out, err)
        except Exception as exc:
            # Whatever a library made of an interrupt (an error loading the model, say), it is
            # the interrupt.
            interrupts.reraise_if_interrupted(exc, started)
            raise
    except UsageError as exc:
        if debug:
            _print_traceback(exc, err)
        print(f"error: {terminal_text(str(exc))}", file=err)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("error: interrupted; nothing half-written was kept", file=err)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if debug:
            _print_traceback(exc, err)
        hint = "" if debug else "; rerun with --debug for the traceback"
        print(f"error: internal error: {terminal_text(error_line(exc))}{hint}", file=err)
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
