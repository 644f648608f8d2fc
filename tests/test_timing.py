from profreport.capture.timing import TimingConfig, measure_latency


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
    assert 1.0 <= res["slow"].measured_s < 1.3
