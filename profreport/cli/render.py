"""`profreport render`: the reports of a run record again, with today's analysis."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from profreport.cli.common import findings_error
from profreport.exits import EXIT_INTERNAL, EXIT_OK, UsageError
from profreport.files import not_a_file, record_file, write_atomic
from profreport.render.registry import report_renderers


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("record", help="run.json or a run folder")
    parser.add_argument(
        "--out", default=None, help="folder to write into (default: beside the record)"
    )


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from profreport import record as run_record
    from profreport.analysis.derive import derived_run
    from profreport.modes import mode_analyses

    try:
        rec = run_record.load(Path(args.record))
    except run_record.RecordError as exc:
        raise UsageError(str(exc)) from None
    # today's analysis of the stored evidence, not the stored verdicts
    derived = derived_run(rec, mode_analyses())
    record = record_file(Path(args.record))
    own = record.parent
    folder = Path(args.out) if args.out else own
    not_a_file(folder)
    if folder.resolve() != own.resolve():  # the record's own reports may be re-rendered; others not
        taken = [r.filename for r in report_renderers() if (folder / r.filename).exists()]
        if taken:
            raise UsageError(f"{folder / taken[0]} exists: render into another --out folder")
    for renderer in report_renderers():
        write_atomic(folder / renderer.filename, renderer.render(derived))
    for renderer in report_renderers():
        print(folder / renderer.filename, file=out)
    failed = findings_error(derived, record, args.debug, err)
    return EXIT_INTERNAL if failed else EXIT_OK
