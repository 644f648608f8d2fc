"""The run record (`profreport.run/2`) as frozen dataclasses: one class per idea, written by the
pipeline and read by every analysis and renderer.

`Run.from_json(document)` reads a run/2 document and every run/1 one (run/2 adds each timing
process's samples and speedups covering processes: `Latency.processes`, `Speedup.processes`,
and the findings listed on `Run`; a run/1 record timed one process, and reads as one);
`to_json()` gives back the same document: the same keys with the same values (declared fields in
declaration order, then the unknown keys: key order means nothing).
Keys a class does not declare (a newer writer's additions, or another tool's) are kept in `extra`
and written back, so nothing is lost on the way through. A field's type is its JSON schema
(record/section.py): `document.validate` and docs/record.md are derived from these classes.

This module holds the run and its settings; a mode's evidence is in record/evidence.py, the
findings derived from it in record/findings.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from profreport.record.evidence import (
    BaselineSignals,
    Bytes,
    CompilerEvidence,
    EagerCall,
    FusionRefusal,
    GraphBreak,
    InductorNode,
    KernelCounts,
    KernelRow,
    KernelTime,
    Latency,
    MachineLoad,
    MachineReference,
    MeasuredBytes,
    MeasuredKernel,
    ModeNoise,
    NoiseSignals,
    NoiseThresholds,
    OpBytes,
    OutputCheck,
    PairedRatios,
    PeakMemory,
    ProcessBlocks,
    ProcessSpeedup,
    ProfilerCost,
    ReferencePart,
    ResizedAccess,
    ScriptFusionGroup,
    Speedup,
    StepTime,
    TensorIO,
    TimeBreakdown,
    TimingNoise,
    TwoPeaks,
    WholeTrace,
)
from profreport.record.findings import (
    DecodeTokens,
    FailedFinding,
    FusionGroup,
    FusionMap,
    KernelsByBound,
    KernelTraffic,
    MedianStep,
    ModuleNode,
    ModuleSaving,
    ModuleTree,
    ModuleWork,
    RooflineFloor,
    Roofs,
    SpeedupCall,
    TimeFindings,
    TokenCost,
    TrafficChange,
    TreeShare,
    WhyKind,
    WhyNotFused,
)
from profreport.record.section import (
    JSON,
    ByteCount,
    Section,
    finding,
    omitted,
    required,
    required_factory,
)

# every class of the record, from here (the evidence and findings modules hold most of them)
__all__ = [
    "JSON",
    "AbSide",
    "BaselineSignals",
    "Bytes",
    "CacheKey",
    "Ceiling",
    "Ceilings",
    "CompilerEvidence",
    "DecodeInfo",
    "DecodeTokens",
    "Device",
    "EagerCall",
    "Environment",
    "FailedFinding",
    "FailedMode",
    "Fusers",
    "FusionGroup",
    "FusionMap",
    "FusionRefusal",
    "GraphBreak",
    "InductorNode",
    "InputSpec",
    "KernelCounts",
    "KernelDefinition",
    "KernelRow",
    "KernelTime",
    "KernelTraffic",
    "KernelsByBound",
    "Latency",
    "MachineLoad",
    "MachineReference",
    "MeasuredBytes",
    "MeasuredKernel",
    "MedianStep",
    "ModeEntry",
    "ModeNoise",
    "ModeResult",
    "ModelInfo",
    "ModuleNode",
    "ModuleSaving",
    "ModuleTree",
    "ModuleWork",
    "NoiseSignals",
    "NoiseThresholds",
    "OkMode",
    "OpBytes",
    "OutputCheck",
    "PairedRatios",
    "PeakMemory",
    "ProcessBlocks",
    "ProcessSpeedup",
    "ProfileSchedule",
    "ProfilerCost",
    "ReferencePart",
    "ResizedAccess",
    "RooflineFloor",
    "Roofs",
    "Run",
    "ScriptFusionGroup",
    "Section",
    "Settings",
    "SkippedMode",
    "Speedup",
    "SpeedupCall",
    "Status",
    "StepTime",
    "TensorIO",
    "TimeBreakdown",
    "TimeFindings",
    "TimingNoise",
    "TimingSettings",
    "TokenCost",
    "Tool",
    "TrafficChange",
    "TreeShare",
    "TwoPeaks",
    "WholeTrace",
    "WhyKind",
    "WhyNotFused",
]


@dataclass(frozen=True)
class Tool(Section):
    """The program that wrote the record."""

    name: str = "profreport"
    version: str | None = None


@dataclass(frozen=True)
class InputSpec(Section):
    """One example input of the model."""

    shape: tuple[int, ...] = required(())
    dtype: str = required("")  # float32, int64, ...


@dataclass(frozen=True)
class DecodeInfo(Section):
    """The decode step that was profiled (profreport/decode.py): one greedy token per sequence
    at `position`, with a static KV cache of `cache_len` slots filled by a prefill of `context`
    tokens; eager's greedy tokens over the check's steps, and eager's modeled bytes of one step
    (the dispatcher log) split by the tensor each operation touched."""

    context: int = required(0)  # prompt tokens prefilled into the cache
    position: int = required(0)  # the slot every profiled and timed step writes
    cache_len: int = required(0)  # slots per layer: context + the greedy check's steps
    kv_cache_bytes: ByteCount = required(0)  # the whole cache, every layer's keys and values
    greedy_tokens: tuple[tuple[int, ...], ...] = ()  # eager's, per sequence, from `position`
    weight_bytes: ByteCount = required(0)  # parameters read by one step (modeled)
    kv_read_bytes: ByteCount = required(0)  # cache read by one step (modeled)
    cache_written_bytes: ByteCount = required(0)  # the new token's keys and values (modeled)
    total_bytes: ByteCount = required(0)  # eager's modeled bytes of one step


@dataclass(frozen=True)
class ModelInfo(Section):
    """The model that was profiled, and its inputs."""

    name: str = required("")
    spec: str | None = None  # how to build it again (None: a model passed as an object)
    memory_format: str = "contiguous"  # contiguous | channels_last
    description: str = ""  # one line, from the model's docstring or the built-in table
    batch_size: int | None = None
    dtype: str | None = None  # float32 | float16 | bfloat16
    parameters: int | None = None  # number of parameters
    inputs: tuple[InputSpec, ...] = ()
    workload: Literal["prefill", "decode"] | None = omitted()  # absent: prefill
    decode: DecodeInfo | None = omitted()  # the decode step, when the workload is decode


@dataclass(frozen=True)
class Device(Section):
    """The device the run profiled (env.device_info); which details depends on its type."""

    type: str = required("cpu")  # cpu | cuda
    name: str | None = None
    hip: bool | None = omitted()  # cuda: a ROCm build
    capability: str | None = omitted()
    memory_gib: float | None = omitted()
    multiprocessors: int | None = omitted()
    logical_cores: int | None = omitted()  # cpu


@dataclass(frozen=True)
class Fusers(Section):
    """Which fusers this PyTorch build can use (TorchScript's NNC needs LLVM for CPU code;
    Inductor generates C++ on CPU and Triton on GPU)."""

    nnc_enabled: bool | None = None
    nnc_can_fuse_on_cpu: bool | None = None
    nnc_can_fuse_on_gpu: bool | None = None
    llvm_available: bool | None = None
    profiling_executor: bool | None = None
    inductor_cpp_compiler: str | None = None
    triton: str | None = None

    @property
    def recorded(self) -> bool:
        """Whether the record says anything about the fusers (records before did not)."""
        return bool(self.to_json())


@dataclass(frozen=True)
class Environment(Section):
    """The software the run used (env.collect_env)."""

    torch: str | None = None  # torch.__version__
    python: str | None = None
    platform: str | None = None
    threads: int | None = None  # torch intra-op threads
    interop_threads: int | None = None
    cuda_runtime: str | None = None
    hip_runtime: str | None = None
    cudnn: Any = None  # cuDNN's version number, where there is one
    mkldnn: Any = None  # oneDNN available
    fusers: Fusers | None = None


@dataclass(frozen=True)
class ProfileSchedule(Section):
    """torch.profiler's schedule: steps waited, warmed up and profiled (one forward a step)."""

    wait: int = required(1)
    warmup: int = required(1)
    active: int = required(3)

    @property
    def total_steps(self) -> int:
        return self.wait + self.warmup + self.active


@dataclass(frozen=True)
class TimingSettings(Section):
    """How latency is timed (capture/timing.py): each mode in blocks lasting at least `block_s`,
    until every mode has `min_blocks` blocks and `min_time_s` of measured time, or `max_time_s`
    overall; `warmup_s` of untimed calls first."""

    min_time_s: float = 1.0  # measured time per mode, at least
    max_time_s: float = 60.0  # all modes together, warm-up and calibration included, at most
    block_s: float = 0.02
    min_blocks: int = 15
    warmup_s: float = 0.1


@dataclass(frozen=True)
class Settings(Section):
    """How the run profiled and timed each mode."""

    profile_schedule: ProfileSchedule | None = None
    timing: TimingSettings | None = None
    bootstrap_resamples: int | None = None  # for intervals that are bootstrapped
    # absent: timed in the capturing process (workers=0, a model object, an older record)
    timing_processes: int | None = omitted()  # fresh worker processes the latency was timed in


@dataclass(frozen=True)
class KernelDefinition(Section):
    """What counts as a kernel on this device, and the ops counted as bookkeeping."""

    name: str | None = None  # device | cpu
    text: str | None = None
    bookkeeping_ops: tuple[str, ...] = ()


@dataclass(frozen=True)
class Ceiling(Section):
    """One measured ceiling: the best of `samples` samples (`value`), with median and worst;
    how it was measured (`method`, and the sizes and calls behind it)."""

    value: float = required(0.0)
    median: float | None = None
    worst: float | None = None
    samples: int | None = None
    spread_pct: float | None = None  # (best - median) / best
    unit: str = ""  # B/s | FLOP/s
    source_bytes: int | None = omitted()
    bytes_per_call: int | None = omitted()
    n: int | None = omitted()  # matmul: n x n matrices
    flops_per_call: float | None = omitted()
    calls_per_sample: int | None = omitted()
    variant: str | None = omitted()  # CPU copies: the fastest of several ways
    other_variants: Mapping[str, float] | None = omitted()
    method: str = ""


@dataclass(frozen=True)
class CacheKey(Section):
    """What a cached measurement of the ceilings must match to be reused."""

    version: int = 1
    device_type: str | None = None
    device_name: str | None = None
    threads: int = 0
    torch: str = ""
    dtype: str = ""


@dataclass(frozen=True)
class Ceilings(Section):
    """The machine's measured ceilings (capture/ceilings.py), or why there are none. How the
    measurement went is kept beside them: `attempts` (each ceiling the best of them),
    `other_busy_share` (the quietest attempt's load), where the cache sizes came from, and
    whether it came from the per-machine cache."""

    source: str = "measured"  # measured | unavailable
    reason: str | None = omitted()
    timer: str | None = omitted()
    last_level_cache_bytes: int | None = omitted()
    l2_bytes: int | None = omitted()
    cache_sizes_from: str | None = omitted()
    memory_bandwidth: Ceiling | None = omitted()
    cache_bandwidth: Ceiling | None = omitted()
    matmul_rate: Ceiling | None = omitted()
    attempts: int | None = omitted()
    other_busy_share: float | None = omitted()
    measured_utc: str | None = omitted()
    cached: bool | None = omitted()
    cache_file: str | None = omitted()
    key: CacheKey | None = omitted()

    @property
    def available(self) -> bool:
        return self.memory_bandwidth is not None and self.matmul_rate is not None


@dataclass(frozen=True)
class AbSide(Section):
    """A run written by `profreport ab`: which side it is, and how the two were interleaved."""

    side: Literal["base", "head"] = required("base")
    order: str = ""


Status = Literal["ok", "failed", "skipped"]


@dataclass(frozen=True)
class ModeEntry(Section):
    """What every mode of a run records, whatever its status: evidence (compiler, kernels,
    bytes, latency, output check) and stored findings (`fusion`, `roofline`, `why_not_fused`,
    `verdict`: a copy for other tools; readers derive their own). A mode is read as the class
    its `status` names: OkMode, FailedMode or SkippedMode."""

    status: Status = required("ok")
    error: str | None = None  # one line
    compile_s: float | None = None  # build time (compile: the first call)
    output_check: OutputCheck | None = None  # None for eager (the reference)
    compiler: CompilerEvidence | None = omitted()
    trace: str | None = omitted()  # the Kineto trace, relative to the run folder
    kernels: KernelCounts | None = omitted()
    peak_memory: PeakMemory | None = omitted()
    latency_ms: Latency | None = omitted()  # absent when the mode failed while timed
    # where the profiled step's time went (analysis/time_breakdown); absent in records before
    time_breakdown: TimeBreakdown | None = omitted()
    not_timed: str | None = omitted()  # why an ok mode has no latency (its CUDA context was lost)
    speedup_vs_eager: Speedup | None = omitted()
    bytes: Bytes | None = omitted()
    error_full: str | None = omitted()  # a failed mode: the whole message
    traceback: str | None = omitted()
    fusion: FusionMap | None = finding()
    roofline: RooflineFloor | None = finding()
    why_not_fused: tuple[WhyNotFused, ...] | None = finding()
    time_findings: TimeFindings | None = finding()
    median_step: MedianStep | None = finding()  # the time breakdown's median step
    speedup_call: SpeedupCall | None = finding()  # speedup_vs_eager called
    # the traffic change against eager (analysis/traffic); None: eager, or a partial model
    traffic: TrafficChange | None = finding()
    verdict: str | None = finding()
    failed_finding: FailedFinding | None = finding()  # deriving a finding above raised (a bug)


@dataclass(frozen=True)
class OkMode(ModeEntry):
    """A mode that ran: its kernel counts and modeled bytes are always there."""

    status: Literal["ok"] = required("ok")
    kernels: KernelCounts = required_factory(KernelCounts)
    bytes: Bytes = required_factory(Bytes)


@dataclass(frozen=True)
class FailedMode(ModeEntry):
    """A mode that raised (`error`, `error_full`, `traceback`), with the evidence captured
    before it did."""

    status: Literal["failed"] = required("failed")


@dataclass(frozen=True)
class SkippedMode(ModeEntry):
    """A mode that was not run (`error`: why; e.g. it needs a GPU)."""

    status: Literal["skipped"] = required("skipped")


# a mode of a run, read as the class its `status` names
ModeResult = OkMode | FailedMode | SkippedMode


@dataclass(frozen=True)
class Run(Section):
    """A whole run record (`profreport.run/2`; a run/1 record is read the same way: run/2 added
    each timing process's samples and speedups, the run's findings `roofs`, `module_tree`,
    `module_savings` and each mode's `median_step`, `speedup_call` and `traffic`)."""

    SCHEMA: ClassVar[str] = "profreport.run/2"
    # run/1: one timing process; its latency and speedups read as that one process's
    EARLIER: ClassVar[tuple[str, ...]] = ("profreport.run/1",)
    NOUN: ClassVar[str] = "run record"

    schema: str = ""  # profreport.run/2 (or run/1: a record written before it)
    tool: Tool | None = None
    created_utc: str | None = None  # when the run started, UTC (ISO 8601)
    model: ModelInfo = required_factory(ModelInfo)
    device: Device = required_factory(Device)
    env: Environment = required_factory(Environment)
    settings: Settings | None = None
    kernel_definition: KernelDefinition | None = None
    modes: Mapping[str, ModeResult] = required_factory(dict)  # in the order they ran
    ceilings: Ceilings | None = omitted()  # the machine's measured ceilings
    timing_noise: TimingNoise | None = omitted()  # the noise guard's inputs and decision
    # a fixed workload timed in the rounds: the machine's state for comparisons across runs
    machine_reference: MachineReference | None = omitted()
    ab: AbSide | None = omitted()  # a run written by `profreport ab`
    timeline: str | None = omitted()  # all modes' profiled steps in one trace
    phases_s: Mapping[str, float] | None = omitted()  # wall seconds per phase, over modes
    roofs: Roofs | None = finding()  # the ceilings the roofline uses
    module_tree: ModuleTree | None = finding()  # each mode's work per module of the model
    module_savings: tuple[ModuleSaving, ...] | None = finding()  # the modules fusion saved most in
    decode_tokens: DecodeTokens | None = finding()  # a decode run: each mode's cost per token

    def mode(self, name: str) -> ModeResult:
        return self.modes[name]

    @property
    def ok_modes(self) -> dict[str, OkMode]:
        """The modes that ran (status "ok"), in record order."""
        return {name: mode for name, mode in self.modes.items() if isinstance(mode, OkMode)}
