"""Paired speedups across timing processes: the statistic `generate` stores, and `ab`'s gate.

A timing runs in K worker processes (capture/workers.py; one, the capturing process, with
`--workers 0` or for a model passed as an object, which no worker can build); within a process the series are timed in interleaved
rounds, so the per-round ratio of two series is paired (analysis/paired.py: the statistic, the
noise guard's signals, the resolution and the noise band). Across processes nothing is paired:
each process's layout is one draw (analysis/processes.py), so the interval of a combined
speedup covers the processes as well as their rounds, and processes that disagree are named.

The interface the timing calls: `paired_speedups(workers, loads)`, one mapping series name ->
per-round per-call latencies (ms) per process and each process's machine load; `paired_gate`
with base's and head's blocks per process. `run_speedups(run)` re-reads a stored run's samples
with today's statistics.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from profreport.analysis.paired import (
    METHOD,
    THRESHOLDS,
    PairedRatio,
    baseline_context,
    beyond_noise,
    beyond_resolution,
    machine_reasons,
    paired_ratio,
    per_round_ratios,
    rounds_reason,
    shape_reasons,
)
from profreport.analysis.processes import across_processes, unstable_text
from profreport.record.model import (
    BaselineSignals,
    MachineLoad,
    ModeNoise,
    NoiseSignals,
    PairedRatios,
    ProcessSpeedup,
    Run,
    Speedup,
    TimingNoise,
)
from profreport.record.section import Section, omitted, required, required_factory

# ---------------------------------------------------------------- across timing processes

# Where a process's ratios are not one level (shape_reasons), the interval is widened to cover
# their 10th and 90th percentiles: a call then needs nine rounds in ten on its side. Issue 46's
# Phi-3 compile (every one of 15 rounds at least 1.20x) stays called; identical code whose 15
# ratios scatter lognormally with sigma 10% (spread 13%: tripped) has its 10th percentile above
# 1.01 in 3 of 10,000 simulated runs, where the quartiles (no wider than the order-statistic
# interval at 15 rounds) would let 8 in 1,000 through.
WIDEN_PERCENTILES = (10, 90)


def _tagged(reasons: Sequence[str], process: int, processes: int) -> list[str]:
    """Reasons of one process, named by it when there are several."""
    tag = "" if processes == 1 else f"process {process + 1} of {processes}: "
    return [tag + r for r in reasons]


@dataclass(frozen=True)
class PairedProcesses:
    """Paired per-round ratios (numerator block / denominator block, rounds aligned within a
    process) from K timing processes, combined. `ratio`: median and the interval a call rests on
    (K >= 2: across processes, analysis/processes.py; K = 1: the process's own order-statistic
    interval), widened to the ratios' 10th-90th percentiles where shape signals say the rounds
    are not one level (WIDEN_PERCENTILES); its n, p25, p75 and spread over every round. A busy machine or too few rounds
    withhold a call unless it is beyond the noise band; `unstable` names processes whose own
    intervals do not overlap, and a change they do not agree on is not called."""

    ratio: PairedRatio
    per_process: tuple[PairedRatio, ...]
    ratios: tuple[float, ...]  # every process's rounds, process by process
    reasons: tuple[str, ...]  # all that the guard saw
    own: tuple[str, ...]  # the series' own reasons (its ratios' shape, its rounds)
    widened: str | None  # the shape signals, when they widened the interval
    unstable: str | None
    inconclusive: str | None  # why no call is made (None: call on `ratio.ci95`)

    @property
    def processes(self) -> int:
        return len(self.per_process)


def paired_processes(
    numerators: Sequence[Sequence[float]],
    denominators: Sequence[Sequence[float]],
    loads: Sequence[MachineLoad | None],
) -> PairedProcesses:
    """Numerator / denominator per round in each process (the i-th sequence of each is one
    process; a process with no common round is left out), combined across the processes."""
    total = len(numerators)
    per: list[tuple[PairedRatio, list[float]]] = []
    machine, shape, rounds = [], [], []
    widen_lo, widen_hi = math.inf, -math.inf
    for i, (num, den, load) in enumerate(zip(numerators, denominators, loads, strict=True)):
        ratios = per_round_ratios(num, den)
        if not ratios:
            continue
        ratio = paired_ratio(ratios)
        per.append((ratio, ratios))
        machine += _tagged(machine_reasons(load), i, total)
        too_few = rounds_reason(ratio.n)
        rounds += _tagged([too_few] if too_few else [], i, total)
        own_shape = shape_reasons(ratio, ratios)
        shape += _tagged(own_shape, i, total)
        if own_shape:  # the rounds are not one level: nine rounds in ten must carry a call
            low, high = np.percentile(ratios, WIDEN_PERCENTILES)
            widen_lo, widen_hi = min(widen_lo, float(low)), max(widen_hi, float(high))
    if not per:
        raise ValueError("no paired rounds")
    k = len(per)
    everything = [r for _, ratios in per for r in ratios]
    pooled = paired_ratio(everything)
    if k == 1:
        estimate, (lo, hi), covered = per[0][0].median, per[0][0].ci95, per[0][0].covered
    else:
        across = across_processes([ratios for _, ratios in per])
        estimate, (lo, hi), covered = across.estimate, across.ci95, True
    widened = min(lo, widen_lo) < lo or max(hi, widen_hi) > hi
    plain = PairedRatio(
        estimate, (lo, hi), pooled.n, covered, pooled.p25, pooled.p75, pooled.spread
    )
    combined = dataclasses.replace(plain, ci95=(min(lo, widen_lo), max(hi, widen_hi)))
    own = tuple(rounds + shape)
    unstable = (
        unstable_text([r.median for r, _ in per], [r.ci95 for r, _ in per]) if k > 1 else None
    )
    inconclusive: str | None = None
    # these withhold a call unless the interval and three rounds in four clear the noise band,
    # judged as before the widening (a busy machine's own rule, issue 39)
    if (machine or rounds) and not beyond_noise(plain):
        inconclusive = "; ".join(machine + list(own))
    elif unstable and len({beyond_resolution(r.ci95) for r, _ in per}) > 1:
        inconclusive = unstable  # the processes do not agree on a call
    return PairedProcesses(
        ratio=combined,
        per_process=tuple(r for r, _ in per),
        ratios=tuple(everything),
        reasons=tuple(machine) + own,
        own=own,
        widened="; ".join(shape) if widened else None,
        unstable=unstable,
        inconclusive=inconclusive,
    )


def _method(processes: int) -> str:
    return METHOD if processes == 1 else f"{METHOD}, across {processes} processes"


# ---------------------------------------------------------------- generate: speedups + guard

# series name -> per-round per-call latency (ms) of one timing process
Worker = Mapping[str, Sequence[float]]


def _context(workers: Sequence[Worker], baseline: str) -> tuple[BaselineSignals, list[str]]:
    """The baseline's own level changes in each process (rounds are aligned, and levels
    comparable, only within one): the noisiest process's signals, every process's context."""
    k = len(workers)
    found = [(i, baseline_context(w[baseline])) for i, w in enumerate(workers) if w.get(baseline)]
    if not found:
        return BaselineSignals(rounds=0), []
    context = [c for i, (_, cs) in found for c in _tagged(cs, i, k)]
    noisiest = max((f for _, f in found), key=lambda f: f[0].block_spread or 0.0)[0]
    return noisiest, context


def paired_speedups(
    workers: Sequence[Worker],
    loads: Sequence[MachineLoad | None],
    baseline: str = "eager",
) -> tuple[dict[str, Speedup], TimingNoise]:
    """Per-mode `speedup_vs_eager` entries (baseline block / mode block, per round, in each
    timing process: `workers[i]` maps a series to process i's blocks, `loads[i]` its machine
    load) and the run's `timing_noise`. A mode's entry carries `inconclusive` (why) or None."""
    if len(workers) != len(loads):
        raise ValueError(f"{len(workers)} processes but {len(loads)} machine loads")
    known = [load for load in loads if load is not None]
    busiest = max(known, key=lambda x: x.other_busy_share or 0.0) if known else None
    noise = TimingNoise(method=METHOD, load=busiest, thresholds=THRESHOLDS, signals=NoiseSignals())
    present = [w for w in workers if w.get(baseline)]
    if not present:
        return {}, noise
    signals, context = _context(workers, baseline)
    names = list(dict.fromkeys(n for w in workers for n in w if n != baseline))
    per_mode: dict[str, ModeNoise] = {}
    speedups: dict[str, Speedup] = {}
    k = len(workers)
    machine = [r for i, load in enumerate(loads) for r in _tagged(machine_reasons(load), i, k)]
    for name in names:
        try:  # a process that did not time this mode has no rounds of it: left out
            combined = paired_processes(
                [w.get(baseline, ()) for w in workers], [w.get(name, ()) for w in workers], loads
            )
        except ValueError:  # no round in common with the baseline
            continue
        per_mode[name] = ModeNoise(
            ratio_spread=max(r.spread for r in combined.per_process), reasons=combined.own
        )
        ratio = combined.ratio
        speedups[name] = Speedup(
            median=ratio.median,
            ci95=ratio.ci95,
            method=_method(combined.processes),
            rounds=ratio.n,
            ratios=PairedRatios(p25=ratio.p25, p75=ratio.p75, spread=ratio.spread),
            per_round=combined.ratios,
            noise="; ".join(combined.reasons) or None,  # what the guard saw
            inconclusive=combined.inconclusive,
            processes=combined.processes,
            per_process=tuple(
                ProcessSpeedup(median=r.median, ci95=r.ci95, rounds=r.n)
                for r in combined.per_process
            )
            if combined.processes > 1
            else None,
            unstable=combined.unstable,
            widened=combined.widened,
        )
    noise = TimingNoise(
        method=_method(len(present)),
        load=busiest,
        thresholds=THRESHOLDS,
        signals=NoiseSignals(baseline=signals, modes=per_mode),
        reasons=tuple(machine),
        tripped=bool(machine) or any(m.reasons for m in per_mode.values()),
        context=tuple(context),
    )
    if len(workers) > 1:
        noise = noise.adding(
            process_loads=tuple(load or MachineLoad(json_keys=()) for load in loads)
        )
    return speedups, noise


def run_processes(run: Run) -> tuple[list[dict[str, tuple[float, ...]]], list[MachineLoad | None]]:
    """A stored run's timing processes: each one's blocks per mode (what `paired_speedups`
    takes) and its machine load (None where it was not read). The one place the statistics read
    per-process samples from a record (`latency_ms.processes`, or `samples` as one process, and
    `timing_noise.process_loads`): compare and the re-reading below go through it."""
    series = {
        name: mode.latency_ms.process_samples()
        for name, mode in run.ok_modes.items()
        if mode.latency_ms is not None and mode.latency_ms.process_samples()
    }
    k = max((len(p) for p in series.values()), default=0)
    workers = [{name: p[i] for name, p in series.items() if i < len(p)} for i in range(k)]
    noise = run.timing_noise
    if noise is not None and noise.process_loads and len(noise.process_loads) == k:
        return workers, [load if load.to_json() else None for load in noise.process_loads]
    load = noise.load if noise is not None else None
    return workers, [load] * k if k == 1 else [None] * k


def mode_processes(run: Run, mode: str) -> tuple[tuple[float, ...], ...]:
    """One mode's blocks in each of a stored run's timing processes (() when it was not timed)."""
    return tuple(w[mode] for w in run_processes(run)[0] if mode in w)


def run_speedups(run: Run, baseline: str = "eager") -> tuple[dict[str, Speedup], TimingNoise]:
    """`paired_speedups` again from a stored run's samples and machine loads (run_processes):
    an old run re-read with today's statistics."""
    return paired_speedups(*run_processes(run), baseline)


@dataclass(frozen=True)
class PairedGate(Section):
    """Head against base, block by block in the same rounds (head / base: > 1 is slower), in
    each timing process, combined across them (PairedProcesses)."""

    ratio: PairedRatio
    reasons: list[str]  # the guard's findings
    regression: bool
    inconclusive: str | None
    context: list[str] = required_factory(list)  # base's own level changes (not judged)
    method: str = required(METHOD)
    processes: int | None = omitted()  # timing processes (absent: one)
    per_process: list[PairedRatio] | None = omitted()
    unstable: str | None = omitted()
    widened: str | None = omitted()  # why the interval holds the ratios' 10th-90th percentiles


def paired_gate(
    base_ms: Sequence[Sequence[float]],
    head_ms: Sequence[Sequence[float]],
    limit_pct: float | None,
    loads: Sequence[MachineLoad | None],
) -> PairedGate:
    """A regression: the median head/base ratio above 1 + limit and its whole 95% interval above
    1 (`base_ms[i]`, `head_ms[i]`: process i's blocks; `loads[i]`: its machine load). A busy
    machine or too few rounds withhold it unless beyond the noise band (see beyond_noise);
    processes that disagree withhold it; a median beyond the limit that is not called is
    inconclusive (it neither passes nor fails)."""
    combined = paired_processes(head_ms, base_ms, loads)
    ratio = combined.ratio
    k = combined.processes
    context = [c for i, b in enumerate(base_ms) if b for c in _tagged(baseline_context(b)[1], i, k)]
    beyond_limit = limit_pct is not None and (ratio.median - 1) * 100 > limit_pct
    regression = beyond_limit and ratio.ci95[0] > 1.0 and combined.inconclusive is None
    inconclusive = combined.inconclusive
    if beyond_limit and not regression and inconclusive is None:
        saw = f" (noise: {'; '.join(combined.reasons)})" if combined.reasons else ""
        inconclusive = (
            f"head/base {ratio.median:.3f} is beyond the +{limit_pct:g}% limit, but its 95% "
            f"interval reaches {ratio.ci95[0]:.3f}{saw}: not called"
        )
    return PairedGate(
        ratio,
        list(combined.reasons),
        regression,
        inconclusive,
        context,
        _method(k),
        processes=k if k > 1 else None,
        per_process=list(combined.per_process) if k > 1 else None,
        unstable=combined.unstable,
        widened=combined.widened,
    )
