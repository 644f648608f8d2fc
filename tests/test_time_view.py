"""The report's "Where the time goes" piece (render/time_view.py): view-model values, the chart
and the summary lines."""

from __future__ import annotations

import dataclasses

from profreport.analysis.profiler_cost import mode_median_step
from profreport.record.model import OkMode, Run
from profreport.render import charts
from profreport.render.markdown import _time_lines
from profreport.render.time_view import chart_series, time_rows


def _mode(wall: float, op: float, ops: int, timed_ms: float, clause: str = "") -> dict:
    return {
        "status": "ok",
        "latency_ms": {"median": timed_ms},
        "time_breakdown": {
            "definition": "cpu",
            "source": "profiler",
            "step": {
                "name": "ProfilerStep#3",
                "wall_us": wall,
                "op_us": op,
                "dispatch_us": 100.0,
                "wrapper_us": 50.0,
                "python_us": wall - op - 150.0,
                "dispatched_ops": ops,
            },
            "step_walls_us": [wall],
        },
        "time_findings": {
            "bound": "host-bound",
            "bound_evidence": "CPU kernels 50%",
            "clause": clause,
        },
    }


def _found(run: Run) -> Run:
    """`run` with each mode's median step, the finding analysis/derive adds and the view reads."""
    return dataclasses.replace(
        run,
        modes={
            name: m.adding(median_step=mode_median_step(m)) if isinstance(m, OkMode) else m
            for name, m in run.modes.items()
        },
    )


RUN = _found(
    Run.from_json(
        {
            "schema": "profreport.run/1",
            "modes": {
                "eager": _mode(2000.0, 1000.0, 108, 1.6),
                "compile": _mode(1200.0, 900.0, 30, 0.9, "profiled step 2 ms → 1.2 ms"),
                "script": {"status": "failed", "error": "boom"},
            },
        }
    )
)


def test_rows_per_mode_that_ran_with_its_parts_in_ms():
    eager, compiled = time_rows(RUN)
    assert (eager["mode"], eager["wall"], eager["timed"]) == ("eager", "2 ms", "1.6 ms")
    assert eager["parts"] == [
        ("CPU kernels", "1 ms"),
        ("dispatch", "0.1 ms"),
        ("wrappers", "0.05 ms"),
        ("Python", "0.85 ms"),
    ]
    assert (eager["ops"], eager["ops_label"], eager["bound"]) == (
        108,
        "dispatched ops",
        "host-bound",
    )
    assert compiled["clause"] == "profiled step 2 ms → 1.2 ms"


def test_chart_series_stack_every_part_per_mode_and_render_as_checked_svg():
    series = chart_series(RUN)
    assert series is not None
    modes, parts = series
    assert modes == ["eager", "compile"]
    assert parts["CPU kernels"] == [1.0, 0.9]
    assert [sum(v) for v in zip(*parts.values(), strict=True)] == [2.0, 1.2]
    svg = charts.time_breakdown_chart(modes, parts)
    assert svg.startswith("<svg") and "Python" in svg


def test_summary_lines():
    lines = _time_lines(time_rows(RUN))
    assert lines[0].startswith("**Where the time goes**")
    assert lines[2] == (
        "- eager: 2 ms, timed 1.6 ms (CPU kernels 1 ms, dispatch 0.1 ms, wrappers 0.05 ms, "
        "Python 0.85 ms; 108 dispatched ops); host-bound"
    )
    assert _time_lines([]) == []


def _light(wall: float, op: float, wrapper: float, events: dict[str, int]) -> dict:
    step = {
        "name": "ProfilerStep#3",
        "wall_us": wall,
        "op_us": op,
        "dispatch_us": 100.0,
        "wrapper_us": wrapper,
        "python_us": wall - op - wrapper - 100.0,
        "dispatched_ops": 10,
        "events": events,
    }
    return {
        "status": "ok",
        "latency_ms": {"median": 1.0},
        "kernels": {
            "per_step": 3,
            "launches": 0,
            "memcpy": 0,
            "memset": 0,
            "table": [],
            "unrecorded": ["prim::mkldnn_convolution"],
        },
        "time_breakdown": {
            "definition": "cpu",
            "steps": [step, dict(step, wall_us=wall * 9, python_us=wall * 8), step],
            "profiler_cost": {"per_event_us": 1.0, "per_step_us": 4.0},
            "busy": ["other processes used 50% of the machine's CPU time while profiling"],
        },
    }


def test_a_light_pass_row_shows_the_median_step_with_the_cost_removed_and_inferred_ops():
    run = _found(
        Run.from_json(
            {
                "schema": "profreport.run/1",
                "modes": {"optimize": _light(1000.0, 200.0, 600.0, {"wrapper": 6, "python": 2})},
            }
        )
    )
    (row,) = time_rows(run)
    # wrapper 600 - 6 events, Python 100 - 2 events - 4 µs per step: the median of three steps
    assert row["parts"] == [
        ("CPU kernels", "0.2 ms"),
        ("inferred ops (no profiler record)", "0.594 ms"),
        ("dispatch", "0.1 ms"),
        ("wrappers", "0 ms"),
        ("Python", "0.094 ms"),
    ]
    assert row["wall"] == "0.988 ms" and row["timed"] == "1 ms"
    assert row["profiled"].startswith("light pass, median of 3 steps per part; profiled 1 ms")
    assert (
        "0.012 ms of profiler cost removed (1 µs per recorded event, 4 µs per step"
        in (row["profiled"])
    )
    assert row["busy"].startswith("other processes used 50%")
    series = chart_series(run)
    assert series is not None and series[1]["inferred ops (no profiler record)"] == [0.594]
