"""The all-modes timeline: one profiled step of every mode, one named process per mode, aligned
at the step start, on Kineto-shaped traces written here and on a real generated run."""

from __future__ import annotations

import json
import re
from functools import partial

import orjson
import pytest

from profreport.cli import analyze
from profreport.files import TIMELINE_NAME
from profreport.record import Run, load
from profreport.render.timeline import FLOW_ID_STRIDE, build, step_window
from profreport.render.viewmodel import build_view
from tests.counter_trace import x_event
from tests.test_trace_interop import MODES, _check_event, _trace

x = partial(x_event, pid=10)


def kineto_like(t0: float, step_durs: list[float], tag: str) -> dict:
    """Steps back to back from t0, each: one op launching one kernel (runs after the step ends)
    with its ac2g flow; plus a profiler span and thread names, which belong to no step."""
    events = [
        {"ph": "M", "name": "thread_name", "pid": 10, "tid": 1, "ts": 0, "args": {"name": "main"}},
        x("PyTorch Profiler (0)", t0 - 50, 10_000, cat="Trace"),
    ]
    t = t0
    for i, dur in enumerate(step_durs):
        corr = 100 + i
        events += [
            x(f"ProfilerStep#{i + 2}", t, dur, cat="user_annotation"),
            x(f"aten::{tag}{i}", t + 1, dur - 2),
            x("cudaLaunchKernel", t + 2, 1, cat="cuda_runtime", correlation=corr),
            {
                "ph": "s",
                "cat": "ac2g",
                "name": "ac2g",
                "id": corr,
                "pid": 10,
                "tid": 1,
                "ts": t + 2,
            },
            x(f"kernel_{tag}{i}", t + dur + 5, 3, cat="kernel", pid=0, tid=7, correlation=corr),
            {
                "ph": "f",
                "cat": "ac2g",
                "name": "ac2g",
                "id": corr,
                "pid": 0,
                "tid": 7,
                "ts": t + dur + 5,
                "bp": "e",
            },
        ]
        t += dur
    return {"schemaVersion": 1, "traceEvents": events}


TRACES = {
    "eager": kineto_like(1_000_000.0, [30, 50, 40], "e"),  # median step: #4 (40 us), index 2
    "compile": kineto_like(5_000_000.0, [20, 10, 90], "c"),  # median: #2 (20 us), index 0
    "export": kineto_like(9_000_000.5, [60], "x"),  # the only step
}


def test_median_step_is_chosen():
    assert step_window(TRACES["eager"]["traceEvents"]) == (
        "ProfilerStep#4",
        1_000_080.0,
        1_000_120.0,
    )
    assert step_window([x("aten::mm", 0, 1)]) is None


def test_one_named_process_per_mode_in_order():
    doc = orjson.loads(orjson.dumps(build(TRACES)))  # valid JSON, round trip
    assert [_check_event(e) for e in doc["traceEvents"]] == [None] * len(doc["traceEvents"])
    names = {
        e["pid"]: e["args"]["name"]
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    assert names == {1: "eager", 2: "compile", 3: "export"}
    order = {
        e["pid"]: e["args"]["sort_index"]
        for e in doc["traceEvents"]
        if e["name"] == "process_sort_index"
    }
    assert order == {1: 0, 2: 1, 3: 2}
    assert doc["otherData"]["steps"] == {
        "eager": "ProfilerStep#4",
        "compile": "ProfilerStep#2",
        "export": "ProfilerStep#2",
    }


def test_every_event_of_the_step_and_no_other_aligned_at_zero():
    doc = build(TRACES)
    events = [e for e in doc["traceEvents"] if e["ph"] != "M"]
    by_pid = {
        pid: {(e["ph"], e["name"], e["ts"]) for e in events if e["pid"] == pid} for pid in (1, 2, 3)
    }
    # eager, step #4 = index 2, 40 us: the kernel runs 5 us after the step ends, still included
    assert by_pid[1] == {
        ("X", "ProfilerStep#4", 0.0),
        ("X", "aten::e2", 1.0),
        ("X", "cudaLaunchKernel", 2.0),
        ("s", "ac2g", 2.0),
        ("X", "kernel_e2", 45.0),
        ("f", "ac2g", 45.0),
    }
    assert {n for _, n, _ in by_pid[2]} == {
        "ProfilerStep#2",
        "aten::c0",
        "cudaLaunchKernel",
        "ac2g",
        "kernel_c0",
    }
    assert ("X", "kernel_x0", 65.0) in by_pid[3]
    assert len(events) == 18  # 6 per mode; the profiler span and the other steps left out
    flows = {(e["pid"], e["id"]) for e in events if e["ph"] in "sf"}
    assert flows == {(1, 102), (2, FLOW_ID_STRIDE + 100), (3, 2 * FLOW_ID_STRIDE + 100)}
    threads = {
        (e["pid"], e["tid"], e["args"]["name"])
        for e in doc["traceEvents"]
        if e["name"] == "thread_name"
    }
    assert threads == {(p, 1, "main") for p in (1, 2, 3)} | {
        (p, 2, "GPU 0 stream 7") for p in (1, 2, 3)
    }


# --- a real run ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_generate_writes_a_linked_timeline_of_every_mode(gated_run):
    path = gated_run / TIMELINE_NAME
    doc = json.loads(path.read_text())
    assert load(gated_run)["timeline"] == TIMELINE_NAME
    assert [e for e in doc["traceEvents"] if _check_event(e)] == []
    names = [e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"]
    assert names == MODES
    for pid, mode in enumerate(MODES, 1):
        own = json.loads(_trace(gated_run, mode).read_text())["traceEvents"]
        name, start, end = step_window(own)
        assert doc["otherData"]["steps"][mode] == name
        expected = sorted(
            (e["name"], round(e["ts"] - start, 3))
            for e in own
            if e["ph"] not in ("M", "s", "f", "t") and start <= e["ts"] < end
        )  # a CPU run: the step is its host events
        got = sorted(
            (e["name"], round(e["ts"], 3))
            for e in doc["traceEvents"]
            if e["pid"] == pid and e["ph"] != "M"
        )
        assert got == expected
        assert min(t for _, t in got) == 0.0
    html = (gated_run / "report.html").read_text()
    assert f'<a href="{TIMELINE_NAME}">' in html
    hostile = load(gated_run)
    hostile["timeline"] = "javascript:alert(1)"  # a record's string never becomes a link
    assert build_view(Run.from_json(hostile))["timeline"] is None
    # no *.pt.trace.json at the run root or the logdir's top: not one more TensorBoard run
    pattern = re.compile(r"^(.*?)(\.\d+)?\.pt\.trace\.json(?:\.gz)?$")
    assert not pattern.match(TIMELINE_NAME)
    assert not any(pattern.match(p.name) for p in (gated_run / "tensorboard").iterdir())
    assert TIMELINE_NAME not in {p.name for p in analyze.find_traces([str(gated_run)])}
