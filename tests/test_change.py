"""analysis/change: one `Change` (base, head, change, change_pct) for a run comparison's metrics,
a trace comparison's counts, time parts and launching ops."""

import pytest

from profreport.analysis.change import Change
from profreport.analysis.compare import MetricChange, compare_runs
from profreport.analysis.kernels import TraceCounts
from profreport.analysis.trace_compare import compare_counts
from profreport.analysis.trace_document import OpChange, count_change
from profreport.record.model import Run

KEYS = ["base", "head", "change", "change_pct"]


def test_change_keeps_ints_and_is_none_without_a_side():
    assert Change.of(7, 9).change == 2 and isinstance(Change.of(7, 9).change, int)
    assert Change.of(1.5, 1.0).change == pytest.approx(-0.5)
    for change in (Change.of(None, 3), Change.of(3, None)):
        assert change.change is None and change.change_pct is None and change.ratio is None


def test_ratio_and_pct_are_relative_to_base_and_none_from_zero():
    assert Change.of(4, 5).ratio == 1.25 and Change.of(4, 5).change_pct == 25.0
    assert Change.of(4, 3).change_pct == -25.0
    for change in (Change.of(0, 5), Change.of(0, 0)):
        assert change.ratio is None and change.change_pct is None and change.change is not None


def test_growth_beyond_a_limit_counts_from_nothing_to_something_only():
    assert Change.of(100, 111).grew_beyond_pct(10) and not Change.of(100, 110).grew_beyond_pct(10)
    assert Change.of(0, 1).grew_beyond_pct(1000)  # unbounded
    assert not Change.of(0, 0).grew_beyond_pct(0)
    assert not Change.of(None, 5).grew_beyond_pct(0)  # a missing side is no increase


def test_a_change_is_written_as_its_four_keys_and_read_back():
    data = Change.of(4, 6).to_json()
    assert data == {"base": 4, "head": 6, "change": 2, "change_pct": 50.0}
    assert Change.from_json(data) == Change.of(4, 6)
    assert list(Change.of(None, 6).to_json()) == KEYS  # a missing side is null, not absent


def _run(per_step: int) -> Run:
    mode = {"status": "ok", "kernels": {"per_step": per_step}, "bytes": {"read": 0}}
    return Run.from_json({"model": {"name": "m"}, "device": {}, "modes": {"eager": mode}})


def test_metrics_counts_and_ops_state_one_number_alike():
    """The same base and head: the same Change in compare's metric, analyze's count and
    analyze's launching op (each a Change, written with the same four keys)."""
    (kernels,) = [
        m for m in compare_runs(_run(4), _run(6)).modes[0].metrics if m.metric == "kernels_per_step"
    ]
    base = TraceCounts("device", {}, kernels=4, kernels_by_op={"aten::mm": 4})
    head = TraceCounts("device", {}, kernels=6, kernels_by_op={"aten::mm": 6})
    trace = compare_counts("a", base, "b", head)
    (op,) = trace.launching_ops
    assert isinstance(kernels, MetricChange) and isinstance(op, OpChange)
    expected = Change.of(4, 6).to_json()
    for change in (kernels, trace.totals["kernels"], op):
        assert isinstance(change, Change)
        assert {k: change.to_json()[k] for k in KEYS} == expected
    assert (kernels.metric, op.op) == ("kernels_per_step", "aten::mm")


def test_a_traces_float_change_is_written_to_three_places():
    """analyze writes a count's float difference rounded (its µs are shown to 2 places), the
    relative change from the numbers themselves."""
    assert count_change(0.1, 0.3).change == 0.2  # not 0.19999999999999998
    assert count_change(0.1, 0.3).change_pct == Change.of(0.1, 0.3).change_pct
    assert count_change(4, 6) == Change.of(4, 6)
