"""The paired statistic and the noise guard on synthetic samples: exact values, no timing."""

from __future__ import annotations

from collections import namedtuple
from types import SimpleNamespace
from typing import Any

import numpy as np
import psutil
import pytest

from profreport.analysis import paired, speedups
from profreport.analysis.verdict import _latency_clause
from profreport.capture import noise
from profreport.record.model import MachineLoad, OkMode, Speedup

QUIET = MachineLoad(other_busy_share=0.01)


def test_median_ci_rank_matches_the_binomial_table():
    # Standard table of distribution-free 95% intervals for the median: n -> rank k.
    assert paired.median_ci_rank(5) is None  # min..max covers only 93.75%
    assert paired.median_ci_rank(6) == 1
    assert paired.median_ci_rank(9) == 2
    assert paired.median_ci_rank(10) == 2
    assert paired.median_ci_rank(15) == 4
    assert paired.median_ci_rank(20) == 6
    assert paired.median_ci_rank(30) == 10


def test_median_ci_rank_past_a_thousand_rounds():
    """2.0**n overflows a float from n = 1024: a light model timed for a minute has more rounds.
    The normal approximation puts k near n/2 - 1.96 sqrt(n)/2 (1,676 for 3,467 rounds)."""
    k = paired.median_ci_rank(3467)
    assert k is not None and abs(k - (3467 / 2 - 1.96 * 3467**0.5 / 2)) <= 2


def test_paired_ratio_exact_values():
    ratios = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9]
    r = paired.paired_ratio(ratios)
    assert r.median == pytest.approx(1.45)
    assert r.ci95 == (1.1, 1.8)  # ranks 2 and 9 of 10
    assert r.covered and r.n == 10
    assert r.p25 == pytest.approx(1.225) and r.p75 == pytest.approx(1.675)
    assert r.spread == pytest.approx(0.45 / 1.45)


def test_too_few_rounds_is_not_covered():
    r = paired.paired_ratio([2.0, 1.0, 3.0])
    assert not r.covered and r.ci95 == (1.0, 3.0)


def test_pairing_cancels_drift_that_hits_both():
    # The machine's level drifts 4x over the run; eager is always 2x the mode in its round.
    level = [0.75, 0.96, 1.36, 2.45] * 4
    eager = [2.0 * x for x in level]
    mode = list(level)
    sp, guard = speedups.paired_speedups([{"eager": eager, "compile": mode}], [QUIET])
    assert sp["compile"].median == pytest.approx(2.0)
    assert sp["compile"].ci95 == pytest.approx((2.0, 2.0))
    assert sp["compile"].method == "paired per-round ratios"
    assert sp["compile"].rounds == 16
    # ...and the guard reports the wandering baseline as context: it threatens no ratio.
    assert not guard.tripped and guard.reasons == ()
    assert guard.context == (
        "baseline blocks spread 62% (IQR/median)",
        "baseline moved >20% from its median in 50% of rounds",
    )
    assert sp["compile"].inconclusive is None and sp["compile"].noise is None


def test_a_bimodal_baseline_with_tight_ratios_is_conclusive():
    """Issue 39's DistilBERT: eager's blocks at this machine's two speed states (38.9 and
    44.2 ms), the mode 1.05x faster in every round within 1.5%: a speed state both blocks of a
    round share cancels in the ratio. Conclusive, with the two peaks as context."""
    wobble = [1.0, 1.012, 0.991, 1.006, 0.988, 1.015, 0.995, 1.003, 0.985, 1.009]
    eager = [38.9 if i % 3 else 44.2 for i in range(20)]
    mode = [e / 1.05 * wobble[i % 10] for i, e in enumerate(eager)]
    sp, guard = speedups.paired_speedups([{"eager": eager, "distilbert": mode}], [QUIET])
    result = sp["distilbert"]
    assert result.inconclusive is None and result.noise is None
    assert result.median == pytest.approx(1.05, rel=0.01)
    assert result.ci95[0] > 1.0
    assert not guard.tripped
    assert guard.signals.baseline.two_peaks is not None
    assert "baseline blocks have two peaks (38.9 and 44.2 ms)" in guard.context
    # the same baseline, ratios with two peaks (the mode hit in a third of the rounds): the
    # interval widens to the ratios' 10th-90th percentiles, which hold 1: not called, the noise
    # named
    mixed = [m * (1.3 if i % 3 == 0 else 1.0) for i, m in enumerate(mode)]
    sp, guard = speedups.paired_speedups([{"eager": eager, "distilbert": mixed}], [QUIET])
    result = sp["distilbert"]
    assert "paired ratios have two peaks (0.808 and 1.05)" in result.widened
    assert result.inconclusive is None and guard.tripped
    assert result.ci95 == pytest.approx(tuple(np.percentile(result.per_round, [10, 90])))
    assert result.ci95[0] < 0.82 and paired.beyond_resolution(result.ci95) == 0


def test_rounds_whose_ratio_moved_are_named_and_nine_in_ten_still_call():
    """A quarter of the rounds' ratios 15-25% off the median, no cluster large enough for two
    peaks and the quartiles tight: the moved rounds are named and widen the interval (once they
    withheld the call, issue 46); 18 of 20 rounds are above 1.03: still called."""
    tight = [1.05 + 0.001 * (i % 5) for i in range(15)]
    ratios = [*tight, 0.85, 0.88, 1.22, 1.25, 1.3]
    eager = [10.0] * len(ratios)
    mode = [10.0 / r for r in ratios]
    sp, _ = speedups.paired_speedups([{"eager": eager, "compile": mode}], [QUIET])
    assert paired.two_peaks(ratios) is None
    assert sp["compile"].ratios.spread < paired.MAX_RATIO_SPREAD
    assert sp["compile"].noise == (
        "paired ratio moved >10% from its median in 25% of rounds (limit 20%)"
    )
    assert sp["compile"].inconclusive is None
    assert sp["compile"].widened == sp["compile"].noise
    assert sp["compile"].ci95 == pytest.approx((1.033, 1.223))
    assert paired.beyond_resolution(sp["compile"].ci95) == 1


def test_a_result_that_lacks_only_rounds_wants_more():
    tight = [1.0, 1.01, 0.99, 1.0]
    assert paired.lacks_only_rounds([1.0] * 4, tight)
    assert paired.wants_more_rounds({"eager": [1.0] * 4, "compile": tight}, [("eager", "compile")])
    # enough rounds: nothing to wait for
    assert not paired.lacks_only_rounds([1.0] * 6, [*tight, 1.0, 1.0])
    # too few rounds and spread: more rounds are no cure
    assert not paired.lacks_only_rounds([1.0] * 4, [1.0, 1.5, 0.7, 1.2])


def test_the_h200_compile_ratios_once_its_warm_up_rounds_are_dropped():
    """The H200 run of `simple`: compile's per-round ratios 1.06-1.15 for five rounds, then
    1.59-1.80; recorded inconclusive (two peaks). The timer now keeps the first five rounds
    apart (capture/timing.steady_start); the rest is one peak, and conclusive. Kept whole,
    the two peaks no longer withhold a call (issue 46): every round is at least 1.06x."""
    import gzip
    import json
    from pathlib import Path

    from profreport.capture.timing import warmup_rounds

    path = Path(__file__).parent / "data" / "runs" / "h200" / "simple" / "run.json.gz"
    run = json.loads(gzip.decompress(path.read_bytes()))
    samples = {m: v["latency_ms"]["samples"] for m, v in run["modes"].items()}
    sp, _ = speedups.paired_speedups([samples], [QUIET])
    # recorded inconclusive (two peaks); every round is at least 1.06: the interval widened to
    # nine rounds in ten lies above 1: a call, the two peaks named
    assert "two peaks (1.11 and 1.72)" in sp["compile"].widened
    assert sp["compile"].inconclusive is None
    assert sp["compile"].ci95 == pytest.approx((1.099, 1.779), abs=0.001)
    skip = warmup_rounds(samples)
    assert skip == 5
    sp, guard = speedups.paired_speedups([{m: s[skip:] for m, s in samples.items()}], [QUIET])
    assert sp["compile"].inconclusive is None and not guard.tripped
    assert sp["compile"].median == pytest.approx(1.719, abs=0.001)
    assert sp["compile"].ci95 == pytest.approx((1.595, 1.795), abs=0.001)
    assert sp["compile"].ratios.spread == pytest.approx(0.064, abs=0.001)


def test_quiet_samples_do_not_trip():
    eager = [10.0 + 0.1 * (i % 5) for i in range(20)]
    mode = [9.0 + 0.1 * (i % 3) for i in range(20)]
    sp, guard = speedups.paired_speedups([{"eager": eager, "compile": mode}], [QUIET])
    assert not guard.tripped and guard.reasons == ()
    assert sp["compile"].inconclusive is None and sp["compile"].noise is None
    assert sp["compile"].ci95[0] > 1.0


def test_busy_machine_makes_a_small_effect_inconclusive():
    eager = [10.0] * 20
    mode = [9.5] * 20
    sp, guard = speedups.paired_speedups(
        [{"eager": eager, "compile": mode}], [MachineLoad(other_busy_share=0.3)]
    )
    assert guard.tripped
    why = sp["compile"].inconclusive
    assert why.startswith("other processes used 30% of the machine's CPU time")
    clause = _latency_clause(OkMode(speedup_vs_eager=sp["compile"]))
    assert clause.startswith("latency inconclusive: other processes used 30%")
    assert "faster" not in clause and "slower" not in clause


def test_two_peaks_found_and_not_found():
    one = [1.0 + 0.01 * i for i in range(20)]
    assert paired.two_peaks(one) is None
    two = [1.0 + 0.001 * i for i in range(10)] + [1.5 + 0.001 * i for i in range(10)]
    peaks = paired.two_peaks(two)
    assert peaks is not None
    assert peaks.share_high == 0.5
    assert peaks.low == pytest.approx(1.0045, rel=1e-3)
    assert peaks.high == pytest.approx(1.5045, rel=1e-3)
    # A few outliers (under 20% of samples) are a tail, not a second peak.
    tail = [1.0 + 0.001 * i for i in range(18)] + [3.0, 3.1]
    assert paired.two_peaks(tail) is None


def test_moved_rounds_counts_rounds_beyond_the_threshold():
    eager = [1.0] * 8 + [1.3, 0.7]
    assert paired.moved_rounds(eager) == pytest.approx(0.2)


def test_paired_gate_identical_never_fails_and_double_work_does():
    base = [1.0, 1.2, 0.9, 1.1, 1.0, 1.3, 0.95, 1.05, 1.0, 1.1]
    same = speedups.paired_gate([base], [list(base)], 10.0, [QUIET])
    assert same.ratio.median == 1.0 and not same.regression
    double = speedups.paired_gate([base], [[2 * x for x in base]], 10.0, [QUIET])
    assert double.ratio.median == pytest.approx(2.0) and double.regression
    # Under a busy machine, twice the work is still beyond the noise band: it fails.
    busy = speedups.paired_gate(
        [base], [[2 * x for x in base]], 10.0, [MachineLoad(other_busy_share=0.5)]
    )
    assert busy.regression and busy.inconclusive is None and busy.reasons
    # A 20% slowdown on a busy machine neither passes nor fails.
    small = speedups.paired_gate(
        [base], [[1.2 * x for x in base]], 10.0, [MachineLoad(other_busy_share=0.5)]
    )
    assert not small.regression and small.inconclusive.startswith("other processes used 50%")


class _FakePsutil:
    """psutil's readings, set by the test: the machine's CPU times (with the guest time Linux
    already counts in user), this process's, the load average; `Error` where none can be read."""

    Error = psutil.Error

    def __init__(self) -> None:
        self.readable = True
        self.machine: dict[str, float] = {}
        self.ours = 0.0

    def set(self, user: float, idle: float, ours: float) -> None:
        self.machine = {"user": user, "system": 0.0, "idle": idle, "iowait": 0.0, "guest": 50.0}
        self.ours = ours

    def getloadavg(self) -> tuple[float, float, float]:
        return (1.5, 1.0, 0.5)

    def cpu_count(self) -> int:
        return 2

    def cpu_times(self) -> Any:
        if not self.readable:
            raise psutil.AccessDenied()
        return namedtuple("scputimes", self.machine)(**self.machine)

    def Process(self) -> Any:
        own = SimpleNamespace(user=self.ours, system=0.0, children_user=0.0, children_system=0.0)
        return SimpleNamespace(cpu_times=lambda: own)


@pytest.fixture
def fake_psutil(monkeypatch) -> _FakePsutil:
    fake = _FakePsutil()
    monkeypatch.setattr(noise, "psutil", fake)
    monkeypatch.setattr(noise, "children_cpu_s", lambda: 0.0)
    return fake


def test_machine_load_from_psutil_readings(fake_psutil):
    fake_psutil.set(user=10.0, idle=10.0, ours=1.0)
    before = noise.snapshot()
    fake_psutil.set(user=16.0, idle=14.0, ours=4.0)  # +10 CPU s: 6 busy (3 ours), 4 idle
    after = noise.snapshot()
    assert (after.busy - before.busy, after.total - before.total) == pytest.approx((6.0, 10.0))
    load = noise.machine_load(before, after)
    assert load.other_busy_share == 0.3 and load.ours_busy_share == 0.3
    assert load.load1_before == 1.5 and load.cpus == 2
    assert load.source.startswith("psutil")


def test_machine_load_unknown_where_psutil_cannot_read(fake_psutil):
    fake_psutil.readable = False
    snap = noise.snapshot()
    assert snap.load1 == 1.5 and snap.busy is None
    load = noise.machine_load(snap, snap)
    assert load.other_busy_share is None and load.source.startswith("unknown")
    assert paired.machine_reasons(load) == []


def test_this_machine_is_read():
    """On this platform (Linux, macOS) the real readings are there and add up."""
    before = noise.snapshot()
    sum(range(200_000))
    after = noise.snapshot()
    assert None not in (before.busy, before.total, before.ours, before.children, before.load1)
    load = noise.machine_load(before, after)
    assert load.source.startswith("psutil") and load.cpus


def test_view_model_cells_and_method_text():
    from profreport.render.noise_view import noise_text, speedup_cell

    assert speedup_cell(None) == "baseline"
    sp = {"median": 1.04, "ci95": [0.9, 1.2], "inconclusive": "busy"}
    assert speedup_cell(Speedup.from_json(sp)) == "inconclusive 1.04x (0.90-1.20)"
    assert speedup_cell(Speedup.from_json({**sp, "inconclusive": None})) == "1.04x (0.90-1.20)"
    assert speedup_cell(Speedup.from_json({})) == "baseline"
    assert noise_text(None).startswith("not recorded")
    _, guard = speedups.paired_speedups([{"eager": [1.0] * 10, "compile": [0.5] * 10}], [QUIET])
    text = noise_text(guard)
    assert "other processes used 1% of all CPU time while timing (limit 10%)" in text
    assert (
        "eager over 10 rounds (context: the paired ratios cancel a level both blocks of a " in text
    )
    assert "blocks spread 0% (IQR/median)" in text
    assert "Decision: quiet" in text


def test_a_tight_interval_with_scattered_rounds_is_not_beyond_noise():
    # 14 of 20 rounds say 2.2-2.5x slower, 6 say 1.0-1.5x: three rounds in four do not clear
    # the 1.5x band, so on a noisy machine this is inconclusive, not a failure.
    head = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5] + [2.2 + 0.02 * i for i in range(14)]
    gate = speedups.paired_gate([[1.0] * 20], [head], 10.0, [MachineLoad(other_busy_share=0.5)])
    assert gate.ratio.p25 == pytest.approx(1.475)
    assert not gate.regression and gate.inconclusive
    # on a quiet machine the spread widens the interval to nine rounds in ten: every round is at
    # least 1.0x and nine in ten above 1.19x: a regression, the spread named
    quiet = speedups.paired_gate([[1.0] * 20], [head], 10.0, [QUIET])
    assert quiet.regression and quiet.inconclusive is None
    assert quiet.ratio.ci95 == pytest.approx((1.19, 2.422))
    assert quiet.widened.startswith("paired ratios spread 39%")


def test_verdict_keeps_a_direction_beyond_the_band_and_says_so():
    sp = {"median": 3.0, "ci95": [2.5, 3.5], "noise": "other processes used 50%"}
    assert _latency_clause(
        OkMode.from_json({"speedup_vs_eager": {**sp, "inconclusive": None}})
    ) == ("3.00x faster than eager (95% CI 2.50-3.50, beyond the noise band, one process)")


def test_a_difference_inside_the_timers_resolution_is_not_called():
    """Identical code read 0.983-0.995 with intervals excluding 1 in 8 of 20 A/A `ab` runs
    (compile): the whole interval must clear the 1% resolution to be called."""
    assert paired.beyond_resolution((0.9808, 0.9917)) == 0  # an A/A compile run
    assert paired.beyond_resolution((1.0017, 1.0171)) == 0  # an A/A eager run
    assert paired.beyond_resolution((1.011, 1.05)) == 1
    assert paired.beyond_resolution((0.95, 0.989)) == -1
    assert paired.resolution_note((0.9808, 0.9917)).startswith("no change beyond 1%")
    assert paired.resolution_note((0.98, 1.02)) == ""  # holds 1: plain noise
    assert paired.resolution_note((1.02, 1.05)) == ""  # called

    def clause(lo, median, hi):
        sp = {"median": median, "ci95": [lo, hi], "inconclusive": None}
        return _latency_clause(OkMode.from_json({"speedup_vs_eager": sp}))

    assert clause(1.002, 1.005, 1.008) == (
        "latency: no change beyond 1%, the paired timer's A/A resolution, is certain "
        "(speedup 1.005, 95% CI 1.002-1.008)"
    )
    assert clause(1.02, 1.05, 1.08) == "1.05x faster than eager (95% CI 1.02-1.08, one process)"
    assert clause(0.9, 0.95, 0.98).startswith("1.05x slower than eager")
    assert clause(0.99, 1.0, 1.01).startswith("latency unchanged within noise")


def test_a_median_beyond_the_resolution_is_never_said_to_be_within_it():
    """Issue 46: "latency within 1%, ... (speedup 1.023, 95% CI 1.002-1.028)" contradicted
    itself; what the interval leaves uncertain is a change beyond the resolution."""
    sp = {"median": 1.023, "ci95": [1.002, 1.028], "inconclusive": None}
    said = _latency_clause(OkMode.from_json({"speedup_vs_eager": sp}))
    assert said == (
        "latency: no change beyond 1%, the paired timer's A/A resolution, is certain "
        "(speedup 1.023, 95% CI 1.002-1.028)"
    )
    assert "within" not in said


def test_ab_of_an_a_a_run_states_the_resolution_beside_the_ratio():
    from profreport.analysis.compare_latency import latency_change

    base = [10.0 + 0.01 * (i % 3) for i in range(30)]
    head = [b * 0.993 for b in base]  # 0.7% faster every round, like compile's A/A head
    m = latency_change([base], [head], 10.0, 200, [], [QUIET], None)
    assert m.note.endswith(": no change beyond 1%, the paired timer's A/A resolution, is certain")
    assert not m.regression


def test_a_busy_machine_still_calls_beyond_the_band_on_the_interval_before_widening():
    """A busy machine (30%) and 30% of the rounds moved (three at 1.2x, three at 2.3x, the rest
    at 1.82x): the order-statistic interval and three rounds in four clear the 1.5x band, so
    the call stands, as it did before; the interval shown is widened to nine rounds in ten."""
    ratios = [1.2] * 3 + [1.82 + 0.001 * i for i in range(14)] + [2.3] * 3
    sp, _ = speedups.paired_speedups(
        [{"eager": [10.0] * 20, "optimize": [10.0 / r for r in ratios]}],
        [MachineLoad(other_busy_share=0.3)],
    )
    result = sp["optimize"]
    assert result.inconclusive is None and result.noise.startswith("other processes used 30%")
    assert "moved >10% from its median in 30% of rounds" in result.widened
    assert result.ci95[0] < 1.5 < paired.paired_ratio(ratios).ci95[0]
    assert paired.beyond_resolution(result.ci95) == 1
