"""``profreport analyze``: count kernels in existing traces and compare them to the first one.

profreport analyze trace.pt.trace.json[.gz]          # one trace, Markdown table on stdout
profreport analyze eager.json.gz compiled.json.gz    # the first is the baseline
profreport analyze reports/<run>/tensorboard/        # every *.json / *.json.gz under a folder
profreport analyze TRACE --format json|md|html [--out DIR]
profreport analyze reports/ --keep-going             # skip unreadable files, exit 1 if any
profreport analyze TRACE --hta-rounding              # times rounded as HTA 0.5 rounds them
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from profreport.cli.common import positive_int
from profreport.exits import EXIT_GATE, EXIT_OK, UsageError
from profreport.files import LIGHT_TRACE_NAME, TIMELINE_NAME, write_atomic
from profreport.render.registry import ANALYSIS, formats, get
from profreport.text import terminal_text

if TYPE_CHECKING:
    from profreport.analysis.time_breakdown import TraceTimeBreakdown
    from profreport.analysis.trace_document import AnalysisDocument

EXIT_SKIPPED = EXIT_GATE  # --keep-going skipped an unreadable file
TRACE_SUFFIXES = (".json", ".json.gz")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="TRACE",
        help="trace files (.json or .json.gz) or folders holding them; the first is the baseline",
    )
    parser.add_argument(
        "--format",
        choices=sorted(formats(ANALYSIS)),
        default="md",
        help="output format (default: md, a readable table)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="write analysis.<format> into DIR instead of printing it",
    )
    parser.add_argument(
        "--definition",
        choices=("auto", "device", "cpu"),
        default="auto",
        help="kernel definition: device events, CPU compute ops, or auto (device if any)",
    )
    parser.add_argument(
        "--top",
        type=positive_int,
        default=15,
        metavar="N",
        help="kernels listed per trace (default 15)",
    )
    parser.add_argument(
        "--hta-rounding",
        action="store_true",
        help="time breakdown: round event times inward to whole µs as Holistic Trace Analysis "
        "0.5 does (to reproduce its numbers; default: exact times)",
    )
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="skip unreadable files with a warning and analyse the rest (exit 1 if any skipped)",
    )


def find_traces(inputs: list[str], missing: list[str] | None = None) -> list[Path]:
    """Expand folders into the trace files under them (sorted); explicit files are kept as given.

    Raises :class:`UsageError` for a missing path or a folder without any candidate file, unless
    ``missing`` is given: then the missing path's one-line reason is appended to it instead.
    """
    found: list[Path] = []
    for item in inputs:
        path = Path(item)
        if not path.exists():
            if missing is None:
                raise UsageError(f"{item}: no such file or folder")
            missing.append(f"{item}: no such file or folder")
        elif path.is_dir():
            under = sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and p.name.endswith(TRACE_SUFFIXES)
                and p.name not in (TIMELINE_NAME, LIGHT_TRACE_NAME)
            )  # the all-modes timeline and the light pass repeat the modes' own traces
            if not under:
                raise UsageError(f"{item}: no *.json or *.json.gz trace files under this folder")
            found.extend(under)
        else:
            found.append(path)
    return found


def analyze_paths(
    inputs: list[str],
    definition: str = "auto",
    top: int = 15,
    unreadable: list[str] | None = None,
    hta_rounding: bool = False,
) -> tuple[AnalysisDocument, list[str]]:
    """Load, count and break down the time of every trace named by ``inputs``; returns
    (document, skipped files).

    Files found inside a folder that are valid JSON but not traces (a run record, say) are
    skipped; anything else unreadable stops the analysis with :class:`TraceError`, unless
    ``unreadable`` is given (``--keep-going``): then each unreadable file's one-line reason is
    appended to it and the rest is analysed.
    """
    from profreport.analysis.kernels import count_kernels
    from profreport.analysis.time_breakdown import time_breakdown
    from profreport.analysis.trace_compare import analysis_document
    from profreport.traceio import NotATraceError, TraceError, load_trace

    explicit = {Path(i) for i in inputs}
    skipped: list[str] = []
    counted = []
    events: list[int] = []
    times: list[TraceTimeBreakdown] = []
    for path in find_traces(inputs, unreadable):
        try:
            trace = load_trace(path)
        except TraceError as exc:
            if isinstance(exc, NotATraceError) and path not in explicit:
                skipped.append(str(path))
            elif unreadable is None:
                raise
            else:
                unreadable.append(str(exc))
            continue
        counts = count_kernels(trace, definition)
        counted.append((str(path), counts))
        times.append(time_breakdown(trace, counts.definition, hta_rounding=hta_rounding))
        events.append(len(trace))
        del trace
    if not counted:
        raise UsageError(f"{', '.join(inputs)}: no profiler traces found")
    return analysis_document(counted, top=top, events=events, times=times), skipped


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run the command; returns the exit code. Bad input: UsageError (one line, exit 2, no
    files); with --keep-going, exit 1 when a file was skipped."""
    from profreport.traceio import TraceError

    unreadable: list[str] | None = [] if args.keep_going else None
    try:
        doc, skipped = analyze_paths(
            args.paths, args.definition, args.top, unreadable, args.hta_rounding
        )
    except TraceError as exc:
        raise UsageError(str(exc)) from exc
    finally:
        for reason in unreadable or ():
            print(f"warning: skipped {terminal_text(reason)}", file=err)
    done = EXIT_SKIPPED if unreadable else EXIT_OK
    for name in skipped:
        print(f"warning: skipped {terminal_text(name)}: not a profiler trace", file=err)
    renderer = get(ANALYSIS, args.format)
    content = renderer.text(doc, top=args.top)
    if not args.out:
        out.write(content)
        return done
    target = Path(args.out) / renderer.filename
    try:
        write_atomic(target, content)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    print(f"wrote {target}", file=out)
    return done
