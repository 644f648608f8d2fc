"""`scripts/gpu-check OUT [--wheels DIR] [--budget S] [--runs LABELS] [--work DIR]`: run the
steps, check what they wrote, write the summary into OUT; exit 1 if any check FAILs."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

from gpu_check.checks import run_checks
from gpu_check.evidence import StepOutcome
from gpu_check.report import counts, write_outputs
from gpu_check.spec import RUN_SPECS, RUNS
from gpu_check.steps import Step, Workspace, plan, run_plan, step_env

DEFAULT_BUDGET_S = 470.0  # 8 minutes less the time to write the summary and the archive


def _terminated(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpu-check", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for gpu-check.txt/.json and the archive")
    parser.add_argument("--wheels", type=Path, help="install these carried wheels first")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, help="seconds in all")
    parser.add_argument(
        "--runs",
        default=",".join(RUN_SPECS),
        help=f"generate runs to make, from {', '.join(RUN_SPECS)} (a rerun of a few)",
    )
    parser.add_argument("--work", type=Path, help="work folder (default: a new temporary one)")
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # tests: cpu
    parser.add_argument("--cap-scale", type=float, default=1.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = [r for r in args.runs.split(",") if r not in RUN_SPECS]
    if unknown:
        parser.error(f"--runs: unknown {', '.join(unknown)}")
    return args


def main(argv: list[str] | None = None, steps: list[Step] | None = None) -> int:
    args = parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.wheels is not None:  # the steps run in the work folder: a relative path breaks
        args.wheels = args.wheels.resolve()
    site = work / "site" if args.wheels is not None else None
    ws = Workspace(work.resolve(), step_env(dict(os.environ), work.resolve(), site), site)
    chosen = tuple(s for s in RUNS if s.label in args.runs.split(","))
    steps = (
        steps if steps is not None else plan(args.device, args.wheels, site, chosen, args.cap_scale)
    )
    started = time.monotonic()

    def progress(line: str) -> None:
        print(f"[{time.monotonic() - started:5.0f} s] {line}", flush=True)

    signal.signal(signal.SIGTERM, _terminated)
    try:
        run_plan(steps, ws, args.budget, progress=progress)
    except KeyboardInterrupt:  # stopped from outside: say so, and still write the summary
        ws.evidence.steps["interrupted"] = StepOutcome("interrupted", "not run", reason="stopped")
        ws.evidence.elapsed_s = time.monotonic() - started
    results = run_checks(ws.evidence)
    text = write_outputs(args.out, ws.work, ws.evidence, results)
    print(text, end="")
    print(f"gpu-check: wrote {args.out}; work folder {ws.work}")
    return 1 if counts(results)["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
