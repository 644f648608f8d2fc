"""Latency statistics: robust summaries of per-call samples and speedup with a bootstrap interval."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class LatencyStats:
    median: float
    iqr: float  # p75 - p25
    p10: float
    p90: float
    mean: float
    min: float
    n: int  # number of timed blocks (samples)

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


@dataclass(frozen=True)
class Speedup:
    median: float  # baseline median / mode median: > 1 means the mode is faster
    ci95: tuple[float, float]
    resamples: int

    def to_dict(self) -> dict[str, object]:
        return {"median": self.median, "ci95": list(self.ci95), "resamples": self.resamples}


def summarize(samples_ms: Sequence[float]) -> LatencyStats:
    if len(samples_ms) == 0:
        raise ValueError("no latency samples")
    a = np.asarray(samples_ms, dtype=float)
    p10, p25, p50, p75, p90 = np.percentile(a, [10, 25, 50, 75, 90])
    return LatencyStats(
        median=float(p50),
        iqr=float(p75 - p25),
        p10=float(p10),
        p90=float(p90),
        mean=float(a.mean()),
        min=float(a.min()),
        n=int(a.size),
    )


def bootstrap_median_ci(
    samples_ms: Sequence[float], resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the median."""
    a = np.asarray(samples_ms, dtype=float)
    rng = np.random.default_rng(seed)
    meds = np.median(rng.choice(a, size=(resamples, a.size), replace=True), axis=1)
    lo, hi = np.percentile(meds, [2.5, 97.5])
    return float(lo), float(hi)


def speedup(
    baseline_ms: Sequence[float], mode_ms: Sequence[float], resamples: int = 2000, seed: int = 0
) -> Speedup:
    """Ratio of medians (baseline / mode) with a 95% percentile-bootstrap interval.

    Both sample sets are resampled independently; the seed makes reports reproducible.
    """
    base = np.asarray(baseline_ms, dtype=float)
    mode = np.asarray(mode_ms, dtype=float)
    if base.size == 0 or mode.size == 0:
        raise ValueError("speedup needs samples on both sides")
    rng = np.random.default_rng(seed)
    base_meds = np.median(rng.choice(base, size=(resamples, base.size), replace=True), axis=1)
    mode_meds = np.median(rng.choice(mode, size=(resamples, mode.size), replace=True), axis=1)
    ratios = base_meds / mode_meds
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return Speedup(float(np.median(base) / np.median(mode)), (float(lo), float(hi)), resamples)
