"""Pair the op calls of a compiled graph with the eager calls they came from, by op name."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from profreport.record.model import TensorIO

if TYPE_CHECKING:
    import numpy as np


def _monotone_pairs(
    short: np.ndarray, long: np.ndarray, long_cost: np.ndarray | None = None
) -> list[int]:
    """For each of `short` (relative positions, ascending), the index in `long` it pairs with:
    every short item paired, order kept, total position distance (plus `long_cost` of each
    `long` item used) smallest (dynamic programming, one cumulative minimum per row)."""
    import numpy as np  # here: the CLI imports the modes (and this) to declare its arguments

    extra = np.zeros(len(long)) if long_cost is None else long_cost
    n, m = len(short), len(long)
    idx = np.arange(m)
    prev = np.zeros(m)  # cost of pairing the first i short items within long[:j+1]
    choices = []
    for i in range(n):
        before = np.concatenate(([0.0] if i == 0 else [np.inf], prev[:-1]))
        vals = before + np.abs(long - short[i]) + extra
        vals[:i] = np.inf  # i items before need i places
        best = np.minimum.accumulate(vals)
        choices.append(np.maximum.accumulate(np.where(vals == best, idx, -1)))
        prev = best
    pairs = [0] * n
    j = m - 1
    for i in range(n - 1, -1, -1):
        k = int(choices[i][j])
        pairs[i] = k
        j = k - 1
    return pairs


def pair_with_eager(
    keys: list[tuple[str, str]],
    eager_sequence: Sequence[TensorIO],
    norm: Callable[[str], str],
    top_level: frozenset[tuple[str, str]] = frozenset(),
) -> tuple[dict[tuple[str, str], TensorIO | None], list[TensorIO]]:
    """Pair the graph's op calls (in graph order) with eager calls of the same op.

    Where the counts agree, the k-th relu of the graph is the k-th eager relu. Where they do not
    (the compiled graph builds an attention mask eager skips, say), each op's calls are paired in
    order with the eager calls nearest in relative position, so an extra graph add does not shift
    every later add onto the wrong eager call; graph calls made outside every submodule
    (`top_level`: mask building in the model's own forward) are the first left unpaired. `norm`
    names an eager op as the graph does (add_ -> add). Returns the pairs and the eager calls
    left over."""
    graph_at: dict[str, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        graph_at[key[0]].append(i)
    eager_at: dict[str, list[int]] = defaultdict(list)
    for j, call in enumerate(eager_sequence):
        eager_at[norm(call.op)].append(j)
    matched: dict[tuple[str, str], TensorIO | None] = {key: None for key in keys}
    taken: set[int] = set()
    for op, graph_idx in graph_at.items():
        eager_idx = eager_at.get(op, [])
        pairs: list[tuple[int, int]]
        if len(graph_idx) == len(eager_idx):
            pairs = list(zip(graph_idx, eager_idx, strict=True))
        elif eager_idx:
            import numpy as np

            g = np.array(graph_idx) / max(len(keys), 1)
            e = np.array(eager_idx) / max(len(eager_sequence), 1)
            if len(graph_idx) < len(eager_idx):
                pairs = [(graph_idx[a], eager_idx[b]) for a, b in enumerate(_monotone_pairs(g, e))]
            else:
                cost = np.array([float(keys[i] in top_level) for i in graph_idx])
                pairs = [
                    (graph_idx[b], eager_idx[a]) for a, b in enumerate(_monotone_pairs(e, g, cost))
                ]
        else:
            pairs = []
        for gi, ej in pairs:
            matched[keys[gi]] = eager_sequence[ej]
            taken.add(ej)
    untaken = [c for j, c in enumerate(eager_sequence) if j not in taken]
    return matched, untaken
