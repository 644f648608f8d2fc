import pytest

from profreport.capture.timing import TimingConfig, expected_timing_s, measure_latency


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


def test_blocks_are_sized_and_samples_are_per_call():
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=0.5, max_time_s=100, block_s=0.02, min_blocks=5, warmup_s=0.0)
    fns = {"eager": clock.work("eager", 0.004), "compile": clock.work("compile", 0.001)}
    res = measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock)
    # A block lasts at least block_s, overshooting by at most the 20% calibration margin.
    assert 0.02 <= res["eager"].calls_per_block * 0.004 <= 0.02 * 1.25
    assert 0.02 <= res["compile"].calls_per_block * 0.001 <= 0.02 * 1.25
    assert all(abs(s - 4.0) < 1e-9 for s in res["eager"].samples_ms)
    assert all(abs(s - 1.0) < 1e-9 for s in res["compile"].samples_ms)
    # stop rule: >= min_blocks and >= min_time_s measured per mode
    for r in res.values():
        assert len(r.samples_ms) >= 5
        assert r.measured_s >= 0.5
    assert len(res["eager"].samples_ms) == len(res["compile"].samples_ms)


def test_rounds_are_interleaved_in_rotating_order():
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=0.0, max_time_s=100, block_s=0.001, min_blocks=4, warmup_s=0.0)
    fns = {n: clock.work(n, 0.002) for n in ("a", "b", "c")}
    measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock)
    # one call per block; skip the 3 calibration calls
    rounds = [clock.order[3 + i * 3 : 6 + i * 3] for i in range(4)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]


def test_budget_stops_timing():
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=1000, max_time_s=1.0, block_s=0.01, min_blocks=3, warmup_s=0.0)
    res = measure_latency(
        {"slow": clock.work("slow", 0.1)}, sync=lambda: None, cfg=cfg, clock=clock
    )
    # one calibration call, then rounds of one 0.1 s block while the next one fits in 1.0 s
    assert clock.t <= 1.0 + 1e-9
    assert len(res["slow"].samples_ms) == 9 and abs(res["slow"].measured_s - 0.9) < 1e-9


def test_the_budget_covers_warm_up_and_calibration_of_a_heavy_model():
    """Three modes of a model whose one call takes 1 s, 10 s of budget: one warm-up call each
    (as long as a block: no calibration call), then 3 s rounds while the next one fits: two.
    Before, warm-up and calibration (6 s) were outside the budget, then 4 rounds: 18 s."""
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=100, max_time_s=10.0, block_s=0.02, min_blocks=15, warmup_s=0.1)
    fns = {n: clock.work(n, 1.0) for n in ("eager", "trace", "compile")}
    res = measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock)
    assert clock.t == 9.0 <= cfg.max_time_s
    assert clock.order[:3] == ["eager", "trace", "compile"]  # warm-up, nothing else
    assert [len(r.samples_ms) for r in res.values()] == [2, 2, 2]
    assert [r.calls_per_block for r in res.values()] == [1, 1, 1]


def test_a_budget_shorter_than_one_round_still_times_each_mode_once():
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=100, max_time_s=1.0, block_s=0.02, min_blocks=15, warmup_s=0.5)
    fns = {n: clock.work(n, 1.0) for n in ("eager", "compile")}
    res = measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock)
    # eager's warm-up call (the budget had not run out) sizes its block; compile gets no
    # warm-up (it had) and one calibration call; then the one round that always runs: the
    # overrun the documentation states
    assert clock.order == ["eager", "compile", "eager", "compile"]
    assert [len(r.samples_ms) for r in res.values()] == [1, 1]


def test_expected_timing_follows_the_stop_rule_and_the_budget():
    cfg = TimingConfig(min_time_s=1.0, max_time_s=60.0, block_s=0.02, min_blocks=15, warmup_s=0.1)
    # light: 5 ms calls, blocks of 20 ms; 1 s of blocks needs 50 rounds of 3 modes
    light = expected_timing_s(0.005, 3, cfg)
    assert light == pytest.approx(3 * (0.1 + 0.02) + 50 * 3 * 0.02)
    # heavy: 2 s calls want 3 x (2 + 2) s of setup and 15 rounds of 6 s: the 60 s budget rules
    assert expected_timing_s(2.0, 3, cfg) == 60.0
    # heavier than the budget allows: a warm-up call each (it sizes the block: no calibration)
    # and the one round that always runs
    assert expected_timing_s(10.0, 3, cfg) == 3 * 10 + 3 * 10
    # without a timed warm-up, a calibration call each
    no_warmup = TimingConfig(min_time_s=1.0, max_time_s=60.0, warmup_s=0.0)
    assert expected_timing_s(10.0, 3, no_warmup) == 3 * 10 + 3 * 10


def test_expected_timing_matches_a_measured_run_on_the_fake_clock():
    cfg = TimingConfig(min_time_s=100, max_time_s=10.0, block_s=0.02, min_blocks=15, warmup_s=0.1)
    clock = FakeClock()
    fns = {n: clock.work(n, 1.0) for n in ("eager", "trace", "compile")}
    measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock)
    # the run ends within the budget, one round (3 s) short of it at most
    assert cfg.max_time_s - 3.0 <= clock.t <= expected_timing_s(1.0, 3, cfg) == cfg.max_time_s
