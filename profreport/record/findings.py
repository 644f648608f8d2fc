"""What the analyses conclude from a mode's evidence (profreport.analysis.derive): the fusion map,
why ops did not fuse, and the latency floor. A record keeps a copy of them for other tools;
profreport's readers derive them again from the evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from profreport.record.section import ByteCount, Section, omitted, required


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
class FailedFinding(Section):
    """A finding of a mode whose derivation raised: a profreport bug, never a fact about the
    model. The mode's evidence stands; its findings from this one on were not derived (each may
    read the one before); `profreport render` derives them again once the bug is fixed."""

    finding: str = required("")  # which one: fusion, kernel_bytes, ..., why_not_fused, verdict
    error: str = required("")  # the exception, `Type: message` on one line
    traceback: str | None = omitted()  # where it raised, for the bug report
