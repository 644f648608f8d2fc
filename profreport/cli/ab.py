"""`profreport ab`: base and head profiled in one process, timed interleaved; compared, gated."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

from profreport.cli.common import (
    add_gate_arguments,
    findings_error,
    gate_exit,
    positive_float,
    positive_int,
    progress_display,
    thresholds,
)
from profreport.exits import EXIT_INTERNAL, UsageError, findings_failed
from profreport.runner import (
    LOG_NAME,
    built_off_the_terminal,
    device_for,
    library_output,
    run_name,
    staging,
)

COMPARE_NAMES = {"md": "compare.md", "json": "compare.json", "html": "compare.html"}


def add_arguments(ab: argparse.ArgumentParser) -> None:
    ab.add_argument("base", help="base model spec (as generate --model accepts)")
    ab.add_argument("head", help="head model spec: the same model or any other")
    ab.add_argument("--modes", default="eager,compile", help="comma-separated modes")
    ab.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda[:N]")
    ab.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    ab.add_argument(
        "--out", default="reports", help="parent folder of the ab folder (default reports/)"
    )
    ab.add_argument("--format", default="md", choices=list(COMPARE_NAMES))
    ab.add_argument("--min-time", type=positive_float, default=1.0)
    ab.add_argument("--max-time", type=positive_float, default=120.0)
    ab.add_argument("--threads", type=positive_int, default=None)
    ab.add_argument("--quiet", action="store_true", help="no progress output")
    add_gate_arguments(
        ab, "gate: head/base paired per-round ratio above 1 + PCT%% and its 95%% CI above 1"
    )


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from profreport import ab, api
    from profreport.analysis.derive import failure_summary
    from profreport.api import RunResult
    from profreport.env import DTYPES
    from profreport.files import write_atomic
    from profreport.models import LoadedModel, ModelError, load_model
    from profreport.render.registry import COMPARISON, get

    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    try:
        options = api.run_options(modes, min_time_s=args.min_time, max_time_s=args.max_time)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    device = device_for(args.device, args.dtype, args.threads)

    def build() -> dict[ab.Side, LoadedModel]:
        models: dict[ab.Side, LoadedModel] = {}
        sides: tuple[tuple[ab.Side, str], ...] = (("base", args.base), ("head", args.head))
        for side, spec in sides:
            try:
                models[side] = load_model(spec, device, DTYPES[args.dtype])
            except ModelError as exc:
                raise UsageError(f"{side}: {exc}") from None
        return models

    models, build_log = built_off_the_terminal(build, err, args.debug)
    gates = thresholds(args)
    now = datetime.now(timezone.utc)
    names = dict.fromkeys(models[side].name for side in ab.SIDES)  # one name when they agree
    name = run_name(f"{'-vs-'.join(names)}-ab", device.type, now)
    with (
        staging(Path(args.out), name) as staged,
        library_output(staged.path / LOG_NAME, err, args.debug, build_log) as terminal,
        progress_display(args.quiet, terminal) as progress,
    ):
        run_dirs = {side: staged.path / side for side in ab.SIDES}
        result = ab.run_ab(
            models,
            device,
            args.dtype,
            run_dirs,
            options,
            gates,
            progress,
            labels={"base": args.base, "head": args.head},
            now=lambda: now,
        )
        content = get(COMPARISON, args.format).text(result.comparison)
        try:
            RunResult(result.base, run_dirs["base"]).save()
            RunResult(result.head, run_dirs["head"]).save()
            write_atomic(staged.path / COMPARE_NAMES[args.format], content)
            folder = staged.publish()
        except OSError as exc:
            raise UsageError(
                f"cannot write the runs under {args.out}: {exc.strerror or exc}"
            ) from exc
    for side in ab.SIDES:
        print(f"{side}: {folder / side / 'report.html'}", file=out)
    print(f"comparison: {folder / COMPARE_NAMES[args.format]}", file=out)
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
        failed = failure_summary(run)  # shown in that side's reports; a bug: exit 3
        line = None if failed is None else findings_failed(failed, folder / side / "run.json")
        findings_error(run, line, args.debug, err)
        code = EXIT_INTERNAL if line is not None else code
    return code
