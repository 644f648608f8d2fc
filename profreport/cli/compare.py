"""`profreport compare`: two runs of one model side by side, with regression gates."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from profreport.cli.common import (
    Command,
    UsageError,
    add_gate_arguments,
    gate_exit,
    thresholds,
)
from profreport.files import write_atomic
from profreport.render.registry import COMPARISON, formats


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("base", help="run.json or run folder of the baseline")
    parser.add_argument("head", help="run.json or run folder of the change")
    parser.add_argument("--format", default="md", choices=list(formats(COMPARISON)))
    parser.add_argument("--out", default=None, help="file to write (default: standard output)")
    add_gate_arguments(
        parser, "gate: latency median may grow by at most PCT percent (beyond noise)"
    )


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from profreport import record as run_record
    from profreport.analysis.compare import CompareError, compare_runs
    from profreport.analysis.derive import with_findings
    from profreport.render import compare as compare_render

    out_path = Path(args.out) if args.out else None
    if out_path is not None and out_path.is_dir():
        raise UsageError(f"--out {out_path} is a folder: give a file name")
    from profreport.sweep import compare as sweep_compare

    if sweep_compare.either_is_sweep(args.base, args.head):
        return sweep_compare.run(args, out, err)
    records = []
    for source in (args.base, args.head):
        try:
            records.append(with_findings(run_record.load(Path(source))))
        except run_record.RecordError as exc:
            raise UsageError(str(exc)) from None
    gates = thresholds(args)
    try:
        comparison = compare_runs(
            records[0], records[1], gates, base_label=args.base, head_label=args.head
        )
    except CompareError as exc:
        raise UsageError(f"cannot compare: {exc}") from None
    content = compare_render.render(comparison, args.format)
    if out_path is None:
        out.write(content)
    else:
        write_atomic(out_path, content)
        print(f"comparison: {out_path}", file=out)
    return gate_exit(comparison, err)


COMMAND = Command(
    "compare",
    "compare two runs of one model; exit 1 on a regression beyond a threshold",
    add_arguments,
    run,
)
