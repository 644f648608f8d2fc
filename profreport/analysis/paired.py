"""Paired latency statistics and the timing noise guard: pure functions over timed blocks.

Modes (and, in `ab`, base and head) are timed in interleaved rounds, so block *i* of two series
ran moments apart. The ratio of those two blocks cancels whatever slowed the machine in that round
(frequency, another process, the level drifting within the process); the median of the per-round
ratios, with a distribution-free interval from order statistics, is the paired speedup.

The guard judges what threatens the paired ratio itself and names each. The ratios' shape
(their spread, two peaks in them, rounds whose ratio moved) says the rounds are not one level:
it widens the interval to the ratios' 10th-90th percentiles, so a call then needs nine rounds
in ten on its side (issue 46: Phi-3's compile, every one of 15 rounds at least 1.20x, was withheld for
its spread). Other processes' CPU and too few rounds withhold a call ("latency inconclusive:
<why>") unless it is beyond the noise band. The baseline's own level changes (its blocks'
spread, rounds that moved, two speed states) are reported as context: a level both blocks of a
round share cancels in their ratio (issue 39: a DistilBERT whose eager blocks sat at 38.9 or
44.2 ms had paired ratios spread 3%, and every mode was withheld). Across timing processes:
analysis/speedups.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from profreport.record.model import (
    BaselineSignals,
    MachineLoad,
    NoiseThresholds,
    Run,
    Speedup,
    SpeedupCall,
    TwoPeaks,
)
from profreport.record.section import Section

METHOD = "paired per-round ratios"

# ---------------------------------------------------------------- thresholds (named, with sources)

# Below this many rounds no order-statistic interval of the median reaches 95% coverage
# (with n = 5 the widest one, min..max, covers 1 - 2 * 0.5**5 = 93.75%).
MIN_ROUNDS = 6
# Share of all CPU time on the machine that other processes used while we timed. On the 2-vCPU
# CI machine a timed model uses both cores; one other busy thread for a tenth of the window
# already slowed blocks by 10-50% in bench/noise_guard.py, more than the effects we call.
MAX_OTHER_BUSY_SHARE = 0.10
# IQR / median of the paired ratios. On a quiet machine 20 ms CPU blocks give ratio spreads of
# 1-4% (bench/latency_fidelity.py, bench/noise_guard.py quiet rows); above 10% the ratio itself
# moves with the load and its median is no longer one number.
MAX_RATIO_SPREAD = 0.10
# A round whose ratio is this far from the ratios' median "moved"; more than MAX_MOVED_RATIOS of
# the rounds moving means one series was hit where the other was not, for a stretch of the
# timing. A tail that large moves the median by up to a tenth of the ratios' range; fewer moved
# rounds are the order-statistic interval's to absorb (it ignores the extremes).
RATIO_MOVE = 0.10
MAX_MOVED_RATIOS = 0.20
# Context, not judged (the pairing cancels a level both blocks of a round share): IQR / median of
# eager's blocks above this (the 0.75 -> 2.45 ms within one process of the 2-vCPU CI machine),
# and eager blocks more than ROUND_MOVE from eager's median in more than MAX_MOVED_ROUNDS of
# the rounds, say the machine's level wandered while timing.
MAX_BLOCK_SPREAD = 0.25
ROUND_MOVE = 0.20
MAX_MOVED_ROUNDS = 0.10
# Two peaks: sorted log-samples split into two groups, each at least MIN_PEAK_SHARE of the
# samples, with a gap between them more than PEAK_GAP_FACTOR times the wider group's IQR and at
# least MIN_PEAK_GAP (5%) apart. A unimodal sample's neighbouring order statistics are far
# closer than its IQR, so this trips only on separated clusters (a busy loop starting partway).
MIN_PEAK_SHARE = 0.20
PEAK_GAP_FACTOR = 2.0
MIN_PEAK_GAP = math.log(1.05)
MIN_BIMODAL_SAMPLES = 10
# When the machine was busy (or there were too few rounds), a direction is still stated if
# three rounds in four, each on its own, show more than this factor (the ratios' p25 above it,
# or p75 below its inverse): the sign flips were ~10% effects. The interval alone is not enough: in bench/ab_gate.py, under
# 50-67% foreign load, identical code once gave head/base 2.33 (95% CI 2.11-2.49) over 173
# rounds, but with ratios spread 97% (p25 far below 1.5).
NOISE_BAND = 1.5
# The paired timer's A/A resolution: a difference is called only when its whole 95% interval lies
# more than this beyond 1. Identical code timed against itself (bench/latency_aa.py, 20 `ab` runs
# of a byte-identical head on the 2-vCPU machine) differs by up to 1.7%: compile's head read
# 0.983-0.995 in 8 of 20 runs with intervals excluding 1 (an order or placement effect of the
# second build, not the code), eager's 1.008-1.010 in 2. Beyond 1% none of them is called, and a
# head doing twice the work still is in every run.
RESOLUTION = 0.01

THRESHOLDS = NoiseThresholds(
    min_rounds=MIN_ROUNDS,
    max_other_busy_share=MAX_OTHER_BUSY_SHARE,
    max_ratio_spread=MAX_RATIO_SPREAD,
    max_block_spread=MAX_BLOCK_SPREAD,
    round_move=ROUND_MOVE,
    max_moved_rounds=MAX_MOVED_ROUNDS,
    ratio_move=RATIO_MOVE,
    max_moved_ratios=MAX_MOVED_RATIOS,
    min_peak_share=MIN_PEAK_SHARE,
    peak_gap_factor=PEAK_GAP_FACTOR,
    min_peak_gap=round(MIN_PEAK_GAP, 6),
    noise_band=NOISE_BAND,
)


# ---------------------------------------------------------------- the paired statistic


def per_round_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> list[float]:
    """numerator[i] / denominator[i] for every round both series have."""
    return [float(a) / float(b) for a, b in zip(numerator, denominator, strict=False)]


def median_ci_rank(n: int) -> int | None:
    """The 1-based rank k such that [x_(k), x_(n+1-k)] covers the median with at least 95%
    (binomial, distribution-free); None when no interval reaches it."""
    k, cdf = 0, 0.0
    # log P(Binom(n, 1/2) = k), stepped from k to k + 1: 2.0**n overflows a float from 1,024
    # rounds on (a light model timed for a minute gets there), exact big integers are slow
    log_p = -n * math.log(2.0)
    while True:
        p_next = math.exp(log_p)
        if cdf + p_next > 0.025:
            return k if k >= 1 else None
        cdf += p_next
        log_p += math.log(n - k) - math.log(k + 1)
        k += 1


@dataclass(frozen=True)
class PairedRatio(Section):
    """The median of per-round ratios with its interval and spread."""

    median: float  # median of the per-round ratios
    ci95: tuple[float, float]  # order-statistic interval of that median (None-free: see covered)
    n: int  # rounds
    covered: bool  # False when n < MIN_ROUNDS: the interval is min..max and covers < 95%
    p25: float
    p75: float
    spread: float  # (p75 - p25) / median of the ratios


def paired_ratio(ratios: Sequence[float]) -> PairedRatio:
    """Median of per-round ratios with a distribution-free interval from order statistics."""
    if not ratios:
        raise ValueError("no paired rounds")
    x = sorted(float(r) for r in ratios)
    n = len(x)
    k = median_ci_rank(n)
    lo, hi = (x[k - 1], x[n - k]) if k is not None else (x[0], x[-1])
    med = float(np.median(x))
    p25, p75 = (float(v) for v in np.percentile(x, [25, 75]))
    return PairedRatio(med, (lo, hi), n, k is not None, p25, p75, (p75 - p25) / med)


# ---------------------------------------------------------------- noise signals


def spread(samples: Sequence[float]) -> float:
    """IQR / median."""
    p25, p50, p75 = np.percentile(np.asarray(samples, dtype=float), [25, 50, 75])
    return float((p75 - p25) / p50)


def two_peaks(samples: Sequence[float]) -> TwoPeaks | None:
    """The split of the samples into two separated groups (see the thresholds above), or None:
    the median of the lower group, of the upper one, and the upper one's share."""
    if len(samples) < MIN_BIMODAL_SAMPLES:
        return None
    y = np.sort(np.log(np.asarray(samples, dtype=float)))
    n = y.size
    least = math.ceil(MIN_PEAK_SHARE * n)
    best: TwoPeaks | None = None
    best_score = 0.0
    for k in range(least, n - least + 1):  # lower group y[:k], upper group y[k:]
        gap = float(y[k] - y[k - 1])
        lower, upper = y[:k], y[k:]
        width = max(
            float(np.subtract(*np.percentile(lower, [75, 25]))),
            float(np.subtract(*np.percentile(upper, [75, 25]))),
        )
        if gap < MIN_PEAK_GAP or gap <= PEAK_GAP_FACTOR * width:
            continue
        score = gap / max(width, 1e-12)
        if score > best_score:
            best_score = score
            best = TwoPeaks(
                low=float(np.exp(np.median(lower))),
                high=float(np.exp(np.median(upper))),
                share_high=(n - k) / n,
            )
    return best


def moved_rounds(samples: Sequence[float], move: float = ROUND_MOVE) -> float:
    """Share of rounds whose sample is more than `move` (a fraction) away from the median."""
    a = np.asarray(samples, dtype=float)
    med = float(np.median(a))
    return float(np.mean(np.abs(a - med) > move * med))


def machine_reasons(load: MachineLoad | None, during: str = "timing") -> list[str]:
    """Why the machine was not quiet, from a capture/noise.py sample; [] when it was or unknown.
    profreport's own child processes compete for the CPU as much as a stranger does: their
    share is held to the same limit, and named as theirs. `during`: what the sample watched
    (the light profiling pass reads it too)."""
    if load is None:
        return []
    reasons = []
    ours = "profreport's own child processes (compile workers, compilers)"
    for share, who in (
        (load.other_busy_share, "other processes"),
        (load.children_busy_share, ours),
    ):
        if share is not None and share > MAX_OTHER_BUSY_SHARE:
            reasons.append(
                f"{who} used {share:.0%} of the machine's CPU time while {during} "
                f"(limit {MAX_OTHER_BUSY_SHARE:.0%})"
            )
    return reasons


def busy_band(loads: Sequence[MachineLoad | None]) -> float:
    """How far apart two runs' latencies must lie before a busy machine cannot explain them:
    NOISE_BAND, or 1 / (1 - the largest share of the CPU other processes or our own children
    used) when it is above MAX_OTHER_BUSY_SHARE: a timing that had the machine to itself gets
    that much less of it (two runs of the same code, 31% and 68% busy, read eager 10.7 and 56 ms
    on the 2-vCPU machine; a 7.5x "regression" of optimize went with them)."""
    shares = [
        share
        for load in loads
        if load is not None
        for share in (load.other_busy_share, load.children_busy_share)
        if share is not None and share > MAX_OTHER_BUSY_SHARE
    ]
    return max([NOISE_BAND, *(1.0 / max(1.0 - s, 0.01) for s in shares)])


def baseline_context(eager_ms: Sequence[float]) -> tuple[BaselineSignals, list[str]]:
    """The baseline's own level changes (spread, rounds that moved, two speed states): context
    for the paired ratios, which cancel a level both blocks of a round share; never a reason."""
    context: list[str] = []
    if not eager_ms:
        return BaselineSignals(rounds=0), context
    block_spread = spread(eager_ms)
    moved = moved_rounds(eager_ms)
    peaks = two_peaks(eager_ms)
    signals = BaselineSignals(
        rounds=len(eager_ms), block_spread=block_spread, moved_rounds=moved
    ).adding(two_peaks=peaks)
    if block_spread > MAX_BLOCK_SPREAD:
        context.append(f"baseline blocks spread {block_spread:.0%} (IQR/median)")
    if moved > MAX_MOVED_ROUNDS:
        context.append(f"baseline moved >{ROUND_MOVE:.0%} from its median in {moved:.0%} of rounds")
    if peaks:
        context.append(f"baseline blocks have two peaks ({peaks.low:.3g} and {peaks.high:.3g} ms)")
    return signals, context


def rounds_reason(n: int) -> str | None:
    """The one reason more rounds cure: fewer than MIN_ROUNDS."""
    return (
        None if n >= MIN_ROUNDS else f"only {n} paired rounds (a 95% interval needs {MIN_ROUNDS})"
    )


def shape_reasons(ratio: PairedRatio, ratios: Sequence[float]) -> list[str]:
    """What says the rounds' ratios are not one steady level: their spread, two peaks, rounds
    whose ratio moved. These widen the interval (paired_processes); they withhold no call."""
    reasons = []
    if ratio.spread > MAX_RATIO_SPREAD:
        reasons.append(
            f"paired ratios spread {ratio.spread:.0%} (IQR/median, limit {MAX_RATIO_SPREAD:.0%})"
        )
    peaks = two_peaks(ratios)
    if peaks:
        reasons.append(f"paired ratios have two peaks ({peaks.low:.3g} and {peaks.high:.3g})")
    moved = moved_rounds(ratios, RATIO_MOVE)
    if moved > MAX_MOVED_RATIOS:
        reasons.append(
            f"paired ratio moved >{RATIO_MOVE:.0%} from its median in {moved:.0%} of rounds "
            f"(limit {MAX_MOVED_RATIOS:.0%})"
        )
    return reasons


def lacks_only_rounds(base_ms: Sequence[float], other_ms: Sequence[float]) -> bool:
    """True when the paired ratio of the two series is inconclusive for want of rounds alone:
    timing more of them can make it conclusive (measure_latency's `wants_more`)."""
    ratios = per_round_ratios(other_ms, base_ms)
    if not ratios:
        return True
    ratio = paired_ratio(ratios)
    return rounds_reason(ratio.n) is not None and not shape_reasons(ratio, ratios)


# ---------------------------------------------------------------- calls: resolution, noise band


def beyond_resolution(ci95: Sequence[float]) -> int:
    """+1 when the whole interval of a ratio lies above 1 + RESOLUTION, -1 when below
    1 / (1 + RESOLUTION), else 0: what the timer can tell apart from identical code."""
    lo, hi = ci95[0], ci95[1]
    if lo > 1.0 + RESOLUTION:
        return 1
    if hi < 1.0 / (1.0 + RESOLUTION):
        return -1
    return 0


def resolution_note(ci95: Sequence[float]) -> str:
    """For an interval that excludes 1 but not the resolution band: the words that say so. The
    median itself may lie beyond the band (1.023 with an interval of 1.002-1.028): what is not
    certain is a change beyond it, so the words never say the change is within it."""
    if beyond_resolution(ci95) == 0 and (ci95[0] > 1.0 or ci95[1] < 1.0):
        return f"no change beyond {RESOLUTION:.0%}, the paired timer's A/A resolution, is certain"
    return ""


def beyond_noise(ratio: PairedRatio) -> bool:
    """Three rounds in four, each alone, beyond NOISE_BAND the same way (and so the interval
    too): a direction no noise explains."""
    return (ratio.ci95[0] > NOISE_BAND and ratio.p25 > NOISE_BAND) or (
        ratio.ci95[1] < 1 / NOISE_BAND and ratio.p75 < 1 / NOISE_BAND
    )


def wants_more_rounds(samples_ms: dict[str, list[float]], pairs: Sequence[tuple[str, str]]) -> bool:
    """measure_latency's `wants_more` for these (baseline, other) series pairs: a pair lacks
    only rounds."""
    return any(
        lacks_only_rounds(samples_ms[b], samples_ms[o])
        for b, o in pairs
        if b in samples_ms and o in samples_ms
    )


# ---------------------------------------------------------------- stored runs


def record_noise(run: Run, mode: str) -> list[str]:
    """Why a stored run's timing of `mode` was noisy (its `timing_noise`): the run's reasons
    and that mode's own; [] when quiet or recorded before the guard existed."""
    return [] if run.timing_noise is None else run.timing_noise.mode_reasons(mode)


def speedup_call(sp: Speedup | None) -> SpeedupCall | None:
    """A mode's speedup against eager, called: inconclusive (the noise guard tripped), faster or
    slower beyond the timer's resolution, within it (off 1, see resolution_note) or unchanged;
    None for none or an empty one."""
    if sp is None or not sp.has("median"):
        return None
    if sp.inconclusive:
        return "inconclusive"
    called = beyond_resolution(sp.ci95)
    if called:
        return "faster" if called > 0 else "slower"
    return "within resolution" if resolution_note(sp.ci95) else "unchanged"
