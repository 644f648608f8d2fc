"""A timing worker: `python -m profreport.timing_worker REQUEST RESULT`.

Reads a capture/workers.WorkerRequest, builds each model again (load_model: same spec, same
seed, so the same weights and inputs) and the modes the capture built (the compilers' caches
on: modes/compile.use_code_caches), times them in this fresh process with the one timer
(pipeline.time_here) and writes a WorkerResult. A mode that fails to build again, or raises
while timed, is that mode's failure in the result, one line; the others are timed. Exit 0 with
a result written; anything else is a crash the parent reports (exit 3 there).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m profreport.timing_worker REQUEST RESULT", file=sys.stderr)
        return 2
    request_path, result_path = map(Path, args)

    import torch

    from profreport import pipeline
    from profreport.ab import AB_TIMING
    from profreport.capture.workers import WorkerRequest, WorkerResult, series_key
    from profreport.env import DTYPES, make_sync, resolve_device
    from profreport.files import RunFolder, dumps
    from profreport.models import load_model
    from profreport.modes import prepare_mode
    from profreport.modes.compile import stop_compile_workers, use_code_caches
    from profreport.record.model import OkMode

    request = WorkerRequest.parse_file(request_path)
    plans = {None: pipeline.ON_ITS_OWN, AB_TIMING.order_name: AB_TIMING}
    torch.set_num_threads(request.threads)
    use_code_caches()
    device = resolve_device(request.device)
    sync = make_sync(device)
    options = pipeline.RunOptions(
        modes=(), timing=request.timing, bootstrap_resamples=request.resamples
    )
    failed: dict[str, str] = {}
    stages: dict[str, pipeline.TimingStage] = {}
    with tempfile.TemporaryDirectory(prefix="profreport-worker-") as folder, torch.no_grad():
        for asked in request.models:
            model = load_model(
                asked.spec, device, DTYPES[request.dtype], asked.batch_size, asked.channels_last
            )
            prepared = {}
            for name in asked.modes:
                try:
                    prepared[name] = prepare_mode(name, model.module, model.example_inputs, sync)
                except (Exception, SystemExit) as exc:  # this mode's failure, the others go on
                    failed[series_key(asked.stage, name)] = (
                        f"failed to build again: {pipeline.mode_error_line(exc)}"
                    )
            setup = pipeline.RunSetup(
                model, device, request.dtype, RunFolder(Path(folder)), options
            )
            entries = {name: OkMode() for name in prepared}
            stages[asked.stage] = pipeline.TimingStage(dict(entries), prepared, sync, setup)
        stop_compile_workers()  # nothing compiles beside the timing
        timed = pipeline.time_here(stages, plans[request.order], pipeline.quiet)
    blocks = {
        series_key(stage, mode): b
        for process in timed.processes
        for stage, series in process.items()
        for mode, b in series.items()
    }
    not_timed = None
    for stage_name, stage in stages.items():
        for mode, entry in stage.modes.items():
            if entry.status == "failed":
                failed[series_key(stage_name, mode)] = f"raised while timed: {entry.error}"
            elif entry.not_timed:
                not_timed = entry.not_timed
    result = WorkerResult(
        blocks=blocks,
        failed=failed,
        load=timed.loads[0] if timed.loads else None,
        reference=timed.reference,
    ).adding(not_timed=not_timed)
    result_path.write_text(dumps(result.to_json()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
