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
  ``prim::``) not in :data:`BOOKKEEPING_OPS`, or an Inductor-generated C++ kernel
  (``cpp_fused_*``, ``graph_<N>_cpp_fused_*``), and that has no descendant which also qualifies
  (nesting by time on the same pid/tid). Containers (``forward``, ``Torch-Compiled Region``,
  ``TorchDynamo Cache Lookup``, ``## Call CompiledFxGraph ##``, ``ProfilerStep#N``, autograd
  nodes) never qualify. Each CPU kernel is one dispatch, so under this definition ``launches``
  equals ``kernels``.

BOOKKEEPING_OPS (metadata, allocation and aliasing ops that move no data): ``aten::`` empty,
empty_strided, empty_like, new_empty, new_empty_strided, resize_, as_strided, as_strided_, view,
_unsafe_view, reshape, _reshape_alias, view_as, flatten, unflatten, squeeze, squeeze_, unsqueeze,
unsqueeze_, expand, expand_as, broadcast_to, permute, movedim, transpose, transpose_, swapaxes,
t, numpy_T, select, slice, narrow, unfold, diagonal, split, split_with_sizes, unsafe_split,
tensor_split, chunk, unsafe_chunk, unbind, alias, detach, detach_, lift, lift_fresh, set_, to,
type_as, contiguous, dropout, feature_dropout, item, _local_scalar_dense, size, stride, dim,
numel, sym_size, sym_stride, sym_numel, is_contiguous, result_type, is_nonzero, is_same_size,
resolve_conj, resolve_neg, _conj, conj, _neg_view, view_as_real, view_as_complex,
_has_compatible_shallow_copy_type, record_stream; ``inductor::_reinterpret_tensor``; and the
TorchScript ``prim::`` glue ops ListConstruct, ListUnpack, TupleConstruct, TupleUnpack,
Constant, GetAttr, NumToTensor, device, dtype. (aten::to / contiguous / dropout are leaves only
when they are no-ops; when they copy, their child ``copy_`` is the kernel.)
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np

from profreport.analysis._nesting import innermost_container, mark_ancestors, outermost_ancestor
from profreport.analysis.kernel_records import counter_ranges, device_info, inductor_records
from profreport.analysis.trace import Trace

__all__ = [
    "BOOKKEEPING_OPS",
    "CPU_DEFINITION_TEXT",
    "DEVICE_DEFINITION_TEXT",
    "KernelRow",
    "StepCounts",
    "TraceCounts",
    "count_kernels",
    "per_step",
]

_ATEN_BOOKKEEPING = """
empty empty_strided empty_like new_empty new_empty_strided resize_ as_strided as_strided_ view
_unsafe_view reshape _reshape_alias view_as flatten unflatten squeeze squeeze_ unsqueeze unsqueeze_
expand expand_as broadcast_to permute movedim transpose transpose_ swapaxes t numpy_T select slice
narrow unfold diagonal split split_with_sizes unsafe_split tensor_split chunk unsafe_chunk unbind
alias detach detach_ lift lift_fresh set_ to type_as contiguous dropout feature_dropout item
_local_scalar_dense size stride dim numel sym_size sym_stride sym_numel is_contiguous result_type
is_nonzero is_same_size resolve_conj resolve_neg _conj conj _neg_view view_as_real view_as_complex
_has_compatible_shallow_copy_type record_stream
"""
_PRIM_BOOKKEEPING = (
    "ListConstruct ListUnpack TupleConstruct TupleUnpack Constant GetAttr NumToTensor device dtype"
)
BOOKKEEPING_OPS: frozenset[str] = frozenset(
    [f"aten::{op}" for op in _ATEN_BOOKKEEPING.split()]
    + [f"prim::{op}" for op in _PRIM_BOOKKEEPING.split()]
    + ["inductor::_reinterpret_tensor"]
)

DEVICE_DEFINITION_TEXT = (
    "Device definition: a kernel is a device activity event whose category is `kernel`; copies "
    "and fills are `gpu_memcpy` / `gpu_memset` events (bytes from the event, or from its API call "
    "when only the call records them). A launch is a runtime/driver API call that starts device "
    "work (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch, hipLaunchKernel, "
    "hipExtModuleLaunchKernel and their variants); one graph launch runs many kernels and is also "
    "counted as a graph launch. Each kernel is tied to its launch by correlation id and to the "
    "innermost CPU operator around that launch; kernels with no launch found are counted as "
    "unlinked, never dropped. Counts are per ProfilerStep when the trace has steps."
)
CPU_DEFINITION_TEXT = (
    "CPU definition: a CPU kernel is a profiled operator (`cpu_op`) that is a dispatcher "
    "operator (aten::, mkldnn::, quantized::, prim:: ...) other than the documented bookkeeping "
    "ops that only allocate, alias or reshape (aten::empty, view, reshape, as_strided, t, ...), or "
    "an Inductor-generated C++ kernel (cpp_fused_*), and that contains no other such operator. "
    "Containers (forward, compiled regions, autograd nodes, ProfilerStep) are never kernels. "
    "Each CPU kernel is one dispatch, so launches equal kernels under this definition."
)

DEVICE_KINDS = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
}
_KIND_CODE = {"kernel": 1, "memcpy": 2, "memset": 3}
_CODE_KIND = {v: k for k, v in _KIND_CODE.items()}
_RUNTIME_CATS = frozenset(
    {"cuda_runtime", "cuda_driver", "runtime", "driver", "hip_runtime", "hip_driver"}
    | {"privateuse1_runtime", "privateuse1_driver"}
)
_CPU_OP_CATS = frozenset({"cpu_op", "Operator"})
_STEP_CATS = frozenset({"user_annotation", "cpu_op", "Operator", "User annotation"})
LAUNCH_API_RE = re.compile(
    r"^(?:cudaLaunchKernel|cudaLaunchKernelExC|cuLaunchKernel|cuLaunchKernelEx|"
    r"cudaLaunchCooperativeKernel|cudaGraphLaunch|hipLaunchKernel|hipExtModuleLaunchKernel|"
    r"hipModuleLaunchKernel|hipGraphLaunch)(?:_ptsz|_ptds)?(?:_v\d+)?$"
)
GRAPH_LAUNCH_RE = re.compile(r"^(?:cudaGraphLaunch|hipGraphLaunch)(?:_ptsz|_ptds)?(?:_v\d+)?$")
STEP_RE = re.compile(r"^ProfilerStep#\d+$")
DISPATCHER_OP_RE = re.compile(r"^([A-Za-z_]\w*)::[A-Za-z_][\w.]*$")
INDUCTOR_CPP_KERNEL_RE = re.compile(r"^(?:graph_\d+_)?cpp_fused_\w*$")
_NOT_DISPATCHER_NAMESPACES = frozenset({"autograd", "torch", "c10", "profiler"})


@dataclass(frozen=True)
class KernelRow:
    """One distinct kernel name with its totals over the whole trace."""

    name: str
    kind: str  # "kernel" | "memcpy" | "memset" | "cpu"
    calls: int
    time_us: float
    launched_by: str | None
    bytes: int | None
    launched_by_top: str | None = None  # outermost dispatcher op around the launching op
    counters: dict | None = None  # cuda_profiler_range metrics, mean per range


@dataclass(frozen=True)
class StepCounts:
    name: str
    kernels: int
    launches: int
    memcpy: int
    memset: int
    graph_launches: int
    kernel_time_us: float


@dataclass(frozen=True)
class TraceCounts:
    definition: str
    device: dict
    kernels: int
    memcpy: int
    memset: int
    launches: int
    graph_launches: int
    memcpy_bytes: int
    memset_bytes: int
    kernel_time_us: float
    unlinked_kernels: int
    steps: list[StepCounts]
    table: list[KernelRow]
    launch_api_counts: dict[str, int]
    kernels_by_op: dict[str, int] = field(default_factory=dict)  # launching op -> kernels
    inductor_kernels: list[dict] = field(default_factory=list)  # Inductor kernel records
    counter_ranges: list[dict] = field(default_factory=list)  # cuda_profiler_range per name


NO_CPU_OP = "(no CPU op)"
UNLINKED = "(unlinked)"


def count_kernels(trace: Trace, definition: str = "auto") -> TraceCounts:
    """Count kernels, copies, fills and launches of ``trace`` under ``definition``.

    ``definition`` is ``"device"``, ``"cpu"`` or ``"auto"`` (device when the trace holds any
    device kernel, memcpy or memset event, else cpu).
    """
    strings = trace.strings
    is_x = trace.ph == ord("X")
    cat_code = np.array([_KIND_CODE.get(DEVICE_KINDS.get(s, ""), 0) for s in strings], np.int8)
    dev_code = np.where(is_x, cat_code[trace.cat], 0)
    dev_rows = np.flatnonzero(dev_code)
    if definition == "auto":
        definition = "device" if dev_rows.size else "cpu"
    if definition not in ("device", "cpu"):
        raise ValueError(f"unknown kernel definition {definition!r} (device, cpu or auto)")

    launch_name = trace.string_table_mask(LAUNCH_API_RE.match)
    graph_name = trace.string_table_mask(GRAPH_LAUNCH_RE.match)
    runtime_cat = trace.string_table_mask(lambda s: s.lower() in _RUNTIME_CATS)
    rt_rows = np.flatnonzero(is_x & runtime_cat[trace.cat])
    launch_rows = rt_rows[launch_name[trace.name[rt_rows]]]
    cpu_rows = np.flatnonzero(
        is_x & trace.string_table_mask(_CPU_OP_CATS.__contains__)[trace.cat] & (trace.dur_ns >= 0)
    )
    steps = _step_spans(trace, is_x)
    launch_api_counts = dict(Counter(strings[i] for i in trace.name[launch_rows].tolist()))
    device = device_info(trace, dev_rows, launch_api_counts)
    records = inductor_records(trace)
    ranges = counter_ranges(trace)
    if definition == "cpu":
        return _count_cpu(trace, cpu_rows, steps, device, launch_api_counts, records, ranges)

    # Link: device event -> API call (correlation, then flow) -> innermost cpu_op (time, then id).
    rt_of_dev = _match_ids(trace.correlation[dev_rows], trace.correlation[rt_rows], rt_rows)
    _link_by_flow(trace, dev_rows, rt_of_dev, rt_rows)
    linked = rt_of_dev >= 0
    op_of_rt, top_of_rt = _launching_ops(trace, cpu_rows, rt_rows)
    op_of_dev = np.where(linked, op_of_rt.get_many(rt_of_dev), -1)
    top_of_dev = np.where(linked, top_of_rt.get_many(rt_of_dev), -1)

    when = np.where(linked, trace.ts_ns[np.where(linked, rt_of_dev, 0)], trace.ts_ns[dev_rows])
    dev_step = steps.assign(when)
    launch_step = steps.assign(trace.ts_ns[launch_rows])
    codes = dev_code[dev_rows]
    dur = np.maximum(trace.dur_ns[dev_rows], 0)
    nbytes = trace.nbytes[dev_rows]
    missing = (nbytes < 0) & linked
    nbytes[missing] = trace.nbytes[rt_of_dev[missing]]
    is_graph = graph_name[trace.name[launch_rows]]

    step_counts = []
    for i, step_name in enumerate(steps.names):
        in_step = dev_step == i
        launch_in = launch_step == i
        step_counts.append(
            StepCounts(
                name=step_name,
                kernels=int(np.count_nonzero(in_step & (codes == 1))),
                launches=int(np.count_nonzero(launch_in)),
                memcpy=int(np.count_nonzero(in_step & (codes == 2))),
                memset=int(np.count_nonzero(in_step & (codes == 3))),
                graph_launches=int(np.count_nonzero(launch_in & is_graph)),
                kernel_time_us=float(dur[in_step & (codes == 1)].sum()) / 1000.0,
            )
        )
    op_label = [
        strings[trace.name[o]] if o >= 0 else (NO_CPU_OP if ok else UNLINKED)
        for o, ok in zip(op_of_dev.tolist(), linked.tolist(), strict=True)
    ]
    kernels_by_op = Counter(lbl for lbl, c in zip(op_label, codes.tolist(), strict=True) if c == 1)
    table = _device_table(trace, dev_rows, codes, dur, nbytes, op_of_dev, top_of_dev, ranges)
    return TraceCounts(
        definition="device",
        device=device,
        kernels=int(np.count_nonzero(codes == 1)),
        memcpy=int(np.count_nonzero(codes == 2)),
        memset=int(np.count_nonzero(codes == 3)),
        launches=int(launch_rows.size),
        graph_launches=int(np.count_nonzero(is_graph)),
        memcpy_bytes=int(np.maximum(nbytes[codes == 2], 0).sum()),
        memset_bytes=int(np.maximum(nbytes[codes == 3], 0).sum()),
        kernel_time_us=float(dur[codes == 1].sum()) / 1000.0,
        unlinked_kernels=int(np.count_nonzero((codes == 1) & ~linked)),
        steps=step_counts,
        table=table,
        launch_api_counts=launch_api_counts,
        kernels_by_op=dict(kernels_by_op.most_common()),
        inductor_kernels=records,
        counter_ranges=ranges,
    )


def per_step(counts: TraceCounts) -> dict:
    """Typical per-step numbers: the upper median over ProfilerSteps, or whole-trace totals.

    The upper median is a value some step really had (a trailing partial step with no work does
    not drag a two-step trace to zero or to a half-way number).
    """
    keys = ("kernels", "launches", "memcpy", "memset", "graph_launches")
    if not counts.steps:
        out = {k: getattr(counts, k) for k in keys}
        out["kernel_time_us"] = counts.kernel_time_us
        out["steps"] = 0
        return out
    out = {k: _median_high([getattr(s, k) for s in counts.steps]) for k in keys}
    out["kernel_time_us"] = _median_high([s.kernel_time_us for s in counts.steps])
    out["steps"] = len(counts.steps)
    return out


def _median_high(values: list):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


class _RowMap:
    """Row -> value lookup backed by a sorted array (vectorised ``dict.get`` with default -1)."""

    def __init__(self, keys: np.ndarray, values: np.ndarray) -> None:
        order = np.argsort(keys, kind="stable")
        self.keys, self.values = keys[order], values[order]

    def get_many(self, query: np.ndarray) -> np.ndarray:
        if not self.keys.size:
            return np.full(query.shape[0], -1, dtype=np.int64)
        pos = np.clip(np.searchsorted(self.keys, query), 0, self.keys.size - 1)
        return np.where(self.keys[pos] == query, self.values[pos], -1)


def _match_ids(query: np.ndarray, keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each query id, the row of the first key equal to it (ids < 0 never match)."""
    valid = keys >= 0
    out = _RowMap(keys[valid], rows[valid]).get_many(query)
    out[query < 0] = -1
    return out


def _link_by_flow(trace: Trace, dev_rows: np.ndarray, rt_of_dev: np.ndarray, rt_rows) -> None:
    """Link device events without a correlation id through the ``ac2g`` flow arriving at them."""
    todo = np.flatnonzero(rt_of_dev < 0)
    flow_end = np.flatnonzero((trace.ph == ord("f")) & (trace.flow_id >= 0))
    if not todo.size or not flow_end.size:
        return
    at = {
        (lane, ts): fid
        for lane, ts, fid in zip(
            trace.lane[flow_end].tolist(),
            trace.ts_ns[flow_end].tolist(),
            trace.flow_id[flow_end].tolist(),
            strict=True,
        )
    }
    rows = dev_rows[todo]
    ids = np.array(
        [
            at.get(key, -1)
            for key in zip(trace.lane[rows].tolist(), trace.ts_ns[rows].tolist(), strict=True)
        ],
        dtype=np.int64,
    )
    rt_of_dev[todo] = _match_ids(ids, trace.correlation[rt_rows], rt_rows)


def _lane(trace: Trace, rows: np.ndarray) -> np.ndarray:
    return trace.lane[rows]


def _dispatcher_mask(trace: Trace, include_bookkeeping: bool) -> np.ndarray:
    def qualifies(name: str) -> bool:
        m = DISPATCHER_OP_RE.match(name)
        if m is None or m.group(1) in _NOT_DISPATCHER_NAMESPACES:
            return False
        return include_bookkeeping or name not in BOOKKEEPING_OPS

    return trace.string_table_mask(qualifies)


def _launching_ops(trace: Trace, cpu_rows: np.ndarray, rt_rows: np.ndarray):
    """API-call row -> innermost enclosing cpu_op row, and the outermost dispatcher op above it."""
    rows = np.concatenate([cpu_rows, rt_rows])
    start = trace.ts_ns[rows]
    end = start + np.maximum(trace.dur_ns[rows], 0)
    is_cont = np.arange(rows.size) < cpu_rows.size
    parent = innermost_container(_lane(trace, rows), start, end, is_cont)
    rt_local = np.arange(cpu_rows.size, rows.size)
    op_local = parent[rt_local]
    # Fallback when no op encloses the call in time: the cpu_op carrying the same External id.
    by_ext = _match_ids(trace.external_id[rt_rows], trace.external_id[cpu_rows], cpu_rows)
    op_rows = np.where(op_local >= 0, rows[np.maximum(op_local, 0)], by_ext)
    # Outermost dispatcher op: the op itself counts as a candidate, then its ancestors.
    aten = _dispatcher_mask(trace, include_bookkeeping=True)[trace.name[rows]]
    local_of = _RowMap(rows[: cpu_rows.size], np.arange(cpu_rows.size)).get_many(op_rows)
    has_op = local_of >= 0
    top_local = np.full(rt_rows.size, -1, dtype=np.int64)
    top_local[has_op] = outermost_ancestor(parent, local_of[has_op], aten)
    self_ok = has_op & (top_local < 0) & aten[np.maximum(local_of, 0)]
    top_local[self_ok] = local_of[self_ok]
    top_rows = np.where(top_local >= 0, rows[np.maximum(top_local, 0)], -1)
    return _RowMap(rt_rows, op_rows), _RowMap(rt_rows, top_rows)


class _Steps:
    def __init__(self, names: list[str], start: np.ndarray, end: np.ndarray) -> None:
        self.names, self.start, self.end = names, start, end

    def assign(self, when: np.ndarray) -> np.ndarray:
        """Index of the step whose span holds each time, -1 outside every step."""
        if not self.names:
            return np.full(when.shape[0], -1, dtype=np.int64)
        idx = np.searchsorted(self.start, when, side="right") - 1
        ok = (idx >= 0) & (when < self.end[np.maximum(idx, 0)])
        return np.where(ok, idx, -1)


def _step_spans(trace: Trace, is_x: np.ndarray) -> _Steps:
    step_name = trace.string_table_mask(STEP_RE.match)
    step_cat = trace.string_table_mask(_STEP_CATS.__contains__)
    rows = np.flatnonzero(is_x & step_name[trace.name] & step_cat[trace.cat])
    rows = rows[np.argsort(trace.ts_ns[rows], kind="stable")]
    start = trace.ts_ns[rows]
    end = start + np.maximum(trace.dur_ns[rows], 0)
    return _Steps([trace.strings[i] for i in trace.name[rows].tolist()], start, end)


def _device_table(trace, dev_rows, codes, dur, nbytes, op_of_dev, top_of_dev, ranges):
    strings = trace.strings
    groups: dict[tuple, list] = defaultdict(lambda: [0, 0, Counter(), Counter(), -1])
    for name_id, code, d, b, op, top in zip(
        trace.name[dev_rows].tolist(),
        codes.tolist(),
        dur.tolist(),
        nbytes.tolist(),
        op_of_dev.tolist(),
        top_of_dev.tolist(),
        strict=True,
    ):
        g = groups[(name_id, code)]
        g[0] += 1
        g[1] += d
        if op >= 0:
            g[2][op] += 1
        if top >= 0:
            g[3][top] += 1
        if b >= 0:
            g[4] = max(g[4], 0) + b
    by_name = {r["name"]: r["metrics"] for r in ranges}
    rows = []
    for (name_id, code), (calls, total, ops, tops, nb) in groups.items():
        name = strings[name_id]
        rows.append(
            KernelRow(
                name=name,
                kind=_CODE_KIND[code],
                calls=calls,
                time_us=total / 1000.0,
                launched_by=_most_common_name(trace, ops),
                bytes=nb if nb >= 0 and code != 1 else None,
                launched_by_top=_most_common_name(trace, tops),
                counters=by_name.get(name),
            )
        )
    rows.sort(key=lambda r: (-r.time_us, -r.calls, r.name))
    return rows


def _most_common_name(trace: Trace, rows: Counter) -> str | None:
    if not rows:
        return None
    named = Counter()
    for row, n in rows.items():
        named[trace.strings[trace.name[row]]] += n
    return max(named.items(), key=lambda kv: (kv[1], kv[0]))[0]


def _count_cpu(trace, cpu_rows, steps, device, launch_api_counts, records, ranges) -> TraceCounts:
    """CPU definition: leaf-most compute operators (see module docstring)."""
    strings = trace.strings
    start = trace.ts_ns[cpu_rows]
    end = start + trace.dur_ns[cpu_rows]
    parent = innermost_container(
        _lane(trace, cpu_rows), start, end, np.ones(cpu_rows.size, dtype=bool)
    )
    inductor_names = {r["name"] for r in records if r.get("backend") == "cpp"}
    compute = _dispatcher_mask(trace, include_bookkeeping=False) | trace.string_table_mask(
        lambda s: bool(INDUCTOR_CPP_KERNEL_RE.match(s)) or s in inductor_names
    )
    qualifies = compute[trace.name[cpu_rows]]
    qual_local = np.flatnonzero(qualifies)
    kernel_local = qual_local[~mark_ancestors(parent, qual_local)[qual_local]]
    aten = trace.string_table_mask(lambda s: s.startswith("aten::"))[trace.name[cpu_rows]]
    top_local = outermost_ancestor(parent, kernel_local, aten)
    k_rows = cpu_rows[kernel_local]
    dur = trace.dur_ns[k_rows]
    k_step = steps.assign(trace.ts_ns[k_rows])
    step_counts = []
    for i, step_name in enumerate(steps.names):
        in_step = k_step == i
        n = int(np.count_nonzero(in_step))
        t_us = float(dur[in_step].sum()) / 1000.0
        step_counts.append(StepCounts(step_name, n, n, 0, 0, 0, t_us))
    groups: dict[int, list] = defaultdict(lambda: [0, 0, Counter()])
    by_top: Counter = Counter()
    for name_id, d, top in zip(
        trace.name[k_rows].tolist(), dur.tolist(), top_local.tolist(), strict=True
    ):
        g = groups[name_id]
        g[0] += 1
        g[1] += d
        label = strings[trace.name[cpu_rows[top]]] if top >= 0 else None
        g[2][label] += 1
        by_top[label or strings[name_id]] += 1
    table = [
        KernelRow(
            name=strings[name_id],
            kind="cpu",
            calls=calls,
            time_us=total / 1000.0,
            launched_by=max(tops.items(), key=lambda kv: (kv[1], kv[0] or ""))[0],
            bytes=None,
        )
        for name_id, (calls, total, tops) in groups.items()
    ]
    table.sort(key=lambda r: (-r.time_us, -r.calls, r.name))
    n_kernels = int(k_rows.size)
    return TraceCounts(
        definition="cpu",
        device=device,
        kernels=n_kernels,
        memcpy=0,
        memset=0,
        launches=n_kernels,
        graph_launches=0,
        memcpy_bytes=0,
        memset_bytes=0,
        kernel_time_us=float(dur.sum()) / 1000.0,
        unlinked_kernels=0,
        steps=step_counts,
        table=table,
        launch_api_counts=launch_api_counts,
        kernels_by_op=dict(by_top.most_common()),
        inductor_kernels=records,
        counter_ranges=ranges,
    )
