"""Interval arithmetic on integer nanoseconds: merge, covered length, clip (pure numpy)."""

from __future__ import annotations

import itertools

import numpy as np

_EMPTY = np.zeros(0, dtype=np.int64)


def merged(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals ``[start, end)`` as disjoint intervals sorted by start.

    Intervals that touch or overlap merge (a start equal to the reach so far joins the group).
    """
    if not start.size:
        return _EMPTY, _EMPTY
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def covered_ns(start: np.ndarray, end: np.ndarray) -> int:
    """Length of the union of intervals ``[start, end)``."""
    s, e = merged(start, end)
    return int((e - s).sum())


def clipped(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The parts of the intervals inside ``[lo, hi)`` (empty parts dropped)."""
    s = np.maximum(start, lo)
    e = np.minimum(end, hi)
    keep = e > s
    return s[keep], e[keep]


def layered_ns(layers: list[tuple[np.ndarray, np.ndarray]]) -> list[int]:
    """Time each layer covers that no earlier layer covers: layers in priority order, so an
    instant inside several counts once, for the first layer that holds it."""
    covered = [0]  # by the first i layers together
    for i in range(1, len(layers) + 1):
        starts, ends = zip(*layers[:i], strict=True)
        covered.append(covered_ns(np.concatenate(starts), np.concatenate(ends)))
    return [after - before for before, after in itertools.pairwise(covered)]
