"""Latency statistics: robust summaries of per-call samples, and the bootstrap interval of a
median (speedups are paired per round: analysis/paired.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from profreport.record.model import Latency, ProcessBlocks


def summarize(samples_ms: Sequence[float]) -> Latency:
    """Median, IQR (p75 - p25), p10/p90, mean, min and the number of timed blocks."""
    if len(samples_ms) == 0:
        raise ValueError("no latency samples")
    a = np.asarray(samples_ms, dtype=float)
    p10, p25, p50, p75, p90 = np.percentile(a, [10, 25, 50, 75, 90])
    return Latency(
        median=float(p50),
        iqr=float(p75 - p25),
        p10=float(p10),
        p90=float(p90),
        mean=float(a.mean()),
        min=float(a.min()),
        n=int(a.size),
    )


def latency_of(processes: Sequence[ProcessBlocks]) -> Latency:
    """A mode's `latency_ms` from its blocks in each timing process: the summary over every
    block (`samples`, process after process), the first process's block size and warm-up, and
    with several processes each one's blocks (`processes`: the statistics across them read it)."""
    if not processes:
        raise ValueError("no timing process")
    first = processes[0]
    samples = tuple(x for p in processes for x in p.samples)
    return dataclasses.replace(
        summarize(samples),
        calls_per_block=first.calls_per_block,
        samples=samples,
        warmup_samples=first.warmup_samples if len(processes) == 1 else None,
        processes=tuple(processes) if len(processes) > 1 else None,
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
