import pytest

from profreport.analysis.latency import bootstrap_median_ci, summarize


def test_summarize_known_samples():
    stats = summarize([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert stats.median == pytest.approx(5.5)
    assert stats.iqr == pytest.approx(7.75 - 3.25)
    assert stats.p10 == pytest.approx(1.9)
    assert stats.p90 == pytest.approx(9.1)
    assert stats.n == 10
    assert stats.min == 1.0


def test_summarize_rejects_empty():
    with pytest.raises(ValueError):
        summarize([])


def test_bootstrap_is_reproducible_with_seed():
    data = [1.0, 1.1, 0.9, 1.3, 1.2, 0.95, 1.05]
    assert bootstrap_median_ci(data, seed=3) == bootstrap_median_ci(data, seed=3)
