"""analysis/change: the base-against-head arithmetic shared by the run and the trace comparisons."""

import pytest

from profreport.analysis.change import Change
from profreport.analysis.compare import compare_runs
from profreport.analysis.trace_compare import _delta
from profreport.record.model import Run


def test_difference_keeps_ints_and_is_none_without_a_side():
    assert Change(7, 9).difference == 2 and isinstance(Change(7, 9).difference, int)
    assert Change(1.5, 1.0).difference == pytest.approx(-0.5)
    assert Change(None, 3).difference is None and Change(3, None).difference is None


def test_ratio_and_pct_are_relative_to_base_and_none_from_zero():
    assert Change(4, 5).ratio == 1.25 and Change(4, 5).pct == 25.0
    assert Change(4, 3).pct == -25.0
    for change in (Change(0, 5), Change(0, 0), Change(None, 5), Change(5, None)):
        assert change.ratio is None and change.pct is None


def test_growth_beyond_a_limit_counts_from_nothing_to_something_only():
    assert Change(100, 111).grew_beyond_pct(10) and not Change(100, 110).grew_beyond_pct(10)
    assert Change(0, 1).grew_beyond_pct(1000)  # unbounded
    assert not Change(0, 0).grew_beyond_pct(0)
    assert not Change(None, 5).grew_beyond_pct(0)  # a missing side is no increase


def test_trace_and_run_comparisons_state_one_number_alike():
    """The same base and head give the same difference in analyze's document and compare's."""
    trace = _delta(4, 6).to_json()
    assert trace == {"baseline": 4, "value": 6, "delta": 2, "ratio": 1.5}
    assert _delta(0.1, 0.3).delta == 0.2  # rounded to 3 places: no 0.19999999999999998
    assert _delta(0, 6).ratio is None and _delta(None, 6).delta is None

    def run(per_step: int) -> Run:
        mode = {"status": "ok", "kernels": {"per_step": per_step}, "bytes": {"read": 0}}
        return Run.from_json({"model": {"name": "m"}, "device": {}, "modes": {"eager": mode}})

    kernels = compare_runs(run(4), run(6)).modes[0].metric("kernels_per_step")
    assert (kernels.base, kernels.head, kernels.change) == (4, 6, trace["delta"])
    assert kernels.change_pct == (trace["ratio"] - 1) * 100
