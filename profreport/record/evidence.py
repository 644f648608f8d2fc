"""What capture observed for one mode: its kernel table, modeled and measured bytes, latency and
speedup, compiler output, peak memory and output check; and the run's timing-noise record.

Every class here is written by capture (profreport.capture, profreport.modes) and read by the
analyses and renderers: one class per idea (see record/section.py for how a field's type is its
JSON schema).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from profreport.record.section import (
    JSON,
    ByteCount,
    Section,
    finding,
    omitted,
    required,
    required_factory,
)

# ---------------------------------------------------------------- kernels


@dataclass(frozen=True)
class KernelRow(Section):
    """One kernel (or CPU operator) of a profiler table: its calls and time over the trace (per
    step in a run record), and what launched it. The bytes and roofline fields are findings
    (profreport.analysis.derive), present when the record was written with them."""

    name: str = required("")
    kind: str = required("")  # kernel | memcpy | memset | cpu
    calls: int = 0
    calls_per_step: float | None = required(None, null=True, omit=True)
    time_us: float | None = None
    time_us_per_step: float | None = required(None, null=True, omit=True)
    launched_by: str | None = None  # the dispatcher op (or AOTInductor shim call) that launched it
    launched_by_top: str | None = None  # the outermost dispatcher op around that one
    source: str | None = omitted()  # "profiler", or where a row with no profiler record is from
    bytes: int | None = omitted()  # bytes a memcpy/memset moved, as the trace records them
    counters: JSON | None = omitted()  # CUPTI range counters, mean per range
    counter_totals: Mapping[str, float] | None = omitted()  # additive counters, summed
    dram_bytes_read: float | None = omitted()  # from counter_totals (analysis/counters)
    dram_bytes_written: float | None = omitted()  # from counter_totals (analysis/counters)
    # findings: modeled bytes (analysis/kernel_bytes)
    bytes_read: ByteCount | None = finding()
    bytes_written: ByteCount | None = finding()
    bytes_op: str | None = finding()  # the operation whose modeled bytes the row takes
    bytes_shared_by: int | None = finding()  # kernels sharing that operation's bytes
    flops: float | None = finding()
    flops_per_byte: float | None = finding()
    # findings: the roofline (analysis/roofline), present when the run has ceilings
    achieved_bytes_per_s: float | None = finding()
    achieved_flops_per_s: float | None = finding()
    bound: str | None = finding()  # memory | cache | compute
    ceiling_pct: float | None = finding()
    roofline_note: str | None = finding()
    # findings: where in the model (analysis/attribution): the modules and source lines of the
    # calls the row's operation or generated kernel computed, over the whole forward
    modules: tuple[str, ...] | None = finding()
    source_lines: tuple[str, ...] | None = finding()


@dataclass(frozen=True)
class WholeTrace(Section):
    """Counts over the whole trace (every step, warm-up included)."""

    kernels: int = 0
    launches: int = 0
    memcpy: int = 0
    memset: int = 0
    unlinked_kernels: int = 0
    kernel_time_us: float | None = None


@dataclass(frozen=True)
class KernelCounts(Section):
    """A mode's kernels per profiled step, and its profiler table."""

    definition: str | None = None  # device | cpu: what counts as a kernel
    per_step: int = required(0)
    launches: int = required(0)
    memcpy: int = required(0)
    memset: int = required(0)
    graph_launches: int | None = None
    steps: int | None = None
    unrecorded: tuple[str, ...] = ()  # ops the graph ran outside the profiler's view
    whole_trace: WholeTrace | None = None
    table: tuple[KernelRow, ...] = required(())


# ---------------------------------------------------------------- bytes


@dataclass(frozen=True)
class OpBytes(Section):
    """Modeled bytes of one operation (summed over its calls in one forward)."""

    op: str = required("")
    calls: int = required(0)
    read: ByteCount = required(0)
    written: ByteCount = required(0)
    flops: float | None = None  # torch's flop counter; None where it has no formula
    flops_per_byte: float | None = None


@dataclass(frozen=True)
class TensorIO(Section):
    """One call in the order it ran, with its modeled traffic: the tensor-I/O sequence the
    fusion map pairs."""

    op: str = ""
    read: ByteCount | None = None
    written: ByteCount | None = None
    flops: float | None = None
    source: str | None = None  # dispatcher | inductor | graph types | derived ...
    # where in the model (capture/provenance.py): the named_modules() path ("" the root module)
    # and the user's source lines ("file.py:N", innermost first); absent: not recorded
    module: str | None = omitted()
    lines: tuple[str, ...] | None = omitted()

    @property
    def traffic(self) -> int:
        """read + written (0 for a side not sized)."""
        return (self.read or 0) + (self.written or 0)


@dataclass(frozen=True)
class MeasuredKernel(Section):
    """Nsight Compute's DRAM bytes of one kernel name (summed over its launches)."""

    name: str = required("")
    calls: int = 0
    read: ByteCount | None = None
    written: ByteCount | None = None
    duration_ns: float | None = None


@dataclass(frozen=True)
class MeasuredBytes(Section):
    """DRAM bytes measured by Nsight Compute for one step of one mode, or why there are none.
    `launches_missing_values` counts launches with a value ncu did not report, so a partial
    sum is never silent."""

    available: bool | None = None
    reason: str | None = None
    source: str | None = None
    read: ByteCount | None = None
    written: ByteCount | None = None
    total: int | None = None
    duration_ns: float | None = None
    launches: int | None = None
    launches_missing_values: int | None = None
    kernels: tuple[MeasuredKernel, ...] = ()
    command: tuple[str, ...] | None = None

    @property
    def dram_bytes(self) -> int | None:
        """Read + written of one step (None: not measured, or a figure missing)."""
        if not self.available or self.read is None or self.written is None:
            return None
        return self.read + self.written


@dataclass(frozen=True)
class Bytes(Section):
    """Modeled memory traffic of one forward (and Nsight Compute's, when measured)."""

    read: ByteCount = required(0)
    written: ByteCount = required(0)
    total: int | None = None
    source: str = required("")  # modeled
    method: str = required("")  # how the numbers were obtained, one line
    not_modeled: tuple[str, ...] = ()  # kernels whose bytes are unknown (never counted as 0)
    table: tuple[OpBytes, ...] = required(())
    sequence: tuple[TensorIO, ...] = ()
    measured: MeasuredBytes | None = None
    # how the sequence's modules and source lines were recorded, or why they were not
    attribution: str | None = omitted()

    @property
    def traffic(self) -> int:
        """read + written (what `total` holds where the writer stored it)."""
        return self.total if self.total is not None else self.read + self.written


# ---------------------------------------------------------------- latency


@dataclass(frozen=True)
class ProcessBlocks(Section):
    """One timing process's blocks of a series: the per-call latency of each block (ms), in round
    order, so that block *i* of two series of one process ran in the same round."""

    samples: tuple[float, ...] = required(())
    # the leading rounds' blocks that were still warm-up in this process (not in the statistics)
    warmup_samples: tuple[float, ...] | None = omitted()
    calls_per_block: int | None = omitted()


@dataclass(frozen=True)
class Latency(Section):
    """Per-call latency over timed blocks, milliseconds (measured outside the profiler).
    `processes`: each timing process's blocks, when there were several (run/2); `samples` holds
    them all, process after process (without `processes`: one process's blocks)."""

    median: float = required(0.0)
    iqr: float | None = None  # p75 - p25
    p10: float = required(0.0)
    p90: float = required(0.0)
    mean: float | None = omitted()
    min: float | None = omitted()
    n: int | None = omitted()  # timed blocks
    calls_per_block: int | None = omitted()
    threads: int | None = omitted()
    samples: tuple[float, ...] | None = omitted()  # per-call latency of each block
    # per-call latency of the blocks of the first rounds, timed while some series' call time
    # was still settling (capture/timing.steady_start): kept apart, not in the statistics
    warmup_samples: tuple[float, ...] | None = omitted()
    processes: tuple[ProcessBlocks, ...] | None = omitted()  # run/2, several processes: each's

    def process_samples(self) -> tuple[tuple[float, ...], ...]:
        """Each timing process's steady blocks: `processes`, or `samples` as one process; ()
        when none were kept."""
        if self.processes:
            return tuple(p.samples for p in self.processes if p.samples)
        return (self.samples,) if self.samples else ()


@dataclass(frozen=True)
class PairedRatios(Section):
    """Quartiles and spread ((p75 - p25) / median) of a mode's per-round ratios."""

    p25: float = 0.0
    p75: float = 0.0
    spread: float = 0.0


@dataclass(frozen=True)
class ProcessSpeedup(Section):
    """One timing process's paired speedup: the median of its per-round ratios and that
    median's distribution-free 95% interval (its rounds only)."""

    median: float = required(1.0)
    ci95: tuple[float, float] = required((1.0, 1.0))
    rounds: int = required(0)


@dataclass(frozen=True)
class Speedup(Section):
    """Eager time / mode time: the median and 95% CI of the paired per-round ratios (`method`
    says how; records written before it: medians' ratio with a bootstrap of `resamples`);
    `noise`: what the noise guard saw; `inconclusive`: why it would not call it.
    `processes` (run/2): how many timing processes the interval covers (1: this process's
    rounds only, not what a rerun sees); `per_process`: each one's own; `unstable`: processes
    whose own intervals do not overlap, named; `widened`: why the interval is wider than the
    rounds' (noise signals widen it instead of withholding a call)."""

    median: float = required(1.0)
    ci95: tuple[float, float] = required((1.0, 1.0))
    resamples: int | None = omitted()
    method: str | None = omitted()
    rounds: int | None = omitted()
    ratios: PairedRatios | None = omitted()
    per_round: tuple[float, ...] | None = omitted()  # every process's rounds, process by process
    noise: str | None = None
    inconclusive: str | None = None
    processes: int | None = omitted()
    per_process: tuple[ProcessSpeedup, ...] | None = omitted()
    unstable: str | None = omitted()
    widened: str | None = omitted()

    @property
    def covers(self) -> str:
        """What the interval covers: 'one process' (this process's rounds only: a rerun may
        differ by more; every record before run/2 too) or 'N processes'."""
        k = self.processes or 1
        return "one process" if k == 1 else f"{k} processes"


# ---------------------------------------------------------------- compiler output


@dataclass(frozen=True)
class ScriptFusionGroup(Section):
    """A fusion group node of a TorchScript graph (NNC `prim::TensorExprGroup`, ...): the ops
    inside it and the bytes crossing its boundary (from the profiled tensor types)."""

    kind: str = required("")
    ops: tuple[str, ...] = required(())
    read: ByteCount | None = None
    written: ByteCount | None = None


@dataclass(frozen=True)
class EagerCall(Section):
    """An eager op call an Inductor node computes: the ATen op, the Dynamo graph node it came
    from, its position in the graph and the module it ran in."""

    op: str = required("")
    source: str = ""
    pos: int = 0
    module: str = ""
    lines: tuple[str, ...] | None = omitted()  # the user's source lines (node's stack_trace)


@dataclass(frozen=True)
class ResizedAccess(Section):
    """A buffer Inductor sizes whole that a kernel touches only in part (through an index tensor,
    or a slice): counted by the elements touched."""

    buffer: str = ""
    full_bytes: int = 0
    scheduler_bytes: int = 0
    counted_bytes: int = 0
    # a graph constant (AOTInductor's weights): Inductor counts none of it, so
    # `scheduler_bytes` is the whole constant
    constant: bool | None = omitted()


@dataclass(frozen=True)
class InductorNode(Section):
    """One scheduler node of Inductor: its buffers' bytes, the eager calls it computes, and the
    generated kernel call it went into (`kernel`, `kernel_call`; `nop`: it runs none)."""

    name: str = required("")
    kind: str = required("")  # generated | extern
    origins: tuple[str, ...] = required(())
    eager_ops: tuple[EagerCall, ...] = ()
    read: ByteCount | None = None
    written: ByteCount | None = None
    indirect_reads: tuple[ResizedAccess, ...] = ()
    indirect_writes: tuple[ResizedAccess, ...] = ()
    sliced_reads: tuple[ResizedAccess, ...] = ()
    inductor_bytes: int | None = None  # Inductor's own combined figure
    kernel: str | None = None
    kernel_call: int | None = None
    nop: bool | None = None

    @property
    def traffic(self) -> int | None:
        return None if self.read is None or self.written is None else self.read + self.written


@dataclass(frozen=True)
class GraphBreak(Section):
    """A graph break as Dynamo logged it: where in the user's code, and why."""

    file: str = required("")
    line: int = required(0)
    source: str | None = None  # the user's source line
    reason: str = required("")
    dynamo_hint: str | None = None
    gb_id: str | None = None  # Dynamo's graph-break id (its docs page)
    log: str | None = None


@dataclass(frozen=True)
class FusionRefusal(Section):
    """An Inductor scheduler "cannot fuse" decision, as logged."""

    first: str = required("")
    second: str = required("")
    log: str = required("")


@dataclass(frozen=True)
class CompilerEvidence(Section):
    """What the mode's compiler produced (which fields are present depends on the mode)."""

    graph: str | None = omitted()  # TorchScript: the optimized graph
    fusion_groups: tuple[ScriptFusionGroup, ...] | None = omitted()
    fused_library_ops: tuple[str, ...] | None = omitted()
    unrecorded_ops: tuple[str, ...] | None = omitted()
    op_counts: Mapping[str, int] | None = omitted()
    op_counts_before: Mapping[str, int] | None = omitted()  # optimize: before freezing
    notes: tuple[str, ...] | None = omitted()
    outputs: str | None = omitted()  # how the model's outputs were flattened for tracing
    inductor_nodes: tuple[InductorNode, ...] | None = omitted()
    inductor_bytes_accessed: ByteCount | None = omitted()  # Inductor's estimate (compiler)
    generated_kernel_count: int | None = omitted()
    graphs: int | None = omitted()
    graph_breaks: int | None = omitted()
    # Dynamo's graph breaks and Inductor's fusion refusals, as logged (modes/compile_logs)
    graph_break_records: tuple[GraphBreak, ...] | None = omitted()
    fusion_refusals: tuple[FusionRefusal, ...] | None = omitted()
    # torch.export + AOTInductor: what building the package took, and its size
    export_s: float | None = omitted()
    aot_build_s: float | None = omitted()
    package_bytes: int | None = omitted()


# ---------------------------------------------------------------- memory and output


@dataclass(frozen=True)
class PeakMemory(Section):
    """Peak memory of one call of a mode (capture/peak_memory.py): bytes None = no event seen."""

    bytes: int | None = None
    source: str = ""
    scope: str = ""


@dataclass(frozen=True)
class OutputCheck(Section):
    """A mode's output tensors against eager's (analysis/output_check): the largest absolute and
    norm-wise relative error, the tolerance of the pair that used most of its allowance, and
    whether every pair is within it (None: nothing was compared)."""

    max_abs_err: float | None = None
    max_rel_err: float | None = None
    atol: float | None = None
    rtol: float | None = None
    within_tolerance: bool | None = None
    compared_tensors: int = 0
    note: str = ""
    # decode: whether the mode's greedy tokens equal eager's over `greedy_steps` steps
    greedy_steps: int | None = omitted()
    greedy_equal: bool | None = omitted()
    greedy_first_difference: int | None = omitted()  # the first step whose token differs


# ---------------------------------------------------------------- timing noise


@dataclass(frozen=True)
class MachineLoad(Section):
    """How busy the machine was while the modes were timed (capture/noise.py)."""

    source: str = ""
    cpus: int | None = None
    load1_before: float | None = None
    load1_after: float | None = None
    other_busy_share: float | None = None  # other processes' share of all CPU time
    ours_busy_share: float | None = None
    # profreport's own child processes' share (compile workers, compilers): counted apart from
    # other processes and held to the same limit; absent in runs recorded before it was read
    children_busy_share: float | None = omitted()


@dataclass(frozen=True)
class NoiseThresholds(Section):
    """The noise guard's limits (analysis/paired.py says where each comes from)."""

    min_rounds: int = 0
    max_other_busy_share: float = 0.0
    max_ratio_spread: float = 0.0
    max_block_spread: float = 0.0
    round_move: float = 0.0
    max_moved_rounds: float = 0.0
    # rounds whose paired ratio moved (absent in runs recorded before they were judged)
    ratio_move: float | None = omitted()
    max_moved_ratios: float | None = omitted()
    min_peak_share: float = 0.0
    peak_gap_factor: float = 0.0
    min_peak_gap: float = 0.0
    noise_band: float = 0.0


@dataclass(frozen=True)
class TwoPeaks(Section):
    """Samples split into two separated groups: each group's median and the upper one's share."""

    low: float = 0.0
    high: float = 0.0
    share_high: float = 0.0


@dataclass(frozen=True)
class BaselineSignals(Section):
    """The guard's signals from eager's own blocks (only `rounds` when there were none)."""

    rounds: int = 0
    block_spread: float | None = omitted()
    moved_rounds: float | None = omitted()
    two_peaks: TwoPeaks | None = omitted()


@dataclass(frozen=True)
class ModeNoise(Section):
    """The guard's signals from one mode's paired ratios."""

    ratio_spread: float = 0.0
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class NoiseSignals(Section):
    """What the noise guard measured: from eager's blocks, and per mode from its ratios."""

    baseline: BaselineSignals | None = omitted()
    modes: Mapping[str, ModeNoise] | None = omitted()


@dataclass(frozen=True)
class TimingNoise(Section):
    """The timing noise guard of a run: the machine's load, the limits, the signals, and whether
    it tripped (then a direction is stated only beyond the noise band); `context`: the
    baseline's own level changes, which the paired ratios cancel (reported, not judged; runs
    recorded before had them among `reasons`)."""

    method: str = ""
    load: MachineLoad | None = None
    thresholds: NoiseThresholds | None = None
    signals: NoiseSignals | None = None
    reasons: tuple[str, ...] = ()
    tripped: bool = False
    context: tuple[str, ...] | None = omitted()
    # run/2: each timing process's machine load (`load` is then the busiest one's)
    process_loads: tuple[MachineLoad, ...] | None = omitted()

    def mode_reasons(self, mode: str) -> list[str]:
        """The run's reasons and `mode`'s own."""
        own = None
        if self.signals is not None and self.signals.modes is not None:
            own = self.signals.modes.get(mode)
        return [*self.reasons, *(own.reasons if own is not None else ())]


# ---------------------------------------------------------------- machine reference


@dataclass(frozen=True)
class ReferencePart(Section):
    """One part of the machine reference: the fixed work it does, and the median per-call time
    over its blocks with the 95% percentile-bootstrap interval of that median."""

    work: str = ""
    median_ms: float = required(0.0)
    ci95_ms: tuple[float, float] = required((0.0, 0.0))
    n: int = 0  # timed blocks (one call each)
    samples_ms: tuple[float, ...] = ()  # every process's blocks, process by process
    processes: tuple[ProcessBlocks, ...] | None = omitted()  # run/2, several processes: each's

    def process_samples(self) -> tuple[tuple[float, ...], ...]:
        """Each timing process's blocks (`samples_ms` as one process without `processes`)."""
        if self.processes:
            return tuple(p.samples for p in self.processes if p.samples)
        return (self.samples_ms,) if self.samples_ms else ()


@dataclass(frozen=True)
class MachineReference(Section):
    """A short fixed workload (a matmul, a large copy: capture/reference.py) timed inside the
    latency rounds beside the modes: the machine's state while this run was timed, which
    `compare` reads a run's latencies against. `spent_s` of `timing_s`: what it cost."""

    method: str = ""
    parts: Mapping[str, ReferencePart] = required_factory(dict)
    share: float | None = None  # the share of the rounds' time it may take
    spent_s: float | None = None  # seconds its blocks took
    timing_s: float | None = None  # seconds of the timing it was part of
    error: str | None = omitted()  # why it has no parts (it raised while being timed)


@dataclass(frozen=True)
class StepTime(Section):
    """Where one profiled step's wall time went (analysis/time_breakdown), in µs of profiled
    time. The host parts are the thread that recorded the step, each instant counted once, for
    the first of op, launch, runtime, dispatch, wrapper that holds it (python: none holds it), so
    they sum to `wall_us`; the device parts (device traces) are the device's view of the step."""

    name: str = ""
    wall_us: float = 0.0
    op_us: float | None = None  # inside a CPU kernel (cpu definition only)
    launch_us: float | None = None  # inside a launch API call (device definition only)
    runtime_us: float | None = None  # inside another runtime / driver call (syncs, copies)
    dispatch_us: float = 0.0  # inside a dispatcher op that is not a kernel
    wrapper_us: float = 0.0  # inside another profiled range (compiled-code wrappers, forward)
    python_us: float = 0.0  # inside no profiled range: Python and unprofiled code
    dispatched_ops: int = 0  # dispatcher ops (kernels and bookkeeping) started in the step
    launches: int = 0  # launch API calls started in the step
    device_span_us: float | None = None  # step start to the later of its end and its last work
    device_busy_us: float | None = None  # union of the step's kernels, copies and fills
    host_wait_us: float | None = None  # device idle until a launch the host had not yet made
    kernel_wait_us: float | None = None  # idle gaps under 30 µs with the next launch made
    other_idle_us: float | None = None  # the rest of the device's idle time
    # profiled host events that started in the step, by the part their recording cost lands in
    # (the part of the range that encloses each: analysis/step_events); absent in records before
    events: Mapping[str, int] | None = omitted()


@dataclass(frozen=True)
class ProfilerCost(Section):
    """The profiler's own cost on this machine, measured in this run inside the light pass
    (capture/profiling.profile_interleaved): each round a step of `calls` calls of `op` and an
    empty step, against the same calls timed without the profiler.
    `per_event_us` = (a loop step's wall - `calls` x the unprofiled call - an empty step's wall)
    / the events recorded in a loop step; `per_step_us` = an empty step's wall (medians)."""

    per_event_us: float = required(0.0)
    per_step_us: float = required(0.0)
    op: str = ""
    calls: int = 0  # calls of `op` per loop step
    events_per_step: float = 0.0  # events recorded in a loop step (median)
    unprofiled_call_us: float = 0.0  # one call of `op` without the profiler (median over blocks)
    profiled_step_us: float = 0.0  # a loop step's wall (median)
    steps: int = 0  # loop steps read (and as many empty steps)


@dataclass(frozen=True)
class KernelTime(Section):
    """One kernel of a light pass (cpu definition: the kernel table's CPU kernels) in its step
    of median CPU kernel time (the lower median, so the kernels sum to at most the median):
    its calls, its profiled time and the events recorded inside it (whose recording cost is
    inside that time)."""

    name: str = required("")
    calls: float = 0.0
    time_us: float = 0.0
    events: float = 0.0
    step: str = ""  # the ProfilerStep it is from


@dataclass(frozen=True)
class TimeBreakdown(Section):
    """A mode's profiled steps by where their time went (evidence, from its trace): the step of
    median wall time (upper median) and every step's wall time. Records since issue 35 take
    them from the light pass (no shapes, no FLOPs; every mode in interleaved rounds, apart from
    the pass that records shapes for the byte model), with every step read (`steps`), the
    profiler's cost measured in the same pass (`profiler_cost`), the CPU kernels of the step of
    median kernel time, and the machine's load while it ran."""

    definition: str = ""  # "cpu" or "device": which parts `step` has
    source: str = ""
    step: StepTime | None = None
    step_walls_us: tuple[float, ...] = ()
    trace: str | None = omitted()  # the light pass's trace, relative to the run folder
    steps: tuple[StepTime, ...] | None = omitted()  # this mode's steps read, one a round
    warmup_rounds: int | None = omitted()  # rounds run under the profiler before those read
    repeat: int | None = omitted()  # calls of the mode a round, in a row (the last one read)
    profiler_cost: ProfilerCost | None = omitted()
    kernels: tuple[KernelTime, ...] | None = omitted()  # cpu definition only: the median step's
    load: MachineLoad | None = omitted()  # the machine's load over the (last) light pass
    attempts: int | None = omitted()  # light passes run (a second when the first was busy)
    busy: tuple[str, ...] | None = omitted()  # why the last pass's machine was not quiet
