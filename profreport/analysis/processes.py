"""Statistics across timing processes: what a rerun of the timing would see.

One process's layout (memory addresses, which cores its threads got, the caches' state) is one
sample: the same code's paired speedup read 0.877 in one fresh process and 0.99-1.01 in four
others, each with an interval of +-0.5% (issue 48), and a mode's own latency moved 12% between
two processes whose eager times agreed within 0.5%. An interval built from one process's rounds
counts the noise between rounds and none between processes.

With K >= 2 processes the statistic is the geometric mean of the processes' medians (one vote
per process, whatever its rounds), and its interval comes from a hierarchical bootstrap:
resample the processes, then each drawn process's rounds, and take the standard error of the
log-statistic over the resamples (the processes' part scaled by K / (K - 1), the usual
small-sample correction of resampling K clusters). The 95% interval is that standard error times
Student's t with K - 1 degrees of freedom, not the bootstrap's percentiles: with three processes
the percentiles can only span the three processes' own values, which covers where a fourth
process lands about half of the time; t with K - 1 degrees of freedom is the honest width of a
mean of K draws whose spread is estimated from those K draws. Deterministic given the seed.

With one process there is nothing to resample between processes: callers say so (the interval
covers that process's rounds only) and under-claim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from profreport.analysis.latency import bootstrap_median_ci

RESAMPLES = 2000
SEED = 0

# Student's t, 97.5% quantile (two-sided 95%), by degrees of freedom 1..30 (standard table);
# beyond 30 the Cornish-Fisher expansion below is within 0.001 of it.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
_Z975 = 1.959964


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with `df` (>= 1) degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, not {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True)
class AcrossProcesses:
    """A positive quantity (a latency, a ratio) measured in K processes: each process's median,
    their geometric mean, and the 95% interval of that mean (K >= 2; see the module)."""

    estimate: float
    ci95: tuple[float, float]
    medians: tuple[float, ...]  # each process's own median, in process order
    se_log: float  # standard error of log(estimate) over the resamples
    df: int  # degrees of freedom of the t quantile: K - 1

    @property
    def processes(self) -> int:
        return len(self.medians)


def _bootstrap_log_medians(
    logs: Sequence[np.ndarray], resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """(resamples, K): each process's median of its rounds drawn with replacement."""
    out = np.empty((resamples, len(logs)))
    for w, x in enumerate(logs):
        idx = rng.integers(0, x.size, size=(resamples, x.size))
        out[:, w] = np.median(x[idx], axis=1)
    return out


def process_log_se(
    groups: Sequence[Sequence[float]], resamples: int = RESAMPLES, seed: int = SEED
) -> tuple[float, float]:
    """The log of the geometric mean of the groups' medians, and its hierarchical-bootstrap
    standard error: processes drawn with replacement (their deviations from the mean scaled by
    sqrt(K / (K - 1))), then each drawn process's rounds. With one group: its rounds only."""
    logs = [np.log(np.asarray(g, dtype=float)) for g in groups]
    if not logs or any(x.size == 0 for x in logs):
        raise ValueError("every process needs at least one sample")
    k = len(logs)
    point_meds = np.array([float(np.median(x)) for x in logs])
    center = float(point_meds.mean())
    rng = np.random.default_rng(seed)
    meds = _bootstrap_log_medians(logs, resamples, rng)
    if k == 1:
        return center, float(meds[:, 0].std(ddof=1))
    # each process's resampled medians moved so that its own offset from the grand mean is
    # inflated by sqrt(K / (K - 1)): resampling K clusters shrinks their variance by (K - 1) / K
    inflate = math.sqrt(k / (k - 1))
    shifted = meds + (inflate - 1.0) * (point_meds - center)
    pick = rng.integers(0, k, size=(resamples, k))
    stat = shifted[np.arange(resamples)[:, None], pick].mean(axis=1)
    return center, float(stat.std(ddof=1))


def across_processes(
    groups: Sequence[Sequence[float]], resamples: int = RESAMPLES, seed: int = SEED
) -> AcrossProcesses:
    """Geometric mean of K >= 2 processes' medians with its 95% interval (module docstring)."""
    if len(groups) < 2:
        raise ValueError("across_processes needs two processes or more")
    center, se = process_log_se(groups, resamples, seed)
    df = len(groups) - 1
    half = t975(df) * se
    return AcrossProcesses(
        estimate=math.exp(center),
        ci95=(math.exp(center - half), math.exp(center + half)),
        medians=tuple(float(np.median(np.asarray(g, dtype=float))) for g in groups),
        se_log=se,
        df=df,
    )


# ---------------------------------------------------------------- a level, and two runs' levels

# Two runs of which one timed a single process cannot see how far a process's luck moves a
# latency: their head/base interval is widened by this factor either way. The same code's
# latency moved 1.23x between two fresh processes (issue 40: 13.2 and 10.8 ms), a mode's paired
# speedup 0.85-1.04 over 12 fresh processes (this machine), 0.877 against 0.99-1.01 (issue 48).
PROCESS_ALLOWANCE = 1.25


@dataclass(frozen=True)
class Level:
    """One run's level of a series (ms): K = 1, the median of its blocks with the percentile
    bootstrap interval of that median (its rounds only); K >= 2, across_processes."""

    estimate: float
    ci95: tuple[float, float]
    se_log: float
    processes: int


def level(groups: Sequence[Sequence[float]], resamples: int = RESAMPLES, seed: int = SEED) -> Level:
    """The level of one run's series from each timing process's blocks (module docstring)."""
    if len(groups) == 1:
        _, se = process_log_se(groups, resamples, seed)
        ci95 = bootstrap_median_ci(groups[0], resamples=resamples, seed=seed)
        return Level(float(np.median(np.asarray(groups[0], dtype=float))), ci95, se, 1)
    across = across_processes(groups, resamples, seed)
    return Level(across.estimate, across.ci95, across.se_log, across.processes)


@dataclass(frozen=True)
class LevelChange:
    """Head's level over base's: `ratio` (> 1: head slower) and the 95% interval a call rests
    on. `across`: both runs timed two processes or more, so the interval covers what separates
    processes (t with min(K) - 1 degrees of freedom on both standard errors); otherwise both
    medians anywhere in their intervals, widened by PROCESS_ALLOWANCE either way."""

    ratio: float
    ci95: tuple[float, float]
    across: bool


def level_change(base: Level, head: Level) -> LevelChange:
    ratio = head.estimate / base.estimate
    k = min(base.processes, head.processes)
    if k >= 2:
        half = t975(k - 1) * math.hypot(base.se_log, head.se_log)
        return LevelChange(ratio, (ratio * math.exp(-half), ratio * math.exp(half)), True)
    lo = head.ci95[0] / base.ci95[1] / PROCESS_ALLOWANCE
    hi = head.ci95[1] / base.ci95[0] * PROCESS_ALLOWANCE
    return LevelChange(ratio, (lo, hi), False)


# ---------------------------------------------------------------- processes that disagree

_COUNT_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")


def _count(n: int) -> str:
    return _COUNT_WORDS[n] if n < len(_COUNT_WORDS) else str(n)


def overlapping_groups(cis: Sequence[tuple[float, float]]) -> list[list[int]]:
    """The processes (by index) grouped so that the intervals in a group chain-overlap and no two
    groups' intervals touch; sorted by interval. One group: the processes agree."""
    order = sorted(range(len(cis)), key=lambda i: (cis[i][0], cis[i][1]))
    groups: list[list[int]] = []
    reach = -math.inf
    for i in order:
        lo, hi = cis[i]
        if groups and lo <= reach:
            groups[-1].append(i)
            reach = max(reach, hi)
        else:
            groups.append([i])
            reach = hi
    return groups


def unstable_text(medians: Sequence[float], cis: Sequence[tuple[float, float]]) -> str | None:
    """'unstable across processes: 0.88 in one of 3, 1.00 in two' when the processes' own
    intervals fall into groups that do not overlap (each group: the median of its processes'
    medians); None when they all overlap."""
    groups = overlapping_groups(cis)
    if len(groups) < 2:
        return None
    values = [float(np.median([medians[i] for i in g])) for g in groups]
    digits = 2
    while digits < 4 and len({f"{v:.{digits}f}" for v in values}) < len(values):
        digits += 1
    parts = [f"{v:.{digits}f} in {_count(len(g))}" for v, g in zip(values, groups, strict=True)]
    parts[0] += f" of {len(medians)}"
    return "unstable across processes: " + ", ".join(parts)
