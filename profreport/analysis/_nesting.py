"""Interval nesting on one thread: which span encloses which event (pure, numpy in, numpy out)."""

from __future__ import annotations

import numpy as np


def innermost_container(
    lane: np.ndarray, start: np.ndarray, end: np.ndarray, is_container: np.ndarray
) -> np.ndarray:
    """For every row, the index of the innermost container row open at its start on its lane.

    Containers are spans ``[start, end)`` that nest properly on one lane (a pid/tid pair); other
    rows are point queries at ``start``. At equal starts a container opens before a query and the
    longer container before the shorter, so a child that starts with its parent is inside it.
    Returns ``-1`` where nothing encloses the row.
    """
    n = int(lane.shape[0])
    parent = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return parent
    order = np.lexsort((-end, ~is_container, start, lane))
    lanes = lane[order].tolist()
    starts = start[order].tolist()
    ends = end[order].tolist()
    conts = is_container[order].tolist()
    rows = order.tolist()
    out = [-1] * n
    open_ends: list = []
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
    parent[:] = out
    return parent


def mark_ancestors(parent: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Boolean mask of every row that is a (strict) ancestor of one of ``rows``."""
    marked = np.zeros(parent.shape[0], dtype=bool)
    cur = parent[rows]
    cur = cur[cur >= 0]
    while cur.size:
        cur = np.unique(cur)
        cur = cur[~marked[cur]]
        marked[cur] = True
        cur = parent[cur]
        cur = cur[cur >= 0]
    return marked


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
