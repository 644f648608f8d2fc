"""Latency across timing processes (issue 48): the hierarchical statistics on synthetic samples
with a known structure, exact where they are exact and deterministic given the seed."""

from __future__ import annotations

import numpy as np
import pytest

from profreport.analysis import paired, processes, speedups
from profreport.analysis.verdict import _latency_clause
from profreport.record.model import MachineLoad, OkMode, Run
from tests.conftest import setup

QUIET = MachineLoad(other_busy_share=0.01)


def _rounds(level: float, n: int = 15, spread: float = 0.005, seed: int = 0) -> list[float]:
    """`n` per-round ratios around `level`, each within +-`spread` (uniform)."""
    rng = np.random.default_rng(seed)
    return list(level * (1 + rng.uniform(-spread, spread, n)))


def _workers(per_process: list[list[float]], eager_ms: float = 9.0) -> list[dict[str, list[float]]]:
    """One worker per process: eager's blocks flat, the mode's blocks eager / ratio."""
    return [
        {"eager": [eager_ms] * len(ratios), "script": [eager_ms / r for r in ratios]}
        for ratios in per_process
    ]


def test_t_quantiles_are_the_table_and_meet_the_normal():
    assert processes.t975(1) == 12.706 and processes.t975(2) == 4.303
    assert processes.t975(30) == 2.042
    assert processes.t975(31) == pytest.approx(2.040, abs=0.001)  # the expansion takes over
    assert processes.t975(1000) == pytest.approx(1.962, abs=0.001)
    with pytest.raises(ValueError):
        processes.t975(0)


def test_one_process_offset_is_named_and_no_change_is_called():
    """Issue 48's run 2 inside one run: two processes read script at 1.00 (+-0.5%), one at
    0.877. Each process's own interval is tight and they do not overlap: the processes are
    named, no change is called, and the interval covers both levels."""
    workers = _workers([_rounds(1.0, seed=1), _rounds(0.877, seed=2), _rounds(1.0, seed=3)])
    sp, noise = speedups.paired_speedups(workers, [QUIET] * 3)
    script = sp["script"]
    assert script.unstable == "unstable across processes: 0.88 in one of 3, 1.00 in two"
    assert script.inconclusive == script.unstable  # 0.88 is slower beyond 1%, 1.00 is not
    assert script.processes == 3 and len(script.per_process) == 3
    assert script.per_process[1].median == pytest.approx(0.877, abs=0.005)
    assert script.ci95[0] < 0.877 and script.ci95[1] > 1.0
    assert script.median == pytest.approx((1.0 * 0.877 * 1.0) ** (1 / 3), abs=0.005)
    assert script.rounds == 45 and len(script.per_round) == 45
    assert noise.process_loads == (QUIET, QUIET, QUIET)
    assert noise.method == "paired per-round ratios, across 3 processes"
    clause = _latency_clause(OkMode(speedup_vs_eager=script))
    assert clause.startswith("latency inconclusive: unstable across processes: 0.88 in one of 3")


def test_processes_that_differ_in_size_but_agree_keep_the_call():
    """optimize in issue 48: 1.80, 1.85, 1.92 in three processes, intervals apart: named, and
    still called faster (every process says so)."""
    workers = _workers([_rounds(1.80, seed=1), _rounds(1.85, seed=2), _rounds(1.92, seed=3)])
    script = speedups.paired_speedups(workers, [QUIET] * 3)[0]["script"]
    assert (
        script.unstable == "unstable across processes: 1.80 in one of 3, 1.85 in one, 1.92 in one"
    )
    assert script.inconclusive is None
    assert paired.beyond_resolution(script.ci95) == 1
    assert script.ci95[0] < 1.80 and script.ci95[1] > 1.92
    clause = _latency_clause(OkMode(speedup_vs_eager=script))
    assert clause.startswith("1.86x faster than eager (95% CI ")
    assert "3 processes); unstable across processes: 1.80 in one of 3" in clause


def test_a_bimodal_process_is_named_and_covered():
    """One of three processes has two peaks in its ratios. Hit in a quarter of its rounds
    (1.45 against 1.15): named, the interval widened to nine rounds in ten, 1.15x still called.
    Hit in half: its median swings between the peaks, so the interval covers both and with
    three processes reaches below 1: not called, no direction claimed that a rerun may not
    see."""
    quarter = [1.45 if i % 4 == 0 else 1.15 for i in range(16)]
    workers = _workers([_rounds(1.15, seed=1), quarter, _rounds(1.15, seed=3)])
    script = speedups.paired_speedups(workers, [QUIET] * 3)[0]["script"]
    assert script.widened.startswith("process 2 of 3: paired ratios have two peaks (1.15 and 1.45)")
    assert script.ci95[1] == pytest.approx(1.45) and script.inconclusive is None
    assert paired.beyond_resolution(script.ci95) == 1
    half = [1.15 if i % 2 else 1.45 for i in range(16)]
    workers = _workers([_rounds(1.15, seed=1), half, _rounds(1.15, seed=3)])
    script = speedups.paired_speedups(workers, [QUIET] * 3)[0]["script"]
    assert "process 2 of 3: paired ratios have two peaks (1.15 and 1.45)" in script.noise
    assert script.unstable is None  # its own interval, 1.15-1.45, overlaps the others'
    assert script.ci95[0] < 1.0 and script.ci95[1] > 1.45


def test_a_genuine_1_5x_with_noisy_rounds_is_called():
    """Issue 46's Phi-3 compile shape: 15 rounds, ratios spread +-10% around 1.5, in three
    processes 2% apart: called faster, interval well above 1."""
    workers = _workers(
        [_rounds(1.5 * off, spread=0.10, seed=s) for s, off in enumerate((1.0, 1.02, 0.98))]
    )
    script = speedups.paired_speedups(workers, [QUIET] * 3)[0]["script"]
    assert script.inconclusive is None and script.unstable is None
    assert paired.beyond_resolution(script.ci95) == 1
    assert 1.3 < script.ci95[0] < 1.5 < script.ci95[1] < 1.8
    # and in one process alone (today's records), the same
    one = speedups.paired_speedups(_workers([_rounds(1.5, spread=0.10)]), [QUIET])[0]["script"]
    assert one.processes == 1 and one.per_process is None and one.inconclusive is None
    # its spread (13%) widens the interval to nine rounds in ten: still well above 1
    assert "paired ratios spread 13%" in one.widened
    assert one.ci95[0] < paired.paired_ratio(_rounds(1.5, spread=0.10)).ci95[0]
    assert paired.beyond_resolution(one.ci95) == 1
    clause = _latency_clause(OkMode(speedup_vs_eager=one))
    assert clause.endswith(", one process)")


@pytest.mark.parametrize(
    ("levels", "unstable"),
    [((0.99, 1.01, 1.0), True), ((0.97, 1.03, 1.0), True), ((0.999, 1.001, 1.0), False)],
)
def test_a_a_with_offsets_between_processes_is_never_called(levels, unstable):
    """Identical code whose level differs between processes by up to 3% either way: whether
    or not the processes' intervals overlap, no change is called."""
    workers = _workers([_rounds(lv, spread=0.003, seed=i) for i, lv in enumerate(levels)])
    script = speedups.paired_speedups(workers, [QUIET] * 3)[0]["script"]
    assert (script.unstable is not None) == unstable
    assert script.inconclusive is not None or paired.beyond_resolution(script.ci95) == 0
    assert script.ci95[0] < 1.0 < script.ci95[1]


def test_the_interval_is_deterministic_given_the_seed():
    groups = [_rounds(1.2, seed=1), _rounds(1.25, seed=2), _rounds(1.18, seed=3)]
    a = processes.across_processes(groups)
    assert a == processes.across_processes(groups)
    assert a.df == 2 and a.processes == 3
    other = processes.across_processes(groups, seed=7)
    assert other.ci95 != a.ci95 and other.ci95 == pytest.approx(a.ci95, rel=0.02)


def _overlapping(cis: list[tuple[float, float]]) -> float:
    """The share of pairs of intervals that overlap."""
    pairs = [(a, b) for i, a in enumerate(cis) for b in cis[i + 1 :]]
    return float(np.mean([a[0] <= b[1] and b[0] <= a[1] for a, b in pairs]))


def test_across_processes_covers_what_a_rerun_sees():
    """Simulated reruns of one model: each process's log-speedup offset drawn with a 3%
    spread, 15 rounds with 2% spread within it, three processes a run. The intervals of 30
    runs overlap pairwise (>= 97% of pairs) and cover the true speedup (>= 90% of runs); one
    process's own interval, as today's records have, overlaps another's about half the time."""
    rng = np.random.default_rng(11)
    true = 1.5

    def process() -> list[float]:
        level = true * np.exp(rng.normal(0, 0.03))
        return list(level * np.exp(rng.normal(0, 0.02, 15)))

    runs = [[process() for _ in range(3)] for _ in range(30)]
    cis = [processes.across_processes(r, resamples=500).ci95 for r in runs]
    assert _overlapping(cis) >= 0.97
    assert np.mean([lo <= true <= hi for lo, hi in cis]) >= 0.9
    assert _overlapping([paired.paired_ratio(r[0]).ci95 for r in runs]) < 0.6


def test_two_runs_levels_across_processes_or_widened_for_one():
    base = [[10.0 * o] * 5 + [10.1 * o] * 5 for o in (1.0, 1.01, 0.99)]
    head = [[x * 1.2 for x in g] for g in base]
    change = processes.level_change(processes.level(base), processes.level(head))
    assert change.across and change.ratio == pytest.approx(1.2)
    assert 1.1 < change.ci95[0] < 1.2 < change.ci95[1] < 1.3
    one = processes.level_change(processes.level(base[:1]), processes.level(head[:1]))
    assert not one.across
    assert one.ci95[0] == pytest.approx(12.0 / 10.1 / 1.25, rel=1e-6)
    assert one.ci95[1] == pytest.approx(12.12 / 10.0 * 1.25, rel=1e-6)


def _document(workers: list[dict[str, list[float]]], loads: list[MachineLoad]) -> dict:
    modes = {}
    for name in workers[0]:
        blocks = [w[name] for w in workers]
        modes[name] = {
            "status": "ok",
            "kernels": {"per_step": 1, "launches": 0},
            "bytes": {"read": 1, "written": 1},
            "latency_ms": {
                "median": 1.0,
                "samples": [x for b in blocks for x in b],
                "processes": [{"samples": b} for b in blocks],
            },
        }
    return {
        "schema": "profreport.run/2",
        "model": {"name": "m"},
        "device": {"type": "cpu"},
        "env": {},
        "modes": modes,
        "timing_noise": {"process_loads": [load.to_json() for load in loads]},
    }


def test_a_stored_run_is_re_read_with_todays_statistics():
    """run_speedups reads each process's samples and load back from the record: the same
    speedups as the timing's own call; a run/1 record is one process."""
    workers = _workers([_rounds(1.0, seed=1), _rounds(0.877, seed=2), _rounds(1.0, seed=3)])
    busy = MachineLoad(other_busy_share=0.4)
    loads = [QUIET, busy, QUIET]
    stored = Run.from_json(_document(workers, loads))
    again, noise = speedups.run_speedups(stored)
    direct, _ = speedups.paired_speedups(workers, loads)
    assert again["script"] == direct["script"]
    assert noise.reasons == (
        "process 2 of 3: other processes used 40% of the machine's CPU time while timing "
        "(limit 10%)",
    )
    one = Run.from_json(_document(workers[:1], [QUIET]))
    doc = one.to_json()
    for mode in doc["modes"].values():
        del mode["latency_ms"]["processes"]
    doc["schema"] = "profreport.run/1"
    sp, _ = speedups.run_speedups(Run.from_json(doc))
    assert sp["script"].processes == 1 and sp["script"].unstable is None


def test_the_recorded_run_reads_back_with_its_intervals_and_its_noise_no_longer_a_veto(
    recorded_gated_run,
):
    """A run/1 record from main (one process, its rounds' ratios spread 21-40%): re-read, every
    mode keeps its stored median and its interval widens to nine rounds in ten; script, trace
    and optimize were withheld for the spread and are now plain "not called" (their intervals
    hold 1), compile keeps its call."""
    from profreport.record import load_run

    run = load_run(recorded_gated_run)
    again, _ = speedups.run_speedups(run)
    for name in ("script", "trace", "optimize", "compile"):
        stored = run.mode(name).speedup_vs_eager
        assert again[name].median == pytest.approx(stored.median)
        assert again[name].ci95[0] <= stored.ci95[0] and again[name].ci95[1] >= stored.ci95[1]
        assert "paired ratios spread" in again[name].noise and again[name].inconclusive is None
        assert again[name].processes == 1
    assert [run.mode(n).speedup_vs_eager.inconclusive is not None for n in again] == [
        True,
        True,
        True,
        False,
    ]
    assert [paired.beyond_resolution(again[n].ci95) for n in again] == [0, 0, 0, 1]


def test_a_latency_keeps_each_process_and_one_process_stays_as_today():
    from profreport.analysis.latency import latency_of
    from profreport.record.model import ProcessBlocks

    blocks = [ProcessBlocks(samples=(1.0, 1.2), calls_per_block=3), ProcessBlocks(samples=(2.0,))]
    lat = latency_of(blocks)
    assert lat.samples == (1.0, 1.2, 2.0) and lat.median == 1.2 and lat.n == 3
    assert lat.processes == tuple(blocks) and lat.process_samples() == ((1.0, 1.2), (2.0,))
    one = latency_of([ProcessBlocks(samples=(1.0, 1.2), warmup_samples=(3.0,), calls_per_block=3)])
    assert one.processes is None and one.warmup_samples == (3.0,) and one.calls_per_block == 3
    assert "processes" not in one.to_json() and one.process_samples() == ((1.0, 1.2),)


def test_generate_today_stores_one_process_and_says_so():
    """The pipeline's timing stage (one process: this one) through the workers' interface."""
    from profreport.pipeline import Timed, TimingStage
    from profreport.record.model import MachineReference, ProcessBlocks

    modes = {"eager": OkMode(), "compile": OkMode()}
    stage = TimingStage(modes=modes, prepared_modes={}, sync=print, setup=setup())
    eager = ProcessBlocks(
        samples=tuple(10.0 + 0.01 * (i % 3) for i in range(15)), calls_per_block=2
    )
    compile_ = ProcessBlocks(
        samples=tuple(5.0 + 0.01 * (i % 4) for i in range(15)),
        warmup_samples=(9.0,),
        calls_per_block=3,
    )
    reference = MachineReference(method="timed with the modes", parts={})
    series = {"eager": eager, "compile": compile_}
    stage.store([series], Timed(({"": series},), (QUIET,), reference))
    assert stage.machine_reference is reference
    sp = stage.modes["compile"].speedup_vs_eager
    assert sp.processes == 1 and sp.per_process is None and sp.to_json()["processes"] == 1
    assert sp.median == pytest.approx(2.0, rel=0.01)
    lat = stage.modes["compile"].latency_ms
    assert lat.processes is None and lat.calls_per_block == 3 and lat.warmup_samples == (9.0,)
    assert stage.timing_noise.process_loads is None and stage.timing_noise.load == QUIET
