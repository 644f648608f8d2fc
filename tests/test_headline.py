"""The headline view-model (render/headline.py) on a recorded run's values, then its edges."""

import copy

import pytest

from profreport.analysis.derive import derived_run
from profreport.analysis.paired import speedup_call
from profreport.modes import mode_analyses
from profreport.record import load
from profreport.render.headline import ERROR_CHARS, headline, short_text


@pytest.fixture
def record(recorded_gated_run):
    return load(recorded_gated_run / "run.json")


def _rows(record) -> dict:
    """The headline of the record with its findings (the speedups' calls among them)."""
    return {r["mode"]: r for r in headline(derived_run(record, mode_analyses()))["rows"]}


def test_recorded_run_kernels_bytes_and_tones(record):
    rows = _rows(record)
    assert list(rows) == ["eager", "script", "trace", "optimize", "compile"]
    eager, compile_, script = rows["eager"], rows["compile"], rows["script"]
    # eager is the reference: its own counts, no arrow, no speedup
    assert eager["kernels"]["text"] == "7" and eager["speedup"]["text"] == "baseline"
    assert eager["bytes"] == {"text": "17.00 MiB", "detail": "modeled, per step", "tone": "neutral"}
    assert eager["output"]["text"] == "reference"
    # compile: 7 eager kernels ran as 1; 17 MiB modeled -> 3 MiB is -82%
    assert compile_["kernels"] == {
        "text": "7 → 1",
        "detail": "kernels per step, profiler",
        "tone": "good",
    }
    assert compile_["bytes"] == {
        "text": "-82%",
        "detail": "modeled, 17.00 MiB → 3.00 MiB",
        "tone": "good",
    }
    assert script["kernels"]["text"] == "7 → 7" and script["kernels"]["tone"] == "neutral"
    assert script["bytes"]["text"] == "±0%" and script["bytes"]["tone"] == "neutral"
    assert compile_["output"]["text"] == "ok" and compile_["output"]["tone"] == "good"
    assert compile_["launches"] is None  # CPU: no launch column
    assert compile_["color"] == "#d62728"


def _speedup(record, median, lo, hi, inconclusive=None):
    rec = copy.deepcopy(record)
    rec["modes"]["compile"]["speedup_vs_eager"] = {
        "median": median,
        "ci95": [lo, hi],
        "noise": inconclusive,
        "inconclusive": inconclusive,
    }
    return _rows(rec)["compile"]["speedup"]


def test_speedup_is_called_only_outside_its_interval_and_the_noise_band(record):
    assert _speedup(record, 1.3, 1.2, 1.4) == {
        "text": "1.30x",
        "detail": "95% CI 1.20-1.40, measured in one process",
        "tone": "good",
    }
    assert _speedup(record, 0.5, 0.4, 0.6)["tone"] == "bad"
    same = _speedup(record, 1.01, 0.9, 1.1)
    assert (same["text"], same["tone"]) == ("1.01x", "neutral")
    assert same["detail"].startswith("no change")
    noisy = _speedup(record, 1.3, 1.2, 1.4, inconclusive="other processes used 40%")
    assert noisy == {
        "text": "inconclusive",
        "detail": "1.30x, 95% CI 1.20-1.40, measured in one process",
        "tone": "muted",
    }


def test_output_difference_failed_mode_and_partial_bytes(record):
    rec = copy.deepcopy(record)
    rec["modes"]["trace"]["output_check"]["within_tolerance"] = False
    rec["modes"]["trace"]["output_check"]["max_abs_err"] = 0.5
    rec["modes"]["optimize"]["bytes"]["not_modeled"] = ["mkldnn_convolution"]
    error = "RuntimeError: " + "word " * 100
    rec["modes"]["script"] = {"status": "failed", "error": error, "compile_s": None}
    rows = _rows(rec)
    assert rows["trace"]["output"] == {
        "text": "DIFFERS",
        "detail": "max abs err 0.5",
        "tone": "bad",
    }
    assert rows["optimize"]["bytes"]["text"] == "n/a"
    assert rows["optimize"]["bytes"]["detail"].startswith("partial model")
    script = rows["script"]
    assert script["status"] == {"text": "failed", "detail": "", "tone": "bad"}
    assert script["kernels"] is None and script["speedup"] is None
    # cut at a word, with an ellipsis, never mid-word
    assert script["error"].endswith("word…") and len(script["error"]) <= ERROR_CHARS


def test_cuda_shows_launches_and_measured_bytes_win_over_modeled(record):
    rec = copy.deepcopy(record)
    rec["device"]["type"] = "cuda"
    for name, launches, total in (("eager", 9, 1000), ("compile", 2, 250)):
        mode = rec["modes"][name]
        mode["kernels"]["launches"] = launches
        mode["bytes"]["measured"] = {"available": True, "read": total // 2, "written": total // 2}
    result = headline(derived_run(rec, mode_analyses()))
    assert result["show_launches"] and result["kernel_label"] == "device kernels"
    rows = {r["mode"]: r for r in result["rows"]}
    assert rows["compile"]["launches"]["text"] == "9 → 2"
    assert rows["compile"]["bytes"]["text"] == "-75%"
    assert rows["compile"]["bytes"]["detail"].startswith("measured")
    # trace has no measurement: modeled, and says so
    assert rows["trace"]["bytes"]["detail"].startswith("modeled")


def test_short_text_cuts_at_a_word():
    assert short_text("short", 10) == "short"
    assert short_text("alpha beta gamma delta", 14) == "alpha beta…"
    assert short_text("x" * 50, 10) == "x" * 9 + "…"  # one long word: cut, and marked
    assert short_text("first line\nsecond", 20) == "first line"  # one line: the first


def test_a_speedup_inside_the_timers_resolution_is_not_coloured_as_a_change():
    """The verdict calls no change for such an interval (analysis/paired.RESOLUTION); the
    headline once painted MobileNetV2's optimize 0.99x (95% CI 0.98-1.00) red beside it."""
    from profreport.record.model import OkMode
    from profreport.render.headline import _speedup_cell

    def cell(lo, median, hi):
        mode = OkMode.from_json({"speedup_vs_eager": {"median": median, "ci95": [lo, hi]}})
        assert mode.speedup_vs_eager is not None
        return _speedup_cell(mode.adding(speedup_call=speedup_call(mode.speedup_vs_eager)))

    inside = cell(0.981, 0.988, 0.996)
    assert inside["tone"] == "neutral"
    assert inside["detail"].startswith("no change beyond 1% is certain: 95% CI")
    # a median past the band, its interval not: not "within 1%" (issue 46)
    assert cell(1.002, 1.023, 1.028)["detail"] == (
        "no change beyond 1% is certain: 95% CI 1.00-1.03, measured in one process"
    )
    assert inside["text"] == "0.99x"  # two decimals, as every other speedup in the column
    assert cell(0.9, 0.95, 0.98)["tone"] == "bad"
    assert cell(1.02, 1.05, 1.08)["tone"] == "good"
    assert cell(0.99, 1.0, 1.01)["detail"].startswith("no change: ")
