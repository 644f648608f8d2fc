"""The run record as frozen dataclasses: what readers use instead of string keys.

`Run.from_json(document)` reads a `profreport.run/1` document (today's, and every one written
since run/1); `to_json()` gives back the same document: the same keys, in the same order, with the
same values. Keys a class does not declare (a newer writer's additions, or another tool's) are kept
in `extra` and written back, so nothing is lost on the way through.

Deeply nested compiler evidence (Inductor's nodes, TorchScript graphs, fusion maps) stays JSON
(`Mapping`); the sections readers compute with are typed.

Over 400 lines on purpose: every section of the run record is declared here, so the record's
whole shape reads top to bottom in one file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, TypeVar

JSON = Mapping[str, Any]
_T = TypeVar("_T", bound="Section")


def _dump(value: Any) -> Any:
    if isinstance(value, Section):
        return value.to_json()
    if isinstance(value, tuple):
        return [_dump(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _dump(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Section:
    """One object of the record. `json_keys`: the keys as read, in order (None, for an object
    built in code: every declared field, in declaration order); `extra`: keys this class does not
    declare."""

    json_keys: tuple[str, ...] | None = field(default=None, kw_only=True, repr=False, compare=False)
    extra: JSON = field(default_factory=dict, kw_only=True, repr=False)

    # field name -> Section class of its value (an object), of its items (a list), or of the
    # values of a name -> object mapping
    _objects: ClassVar[Mapping[str, type[Section]]] = {}
    _lists: ClassVar[Mapping[str, type[Section]]] = {}
    _maps: ClassVar[Mapping[str, type[Section]]] = {}
    # fields that hold a list of plain values, read as a tuple
    _tuples: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def _declared(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.name not in ("json_keys", "extra")]

    @classmethod
    def from_json(cls: type[_T], data: JSON) -> _T:
        declared = set(cls._declared())
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in data.items():
            if key not in declared:
                extra[key] = value
            elif value is None:
                kwargs[key] = None
            elif key in cls._objects:
                kwargs[key] = cls._objects[key].from_json(value)
            elif key in cls._lists:
                kwargs[key] = tuple(cls._lists[key].from_json(v) for v in value)
            elif key in cls._maps:
                kwargs[key] = {k: cls._maps[key].from_json(v) for k, v in value.items()}
            elif key in cls._tuples:
                kwargs[key] = tuple(value)
            else:
                kwargs[key] = value
        return cls(**kwargs, json_keys=tuple(data), extra=extra)

    def to_json(self) -> dict[str, Any]:
        keys = (*self._declared(), *self.extra) if self.json_keys is None else self.json_keys
        out: dict[str, Any] = {}
        for key in keys:
            value = self.extra[key] if key in self.extra else getattr(self, key)
            out[key] = _dump(value)
        return out

    def has(self, key: str) -> bool:
        """Whether the document this came from had `key` (an absent field reads as None)."""
        return self.json_keys is None or key in self.json_keys

    def _keys(self) -> tuple[str, ...]:
        return (*self._declared(), *self.extra) if self.json_keys is None else self.json_keys

    def without(self: _T, *keys: str) -> _T:
        """A copy with `keys` absent: declared fields back to their defaults, extra keys gone."""
        declared = {f.name: f for f in dataclasses.fields(self)}
        defaults: dict[str, Any] = {}
        for key in keys:
            f = declared.get(key)
            if f is None or key in ("json_keys", "extra"):
                continue
            if f.default_factory is not dataclasses.MISSING:
                defaults[key] = f.default_factory()
            else:
                defaults[key] = f.default
        return dataclasses.replace(
            self,
            **defaults,
            json_keys=tuple(k for k in self._keys() if k not in keys),
            extra={k: v for k, v in self.extra.items() if k not in keys},
        )

    def adding(self: _T, **values: Any) -> _T:
        """A copy with `values` set; keys it did not have are written after its own, in the
        order given (a finding added to evidence read from a document)."""
        declared = set(self._declared())
        own = {k: v for k, v in values.items() if k in declared}
        extra = {**self.extra, **{k: v for k, v in values.items() if k not in declared}}
        keys = self._keys()
        new = tuple(k for k in values if k not in keys)
        return dataclasses.replace(self, **own, json_keys=(*keys, *new), extra=extra)


@dataclass(frozen=True)
class Tool(Section):
    name: str = "profreport"
    version: str | None = None


@dataclass(frozen=True)
class InputSpec(Section):
    shape: tuple[int, ...] = ()
    dtype: str = ""
    _tuples = frozenset({"shape"})


@dataclass(frozen=True)
class ModelInfo(Section):
    name: str = ""
    spec: str | None = None
    memory_format: str = "contiguous"
    description: str = ""
    batch_size: int | None = None
    dtype: str | None = None
    parameters: int | None = None
    inputs: tuple[InputSpec, ...] = ()
    _lists = MappingProxyType({"inputs": InputSpec})


@dataclass(frozen=True)
class Device(Section):
    type: str = "cpu"
    name: str | None = None


@dataclass(frozen=True)
class Environment(Section):
    torch: str | None = None
    python: str | None = None
    platform: str | None = None
    threads: int | None = None
    interop_threads: int | None = None
    cuda_runtime: str | None = None
    hip_runtime: str | None = None
    cudnn: Any = None
    mkldnn: Any = None
    fusers: JSON = field(default_factory=dict)


@dataclass(frozen=True)
class ProfileSchedule(Section):
    wait: int = 1
    warmup: int = 1
    active: int = 3


@dataclass(frozen=True)
class TimingSettings(Section):
    min_time_s: float | None = None
    max_time_s: float | None = None
    block_s: float | None = None
    min_blocks: int | None = None
    warmup_s: float | None = None


@dataclass(frozen=True)
class Settings(Section):
    profile_schedule: ProfileSchedule | None = None
    timing: TimingSettings | None = None
    bootstrap_resamples: int | None = None
    _objects = MappingProxyType({"profile_schedule": ProfileSchedule, "timing": TimingSettings})


@dataclass(frozen=True)
class KernelDefinition(Section):
    name: str | None = None
    text: str | None = None
    bookkeeping_ops: tuple[str, ...] = ()
    _tuples = frozenset({"bookkeeping_ops"})


@dataclass(frozen=True)
class KernelRow(Section):
    """One kernel (or CPU operator) of a mode's profiler table. The bytes fields are findings
    (profreport.analysis.derive), present when the record was written with them."""

    name: str = ""
    kind: str = ""
    calls: int | None = None
    calls_per_step: float | None = None
    time_us: float | None = None
    time_us_per_step: float | None = None
    launched_by: str | None = None
    launched_by_top: str | None = None
    source: str | None = None
    bytes_read: int | None = None
    bytes_written: int | None = None
    bytes_op: str | None = None
    bytes_shared_by: int | None = None
    flops: float | None = None
    flops_per_byte: float | None = None
    # roofline findings (profreport.analysis.roofline), present when the run has ceilings
    achieved_bytes_per_s: float | None = None
    achieved_flops_per_s: float | None = None
    bound: str | None = None
    ceiling_pct: float | None = None
    roofline_note: str | None = None


@dataclass(frozen=True)
class KernelCounts(Section):
    """A mode's kernels per profiled step, and its profiler table."""

    definition: str | None = None
    per_step: int = 0
    launches: int = 0
    memcpy: int = 0
    memset: int = 0
    graph_launches: int | None = None
    steps: int | None = None
    unrecorded: tuple[str, ...] = ()
    whole_trace: JSON | None = None
    table: tuple[KernelRow, ...] = ()
    _lists = MappingProxyType({"table": KernelRow})
    _tuples = frozenset({"unrecorded"})


@dataclass(frozen=True)
class OpBytes(Section):
    """Modeled bytes of one operation (summed over its calls in one forward)."""

    op: str = ""
    calls: int = 0
    read: int = 0
    written: int = 0
    flops: float | None = None
    flops_per_byte: float | None = None


@dataclass(frozen=True)
class TensorIO(Section):
    """One call in the order it ran: the tensor-I/O sequence the fusion map pairs."""

    op: str = ""
    read: int | None = None
    written: int | None = None
    flops: float | None = None
    source: str | None = None


@dataclass(frozen=True)
class Bytes(Section):
    """Modeled memory traffic of one forward (and Nsight Compute's, when measured)."""

    read: int = 0
    written: int = 0
    total: int | None = None
    source: str = ""
    method: str = ""
    not_modeled: tuple[str, ...] = ()
    table: tuple[OpBytes, ...] = ()
    sequence: tuple[TensorIO, ...] = ()
    measured: JSON | None = None
    _lists = MappingProxyType({"table": OpBytes, "sequence": TensorIO})
    _tuples = frozenset({"not_modeled"})

    @property
    def traffic(self) -> int:
        """read + written (what `total` holds where the writer stored it)."""
        return self.total if self.total is not None else self.read + self.written


@dataclass(frozen=True)
class Latency(Section):
    median: float = 0.0
    iqr: float | None = None
    p10: float | None = None
    p90: float | None = None
    mean: float | None = None
    min: float | None = None
    n: int | None = None
    calls_per_block: int | None = None
    threads: int | None = None
    samples: tuple[float, ...] = ()
    _tuples = frozenset({"samples"})


@dataclass(frozen=True)
class Speedup(Section):
    """Eager time / mode time: the median and 95% CI of the paired per-round ratios (`method`
    says how); `inconclusive`: why the noise guard would not call it, when it would not."""

    median: float = 1.0
    ci95: tuple[float, ...] = ()
    resamples: int | None = None
    method: str | None = None
    rounds: int | None = None
    noise: str | None = None
    inconclusive: str | None = None
    _tuples = frozenset({"ci95"})


@dataclass(frozen=True)
class CompilerEvidence(Section):
    """What the mode's compiler produced (which fields are present depends on the mode)."""

    graph: str | None = None
    fusion_groups: tuple[JSON, ...] = ()
    fused_library_ops: tuple[str, ...] = ()
    unrecorded_ops: tuple[str, ...] = ()
    op_counts: JSON | None = None
    op_counts_before: JSON | None = None
    notes: tuple[str, ...] = ()
    outputs: str | None = None
    inductor_nodes: tuple[JSON, ...] = ()
    inductor_bytes_accessed: int | None = None
    generated_kernel_count: int | None = None
    graphs: int | None = None
    graph_breaks: int | None = None
    # Dynamo's graph breaks and Inductor's fusion refusals, as logged (modes/compile_logs)
    graph_break_records: tuple[JSON, ...] = ()
    fusion_refusals: tuple[JSON, ...] = ()
    # torch.export + AOTInductor: what building the package took, and its size
    export_s: float | None = None
    aot_build_s: float | None = None
    package_bytes: int | None = None
    _tuples = frozenset(
        {
            "fusion_groups",
            "fused_library_ops",
            "unrecorded_ops",
            "notes",
            "inductor_nodes",
            "graph_break_records",
            "fusion_refusals",
        }
    )


@dataclass(frozen=True)
class PeakMemory(Section):
    """Peak memory of one call of a mode (capture/peak_memory.py): bytes None = no event seen."""

    bytes: int | None = None
    source: str = ""
    scope: str = ""


@dataclass(frozen=True)
class Ceiling(Section):
    """One measured ceiling: the best of `samples` samples (`value`), with median and worst."""

    value: float = 0.0
    median: float | None = None
    worst: float | None = None
    samples: int | None = None
    spread_pct: float | None = None
    unit: str = ""
    method: str = ""


@dataclass(frozen=True)
class Ceilings(Section):
    """The machine's measured ceilings (capture/ceilings.py), or why there are none."""

    source: str = "measured"
    reason: str | None = None
    timer: str | None = None
    last_level_cache_bytes: int | None = None
    memory_bandwidth: Ceiling | None = None
    cache_bandwidth: Ceiling | None = None
    matmul_rate: Ceiling | None = None
    measured_utc: str | None = None
    cached: bool | None = None
    _objects = MappingProxyType(
        {"memory_bandwidth": Ceiling, "cache_bandwidth": Ceiling, "matmul_rate": Ceiling}
    )

    @property
    def available(self) -> bool:
        return self.memory_bandwidth is not None and self.matmul_rate is not None

    # How the measurement went, kept beside the ceilings by capture/ceilings.py (not declared
    # fields: records written before have none of them).
    @property
    def other_busy_share(self) -> float | None:
        """Share of all CPU time other processes used while measuring (None: not recorded)."""
        share = self.extra.get("other_busy_share")
        return None if share is None else float(share)

    @property
    def attempts(self) -> int:
        """How many times the ceilings were measured (each the best of them); 1 if not recorded."""
        attempts = self.extra.get("attempts")
        return 1 if attempts is None else int(attempts)

    @property
    def cache_sizes_from(self) -> str | None:
        """Where the cache sizes were read (a sysfs folder, a device property)."""
        where = self.extra.get("cache_sizes_from")
        return None if where is None else str(where)


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

    @property
    def device_idle_us(self) -> float | None:
        if self.device_span_us is None or self.device_busy_us is None:
            return None
        return self.device_span_us - self.device_busy_us

    @property
    def overhead_us(self) -> float:
        """Host time outside kernels (cpu) or launches (device): dispatch, wrappers, Python,
        and on a device trace the runtime calls too."""
        return self.wall_us - (self.op_us or 0.0) - (self.launch_us or 0.0)


@dataclass(frozen=True)
class TimeBreakdown(Section):
    """A mode's profiled steps by where their time went (evidence, from its trace): the step of
    median wall time (upper median) and every step's wall time."""

    definition: str = ""  # "cpu" or "device": which parts `step` has
    source: str = ""
    step: StepTime | None = None
    step_walls_us: tuple[float, ...] = ()
    _objects = MappingProxyType({"step": StepTime})
    _tuples = frozenset({"step_walls_us"})


@dataclass(frozen=True)
class TimeFindings(Section):
    """What a mode's time breakdown shows (a finding, analysis/speedup_breakdown): its bound,
    and against eager, what the profiled step time saved is made of."""

    bound: str = ""  # host-bound | launch-bound | device-bound
    bound_evidence: str = ""
    basis: str | None = None  # which step times the decomposition uses
    eager_step_us: float | None = None
    step_us: float | None = None
    saved_us: float | None = None  # eager step - this step (negative: slower)
    work_saved_us: float | None = None  # kernel (op) time saved
    overhead_saved_us: float | None = None  # host overhead and device idle saved
    eager_ops: int | None = None  # dispatched ops (cpu) or launches (device) per step
    ops: int | None = None
    bytes_saved: int | None = None  # modeled traffic eager - this mode
    bandwidth_bytes_per_s: float | None = None  # measured memory bandwidth (ceilings)
    bytes_bound_us: float | None = None  # bytes_saved / bandwidth: the most bytes can explain
    bytes_credit_us: float | None = None  # min(work saved, bytes_bound): what bytes are credited
    clause: str = ""  # the verdict's clause


@dataclass(frozen=True)
class ModeResult(Section):
    """One mode of a run: evidence (compiler, kernels, bytes, latency) and stored findings
    (`fusion`, `verdict`: a copy for other tools; readers derive their own)."""

    status: str = "ok"
    error: str | None = None
    error_full: str | None = None
    traceback: str | None = None
    compile_s: float | None = None
    output_check: JSON | None = None
    compiler: CompilerEvidence | None = None
    trace: str | None = None
    kernels: KernelCounts | None = None
    latency_ms: Latency | None = None
    speedup_vs_eager: Speedup | None = None
    bytes: Bytes | None = None
    peak_memory: PeakMemory | None = None
    fusion: JSON | None = None
    roofline: JSON | None = None
    why_not_fused: tuple[JSON, ...] | None = None
    time_breakdown: TimeBreakdown | None = None
    time_findings: TimeFindings | None = None
    verdict: str | None = None
    _tuples = frozenset({"why_not_fused"})
    _objects = MappingProxyType(
        {
            "time_breakdown": TimeBreakdown,
            "time_findings": TimeFindings,
            "peak_memory": PeakMemory,
            "compiler": CompilerEvidence,
            "kernels": KernelCounts,
            "latency_ms": Latency,
            "speedup_vs_eager": Speedup,
            "bytes": Bytes,
        }
    )

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def ok_kernels(self) -> KernelCounts:
        """`kernels` of a mode that ran: every ok mode has them (record.validate)."""
        if self.kernels is None:
            raise ValueError(f"a mode with status {self.status!r} has no kernel counts")
        return self.kernels

    @property
    def ok_bytes(self) -> Bytes:
        """`bytes` of a mode that ran: every ok mode has them (record.validate)."""
        if self.bytes is None:
            raise ValueError(f"a mode with status {self.status!r} has no modeled bytes")
        return self.bytes


@dataclass(frozen=True)
class Run(Section):
    """A whole run record (`profreport.run/1`)."""

    schema: str = ""
    tool: Tool | None = None
    created_utc: str | None = None
    model: ModelInfo = field(default_factory=ModelInfo)
    device: Device = field(default_factory=Device)
    env: Environment = field(default_factory=Environment)
    settings: Settings | None = None
    kernel_definition: KernelDefinition | None = None
    modes: Mapping[str, ModeResult] = field(default_factory=dict)
    ceilings: Ceilings | None = None
    timing_noise: JSON | None = None
    timeline: str | None = None
    phases_s: JSON | None = None
    _objects = MappingProxyType(
        {
            "ceilings": Ceilings,
            "tool": Tool,
            "model": ModelInfo,
            "device": Device,
            "env": Environment,
            "settings": Settings,
            "kernel_definition": KernelDefinition,
        }
    )
    _maps = MappingProxyType({"modes": ModeResult})

    def mode(self, name: str) -> ModeResult:
        return self.modes[name]

    @property
    def ok_modes(self) -> dict[str, ModeResult]:
        """The modes that ran (status "ok"), in record order."""
        return {name: mode for name, mode in self.modes.items() if mode.ok}
