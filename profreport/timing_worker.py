"""A timing worker: `python -m profreport.timing_worker REQUEST RESULT [READY_FD DEVICE MODES]`.

Reads a capture/workers.WorkerRequest, builds each model again (load_model: same spec, same
seed, so the same weights and inputs; a decode run's step from it, models.decode_loaded) and the
modes the capture built: a TorchScript module the capture saved is loaded, and kept when its
output on the example inputs matches eager's within the output check's tolerance (else built
again); the others are built again with the compilers' caches on
(modes/compile.use_code_caches). It times them in this fresh process with the one timer
(pipeline.time_here) and writes a WorkerResult. Given READY_FD (capture/workers.TimingWorkers),
it is started before its request exists: it does what building the run's MODES (comma-separated)
on DEVICE will do first whatever the model (Mode.ahead: import torch and the compilers), writes
IMPORTED there, and waits for a BUILD line on stdin; it then reads REQUEST, builds, writes
BUILT_ALL, and times only when its turn's line arrives on stdin: the series to leave out (a JSON
list; those that failed in an earlier worker).
An end of file instead of either line: it is not needed, exit 0. A mode that fails to build
again, or raises while timed, is that mode's failure in the result, one line; the others are
timed. Exit 0 with a result written; anything else is a crash the parent reports (exit 3
there).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from profreport.models import LoadedModel
    from profreport.modes import PreparedMode
    from profreport.modes.base import Sync


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (2, 5) or not (len(args) == 2 or args[2].isdigit()):
        print(
            "usage: python -m profreport.timing_worker REQUEST RESULT [READY_FD DEVICE MODES]",
            file=sys.stderr,
        )
        return 2
    request_path, result_path = Path(args[0]), Path(args[1])
    ready = int(args[2]) if len(args) > 2 else None

    import torch

    from profreport import pipeline
    from profreport.ab import AB_TIMING
    from profreport.capture.timing import series_key, stage_and_mode
    from profreport.capture.workers import (
        BUILD,
        BUILT,
        BUILT_ALL,
        IMPORTED,
        LOADED,
        WorkerRequest,
        WorkerResult,
    )
    from profreport.env import DTYPES, make_sync, resolve_device
    from profreport.files import RunFolder, dumps
    from profreport.models import decode_loaded, load_model
    from profreport.modes import prepare_mode
    from profreport.modes.compile import stop_compile_workers, use_code_caches
    from profreport.modes.outputs import flatten_output
    from profreport.record.model import OkMode

    if ready is not None:  # ready to build: say so, and wait for the request
        _ahead(args[3], args[4].split(","))
        os.write(ready, IMPORTED)
        if sys.stdin.readline().strip() != BUILD:  # the parent needs this worker no more
            return 0
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
    built: dict[str, str] = {}
    stages: dict[str, pipeline.TimingStage] = {}
    with tempfile.TemporaryDirectory(prefix="profreport-worker-") as folder, torch.no_grad():
        for asked in request.models:
            loaded = load_model(
                asked.spec,
                device,
                DTYPES[request.dtype],
                asked.batch_size,
                asked.channels_last,
                workload=asked.workload,
            )
            model = decode_loaded(loaded)  # a decode run's step, built as the capture built it
            prepared = {}
            eager = flatten_output(model.module(*model.example_inputs)).tensors
            for name in asked.modes:
                key = series_key(asked.stage, name)
                try:
                    prepared[name] = _loaded(asked.saved.get(name), name, model, eager, sync)
                    built[key] = LOADED
                except (Exception, SystemExit):  # built again, on the evidence
                    pass
                if name in prepared:
                    continue
                try:
                    prepared[name] = prepare_mode(name, model.module, model.example_inputs, sync)
                    built[key] = BUILT
                except (Exception, SystemExit) as exc:  # this mode's failure, the others go on
                    failed[key] = f"failed to build again: {pipeline.mode_error_line(exc)}"
            setup = pipeline.RunSetup(
                model, device, request.dtype, RunFolder(Path(folder)), options
            )
            entries = {name: OkMode() for name in prepared}
            stages[asked.stage] = pipeline.TimingStage(dict(entries), prepared, sync, setup)
        stop_compile_workers()  # nothing compiles beside the timing
        if ready is not None:  # built: say so, and wait for this worker's turn
            os.write(ready, BUILT_ALL)
            os.close(ready)
            turn = sys.stdin.readline()
            if not turn:  # the parent is gone or gave up on this worker: nothing to time
                return 0
            for key in json.loads(turn):
                name, mode = stage_and_mode(key)
                stages[name].prepared_modes.pop(mode, None)
                stages[name].modes.pop(mode, None)
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
        built=built,
        load=timed.loads[0] if timed.loads else None,
        reference=timed.reference,
    ).adding(not_timed=not_timed)
    result_path.write_text(dumps(result.to_json()), encoding="utf-8")
    return 0


def _ahead(device: str, modes: Sequence[str]) -> None:
    """What building `modes` on `device` does first whatever the model (Mode.ahead). A device or
    mode it cannot resolve, or a step that fails, is left to the build, which meets it again and
    says so."""
    from profreport.env import resolve_device
    from profreport.modes import mode_for, mode_names

    try:
        device_type = resolve_device(device).type
    except (ValueError, RuntimeError):
        return
    for name in modes:
        if name in mode_names():
            with suppress(Exception):  # the build meets it again, as that mode's failure
                mode_for(name).ahead(device_type)


def _loaded(
    saved: str | None, name: str, model: LoadedModel, eager: Sequence[torch.Tensor], sync: Sync
) -> PreparedMode:
    """Mode `name` as the capture built it, from its saved TorchScript module, warmed up as a
    build warms it; ValueError when there is none, or its output is not eager's within the
    output check's tolerance (the mode is then built again)."""
    import torch

    from profreport.analysis.output_check import compare_outputs
    from profreport.modes.outputs import flatten_output
    from profreport.modes.torchscript_graph import prepared_after_warmup

    if saved is None:
        raise ValueError(f"{name}: nothing saved")
    device = model.example_inputs[0].device
    load: Callable[..., Any] = torch.jit.load  # untyped in torch's stubs
    loaded = load(saved, map_location=device)
    prepared = prepared_after_warmup(name, loaded, model.example_inputs, sync)
    check = compare_outputs(flatten_output(prepared.fn(*model.example_inputs)).tensors, eager)
    if not check.within_tolerance:
        raise ValueError(f"{name}: the loaded module's output is not eager's")
    return prepared


if __name__ == "__main__":
    code = main()
    # The parent waits for this exit before the next worker's turn, and torch's teardown took
    # 1.2-1.3 s of it (generate --model simple's worker, a 2-core CPU); nothing is left to
    # release (the result is written, the compile workers stopped, the temporary folders gone).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
