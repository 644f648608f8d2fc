"""Findings are derived from evidence: `analysis.derive` recomputes fusion maps, per-kernel bytes
and verdicts from what a record observed, so an old run.json renders with today's analysis.

`data/run1_simple_cpu_before.json.gz` is a profreport.run/1 record of `generate --model simple
--device cpu` (all five modes) written by the release before the record's findings were derived."""

import copy
import dataclasses
import gzip
import io
import json
import re
from pathlib import Path

import pytest

from profreport import cli
from profreport.analysis.derive import derived_run
from profreport.api import RunResult
from profreport.modes import mode_analyses
from profreport.record import Run, validate
from profreport.render import html, markdown
from profreport.render.headline import headline
from profreport.render.html import build_charts
from profreport.render.time_view import time_rows

BEFORE = Path(__file__).parent / "data" / "run1_simple_cpu_before.json.gz"


@pytest.fixture(scope="module")
def before():
    return validate(json.loads(gzip.decompress(BEFORE.read_bytes())), str(BEFORE))


def test_the_before_record_is_run1_with_all_five_modes(before):
    assert before["schema"] == "profreport.run/1"
    assert list(before["modes"]) == ["eager", "script", "trace", "optimize", "compile"]
    assert {m["status"] for m in before["modes"].values()} == {"ok"}


def _one_process(verdict: str) -> str:
    """A stored verdict as today's words it: a called latency change names its one process."""
    return re.sub(r"(than eager \(95% CI [^)]*)\)", r"\1, one process)", verdict)


def test_deriving_an_unchanged_analysis_gives_back_the_stored_findings(before):
    derived = derived_run(before, mode_analyses()).to_json()
    # a finding newer than the record (why not fused) is added; everything stored is unchanged
    added = {n: m.pop("why_not_fused", None) for n, m in derived["modes"].items()}
    assert {n for n, w in added.items() if w is not None} == {
        "script",
        "trace",
        "optimize",
        "compile",
    }
    # Where each kernel ran is newer than the record too: compile's fused kernel row takes the
    # modules its fusion groups recorded (no source lines: the record has none)
    placed = {
        (n, r["name"]): (r.pop("modules"), r.pop("source_lines", None))
        for n, m in derived["modes"].items()
        for r in m["kernels"]["table"]
        if "modules" in r
    }
    assert [n for n, _ in placed] == ["compile"]
    assert all(modules and lines is None for modules, lines in placed.values())
    # Newer still (run/2): the module tree and the modules fusion saved most in (only compile's
    # fusion map recorded modules then) and each timed mode's speedup called
    assert (derived["schema"], before["schema"]) == ("profreport.run/2", "profreport.run/1")
    assert list(derived.pop("module_tree")["root"]["modes"]) == ["compile"]
    assert {s["mode"] for s in derived.pop("module_savings")} == {"compile"}
    calls = {n: m.pop("speedup_call") for n, m in derived["modes"].items() if "speedup_call" in m}
    assert calls.keys() == {"script", "trace", "optimize", "compile"}
    # and each mode's traffic change against eager (modeled: the record measured nothing)
    traffic = {n: m.pop("traffic") for n, m in derived["modes"].items() if "traffic" in m}
    assert traffic.keys() == {"script", "trace", "optimize", "compile"}
    assert {t["source"] for t in traffic.values()} == {"modeled"}
    derived["schema"] = before["schema"]
    # One finding improved since the record was written: an in-place variant (relu -> relu_) is
    # no longer called a replacement; everything else is what capture derived then.
    expected = copy.deepcopy(before)
    optimize = expected["modes"]["optimize"]
    assert ", relu -> relu_;" in optimize["verdict"]
    optimize["verdict"] = optimize["verdict"].replace(", relu -> relu_;", ";")
    # and a called latency change says the one process its interval covers (issue 48)
    for entry in expected["modes"].values():
        entry["verdict"] = _one_process(entry["verdict"])
    assert derived == expected  # same fusion maps, kernel bytes and verdicts
    findings = RunResult.of_record(before, BEFORE.parent).run  # the library's view
    assert findings.modes["compile"].verdict == expected["modes"]["compile"]["verdict"]
    fusion = findings.modes["compile"].fusion
    assert fusion is not None and fusion.to_json() == before["modes"]["compile"]["fusion"]
    rows = before["modes"]["compile"]["kernels"]["table"]
    assert [k.bytes_read for k in findings.ok_modes["compile"].kernels.table] == [
        r["bytes_read"] for r in rows
    ]
    assert findings.modes["eager"].fusion is None


def test_stored_findings_are_never_read_back_as_truth(before):
    stale = copy.deepcopy(before)
    for entry in stale["modes"].values():
        entry["verdict"] = "yesterday's verdict"
        entry.pop("fusion", None)
        for row in entry["kernels"]["table"]:
            row["bytes_read"] = -1
    derived = derived_run(stale, mode_analyses()).to_json()
    verdict = _one_process(before["modes"]["compile"]["verdict"])
    assert derived["modes"]["compile"]["verdict"] == verdict
    assert derived["modes"]["compile"]["fusion"] == before["modes"]["compile"]["fusion"]
    assert (
        derived["modes"]["eager"]["kernels"]["table"]
        == before["modes"]["eager"]["kernels"]["table"]
    )
    assert stale["modes"]["eager"]["verdict"] == "yesterday's verdict"  # the input is not changed


def test_render_of_the_before_record_shows_todays_analysis(before, tmp_path):
    stale = copy.deepcopy(before)
    stale["modes"]["compile"]["verdict"] = "compile: yesterday's verdict"
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "run.json").write_text(json.dumps(stale))
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["render", str(tmp_path / "old" / "run.json")], out, err)
    assert code == 0, err.getvalue()
    summary = (tmp_path / "old" / "summary.md").read_text()
    assert "yesterday's verdict" not in summary
    assert r"Inductor fused \[relu + max_pool2d_with_indices\]" in summary  # Markdown-escaped
    assert "yesterday's verdict" not in (tmp_path / "old" / "report.html").read_text()


def test_optimize_states_ops_paired_with_nothing_without_claiming_a_pattern():
    """A group of several eager ops and no optimized call (unmatched, or never in the graph) is
    said to be unmatched, with the map's note; an NNC group is named as TorchScript's fuser."""
    from profreport.analysis import fusion_optimize as fo
    from profreport.analysis.fusion import fusion_group, without_kernel
    from profreport.analysis.why_not_fused import optimize_why_not
    from profreport.record import load_run
    from profreport.record.model import TensorIO

    run = load_run(Path(__file__).parent / "data" / "runs" / "gated-residual-cpu" / "run.json")
    calls = [TensorIO(op=op, read=8, written=8) for op in ("aten::mul", "aten::add")]
    groups = (
        without_kernel(calls, fo.UNMATCHED),
        fusion_group(["sigmoid", "mul"], ["prim::TensorExprGroup"], 32, 16),
    )
    mode = run.modes["optimize"]
    mode = dataclasses.replace(mode, fusion=dataclasses.replace(mode.fusion, groups=groups))
    why = optimize_why_not(mode, run)
    assert [(e.kind, e.ops) for e in why] == [
        ("unmatched", ("mul", "add")),
        ("applied", ("sigmoid", "mul")),
    ]
    assert why[0].reason == f"mul + add: {fo.UNMATCHED}"
    assert "prim::TensorExprGroup kernel (TorchScript's fuser)" in why[1].reason


LIGHT = Path(__file__).parent / "data" / "runs" / "simple-cpu-light" / "run.json.gz"


@pytest.fixture(scope="module")
def light():
    """A run with ceilings, a light pass and modules recorded: every finding has a value."""
    return derived_run(json.loads(gzip.decompress(LIGHT.read_bytes())), mode_analyses())


def test_what_the_report_shows_is_in_the_derived_run_and_its_run_json(light):
    """Derive once (issue 47): the roofs, each mode's median step and speedup call, the module
    tree and the modules fusion saved most in are the derived run's (run.json's, the library's)."""
    ok = light.ok_modes
    assert light.schema == "profreport.run/2" and light.roofs is not None
    assert light.roofs.memory_bytes_per_s == light.ceilings.memory_bandwidth.value
    assert {n: m.speedup_call for n, m in ok.items()} == {
        "eager": None,
        "script": "within resolution",
        "trace": "within resolution",
        "optimize": "faster",
        "compile": "faster",
    }
    steps = {n: m.median_step for n, m in ok.items()}
    assert all(s is not None and s.corrected and s.parts for s in steps.values())
    assert list(steps["optimize"].parts)[:2] == ["op_us", "inferred_us"]  # unseen convolution
    tree = light.module_tree
    assert tree is not None and list(tree.root.modes) == list(ok)
    assert [s.mode for s in tree.shares] == list(ok) and list(tree.time_methods) == list(ok)
    assert [s.mode for s in light.module_savings or ()] == ["compile"]
    again = Run.from_json(json.loads(json.dumps(light.to_json())))  # run.json, read back
    assert (again.roofs, again.module_tree, again.module_savings) == (
        light.roofs,
        tree,
        light.module_savings,
    )
    assert {n: m.median_step for n, m in again.ok_modes.items()} == steps


def test_the_report_lays_out_the_runs_findings_and_derives_none(light):
    page = html.render(light)
    assert (
        'id="module-tree"' in page and "modules hold" in page and "roofline" in build_charts(light)
    )
    assert "Modules whose fused groups saved the most bytes" in markdown.render(light)
    # without the findings (as a run derived without them), the report has no such sections
    bare = light.without("module_tree", "module_savings", "roofs")
    assert 'id="module-tree"' not in html.render(bare) and "roofline" not in build_charts(bare)
    assert "Modules whose fused groups saved" not in markdown.render(bare)
    compile_ = light.modes["compile"]
    slower = dataclasses.replace(
        light,
        modes={
            **light.modes,
            "compile": compile_.adding(speedup_call="slower", median_step=None),
        },
    )
    rows = {r["mode"]: r for r in headline(slower)["rows"]}
    assert rows["compile"]["speedup"]["tone"] == "bad"  # the stored call, not the interval
    assert [r["mode"] for r in time_rows(slower)] == ["eager", "script", "trace", "optimize"]
