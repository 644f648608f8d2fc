"""`profreport compare`: two runs of one model side by side, with regression gates."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from profreport.cli.common import add_gate_arguments, gate_exit, thresholds
from profreport.exits import UsageError
from profreport.files import record_file, write_atomic
from profreport.render.registry import COMPARISON, SWEEP_COMPARISON, formats, get

if TYPE_CHECKING:
    from profreport.analysis.compare import GateOutcome


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", help="run.json or run folder of the baseline")
    parser.add_argument("head", help="run.json or run folder of the change")
    parser.add_argument("--format", default="md", choices=list(formats(COMPARISON)))
    parser.add_argument("--out", default=None, help="file to write (default: standard output)")
    parser.add_argument(
        "--allow-different-models",
        action="store_true",
        help="compare runs of two different models (the header states what differs)",
    )
    add_gate_arguments(
        parser, "gate: latency median may grow by at most PCT percent (beyond noise)"
    )


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from profreport import record as run_record
    from profreport.analysis.compare import CompareError, DifferentModels, compare_runs
    from profreport.analysis.derive import compared_run
    from profreport.modes import mode_analyses

    out_path = Path(args.out) if args.out else None
    if out_path is not None and out_path.is_dir():
        raise UsageError(f"--out {out_path} is a folder: give a file name")
    from profreport.sweep import compare as sweep_compare

    gated: GateOutcome
    if sweep_compare.either_is_sweep(args.base, args.head):  # gated point by point (sweep.compare)
        from profreport.sweep.model import SweepRecordError

        try:
            gated = sweep_compare.compare_sweep_files(args.base, args.head, thresholds(args))
        except SweepRecordError as exc:
            raise UsageError(str(exc)) from None
        content = get(SWEEP_COMPARISON, args.format).text(gated)
    else:
        runs = []
        for source in (args.base, args.head):
            try:
                record = run_record.load(Path(source))
            except run_record.RecordError as exc:
                raise UsageError(str(exc)) from None
            path = record_file(Path(source))
            runs.append(compared_run(record, mode_analyses(), path))
        try:
            comparison = compare_runs(
                runs[0],
                runs[1],
                thresholds(args),
                base_label=args.base,
                head_label=args.head,
                allow_different_models=args.allow_different_models,
            )
        except DifferentModels as exc:
            raise UsageError(
                f"cannot compare: {exc} (--allow-different-models compares them anyway)"
            ) from None
        except CompareError as exc:
            raise UsageError(f"cannot compare: {exc}") from None
        gated, content = comparison, get(COMPARISON, args.format).text(comparison)
    if out_path is None:  # the comparison on stdout or in --out; the gates' exit code
        out.write(content)
    else:
        write_atomic(out_path, content)
        print(f"comparison: {out_path}", file=out)
    return gate_exit(gated, err, args.fail_on_inconclusive)
