"""The machine reference (issue 40): timed in the rounds at a small cost, summarized in the
record, and read by `compare` so that a machine that changed between two runs is never called
a speedup or a regression. Synthetic records and the fake clock: exact values, no timing."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from profreport.analysis.compare import Thresholds, compare_runs
from profreport.analysis.derive import derived_run
from profreport.analysis.kernel_diff import (
    KernelChange,
    KernelSide,
    ModeKernelDiff,
    relative_to_machine,
)
from profreport.analysis.machine_reference import machine_change, summarize_reference
from profreport.capture.timing import Reference, TimingConfig, measure_latency
from profreport.modes import mode_analyses
from profreport.record import parse
from profreport.record.model import Run
from profreport.render.compare import render_markdown
from profreport.render.kernel_diff import mode_view
from tests.test_timing import FakeClock

GATE = Thresholds(max_latency_regression_pct=10)
ANALYSES = mode_analyses()
# issue 40's eager: 13.231 ms in one process, 10.758 ms in the next, the same code
SLOW_MS, FAST_MS = 13.231, 10.758
# base's machine, and head's 19% (matmul) and 21% (copy) faster
BASE_REF = {"matmul": (10.0, (9.9, 10.1)), "copy": (20.0, (19.8, 20.2))}
FASTER_REF = {"matmul": (10.0 / 1.19, (8.32, 8.48)), "copy": (20.0 / 1.21, (16.45, 16.6))}


def _samples(level: float) -> list[float]:
    return [level * (1 + 0.004 * ((i * 7) % 5 - 2)) for i in range(30)]


def _run(eager_ms: float, reference: dict | None = None) -> Run:
    samples = _samples(eager_ms)
    doc: dict = {
        "model": {"name": "m"},
        "device": {"type": "cpu"},
        "env": {},
        "modes": {
            "eager": {
                "status": "ok",
                "kernels": {"per_step": 3, "launches": 0},
                "bytes": {"read": 100, "written": 100},
                "latency_ms": {"median": sorted(samples)[15], "samples": samples},
            }
        },
    }
    if reference is not None:
        doc["machine_reference"] = {
            "method": "test",
            "parts": {
                name: {"work": f"{name} work", "median_ms": med, "ci95_ms": list(ci), "n": 20}
                for name, (med, ci) in reference.items()
            },
        }
    return Run.from_json(doc)


def test_the_reference_is_timed_in_the_rounds_within_its_share():
    clock = FakeClock()
    cfg = TimingConfig(min_time_s=1.0, max_time_s=100, block_s=0.02, min_blocks=15, warmup_s=0.1)
    reference = Reference(
        {"matmul": clock.work("matmul", 0.002), "copy": clock.work("copy", 0.006)}, share=0.04
    )
    fns = {"eager": clock.work("eager", 0.004), "compile": clock.work("compile", 0.001)}
    res = measure_latency(fns, lambda: None, cfg, clock, reference=reference)
    # warmed up first (two calls each), then one block of each part in a round now and then
    assert clock.order[:4] == ["matmul", "matmul", "copy", "copy"]
    n = len(reference.samples_ms["copy"])
    assert reference.samples_ms["matmul"] == pytest.approx([2.0] * n)
    assert reference.samples_ms["copy"] == pytest.approx([6.0] * n)
    assert reference.spent_s == pytest.approx(n * 0.008)
    # within its share of the rounds' time, one reference round over at most
    assert reference.spent_s <= 0.04 * reference.rounds_s + 0.008
    assert n >= 0.04 * reference.rounds_s / 0.008 - 1 and n >= 10
    # the modes' stop rule is untouched: 1 s of 20 ms blocks
    assert len(res["eager"].samples_ms) == len(res["compile"].samples_ms) in (50, 51)


def test_summarize_reference_keeps_median_interval_and_cost():
    record = summarize_reference(
        {"matmul": [[1.0, 3.0, 2.0, 2.0, 2.5]], "copy": [[]]},
        {"matmul": "torch.mm"},
        method="m",
        share=0.04,
        spent_s=0.5,
        timing_s=20.0,
    )
    part = record.parts["matmul"]
    assert (part.work, part.median_ms, part.n) == ("torch.mm", 2.0, 5)
    assert part.ci95_ms[0] <= 2.0 <= part.ci95_ms[1]
    assert "copy" not in record.parts  # no sample, no part
    assert (record.share, record.spent_s, record.timing_s) == (0.04, 0.5, 20.0)
    assert part.processes is None  # one process: its blocks are `samples_ms`
    # three timing processes: each one's blocks kept, the level across them
    three = summarize_reference(
        {"copy": [[2.0, 2.1, 1.9], [2.4, 2.5, 2.3], [2.0, 2.0, 2.1]]},
        {"copy": "copy_"},
        method="m",
        share=0.04,
        spent_s=0.5,
        timing_s=20.0,
    ).parts["copy"]
    assert [p.samples for p in three.processes] == [
        (2.0, 2.1, 1.9),
        (2.4, 2.5, 2.3),
        (2.0, 2.0, 2.1),
    ]
    assert three.n == 9 and three.samples_ms[3:6] == (2.4, 2.5, 2.3)
    assert three.median_ms == pytest.approx((2.0 * 2.4 * 2.0) ** (1 / 3))
    assert three.ci95_ms[0] < 2.0 < 2.4 < three.ci95_ms[1]


def test_the_machine_changed_is_one_line():
    change, note = machine_change(_run(SLOW_MS, BASE_REF), _run(FAST_MS, FASTER_REF))
    assert note == "" and change is not None and change.changed
    assert change.summary == (
        "the machine ran 20% faster in head: matmul reference 1.19x, copy reference 1.21x"
    )
    same, _ = machine_change(_run(SLOW_MS, BASE_REF), _run(SLOW_MS, BASE_REF))
    assert same is not None and not same.changed
    assert same.summary.startswith("the machine reference did not move beyond its intervals")


def test_the_same_code_on_a_changed_machine_is_no_latency_change():
    """Issue 40's no-op: the same code, 13.2 ms then 10.8 ms, the machine 19-21% faster in head.
    With the roles swapped (head slower, +23% raw) and a 10% gate it failed the pull request;
    now latency is inconclusive: one process a run cannot tell +23% from a process's luck,
    whatever the reference did (the reference's move is shown, not divided by)."""
    slower = compare_runs(_run(FAST_MS, FASTER_REF), _run(SLOW_MS, BASE_REF), GATE)
    lat = slower.modes[0].metric("latency_median_ms")
    assert not slower.regressed
    assert lat.change_pct == pytest.approx(23.0, abs=0.1)
    assert lat.relative_change_pct == pytest.approx(2.5, abs=0.5)  # shown, not gated on
    assert lat.inconclusive.startswith(
        "head/base 1.230 is beyond the +10% limit, but not beyond what the runs can tell apart"
    )
    assert "machine reference head/base 1.200 (+2.5% relative to it: shown, not gated)" in lat.note
    assert slower.machine_note.startswith("the machine ran 17% slower in head")
    assert slower.machine_note.endswith(
        "the reference moved when the model did not (it "
        "measures its own process as much as the machine)"
    )
    # the same records without references: inconclusive too (main failed the gate here)
    bare = compare_runs(_run(FAST_MS), _run(SLOW_MS), GATE)
    assert not bare.regressed and bare.machine is None and bare.inconclusive


def test_twice_the_work_is_called_whether_the_machine_changed_or_not():
    base = _run(SLOW_MS, BASE_REF)
    quiet = compare_runs(base, _run(2 * SLOW_MS, BASE_REF), GATE)
    lat = quiet.modes[0].metric("latency_median_ms")
    assert quiet.regressed and lat.inconclusive is None
    assert lat.relative_change_pct == pytest.approx(100.0, abs=1)
    # on a machine 20% faster, twice the work is 1.65x raw and 2x relative to the reference
    faster = compare_runs(base, _run(2 * FAST_MS, FASTER_REF), GATE)
    lat = faster.modes[0].metric("latency_median_ms")
    assert faster.regressed and lat.inconclusive is None
    assert lat.change_pct == pytest.approx(62.6, abs=0.2)
    assert lat.relative_change_pct == pytest.approx(95.3, abs=1)
    assert "head/base 95% CI from 1.29" in faster.regressions[0].message
    # -4% raw, +15% relative to a reference that ran 20% faster: dividing by the reference
    # would create the regression (issue 48's +37.5%); the model's own latency did not move
    hidden = compare_runs(base, _run(SLOW_MS * 1.15 / 1.2, FASTER_REF), GATE)
    lat = hidden.modes[0].metric("latency_median_ms")
    assert lat.change_pct < 0 < lat.relative_change_pct - 10
    assert not hidden.regressed and lat.inconclusive is None


def test_runs_recorded_before_the_reference_compare_as_today_with_one_line():
    cmp = compare_runs(_run(SLOW_MS), _run(SLOW_MS * 1.02, BASE_REF), GATE)
    assert cmp.machine is None
    assert cmp.machine_note == (
        "latency across runs cannot be checked against the machine's state: base has no "
        "machine reference (a run recorded before profreport timed one, or one whose reference "
        "failed)"
    )
    lat = cmp.modes[0].metric("latency_median_ms")
    assert lat.relative_change_pct is None
    assert lat.note.endswith(": no change beyond what the runs can tell apart")
    md = render_markdown(cmp)
    assert "ℹ️ latency across runs cannot be checked against the machine's state" in md


def test_markdown_says_the_machine_changed_and_both_changes():
    md = render_markdown(compare_runs(_run(FAST_MS, FASTER_REF), _run(SLOW_MS, BASE_REF), GATE))
    assert "⚠️ the machine ran 17% slower in head: matmul reference 0.84x" in md
    assert "+23.0%, head/base 1.230" in md
    assert "+2.5% relative to it: shown, not gated" in md
    assert "❔ **no regression called; 1 latency result inconclusive" in md


def test_kernel_time_is_also_shown_relative_to_a_machine_that_moved():
    """Issue 40: eager's convolution 20.38 -> 6.87 ms per step with nothing changed."""

    def side(time_us: float) -> KernelSide:
        return KernelSide(name="conv", kind="cpu", calls=1, time_us=time_us)

    row = KernelChange("time only", "name", side(20380.0), side(6870.0), 0, -13510.0, None, None)
    diff = ModeKernelDiff(mode="eager", rows=(row,), paired=1, fusion_changes=(), note="")
    plain = mode_view(diff)["top"][0]["time"]
    assert plain == "20.38 ms → 6.87 ms (−13.51 ms)"
    found = relative_to_machine(row, 0.4)  # the comparison's finding, in its document
    assert found.time_ratio_vs_machine == pytest.approx(6870.0 / 0.4 / 20380.0)
    assert found.to_json()["time_ratio_vs_machine"] == found.time_ratio_vs_machine
    moved = mode_view(dataclasses.replace(diff, rows=(found,)))["top"][0]["time"]
    assert moved == "20.38 ms → 6.87 ms (−13.51 ms; -16% relative to the machine reference)"


RECORDED = Path(__file__).parent / "data" / "runs" / "machine-reference"


def _recorded(name: str) -> Run:
    path = RECORDED / f"{name}.run.json.gz"
    return derived_run(parse(json.loads(gzip.decompress(path.read_bytes())), str(path)), ANALYSES)


@pytest.mark.parametrize("order", ["quiet-busy", "busy-quiet"])
def test_two_recorded_runs_of_the_same_code_on_a_busy_machine_call_no_latency_change(order):
    """Two real `generate --model simple` runs of the same code, the second with a CPU burner
    beside it (README.md here): eager 5.57 ms then 11.79 ms. Before the reference, quiet ->
    busy failed a 10% gate in every mode (the intervals far apart, beyond the noise band);
    now no latency change is called, either way round, and compare says the machine changed."""
    base, head = (_recorded(f"simple-{side}") for side in order.split("-"))
    cmp = compare_runs(base, head, GATE)
    assert not cmp.regressed
    assert cmp.machine is not None and cmp.machine.changed
    assert cmp.machine_note.startswith("the machine changed between the runs: matmul reference")
    for mc in cmp.modes:
        lat = mc.metric("latency_median_ms")
        assert abs(lat.change_pct) > 50  # raw: the machine's doing
        assert lat.inconclusive.startswith("the machine changed (head vs base: matmul reference")


def _issue48_run(eager_ms: float, script_ms: float, copy_ms: float) -> Run:
    """Issue 48's runs 1 and 2 of `simple`: eager and script, and a reference whose matmul
    held still while its copy part moved."""
    run = _run(
        eager_ms,
        {"matmul": (1.0, (0.99, 1.01)), "copy": (copy_ms, (copy_ms * 0.99, copy_ms * 1.01))},
    )
    doc = run.to_json()
    script = dict(doc["modes"]["eager"])
    samples = _samples(script_ms)
    script["latency_ms"] = {"median": sorted(samples)[15], "samples": samples}
    doc["modes"]["script"] = script
    return Run.from_json(doc)


def test_a_reference_that_moved_when_the_model_did_not_creates_no_regression():
    """Issue 48: two same-code runs, eager 8.99 and 9.04 ms, script's speedup 1.010 then 0.877
    (one process's luck), the copy reference 1.48x faster in the second process. Dividing by
    the reference made script +41% "relative to the machine reference" and failed a 5% gate;
    now nothing is called: script's +16% is inconclusive (one process a run), eager passes,
    and compare says the reference moved when the model did not."""
    base = _issue48_run(8.99, 8.99 / 1.010, 2.0)
    head = _issue48_run(9.04, 9.04 / 0.877, 2.0 / 1.48)
    cmp = compare_runs(base, head, Thresholds(max_latency_regression_pct=5))
    assert not cmp.regressed and cmp.regressions == []
    eager, script = (mc.metric("latency_median_ms") for mc in cmp.modes)
    assert eager.inconclusive is None and not eager.regression
    assert script.relative_change_pct > 37.5  # what the division said: shown, never gated on
    assert script.inconclusive.startswith("head/base 1.15")
    assert cmp.inconclusive == [f"script: latency inconclusive: {script.inconclusive}"]
    assert cmp.machine_note.startswith("the machine ran 22% faster in head")
    assert "the reference moved when the model did not" in cmp.machine_note
    md = render_markdown(cmp)
    assert "✅" not in md and "❔ **no regression called; 1 latency result inconclusive" in md
    assert "| inconclusive: latency |" in md


def test_a_slowdown_the_gate_could_not_judge_is_never_shown_ok():
    """Issue 46: `--min-time 0.3` runs on a busy machine, the copy reference's interval
    1.64-2.00 ms, the head's latencies 1.3x the base's. The noise guard withholds the call; main
    showed the row "ok" and the headline "✅ no regression", exit 0. It is inconclusive in the
    row and the headline; `--fail-on-inconclusive` fails it."""
    wide = {"matmul": (1.0, (0.99, 1.01)), "copy": (1.8, (1.64, 2.0))}
    base, head = _run(SLOW_MS, wide), _run(1.3 * SLOW_MS, wide)
    busy = {"reasons": ["other processes used 35% of the machine's CPU time while timing"]}
    base, head = (Run.from_json({**r.to_json(), "timing_noise": busy}) for r in (base, head))
    cmp = compare_runs(base, head, GATE)
    assert not cmp.regressed and cmp.inconclusive
    md = render_markdown(cmp)
    assert "✅" not in md
    assert "❔ **no regression called; 1 latency result inconclusive" in md
    row = next(line for line in md.splitlines() if line.startswith("| eager |"))
    assert row.endswith("| inconclusive: latency |")  # the result column
    strict = compare_runs(
        base, head, Thresholds(max_latency_regression_pct=10, fail_on_inconclusive=True)
    )
    assert "❌ **no regression called, but 1 latency result inconclusive" in render_markdown(strict)
