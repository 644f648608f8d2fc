"""What a speedup is made of (analysis/speedup_breakdown): the decomposition, the bound on what
the saved bytes can explain, and the verdict clause."""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from profreport.analysis.derive import derived_run, with_findings
from profreport.analysis.speedup_breakdown import bytes_credit_us, time_findings
from profreport.modes import mode_analyses
from profreport.record.model import Ceilings, ModeResult, Run

DATA = Path(__file__).parent / "data"
GB = 1e9


def _cpu_step(wall: float, op: float, ops: int, **kw: float) -> dict[str, Any]:
    rest = wall - op
    return {
        "name": "ProfilerStep#3",
        "wall_us": wall,
        "op_us": op,
        "dispatch_us": rest * 0.5,
        "wrapper_us": 0.0,
        "python_us": rest * 0.5,
        "dispatched_ops": ops,
        **kw,
    }


def _mode(
    step: dict[str, Any],
    traffic: int,
    speedup: tuple[float, float, float] | None = None,
    not_modeled: tuple[str, ...] = (),
) -> ModeResult:
    doc: dict[str, Any] = {
        "status": "ok",
        "kernels": {"per_step": 3, "launches": 0, "memcpy": 0, "memset": 0, "table": []},
        "bytes": {
            "read": traffic // 2,
            "written": traffic - traffic // 2,
            "source": "modeled",
            "method": "",
            "table": [],
            "not_modeled": list(not_modeled),
        },
        "time_breakdown": {"definition": "cpu", "source": "profiler", "step": step},
    }
    if speedup is not None:
        doc["speedup_vs_eager"] = {"median": speedup[0], "ci95": list(speedup[1:])}
    return ModeResult.from_json(doc)


def _ceilings(bandwidth: float) -> Ceilings:
    return Ceilings.from_json(
        {
            "memory_bandwidth": {"value": bandwidth, "unit": "B/s"},
            "matmul_rate": {"value": 1e11, "unit": "FLOP/s"},
        }
    )


EAGER = _mode(_cpu_step(2000.0, 1200.0, 108), 100_000_000)


def test_cpu_decomposition_and_clause():
    mode = _mode(_cpu_step(1200.0, 1000.0, 30), 73_000_000, speedup=(1.7, 1.5, 1.9))
    f = time_findings("compile", mode, EAGER, _ceilings(20 * GB))
    assert f is not None
    assert (f.saved_us, f.work_saved_us, f.overhead_saved_us) == (800.0, 200.0, 600.0)
    assert (f.eager_ops, f.ops, f.bytes_saved) == (108, 30, 27_000_000)
    assert f.bytes_bound_us == 1350.0  # 27 MB / 20 GB/s
    assert f.bytes_credit_us == 200.0  # never more than the op time saved
    assert f.clause == (
        "profiled step 2 ms → 1.2 ms (profiler on): 75% of the 0.8 ms saved is host overhead "
        "(108 → 30 dispatched ops), 25% op time; the 27% fewer modeled bytes explain at most "
        "0.2 ms of it (at 20 GB/s measured)"
    )
    assert f.bound == "device-bound"  # op time 1000 of 1200 µs
    assert f.basis is not None and "profiler on" in f.basis


def test_bytes_credit_is_bounded_by_bandwidth_and_the_rest_is_named():
    mode = _mode(_cpu_step(1500.0, 700.0, 100), 99_000_000, speedup=(1.3, 1.2, 1.4))
    f = time_findings("compile", mode, EAGER, _ceilings(20 * GB))
    assert f is not None and f.work_saved_us == 500.0
    assert f.bytes_bound_us == 50.0 and f.bytes_credit_us == 50.0  # 1 MB / 20 GB/s
    assert "explain at most 0.05 ms of it" in f.clause
    assert "the other 0.45 ms is compute or a different library call" in f.clause


def test_without_ceilings_the_bytes_share_is_unknown():
    mode = _mode(_cpu_step(1200.0, 1000.0, 30), 73_000_000, speedup=(1.7, 1.5, 1.9))
    f = time_findings("compile", mode, EAGER, None)
    assert f is not None and f.bytes_credit_us is None and f.bytes_bound_us is None
    assert f.clause.endswith("the bytes' share is unknown (bandwidth not measured)")
    no_bandwidth = Ceilings.from_json({"source": "unavailable", "reason": "no"})
    g = time_findings("compile", mode, EAGER, no_bandwidth)
    assert g is not None and g.clause == f.clause


def test_partial_bytes_are_not_credited():
    mode = _mode(
        _cpu_step(1200.0, 1000.0, 30),
        1_000,
        speedup=(1.7, 1.5, 1.9),
        not_modeled=("prim::mkldnn_convolution",),
    )
    f = time_findings("compile", mode, EAGER, _ceilings(20 * GB))
    assert f is not None and f.bytes_saved is None and f.bytes_credit_us is None
    assert "modeled traffic not comparable" in f.clause


def test_no_clear_timed_change_is_not_decomposed():
    mode = _mode(_cpu_step(1200.0, 1000.0, 30), 73_000_000, speedup=(1.05, 0.9, 1.2))
    f = time_findings("script", mode, EAGER, _ceilings(20 * GB))
    assert f is not None and f.saved_us == 800.0  # the numbers stay in the finding
    assert f.clause == (
        "profiled step 2 ms → 1.2 ms (profiler on), not decomposed: the timed latency shows "
        "no clear change"
    )


def test_slower_mode_states_signed_parts():
    mode = _mode(_cpu_step(2500.0, 1300.0, 120), 100_000_000, speedup=(0.8, 0.7, 0.9))
    f = time_findings("script", mode, EAGER, _ceilings(20 * GB))
    assert f is not None and f.saved_us == -500.0
    assert f.clause.startswith(
        "profiled step 2 ms → 2.5 ms (profiler on), 0.5 ms lost: op time +0.1 ms, "
        "host overhead +0.4 ms (108 → 120 dispatched ops)"
    )
    assert f.clause.endswith("no modeled bytes saved")


def test_eager_gets_its_bound_only_and_old_records_get_nothing():
    f = time_findings("eager", EAGER, EAGER, _ceilings(20 * GB))
    assert f is not None and f.clause == "" and f.saved_us is None and f.bound
    old = ModeResult.from_json({"status": "ok"})
    assert time_findings("compile", old, EAGER, None) is None


def test_cuda_graphs_show_the_host_overhead_they_remove():
    def step(busy: float, launches: int) -> dict[str, Any]:
        return {
            "name": "ProfilerStep#3",
            "wall_us": 1000.0,
            "launch_us": 5.0 * launches,
            "runtime_us": 0.0,
            "dispatch_us": 100.0,
            "wrapper_us": 0.0,
            "python_us": 100.0,
            "launches": launches,
            "device_span_us": 1000.0,
            "device_busy_us": busy,
            "host_wait_us": 1000.0 - busy,
            "kernel_wait_us": 0.0,
            "other_idle_us": 0.0,
        }

    eager = _mode(step(300.0, 100), 1000)
    graphs_step = {
        **step(290.0, 1),
        "wall_us": 400.0,
        "device_span_us": 400.0,
        "host_wait_us": 110.0,
    }
    graphs = _mode(graphs_step, 1000, speedup=(2.4, 2.2, 2.6))
    f = time_findings("compile-cudagraphs", graphs, eager, _ceilings(1e12))
    assert f is not None
    assert (f.saved_us, f.work_saved_us, f.overhead_saved_us) == (600.0, 10.0, 590.0)
    assert "98% of the 0.6 ms saved is host overhead and device idle (100 → 1 launches)" in (
        f.clause
    )
    assert f.bound == "launch-bound" or f.bound == "host-bound"


@settings(max_examples=300, deadline=None)
@given(
    eager_op=st.floats(0, 1e5),
    op=st.floats(0, 1e5),
    eager_bytes=st.integers(0, 10**10),
    mode_bytes=st.integers(0, 10**10),
    bandwidth=st.floats(1e6, 1e13),
)
def test_the_verdict_never_credits_bytes_beyond_bandwidth(
    eager_op, op, eager_bytes, mode_bytes, bandwidth
):
    eager = _mode(_cpu_step(eager_op + 500.0, eager_op, 10), eager_bytes)
    mode = _mode(_cpu_step(op + 100.0, op, 5), mode_bytes, speedup=(2.0, 1.5, 2.5))
    f = time_findings("compile", mode, eager, _ceilings(bandwidth))
    assert f is not None
    limit_us = max(eager_bytes - mode_bytes, 0) / bandwidth * 1e6
    credit = f.bytes_credit_us
    assert credit is not None and 0.0 <= credit <= limit_us + 1e-3
    assert credit <= max(f.work_saved_us or 0.0, 0.0) + 1e-3
    # and what the sentence says: "explain at most X ms" never above the limit
    said = re.search(r"explain at most ([\d,.]+) ms", f.clause)
    if said:
        assert float(said.group(1).replace(",", "")) * 1000 <= limit_us + 1e-6


def test_bytes_credit_bounds():
    assert bytes_credit_us(500.0, 50.0) == 50.0
    assert bytes_credit_us(20.0, 50.0) == 20.0
    assert bytes_credit_us(-20.0, 50.0) == 0.0
    assert bytes_credit_us(20.0, None) is None


def test_records_without_breakdown_are_derived_unchanged():
    """A run.json written before: no time_findings appear, and the verdicts keep their form."""
    record = orjson.loads(gzip.decompress((DATA / "run1_simple_cpu_before.json.gz").read_bytes()))
    run = derived_run(record, mode_analyses())
    assert all(m.time_findings is None for m in run.modes.values())
    assert "time_findings" not in orjson.dumps(with_findings(record, mode_analyses())).decode()
    assert isinstance(run, Run)
