"""Classify trace events and count kernels, launches, copies and fills: the one place that counts.

Two definitions of a "kernel" exist, and every count says which one it used:

* **device** (GPU traces): device activity recorded by the profiler, by event category, never by
  stream. ``kernel`` (legacy ``Kernel``) is a kernel, ``gpu_memcpy`` / ``gpu_memset`` (legacy
  ``Memcpy`` / ``Memset``) a copy / fill. A *launch* is a runtime or driver API call that starts
  device work: cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel, cuLaunchKernelEx,
  cudaLaunchCooperativeKernel, cudaGraphLaunch, hipLaunchKernel, hipExtModuleLaunchKernel,
  hipModuleLaunchKernel, hipGraphLaunch (with optional ``_ptsz`` / ``_v<N>`` suffixes). A graph
  launch is one launch that runs many kernels, so it is also counted in ``graph_launches``.
  Each device event is linked to its API call by correlation id (then the ``ac2g`` flow), and the
  call to the innermost ``cpu_op`` enclosing it on the same thread (else the op with the same
  ``External id``). Kernels with no API call found are counted in ``unlinked_kernels``.
* **cpu** (CPU-only traces): a CPU kernel is a ``cpu_op`` (legacy ``Operator``) that is a
  dispatcher operator (``namespace::name``, e.g. ``aten::``, ``mkldnn::``, ``quantized::``,
  ``prim::``) not in :data:`BOOKKEEPING_OPS`, an Inductor-generated C++ kernel (``cpp_fused_*``,
  ``graph_<N>_cpp_fused_*``), or a TorchScript NNC (TensorExpr) fused CPU kernel (``fused_*``,
  e.g. ``fused_sigmoid_tanh_mul``: recorded as a ``cpu_op`` with no namespace under the
  TorchScript ``forward``, holding at most bookkeeping ops such as the ``aten::empty_strided``
  of its output), or an AOTInductor shim call that runs an operator's kernel directly
  (``aoti_torch_cpu_mm_out``, ``aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu``:
  export's C++ wrapper calls the ATen kernel with no dispatch, so no op of it is recorded beneath;
  the row is named by that operator, ``aten::mm``, and launched by the shim), that is not one of
  :data:`FORWARDING_OPS` (operators that only forward to
  others: ``conv2d`` -> ``convolution``, ``linear`` -> ``addmm``, ``layer_norm``, ``matmul``,
  ``scaled_dot_product_attention``, TorchScript ``prim::If`` ...), and that has no ancestor
  which also qualifies (nesting by time on the same pid/tid). The kernel is thus the operator
  the model called, named as the bytes model names it; what runs inside it is its work (the
  ``copy_`` of ``addmm``'s bias, ``index_select`` under ``embedding``, ``clamp_min`` under
  ``relu``, ``sum`` + ``div_`` under ``mean``, the ``clone`` a layer norm makes of a
  non-contiguous input, ``_nnpack_available`` queried by ``convolution``). Containers
  (``forward``, ``Torch-Compiled Region``, ``TorchDynamo Cache Lookup``,
  ``## Call CompiledFxGraph ##``, ``ProfilerStep#N``, autograd nodes) never qualify. CPU work has
  no launch API: under this definition ``launches`` (and ``launch_api_counts``) are 0, whatever
  runtime calls a GPU trace holds.

The op lists, definition texts and name patterns are in :mod:`profreport.analysis.kernel_definitions`.
Over 400 lines on purpose: the device and CPU counts share one pass over the trace's columns (the
step windows, nesting and linking arrays) and fill one `TraceCounts`; apart, those arrays would
cross a module boundary as a dozen loose parameters.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from statistics import median_high
from typing import Any

import numpy as np

from profreport.analysis._linking import (
    Steps,
    launching_ops,
    link_by_flow,
    match_ids,
    most_common,
    step_rows,
)
from profreport.analysis._nesting import innermost_container, outermost_ancestor
from profreport.analysis.counters import summarize as counter_summary
from profreport.analysis.device_evidence import (
    COUNTER_KERNELS_NOTE,
    COUNTER_RANGE_CAT,
    NOT_RECORDED_NOTE,
    device_evidence,
    pair_ranges_with_launches,
)
from profreport.analysis.device_time import category_rows
from profreport.analysis.kernel_definitions import (
    BOOKKEEPING_OPS,
    CODE_KIND,
    CPU_DEFINITION_TEXT,
    DEVICE_DEFINITION_TEXT,
    DISPATCHER_OP_RE,
    FORWARDING_OPS,
    GRAPH_LAUNCH_RE,
    INDUCTOR_CPP_KERNEL_RE,
    KIND_CODE,
    LAUNCH_API_RE,
    NNC_CPU_KERNEL_RE,
    NOT_DISPATCHER_NAMESPACES,
    aoti_shim_op,
)
from profreport.analysis.kernel_records import counter_ranges, device_info, inductor_records
from profreport.record.model import KernelRow, Section
from profreport.record.section import JSONObject
from profreport.traceio import Trace
from profreport.traceio.categories import CPU_OP_CATS, DEVICE_KINDS, RUNTIME_CATS

__all__ = [
    "BOOKKEEPING_OPS",
    "CPU_DEFINITION_TEXT",
    "DEVICE_DEFINITION_TEXT",
    "FORWARDING_OPS",
    "KernelRow",  # the run record's row (profreport.record.model): one class for both
    "PerStepCounts",
    "StepCounts",
    "TraceCounts",
    "count_kernels",
    "cpu_kernel_rows",
    "per_step",
]


@dataclass(frozen=True)
class StepCounts(Section):
    """One ProfilerStep's counts, as `analyze`'s document writes them too."""

    name: str = ""
    kernels: int = 0
    launches: int = 0
    memcpy: int = 0
    memset: int = 0
    graph_launches: int = 0
    kernel_time_us: float | None = None


@dataclass(frozen=True)
class PerStepCounts(Section):
    """Typical per-step numbers (analysis.kernels.per_step); None: not recorded."""

    kernels: int | None = None
    launches: int | None = None
    memcpy: int | None = None
    memset: int | None = None
    graph_launches: int | None = None
    kernel_time_us: float | None = None
    steps: int = 0


@dataclass(frozen=True)
class TraceCounts:
    definition: str
    device: JSONObject
    kernels: int = 0
    memcpy: int = 0
    memset: int = 0
    launches: int = 0
    graph_launches: int = 0
    memcpy_bytes: int = 0
    memset_bytes: int = 0
    kernel_time_us: float | None = None  # None: no kernel durations recorded (counter ranges only)
    unlinked_kernels: int = 0
    steps: list[StepCounts] = field(default_factory=list)
    table: list[KernelRow] = field(default_factory=list)
    launch_api_counts: dict[str, int] = field(default_factory=dict)
    kernels_by_op: dict[str, int] = field(default_factory=dict)  # launching op -> kernels
    inductor_kernels: list[JSONObject] = field(default_factory=list)  # Inductor kernel records
    counter_ranges: list[JSONObject] = field(default_factory=list)  # cuda_profiler_range per name
    evidence: str = ""  # what decided the definition, in words
    # "recorded": device events present; "counters": the kernels are CUPTI counter ranges (no
    # durations); "not recorded": launch calls but no device-side events; "none": CPU definition
    device_activity: str = "recorded"
    counters: JSONObject | None = None  # trace-wide counter totals and derived figures
    notes: list[str] = field(default_factory=list)


NO_CPU_OP = "(no CPU op)"
UNLINKED = "(unlinked)"


def count_kernels(trace: Trace, definition: str = "auto") -> TraceCounts:
    """Count kernels, copies, fills and launches of ``trace`` under ``definition``.

    ``definition`` is ``"device"``, ``"cpu"`` or ``"auto"``: device when the trace shows device
    work of any kind (kernel, memcpy or memset events, CUPTI counter ranges, or launch calls),
    else cpu; :func:`device_evidence` says which. ``deviceProperties`` alone does not decide it:
    Kineto writes that list into every trace of a CUPTI build, CPU-only profiles included.
    """
    strings = trace.strings
    # One lookup per event: the device kind (1 kernel, 2 memcpy, 3 memset) its category makes it.
    kind = np.fromiter((KIND_CODE.get(DEVICE_KINDS.get(s, ""), 0) for s in strings), np.uint8)
    complete = trace.ph == ord("X")
    dev_code = np.where(complete, kind[trace.cat], 0)
    dev_rows = np.flatnonzero(dev_code)
    if definition not in ("device", "cpu", "auto"):
        raise ValueError(f"unknown kernel definition {definition!r} (device, cpu or auto)")
    range_cat = trace.string_id(COUNTER_RANGE_CAT)
    range_rows = np.flatnonzero(complete & (trace.cat == range_cat))
    launch_name = trace.string_table_mask(LAUNCH_API_RE.match)
    runtime = trace.string_table_mask(lambda c: c.lower() in RUNTIME_CATS)
    rt_rows = np.flatnonzero(complete & runtime[trace.cat])
    launch_rows = rt_rows[launch_name[trace.name[rt_rows]]]
    evidence, device_seen = device_evidence(trace, dev_code[dev_rows], range_rows, launch_rows)
    if definition == "auto":
        definition = "device" if device_seen else "cpu"
    else:
        evidence = f"--definition {definition} given; the trace shows: {evidence}"
    cpu_rows = category_rows(trace, CPU_OP_CATS)
    steps = Steps(trace, step_rows(trace))
    names, counts = np.unique(trace.name[launch_rows], return_counts=True)
    launch_api_counts = {strings[n]: int(c) for n, c in zip(names, counts, strict=True)}
    launch_api_counts = dict(sorted(launch_api_counts.items(), key=lambda kv: -kv[1]))
    device = device_info(
        trace, np.concatenate([dev_rows, range_rows]), launch_api_counts, definition == "device"
    )
    codes = dev_code[dev_rows]
    activity, paired = "recorded", None
    notes: list[str] = []
    if definition == "cpu":  # no launch API: a GPU trace's runtime calls launch no CPU kernel
        activity, launch_api_counts = "none", {}
    elif not np.any(codes == 1) and range_rows.size:
        # No kernel events: each counter range is one kernel launch (Kineto's auto-range mode).
        activity = "counters"
        notes.append(COUNTER_KERNELS_NOTE)
        dev_rows = np.concatenate([dev_rows, range_rows])
        codes = np.concatenate([codes, np.ones(range_rows.size, dtype=codes.dtype)])
        graph = trace.string_table_mask(GRAPH_LAUNCH_RE.match)[trace.name[launch_rows]]
        paired = pair_ranges_with_launches(trace, range_rows, launch_rows, graph)
        if paired is None:
            notes.append(
                f"{range_rows.size:,} counter ranges could not be paired one to one with "
                f"{launch_rows.size:,} launch calls (the numbers differ, a graph launch runs "
                "several kernels, or ranges come from several devices): they count in the "
                "whole-trace totals as unlinked kernels, not per step"
            )
    elif not dev_rows.size and not range_rows.size:
        activity = "not recorded"
        notes.append(NOT_RECORDED_NOTE)
    ranges = counter_ranges(trace)
    common = TraceCounts(
        definition=definition,
        device=device,
        launch_api_counts=launch_api_counts,
        inductor_kernels=inductor_records(trace),
        counter_ranges=ranges,
        evidence=evidence,
        device_activity=activity,
        counters=counter_summary(ranges),
        notes=notes,
    )
    if definition == "cpu":
        return _count_cpu(trace, cpu_rows, steps, common)
    return _count_device(
        trace, dev_rows, codes, rt_rows, launch_rows, cpu_rows, steps, common, paired, range_rows
    )


def _count_device(
    trace: Trace,
    dev_rows: np.ndarray,
    codes: np.ndarray,
    rt_rows: np.ndarray,
    launch_rows: np.ndarray,
    cpu_rows: np.ndarray,
    steps: Steps,
    common: TraceCounts,
    paired: np.ndarray | None,
    range_rows: np.ndarray,
) -> TraceCounts:
    """Device definition: link each device event to its API call and CPU op, then count.

    When the kernels are counter ranges (``common.device_activity == "counters"``) they are
    the last ``range_rows.size`` rows of ``dev_rows``; ``paired`` gives their launch calls.
    """
    strings = trace.strings
    # device event -> API call (correlation, then ac2g flow) -> innermost cpu_op (time, then id)
    rt_of_dev = match_ids(trace.correlation[dev_rows], trace.correlation[rt_rows], rt_rows)
    link_by_flow(trace, dev_rows, rt_of_dev, rt_rows)
    counter_kernels = common.device_activity == "counters"
    untimed = np.zeros(dev_rows.size, dtype=bool)
    if counter_kernels:
        untimed[dev_rows.size - range_rows.size :] = True
        rt_of_dev[untimed] = -1 if paired is None else paired
    linked = rt_of_dev >= 0
    # Only the calls that launched something need their op: a small share of all API calls.
    is_used = np.zeros(len(trace), dtype=bool)
    is_used[rt_of_dev[linked]] = True
    used_rt = np.flatnonzero(is_used)
    op_of_rt, top_of_rt = launching_ops(trace, cpu_rows, used_rt, dispatcher_mask(trace, True))
    op_of_dev = np.where(linked, op_of_rt.get_many(rt_of_dev), -1)
    top_of_dev = np.where(linked, top_of_rt.get_many(rt_of_dev), -1)
    op_name = np.where(op_of_dev >= 0, trace.name[np.maximum(op_of_dev, 0)], -1)
    top_name = np.where(top_of_dev >= 0, trace.name[np.maximum(top_of_dev, 0)], -1)

    # A device event belongs to the step of its launch; unlinked ones go by their own time.
    when = np.where(linked, trace.ts_ns[np.maximum(rt_of_dev, 0)], trace.ts_ns[dev_rows])
    dev_step = steps.assign(when)
    dev_step[untimed & ~linked] = -1  # a synthetic time places a range in no step
    launch_step = steps.assign(trace.ts_ns[launch_rows])
    dur = np.where(untimed, 0, np.maximum(trace.dur_ns[dev_rows], 0))
    nbytes = trace.nbytes[dev_rows]
    from_call = (nbytes < 0) & linked
    nbytes[from_call] = trace.nbytes[rt_of_dev[from_call]]
    graph_name = trace.string_table_mask(GRAPH_LAUNCH_RE.match)
    is_graph = graph_name[trace.name[launch_rows]]
    is_kernel = codes == 1

    per = steps.per
    columns = zip(
        steps.names,
        per(dev_step, is_kernel).tolist(),
        per(launch_step, np.ones(launch_rows.size, bool)).tolist(),
        per(dev_step, codes == 2).tolist(),
        per(dev_step, codes == 3).tolist(),
        per(launch_step, is_graph).tolist(),
        (per(dev_step, is_kernel, dur) / 1000.0).tolist(),
        strict=True,
    )
    timed = not counter_kernels and common.device_activity != "not recorded"
    step_counts = [
        StepCounts(n, int(k), int(la), int(mc), int(ms), int(g), float(t) if timed else None)
        for n, k, la, mc, ms, g, t in columns
    ]
    # Kernels per launching op; kernels with a launch but no op, or no launch, are labelled.
    no_op, unlinked = len(strings), len(strings) + 1
    label = np.where(op_name >= 0, op_name, np.where(linked, no_op, unlinked))[is_kernel]
    labels = [*strings, NO_CPU_OP, UNLINKED]
    kernels_by_op = _label_counts(label, labels)
    return dataclasses.replace(
        common,
        kernels=int(np.count_nonzero(is_kernel)),
        memcpy=int(np.count_nonzero(codes == 2)),
        memset=int(np.count_nonzero(codes == 3)),
        launches=int(launch_rows.size),
        graph_launches=int(np.count_nonzero(is_graph)),
        memcpy_bytes=int(np.maximum(nbytes[codes == 2], 0).sum()),
        memset_bytes=int(np.maximum(nbytes[codes == 3], 0).sum()),
        kernel_time_us=float(dur[is_kernel].sum()) / 1000.0 if timed else None,
        unlinked_kernels=int(np.count_nonzero(is_kernel & ~linked)),
        steps=step_counts,
        table=_device_table(trace, dev_rows, codes, dur, nbytes, op_name, top_name, common),
        kernels_by_op=kernels_by_op,
    )


def _label_counts(label_ids: np.ndarray, labels: list[str]) -> dict[str, int]:
    """Occurrences of each label, most frequent first (ties by label text)."""
    ids, counts = np.unique(label_ids, return_counts=True)
    pairs = [(labels[i], int(c)) for i, c in zip(ids.tolist(), counts.tolist(), strict=True)]
    return dict(sorted(pairs, key=lambda kv: (-kv[1], kv[0])))


def per_step(counts: TraceCounts) -> PerStepCounts:
    """Typical per-step numbers: the upper median over ProfilerSteps, or whole-trace totals.

    The upper median is a value some step really had (a trailing partial step with no work does
    not drag a two-step trace to zero or to a half-way number).
    """
    keys = ("kernels", "launches", "memcpy", "memset", "graph_launches", "kernel_time_us")
    steps = counts.steps
    values: dict[str, Any] = {k: getattr(counts, k) for k in keys}
    if steps:
        values = {k: median_high([getattr(s, k) for s in steps]) for k in keys[:-1]}
        times = [s.kernel_time_us for s in steps]
        known = [t for t in times if t is not None]
        values["kernel_time_us"] = median_high(known) if len(known) == len(times) else None
    if counts.device_activity == "not recorded":
        values.update(dict.fromkeys(UNRECORDED_FIELDS & values.keys()))
    return PerStepCounts(**values, steps=len(steps))


# What a trace with launch calls but no device-side events cannot tell: unknown, not zero.
UNRECORDED_FIELDS = frozenset(
    {"kernels", "memcpy", "memset", "memcpy_bytes", "memset_bytes", "unlinked_kernels"}
)


def dispatcher_mask(trace: Trace, include_bookkeeping: bool) -> np.ndarray:
    """Per-string mask of dispatcher op names (``namespace::name``), bookkeeping ops too or not."""

    def qualifies(name: str) -> bool:
        m = DISPATCHER_OP_RE.match(name)
        if m is None or m.group(1) in NOT_DISPATCHER_NAMESPACES:
            return False
        return include_bookkeeping or name not in BOOKKEEPING_OPS

    return trace.string_table_mask(qualifies)


def _device_table(
    trace: Trace,
    dev_rows: np.ndarray,
    codes: np.ndarray,
    dur: np.ndarray,
    nbytes: np.ndarray,
    op_name: np.ndarray,
    top_name: np.ndarray,
    common: TraceCounts,
) -> list[KernelRow]:
    """One row per (name, kind) of device event; launchers are the most common op names; the
    counter ranges of ``common`` give each kernel its counters."""
    strings = trace.strings
    untimed = common.device_activity == "counters"
    uniq, inv = np.unique(trace.name[dev_rows].astype(np.int64) * 4 + codes, return_inverse=True)
    n = uniq.size
    calls = np.bincount(inv, minlength=n)
    time_ns = np.bincount(inv, weights=dur, minlength=n)
    has_bytes = nbytes >= 0
    byte_sum = np.bincount(inv, weights=np.where(has_bytes, nbytes, 0), minlength=n)
    byte_seen = np.bincount(inv, weights=has_bytes, minlength=n) > 0
    launcher = most_common(inv, op_name, n)
    top = most_common(inv, top_name, n)
    by_name = {r["name"]: r for r in common.counter_ranges}
    rows = []
    for g, key in enumerate(uniq.tolist()):
        name, code = strings[key // 4], key % 4
        group = by_name.get(name)
        rows.append(
            KernelRow(
                name=name,
                kind=CODE_KIND[code],
                calls=int(calls[g]),
                time_us=None if untimed and code == 1 else float(time_ns[g]) / 1000.0,
                launched_by=strings[launcher[g]] if launcher[g] >= 0 else None,
                bytes=int(byte_sum[g]) if byte_seen[g] and code != 1 else None,
                launched_by_top=strings[top[g]] if top[g] >= 0 else None,
                counters=group["metrics"] if group else None,
                counter_totals=group["totals"] if group else None,
            )
        )
    rows.sort(key=lambda r: (-(r.time_us or 0.0), -r.calls, r.name))
    return rows


def cpu_kernel_rows(trace: Trace) -> np.ndarray:
    """Rows of the CPU kernels under the cpu definition (the module docstring), in row order."""
    cpu_rows = category_rows(trace, CPU_OP_CATS)  # the profiled operators
    local, _ = _cpu_kernels(trace, cpu_rows, inductor_records(trace))
    rows: np.ndarray = cpu_rows[local]
    return rows


def shim_kernel_op(name: str) -> str | None:
    """The operator an AOTInductor shim call runs, when that operator is a CPU kernel (neither
    bookkeeping nor forwarding): the shim called its kernel directly, so no op of it is recorded
    beneath the call, and what is (the bias copy of addmm) is its work. None for any other name."""
    op = aoti_shim_op(name)
    if op is None or op in BOOKKEEPING_OPS or op in FORWARDING_OPS:
        return None
    return op


def _named_by_op(trace: Trace, name_ids: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Kernel names with each AOTInductor shim call named by the operator it runs (so export's
    GEMMs pair with compile's by name): the labels (the trace's strings, then the operator names
    no event carries) and ``name_ids`` as indices into them."""
    strings = trace.strings
    ops = {
        name_id: op
        for name_id in np.unique(name_ids).tolist()
        if (op := shim_kernel_op(strings[name_id])) is not None
    }
    if not ops:
        return strings, name_ids
    labels = list(strings)
    added: dict[str, int] = {}
    renamed = name_ids.copy()
    for name_id, op in ops.items():
        target = trace.string_id(op)
        if target < 0:
            target = added.setdefault(op, len(labels))
            if target == len(labels):
                labels.append(op)
        renamed[name_ids == name_id] = target
    return labels, renamed


def _cpu_kernels(
    trace: Trace, cpu_rows: np.ndarray, inductor_kernels: list[JSONObject]
) -> tuple[np.ndarray, np.ndarray]:
    """Indices into ``cpu_rows`` of the CPU kernels, and every op's enclosing op (``parent``)."""
    start = trace.ts_ns[cpu_rows]
    end = start + trace.dur_ns[cpu_rows]
    parent = innermost_container(trace.lane[cpu_rows], start, end, np.ones(cpu_rows.size, bool))
    inductor_cpp = {r["name"] for r in inductor_kernels if r.get("backend") == "cpp"}

    def kernel_outside_dispatch(name: str) -> bool:  # Inductor C++, NNC fused, AOTI shim calls
        if name in inductor_cpp:
            return True
        if INDUCTOR_CPP_KERNEL_RE.match(name) or NNC_CPU_KERNEL_RE.match(name):
            return True
        return shim_kernel_op(name) is not None

    compute = dispatcher_mask(trace, include_bookkeeping=False) | trace.string_table_mask(
        kernel_outside_dispatch
    )
    forwarding = trace.string_table_mask(lambda s: s in FORWARDING_OPS)
    called_local = (compute & ~forwarding)[trace.name[cpu_rows]]
    # The kernel is the operator the model called: everything that runs inside it (helper
    # copies, the index_select of an embedding, the sum and division of a mean) is its work.
    called = np.flatnonzero(called_local)
    return called[outermost_ancestor(parent, called, called_local) < 0], parent


def _count_cpu(
    trace: Trace, cpu_rows: np.ndarray, steps: Steps, common: TraceCounts
) -> TraceCounts:
    """CPU definition: the outermost compute operators, the ones the model called (see the
    module docstring)."""
    kernel_local, parent = _cpu_kernels(trace, cpu_rows, common.inductor_kernels)
    aten = trace.string_table_mask(lambda s: s.startswith("aten::"))[trace.name[cpu_rows]]
    top_local = outermost_ancestor(parent, kernel_local, aten)
    k_rows = cpu_rows[kernel_local]
    recorded = trace.name[k_rows].astype(np.int64)
    labels, k_names = _named_by_op(trace, recorded)
    shim = k_names != recorded
    dur = trace.dur_ns[k_rows]
    k_step, every = steps.assign(trace.ts_ns[k_rows]), np.ones(k_rows.size, bool)
    step_counts = [
        StepCounts(name, int(k), 0, 0, 0, 0, float(t) / 1000.0)
        for name, k, t in zip(
            steps.names, steps.per(k_step, every), steps.per(k_step, every, dur), strict=True
        )
    ]
    # "launched by" for a CPU kernel: the outermost aten:: op it ran under (None at top level),
    # and for an AOTInductor shim call the shim, the name the trace records.
    top_name = np.where(top_local >= 0, trace.name[cpu_rows[np.maximum(top_local, 0)]], -1)
    launched_by = np.where(shim, recorded, top_name)
    none_label = len(labels)
    uniq, inv = np.unique(k_names, return_inverse=True)
    calls = np.bincount(inv, minlength=uniq.size)
    time_ns = np.bincount(inv, weights=dur, minlength=uniq.size)
    launcher = most_common(inv, np.where(launched_by >= 0, launched_by, none_label), uniq.size)
    table = [
        KernelRow(
            name=labels[name_id],
            kind="cpu",
            calls=int(calls[g]),
            time_us=float(time_ns[g]) / 1000.0,
            launched_by=labels[launcher[g]] if 0 <= launcher[g] < none_label else None,
            bytes=None,
        )
        for g, name_id in enumerate(uniq.tolist())
    ]
    table.sort(key=lambda r: (-(r.time_us or 0.0), -r.calls, r.name))
    return dataclasses.replace(
        common,
        kernels=int(k_rows.size),
        kernel_time_us=float(dur.sum()) / 1000.0,
        steps=step_counts,
        table=table,
        kernels_by_op=_label_counts(np.where(top_name >= 0, top_name, k_names), labels),
    )
