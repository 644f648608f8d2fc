"""One number in base and in head, and how it changed: the one change vocabulary.

A run comparison's metrics (analysis/comparison.MetricChange), a trace comparison's counts, time
parts and launching ops (analysis/trace_document) are each a `Change`: base, head, head - base
and the change relative to base in percent; neither difference when a side is missing, and no
relative change from a base of 0. `Change.of` is where that arithmetic lives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from profreport.record.section import Section

_C = TypeVar("_C", bound="Change")


def difference(base: float | None, head: float | None) -> float | None:
    """head - base (an int for two ints); None when a side is missing."""
    return None if base is None or head is None else head - base


@dataclass(frozen=True)
class Change(Section):
    """One number in base and in head (None: not recorded on that side), and its change."""

    base: float | None
    head: float | None
    change: float | None  # head - base; None when a side is missing
    change_pct: float | None  # relative to base; None when base is 0 or a side is missing

    @classmethod
    def of(cls: type[_C], base: float | None, head: float | None, **more: Any) -> _C:
        """The change from `base` to `head` (`more`: a subclass's own fields)."""
        pct = None
        if base is not None and head is not None and base != 0:
            pct = (head - base) / base * 100.0
        return cls(base=base, head=head, change=difference(base, head), change_pct=pct, **more)

    @property
    def ratio(self) -> float | None:
        """head / base; None when a side is missing or base is 0."""
        if self.base is None or self.head is None or self.base == 0:
            return None
        return self.head / self.base

    def grew_beyond_pct(self, limit_pct: float) -> bool:
        """Head exceeds base by more than `limit_pct` percent of base. From nothing to something
        is an unbounded increase; a missing side is no increase."""
        if self.change_pct is not None:
            return self.change_pct > limit_pct
        return self.base == 0 and self.head is not None and self.head > 0
