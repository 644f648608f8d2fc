"""Collecting a run: model -> modes -> capture -> the run record's evidence (a typed `Run`).

`RunCollector.prepare` builds, profiles, counts and sizes every requested mode; `time_stages`
(the timing step) times the prepared modes of one run, or of both sides of `profreport ab`, in
shared rounds; `RunCollector.finish` returns the evidence and `derive_findings` adds today's
findings (analysis/derive). The only files written here are the Kineto traces and the evidence
so far, checkpointed in the run's folder after each mode; runner.profile_runs orders the steps.

Over 400 lines on purpose: it is the one place that orders the stages (build, profile, count,
bytes, interleaved timing, output checks, failure handling per mode); each stage's work is in
capture/, modes/ and analysis/, and what is left here is the order and the record they fill.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from profreport import interrupts
from profreport.analysis import derive
from profreport.analysis import kernels as kernel_analysis
from profreport.analysis.bytes_model import estimate
from profreport.analysis.latency import latency_of
from profreport.analysis.machine_reference import summarize_reference
from profreport.analysis.output_check import compare_outputs
from profreport.analysis.paired import MIN_ROUNDS, wants_more_rounds
from profreport.analysis.speedups import paired_speedups
from profreport.analysis.time_breakdown import step_walls_us
from profreport.analysis.trace_compare import kernel_entry
from profreport.capture.ceilings import ceilings_for, measured_again, settled
from profreport.capture.cuda_context import lost_after, lost_context
from profreport.capture.ncu import ChildModel, measure_mode, ncu_unavailable_reason
from profreport.capture.ncu_results import unavailable_bytes
from profreport.capture.noise import watch
from profreport.capture.peak_memory import measure_peak
from profreport.capture.profiling import ProfilingFailed, light_schedule, profile_mode
from profreport.capture.reference import METHOD as REFERENCE_METHOD
from profreport.capture.reference import REFERENCE_SHARE, reference_workload
from profreport.capture.timing import (
    REFERENCE,
    Reference,
    TimingFailed,
    TimingResult,
    device_timing,
    measure_latency,
    series_key,
    stage_and_mode,
)
from profreport.env import DTYPES, collect_env, device_info, make_sync
from profreport.exits import disk_error
from profreport.files import TENSORBOARD, RunFolder
from profreport.light_pass import light_pass
from profreport.models import LoadedModel, decode_loaded
from profreport.modes import (
    BytesWork,
    ModeError,
    PreparedMode,
    default_modes,
    mode_analyses,
    mode_for,
    prepare_mode,
)
from profreport.modes.compile import reset_compiler_caches, stop_compile_workers
from profreport.modes.outputs import FlatOutput, flatten_output
from profreport.record import SCHEMA
from profreport.record.model import (
    AbSide,
    Ceilings,
    DecodeInfo,
    Device,
    FailedMode,
    InputSpec,
    KernelCounts,
    KernelDefinition,
    KernelRow,
    MachineLoad,
    MachineReference,
    MeasuredBytes,
    ModeEntry,
    ModelInfo,
    ModeResult,
    OkMode,
    OutputCheck,
    ProcessBlocks,
    ProfileSchedule,
    Run,
    Settings,
    SkippedMode,
    TensorIO,
    TimingNoise,
    TimingSettings,
    Tool,
    WholeTrace,
)
from profreport.record.section import schema_of
from profreport.run_estimate import duration_notice
from profreport.script_errors import interpreter_failure_line
from profreport.text import Progress, error_line, full_error, one_line
from profreport.traceio import Trace, load_trace
from profreport.version import __version__

if TYPE_CHECKING:
    from profreport.capture.workers import TimingWorkers, WorkerRequest


@dataclass(frozen=True)
class RunOptions:
    modes: tuple[str, ...] = field(default_factory=default_modes)
    profile: ProfileSchedule = field(default_factory=ProfileSchedule)
    timing: TimingSettings = field(default_factory=TimingSettings)
    bootstrap_resamples: int = 2000
    measure_bytes: bool = False  # re-run each mode under Nsight Compute (CUDA + ncu only)
    remeasure_ceilings: bool = False  # measure bandwidth and matmul rate even when cached
    # False: no latency timing at all (each ok mode's `not_timed` says so); for checks that need
    # only counts and bytes, such as a kernel budget without a min_speedup
    time_latency: bool = True
    # fresh processes the latency is timed in, one after another (capture/workers.py); 0: this one
    workers: int = 0


NOT_TIMED = "latency not timed: the run asked for counts and bytes only (time_latency=False)"


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


def mode_error_line(exc: BaseException) -> str:
    """`Type: message`, one line without tensor reprs. The TorchScript interpreter wraps the
    error it caught under a generic first line; the error and the operation it names are the
    useful part (script_errors.interpreter_failure_line). A ModeError's message is already the
    line to show."""
    if isinstance(exc, ModeError):
        return one_line(str(exc))
    return interpreter_failure_line(str(exc)) or error_line(exc)


def _kernel_counts(trace: Trace, prepared: PreparedMode, device: torch.device) -> KernelCounts:
    """The mode's kernels per profiled step and its profiler table, from its trace."""
    definition = "device" if device.type == "cuda" else "cpu"
    counts = kernel_analysis.count_kernels(trace, definition=definition)
    step = kernel_analysis.per_step(counts)

    def count(key: str) -> int:
        value = getattr(step, key)
        if value is None:  # launch calls, no device activity: unknown, never a zero
            raise ValueError(
                f"{Path(trace.path).name}: the trace recorded no device activity ({key})"
            )
        return int(value)

    n_steps = max(count("steps"), 1)
    unrecorded: list[str] = []
    if definition == "cpu":
        # Compute nodes the TorchScript interpreter runs outside the dispatcher have no profiler
        # record; the optimized graph says they ran once per forward.
        unrecorded = list(prepared.compiler.unrecorded_ops or ())
    table = [kernel_entry(row, n_steps) for row in counts.table]
    table += [
        KernelRow(
            name=name,
            kind="cpu",
            calls=per_forward * n_steps,
            calls_per_step=float(per_forward),
            source="optimized graph (no profiler record)",
        ).adding(time_us_per_step=None)
        for name, per_forward in Counter(unrecorded).items()
    ]
    return KernelCounts(
        definition=counts.definition,
        per_step=count("kernels") + len(unrecorded),
        # CPU work has no launch API: only the device definition counts launch calls.
        launches=count("launches") if counts.definition == "device" else 0,
        memcpy=count("memcpy"),
        memset=count("memset"),
        graph_launches=count("graph_launches"),
        steps=count("steps"),
        unrecorded=tuple(unrecorded),
        # the trace's own counts, by the same names
        whole_trace=WholeTrace(**{s.name: getattr(counts, s.name) for s in schema_of(WholeTrace)}),
        table=tuple(table),
    )


def _derive_unrecorded(work: BytesWork, eager: BytesWork | None) -> BytesWork:
    """`work` with its prim::mkldnn_convolution calls sized: they compute the same convolution
    on the same shapes as eager's aten::convolution (a folded BatchNorm only adds a C_out-element
    bias), so each takes the bytes of the matching eager call, in order."""
    if eager is None:
        return work
    eager_convs = iter([c for c in eager.calls if c.op == "aten::convolution"])
    calls, still = list(work.calls), []
    for name in work.not_modeled:
        match = next(eager_convs, None) if name == "prim::mkldnn_convolution" else None
        if match is None:
            still.append(name)
            continue
        calls.append(
            TensorIO(name, match.read, match.written, match.flops, "derived from eager convolution")
        )
    method = work.method
    if len(still) < len(work.not_modeled):
        method += "; prim::mkldnn_convolution sized from the matching eager convolution"
    return replace(work, calls=calls, method=method, not_modeled=still)


NOT_REQUESTED = "not requested (run with --measure-bytes on a CUDA machine with Nsight Compute)"
# what the evidence saved while the run goes on says of what comes later (capture order)
NOT_TIMED_YET = "the run ended before the timing (the evidence saved as each mode finished)"
UNMEASURED = "the run ended before the bytes were measured (the evidence saved so far)"


def _measured_bytes(
    name: str, model: LoadedModel, device: torch.device, dtype: str, options: RunOptions
) -> MeasuredBytes:
    """Nsight Compute's DRAM bytes for one step of this mode, or why there are none."""
    if not options.measure_bytes:
        return unavailable_bytes(NOT_REQUESTED)
    reason, spec = ncu_unavailable_reason(device.type), model.spec
    if reason is None and not spec:
        reason = "the model was passed as an object; measuring needs a spec a child can load"
    if reason is None and model.workload == "decode":  # the child would rebuild the prefill
        reason = "Nsight Compute's child process does not rebuild a decode step yet"
    if reason is not None or not spec:
        return unavailable_bytes(reason or "")
    child = ChildModel(
        spec, str(device), dtype, model.batch_size, model.memory_format == "channels_last"
    )
    return measure_mode(child, name)


def _ceilings(
    device: torch.device, device_record: Device, dtype: str, options: RunOptions
) -> Ceilings:
    """The machine's measured ceilings, or why there are none (the run goes on without them)."""
    start = interrupts.mark()
    try:
        return ceilings_for(
            device, device_record, DTYPES[dtype], remeasure=options.remeasure_ceilings
        )
    except Exception as exc:  # e.g. out of memory for the copy: no roofline, nothing else lost
        interrupts.reraise_if_interrupted(exc, start)
        return Ceilings(source="unavailable", reason=f"measuring failed: {mode_error_line(exc)}")


def _model_info(model: LoadedModel, dtype: str) -> ModelInfo:
    info = ModelInfo(
        name=model.name,
        spec=model.spec,
        memory_format=model.memory_format,
        description=model.description,
        batch_size=model.batch_size,
        dtype=dtype,
        parameters=sum(p.numel() for p in model.module.parameters()),
        inputs=tuple(
            InputSpec(shape=tuple(t.shape), dtype=str(t.dtype).removeprefix("torch."))
            for t in model.example_inputs
        ),
    )
    return info if model.workload == "prefill" else info.adding(workload="decode")


def _decode_info(model: LoadedModel, sync: Callable[[], None]) -> DecodeInfo:
    """The record of a decode run's step: what building it found, and eager's modeled bytes of
    one step split by the tensor each operation touched (decode.traffic_split; ModelError: the
    step cannot be recorded)."""
    from profreport.decode import DecodeError, DecodeStep, traffic_split

    step = model.module
    if model.decode is None or not isinstance(step, DecodeStep):
        raise RuntimeError("the decode step is built before it is captured (decode_loaded)")
    try:
        return model.decode.info(traffic_split(step, model.example_inputs, sync))
    except DecodeError as exc:
        raise model.error(str(exc)) from None


def _mark_failed(
    entry: ModeEntry, name: str, exc: BaseException, device: torch.device
) -> FailedMode:
    """`entry` recorded as failed with `exc`, once the mode's global state is reset and the
    device memory it cached freed (its modeled bytes go: only a mode that ran records them).
    A clean-up step that raises (after a fatal CUDA error every CUDA call does) is recorded."""
    steps: list[Callable[[], None]] = [mode_for(name).reset_after_failure]
    if device.type == "cuda":
        steps.append(torch.cuda.empty_cache)
    errors = []
    for step in steps:
        try:
            step()
        except Exception as cleanup:  # recorded: a failed clean-up must not end the run
            errors.append(mode_error_line(cleanup))
    error_full = full_error(exc)
    if errors:
        error_full += f"\n\nclean-up after the failure raised too: {'; '.join(errors)}"
    return entry.without("bytes").recast(
        FailedMode,
        error=mode_error_line(exc),
        error_full=error_full,
        traceback="".join(traceback.format_exception(exc, limit=8)),
    )


@dataclass
class _Reference:
    """Eager's output on the example inputs (tensors cloned), or why there is none, and how
    long that first call took (seconds, measured)."""

    output: FlatOutput | None
    error: str | None = None
    call_s: float | None = None


def _eager_reference(model: LoadedModel, sync: Callable[[], None]) -> _Reference:
    start = interrupts.mark()
    started = time.perf_counter()
    try:
        flat = flatten_output(model.module(*model.example_inputs))
        sync()
    except (Exception, SystemExit) as exc:  # eager's own failure is recorded by its mode
        interrupts.reraise_if_interrupted(exc, start)
        return _Reference(None, mode_error_line(exc))
    call_s = time.perf_counter() - started
    cloned = tuple(t.detach().clone() for t in flat.tensors)
    return _Reference(FlatOutput(cloned, flat.container, flat.dropped, flat.plain), None, call_s)


def _output_check(
    prepared: PreparedMode, model: LoadedModel, reference: _Reference, sync: Callable[[], None]
) -> OutputCheck:
    """One call of the built mode on the example inputs, its tensors compared with eager's;
    a decode step's greedy tokens too, against eager's."""
    if reference.output is None:
        return OutputCheck(note=f"not checked: eager raised {reference.error}")
    actual = flatten_output(prepared.fn(*model.example_inputs))
    sync()
    check = compare_outputs(actual.tensors, reference.output.tensors)
    if model.decode is None:
        return check
    from profreport.decode import greedy_check

    return check.adding(**greedy_check(prepared.fn, model.example_inputs, model.decode))


def _against_eager(names: list[str]) -> list[tuple[str, str]]:
    """Every mode is judged against eager: more rounds while a ratio lacks only rounds."""
    return [("eager", name) for name in names if name != "eager"]


@dataclass(frozen=True)
class TimingPlan:
    """How the stages share the timing rounds: which series are judged against each other (more
    rounds while a ratio lacks only rounds), the order of a round (None: every series rotated
    one place a round), what the progress calls the series, and what each stage's record says
    of that order (`order_name`: `profreport ab`'s; None: a run timed on its own)."""

    pairs: Callable[[list[str]], list[tuple[str, str]]] = _against_eager
    order: Callable[[int, list[str]], list[str]] | None = None
    series: str = "modes"
    order_name: str | None = None


ON_ITS_OWN = TimingPlan()  # one run: its modes, each judged against eager


# one timing process's blocks: stage (a run's "", or an ab side) -> mode -> its blocks there
ProcessSeries = Mapping[str, Mapping[str, ProcessBlocks]]


@dataclass(frozen=True)
class Timed:
    """What the timing step measured, in each timing process (this one, or the workers of
    capture/workers.py): each stage's blocks by mode, and the machine's load over that process's
    timing; the machine reference timed in the same rounds, across the processes (None: nothing
    was timed)."""

    processes: tuple[ProcessSeries, ...] = ()
    loads: tuple[MachineLoad | None, ...] = ()
    reference: MachineReference | None = None

    def stage(self, name: str) -> list[Mapping[str, ProcessBlocks]]:
        """One stage's blocks by mode, in each timing process."""
        return [p.get(name, {}) for p in self.processes]

    @classmethod
    def across(cls, processes: Sequence[Timed], resamples: int) -> Timed:
        """Timings of one process each, as one: every process's blocks and load, and the machine
        reference's parts across them (its first error where a process had none)."""
        refs = [t.reference for t in processes if t.reference is not None]
        if not refs:
            return cls()
        first = refs[0]
        reference = MachineReference(method=first.method, parts={}).adding(error=first.error)
        if all(r.parts for r in refs):
            reference = summarize_reference(
                {part: [r.parts[part].samples_ms for r in refs] for part in first.parts},
                {part: p.work for part, p in first.parts.items()},
                method=first.method,
                share=first.share or 0.0,
                spent_s=sum(r.spent_s or 0.0 for r in refs),
                timing_s=sum(r.timing_s or 0.0 for r in refs),
                resamples=resamples,
            )
        return cls(
            tuple(p for t in processes for p in t.processes),
            tuple(load for t in processes for load in t.loads),
            reference,
        )


def _own_failure(exc: BaseException, start: int) -> None:
    """Raise what `exc` is when it is no failure of a mode: an interrupt (in disguise or not),
    or a disk that refused a file (bad input)."""
    interrupts.reraise_if_interrupted(exc, start)
    refused = disk_error(exc)
    if refused is not None:
        raise refused


def time_stages(stages: Mapping[str, TimingStage], plan: TimingPlan, progress: Progress) -> Timed:
    """The timing step: the prepared modes of every stage (a run's, or each side's of
    `profreport ab`) timed in shared rounds, in `options.workers` fresh worker processes one
    after another (capture/workers.py; a model passed as an object, which no worker can build
    again, or `workers=0`: in this process, `time_here`); returns each stage's blocks in each
    process (runner.profile_runs stores them). A mode that fails is marked failed on its stage
    (`TimingStage.mark_failed`); a stage that cannot be timed says why
    (`TimingStage.not_timed`)."""
    setup = next(iter(stages.values())).setup
    if not setup.options.time_latency:
        for stage in stages.values():
            stage.not_timed(NOT_TIMED)
        return Timed()
    if not any(stage.prepared_modes for stage in stages.values()):
        return Timed()
    if setup.options.workers and all(s.setup.model.spec for s in stages.values()):
        return _time_in_workers(stages, plan, progress)
    return time_here(stages, plan, progress)


def _time_in_workers(
    stages: Mapping[str, TimingStage], plan: TimingPlan, progress: Progress
) -> Timed:
    """The stages' prepared modes timed in `options.workers` fresh processes (capture/workers.py:
    built side by side where memory allows, timed one after another), each with its share of the
    budget and the TorchScript modules the capture built, saved for them to load. A mode that
    fails in a worker is that mode's failure (one line), and later workers leave it out; a worker
    that crashes is WorkerFailed (a bug: the evidence is saved already)."""
    from profreport.capture import workers

    setup = next(iter(stages.values())).setup
    options, device = setup.options, setup.device
    with tempfile.TemporaryDirectory(prefix="profreport-torchscript-") as folder:
        asked = tuple(
            workers.WorkerModel(
                stage=name,
                spec=s.setup.model.spec or "",
                batch_size=s.setup.model.batch_size,
                channels_last=s.setup.model.memory_format == "channels_last",
                workload=s.setup.model.workload,
                modes=tuple(s.prepared_modes),
                saved=workers.saved_torchscript(
                    {m: p.fn for m, p in s.prepared_modes.items()}, Path(folder), name
                ),
            )
            for name, s in stages.items()
            if s.prepared_modes
        )
        request = workers.WorkerRequest(
            models=asked,
            device=str(device),
            dtype=setup.dtype,
            threads=torch.get_num_threads(),
            timing=workers.worker_share(
                device_timing(options.timing, device.type), options.workers, MIN_ROUNDS
            ),
            resamples=options.bootstrap_resamples,
            order=plan.order_name,
        )
        at_once = workers.built_at_once(
            options.workers,
            device.type,
            max(_weights_bytes(s.setup.model.module) for s in stages.values()),
            max(len(m.modes) for m in request.models),
        )
        if at_once > 1:
            progress(f"building the modes in {at_once} worker processes side by side")
        done = _run_workers(stages, request, (options.workers, at_once), plan.series, progress)
    # a mode that failed in a later worker keeps none of its blocks from the earlier ones
    kept = [
        replace(
            t,
            processes=tuple(
                {
                    side: {m: b for m, b in modes.items() if m in stages[side].prepared_modes}
                    for side, modes in p.items()
                }
                for p in t.processes
            ),
        )
        for t in done
    ]
    return Timed.across(kept, options.bootstrap_resamples)


def _run_workers(
    stages: Mapping[str, TimingStage],
    request: WorkerRequest,
    counts: tuple[int, int],
    series_name: str,
    progress: Progress,
) -> list[Timed]:
    """Each worker's timing (see _time_in_workers); `counts`: the workers, and how many of
    them build at once (capture/workers.built_at_once)."""
    from profreport.capture import workers

    k, at_once = counts
    done: list[Timed] = []
    left_out: set[str] = set()
    ahead = next(iter(stages.values())).setup.workers
    with workers.started_workers(request, k, at_once, ahead) as worker_result:
        for i in range(k):
            n = sum(len(m.modes) for m in request.models) - len(left_out)
            if not n:
                break
            progress(
                f"timing {n} {series_name} interleaved in worker {i + 1} of {k} (a fresh process)"
            )
            result = worker_result(i, left_out)
            for key, error in result.failed.items():
                if key in left_out:  # it failed to build here too: failed already, in another
                    continue
                side, mode = stage_and_mode(key)
                line = f"in timing worker {i + 1} of {k}, {error}"
                stages[side].mark_failed(mode, ModeError(line), stages[side].setup.device)
                left_out.add(key)
            if result.not_timed is not None:  # a lost CUDA context: no more workers
                if not done:
                    for stage in stages.values():
                        stage.not_timed(result.not_timed)
                break
            series: dict[str, dict[str, ProcessBlocks]] = {}
            for key, blocks in result.blocks.items():
                side, mode = stage_and_mode(key)
                series.setdefault(side, {})[mode] = blocks
            done.append(Timed((series,), (result.load,), result.reference))
    return done


def _weights_bytes(module: Any) -> int:
    """The bytes of a module's parameters and buffers (0 for a callable that has none)."""
    if not isinstance(module, torch.nn.Module):
        return 0
    tensors = [*module.parameters(), *module.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


def _blocks(result: TimingResult) -> ProcessBlocks:
    return ProcessBlocks(
        samples=tuple(result.samples_ms),
        warmup_samples=tuple(result.warmup_ms) or None,
        calls_per_block=result.calls_per_block,
    )


def time_here(stages: Mapping[str, TimingStage], plan: TimingPlan, progress: Progress) -> Timed:
    """The prepared modes of every stage (a run's, or each side's of `profreport ab`, its
    series then named `side/mode`) timed in shared rounds in this process, within the options'
    budget (capture/timing.measure_latency: the one timer, which each worker runs too). A mode
    that raises is marked failed on its stage and the others are timed again without it, in
    what is left of the `max_time_s` budget."""
    setup = next(iter(stages.values())).setup
    options, device = setup.options, setup.device
    start = interrupts.mark()
    deadline = time.perf_counter() + options.timing.max_time_s
    # one machine reference for all stages: they are timed in the same rounds
    reference = ReferenceRun(device, options.bootstrap_resamples)
    sync = next(iter(stages.values())).sync
    while True:
        lost = next((s.context_lost for s in stages.values() if s.context_lost), None)
        if lost is not None:  # one process, one CUDA context: no stage can be timed
            for stage in stages.values():
                stage.not_timed(lost)
            return Timed()
        fns: dict[str, Callable[[], Any]] = {
            series_key(side, mode): partial(p.fn, *stage.setup.model.example_inputs)
            for side, stage in stages.items()
            for mode, p in stage.prepared_modes.items()
        }
        if not fns:
            return Timed()
        budget = replace(
            device_timing(options.timing, device.type),
            max_time_s=max(0.0, deadline - time.perf_counter()),
        )

        def each_round(round_no: int, results: dict[str, TimingResult], n: int = len(fns)) -> None:
            if round_no % 10 == 1:
                fewest = min(len(r.samples_ms) for r in results.values())
                progress(
                    f"timing {n} {plan.series} interleaved: round {round_no}, {fewest} samples each"
                )

        try:
            with watch() as watched, reference.timed() as timed:
                timings = measure_latency(
                    fns,
                    sync,
                    budget,
                    on_round=each_round,
                    order=plan.order,
                    wants_more=partial(wants_more_rounds, pairs=plan.pairs(list(fns))),
                    reference=timed,
                )
        except TimingFailed as failure:
            _own_failure(failure.error, start)
            if not reference.failed(failure):
                side, mode = stage_and_mode(failure.mode)
                stages[side].mark_failed(mode, failure.error, device)
            continue
        series: dict[str, dict[str, ProcessBlocks]] = {side: {} for side in stages}
        for key, result in timings.items():
            side, mode = stage_and_mode(key)
            series[side][mode] = _blocks(result)
        return Timed((series,), (watched.load,), reference.record())


class ReferenceRun:
    """The machine reference of one timing (capture/reference.py): its workload built once, timed
    with the modes (each try of the timing afresh), dropped for good if it raises (the modes are
    timed again without it), and its record."""

    def __init__(self, device: torch.device, resamples: int) -> None:
        self.resamples = resamples
        self.error: str | None = None
        self.current: Reference | None = None
        self.timing_s = 0.0
        self.work: dict[str, str] = {}
        self._parts: dict[str, Callable[[], Any]] = {}
        try:
            built, self.work = reference_workload(device)
            self._parts = built.parts
        except (Exception, SystemExit) as exc:  # out of memory on a full device, say
            self.error = f"not built: {error_line(exc)}"

    @contextmanager
    def timed(self) -> Iterator[Reference | None]:
        """A fresh Reference for one try of the timing (None once dropped); how long it took."""
        self.current = None if self.error else Reference(dict(self._parts), REFERENCE_SHARE)
        started = time.perf_counter()
        try:
            yield self.current
        finally:
            self.timing_s = time.perf_counter() - started

    def failed(self, failure: TimingFailed) -> bool:
        """True when it was the reference that raised: dropped, and the timing goes on."""
        if not failure.mode.startswith(REFERENCE):
            return False
        self.error = f"{failure.mode} raised: {error_line(failure.error)}"
        self._parts = {}
        return True

    def record(self) -> MachineReference:
        """The run's `machine_reference`: the parts' summaries, or why there are none."""
        if self.current is None:
            return MachineReference(method=REFERENCE_METHOD, parts={}).adding(error=self.error)
        return summarize_reference(
            {part: [samples] for part, samples in self.current.samples_ms.items()},  # one process
            self.work,
            method=REFERENCE_METHOD,
            share=self.current.share,
            spent_s=self.current.spent_s,
            timing_s=self.timing_s,
            resamples=self.resamples,
        )


def quiet(_msg: str) -> None:
    """A progress that shows nothing."""


@dataclass(frozen=True)
class RunSetup:
    """What one run profiles, how, and the folder its traces and the evidence so far go to
    (checkpointed after each mode and after the timing, so that a process that dies, by a
    segfault say, leaves the evidence of the modes that finished); `now` and `clock` are the
    run's timestamp (None: the time it starts, UTC) and phase clock (tests replace them)."""

    model: LoadedModel
    device: torch.device
    dtype: str
    folder: RunFolder
    options: RunOptions = field(default_factory=RunOptions)
    progress: Progress = quiet
    now: Callable[[], datetime] | None = None
    clock: Callable[[], float] = time.perf_counter
    # the timing workers started ahead of the run (capture/workers.workers_ahead); None: the
    # timing step starts its own, if any
    workers: TimingWorkers | None = None


@dataclass
class TimingStage:
    """The modes of a run that are built, profiled and warm, waiting to be timed: each mode's
    record entry so far (`modes`), and what timing calls (`prepared_modes` on the setup's
    model's inputs, `sync`)."""

    modes: dict[str, ModeResult]
    prepared_modes: dict[str, PreparedMode]
    sync: Callable[[], None]
    setup: RunSetup
    timing_noise: TimingNoise | None = None  # once timed
    machine_reference: MachineReference | None = None  # once timed
    # why the device can run nothing more (a fatal CUDA error poisoned the context), else None
    context_lost: str | None = None

    def mark_failed(self, mode: str, exc: BaseException, device: torch.device) -> None:
        """`mode` raised while being profiled or timed: recorded as failed, and not run
        again."""
        self.modes[mode] = _mark_failed(self.modes[mode], mode, exc, device)
        del self.prepared_modes[mode]
        self.context_lost = self.context_lost or lost_after(mode, device)

    def not_timed(self, reason: str) -> None:
        """Nothing can be timed (`reason`): the prepared modes keep their evidence, and say why
        they have no latency."""
        for name in self.prepared_modes:
            self.modes[name] = self.modes[name].adding(not_timed=reason)

    def store(self, processes: Sequence[Mapping[str, ProcessBlocks]], timed: Timed) -> None:
        """What the timing step measured (nothing when it timed nothing): each mode's
        `latency_ms` (its blocks in each timing process) and paired `speedup_vs_eager` (across
        the processes: analysis/speedups.py), the run's `timing_noise` and machine reference."""
        if timed.reference is None:
            return
        for name in dict.fromkeys(n for p in processes for n in p):
            stats = latency_of([p[name] for p in processes if name in p])
            stats = dataclasses.replace(stats, threads=torch.get_num_threads())
            self.modes[name] = self.modes[name].adding(latency_ms=stats)
        samples = [{n: b.samples for n, b in p.items()} for p in processes]
        speedups, self.timing_noise = paired_speedups(samples, timed.loads)
        for name, speedup in speedups.items():
            self.modes[name] = self.modes[name].adding(speedup_vs_eager=speedup)
        self.machine_reference = timed.reference


class RunCollector:
    """One run being collected, in two stages with the latency timing between them (so that
    `profreport ab` can time two runs together): `prepare()` builds, profiles and warms every
    mode and returns the TimingStage; `finish()` then measures bytes and returns the run
    record's evidence. The record is written here and never read back. A decode run's step is
    built here, from the loaded LM and its prompt (models.decode_loaded; ModelError: it cannot
    be), before anything is captured."""

    def __init__(self, setup: RunSetup) -> None:
        self.setup = replace(setup, model=decode_loaded(setup.model))
        self.phases = PhaseClock(setup.clock)
        self.sync = make_sync(setup.device)
        self._run: Run | None = None
        self._ceilings: Ceilings | None = None
        self._bytes_work: dict[str, BytesWork] = {}
        self._step_walls: dict[str, list[float]] = {}  # each mode's profiled steps, for sizing
        self.stage: TimingStage | None = None
        self._finished = False

    def prepare(self, fresh_compilers: bool = True) -> TimingStage:
        """Every requested mode built (one failing does not stop the others), profiled, its
        kernels counted, its peak memory and bytes captured; what timing needs next.
        `fresh_compilers`: clear the compilers' caches first (False: another run prepared in
        this process is timed with this one, and its compiled code must stay)."""
        if self.stage is not None:
            raise RuntimeError("a run is prepared once")
        if fresh_compilers:
            reset_compiler_caches()
        setup = self.setup
        model, device, dtype, options = setup.model, setup.device, setup.dtype, setup.options
        progress, sync, phases = setup.progress, self.sync, self.phases
        device_record = device_info(device)
        cuda = device.type == "cuda"
        started = setup.now() if setup.now is not None else datetime.now(timezone.utc)
        self._run = Run(
            schema=SCHEMA,
            tool=Tool(name="profreport", version=__version__),
            created_utc=started.strftime("%Y-%m-%dT%H:%M:%SZ"),
            model=_model_info(model, dtype),
            device=device_record,
            env=collect_env(device),
            settings=Settings(
                profile_schedule=options.profile,
                timing=device_timing(options.timing, device.type) if options.time_latency else None,
                bootstrap_resamples=options.bootstrap_resamples,
            ).adding(
                timing_processes=options.workers
                if options.time_latency and options.workers and model.spec
                else None
            ),
            kernel_definition=KernelDefinition(
                name="device" if cuda else "cpu",
                text=kernel_analysis.DEVICE_DEFINITION_TEXT
                if cuda
                else kernel_analysis.CPU_DEFINITION_TEXT,
                bookkeeping_ops=tuple(sorted(kernel_analysis.BOOKKEEPING_OPS)),
            ),
        )
        with phases.phase("ceilings"):
            progress("measuring memory bandwidth and matmul rate (cached per machine)")
            self._ceilings = _ceilings(device, device_record, dtype, options)
        if model.workload == "decode":  # its step's tensor I/O, split by what it touches
            # in no phase of `phases_s`, as when the split was made while loading the model
            with torch.no_grad():
                decode = _decode_info(model, sync)
            self._run = replace(self._run, model=self._run.model.adding(decode=decode))
        modes: dict[str, ModeResult] = {}
        prepared_modes: dict[str, PreparedMode] = {}
        context_lost: str | None = None  # a fatal CUDA error: later modes are skipped, not run
        with torch.no_grad():
            reference = _eager_reference(model, sync) if options.modes != ("eager",) else None
            if reference is not None and reference.call_s is not None:
                # a heavy run says how long it will take, from eager's first call
                notice = duration_notice(
                    reference.call_s,
                    len(options.modes),
                    options.profile,
                    device_timing(options.timing, device.type),
                )
                if notice is not None:
                    progress(notice)
            for name in options.modes:
                entry = ModeEntry(error=None, compile_s=None, output_check=None)
                unavailable = mode_for(name).unavailable_reason(device.type)
                if unavailable is None and context_lost is not None:
                    unavailable = f"not run: {context_lost}"
                if unavailable is not None:  # e.g. a mode that needs a GPU, on a CPU-only machine
                    modes[name] = entry.recast(SkippedMode, error=unavailable)
                    continue
                start = interrupts.mark()
                try:
                    modes[name], prepared_modes[name] = self._prepare_mode(name, entry, reference)
                except _ModeFailed as failed:  # one failing mode must not stop the others
                    _own_failure(failed.error, start)  # a stop or a full disk: no failure
                    modes[name] = _mark_failed(failed.entry, name, failed.error, device)
                    context_lost = lost_after(name, device)
                self._save_so_far(modes, NOT_TIMED_YET)
            # every mode is built: stop the compilers' background workers (a failed mode's
            # leftover compile jobs included), so that none of profreport's own processes
            # competes with the timing (the noise guard counts them apart: capture/noise.py)
            stop_compile_workers()
            self.stage = TimingStage(modes, prepared_modes, sync, setup, context_lost=context_lost)
            with phases.phase("time_breakdown"):
                self._light_pass(self.stage)
        return self.stage

    def _prepare_mode(
        self, name: str, entry: ModeEntry, reference: _Reference | None
    ) -> tuple[OkMode, PreparedMode]:
        """Build, check, profile and size one mode (its bytes modeled, and not yet measured);
        _ModeFailed (with the entry so far) when any step raises."""
        setup, phases, sync = self.setup, self.phases, self.sync
        model, device, progress = setup.model, setup.device, setup.progress
        try:
            progress(f"{name}: building and warming up")
            with phases.phase("build"):
                prepared = prepare_mode(name, model.module, model.example_inputs, sync)
            entry = entry.adding(compile_s=prepared.compile_s, compiler=prepared.compiler)
            if name != "eager" and reference is not None:
                progress(f"{name}: checking its output against eager's")
                entry = entry.adding(output_check=_output_check(prepared, model, reference, sync))
            progress(f"{name}: profiling {setup.options.profile.active} steps")
            with phases.phase("profile"):
                trace_path = profile_mode(
                    prepared.fn,
                    model.example_inputs,
                    device,
                    setup.folder.path / TENSORBOARD / name,
                    name,
                    sync,
                    setup.options.profile,
                )
            entry = entry.adding(trace=str(trace_path.relative_to(setup.folder.path)))
            with phases.phase("kernels"):
                trace = load_trace(trace_path)
                entry = entry.adding(kernels=_kernel_counts(trace, prepared, device))
                self._step_walls[name] = step_walls_us(trace)
                del trace
            with phases.phase("peak_memory"):
                peak = measure_peak(prepared.fn, model.example_inputs, device, sync)
                entry = entry.adding(peak_memory=peak)
            progress(f"{name}: modeling memory traffic")
            with phases.phase("bytes"):
                # the operations the bytes model sums, from where the mode says they come from
                source = mode_for(name).bytes_source
                if source is None:  # `modes.register` refuses a mode without one
                    raise ModeError(f"{name} has no bytes source")
                self._bytes_work[name] = source.capture(prepared, model.example_inputs, sync)
                # the mode's modeled bytes (analysis/bytes_model)
                work = _derive_unrecorded(self._bytes_work[name], self._bytes_work.get("eager"))
                modeled = estimate(work.calls, work.method, work.not_modeled, work.attribution)
        except (Exception, SystemExit) as exc:
            raise _ModeFailed(entry, exc) from exc
        why = UNMEASURED if setup.options.measure_bytes else NOT_REQUESTED
        unmeasured = replace(modeled, measured=unavailable_bytes(why))
        return entry.recast(OkMode, bytes=unmeasured), prepared

    def _light_pass(self, stage: TimingStage) -> None:
        """Every prepared mode's time breakdown from one light pass (light_pass.py); a mode that
        raises is marked failed and the others profiled again without it."""
        setup = self.setup
        inputs = setup.model.example_inputs
        modes, prepared = stage.modes, stage.prepared_modes
        while prepared and stage.context_lost is None:
            walls = [self._step_walls.get(name, ()) for name in prepared]
            schedule = light_schedule(walls, setup.options.profile.active)
            setup.progress(
                f"profiling {len(prepared)} modes interleaved for the time breakdown "
                f"({schedule.rounds} rounds)"
            )
            fns = {name: partial(p.fn, *inputs) for name, p in prepared.items()}
            start = interrupts.mark()
            try:
                found = light_pass(fns, setup.device, self.sync, setup.folder.path, schedule)
            except ProfilingFailed as failure:
                _own_failure(failure.error, start)
                stage.mark_failed(failure.mode, failure.error, setup.device)
                continue
            for name, breakdown in found.items():
                modes[name] = modes[name].adding(time_breakdown=breakdown)
            break

    def _save_so_far(self, modes: Mapping[str, ModeResult], not_timed: str | None) -> None:
        """Checkpoint the evidence so far in the run's folder: the modes done (measured bytes
        come last) and, before the timing, `not_timed` for each that ran."""
        run = self._run
        if run is None:
            return
        so_far = {
            name: mode.adding(not_timed=not_timed)
            if isinstance(mode, OkMode) and not_timed is not None
            else mode
            for name, mode in modes.items()
        }
        run = replace(run, modes=so_far).adding(ceilings=self._ceilings, phases_s=self._phases_s())
        self.setup.folder.checkpoint(run)

    def _phases_s(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in self.phases.seconds.items()}

    def finish(self, ab: AbSide | None = None) -> Run:
        """After timing: ceilings measured again if the machine was busy, each mode's modeled
        (and measured) bytes; the run record's evidence (its findings are derived from it:
        `derive_findings`). `ab`: this run is that side of `profreport ab`, timed with the
        other."""
        stage, run, ceilings = self.stage, self._run, self._ceilings
        if stage is None or run is None or ceilings is None or self._finished:
            raise RuntimeError("finish() comes once, after prepare() and the timing")
        self._finished = True
        self._save_so_far(stage.modes, None)
        setup, phases, progress = self.setup, self.phases, self.setup.progress
        device, dtype, options = setup.device, setup.dtype, setup.options
        # a loaded machine measures ceilings too low: again, unless the device can run nothing
        if stage.context_lost is None and not settled(ceilings):
            with phases.phase("ceilings"):
                progress("measuring memory bandwidth and matmul rate again (the machine was busy)")
                ceilings = measured_again(device, DTYPES[dtype], ceilings)
        modes = dict(stage.modes)
        for name, mode in stage.modes.items():
            if not isinstance(mode, OkMode):  # it did not run, or failed while being timed
                continue
            if options.measure_bytes:
                progress(f"{name}: measuring DRAM bytes with Nsight Compute")
            measured = _measured_bytes(name, setup.model, device, dtype, options)
            modes[name] = mode.adding(bytes=dataclasses.replace(mode.bytes, measured=measured))
        # a run built here writes its `omitted` fields (timing_noise, ...) only when they are set
        return dataclasses.replace(
            run,
            modes=modes,
            ceilings=ceilings,
            timing_noise=stage.timing_noise,
            machine_reference=stage.machine_reference,
            ab=ab,
            phases_s=self._phases_s(),
        )


class _ModeFailed(Exception):
    """A mode raised while being prepared: its record entry so far, and what it raised."""

    def __init__(self, entry: ModeEntry, error: BaseException) -> None:
        super().__init__(str(error))
        self.entry, self.error = entry, error


def derive_findings(
    evidence: Run,
    clock: Callable[[], float] = time.perf_counter,
    remeasure: Callable[[Ceilings], Ceilings] | None = None,
    progress: Progress | None = None,
) -> Run:
    """The run record with today's findings derived from its evidence (analysis/derive; a
    finding that raised is recorded as its mode's `failed_finding`), and the seconds that took
    added to `phases_s` as `fusion_map`.

    A measured median more than the tolerance below its floor (analysis/roofline) says a
    ceiling or the bytes model is wrong for this run. With `remeasure` (a live run) the ceilings
    are measured once more, merged best-of, and the findings derived again, which rules out a
    ceiling measured in a slow moment the load check did not see; a floor still beaten after
    that stays flagged inconsistent in the record."""
    start = clock()
    run = derive.derived_run(evidence, mode_analyses())
    beaten = any(
        r is not None and r.consistent is False for r in (m.roofline for m in run.modes.values())
    )
    if remeasure is not None and evidence.ceilings is not None and beaten:
        if progress is not None:
            progress("a median beat its floor: measuring memory bandwidth and matmul rate again")
        evidence = evidence.adding(ceilings=remeasure(evidence.ceilings))
        run = derive.derived_run(evidence, mode_analyses())
    phases = {**(run.phases_s or {}), "fusion_map": round(clock() - start, 3)}
    return run.adding(phases_s=phases)


def ceilings_again(device: torch.device, dtype_name: str) -> Callable[[Ceilings], Ceilings]:
    """`derive_findings`' remeasure for a run on `device`: the ceilings measured again and
    merged (capture/ceilings.measured_again); unchanged when the device can run nothing more."""

    def again(ceilings: Ceilings) -> Ceilings:
        if device.type == "cuda" and lost_context(device) is not None:
            return ceilings
        return measured_again(device, DTYPES[dtype_name], ceilings)

    return again
