"""The shapes of the view-models the templates and the Markdown renderers lay out: plain dicts
of strings already formatted (Jinja2 reads them as dicts), declared here so a renderer that reads
a key the view-model does not build is a type error, not an empty cell."""

from __future__ import annotations

from typing import Any, TypedDict

from profreport.record.model import KernelCounts, ModelInfo
from profreport.record.section import JSONObject
from profreport.render.folding import FoldedOps
from profreport.render.headline import Headline
from profreport.render.kernel_diff import KernelDiffModeView
from profreport.render.why_view import WhyRowView


class OutputView(TypedDict):
    text: str  # starts with reference | ok | DIFFERS | not compared | not checked
    differs: bool
    note: str


class FloorCells(TypedDict):
    floor: str
    x_of_floor: str
    inconsistent: str


class KernelCells(TypedDict):
    achieved_bw: str
    achieved_flops: str
    bound: str
    ceiling_pct: str
    over: bool
    note: str


class ModeSummaryView(TypedDict, total=False):
    """One row of the summary table (a mode that did not run has only the first keys)."""

    mode: str
    status: str
    verdict: str
    finding_failed: bool  # the verdict says which finding failed to derive (a bug)
    why_count: int
    error: str
    counts: KernelCounts  # as recorded: kernels per step, launch calls, memcpy, memset
    read: str
    written: str
    total: str
    bytes_source: str
    bytes_partial: bool
    median: str
    iqr: str
    p10_p90: str
    n: int | str
    speedup: str
    compile_s: str
    payback_calls: str  # calls after which the build time is paid back ("1,700"), or ""
    output: OutputView
    floor: FloorCells
    memory: dict[str, str]
    kernel_delta: int


class KernelRowView(TypedDict):
    name: str
    kind: str
    calls_per_step: str
    time_per_step: str
    launched_by: str
    bytes: str
    flops: str
    intensity: str
    bytes_note: str
    source: str
    roofline: KernelCells
    place: str  # the modules and source lines of the row's calls ("" when not recorded)


class BytesRowView(TypedDict):
    op: str
    calls: int
    read: str
    written: str
    flops: str
    intensity: str


class FusionRowView(TypedDict):
    eager_ops: FoldedOps
    kernels: FoldedOps
    count: int  # identical groups (one per layer) this row stands for; bytes are their sum
    eager_bytes: str
    kernel_bytes: str
    saved: str
    saved_sign: str
    note: str
    place: str  # "mixers.1: gelu + sigmoid + mul at blocks.py:13" ("" when not recorded)


class MeasuredKernelView(TypedDict):
    name: str
    calls: int
    read: str
    written: str


class MeasuredView(TypedDict, total=False):
    available: bool
    reason: str
    source: str
    read: str
    written: str
    writes_note: str
    kernels: list[MeasuredKernelView]


class InductorNodeView(TypedDict):
    name: str
    kind: str
    origins: FoldedOps
    read: str
    written: str


class OpChangeView(TypedDict):
    op: str
    before: int
    after: int


class FusionGroupView(TypedDict):
    ops: FoldedOps
    kind: str


class CompilerView(TypedDict, total=False):
    """What the mode's compiler reported: a key is there when the record has that evidence."""

    notes: list[str]
    op_changes: list[OpChangeView]
    outputs: str
    graph: str | None
    fusion_groups: list[FusionGroupView]
    fused_library_ops: list[str]
    inductor_nodes: list[InductorNodeView]
    inductor_kernels: list[str]
    inductor_summary: str


class DetailView(TypedDict, total=False):
    """One mode's section of the report (a mode that did not run: its error instead)."""

    mode: str
    status: str
    verdict: str
    why: list[WhyRowView]
    kernels: list[KernelRowView]
    kernel_count: int
    bytes: list[BytesRowView]
    bytes_method: str
    not_modeled: list[str]
    fusion: list[FusionRowView]
    fusion_source: str
    measured: MeasuredView
    compiler: CompilerView
    trace: str | None
    output: OutputView
    payback: str
    error: str
    traceback: str | None
    # a finding whose derivation raised (a bug): its traceback; the verdict names it
    failed_traceback: str | None


class PageView(TypedDict):
    """The whole report page (and summary.md)."""

    title: str
    created_utc: str | None
    failure_notice: str | None
    tool_version: str | None
    model: ModelInfo  # as the record has it; its parameter count and inputs formatted:
    model_parameters: str
    model_inputs: str
    device: JSONObject  # as the record has it: the template shows its fields by name
    timeline: str | None
    is_cuda: bool
    headline: Headline
    tones: dict[str, str]  # CSS colour of each headline tone (render/palette.py)
    summary: list[ModeSummaryView]
    details: list[DetailView]
    env_rows: list[tuple[str, object]]
    has_roofline: bool
    time_rows: list[dict[str, Any]]  # render/time_view.py
    definition_name: str
    bookkeeping_ops: str
    method: dict[str, str]
    decode: dict[str, Any] | None  # a decode run's per-token section (render/decode_view.py)


class SideView(TypedDict):
    label: str
    created: str
    torch: str
    device: str


class CompareRowView(TypedDict):
    mode: str
    status: str
    kernels: str
    launches: str
    bytes: str
    peak_memory: str
    latency_base: str
    latency_head: str
    latency_change: str
    result: str
    regressed: bool
    css: dict[str, str]  # CSS class per cell, so the template only lays out


class CompareView(TypedDict):
    title: str
    machine: str  # the machine references compared, or why latency could not be checked
    machine_changed: bool
    model_differences: list[str]
    kernel_diffs: list[KernelDiffModeView]
    base: SideView
    head: SideView
    outcome: str
    outcome_mark: str  # ❌, ❔, ✅ or ℹ️ (Markdown)
    regressed: bool
    outcome_class: str
    thresholds: str
    show_launches: bool
    rows: list[CompareRowView]
    regressions: list[str]
    warnings: list[str]
    only_in_base: str
    only_in_head: str
    inconclusive: list[str]
    latency_source: str
