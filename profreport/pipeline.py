"""The generate pipeline: model -> modes -> capture -> run record.

`collect_run` runs every requested mode (one failing does not stop the others), profiles it,
logs its tensor I/O, times all modes together, and returns the run record: a plain JSON-ready
dict whose names are the `profreport.run/1` contract. The only files it writes are the Kineto
traces under `<run_dir>/tensorboard/<mode>/`, which belong beside the record.

Over 400 lines on purpose: it is the one place that orders the stages (build, profile, count,
bytes, interleaved timing, output checks, failure handling per mode); each stage's work is in
capture/, modes/ and analysis/, and what is left here is the order and the record they fill.
"""

from __future__ import annotations

import re
import time
import traceback
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

import torch

from profreport import __version__, interrupts
from profreport.analysis import kernels as kernel_analysis
from profreport.analysis.bytes_model import OpCall, estimate
from profreport.analysis.derive import with_findings
from profreport.analysis.latency import summarize
from profreport.analysis.output_check import compare_outputs
from profreport.analysis.paired import paired_speedups
from profreport.analysis.time_breakdown import time_breakdown
from profreport.analysis.trace_compare import kernel_entry
from profreport.capture.ceilings import ceilings_for, measured_again, settled
from profreport.capture.ncu import ChildModel, measure_mode, ncu_unavailable_reason
from profreport.capture.ncu_results import MeasuredBytes
from profreport.capture.noise import watch
from profreport.capture.peak_memory import measure_peak
from profreport.capture.profiling import ProfileSchedule, profile_mode
from profreport.capture.timing import TimingConfig, TimingFailed, measure_latency
from profreport.env import DTYPES, collect_env, device_info, make_sync
from profreport.models import LoadedModel
from profreport.modes import (
    BytesWork,
    ModeError,
    PreparedMode,
    default_modes,
    get_mode,
    mode_for,
    prepare_mode,
)
from profreport.modes.outputs import FlatOutput, flatten_output
from profreport.record import SCHEMA
from profreport.record.model import TimeBreakdown
from profreport.text import error_line, full_error, one_line
from profreport.traceio import Trace, load_trace

Progress = Callable[[str], None]


@dataclass(frozen=True)
class RunOptions:
    modes: tuple[str, ...] = field(default_factory=default_modes)
    profile: ProfileSchedule = field(default_factory=ProfileSchedule)
    timing: TimingConfig = field(default_factory=TimingConfig)
    bootstrap_resamples: int = 2000
    measure_bytes: bool = False  # re-run each mode under Nsight Compute (CUDA + ncu only)
    remeasure_ceilings: bool = False  # measure bandwidth and matmul rate even when cached


class PhaseClock:
    """Wall seconds spent in each phase of a run (summed over modes), for `phases_s` in the
    record: where a run's minute goes, and whether any phase grows faster than the kernels."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = self._clock()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + self._clock() - start


_TORCHSCRIPT_RERAISE = re.compile(r"^builtins\.(\w+): (.*)$", re.MULTILINE)


def _error_line(exc: BaseException) -> str:
    """`Type: message`, one line without tensor reprs. The TorchScript interpreter wraps the
    model's own exception under a generic first line; the original (`builtins.ValueError: ...`)
    is the useful one. A ModeError's message is already the line to show."""
    if isinstance(exc, ModeError):
        return one_line(str(exc))
    text = str(exc).strip()
    reraised = _TORCHSCRIPT_RERAISE.search(text)
    if reraised:
        return one_line(f"{reraised[1]}: {one_line(reraised[2])} (in the TorchScript interpreter)")
    return error_line(exc)


def _kernels_record(trace: Trace, prepared: PreparedMode, device: torch.device) -> dict:
    definition = "device" if device.type == "cuda" else "cpu"
    counts = kernel_analysis.count_kernels(trace, definition=definition)
    step = kernel_analysis.per_step(counts)
    n_steps = max(int(step.get("steps", 0)), 1)
    unrecorded: list[str] = []
    if definition == "cpu":
        # Compute nodes the TorchScript interpreter runs outside the dispatcher have no profiler
        # record; the optimized graph says they ran once per forward.
        unrecorded = list(prepared.compiler.get("unrecorded_ops", []))
    table = [kernel_entry(row, n_steps) for row in counts.table]
    table += [
        {
            "name": name,
            "kind": "cpu",
            "calls": per_forward * n_steps,
            "calls_per_step": float(per_forward),
            "time_us": None,
            "time_us_per_step": None,
            "launched_by": None,
            "launched_by_top": None,
            "source": "optimized graph (no profiler record)",
        }
        for name, per_forward in Counter(unrecorded).items()
    ]
    return {
        "definition": counts.definition,
        "per_step": int(step["kernels"]) + len(unrecorded),
        # CPU work has no launch API: only the device definition counts launch calls.
        "launches": int(step["launches"]) if counts.definition == "device" else 0,
        "memcpy": int(step["memcpy"]),
        "memset": int(step["memset"]),
        "graph_launches": int(step.get("graph_launches", 0)),
        "steps": int(step.get("steps", 0)),
        "unrecorded": unrecorded,
        "whole_trace": {
            "kernels": counts.kernels,
            "launches": counts.launches,
            "memcpy": counts.memcpy,
            "memset": counts.memset,
            "unlinked_kernels": counts.unlinked_kernels,
            "kernel_time_us": counts.kernel_time_us,
        },
        "table": table,
    }


TIME_SOURCE = (
    "profiler: the ProfilerStep of median wall time (upper median) of the profiled steps, "
    "µs of profiled time (the profiler's own overhead included)"
)


def _time_breakdown_record(trace: Trace, device: torch.device) -> dict[str, Any]:
    """Where the mode's profiled steps went (analysis/time_breakdown): the median step's parts
    and every step's wall time."""
    definition = "device" if device.type == "cuda" else "cpu"
    found = time_breakdown(trace, definition)
    return TimeBreakdown(
        definition=definition,
        source=TIME_SOURCE,
        step=found.typical,
        step_walls_us=tuple(s.wall_us for s in found.steps),
    ).to_json()


def _bytes_work(prepared: PreparedMode, model: LoadedModel, sync: Callable[[], None]) -> BytesWork:
    """The operations the mode's bytes model sums, from where the mode says its bytes come from."""
    source = get_mode(prepared.name).bytes_source
    assert source is not None  # set when the mode was registered
    return source.capture(prepared, model.example_inputs, sync)


def _derive_unrecorded(work: BytesWork, eager: BytesWork | None) -> None:
    """prim::mkldnn_convolution computes the same convolution on the same shapes as eager's
    aten::convolution (a folded BatchNorm only adds a C_out-element bias): take its bytes from
    the matching eager call, in order."""
    if eager is None:
        return
    eager_convs = iter([c for c in eager.calls if c.op == "aten::convolution"])
    still = []
    for name in work.not_modeled:
        match = next(eager_convs, None) if name == "prim::mkldnn_convolution" else None
        if match is None:
            still.append(name)
            continue
        work.calls.append(
            OpCall(name, match.read, match.written, match.flops, "derived from eager convolution")
        )
    if len(still) < len(work.not_modeled):
        work.method += "; prim::mkldnn_convolution sized from the matching eager convolution"
    work.not_modeled = still


NOT_REQUESTED = "not requested (run with --measure-bytes on a CUDA machine with Nsight Compute)"


def _measured_bytes(
    name: str, model: LoadedModel, device: torch.device, dtype: str, options: RunOptions
) -> dict[str, Any]:
    """Nsight Compute's DRAM bytes for one step of this mode, or why there are none."""
    if not options.measure_bytes:
        return MeasuredBytes.unavailable(NOT_REQUESTED).to_dict()
    reason = ncu_unavailable_reason(device.type)
    if reason is None and not model.spec:
        reason = "the model was passed as an object; measuring needs a spec a child can load"
    if reason is not None:
        return MeasuredBytes.unavailable(reason).to_dict()
    assert model.spec is not None
    child = ChildModel(
        model.spec, str(device), dtype, model.batch_size, model.memory_format == "channels_last"
    )
    return measure_mode(child, name).to_dict()


def _ceilings(
    device: torch.device, device_record: dict[str, Any], dtype: str, options: RunOptions
) -> dict[str, Any]:
    """The machine's measured ceilings, or why there are none (the run goes on without them)."""
    start = interrupts.mark()
    try:
        return ceilings_for(
            device, device_record, DTYPES[dtype], remeasure=options.remeasure_ceilings
        )
    except Exception as exc:  # e.g. out of memory for the copy: no roofline, nothing else lost
        interrupts.reraise_if_interrupted(exc, start)
        return {"source": "unavailable", "reason": f"measuring failed: {_error_line(exc)}"}


def _model_record(model: LoadedModel, dtype: str) -> dict[str, Any]:
    return {
        "name": model.name,
        "spec": model.spec,
        "memory_format": model.memory_format,
        "description": model.description,
        "batch_size": model.batch_size,
        "dtype": dtype,
        "parameters": sum(p.numel() for p in model.module.parameters()),
        "inputs": [
            {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
            for t in model.example_inputs
        ],
    }


def _mark_failed(
    entry: dict[str, Any], name: str, exc: BaseException, device: torch.device
) -> None:
    entry["status"] = "failed"
    entry["error"] = _error_line(exc)
    entry["error_full"] = full_error(exc)
    entry["traceback"] = "".join(traceback.format_exception(exc, limit=8))
    mode_for(name).reset_after_failure()
    if device.type == "cuda":
        torch.cuda.empty_cache()


@dataclass
class _Reference:
    """Eager's output on the example inputs (tensors cloned), or why there is none."""

    output: FlatOutput | None
    error: str | None = None


def _eager_reference(model: LoadedModel, sync: Callable[[], None]) -> _Reference:
    start = interrupts.mark()
    try:
        flat = flatten_output(model.module(*model.example_inputs))
        sync()
    except (Exception, SystemExit) as exc:  # eager's own failure is recorded by its mode
        interrupts.reraise_if_interrupted(exc, start)
        return _Reference(None, _error_line(exc))
    cloned = tuple(t.detach().clone() for t in flat.tensors)
    return _Reference(FlatOutput(cloned, flat.container, flat.dropped, flat.plain))


def _output_check(
    prepared: PreparedMode, inputs: tuple[torch.Tensor, ...], reference: _Reference, sync
) -> dict[str, Any]:
    """One call of the built mode on the example inputs, its tensors compared with eager's."""
    if reference.output is None:
        return {
            "max_abs_err": None,
            "max_rel_err": None,
            "atol": None,
            "rtol": None,
            "within_tolerance": None,
            "compared_tensors": 0,
            "note": f"not checked: eager raised {reference.error}",
        }
    actual = flatten_output(prepared.fn(*inputs))
    sync()
    return compare_outputs(actual.tensors, reference.output.tensors).to_dict()


def _time_modes(
    stage: TimingStage,
    inputs: tuple[torch.Tensor, ...],
    device: torch.device,
    options: RunOptions,
    progress: Progress,
) -> None:
    """Time the stage's prepared modes together; one that raises is marked failed (and dropped
    from `prepared_modes`) and the others are timed again without it."""
    start = interrupts.mark()
    while stage.prepared_modes:
        fns: dict[str, Callable[[], Any]] = {
            name: partial(p.fn, *inputs) for name, p in stage.prepared_modes.items()
        }

        def on_round(round_no: int, results, n_modes: int = len(fns)) -> None:
            n = min(len(r.samples_ms) for r in results.values())
            if round_no % 10 == 1:
                progress(f"timing {n_modes} modes interleaved: round {round_no}, {n} samples each")

        try:
            with watch() as load:
                timings = measure_latency(fns, stage.sync, options.timing, on_round=on_round)
        except TimingFailed as failure:
            interrupts.reraise_if_interrupted(failure.error, start)
            stage.mark_failed(failure.mode, failure.error, device)
            continue
        stage.store_latency(timings, load)
        return


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _quiet(_msg: str) -> None:
    return None


@dataclass(frozen=True)
class RunSetup:
    """What one run profiles, how, and where its traces go; `now` and `clock` are the run's
    timestamp and phase clock (tests replace them)."""

    model: LoadedModel
    device: torch.device
    dtype: str
    run_dir: Path
    options: RunOptions = field(default_factory=RunOptions)
    progress: Progress = _quiet
    now: Callable[[], datetime] = _utc_now
    clock: Callable[[], float] = time.perf_counter


@dataclass
class TimingStage:
    """Where a run stops for its latency timing: the modes built, profiled and warm, and the
    record being written (`entries`: each mode's entry in it)."""

    record: dict[str, Any]
    entries: dict[str, dict[str, Any]]
    prepared_modes: dict[str, PreparedMode]
    phases: PhaseClock
    sync: Callable[[], None]

    def mark_failed(self, mode: str, exc: BaseException, device: torch.device) -> None:
        """`mode` raised while being timed: recorded as failed, and not timed again."""
        _mark_failed(self.entries[mode], mode, exc, device)
        del self.prepared_modes[mode]

    def store_latency(self, timings: dict[str, Any], load: dict[str, Any]) -> None:
        """Each mode's `latency_ms` and paired `speedup_vs_eager`, and the run's
        `timing_noise`."""
        for name, res in timings.items():
            stats: dict[str, Any] = dict(summarize(res.samples_ms).to_dict())
            stats.update(
                calls_per_block=res.calls_per_block,
                threads=torch.get_num_threads(),
                samples=res.samples_ms,
            )
            self.entries[name]["latency_ms"] = stats
        samples = {name: res.samples_ms for name, res in timings.items()}
        speedups, self.record["timing_noise"] = paired_speedups(samples, load)
        for name, entry in speedups.items():
            self.entries[name]["speedup_vs_eager"] = entry


def collect_run(setup: RunSetup) -> dict[str, Any]:
    """Run all requested modes of the setup's model and return the run record (traces land in
    its run_dir)."""
    stages = collect_stages(setup)
    stage = next(stages)
    with stage.phases.phase("timing"), torch.no_grad():
        _time_modes(stage, setup.model.example_inputs, setup.device, setup.options, setup.progress)
    return finish_stages(stages)


def finish_stages(stages: Generator[TimingStage, None, dict[str, Any]]) -> dict[str, Any]:
    """Resume a run after its timing: bytes, fusion maps, verdicts; its record."""
    try:
        next(stages)
    except StopIteration as done:
        return done.value
    raise RuntimeError("a run stopped twice for timing")


def collect_stages(setup: RunSetup) -> Generator[TimingStage, None, dict[str, Any]]:
    """collect_run in two halves: yields once at the timing stage, then returns the record.

    The record is written here and never read back: each mode's entry is kept in `entries`."""
    model, device, dtype, run_dir = setup.model, setup.device, setup.dtype, setup.run_dir
    options, progress = setup.options, setup.progress
    sync = make_sync(device)
    phases = PhaseClock(setup.clock)
    device_record = device_info(device)
    entries: dict[str, dict[str, Any]] = {}
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "tool": {"name": "profreport", "version": __version__},
        "created_utc": setup.now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        "model": _model_record(model, dtype),
        "device": device_record,
        "env": collect_env(device),
        "settings": {
            "profile_schedule": asdict(options.profile),
            "timing": asdict(options.timing),
            "bootstrap_resamples": options.bootstrap_resamples,
        },
        "kernel_definition": {
            "name": "device" if device.type == "cuda" else "cpu",
            "text": kernel_analysis.DEVICE_DEFINITION_TEXT
            if device.type == "cuda"
            else kernel_analysis.CPU_DEFINITION_TEXT,
            "bookkeeping_ops": sorted(kernel_analysis.BOOKKEEPING_OPS),
        },
        "modes": entries,
    }
    with phases.phase("ceilings"):
        progress("measuring memory bandwidth and matmul rate (cached per machine)")
        ceilings = _ceilings(device, device_record, dtype, options)
    record["ceilings"] = ceilings
    prepared_modes: dict[str, PreparedMode] = {}
    bytes_work: dict[str, BytesWork] = {}
    with torch.no_grad():
        reference = _eager_reference(model, sync) if options.modes != ("eager",) else None
        for name in options.modes:
            entry: dict[str, Any] = {
                "status": "ok",
                "error": None,
                "compile_s": None,
                "output_check": None,
            }
            entries[name] = entry
            unavailable = mode_for(name).unavailable_reason(device.type)
            if unavailable is not None:  # e.g. a mode that needs a GPU, on a CPU-only machine
                entry.update(status="skipped", error=unavailable)
                continue
            start = interrupts.mark()
            try:
                progress(f"{name}: building and warming up")
                with phases.phase("build"):
                    prepared = prepare_mode(name, model.module, model.example_inputs, sync)
                entry["compile_s"] = prepared.compile_s
                entry["compiler"] = prepared.compiler
                if name != "eager" and reference is not None:
                    progress(f"{name}: checking its output against eager's")
                    entry["output_check"] = _output_check(
                        prepared, model.example_inputs, reference, sync
                    )
                progress(f"{name}: profiling {options.profile.active} steps")
                with phases.phase("profile"):
                    trace_path = profile_mode(
                        prepared.fn,
                        model.example_inputs,
                        device,
                        run_dir / "tensorboard" / name,
                        name,
                        sync,
                        options.profile,
                    )
                entry["trace"] = str(trace_path.relative_to(run_dir))
                with phases.phase("kernels"):
                    trace = load_trace(trace_path)
                    entry["kernels"] = _kernels_record(trace, prepared, device)
                with phases.phase("time_breakdown"):
                    entry["time_breakdown"] = _time_breakdown_record(trace, device)
                    del trace
                with phases.phase("peak_memory"):
                    entry["peak_memory"] = measure_peak(
                        prepared.fn, model.example_inputs, device, sync
                    )
                progress(f"{name}: modeling memory traffic")
                with phases.phase("bytes"):
                    bytes_work[name] = _bytes_work(prepared, model, sync)
                prepared_modes[name] = prepared
            except (Exception, SystemExit) as exc:  # one failing mode must not stop the others
                interrupts.reraise_if_interrupted(exc, start)  # an interrupt is no failure
                _mark_failed(entry, name, exc, device)

    yield TimingStage(record, entries, prepared_modes, phases, sync)  # the caller times the modes

    if not settled(ceilings):  # a loaded machine measures ceilings too low: again
        with phases.phase("ceilings"):
            progress("measuring memory bandwidth and matmul rate again (the machine was busy)")
            record["ceilings"] = measured_again(device, DTYPES[dtype], ceilings)

    for name, work in bytes_work.items():
        if name not in prepared_modes:  # it failed while being timed
            continue
        with phases.phase("bytes"):
            _derive_unrecorded(work, bytes_work.get("eager"))
            est = estimate(work.calls, work.method, work.not_modeled)
        traffic = est.to_dict()
        if options.measure_bytes:
            progress(f"{name}: measuring DRAM bytes with Nsight Compute")
        traffic["measured"] = _measured_bytes(name, model, device, dtype, options)
        entries[name]["bytes"] = traffic
    with phases.phase("fusion_map"):
        # run.json keeps a copy of today's findings for other tools; readers derive their own.
        record = with_findings(record)
    record["phases_s"] = {k: round(v, 3) for k, v in phases.seconds.items()}
    return record
