"""What the analysis asks of an execution mode: how its evidence becomes a fusion map, the verdict's
clause about what its compiler fused, and why ops did not fuse.

Modes (profreport.modes) implement this protocol, each with the pure functions of this package it
rests on (analysis/fusion.py, fusion_optimize.py, fusion_evidence.py, why_not_fused.py); whoever
derives findings hands them in by mode name (`profreport.modes.mode_analyses()`), so the analysis
never imports a mode. A mode it is not handed (a foreign record's) derives none of these.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from profreport.record.model import FusionMap, OkMode, Run, WhyNotFused


class ModeAnalysis(Protocol):
    def fusion_map(self, mode: OkMode, eager: OkMode) -> FusionMap | None:
        """The fusion map from the typed record's evidence, or None (nothing to map)."""
        ...

    def fusion_evidence(self, mode: OkMode, run: Run) -> str:
        """The verdict's clause about what the compiler fused ("" when there is nothing to say)."""
        ...

    def why_not_fused(self, mode: OkMode, run: Run) -> list[WhyNotFused] | None:
        """Why ops stayed apart, with evidence, or None when the mode reports nothing."""
        ...


# Each mode's analysis by name (a run's mode names are the keys).
ModeAnalyses = Mapping[str, ModeAnalysis]


class NoAnalysis:
    """A mode the analysis was not handed: its evidence is shown as recorded, nothing derived."""

    def fusion_map(self, mode: OkMode, eager: OkMode) -> FusionMap | None:
        return None

    def fusion_evidence(self, mode: OkMode, run: Run) -> str:
        return ""

    def why_not_fused(self, mode: OkMode, run: Run) -> list[WhyNotFused] | None:
        return None


NO_ANALYSIS = NoAnalysis()
