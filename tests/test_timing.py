import gzip
import json
import statistics
from pathlib import Path

import pytest

from profreport.capture.timing import (
    DEVICE_WARMUP_S,
    TimingConfig,
    block_calls,
    device_timing,
    expected_timing_s,
    measure_latency,
    rotated,
    steady_start,
    warm_up,
)

H200_SIMPLE = Path(__file__).parent / "data" / "runs" / "h200" / "simple" / "run.json.gz"


class FakeClock:
    """Time advances only when a fake workload runs: timing is exact and instant."""

    def __init__(self):
        self.t = 0.0
        self.order = []

    def __call__(self):
        return self.t

    def work(self, name, seconds):
        def fn():
            self.t += seconds
            self.order.append(name)

        return fn

    def varying(self, name, seconds_of_call):
        """A workload whose n-th call (from 0) takes seconds_of_call(n)."""
        calls = [0]

        def fn():
            self.t += seconds_of_call(calls[0])
            calls[0] += 1
            self.order.append(name)

        return fn


def test_blocks_last_the_same_and_samples_are_per_call():
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=0.5, max_time_s=100, block_s=0.02, min_blocks=5, warmup_s=0.0)
    fns = {"eager": clock.work("eager", 0.004), "compile": clock.work("compile", 0.001)}
    res = measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock)
    # every block lasts block_s: 5 calls of 4 ms, 20 calls of 1 ms
    assert res["eager"].calls_per_block == 5 and res["compile"].calls_per_block == 20
    assert all(abs(s - 4.0) < 1e-9 for s in res["eager"].samples_ms)
    assert all(abs(s - 1.0) < 1e-9 for s in res["compile"].samples_ms)
    # stop rule: >= min_blocks and >= min_time_s measured per mode
    for r in res.values():
        assert len(r.samples_ms) >= 5
        assert r.measured_s >= 0.5
        assert r.warmup_ms == [] and r.warmup_steady
    assert len(res["eager"].samples_ms) == len(res["compile"].samples_ms)


def test_one_slow_first_call_never_sizes_a_block():
    """Issue 39: base's compile recompiled on its first timed call (220 ms, then 0.45 ms calls):
    the warm-up window held that one call, which alone made base's block one call, against
    13-17 for the identical head. Now both get the same block."""
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=0.1, max_time_s=100, block_s=0.02, min_blocks=15, warmup_s=0.1)
    fns = {
        "base": clock.varying("base", lambda n: 0.22 if n == 0 else 0.00045),
        "head": clock.work("head", 0.00045),
    }
    res = measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock)
    assert res["base"].calls_per_block == res["head"].calls_per_block == 44  # 20 ms / 0.45 ms
    assert res["base"].steady_call_s == pytest.approx(0.00045)
    assert res["base"].samples_ms == pytest.approx(res["head"].samples_ms)


def test_block_calls_make_every_block_as_long_as_the_longest():
    assert block_calls({"eager": 0.001, "compile": 0.003}, 0.02) == {"eager": 20, "compile": 7}
    # a call longer than block_s sets the duration for everyone
    assert block_calls({"eager": 0.05, "compile": 0.001}, 0.02) == {"eager": 1, "compile": 50}


def test_warm_up_waits_for_a_steady_call_time():
    """A call time that falls from 2 ms to 1 ms over the first 200 calls (a cache filling, a
    clock ramping up): the warm-up goes on until the probes agree, and settles on 1 ms."""
    cfg = TimingConfig(block_s=0.02, warmup_s=0.0)
    clock = FakeClock()
    fns = {"m": clock.varying("m", lambda n: 0.001 + 0.001 * max(0.0, 1 - n / 200))}
    warmed = warm_up(fns, lambda: None, cfg, until=100.0, clock=clock, order=rotated)
    call_s, steady = warmed["m"]
    assert steady and call_s == pytest.approx(0.001, rel=0.05)
    assert len(clock.order) > 200
    # a deadline first: the call time it had then, and not steady
    clock = FakeClock()
    fns = {"m": clock.varying("m", lambda n: 0.001 + 0.001 * max(0.0, 1 - n / 200))}
    call_s, steady = warm_up(fns, lambda: None, cfg, until=0.05, clock=clock, order=rotated)["m"]
    assert not steady and call_s > 0.0015


@pytest.mark.parametrize(("spiked", "probes"), [((), 6), ((5,), 6), ((4, 5), 8)])
def test_one_probe_off_does_not_keep_the_warm_up_going(spiked, probes):
    """A steady 1 ms call whose probes `spiked` (counted from 0) ran 30% slow, a preemption:
    one probe off among the last ones is noise and the warm-up ends after its six probes, as
    without it; two off are not steady until the window has passed them."""
    cfg = TimingConfig(block_s=0.02, warmup_s=0.0)
    clock = FakeClock()
    # probes of 1, 10, then 20 calls (until a slow one sizes them): probe k >= 2 holds calls
    # 11 + 20 (k - 2) onwards
    starts = [0, 1, *(11 + 20 * (k - 2) for k in range(2, 12))]
    slow = {n for k in spiked for n in range(starts[k], starts[k + 1])}
    fns = {"m": clock.varying("m", lambda n: 0.0013 if n in slow else 0.001)}
    syncs = []
    warmed = warm_up(fns, lambda: syncs.append(1), cfg, until=100.0, clock=clock, order=rotated)
    call_s, steady = warmed["m"]
    assert steady and call_s == pytest.approx(0.001)
    assert len(syncs) == 2 * probes  # a probe syncs before and after its calls


def test_warm_up_probes_every_callable_in_the_same_rounds():
    """Identical code warmed one after the other under a neighbour's load got 42 and 18 calls
    per block. Warmed in the same rounds, a load that comes and goes hits both alike."""
    clock = FakeClock()
    busy = {"on": False}

    def slowed(name):
        def fn():
            clock.t += 0.0005 * (2.3 if busy["on"] else 1.0)
            clock.order.append(name)
            busy["on"] = 0.1 < clock.t < 0.3  # a neighbour busy from 0.1 s to 0.3 s

        return fn

    cfg = TimingConfig(min_time_s=0.1, max_time_s=100, block_s=0.02, min_blocks=15, warmup_s=0.1)
    res = measure_latency(
        {"base": slowed("base"), "head": slowed("head")}, lambda: None, cfg, clock
    )
    assert res["base"].calls_per_block == res["head"].calls_per_block
    assert clock.order[:3] == ["base", "head", "head"]  # probes in rotating rounds


def test_rounds_are_interleaved_in_rotating_order():
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=0.0, max_time_s=100, block_s=0.001, min_blocks=4, warmup_s=0.0)
    fns = {n: clock.work(n, 0.002) for n in ("a", "b", "c")}
    measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock)
    # one call per block; skip the warm-up: 6 rounds of one-call probes
    assert clock.order[:6] == ["a", "b", "c", "b", "c", "a"]
    rounds = [clock.order[18 + i * 3 : 21 + i * 3] for i in range(4)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]


def test_h200_compile_rounds_before_its_level_settled_are_warm_up():
    """The H200 run of `simple`: compile's blocks were 0.19-0.20 ms for five rounds, then
    0.12-0.14 ms (eager steady throughout): those five rounds are warm-up."""
    run = json.loads(gzip.decompress(H200_SIMPLE.read_bytes()))
    compile_ms = run["modes"]["compile"]["latency_ms"]["samples"]
    assert steady_start(compile_ms) == 5
    assert steady_start(run["modes"]["eager"]["latency_ms"]["samples"]) == 0
    # a first round inside the later rounds' noise is no warm-up
    assert steady_start([1.04, 1.0, 0.97, 1.03, 1.01, 0.99, 1.02, 0.98, 1.0]) == 0


def test_rounds_still_settling_are_dropped_and_timing_goes_on():
    """The H200 shape: a mode twice as slow for its first five rounds (past its warm-up). Those
    rounds are kept apart, for every series (rounds stay paired), and the rounds go on until
    min_blocks steady ones."""
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=0.0, max_time_s=100, block_s=0.01, min_blocks=15, warmup_s=0.0)
    fns = {
        "eager": clock.work("eager", 0.01),
        "compile": clock.varying("compile", lambda n: 0.01 if n < 11 else 0.005),
    }
    res = measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock)
    # warm-up: 6 one-call probes each (calls 0-5 of compile); rounds of one call each: compile's
    # calls 6-10 are its first five rounds, at 10 ms
    compile, eager = res["compile"], res["eager"]
    assert compile.warmup_ms == pytest.approx([10.0] * 5)
    assert compile.samples_ms == pytest.approx([5.0] * 15)
    assert eager.warmup_ms == pytest.approx([10.0] * 5)
    assert eager.samples_ms == pytest.approx([10.0] * 15)
    assert compile.measured_s == pytest.approx(15 * 0.005)


def test_wants_more_keeps_the_rounds_going():
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=0.0, max_time_s=100, block_s=0.001, min_blocks=4, warmup_s=0.0)
    fns = {n: clock.work(n, 0.002) for n in ("a", "b")}
    seen = []

    def wants_more(samples):
        seen.append(len(samples["a"]))
        return len(samples["a"]) < 9

    res = measure_latency(fns, lambda: None, cfg=cfg, clock=clock, wants_more=wants_more)
    assert len(res["a"].samples_ms) == 9 and seen == [4, 5, 6, 7, 8, 9]
    # the budget still ends it
    clock = FakeClock()
    fns = {n: clock.work(n, 0.002) for n in ("a", "b")}
    cfg = TimingConfig(min_time_s=0.0, max_time_s=0.1, block_s=0.001, min_blocks=4, warmup_s=0.0)
    res = measure_latency(fns, lambda: None, cfg=cfg, clock=clock, wants_more=lambda s: True)
    assert 0.1 - 0.004 <= clock.t <= 0.1 + 1e-9 and len(res["a"].samples_ms) >= 18


def test_budget_stops_timing():
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=1000, max_time_s=1.0, block_s=0.01, min_blocks=3, warmup_s=0.0)
    res = measure_latency(
        {"slow": clock.work("slow", 0.1)}, sync=lambda: None, cfg=cfg, clock=clock
    )
    # warm-up: a tenth of the budget (one 0.1 s round), then rounds of one 0.1 s block while
    # the next one fits in 1.0 s
    assert clock.t <= 1.0 + 1e-9
    assert len(res["slow"].samples_ms) == 9 and abs(res["slow"].measured_s - 0.9) < 1e-9


def test_the_budget_covers_the_warm_up_of_a_heavy_model():
    """Three modes of a model whose one call takes 1 s, 10 s of budget: the warm-up has a
    tenth of the budget (1 s): one round of one call each. Then 3 s rounds while the next one
    fits: two."""
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=100, max_time_s=10.0, block_s=0.02, min_blocks=15, warmup_s=0.1)
    fns = {n: clock.work(n, 1.0) for n in ("eager", "trace", "compile")}
    res = measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock)
    assert clock.t == 9.0 <= cfg.max_time_s
    assert clock.order[:3] == ["eager", "trace", "compile"]  # warm-up, nothing else
    assert [len(r.samples_ms) for r in res.values()] == [2, 2, 2]
    assert [r.calls_per_block for r in res.values()] == [1, 1, 1]
    assert not any(r.warmup_steady for r in res.values())  # one call says nothing steady


def test_a_budget_shorter_than_one_round_still_times_each_mode_once():
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=100, max_time_s=1.0, block_s=0.02, min_blocks=15, warmup_s=0.5)
    fns = {n: clock.work(n, 1.0) for n in ("eager", "compile")}
    res = measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock)
    # the warm-up's first round, then the timing's first: both always run (the overrun the
    # documentation states)
    assert clock.order == ["eager", "compile", "eager", "compile"]
    assert [len(r.samples_ms) for r in res.values()] == [1, 1]


def test_expected_timing_follows_the_stop_rule_and_the_budget():
    cfg = TimingConfig(min_time_s=1.0, max_time_s=60.0, block_s=0.02, min_blocks=15, warmup_s=0.1)
    # light: 5 ms calls, blocks of 20 ms; a warm-up of 6 rounds of 3 probes of 20 ms (more
    # than 0.1 s); 1 s of blocks needs 50 rounds of 3 modes
    light = expected_timing_s(0.005, 3, cfg)
    assert light == pytest.approx(6 * 3 * 0.02 + 50 * 3 * 0.02)
    # heavy: 2 s calls want 6 s of warm-up (a tenth of the budget: one round of 6 s) and 15
    # rounds of 6 s: the 60 s budget rules
    assert expected_timing_s(2.0, 3, cfg) == 60.0
    # heavier than the budget allows: a warm-up call each and the one round that always runs
    assert expected_timing_s(10.0, 3, cfg) == 3 * 10 + 3 * 10
    no_warmup = TimingConfig(min_time_s=1.0, max_time_s=60.0, warmup_s=0.0)
    assert expected_timing_s(10.0, 3, no_warmup) == 3 * 10 + 3 * 10


def test_expected_timing_matches_a_measured_run_on_the_fake_clock():
    cfg = TimingConfig(min_time_s=100, max_time_s=10.0, block_s=0.02, min_blocks=15, warmup_s=0.1)
    clock = FakeClock()
    fns = {n: clock.work(n, 1.0) for n in ("eager", "trace", "compile")}
    measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock)
    # the run ends within the budget, one round (3 s) short of it at most
    assert cfg.max_time_s - 3.0 <= clock.t <= expected_timing_s(1.0, 3, cfg) == cfg.max_time_s
    # a light model: the estimate within 10% of the fake clock's run
    for call_s in (0.0005, 0.004):
        cfg = TimingConfig(min_time_s=1.0, max_time_s=60.0, block_s=0.02, warmup_s=0.1)
        clock = FakeClock()
        fns = {n: clock.work(n, call_s) for n in ("eager", "compile")}
        measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock)
        assert clock.t == pytest.approx(expected_timing_s(call_s, 2, cfg), rel=0.1)


# ---------------------------------------------------------------------------------------------
# the GPU's warm-up, on the H200 record's own rounds
# ---------------------------------------------------------------------------------------------


def _h200_simple():
    run = json.loads(gzip.decompress(H200_SIMPLE.read_bytes()))
    modes = {n: m["latency_ms"] for n, m in run["modes"].items()}
    return run["settings"]["timing"], modes


def _h200_rise():
    """When compile's level fell in the recorded timing (seconds from its start) and after how
    many of its calls, from the record's rounds and the code that timed them (c02eec3: each mode
    warmed warmup_s in turn and sized its block in blocks of 1, 10, 100... calls, at most two
    blocks' time; then rounds of one block each): compile's first five rounds were slow."""
    timing, modes = _h200_simple()
    rounds_s = sum(
        sum(lat["samples"][:5]) * lat["calls_per_block"] / 1000 for lat in modes.values()
    )
    warmups_s = len(modes) * timing["warmup_s"]
    earliest, latest = warmups_s + rounds_s, warmups_s + rounds_s + len(modes) * 2 * 0.02
    slow_ms = statistics.median(modes["compile"]["samples"][:5])
    calls = (
        timing["warmup_s"] / (slow_ms / 1000)  # its warm-up's single calls
        + 1 + 10 + 100  # its calibration blocks
        + 5 * modes["compile"]["calls_per_block"]  # its five slow rounds
    )  # fmt: skip
    return earliest, latest, round(calls)


def _recorded_device(clock, rise):
    """The H200's modes as the fake clock runs them: each at the level of its later rounds (the
    median of rounds 6-15), compile at its first rounds' level until `rise(t, calls)` says
    the device's step time has settled."""
    _, modes = _h200_simple()
    later = {n: statistics.median(lat["samples"][5:]) / 1000 for n, lat in modes.items()}
    slow = statistics.median(modes["compile"]["samples"][:5]) / 1000
    calls = [0]

    def compiled():
        clock.t += later["compile"] if rise(clock.t, calls[0]) else slow
        calls[0] += 1

    fns = {n: clock.work(n, s) for n, s in later.items() if n != "compile"}
    fns["compile"] = compiled
    return fns, later, slow


def test_h200_compile_settled_about_a_second_into_its_timing():
    earliest, latest, calls = _h200_rise()
    assert 1.0 < earliest < latest < 1.3
    assert 1100 < calls < 1400
    assert latest < DEVICE_WARMUP_S


@pytest.mark.parametrize("model", ["after a time", "after a number of calls"])
def test_a_gpu_warm_up_outlasts_the_h200s_slow_start(model):
    """compile on the H200: 0.19-0.20 ms blocks for about the first second and a bit of its
    timing, then 0.12-0.13 ms, whether that follows the time (a clock ramping up) or its own
    calls. Today's warm-up settles on the slow level (steady for its six probes): compile's
    samples mix both levels. On a GPU the warm-up lasts DEVICE_WARMUP_S first: every sample is
    at the settled level."""
    earliest, latest, calls = _h200_rise()
    rise_s = (earliest + latest) / 2

    def rise(t, n):
        return t >= rise_s if model == "after a time" else n >= calls

    timing, _ = _h200_simple()
    cpu = TimingConfig(**timing)
    clock = FakeClock()
    fns, later, slow = _recorded_device(clock, rise)
    before = measure_latency(fns, sync=lambda: None, cfg=cpu, clock=clock)
    slow_samples = [s for s in before["compile"].samples_ms if s > (slow + later["compile"]) / 2e-3]
    assert slow_samples, "the defect: compile's timed rounds hold its slow start"

    gpu = device_timing(cpu, "cuda")
    assert (gpu.warmup_s, gpu.max_time_s) == (DEVICE_WARMUP_S, cpu.max_time_s)
    clock = FakeClock()
    fns, later, slow = _recorded_device(clock, rise)
    after = measure_latency(fns, sync=lambda: None, cfg=gpu, clock=clock)
    assert after["compile"].samples_ms == pytest.approx(
        [later["compile"] * 1000] * len(after["compile"].samples_ms)
    )
    assert len(after["compile"].samples_ms) >= cpu.min_blocks
    eager = after["eager"].samples_ms
    assert eager == pytest.approx([later["eager"] * 1000] * len(eager))
    assert clock.t <= cpu.max_time_s + 1e-9  # within the same budget


def test_the_cpu_keeps_its_timing_settings():
    cfg = TimingConfig(min_time_s=0.2, max_time_s=4.0, warmup_s=0.1)
    assert device_timing(cfg, "cpu") is cfg
    assert device_timing(cfg, "cuda").warmup_s == DEVICE_WARMUP_S
    long_warmup = TimingConfig(warmup_s=5.0)
    assert device_timing(long_warmup, "cuda") is long_warmup
