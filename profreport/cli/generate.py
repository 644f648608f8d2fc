"""`profreport generate`: profile a model in every mode and write a run folder."""

from __future__ import annotations

import argparse
import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from profreport import interrupts
from profreport.cli.common import (
    EXIT_GATE,
    EXIT_OK,
    Command,
    UsageError,
    escape,
    not_a_file,
    positive_float,
    positive_int,
    progress_display,
)
from profreport.files import StagedFolder
from profreport.modes import default_modes, mode_names
from profreport.record.model import Run
from profreport.text import first_line, terminal_text


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
        default=",".join(default_modes()),
        help=f"comma-separated modes, from: {', '.join(mode_names())} (`profreport modes`)",
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
        "--seq-len", type=positive_int, default=None, help="hf: language models: tokens per input"
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
            speedup_cell(sp),
        )
    Console(file=out, width=120).print(table)


# With the device, the time, a `-N` suffix and the staging folder's `.<name>.partial-XXXXXXXX`,
# a slug this long stays far below the 255-byte limit on a file name.
SLUG_MAX = 96


def run_name(model: str, device: str, now: datetime) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", model).strip("-.") or "model"  # ASCII: chars = bytes
    if len(slug) > SLUG_MAX:  # recognisable by its start, told apart by a hash of the whole name
        digest = hashlib.sha256(model.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        slug = f"{slug[: SLUG_MAX - len(digest) - 1].rstrip('-.')}-{digest}"
    return f"{slug}-{device}-{now.strftime('%Y%m%dT%H%M%SZ')}"


LOG_NAME = "run.log"


@contextmanager
def library_output(log_path: Path, err: TextIO, debug: bool) -> Iterator[TextIO]:
    """Libraries' own lines (Kineto, Inductor, the model's prints) go to run.log in the run
    folder; with --debug they stay on the terminal."""
    if debug:
        yield err
        return
    from profreport.liboutput import library_output_to

    with library_output_to(log_path, err) as terminal:
        yield terminal


def staging(parent: Path, name: str) -> StagedFolder:
    not_a_file(parent)
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
    for name, mode in run.ok_modes.items():
        if mode.not_timed:
            print(f"warning: {name} not timed: {terminal_text(mode.not_timed)}", file=err)
    if "eager" in failed:
        print("error: the model does not run in eager mode; the report says so", file=err)
        return EXIT_GATE
    if len(failed) == len(run.modes) or (strict and failed):
        return EXIT_GATE
    return EXIT_OK


def device_for(args: argparse.Namespace) -> Any:
    """--threads applied, --device resolved and checked to run --dtype (UsageError if not)."""
    import torch

    from profreport.env import DTYPES, dtype_problem, resolve_device

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


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
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

    from profreport.env import DTYPES
    from profreport.models import ModelError, load_model

    device = device_for(args)
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
        staging(Path(args.out), run_name(model.name, device.type, now)) as staged,
        library_output(staged.path / LOG_NAME, err, args.debug) as terminal,
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


COMMAND = Command(
    "generate", "profile a model in every mode and write a report", add_arguments, run
)
