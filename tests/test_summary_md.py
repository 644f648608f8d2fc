"""summary.md as a pull-request comment: six columns and short verdicts visible, the rest folded
in <details>, at most 5,000 characters visible and under 60,000 in all; rendered by a GFM parser
(markdown-it-py with its table rule) as a table and folded blocks."""

import copy
import gzip
import json
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from profreport.analysis.derive import derived_run
from profreport.modes import mode_analyses
from profreport.record import Run, load, parse
from profreport.render import markdown
from profreport.render.markdown import TOTAL_CHARS, VISIBLE_CHARS
from tests.visible_md import outside_details

LLAMA_RUN = Path(__file__).parent / "data" / "runs" / "hf-llama-2layers-cpu"


@pytest.fixture
def record(recorded_gated_run):
    return load(recorded_gated_run / "run.json")


def gfm(text: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(text)


def test_visible_part_is_a_six_column_table_and_one_line_per_mode(record):
    md = markdown.render(Run.from_json(record))
    visible = outside_details(md)
    assert len(visible) <= VISIBLE_CHARS
    html = gfm(visible)
    head = html[html.index("<thead>") : html.index("</thead>")]
    assert head.count("<th ") == 6
    assert html.count("<tr>") == 1 + 5  # header + one row per mode
    assert ">7 → 1</td>" in html  # compile's kernels, eager -> mode
    assert html.count("<li>") == 5  # the verdicts


def test_folded_blocks_render_as_details_with_tables_inside(record):
    md = markdown.render(derived_run(record, mode_analyses()))  # with its findings
    html = gfm(md)
    summaries = [
        "All numbers per mode",
        "Where the time goes",
        "Noise guard",
        "Setup and ceilings",
        "Top 5 kernels per mode",
        "Method",
    ]
    for summary in summaries:
        assert f"<summary>{summary}" in html
    assert html.count("<details>") == html.count("</details>") == len(summaries) + 1  # + why
    # the tables inside the folded blocks are tables, not text with pipes
    assert html.count("<table>") == 1 + 1 + 5  # headline, all numbers, top kernels per mode
    assert "| mode |" not in html


def _huge(record) -> dict:
    """Ten modes, each with 400 kernels and 200 why-not-fused entries of long names, long
    verdicts and errors: far past what a comment may hold."""
    rec = copy.deepcopy(record)
    template = rec["modes"]["compile"]
    kernel = template["kernels"]["table"][0]
    why = {"kind": "split", "source": "fusion map", "evidence": "x" * 500}
    rec["modes"] = {"eager": rec["modes"]["eager"]}
    for i in range(10):
        mode = copy.deepcopy(template)
        mode["kernels"]["table"] = [
            {**kernel, "name": f"cpp_fused_{'mul_add_' * 60}{i}_{k}"} for k in range(400)
        ]
        mode["why_not_fused"] = [
            {**why, "ops": [f"op{j}_{k}" for j in range(40)], "reason": f"reason {k} " * 40}
            for k in range(200)
        ]
        mode["verdict"] = "compile: " + "this mode fused many things; " * 100
        rec["modes"][f"compile-{i}"] = mode
    rec["modes"]["broken"] = {"status": "failed", "error": "E " * 3000, "compile_s": None}
    return rec


def test_a_huge_run_fits_a_comment_with_counts_for_what_was_cut(record):
    md = markdown.render(Run.from_json(_huge(record)))
    visible = outside_details(md)
    assert len(visible) <= VISIBLE_CHARS, len(visible)
    assert len(md) < TOTAL_CHARS, len(md)
    # the headline still has every mode
    html = gfm(visible)
    assert html.count("<tr>") == 1 + 12
    # long lists cut with a count, and the report named for the rest
    assert "… 1960 more in report.html" in md  # 2,000 distinct reasons, 40 listed
    assert "… 34 more" in md  # 40 ops folded after six
    assert "top 5 of 400" in md


def test_a_recorded_decoder_lm_summary_fits_with_its_headline_visible():
    """The 2-layer Llama of the acceptance case (tests/data/runs/hf-llama-2layers-cpu)."""
    document = json.loads(gzip.decompress((LLAMA_RUN / "run.json.gz").read_bytes()))
    run = derived_run(parse(document, str(LLAMA_RUN)), mode_analyses())
    md = markdown.render(run)
    visible = outside_details(md)
    assert len(visible) <= VISIBLE_CHARS and len(md) < TOTAL_CHARS
    rows = [line for line in visible.splitlines() if line.startswith("| ")]
    eager = run.modes["eager"].kernels.per_step
    for name, row in zip(["eager", "trace", "compile"], rows[1:], strict=True):
        kernels = run.modes[name].kernels.per_step
        expected = str(eager) if name == "eager" else f"{eager} → {kernels}"
        assert row.startswith(f"| {name} | ok | {expected} |"), row
    # compile's 58 why-not-fused entries are 34 rows (one per layer-alike entry), + trace's one
    assert "Why it did not fuse (35 distinct reasons)" in md


def test_a_verdict_is_shown_whole_or_folded_whole_never_cut():
    from profreport.render.markdown import VERDICTS_CHARS, _verdict_lines

    short = "compile: 7 eager kernels ran as 1 kernel; saved 0.5 ms: 80% kernel time"
    long_one = "trace: " + "; ".join(f"clause {i} says something whole" for i in range(60))
    lines = _verdict_lines([short, long_one, short.replace("compile", "export")])
    assert lines[0] == f"- {short}"  # whole
    assert lines[1] == "- trace: verdict folded below"
    assert lines[2] == "- export: 7 eager kernels ran as 1 kernel; saved 0.5 ms: 80% kernel time"
    body = "\n".join(lines)
    assert f"- {long_one}" in body and "…" not in body  # folded whole, nothing cut
    assert outside_details(body).count("clause 59") == 0
    # a budget spent: the rest fold, whole, in order
    many = [f"m{i}: " + "x " * 300 for i in range(10)]
    folded_lines = _verdict_lines(many)
    shown = [line for line in folded_lines[:10] if "folded below" not in line]
    assert sum(len(line) for line in shown) <= VERDICTS_CHARS + 2 * len(shown)
    assert all(
        f"- {v.strip()}" in "\n".join(folded_lines) or f"- {v}" in "\n".join(folded_lines)
        for v in many
    )
