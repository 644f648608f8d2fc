"""Latency, timed outside the profiler.

The callables are first warmed up together, in rounds, until every one's call time is steady:
each round runs one probe of each (back-to-back calls, sized from the median of its last few
probes, so one slow call, a recompile or a cold cache, never sizes anything), until each
callable's level holds (the median of its last probes agrees with the ones before them, and all
of them but one with it: STEADY_TOL), for at least `warmup_s` and at most WARMUP_SHARE of the budget. Probing them in the same rounds
measures every call time under the same conditions (one warmed after another saw another
machine: identical code got 42 and 18 calls per block under a neighbour's load). Then every
callable gets a block of the same duration: `calls_per_block` back-to-back calls, as many as
last one block of at least `block_s` (or as long as the slowest callable's call, when that is
longer). A fixed cost each block pays once (the sync, the clock, the first call after another
model evicted the caches) is then the same share of every block, and cancels in any ratio of two
of them; blocks of unequal duration put it in one series more than in the other (issue 39: one
call per block in base against 13-17 in head made identical code 10% "faster").

Callables are interleaved round by round, each round in a rotated order, so slow drift of the
machine (frequency, other load) hits every one alike. The device is synchronized before the
clock starts and before it stops. Leading rounds in which a series was still settling (its
blocks all off its later level the same way: a clock ramping up, a cache filling) are warm-up
too: they are kept apart, out of the statistics, and timing goes on. Timing stops once every
callable has `min_blocks` steady rounds and `min_time_s` of steady measured time (and the
caller's `wants_more` is satisfied), or at `max_time_s` overall: the budget covers the warm-up
too, and a round starts only when the last one says it will end within the budget. The first
rounds of warm-up and of timing always run (every callable needs a sample), so a model whose
two calls per mode are longer than the budget overruns it by those.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from profreport.record.model import TimingSettings


def series_key(stage: str, mode: str) -> str:
    """A timed series' name: its mode, after its stage and a slash where it has one (`head/compile`
    in `profreport ab`; a run's own modes are named by the mode alone)."""
    return f"{stage}/{mode}" if stage else mode


def stage_and_mode(key: str) -> tuple[str, str]:
    """The stage ("" for a run's own) and the mode a series_key names."""
    stage, _, mode = key.rpartition("/")
    return stage, mode


class TimingFailed(Exception):
    """A mode raised while being timed (out of memory, say); `mode` names it."""

    def __init__(self, mode: str, error: BaseException) -> None:
        super().__init__(f"{mode} failed while being timed: {type(error).__name__}: {error}")
        self.mode, self.error = mode, error


@contextmanager
def _blame(mode: str) -> Iterator[None]:
    try:
        yield
    except (Exception, SystemExit) as exc:  # sys.exit() in a model is that model failing
        raise TimingFailed(mode, exc) from exc


# The timing settings are the run record's own (settings.timing): one class for both.
TimingConfig = TimingSettings

# A call time is steady when the median of the last STEADY_PROBES warm-up probes is within
# STEADY_TOL of the median of the STEADY_PROBES before them, and all of them but one within
# STEADY_TOL of it (_steady). 20 ms CPU blocks on a quiet machine vary by 1-4%
# (bench/latency_fidelity.py), a recompile or a cold cache by far more (a 220 ms first call
# against 0.45 ms ones in issue 39).
STEADY_PROBES = 3
STEADY_TOL = 0.05
# The warm-up takes at most this share of the budget (and at least `warmup_s`); a callable
# still unsteady then is judged by its rounds (steady_start).
WARMUP_SHARE = 0.1
# On a GPU a step time can hold one level for a second and then change: on the H200, simple's
# compile ran 0.19-0.20 ms blocks for about the first 1.2 s of its timing, then 0.12-0.13 ms,
# which the first steady probes cannot foresee (tests/test_timing.py replays the record). There
# the warm-up lasts at least this long, so its steady probes are the device's settled time.
DEVICE_WARMUP_S = 2.0


@dataclass
class TimingResult:
    calls_per_block: int
    samples_ms: list[float] = field(default_factory=list)  # per-call latency of each block
    measured_s: float = 0.0  # time of the blocks in samples_ms
    # per-call latency of the blocks of the leading rounds that were warm-up (steady_start)
    warmup_ms: list[float] = field(default_factory=list)
    steady_call_s: float = 0.0  # the call time the warm-up settled on (sized the block)
    warmup_steady: bool = True  # False: the warm-up's share of the budget ran out first


@dataclass
class Reference:
    """Fixed workloads timed in the rounds beside the callables (capture/reference.py builds
    them: the run's machine reference): warmed up with them, then one call per block at the end
    of a round whenever their time so far is within `share` of the rounds' time, so they see
    the machine as the callables did at a small cost."""

    parts: dict[str, Callable[[], Any]]
    share: float
    samples_ms: dict[str, list[float]] = field(default_factory=dict)
    spent_s: float = 0.0  # time of its own blocks
    rounds_s: float = 0.0  # time of the rounds it was part of (its blocks included)

    def blame(self, part: str) -> str:
        """The name a TimingFailed carries when `part` raises."""
        return f"{REFERENCE} {part}"


REFERENCE = "machine reference"  # how a failing part is named (never a callable's name)
REFERENCE_WARMUP_CALLS = 2  # first-touch page faults, library initialisation

Clock = Callable[[], float]


def _time_block(fn: Callable[[], Any], sync: Callable[[], None], calls: int, clock: Clock) -> float:
    sync()
    start = clock()
    for _ in range(calls):
        fn()
    sync()
    return clock() - start


def _steady(per_call_s: Sequence[float]) -> bool:
    """The median of the last STEADY_PROBES probes is within STEADY_TOL of the median of the
    STEADY_PROBES before them (a ramp moves it), and all of the last but one agree with it
    within STEADY_TOL. One probe off is noise, not settling: a fresh timing worker's 20 ms
    probes of simple were off by 5-60% about once in 20 (a preemption), and with five modes
    probed a round, waiting for every one's last probes to agree kept the warm-up going to its
    cap (13 rounds, 2 s) where each mode's level had held from its second probe."""
    if len(per_call_s) < 2 * STEADY_PROBES:
        return False
    last = per_call_s[-STEADY_PROBES:]
    mid = statistics.median(last)
    before = statistics.median(per_call_s[-2 * STEADY_PROBES : -STEADY_PROBES])
    off = sum(abs(x - mid) > STEADY_TOL * mid for x in last)
    return abs(before - mid) <= STEADY_TOL * mid and off <= 1


def warm_up(
    fns: Mapping[str, Callable[[], Any]],
    sync: Callable[[], None],
    cfg: TimingConfig,
    until: float,
    clock: Clock,
    order: Callable[[int, list[str]], list[str]],
    reference: Reference | None = None,
) -> dict[str, tuple[float, bool]]:
    """Probe every callable once per round, in `order`, until each one's call time is steady
    (and `cfg.warmup_s` has passed) or the clock reaches `until`; the first round always runs.
    The reference's parts are called REFERENCE_WARMUP_CALLS times first.
    Each probe is sized to last about `cfg.block_s` from the median of the callable's last
    STEADY_PROBES probes, so a single slow call never sizes one. Returns, per callable, its
    steady call time (that median, seconds) and whether it was steady."""
    started = clock()
    if reference is not None:
        for part, fn in reference.parts.items():
            with _blame(reference.blame(part)):
                for _ in range(REFERENCE_WARMUP_CALLS):
                    fn()
        sync()
    names = list(fns)
    per_call: dict[str, list[float]] = {name: [] for name in names}
    calls = dict.fromkeys(names, 1)
    round_no = 0
    while True:
        for name in order(round_no, names):
            with _blame(name):
                elapsed = _time_block(fns[name], sync, calls[name], clock)
            per_call[name].append(max(elapsed / calls[name], 1e-12))
        round_no += 1
        now = clock()
        typical = {n: statistics.median(p[-STEADY_PROBES:]) for n, p in per_call.items()}
        steady = {n: _steady(p) for n, p in per_call.items()}
        if (all(steady.values()) and now - started >= cfg.warmup_s) or now >= until:
            return {n: (typical[n], steady[n]) for n in names}
        for n in names:  # float dust must not add a call
            grown = math.ceil(cfg.block_s / typical[n] - 1e-9)
            calls[n] = max(1, min(calls[n] * 10, grown))


def device_timing(cfg: TimingConfig, device_type: str) -> TimingConfig:
    """The timing settings for a device: on a GPU (any device but the CPU) the warm-up lasts at
    least DEVICE_WARMUP_S; the CPU's settings are left as they are."""
    if device_type == "cpu" or cfg.warmup_s >= DEVICE_WARMUP_S:
        return cfg
    return replace(cfg, warmup_s=DEVICE_WARMUP_S)


def block_calls(call_s: Mapping[str, float], block_s: float) -> dict[str, int]:
    """Calls per block for each callable, so that every block lasts about the same: at least
    `block_s`, or the slowest callable's one call."""
    duration = max(block_s, *call_s.values())
    return {name: max(1, round(duration / s)) for name, s in call_s.items()}


def steady_start(samples: Sequence[float]) -> int:
    """How many leading rounds of a series were still warm-up: the run of first blocks that all
    lie beyond the later rounds' noise the same way (above or below the median of the last two
    thirds by more than STEADY_TOL and twice their IQR/median), at most a third of the rounds;
    0 when the first block is at the level."""
    n = len(samples)
    if n < 3:
        return 0
    tail = sorted(samples[n // 3 :])
    level = statistics.median(tail)
    q1, q3 = tail[len(tail) // 4], tail[(3 * len(tail)) // 4]
    tol = level * max(STEADY_TOL, 2 * (q3 - q1) / level)
    above = samples[0] > level + tol
    run = 0
    for s in samples[: n // 3]:
        if (s > level + tol) if above else (s < level - tol):
            run += 1
        else:
            break
    return run


def rotated(round_no: int, names: list[str]) -> list[str]:
    """The default round order: the names rotated by one place each round."""
    shift = round_no % len(names)
    return names[shift:] + names[:shift]


def _time_reference(
    reference: Reference, sync: Callable[[], None], clock: Clock, round_s: float
) -> None:
    """One block of each part, when the reference's time so far is within its share of the
    rounds' time (this round's included)."""
    if reference.spent_s > reference.share * (reference.rounds_s + round_s):
        return
    for part, fn in reference.parts.items():
        with _blame(reference.blame(part)):
            elapsed = _time_block(fn, sync, 1, clock)
        reference.samples_ms.setdefault(part, []).append(elapsed * 1000.0)
        reference.spent_s += elapsed


def warmup_rounds(rounds: Mapping[str, Sequence[float]]) -> int:
    """Leading rounds that were warm-up for the whole round: the latest steady start of any
    series (rounds stay paired, so every series drops as many)."""
    return max((steady_start(s) for s in rounds.values()), default=0)


def measure_latency(
    fns: dict[str, Callable[[], Any]],
    sync: Callable[[], None],
    cfg: TimingConfig = TimingConfig(),  # noqa: B008 (frozen: safe to share)
    clock: Callable[[], float] = time.perf_counter,
    on_round: Callable[[int, dict[str, TimingResult]], None] | None = None,
    order: Callable[[int, list[str]], list[str]] | None = None,
    wants_more: Callable[[dict[str, list[float]]], bool] | None = None,
    reference: Reference | None = None,
) -> dict[str, TimingResult]:
    """Time every callable in `fns` (built, and called once at least) in interleaved rounds.

    A callable that raises stops the timing with :class:`TimingFailed` naming it. `order` gives
    each round's order (default :func:`rotated`); it must name every callable once.
    `wants_more` (each series' steady samples -> bool) keeps the rounds going past the stop
    rule while it says a result still lacks rounds, within the budget. `reference` is timed in
    the same rounds (its samples land in it); a part that raises stops the timing with a
    TimingFailed named by `reference.blame(part)`.
    """
    deadline = clock() + cfg.max_time_s
    until = min(clock() + max(cfg.warmup_s, WARMUP_SHARE * cfg.max_time_s), deadline)
    warmed = warm_up(fns, sync, cfg, until, clock, order or rotated, reference)
    calls = block_calls({name: w[0] for name, w in warmed.items()}, cfg.block_s)
    rounds: dict[str, list[float]] = {name: [] for name in fns}
    # during the rounds each result's samples_ms is its list in `rounds` (on_round reads them)
    results = {
        name: TimingResult(calls[name], rounds[name], 0.0, [], *warmed[name]) for name in fns
    }

    names = list(fns)
    round_no = 0
    while True:
        round_started = clock()
        for name in (order or rotated)(round_no, names):
            res = results[name]
            with _blame(name):
                elapsed = _time_block(fns[name], sync, res.calls_per_block, clock)
            rounds[name].append(elapsed * 1000.0 / res.calls_per_block)
        if reference is not None:
            _time_reference(reference, sync, clock, clock() - round_started)
            reference.rounds_s += clock() - round_started
        round_no += 1
        if on_round is not None:
            on_round(round_no, results)
        now = clock()
        out_of_time = now + (now - round_started) > deadline  # the next round would overrun
        if not out_of_time and len(rounds[names[0]]) < cfg.min_blocks:
            continue
        skip = warmup_rounds(rounds)
        steady = {name: s[skip:] for name, s in rounds.items()}
        enough = all(
            len(s) >= cfg.min_blocks and sum(s) * calls[name] / 1000.0 >= cfg.min_time_s
            for name, s in steady.items()
        )
        if out_of_time or (enough and (wants_more is None or not wants_more(steady))):
            for name, res in results.items():
                res.warmup_ms, res.samples_ms = rounds[name][:skip], steady[name]
                res.measured_s = sum(res.samples_ms) * res.calls_per_block / 1000.0
            return results


def expected_timing_s(call_s: float, n_modes: int, cfg: TimingConfig) -> float:
    """About how long `measure_latency` will take for `n_modes` modes whose calls take about
    `call_s` each (eager's, measured once): the warm-up (2 x STEADY_PROBES rounds of a block per
    mode, at least `warmup_s`, at most its share of the budget, one round at least), then the
    rounds the stop rule asks for; at most the budget, unless the two first rounds exceed it."""
    block_s = max(call_s, cfg.block_s)  # a block is at least one call
    round_s = n_modes * block_s
    share_s = max(cfg.warmup_s, WARMUP_SHARE * cfg.max_time_s)
    probes_s = 2 * STEADY_PROBES * round_s
    # the rounds that end at or past the warm-up's share
    warmup_s = probes_s if probes_s <= share_s else round_s * max(1, math.ceil(share_s / round_s))
    warmup_s = max(warmup_s, cfg.warmup_s)
    rounds = max(cfg.min_blocks, math.ceil(cfg.min_time_s / block_s))
    wanted_s = warmup_s + rounds * round_s
    return wanted_s if wanted_s <= cfg.max_time_s else max(cfg.max_time_s, warmup_s + round_s)
