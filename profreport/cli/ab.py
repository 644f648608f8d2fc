"""`profreport ab`: base and head profiled in one process, timed interleaved; compared, gated."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

from profreport.cli.common import (
    add_gate_arguments,
    add_workers_argument,
    comma_list,
    findings_error,
    gate_exit,
    positive_float,
    positive_int,
    terminal,
    thresholds,
)
from profreport.exits import EXIT_INTERNAL
from profreport.files import RECORD


def add_arguments(ab: argparse.ArgumentParser) -> None:
    ab.add_argument("base", help="base model spec (as generate --model accepts)")
    ab.add_argument("head", help="head model spec: the same model or any other")
    ab.add_argument("--modes", default="eager,compile", help="comma-separated modes")
    ab.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda[:N]")
    ab.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    ab.add_argument(
        "--out", default="reports", help="parent folder of the ab folder (default reports/)"
    )
    ab.add_argument("--format", default="md", choices=["md", "json", "html"])
    ab.add_argument("--min-time", type=positive_float, default=1.0)
    ab.add_argument("--max-time", type=positive_float, default=120.0)
    ab.add_argument("--threads", type=positive_int, default=None)
    ab.add_argument(
        "--workload",
        choices=("prefill", "decode"),
        default="prefill",
        help="prefill (default) or decode: each side's greedy decode step (causal LMs)",
    )
    add_workers_argument(ab)
    ab.add_argument("--quiet", action="store_true", help="no progress output")
    add_gate_arguments(
        ab, "gate: head/base paired per-round ratio above 1 + PCT%% and its 95%% CI above 1"
    )


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from profreport.ab import AbRequest, run_ab

    request = AbRequest(  # the ab the arguments ask for
        base=args.base,
        head=args.head,
        modes=tuple(comma_list(args.modes)),
        device=args.device,
        dtype=args.dtype,
        out=Path(args.out),
        min_time_s=args.min_time,
        max_time_s=args.max_time,
        threads=args.threads,
        workers=args.workers,
        thresholds=thresholds(args),
        format=args.format,
        workload=args.workload,
    )
    result = run_ab(request, terminal(args, err), datetime.now(timezone.utc))
    folder = result.folder
    for side in ("base", "head"):
        print(f"{side}: {folder / side / 'report.html'}", file=out)
    print(f"comparison: {result.comparison_file}", file=out)
    for mc in result.comparison.modes:
        lat = mc.metric("latency_median_ms")
        if lat is not None and lat.paired is not None:
            r = lat.paired.ratio
            print(
                f"  {mc.mode}: head/base {r.median:.3f} (95% CI {r.ci95[0]:.3f}-"
                f"{r.ci95[1]:.3f}, {r.n} paired rounds, spread {r.spread:.1%})",
                file=out,
            )
    code = gate_exit(result.comparison, err, args.fail_on_inconclusive)
    for side, run in (("base", result.base), ("head", result.head)):
        if findings_error(run, folder / side / RECORD, args.debug, err):
            code = EXIT_INTERNAL
    return code
