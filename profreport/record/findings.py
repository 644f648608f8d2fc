"""What the analyses conclude from a run's evidence (profreport.analysis.derive): the fusion map,
why ops did not fuse, the roofs and the latency floor, the median step, the speedup's call and the
module tree. A record keeps a copy of them for other tools (and the library's result holds them);
profreport's readers derive them again from the evidence.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from profreport.record.evidence import StepTime
from profreport.record.section import ByteCount, Section, omitted, required, required_factory


@dataclass(frozen=True)
class FusionGroup(Section):
    """Eager operations and the kernel(s) that compute them in a mode, with modeled bytes on both
    sides: `saved_bytes` = eager's - the kernels' (negative: the mode added work, such as a
    layout conversion). `fused`: one generated kernel computes several eager calls."""

    eager_ops: tuple[str, ...] = required(())
    kernels: tuple[str, ...] = required(())
    eager_bytes: ByteCount | None = None
    kernel_bytes: ByteCount | None = None
    saved_bytes: ByteCount | None = None
    flops: float | None = None  # the eager calls' FLOPs (flop counter), where all have one
    note: str = ""
    fused: bool | None = None  # None: a record written before the map said so
    # compile only: eager calls computed by several kernels (their eager bytes counted once),
    # counted in another kernel, whose library call this kernel prepares operands for, graph
    # ops no eager call pairs with, and the modules the eager calls ran in
    recomputed: tuple[str, ...] | None = omitted()
    counted_elsewhere: tuple[str, ...] | None = omitted()
    library_operands: tuple[str, ...] | None = omitted()
    graph_only: tuple[str, ...] | None = omitted()
    modules: tuple[str, ...] | None = omitted()
    # the user's source lines of the eager calls ("file.py:N"; analysis/attribution)
    source_lines: tuple[str, ...] | None = omitted()

    @property
    def counts_as_fused(self) -> bool:
        """`fused`; in a record written before it was stored, several eager ops in the group."""
        return self.fused if self.fused is not None else len(self.eager_ops) > 1


@dataclass(frozen=True)
class KernelTraffic(Section):
    """Modeled bytes of one generated kernel (its scheduler nodes summed)."""

    read: ByteCount | None = None
    written: ByteCount | None = None


@dataclass(frozen=True)
class FusionMap(Section):
    """Which eager operations ended up in which kernel of a mode (analysis/fusion.py), and the
    modeled bytes fusion saved over all groups."""

    source: str | None = None  # what the mapping rests on
    groups: tuple[FusionGroup, ...] = ()
    fused_groups: int = 0
    eager_ops_fused: int = 0
    saved_bytes: ByteCount | None = None
    per_kernel: Mapping[str, KernelTraffic] | None = omitted()  # compile: by kernel name


WhyKind = Literal[
    "graph_break",
    "split",
    "refused",
    "not_fused",
    "fused",
    "layout",
    "recompute",
    "fuser_limit",
    "applied",
    "not_applied",
    "unmatched",
]


@dataclass(frozen=True)
class WhyNotFused(Section):
    """One reason ops stayed apart (or did fuse), with what it rests on: `source` (a compiler
    log, the fusion map, the environment, or a documented rule) and `evidence` (the log line,
    graph node or rule text itself); `hint` / `hint_test` only where a change is known to help,
    naming the mode or flag that tests it."""

    kind: WhyKind = required("split")
    ops: tuple[str, ...] = ()  # eager operations involved
    reason: str = ""  # one sentence
    source: str = ""
    evidence: str = ""
    where: str = ""  # graph breaks: file:line in the user's code
    source_text: str = ""  # graph breaks: that line
    hint: str = ""
    hint_test: str = ""
    # where in the model the ops ran (named_modules() paths, "file.py:N"), where recorded
    modules: tuple[str, ...] | None = omitted()
    source_lines: tuple[str, ...] | None = omitted()


@dataclass(frozen=True)
class Roofs(Section):
    """The measured ceilings a roofline uses (analysis/roofline.roofs_of), in bytes/s and FLOP/s:
    the in-cache bandwidth only where the last-level cache's size is known."""

    memory_bytes_per_s: float = required(0.0)
    flops_per_s: float = required(0.0)
    cache_bytes_per_s: float | None = None
    last_level_cache_bytes: ByteCount | None = None


@dataclass(frozen=True)
class KernelsByBound(Section):
    """How many kernels each ceiling bounds."""

    memory: int = 0
    cache: int = 0
    compute: int = 0


@dataclass(frozen=True)
class RooflineFloor(Section):
    """A mode's latency floor (analysis/roofline.py): the sum of its kernels' bound times, the
    measured median against it, and whether they agree (a median below the floor means the
    bytes model or a ceiling is wrong for this run)."""

    floor_ms: float = 0.0
    x_of_floor: float | None = None
    consistent: bool | None = None
    kernels_in_floor: int = 0
    kernels_without_bytes: int = 0
    kernels_by_bound: KernelsByBound | None = None
    note: str = ""


@dataclass(frozen=True)
class TimeFindings(Section):
    """What a mode's time breakdown shows (a finding, analysis/speedup_breakdown): its bound,
    and against eager, what the timed saving is made of. The saving explained is the clock's
    (`saved_us`); the profiled steps, the profiler's cost removed and a median taken per part,
    supply its parts (`work_saved_us` + `overhead_saved_us` = `profiled_saved_us`), and are
    decomposed only where they agree with the clock (`agrees`)."""

    bound: str = ""  # host-bound | launch-bound | device-bound
    bound_evidence: str = ""
    basis: str | None = None  # which step times the decomposition uses
    eager_step_us: float | None = None  # eager's median step, the profiler's cost removed
    step_us: float | None = None  # this mode's
    saved_us: float | None = None  # the timed saving per call, µs (negative: slower)
    work_saved_us: float | None = None  # kernel (op) time saved, inferred ops included
    overhead_saved_us: float | None = None  # host overhead and device idle saved
    eager_ops: int | None = None  # dispatched ops (cpu) or launches (device) per step
    ops: int | None = None
    bytes_saved: int | None = None  # modeled traffic eager - this mode
    bandwidth_bytes_per_s: float | None = None  # measured memory bandwidth (ceilings)
    bytes_bound_us: float | None = None  # bytes_saved / bandwidth: the most bytes can explain
    bytes_credit_us: float | None = None  # min(work saved, bytes_bound): what bytes are credited
    clause: str = ""  # the verdict's clause (short)
    # since issue 35 (absent in findings derived before)
    profiled_saved_us: float | None = omitted()  # eager's profiled step - this one's, cost removed
    unexplained_us: float | None = omitted()  # saved_us - profiled_saved_us
    agrees: bool | None = omitted()  # the two within AGREE_SHARE of eager's timed median
    profiler_cost_us: float | None = omitted()  # removed from this mode's median step
    eager_profiler_cost_us: float | None = omitted()
    inferred_us: float | None = omitted()  # time of ops the profiler cannot see (inferred)
    inferred_ops: tuple[str, ...] | None = omitted()
    steps: int | None = omitted()  # profiled steps each part's median is over (this mode)
    busy: tuple[str, ...] | None = omitted()  # the machine was busy while either was profiled
    payback_calls: float | None = omitted()  # compile_s / the timed saving per call
    detail: str | None = omitted()  # the whole decomposition, for "Where the time goes"


@dataclass(frozen=True)
class MedianStep(Section):
    """A mode's step as the time decomposition reads it (analysis/profiler_cost): each part the
    median over the profiled steps, the profiler's cost removed first where the record measured
    it (`corrected`). `step` holds the parts (its wall: their sum; cpu: `op_us` the recorded
    kernels only, the inferred ops' time in `inferred_us`, taken out of the wrappers); `parts`:
    the parts stacked bottom up (StepTime field names, and `inferred_us`), in µs."""

    step: StepTime = required_factory(StepTime)
    parts: Mapping[str, float] = required_factory(dict)
    inferred_us: float = 0.0
    inferred_ops: tuple[str, ...] = ()
    removed_us: float = 0.0  # the profiler's cost removed (median over the steps)
    profiled_us: float = 0.0  # the step as profiled (median wall)
    steps: int = 0
    corrected: bool = False

    @property
    def cpu(self) -> bool:
        return self.step.op_us is not None

    @property
    def total_us(self) -> float:
        """The step's length: cpu, the host's parts summed; device, the device's."""
        if self.cpu:
            return self.step.wall_us
        return self.step.device_span_us or 0.0

    @property
    def work_us(self) -> float:
        """Kernel time: CPU kernels and the inferred ops (cpu), device busy time (device)."""
        if self.cpu:
            return (self.step.op_us or 0.0) + self.inferred_us
        return self.step.device_busy_us or 0.0

    @property
    def ops(self) -> int:
        return self.step.dispatched_ops if self.cpu else self.step.launches

    @property
    def with_inferred_as_kernels(self) -> StepTime:
        """`step` with the inferred ops in its CPU kernel time (what bounds it)."""
        return dataclasses.replace(self.step, op_us=self.work_us) if self.cpu else self.step


@dataclass(frozen=True)
class TrafficChange(Section):
    """A mode's memory traffic per step against eager's, from one source for every reader
    (analysis/traffic.py): Nsight Compute's DRAM bytes where both modes were measured, else the
    modeled bytes; beside a measured change, the modeled one, and why the two disagree."""

    source: Literal["measured", "modeled"]
    eager_bytes: ByteCount
    mode_bytes: ByteCount
    modeled_percent: float | None = None  # the modeled change, beside a measured one
    differs: str = ""  # why the two sources disagree; "" when they agree (or only one exists)

    @property
    def percent(self) -> float | None:
        """The change in percent; None when eager moved no bytes."""
        if not self.eager_bytes:
            return None
        return (self.mode_bytes - self.eager_bytes) / self.eager_bytes * 100


# The speedup against eager, called (analysis/paired.speedup_call): beyond the paired timer's
# resolution either way, off 1 but within it, unchanged, or not called (the noise guard tripped)
SpeedupCall = Literal["faster", "slower", "within resolution", "unchanged", "inconclusive"]


@dataclass(frozen=True)
class ModuleWork(Section):
    """The work of one mode in a module, its submodules' included (analysis/module_tree): calls
    placed there, their modeled bytes and apportioned profiler time; a call with no modeled
    bytes or no time is counted apart, never as 0."""

    calls: int = 0
    bytes: ByteCount = 0
    bytes_unknown: int = 0
    time_us: float = 0.0
    time_unknown: int = 0


@dataclass(frozen=True)
class ModuleNode(Section):
    """A module (its `named_modules()` path, "" the model), each mode's work in it, its
    children; `repeats` > 1: this node stands for that many structurally identical sibling
    blocks (`last` the last one's name), their work summed."""

    path: str = ""
    name: str = ""
    modes: Mapping[str, ModuleWork] = required_factory(dict)
    children: tuple[ModuleNode, ...] = ()
    repeats: int = 1
    last: str = ""


@dataclass(frozen=True)
class TreeShare(Section):
    """How much of a mode's median step (the profiler's cost removed, where measured) its
    modules hold, and the rest: calls with no module recorded, ops the profiler cannot see
    (inferred, no module), and host time outside kernels (dispatch, wrappers, Python)."""

    mode: str = ""
    step_us: float = 0.0
    placed_us: float = 0.0
    unplaced_us: float = 0.0
    inferred_us: float = 0.0
    outside_us: float = 0.0
    share: float = 0.0  # placed_us / step_us
    corrected: bool = False


@dataclass(frozen=True)
class ModuleTree(Section):
    """The model's module tree with each mode's work (analysis/module_tree), how each mode's
    times were taken, and the share of each mode's median step the tree holds."""

    root: ModuleNode = required_factory(ModuleNode)
    time_methods: Mapping[str, str] = required_factory(dict)  # by mode
    shares: tuple[TreeShare, ...] = ()


@dataclass(frozen=True)
class ModuleSaving(Section):
    """Modeled bytes the fused groups of one module (a group's innermost common module) saved
    in one mode."""

    module: str = ""
    mode: str = ""
    saved_bytes: ByteCount = 0
    fused_groups: int = 0
    source_lines: tuple[str, ...] = ()


@dataclass(frozen=True)
class FailedFinding(Section):
    """A finding of a mode whose derivation raised: a profreport bug, never a fact about the
    model. The mode's evidence stands; its findings from this one on were not derived (each may
    read the one before); `profreport render` derives them again once the bug is fixed."""

    finding: str = required("")  # which one: fusion, kernel_bytes, ..., why_not_fused, verdict
    error: str = required("")  # the exception, `Type: message` on one line
    traceback: str | None = omitted()  # where it raised, for the bug report


@dataclass(frozen=True)
class TokenCost(Section):
    """One mode's cost of a decode step (analysis/decode_tokens): one token per sequence."""

    mode: str = required("")
    kernels: int = required(0)  # per step, profiled
    launches: int = 0  # per step, profiled (device launches; 0 on CPU)
    bytes: ByteCount = required(0)  # per step, modeled
    latency_ms: float | None = None  # per step, measured median
    speedup: float | None = None  # vs eager, measured (paired median) and its 95% CI
    speedup_low: float | None = None
    speedup_high: float | None = None
    tokens_per_s: float | None = None  # batch / latency
    achieved: float | None = None  # bandwidth floor / latency
    host_share: float | None = None  # of the profiled median step, outside kernels
    bound: str | None = None  # the time breakdown's: host-bound | launch-bound | device-bound


@dataclass(frozen=True)
class DecodeTokens(Section):
    """A decode run's cost per token against the bandwidth floor (analysis/decode_tokens)."""

    batch: int = required(1)  # sequences: tokens a step
    floor_bytes: ByteCount = required(0)  # weights + KV read + cache written (modeled, eager)
    floor_ms: float | None = None  # floor_bytes / the measured copy bandwidth
    bandwidth: float | None = None  # B/s, measured
    rows: tuple[TokenCost, ...] = ()
    words: tuple[str, ...] = ()  # overhead- or kernel-bound, what a mode removed
