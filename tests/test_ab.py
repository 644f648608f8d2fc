"""`profreport ab`: round order, the paired gate on injected samples, and the command itself.

No assertion depends on how fast anything ran: samples are synthetic or the fake clock's.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from profreport.ab import ab_order
from profreport.analysis import derive
from profreport.analysis.compare import Thresholds, compare_runs
from profreport.capture.timing import TimingConfig, measure_latency
from profreport.cli import main
from profreport.record import load
from profreport.record.model import MachineLoad, Run
from tests.conftest import RECORDED_GATED_RUN, evidence_of, replay_collection
from tests.test_timing import FakeClock

MODELS = Path(__file__).resolve().parents[1] / "bench" / "ab_models"
QUIET = MachineLoad(other_busy_share=0.0)


def test_ab_order_alternates_sides_and_rotates_modes():
    names = ["base/eager", "head/eager", "base/compile", "head/compile"]
    assert ab_order(0, names) == names
    assert ab_order(1, names) == ["head/compile", "base/compile", "head/eager", "base/eager"]
    assert ab_order(2, names) == names
    # a mode that failed on one side keeps its partner's place
    assert ab_order(1, ["base/eager", "head/eager", "base/compile"]) == [
        "base/compile",
        "head/eager",
        "base/eager",
    ]


def test_measure_latency_follows_the_ab_order():
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=0.0, max_time_s=100, block_s=0.001, min_blocks=3, warmup_s=0.0)
    names = ["base/eager", "head/eager", "base/compile", "head/compile"]
    fns = {n: clock.work(n, 0.002) for n in names}
    measure_latency(fns, sync=lambda: None, cfg=cfg, clock=clock, order=ab_order)
    assert clock.order[:8] == [*names, *ab_order(1, names)]  # the warm-up's rounds too
    rounds = [clock.order[24 + i * 4 : 28 + i * 4] for i in range(3)]  # after 6 rounds
    assert rounds == [
        names,
        ["head/compile", "base/compile", "head/eager", "base/eager"],
        names,
    ]


def _record(samples: dict[str, list[float]]) -> Run:
    modes = {}
    for name, s in samples.items():
        modes[name] = {
            "status": "ok",
            "kernels": {"per_step": 3, "launches": 0},
            "bytes": {"read": 100, "written": 100},
            "latency_ms": {"median": sorted(s)[len(s) // 2], "samples": s},
        }
    return Run.from_json(
        {"model": {"name": "m"}, "device": {"type": "cpu"}, "env": {}, "modes": modes}
    )


def test_paired_gate_in_compare_exact_ratios():
    # The machine's level wanders +-12%; head is exactly 1.15x base in every round.
    level = [1.0, 1.15, 0.9, 1.1, 0.95, 1.05, 0.88, 1.12, 1.0, 0.92]
    base = _record({"eager": level})
    head = _record({"eager": [1.15 * x for x in level]})
    cmp = compare_runs(base, head, Thresholds(max_latency_regression_pct=10), paired_loads=[QUIET])
    lat = cmp.modes[0].metric("latency_median_ms")
    assert lat.paired.ratio.median == pytest.approx(1.15)
    assert lat.paired.ratio.ci95 == pytest.approx((1.15, 1.15))
    assert lat.regression and lat.inconclusive is None
    # The same samples unpaired: the wander swamps the change, the intervals overlap.
    unpaired = compare_runs(base, head, Thresholds(max_latency_regression_pct=10))
    assert not unpaired.regressed
    # +15% under a 20% limit passes.
    loose = compare_runs(
        base, head, Thresholds(max_latency_regression_pct=20), paired_loads=[QUIET]
    )
    assert not loose.regressed


def test_a_moving_baseline_is_context_and_two_peaked_ratios_are_inconclusive():
    """A 3x drift that hits base and head alike: the ratio is exact, so +25% is a regression
    (the drift is context). Ratios with two peaks (head hit in half the rounds, not base):
    the interval widens to nine rounds in ten and +25% neither passes nor fails; twice the work
    is called on the widened interval and fails."""
    level = [1.0, 1.5, 3.0, 2.0, 1.2, 2.5, 1.0, 3.0, 1.7, 2.2]
    base = _record({"eager": level})
    head = _record({"eager": [1.25 * x for x in level]})
    cmp = compare_runs(base, head, Thresholds(max_latency_regression_pct=10), paired_loads=[QUIET])
    lat = cmp.modes[0].metric("latency_median_ms")
    assert [r.metric for r in cmp.regressions] == ["latency_median_ms"]
    assert lat.inconclusive is None
    assert lat.paired.context == [
        "baseline blocks spread 62% (IQR/median)",
        "baseline moved >20% from its median in 60% of rounds",
    ]
    flat = [1.0] * 10
    hit = _record({"eager": [1.25 * x if i % 2 else 1.0 for i, x in enumerate(flat)]})
    cmp = compare_runs(
        _record({"eager": flat}),
        hit,
        Thresholds(max_latency_regression_pct=10),
        paired_loads=[QUIET],
    )
    lat = cmp.modes[0].metric("latency_median_ms")
    assert not cmp.regressed
    # the ratios' spread and two peaks widen the interval to nine rounds in ten, which reach 1:
    # +12.5% is beyond the limit and not called, so it is inconclusive, never "ok"
    assert lat.inconclusive.startswith("head/base 1.125 is beyond the +10% limit")
    assert "(noise: paired ratios spread 22%" in lat.inconclusive
    assert "paired ratios have two peaks (1 and 1.25)" in lat.inconclusive
    double = _record({"eager": [2 * x if i % 2 else 1.6 for i, x in enumerate(flat)]})
    cmp = compare_runs(
        _record({"eager": flat}),
        double,
        Thresholds(max_latency_regression_pct=10),
        paired_loads=[QUIET],
    )
    assert [r.metric for r in cmp.regressions] == ["latency_median_ms"]


@pytest.mark.slow
def test_ab_command_same_spec_and_errors(tmp_path):
    spec = f"{MODELS / 'base' / 'block.py'}:build"
    out, err = io.StringIO(), io.StringIO()
    args = ["ab", spec, spec, "--modes", "eager", "--min-time", "0.05", "--quiet"]
    rc = main([*args, "--out", str(tmp_path), "--format", "json"], out=out, err=err)
    assert rc == 0, err.getvalue()  # no thresholds: report only, whatever the timing says
    (folder,) = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    for side in ("base", "head"):
        record = json.loads((folder / side / "run.json").read_text())
        assert record["ab"]["side"] == side
        assert record["timing_noise"]["method"] == "paired per-round ratios"
        assert (folder / side / "report.html").is_file()
    cmp = json.loads((folder / "compare.json").read_text())
    lat = cmp["modes"][0]["metrics"][-1]
    assert lat["metric"] == "latency_median_ms" and lat["paired"]["method"]
    base = json.loads((folder / "base" / "run.json").read_text())
    assert lat["paired"]["ratio"]["n"] == len(base["modes"]["eager"]["latency_ms"]["samples"])
    # A model that cannot be loaded: exit 2 before anything runs (two different models are
    # compared: tests/test_kernel_diff.py).
    err = io.StringIO()
    rc = main(["ab", "mlp-block", "no/such/file.py:f", "--out", str(tmp_path)], out=out, err=err)
    assert rc == 2 and "head: model file not found" in err.getvalue()


def _processes_record(blocks: list[list[float]]) -> Run:
    """A side of an `ab` timed in several processes: eager's blocks per process."""
    doc = _record({"eager": [x for b in blocks for x in b]}).to_json()
    doc["modes"]["eager"]["latency_ms"]["processes"] = [{"samples": b} for b in blocks]
    return Run.from_json(doc)


def test_ab_pairs_base_and_head_within_each_process_across_three():
    """Base and head paired round by round inside each of three worker processes whose levels
    differ by 10%: the levels cancel, +15% is called across the processes; identical code is
    not; a head slower in one process only is named and not called."""
    levels = (1.0, 1.1, 0.9)
    base = [[lv * (1 + 0.003 * (i % 5)) for i in range(12)] for lv in levels]
    loads = [QUIET] * 3
    gate = Thresholds(max_latency_regression_pct=10)
    slower = compare_runs(
        _processes_record(base),
        _processes_record([[1.15 * x for x in b] for b in base]),
        gate,
        paired_loads=loads,
    )
    lat = slower.modes[0].metric("latency_median_ms")
    assert [r.metric for r in slower.regressions] == ["latency_median_ms"]
    assert lat.paired.processes == 3 and len(lat.paired.per_process) == 3
    assert lat.paired.ratio.median == pytest.approx(1.15)
    assert (lat.base_processes, lat.head_processes) == (3, 3)
    assert "3 processes)" in lat.note
    same = compare_runs(_processes_record(base), _processes_record(base), gate, paired_loads=loads)
    assert not same.regressed and same.inconclusive == []
    one = [[x * (1.15 if p == 1 else 1.0) for x in b] for p, b in enumerate(base)]
    odd = compare_runs(_processes_record(base), _processes_record(one), gate, paired_loads=loads)
    lat = odd.modes[0].metric("latency_median_ms")
    assert not odd.regressed
    assert lat.paired.unstable == "unstable across processes: 1.00 in two of 3, 1.15 in one"
    assert lat.inconclusive == lat.paired.unstable


def _raising(*_args, **_kwargs):
    raise RuntimeError("a bug in deriving\nfindings")


def _kept_both_sides(out: Path, err: str) -> None:
    """ab exited 3 on a bug in the findings with both sides' evidence published, saying where."""
    (folder,) = out.iterdir()
    assert not folder.name.startswith(".")  # published, not left in its staging folder
    records = [folder / side / "run.json" for side in ("base", "head")]
    assert err == (
        "error: internal error: RuntimeError: a bug in deriving (a profreport bug); the runs' "
        f"evidence was saved in {records[0]} and {records[1]}: `profreport render` of each "
        "derives its findings again once the bug is fixed; rerun with --debug for the traceback\n"
    )
    for record in records:
        run = load(record)  # the evidence, checkpointed as generate's is
        assert run["modes"]["eager"]["kernels"]["per_step"] > 0
        assert "verdict" not in run["modes"]["eager"]  # nothing derived before it was saved
        assert (record.parent / "kernels_eager.csv").is_file()
    assert not (folder / "compare.md").exists()


def test_ab_keeps_both_sides_evidence_when_deriving_findings_raises(tmp_path, monkeypatch):
    """Issue 46: ab profiled and timed both sides, then a bug deriving the findings cost both
    runs (exit 3, an empty --out folder); generate kept its evidence in the same case."""
    replay_collection(monkeypatch, lambda _setup: evidence_of(load(RECORDED_GATED_RUN)))
    monkeypatch.setattr(derive, "derived_run", _raising)
    err = io.StringIO()
    argv = ["ab", "gated-residual", "gated-residual", "--modes", "eager,compile", "--quiet"]
    rc = main([*argv, "--device", "cpu", "--out", str(tmp_path)], out=io.StringIO(), err=err)
    assert rc == 3
    _kept_both_sides(tmp_path, err.getvalue())


@pytest.mark.slow
def test_ab_of_real_files_keeps_both_sides_evidence_when_deriving_raises(tmp_path, monkeypatch):
    """The issue's own command, profiled and timed for real."""
    monkeypatch.setattr(derive, "derived_run", _raising)
    err = io.StringIO()
    base, same = (f"{MODELS / side / 'block.py'}:build" for side in ("base", "same"))
    argv = ["ab", base, same, "--modes", "eager,trace", "--min-time", "0.05", "--quiet"]
    rc = main([*argv, "--device", "cpu", "--out", str(tmp_path)], out=io.StringIO(), err=err)
    assert rc == 3
    _kept_both_sides(tmp_path, err.getvalue())
