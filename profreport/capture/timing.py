"""Latency, timed outside the profiler.

Each mode runs in blocks of `calls_per_block` back-to-back calls, sized so one block lasts at
least `block_s` (the idea of torch.utils.benchmark's blocked_autorange: the timer's own cost and
resolution vanish against the block). Modes are interleaved round by round, each round in a
rotated order, so slow drift of the machine (frequency, other load) hits every mode alike. The
device is synchronized before the clock starts and before it stops. Timing stops once every mode
has `min_blocks` samples and `min_time_s` of measured time, or at `max_time_s` overall: the
budget covers the warm-up and the calibration too, and a round starts only when the last one
says it will end within the budget. The first round always runs (every mode needs a sample), so
a model whose warm-up and one round are longer than the budget overruns it by those.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from profreport.record.model import TimingSettings


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


@dataclass
class TimingResult:
    calls_per_block: int
    samples_ms: list[float] = field(default_factory=list)  # per-call latency of each block
    measured_s: float = 0.0


Clock = Callable[[], float]


def _time_block(fn: Callable[[], Any], sync: Callable[[], None], calls: int, clock: Clock) -> float:
    sync()
    start = clock()
    for _ in range(calls):
        fn()
    sync()
    return clock() - start


def _calibrate(
    fn: Callable[[], Any], sync: Callable[[], None], cfg: TimingConfig, clock: Clock
) -> int:
    calls = 1
    while True:
        elapsed = _time_block(fn, sync, calls, clock)
        if elapsed >= cfg.block_s or calls >= 1_000_000:
            return calls
        # Aim past the target a little so one more measurement usually settles it.
        grow = cfg.block_s * 1.2 / max(elapsed, 1e-9)
        calls = max(calls + 1, min(calls * 10, math.ceil(calls * grow)))


def rotated(round_no: int, names: list[str]) -> list[str]:
    """The default round order: the names rotated by one place each round."""
    shift = round_no % len(names)
    return names[shift:] + names[:shift]


def measure_latency(
    fns: dict[str, Callable[[], Any]],
    sync: Callable[[], None],
    cfg: TimingConfig = TimingConfig(),  # noqa: B008 (frozen: safe to share)
    clock: Callable[[], float] = time.perf_counter,
    on_round: Callable[[int, dict[str, TimingResult]], None] | None = None,
    order: Callable[[int, list[str]], list[str]] | None = None,
) -> dict[str, TimingResult]:
    """Time every callable in `fns` (already warmed up) in interleaved rounds.

    A callable that raises stops the timing with :class:`TimingFailed` naming it. `order` gives
    each round's order (default :func:`rotated`); it must name every callable once.
    """
    deadline = clock() + cfg.max_time_s
    results: dict[str, TimingResult] = {}
    for name, fn in fns.items():
        with _blame(name):
            warm_until = min(clock() + cfg.warmup_s, deadline)
            fastest_s = None
            while clock() < warm_until:
                call_s = _time_block(fn, sync, 1, clock)
                fastest_s = call_s if fastest_s is None else min(fastest_s, call_s)
            # warm-up calls all as long as a block (the fastest: one preempted call is not the
            # model) already say a block is one call
            heavy = fastest_s is not None and fastest_s >= cfg.block_s
            calls = 1 if heavy else _calibrate(fn, sync, cfg, clock)
            results[name] = TimingResult(calls_per_block=calls)

    names = list(fns)
    round_no = 0
    while True:
        round_started = clock()
        for name in (order or rotated)(round_no, names):
            res = results[name]
            with _blame(name):
                elapsed = _time_block(fns[name], sync, res.calls_per_block, clock)
            res.samples_ms.append(elapsed * 1000.0 / res.calls_per_block)
            res.measured_s += elapsed
        round_no += 1
        if on_round is not None:
            on_round(round_no, results)
        enough = all(
            len(r.samples_ms) >= cfg.min_blocks and r.measured_s >= cfg.min_time_s
            for r in results.values()
        )
        now = clock()
        if enough or now + (now - round_started) > deadline:  # the next round would overrun
            return results


def expected_timing_s(call_s: float, n_modes: int, cfg: TimingConfig) -> float:
    """About how long `measure_latency` will take for `n_modes` modes whose calls take about
    `call_s` each (eager's, measured once): each mode's warm-up and calibration (none after a
    warm-up call as long as a block), then the rounds the stop rule asks for; at most the
    budget, unless the setup and one round exceed it."""
    block_s = max(call_s, cfg.block_s)  # a block is at least one call
    warmup_s = max(cfg.warmup_s, call_s) if cfg.warmup_s > 0 else 0.0  # whole calls
    calibration_s = 0.0 if call_s >= cfg.block_s and cfg.warmup_s > 0 else block_s
    setup_s = n_modes * (warmup_s + calibration_s)
    rounds = max(cfg.min_blocks, math.ceil(cfg.min_time_s / block_s))
    round_s = n_modes * block_s
    wanted_s = setup_s + rounds * round_s
    return wanted_s if wanted_s <= cfg.max_time_s else max(cfg.max_time_s, setup_s + round_s)
