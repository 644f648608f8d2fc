"""Where the profiler's own cost lands in a step, and each CPU kernel's time per step: from a
trace's host events (pure, numpy in, numbers out).

The profiler records an event when its range opens and when it closes; most of that work falls
outside the event's own interval, in the range that holds it. So each recorded event's cost is
charged to the part of the step its enclosing ranges put that instant in: the first of the
step breakdown's host parts (analysis/time_breakdown.HOST_PARTS) among its ancestors, else
Python (an event the model's Python code opened directly). A CPU kernel's own time holds the
cost of the events inside it (the `copy_` under `addmm`), counted per kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from profreport.analysis._nesting import innermost_container

PYTHON = "python"


@dataclass(frozen=True)
class ChargedEvents:
    """Every host event (a row of the trace), the part index its cost is charged to (an index
    into `parts`, len(parts) meaning Python), and the kernel row it lies inside (-1: none)."""

    parts: tuple[str, ...]
    lane: np.ndarray
    start: np.ndarray
    charged: np.ndarray
    kernel: np.ndarray

    def counts(self, lane: int, lo: int, hi: int) -> dict[str, int]:
        """How many events that started on ``lane`` in ``[lo, hi)`` charge each part (parts
        with none left out)."""
        inside = (self.lane == lane) & (self.start >= lo) & (self.start < hi)
        found = np.bincount(self.charged[inside], minlength=len(self.parts) + 1)
        names = (*self.parts, PYTHON)
        return {names[i]: int(n) for i, n in enumerate(found.tolist()) if n}

    def inside_kernels(self) -> dict[int, int]:
        """kernel row -> how many events lie inside it."""
        held = self.kernel[self.kernel >= 0]
        rows, n = np.unique(held, return_counts=True)
        return dict(zip(rows.tolist(), n.tolist(), strict=True))


def charged_events(
    parts: tuple[str, ...],
    rows_by_part: Sequence[np.ndarray],
    frames: np.ndarray,
    lane: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
) -> ChargedEvents:
    """Charge every row of ``rows_by_part`` (in priority order, the first the kernels; a row in
    several parts belongs to the first, as its time does) to the first part among its
    ancestors; ``frames`` are ranges that hold events but charge Python (the ProfilerStep
    ranges)."""
    listed = np.concatenate([np.asarray(r, dtype=np.int64) for r in rows_by_part])
    ranks = np.concatenate([np.full(len(r), i, dtype=np.int64) for i, r in enumerate(rows_by_part)])
    events, first = np.unique(listed, return_index=True)  # the first listing: the first part
    rank = ranks[first]
    python = len(parts)
    every = np.concatenate([events, frames.astype(np.int64)])
    every_rank = np.concatenate([rank, np.full(frames.size, python, dtype=np.int64)])
    parent = innermost_container(
        lane[every], start[every], end[every], np.ones(every.size, dtype=bool)
    )
    charged = np.full(every.size, python, dtype=np.int64)
    kernel = np.full(every.size, -1, dtype=np.int64)
    up = parent
    while True:  # one ancestor level per pass: the depth of the nesting, not the event count
        has = up >= 0
        if not has.any():
            break
        safe = np.maximum(up, 0)
        above = np.where(has, every_rank[safe], python)
        charged = np.minimum(charged, above)
        is_kernel = has & (every_rank[safe] == 0) & (kernel < 0)
        kernel[is_kernel] = every[safe[is_kernel]]
        up = np.where(has, parent[safe], -1)
    n = events.size
    return ChargedEvents(parts, lane[events], start[events], charged[:n], kernel[:n])
