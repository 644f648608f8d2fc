"""Where the time goes, on real generate runs (CPU): each mode's profiled step (its light pass)
decomposes into parts that sum to the step's wall time as the profiler recorded it, its events
are counted, and the timed saving decomposes into kernel time and host overhead exactly."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from profreport.analysis.derive import derived_run
from profreport.modes import mode_analyses
from profreport.record import load
from profreport.render.time_view import time_rows
from profreport.render.viewmodel import build_view


def _profiler_step_us(run_dir: Path, trace: str, name: str) -> float:
    """The step's duration read straight from the raw trace file (not through traceio)."""
    events = json.loads(gzip.decompress((run_dir / trace).read_bytes()))["traceEvents"]
    (step,) = [e for e in events if e.get("name") == name and e.get("ph") == "X"]
    return float(step["dur"])


def _check(run_dir: Path) -> None:
    run = derived_run(load(run_dir / "run.json"), mode_analyses())
    for name, mode in run.ok_modes.items():
        tb = mode.time_breakdown
        assert tb is not None and tb.trace is not None and tb.steps is not None
        assert tb.profiler_cost is not None and tb.profiler_cost.per_event_us >= 0
        assert 5 <= len(tb.steps) <= 20 and tb.kernels
        for step in tb.steps:
            assert step.op_us is not None and step.events is not None
            parts = step.op_us + step.dispatch_us + step.wrapper_us + step.python_us
            measured = _profiler_step_us(run_dir, tb.trace, step.name)
            assert abs(parts - measured) <= 0.05 * measured, (name, parts, measured)
            assert min(step.op_us, step.dispatch_us, step.wrapper_us, step.python_us) >= 0
            assert sum(step.events.values()) >= step.dispatched_ops  # every op is an event
        findings = mode.time_findings
        assert findings is not None and findings.bound in (
            "host-bound",
            "launch-bound",
            "device-bound",
        )
        if name == "eager":
            continue
        assert findings.saved_us is not None and findings.work_saved_us is not None
        assert findings.overhead_saved_us is not None and findings.profiled_saved_us is not None
        total = findings.work_saved_us + findings.overhead_saved_us
        assert total == pytest.approx(findings.profiled_saved_us, abs=0.01)
        assert findings.clause and findings.clause in (mode.verdict or "")
        credit, bound = findings.bytes_credit_us, findings.bytes_bound_us
        if credit is not None and bound is not None:
            assert credit <= bound and credit <= max(findings.work_saved_us, 0.0)
    rows = time_rows(run)
    assert [r["mode"] for r in rows] == list(run.ok_modes)
    assert build_view(run)["time_rows"] == rows


@pytest.mark.slow
def test_gated_residual_every_mode_sums_to_its_step(gated_run):
    _check(gated_run)


@pytest.mark.slow
def test_builtin_models_every_mode_sums_to_its_step(builtin_run):
    """simple, conv-bn-relu and mlp-block (the shared five-mode runs)."""
    _check(builtin_run)
