"""Mechanics shared by the kernel counts: id lookups, launch -> CPU op links, steps, grouping.

Pure numpy helpers; which events are kernels, launches or ops is decided in
:mod:`profreport.analysis.kernels` and passed in as row sets and masks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from profreport.analysis._nesting import innermost_container, outermost_ancestor
from profreport.analysis.kernel_definitions import STEP_RE
from profreport.traceio import Trace
from profreport.traceio.categories import STEP_CATS


class RowMap:
    """Key -> value lookup backed by a sorted array (vectorised ``dict.get`` with default -1)."""

    def __init__(self, keys: np.ndarray, values: np.ndarray) -> None:
        order = np.argsort(keys, kind="stable")
        self.keys, self.values = keys[order], values[order]

    def get_many(self, query: np.ndarray) -> np.ndarray:
        if not self.keys.size:
            return np.full(query.shape[0], -1, dtype=np.int64)
        pos = np.clip(np.searchsorted(self.keys, query), 0, self.keys.size - 1)
        return np.where(self.keys[pos] == query, self.values[pos], -1)


def match_ids(query: np.ndarray, keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """For each query id, the row of the first key equal to it (ids < 0 never match)."""
    valid = keys >= 0
    out = RowMap(keys[valid], rows[valid]).get_many(query)
    out[query < 0] = -1
    return out


def link_by_flow(
    trace: Trace, dev_rows: np.ndarray, rt_of_dev: np.ndarray, rt_rows: np.ndarray
) -> None:
    """Link device events without a correlation id through the ``ac2g`` flow arriving at them.

    Kineto binds a flow end (``ph: f``) to the event at the same lane and time, and the flow id
    is the correlation id of the API call.
    """
    todo = np.flatnonzero(rt_of_dev < 0)
    flow_end = np.flatnonzero((trace.ph == ord("f")) & (trace.flow_id >= 0))
    if not todo.size or not flow_end.size:
        return
    ends = zip(trace.lane[flow_end].tolist(), trace.ts_ns[flow_end].tolist(), strict=True)
    at = dict(zip(ends, trace.flow_id[flow_end].tolist(), strict=True))
    rows = dev_rows[todo]
    keys = zip(trace.lane[rows].tolist(), trace.ts_ns[rows].tolist(), strict=True)
    ids = np.array([at.get(key, -1) for key in keys], dtype=np.int64)
    rt_of_dev[todo] = match_ids(ids, trace.correlation[rt_rows], rt_rows)


def launching_ops(
    trace: Trace, cpu_rows: np.ndarray, rt_rows: np.ndarray, top_eligible: np.ndarray
) -> tuple[RowMap, RowMap]:
    """API-call row -> innermost cpu_op around it, and the outermost eligible op above that.

    The innermost op is found by time on the call's thread, else by equal ``External id``.
    ``top_eligible`` is a per-string mask (dispatcher ops); the op itself may be its own top.
    Returns two :class:`RowMap` keyed by API-call row (value -1: none).
    """
    rows = np.concatenate([cpu_rows, rt_rows])
    start = trace.ts_ns[rows]
    end = start + np.maximum(trace.dur_ns[rows], 0)
    is_cont = np.arange(rows.size) < cpu_rows.size
    parent = innermost_container(trace.lane[rows], start, end, is_cont)
    op_local = parent[cpu_rows.size :]
    by_ext = match_ids(trace.external_id[rt_rows], trace.external_id[cpu_rows], cpu_rows)
    op_rows = np.where(op_local >= 0, rows[np.maximum(op_local, 0)], by_ext)
    eligible = top_eligible[trace.name[rows]]
    local_of = RowMap(cpu_rows, np.arange(cpu_rows.size)).get_many(op_rows)
    has_op = local_of >= 0
    top_local = np.full(rt_rows.size, -1, dtype=np.int64)
    top_local[has_op] = outermost_ancestor(parent, local_of[has_op], eligible)
    self_top = has_op & (top_local < 0) & eligible[np.maximum(local_of, 0)]
    top_local[self_top] = local_of[self_top]
    top_rows = np.where(top_local >= 0, rows[np.maximum(top_local, 0)], -1)
    return RowMap(rt_rows, op_rows), RowMap(rt_rows, top_rows)


def step_rows(trace: Trace) -> np.ndarray:
    """Rows of the ``ProfilerStep#N`` ranges (complete events of a step category)."""
    cats = trace.string_table_mask(lambda c: c in STEP_CATS)
    names = trace.string_table_mask(STEP_RE.match)
    return np.flatnonzero((trace.ph == ord("X")) & cats[trace.cat] & names[trace.name])


class Steps:
    """ProfilerStep spans, sorted by start; ``assign`` maps times to step indices."""

    def __init__(self, trace: Trace, rows: np.ndarray) -> None:
        rows = rows[np.argsort(trace.ts_ns[rows], kind="stable")]
        self.names = [trace.strings[i] for i in trace.name[rows].tolist()]
        self.start = trace.ts_ns[rows]
        self.end = self.start + np.maximum(trace.dur_ns[rows], 0)

    def assign(self, when: np.ndarray) -> np.ndarray:
        """Index of the step whose span holds each time, -1 outside every step."""
        return assign_to_spans(self.start, self.end, when)

    def per(self, step_of: np.ndarray, mask: np.ndarray, weights: np.ndarray | None = None) -> Any:
        """Per step, how many rows of ``mask`` it holds (``step_of``: each row's step, -1 none),
        or the sum of their ``weights``."""
        n, sel = len(self.names), mask & (step_of >= 0)
        return np.bincount(step_of[sel], None if weights is None else weights[sel], n)[:n]


def assign_to_spans(start: np.ndarray, end: np.ndarray, when: np.ndarray) -> np.ndarray:
    """Index of the span (sorted by ``start``) whose ``[start, end)`` holds each time (the
    latest-starting one), -1 outside every span."""
    if not start.size:
        return np.full(when.shape[0], -1, dtype=np.int64)
    idx = np.searchsorted(start, when, side="right") - 1
    ok = (idx >= 0) & (when < end[np.maximum(idx, 0)])
    return np.where(ok, idx, -1)


def most_common(groups: np.ndarray, labels: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group, its most frequent label (ties: the smallest label); -1 for groups without one.

    Labels are non-negative ints; rows with a negative label are ignored.
    """
    out = np.full(n_groups, -1, dtype=np.int64)
    ok = labels >= 0
    if not ok.any():
        return out
    width = int(labels[ok].max()) + 1
    pairs, counts = np.unique(groups[ok].astype(np.int64) * width + labels[ok], return_counts=True)
    g, lab = pairs // width, pairs % width
    order = np.lexsort((lab, -counts, g))
    first = np.unique(g[order], return_index=True)[1]
    out[g[order][first]] = lab[order][first]
    return out
