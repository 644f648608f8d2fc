"""The method text has one source (profreport/render/methods.md): the report's paragraphs and
docs/metrics.md (up to its own *In depth* section) both come from it, so they cannot drift."""

from pathlib import Path

from profreport.record import load_run
from profreport.render import analyze
from profreport.render.methods import docs_page, method_templates
from profreport.render.viewmodel import build_view

METRICS = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"


def test_docs_metrics_page_is_generated_from_the_source():
    committed = METRICS.read_text(encoding="utf-8")
    assert committed == docs_page(committed), "docs/metrics.md is stale: run scripts/method-docs"


def test_report_paragraphs_are_the_source_blocks_filled_from_the_run(recorded_gated_run):
    method = build_view(load_run(recorded_gated_run / "run.json"))["method"]
    templates = method_templates()
    assert set(templates) == {
        "kernels",
        "bytes",
        "latency",
        "output",
        "roofline",
        "compile_s",
        "time",
        "trace_time",
    }
    # `analyze`'s method paragraph is its block, word for word
    assert templates["trace_time"] == analyze.TIME_METHOD
    assert "Holistic Trace" in analyze.TIME_METHOD
    # a block without fields is shown word for word, in the report and in the docs
    assert method["bytes"] == templates["bytes"]
    docs = docs_page(METRICS.read_text(encoding="utf-8"))
    assert templates["bytes"] in docs
    # fields come from the run: the recorded run profiled 3 active steps
    assert "{active}" in templates["kernels"] and "{" not in method["kernels"]
    assert "1 wait, 1 warm-up and 3 active steps" in method["kernels"]
    assert "1 wait, 1 warm-up and 3 active steps" in docs.split("## In depth")[0]
