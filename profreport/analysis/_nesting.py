"""Interval nesting on one thread: which span encloses which event (pure, numpy in, numpy out)."""

from __future__ import annotations

import numpy as np

_KEY_LIMIT = 2**62


def innermost_container(
    lane: np.ndarray, start: np.ndarray, end: np.ndarray, is_container: np.ndarray
) -> np.ndarray:
    """For every row, the index of the innermost container row open at its start on its lane.

    Containers are spans ``[start, end)`` that nest properly on one lane (a pid/tid pair); other
    rows are point queries at ``start``. At equal starts a container opens before a query and the
    longer container before the shorter, so a child that starts with its parent is inside it.
    Returns ``-1`` where nothing encloses the row.

    Vectorised: a sweep over open/close points gives each container its depth, and the parent of
    a row at depth ``d`` is the last container opened before it, on its lane, at depth ``d - 1``.
    """
    n = int(lane.shape[0])
    if n == 0:
        return np.full(0, -1, dtype=np.int64)
    lane = lane.astype(np.int64)
    opens = np.flatnonzero(is_container & (end > start))  # empty spans contain nothing
    is_open_row = np.zeros(n, dtype=bool)
    is_open_row[opens] = True
    points = np.flatnonzero(~is_open_row)  # rows that only ask, at their start
    # Points: closes (kind 0) before opens (1) before queries (2) at equal times; longer spans
    # open first (then lower rows), so that a child starting with its parent opens after it.
    p_row = np.concatenate([opens, opens, points])
    p_time = np.concatenate([end[opens], start[opens], start[points]])
    p_kind = np.repeat(np.array([0, 1, 2], np.int8), [opens.size, opens.size, points.size])
    p_lane = lane[p_row]
    order = _stable_order(p_lane, p_time, p_kind)
    _longer_first(order, p_lane, p_time, p_kind, end[p_row] - start[p_row])
    kind = p_kind[order]
    depth = np.cumsum(np.array([-1, 1, 0], dtype=np.int64)[kind])  # lanes balance: no reset
    rows, lanes_o = p_row[order], p_lane[order]
    pos = np.arange(order.size, dtype=np.int64)
    is_open = kind == 1
    o_rows, o_depth = rows[is_open], depth[is_open]
    parent = np.full(n, -1, dtype=np.int64)
    if not o_rows.size:
        return parent
    width = int(o_depth.max()) + 2
    stride = order.size + 1
    if (int(lane.max()) + 1) * width * stride >= _KEY_LIMIT:
        return innermost_container_loop(lane, start, end, is_container)
    o_group = lanes_o[is_open] * width + o_depth
    o_key = o_group * stride + pos[is_open]
    by_key = np.argsort(o_key, kind="stable")
    o_key, o_rows = o_key[by_key], o_rows[by_key]
    # An opening container looks one level up; a query looks at the current level.
    ask = kind != 0
    q_rows = rows[ask]
    want = depth[ask] - (kind[ask] == 1)
    q_group = lanes_o[ask] * width + want
    idx = np.searchsorted(o_key, q_group * stride + pos[ask]) - 1
    safe = np.maximum(idx, 0)
    cand = o_rows[safe]
    t = start[q_rows]
    # The span found must really hold the row (partially overlapping spans can fool the depth).
    found = (want > 0) & (idx >= 0) & (o_key[safe] // stride == q_group)
    found &= (start[cand] <= t) & (end[cand] > t) & (cand != q_rows)
    parent[q_rows[found]] = cand[found]
    return parent


def _longer_first(
    order: np.ndarray,
    p_lane: np.ndarray,
    p_time: np.ndarray,
    p_kind: np.ndarray,
    p_dur: np.ndarray,
) -> None:
    """Within runs of opens at the same lane and time, put longer spans first (in place).

    Such runs are short and rare, so this costs far less than pre-sorting every open.
    """
    lane_s, time_s, kind_s = p_lane[order], p_time[order], p_kind[order]
    tied = (kind_s[1:] == 1) & (kind_s[:-1] == 1)
    tied &= (time_s[1:] == time_s[:-1]) & (lane_s[1:] == lane_s[:-1])
    at = np.flatnonzero(tied)
    if not at.size:
        return
    members = np.union1d(at, at + 1)  # positions in the sweep; runs stay where they are
    which = order[members]  # within a run of opens, point index order is row order
    sub = np.lexsort((which, -p_dur[which], time_s[members], lane_s[members]))
    order[members] = which[sub]


def _stable_order(lane: np.ndarray, time: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """Stable sort by (lane, time, kind): one int64 key when it fits, else a lexsort."""
    t0 = int(time.min())
    span = int(time.max()) - t0 + 1
    if (int(lane.max()) + 1) * span * 3 < _KEY_LIMIT:
        key = (lane * span + (time - t0)) * 3 + kind
        return np.argsort(key, kind="stable")
    return np.lexsort((kind, time, lane))


def innermost_container_loop(
    lane: np.ndarray, start: np.ndarray, end: np.ndarray, is_container: np.ndarray
) -> np.ndarray:
    """Reference stack sweep with the same contract as :func:`innermost_container`."""
    n = int(lane.shape[0])
    order = np.lexsort((-end, ~is_container, start, lane))
    lanes = lane[order].tolist()
    starts = start[order].tolist()
    ends = end[order].tolist()
    conts = is_container[order].tolist()
    rows = order.tolist()
    out = [-1] * n
    open_ends: list[int] = []
    open_rows: list[int] = []
    current = None
    for k in range(n):
        if lanes[k] != current:
            current = lanes[k]
            open_ends.clear()
            open_rows.clear()
        t = starts[k]
        while open_ends and open_ends[-1] <= t:
            open_ends.pop()
            open_rows.pop()
        row = rows[k]
        if open_rows:
            out[row] = open_rows[-1]
        if conts[k]:
            open_ends.append(ends[k])
            open_rows.append(row)
    return np.array(out, dtype=np.int64)


def outermost_ancestor(parent: np.ndarray, rows: np.ndarray, eligible: np.ndarray) -> np.ndarray:
    """For each of ``rows``, its outermost strict ancestor with ``eligible`` set, else ``-1``."""
    best = np.full(rows.shape[0], -1, dtype=np.int64)
    cur = parent[rows]
    live = np.flatnonzero(cur >= 0)
    cur = cur[live]
    while live.size:
        hit = eligible[cur]
        best[live[hit]] = cur[hit]
        cur = parent[cur]
        keep = cur >= 0
        live, cur = live[keep], cur[keep]
    return best
