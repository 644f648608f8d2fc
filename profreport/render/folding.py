"""Long lists made short for a reader: an op list past a few names is folded ("embedding + pow +
… 23 more", the whole list one click away), and repeated rows are shown once with a count."""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TypedDict, TypeVar

# Op names shown before "… N more": about one line of a table cell.
OPS_SHOWN = 6


class FoldedOps(TypedDict):
    short: str  # the first names and "… N more" (the whole list when it is short)
    full: str  # every name
    more: int  # names left out of `short` (0: `short` is the whole list)


def fold_ops(ops: Sequence[str], joiner: str = " + ", shown: int = OPS_SHOWN) -> FoldedOps:
    """`ops` joined by `joiner`, folded after `shown` names."""
    full = joiner.join(ops) or "-"
    if len(ops) <= shown:
        return {"short": full, "full": full, "more": 0}
    more = len(ops) - shown
    return {"short": f"{joiner.join(ops[:shown])}{joiner}… {more} more", "full": full, "more": more}


T = TypeVar("T")

# A generated kernel's trailing serial number: cpp_fused_add_3 and cpp_fused_add_7 are the same
# kernel in two layers (Inductor numbers its kernels in graph order).
_SERIAL = re.compile(r"(?<=[A-Za-z])_\d+\b")


def without_serials(text: str) -> str:
    """`text` less generated kernels' serial numbers, to compare one layer's row with the next's."""
    return _SERIAL.sub("", text)


def grouped(items: Iterable[T], key: Callable[[T], Hashable]) -> list[list[T]]:
    """The items alike by `key`, each group in first-seen order."""
    groups: dict[Hashable, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return list(groups.values())
