"""Base against head of one number: the arithmetic every comparison shares.

A run comparison (analysis/compare.py: the metrics of two run records) and a trace comparison
(analysis/trace_compare.py: the counts of two traces) state a number's change the same way: the
difference head - base and the change relative to base, neither when a side is missing, and no
relative change from a base of 0. Pure; the documents that carry the numbers stay their callers'.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Change:
    """One number in base and in head (None: not recorded on that side)."""

    base: float | None
    head: float | None

    @property
    def difference(self) -> float | None:
        """head - base (an int for two ints); None when a side is missing."""
        if self.base is None or self.head is None:
            return None
        return self.head - self.base

    @property
    def ratio(self) -> float | None:
        """head / base; None when a side is missing or base is 0."""
        if self.base is None or self.head is None or self.base == 0:
            return None
        return self.head / self.base

    @property
    def pct(self) -> float | None:
        """(head - base) / base in percent; None when a side is missing or base is 0."""
        if self.base is None or self.head is None or self.base == 0:
            return None
        return (self.head - self.base) / self.base * 100.0

    def grew_beyond_pct(self, limit_pct: float) -> bool:
        """Head exceeds base by more than `limit_pct` percent of base. From nothing to something
        is an unbounded increase; a missing side is no increase."""
        pct = self.pct
        if pct is not None:
            return pct > limit_pct
        return self.base == 0 and self.head is not None and self.head > 0
