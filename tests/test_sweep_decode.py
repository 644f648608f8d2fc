"""A decode sweep over context: each point's per-token figures copied from its run's derived
finding (run.decode_tokens) into the sweep's rows, and the summary's line per mode saying at
which context decode crosses from overhead-bound to bandwidth-bound, by the decode report's own
classification (analysis.decode_tokens.overhead_bound). On the recorded points of a real
`sweep --workload decode --context 128,512,2048` (tests/data/runs/llama-decode-sweep-cpu), and on
copies of them whose classification is set by hand to reach every case."""

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from profreport.analysis.decode_tokens import _words, overhead_bound
from profreport.record import load_run
from profreport.record.model import Run
from profreport.sweep import render, summary
from profreport.sweep.grid import Point, SweepSpec
from profreport.sweep.model import Sweep, mode_rows
from tests.conftest import RECORDED_GATED_RUN

RECORDED = Path(__file__).parent / "data" / "runs" / "llama-decode-sweep-cpu"
CONTEXTS = (128, 512, 2048)


def _recorded(context: int) -> Run:
    with gzip.open(RECORDED / f"context-{context}.run.json.gz", "rt") as f:
        return Run.from_json(json.load(f))


def _point(context: int) -> Point:
    return dataclasses.replace(
        Point.at("hf:llama", None, context, "float32"), status="ok", run=f"points/{context}"
    )


def _sweep(runs: dict[int, Run]) -> Sweep:
    points = [_point(c) for c in runs]
    rows = [row for c, run in runs.items() for row in mode_rows(_point(c), ("eager",), run)]
    grid = SweepSpec(models=("hf:llama",), seq_lens=tuple(runs), modes=("eager", "compile"))
    return Sweep(grid=grid, points=tuple(points), rows=tuple(rows))


def _classified(run: Run, overhead: dict[str, bool]) -> Run:
    """`run` with each named mode's bound set (host-bound or device-bound) by hand."""
    tokens = run.decode_tokens
    assert tokens is not None
    rows = tuple(
        dataclasses.replace(r, bound="host-bound" if overhead[r.mode] else "device-bound")
        if r.mode in overhead
        else r
        for r in tokens.rows
    )
    return dataclasses.replace(run, decode_tokens=dataclasses.replace(tokens, rows=rows))


def test_rows_copy_each_modes_per_token_figures_from_the_runs_finding():
    run = _recorded(512)
    tokens = run.decode_tokens
    assert tokens is not None and tokens.batch == 1
    rows = {r.mode: r for r in mode_rows(_point(512), ("eager",), run)}
    assert list(rows) == ["eager", "compile"]
    for cost in tokens.rows:
        row = rows[cost.mode]
        assert row.ms_per_token == cost.latency_ms and row.ms_per_token > 0
        assert row.achieved == cost.achieved and 0 < row.achieved < 1
        assert row.host_share == cost.host_share
        assert row.overhead_bound is overhead_bound(cost)
    # a prefill run's rows hold none of them, and its sweep.json rows none of the keys
    prefill = mode_rows(_point(512), ("eager",), load_run(RECORDED_GATED_RUN))
    assert all(r.ms_per_token is None and r.overhead_bound is None for r in prefill)
    assert "overhead_bound" not in prefill[0].to_json()


@pytest.mark.parametrize(
    ("host_share", "bound", "overhead"),
    [
        (0.9, "device-bound", False),  # the time breakdown's bound decides where derived
        (0.1, "host-bound", True),
        (0.1, "launch-bound", True),
        (0.6, None, True),  # else the share alone, from OVERHEAD_BOUND
        (0.4, None, False),
        (None, None, None),  # no profiled step: not classified
    ],
)
def test_one_classification_for_the_report_and_the_sweep(host_share, bound, overhead):
    cost = _recorded(128).decode_tokens.rows[0]
    cost = dataclasses.replace(cost, host_share=host_share, bound=bound, achieved=0.25)
    assert overhead_bound(cost) is overhead
    words = _words((cost,))
    if overhead is None:
        assert words == ()
    else:
        assert ("decode is overhead-bound" in words[0]) is overhead


@pytest.mark.parametrize(
    ("overhead", "at"),
    [
        ((True, False, False), 512),
        ((True, True, False), 2048),
        ((True, True, True), None),
        ((False, False, False), None),
        ((True, False, True), None),  # back and forth: no single crossing
        ((False, True, True), None),  # the other way
    ],
)
def test_crossing_at(overhead, at):
    assert summary.crossing_at(CONTEXTS, overhead) == at


def test_a_recorded_decode_sweep_renders_its_per_token_table_and_crossing_lines():
    sweep = _sweep({c: _recorded(c) for c in CONTEXTS})
    s = summary.summarize(sweep)
    assert s.decode is not None and [c.mode for c in s.decode] == ["eager", "compile"]
    for crossing in s.decode:
        assert crossing.contexts == CONTEXTS
        expected = [
            r.overhead_bound for r in sweep.rows if r.mode == crossing.mode
        ]  # points in context order
        assert list(crossing.overhead_bound) == expected
        assert crossing.crosses_at == summary.crossing_at(CONTEXTS, crossing.overhead_bound)
    md = render.render_markdown(sweep)
    assert "#### Decode, per token: overhead-bound to bandwidth-bound over context" in md
    for line in render.crossing_lines(s):
        assert f"- {line}" in md
    eager_2048 = next(r for r in sweep.rows if r.mode == "eager" and r.seq_len == 2048)
    row = (
        f"| {eager_2048.point} | 2048 | eager | {render.fmt_ms(eager_2048.ms_per_token)} | "
        f"{eager_2048.achieved:.0%} | {eager_2048.host_share:.0%} |"
    )
    assert row in md
    html = render.render_html(sweep)
    assert 'id="crossings"' in html and 'id="decode"' in html
    assert render.crossing_lines(s)[0] in html
    assert any(line.startswith("  decode: eager: ") for line in render.summary_lines(s))


def test_the_crossing_line_per_mode_on_classifications_set_by_hand():
    states = {  # context: (eager overhead-bound, compile overhead-bound)
        128: (True, True),
        512: (False, True),
        2048: (False, True),
    }
    runs = {
        c: _classified(_recorded(c), {"eager": e, "compile": k}) for c, (e, k) in states.items()
    }
    lines = render.crossing_lines(summary.summarize(_sweep(runs)))
    assert lines == [
        "eager: crosses from overhead-bound to bandwidth-bound at context 512 "
        "(contexts 128, 512, 2048)",
        "compile: overhead-bound at every context swept (contexts 128, 512, 2048): no crossing",
    ]
    runs[512] = _classified(runs[512], {"eager": True, "compile": False})
    lines = render.crossing_lines(summary.summarize(_sweep(runs)))
    assert (
        lines[0]
        == "eager: crosses from overhead-bound to bandwidth-bound at context 2048 (contexts 128, 512, 2048)"
    )
    assert lines[1] == (
        "compile: no single crossing within the contexts swept: overhead-bound at 128, 2048, "
        "bandwidth-bound at 512"
    )


def test_a_prefill_sweep_renders_as_before():
    point = dataclasses.replace(Point.at("m", 1, None, "float32"), status="ok", run="p")
    sweep = Sweep(
        grid=SweepSpec(models=("m",)),
        points=(point,),
        rows=tuple(mode_rows(point, ("eager",), load_run(RECORDED_GATED_RUN))),
    )
    s = summary.summarize(sweep)
    assert s.decode is None and "decode" not in s.to_json()
    assert "Decode, per token" not in render.render_markdown(sweep)
    assert 'id="decode"' not in render.render_html(sweep)
