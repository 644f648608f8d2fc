"""Renderers: the view-model's values, then a smoke render of HTML and Markdown."""

import copy
import json
import re

import pytest

from profreport.analysis.derive import derived_run
from profreport.analysis.verdict import verdict_for
from profreport.modes import mode_analyses, mode_for
from profreport.record import RecordError, Run, dumps, load, validate
from profreport.render import html, markdown
from profreport.render.viewmodel import build_view
from tests.visible_md import outside_details


@pytest.fixture
def record(recorded_gated_run):
    return load(recorded_gated_run / "run.json")


def test_view_model_formats_numbers_with_units(record):
    view = build_view(Run.from_json(record))
    rows = {r["mode"]: r for r in view["summary"]}
    assert list(rows) == ["eager", "script", "trace", "optimize", "compile"]
    # 1 x 256 x 1024 float32 = 1 MiB per tensor; eager reads 10, compile writes 1 of them
    assert rows["eager"]["read"] == "10.00 MiB"
    assert rows["compile"]["written"] == "1.00 MiB"
    assert rows["compile"]["kernel_delta"] == -6
    assert rows["eager"]["speedup"] == "baseline"
    # the noise guard may call this run's latency inconclusive on a busy machine: say so, then
    # the same number format
    sp = record["modes"]["compile"]["speedup_vs_eager"]
    prefix = "inconclusive " if sp.get("inconclusive") else ""
    assert re.fullmatch(
        re.escape(prefix) + r"\d+\.\d\dx \(\d+\.\d\d-\d+\.\d\d\)", rows["compile"]["speedup"]
    )
    assert rows["compile"]["bytes_source"] == "modeled"
    assert view["definition_name"] == "cpu"
    assert "aten::empty" in view["bookkeeping_ops"]


def test_html_is_self_contained_and_escaped(record):
    rec = copy.deepcopy(record)
    rec["model"]["description"] = "<script>alert(1)</script>"
    page = html.render(derived_run(rec, mode_analyses()))  # a run with its findings
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;" in page
    assert page.count("<svg") == 5  # kernels, bytes, latency, roofline, time breakdown charts
    # nothing fetched from the network: no external scripts, styles, fonts or images
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    assert "@import" not in page and "url(http" not in page
    for name in ("eager", "script", "trace", "optimize", "compile"):
        assert f'id="mode-{name}"' in page
    assert "Method: how each number was obtained" in page


def test_failed_mode_is_shown_with_its_error(record):
    rec = copy.deepcopy(record)
    rec["modes"]["script"] = {
        "status": "failed",
        "error": "RuntimeError: cannot script this",
        "compile_s": None,
    }
    rec["modes"]["script"]["verdict"] = verdict_for(
        "script", Run.from_json(rec), mode_for("script")
    )
    page = html.render(Run.from_json(rec))
    assert "RuntimeError: cannot script this" in page
    md = markdown.render(Run.from_json(rec))
    assert "| script | failed | RuntimeError: cannot script this |" in md


def test_markdown_has_one_row_per_mode_and_the_verdicts(record):
    md = markdown.render(Run.from_json(record))
    visible = outside_details(md)
    table = [line for line in visible.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 5  # header + modes
    assert table[0].count(" | ") + 1 <= 6  # at most six columns in a pull-request comment
    verdicts = [line for line in visible.splitlines() if line.startswith("- ") and ": " in line]
    names = [v.split(":")[0].removeprefix("- ") for v in verdicts[:5]]
    assert names == ["eager", "script", "trace", "optimize", "compile"]
    # then why not fused: the gated chain under script/trace has one no-fusion entry each
    assert sum(line.startswith("- script, ") for line in md.splitlines()) == 1
    assert "modeled" in md and "measured" in md


def test_record_validation_and_json_safety(record):
    with pytest.raises(RecordError, match="not a profreport run record"):
        validate({"schema": "x"})
    bad = copy.deepcopy(record)
    del bad["modes"]["eager"]["kernels"]
    with pytest.raises(RecordError, match="eager"):
        validate(bad)
    rec = copy.deepcopy(record)
    rec["modes"]["eager"]["latency_ms"]["median"] = float("nan")
    assert json.loads(dumps(rec))["modes"]["eager"]["latency_ms"]["median"] is None


def test_load_reports_invalid_json_in_one_line(tmp_path):
    p = tmp_path / "run.json"
    p.write_text("{not json")
    with pytest.raises(RecordError, match="not valid JSON") as info:
        load(p)
    assert "\n" not in str(info.value)
