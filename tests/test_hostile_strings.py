"""Hostile strings: names from model files, modules, profiler ranges and traces reach every output
as text, never as markup.

HTML pages are checked structurally with `html.parser` (no script element, no `on*` attribute, no
element the page does not make itself) and by reading the hostile text back as text. Markdown is
rendered with the two parsers that read ours (CommonMark with tables, as GitHub does, and
Python-Markdown, as TensorBoard's text plugin does) and read back the same way.
"""

from __future__ import annotations

import copy
import csv
import gzip
import io
import json
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import markdown as python_markdown
import pytest
from markdown_it import MarkdownIt

from profreport.analysis.compare import Thresholds, compare_runs
from profreport.cli import main
from profreport.files import TIMELINE_NAME
from profreport.format import MdMarkup, md_cell, md_code, md_line, md_table
from profreport.record import Run, load
from profreport.render import charts, html, markdown, tables
from profreport.render import compare as compare_render
from tests.conftest import RECORDED_HOSTILE_RUN, generate_run, resaved

IMG = "<img src=x onerror=alert(1)>"
RANGE = IMG + "|`x`"  # the model's torch.profiler.record_function range
DOC = "<img src=x onerror=alert(2)> | `tick` *em* [link](http://evil.example) $x$"
ERROR = "</td><script>alert(3)</script>|`y`"  # raised when TorchScript scripts the model
CLASS = "<svg onload=alert(4)>"  # a submodule's class name, made with type()
FILE_STEM = IMG + "|<script>"
DATA = Path(__file__).parent / "data"

MODEL_SOURCE = f"""
import torch

Inner = type({CLASS!r}, (torch.nn.Linear,), {{}})


class Hostile(torch.nn.Module):
    __doc__ = {DOC!r}

    def __init__(self):
        super().__init__()
        self.lin = Inner(8, 8)

    def forward(self, x):
        with torch.profiler.record_function({RANGE!r}):
            return torch.relu(self.lin(x))

    def __prepare_scriptable__(self):
        raise RuntimeError({ERROR!r})


def build():
    return Hostile(), (torch.randn(2, 8),)
"""


class Page(HTMLParser):
    """Every element (tag, attributes) and all text of an HTML document, as a browser sees them."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.chunks: list[str] = []
        self.cells: list[list[str]] = []  # text of each <td>/<th>, row by row
        self.svg_text: list[str] = []  # text of each SVG <text> element
        self._open: str | None = None  # "cell" or "text" while inside one
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag == "tr":
            self.cells.append([])
        elif tag in ("td", "th"):
            self.cells[-1].append("")
            self._open = "cell"
        elif tag == "text":
            self.svg_text.append("")
            self._open = "text"

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if tag in ("td", "th", "text"):
            self._open = None

    def handle_data(self, data):
        self.chunks.append(data)
        if self._open == "cell":
            self.cells[-1][-1] += data
        elif self._open == "text":
            self.svg_text[-1] += data

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    def tags(self) -> set[str]:
        return {tag for tag, _ in self.elements}

    def handler_attributes(self) -> list[str]:
        return [name for _, attrs in self.elements for name in attrs if name.startswith("on")]


def assert_inert(page: Page, allowed_tags: set[str]) -> None:
    assert "script" not in page.tags()
    assert page.handler_attributes() == []
    assert page.tags() <= allowed_tags, page.tags() - allowed_tags
    # the only links: the all-modes timeline beside the report, by our own constant name, and
    # the report's own in-page anchors (verdict -> why not fused)
    hrefs = [attrs.get("href") or "" for tag, attrs in page.elements if tag == "a"]
    assert all(h == TIMELINE_NAME or h.startswith(("#why-", "#mode-")) for h in hrefs), hrefs


def gfm(text: str) -> Page:
    return Page(MarkdownIt("commonmark").enable("table").render(text))


def tensorboard_markdown(text: str) -> Page:
    # What TensorBoard's text plugin runs before its sanitizer.
    return Page(python_markdown.markdown(text, extensions=["markdown.extensions.tables"]))


MARKDOWN_TAGS = {"h1", "h2", "h3", "p", "ul", "li", "table", "thead", "tbody", "tr", "th", "td"}
MARKDOWN_TAGS |= {"code", "strong", "sub"}
# ours, folding: the comparison's kernel diff (h4, rows folded) and summary.md's detail blocks
MARKDOWN_TAGS |= {"h4", "details", "summary"}
REPORT_TAGS = {
    *("html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "br", "b", "ul"),
    *("li", "table", "tr", "th", "td", "span", "div", "figure", "code", "details", "summary"),
    *("pre", "svg", "defs", "g", "path", "clippath", "rect", "text", "use", "style", "a"),
}


# ---------------------------------------------------------------- one generate run


@pytest.fixture(
    scope="module", params=["recorded", pytest.param("generated", marks=pytest.mark.slow)]
)
def hostile_run(request, tmp_path_factory) -> Path:
    """The hostile model's run folder: the checked-in one with every output written again by
    today's renderers (fast tier), or a real generate of the model (slow tier)."""
    folder = tmp_path_factory.mktemp("hostile")
    if request.param == "recorded":
        return resaved(RECORDED_HOSTILE_RUN, folder)
    model = folder / f"{FILE_STEM}.py"
    model.write_text(MODEL_SOURCE)
    return generate_run(
        folder / "out", "--model", f"{model}:build", "--modes", "eager,trace,script"
    )


@pytest.mark.slow
def test_the_hostile_strings_reach_the_record_and_the_traces(hostile_run):
    record = load(hostile_run)
    assert record["model"]["name"] == f"{FILE_STEM}:build"
    assert record["model"]["description"] == DOC
    assert record["modes"]["script"]["error"] == f"RuntimeError: {ERROR}"
    # The range is a user annotation in every profiled mode's trace, never a kernel ...
    for mode in ("eager", "trace"):
        (trace,) = (hostile_run / "tensorboard" / mode).glob("*.pt.trace.json")
        events = json.loads(trace.read_text())["traceEvents"]
        assert {e["cat"] for e in events if e.get("name") == RANGE} == {"user_annotation"}
        assert all(RANGE not in row["name"] for row in record["modes"][mode]["kernels"]["table"])
    # ... and in the record only inside the traced TorchScript graph, with the class name.
    graph = record["modes"]["trace"]["compiler"]["graph"]
    assert RANGE in graph and CLASS in graph


def test_report_html_shows_every_hostile_string_as_text(hostile_run):
    raw = (hostile_run / "report.html").read_text()
    page = Page(raw)
    assert_inert(page, REPORT_TAGS)
    assert "<script" not in raw.lower() and "<img" not in raw and "<svg onload" not in raw
    assert "&lt;img src=x onerror=alert(1)&gt;" in raw
    for text in (f"{FILE_STEM}:build", DOC, ERROR, RANGE, CLASS):
        assert text in page.text
    # The failed mode's error sits in its headline cell (and the full table's), whole.
    rows = [cells for cells in page.cells if cells[:2] == ["script", "failed"]]
    assert [row[2] for row in rows] == [f"RuntimeError: {ERROR}"] * 2


def test_summary_md_escapes_cells_and_lines(hostile_run):
    md = (hostile_run / "summary.md").read_text()
    # The model name is shown verbatim in a code span, which both parsers keep inert; anywhere
    # else nothing from input opens a tag.
    name = md_code(f"{FILE_STEM}:build")
    assert md.count(name) == 1
    assert "<img" not in md.replace(name, "") and "<script" not in md.replace(name, "")
    # the headline row holds the error; the folded table of all numbers leaves it to the headline
    line, numbers = [line for line in md.splitlines() if line.startswith("| script | failed |")]
    assert "RuntimeError" not in numbers
    assert "\\|\\`y\\`" in line and "&lt;/td&gt;&lt;script&gt;" in line
    # The range and the class name are not in the summary at all (only in the trace graph).
    assert md_cell(RANGE) not in md and "alert(4)" not in md
    for page in (gfm(md), tensorboard_markdown(md)):
        assert_inert(page, MARKDOWN_TAGS)
        row = next(cells for cells in page.cells if cells[:2] == ["script", "failed"])
        assert row[2] == f"RuntimeError: {ERROR}"
        assert f"{FILE_STEM}:build" in page.text and DOC in page.text


# TensorBoard's vendored bleach warns that html5lib's sanitizer is deprecated.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tensorboard_text_is_the_escaped_summary(hostile_run):
    from tensorboard import plugin_util
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(
        str(hostile_run / "tensorboard" / "summary"), size_guidance={"tensors": 0}
    )
    acc.Reload()
    (event,) = acc.Tensors("summary/text_summary")
    text = event.tensor_proto.string_val[0].decode()
    assert text == (hostile_run / "summary.md").read_text()
    page = Page(plugin_util.markdown_to_safe_html(text))
    assert page.handler_attributes() == [] and "img" not in page.tags()
    (row,) = [cells for cells in page.cells if cells[:2] == ["script", "failed"]]
    assert row[2] == f"RuntimeError: {ERROR}"


def test_kernel_csvs_hold_no_hostile_names_and_neutralise_formulas(hostile_run):
    for mode in ("eager", "trace"):
        rows = list(csv.DictReader(io.StringIO((hostile_run / f"kernels_{mode}.csv").read_text())))
        assert rows and list(rows[0])[:2] == ["name", "kind"]
        # the model's file name is the user's source line (inert text in a cell), nowhere else
        for row in rows:
            assert all("alert" not in v for k, v in row.items() if k != "source_lines")
            assert not row["source_lines"] or row["source_lines"].startswith(f"{FILE_STEM}.py:")
    record = load(hostile_run)
    table = record["modes"]["eager"]["kernels"]["table"]
    names = ['=HYPERLINK("http://evil","x")', "+1+1", "-2", "@SUM(A1)", "\tx", "aten::mm"]
    table[:] = [dict(table[i % len(table)], name=n) for i, n in enumerate(names)]
    rows = list(csv.DictReader(io.StringIO(tables.kernel_csv(Run.from_json(record), "eager"))))
    assert [r["name"] for r in rows] == ["'" + n for n in names[:-1]] + ["aten::mm"]
    assert float(rows[0]["calls"]) == table[0]["calls"]  # numbers stay numbers
    # the DataFrame is exact
    assert list(tables.kernel_frame(Run.from_json(record), "eager")["name"]) == names


def test_notebook_view_escapes(hostile_run):
    from profreport.api import RunResult

    page = Page(RunResult.of_record(load(hostile_run), hostile_run)._repr_html_())
    assert_inert(page, {"h4", "table", "thead", "tbody", "tr", "th", "td", "ul", "li"})
    assert f"{FILE_STEM}:build" in page.text and ERROR in page.text


def test_a_hostile_record_renders_as_text_charts_included(hostile_run):
    """`profreport render` takes any run.json: a mode name is input too, and the charts use it."""
    record = load(hostile_run)
    name = IMG + "|$\\x$"
    record["modes"] = {n: m for n, m in record["modes"].items() if n != "script"}
    record["modes"][name] = copy.deepcopy(record["modes"]["trace"])
    page = Page(html.render(Run.from_json(record)))
    assert_inert(page, REPORT_TAGS)
    # a tick label on each bar chart (the time breakdown's too) and an entry in the roofline
    # legend, as literal text
    assert page.svg_text.count(name) == 5
    gfm_page = gfm(markdown.render(Run.from_json(record)))
    assert [name, "ok"] in [cells[:2] for cells in gfm_page.cells]


def test_chart_check_refuses_markup():
    for svg in (
        "<svg><script>alert(1)</script></svg>",
        '<svg><g onload="alert(1)"/></svg>',
        '<svg xmlns:xlink="http://www.w3.org/1999/xlink"><use xlink:href="http://e/#a"/></svg>',
        '<svg><rect style="fill: url(http://e/p)"/></svg>',
        "<svg><foreignObject/></svg>",
    ):
        with pytest.raises(ValueError):
            charts.checked_svg(svg)
    local = '<svg><rect clip-path="url(#p1)"/></svg>'
    assert charts.checked_svg(local) == local


# ---------------------------------------------------------------- compare


def test_compare_md_and_html_with_hostile_names_and_labels(hostile_run, tmp_path):
    base = load(hostile_run)
    mode = IMG + "|m"
    base["modes"][mode] = copy.deepcopy(base["modes"]["eager"])
    head = copy.deepcopy(base)
    head["modes"][mode]["kernels"]["per_step"] += 2
    head["modes"][ERROR] = copy.deepcopy(base["modes"]["eager"])
    base_path, head_path = tmp_path / f"{IMG}.json", tmp_path / "head `|`.json"
    base_path.write_text(json.dumps(base))
    head_path.write_text(json.dumps(head))
    outputs = {}
    for fmt in ("md", "html", "json"):
        outputs[fmt] = tmp_path / f"compare.{fmt}"
        argv = ["compare", str(base_path), str(head_path), "--format", fmt]
        assert main([*argv, "--max-kernel-increase", "0", "--out", str(outputs[fmt])]) == 1

    md = outputs["md"].read_text()
    # The labels (file paths) stand verbatim in code spans, inert; nothing else opens a tag.
    outside_code = md.replace(md_code(base_path), "").replace(md_code(head_path), "")
    assert "<img" not in outside_code and "<script" not in outside_code
    for page in (gfm(md), tensorboard_markdown(md)):
        assert_inert(page, MARKDOWN_TAGS)
        assert [mode, "ok"] in [cells[:2] for cells in page.cells]
        (result,) = [cells[-1] for cells in page.cells if cells[0] == mode]
        assert result == "regression: kernels / step"
        for text in (f"{FILE_STEM}:build", str(base_path), str(head_path), ERROR):
            assert text in page.text
    assert "**regression: kernels / step**" in md  # our emphasis survives escaping

    page = Page(outputs["html"].read_text())
    assert_inert(
        page,
        {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "br"}
        | {"code", "table", "tr", "th", "td", "b", "span", "ul", "li"}
        | {"h3", "section", "details", "summary"},  # the kernel diff's partial
    )
    assert [mode, "ok"] in [cells[:2] for cells in page.cells]
    assert str(base_path) in page.text and ERROR in page.text
    assert json.loads(outputs["json"].read_text())["model"] == f"{FILE_STEM}:build"


def test_compare_markdown_regression_bold_is_ours_only(hostile_run):
    record = load(hostile_run)
    record["modes"]["**x**"] = copy.deepcopy(record["modes"]["eager"])
    cmp = compare_runs(
        Run.from_json(record), Run.from_json(copy.deepcopy(record)), Thresholds(), "*a*", "b"
    )
    page = gfm(compare_render.render_markdown(cmp))
    assert "em" not in page.tags() and "*a*" in page.text
    assert ["**x**", "ok"] in [cells[:2] for cells in page.cells]


# ---------------------------------------------------------------- analyze


KERNEL_NAMES = [IMG, "a|b", "`tick` *x* _y_ [l](http://e)", "</td><script>alert(1)</script>"]
OP_NAME = "aten::<b onmouseover=alert(2)>|op"
HEAD_OP_NAME = "aten::addmm`|`"
DEVICE = "<svg onload=alert(3)> #1"


def _hostile_trace(target: Path, op: str) -> Path:
    with gzip.open(DATA / "a100_alexnet_inference.json.gz") as f:
        trace = json.load(f)
    time: Counter[str] = Counter()
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel":
            time[e["name"]] += e["dur"]
    top = [name for name, _ in time.most_common(len(KERNEL_NAMES))]
    renames = dict(zip(top, KERNEL_NAMES, strict=True))
    for e in trace["traceEvents"]:
        if e.get("cat") == "kernel":
            e["name"] = renames.get(e["name"], e["name"])
        if e.get("cat") == "cpu_op" and e["name"] == "aten::addmm":
            e["name"] = op
    trace["deviceProperties"][0]["name"] = DEVICE
    with gzip.open(target, "wt") as f:
        json.dump(trace, f)
    return target


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("analyze")
    base = _hostile_trace(folder / f"{IMG}.json.gz", OP_NAME)
    head = _hostile_trace(folder / "head.json.gz", HEAD_OP_NAME)
    out = {}
    for fmt in ("md", "html"):
        assert main(["analyze", str(base), str(head), "--format", fmt, "--out", str(folder)]) == 0
        out[fmt] = (folder / f"analysis.{fmt}").read_text()
    out["base"] = str(base)
    return out


def test_analyze_markdown_escapes_trace_names(analyzed):
    md = analyzed["md"]
    assert "<img" not in md and "<script" not in md and "<svg" not in md and "<b " not in md
    assert "a\\|b" in md and "&lt;img src=x onerror=alert(1)&gt;" in md
    for page in (gfm(md), tensorboard_markdown(md)):
        assert_inert(page, MARKDOWN_TAGS)
        kernel_cells = [cells[1] for cells in page.cells if len(cells) == 6]
        assert set(KERNEL_NAMES) <= set(kernel_cells)
        op_cells = {cells[0] for cells in page.cells if len(cells) == 4}
        assert {OP_NAME, HEAD_OP_NAME} <= op_cells
        assert DEVICE in page.text and analyzed["base"] in page.text


def test_analyze_html_escapes_trace_names(analyzed):
    page = Page(analyzed["html"])
    allowed = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "section"}
    assert_inert(page, allowed | {"table", "tr", "th", "td", "h3", "b"})
    titles = {attrs.get("title") for tag, attrs in page.elements if tag == "td"}
    assert set(KERNEL_NAMES) <= titles  # attribute values escaped, read back whole
    for text in [*KERNEL_NAMES, OP_NAME, DEVICE, analyzed["base"]]:
        assert text in page.text


# ---------------------------------------------------------------- the Markdown helpers


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a|b", "a\\|b"),
        ("a\\|b", "a\\\\\\|b"),
        ("`x`", "\\`x\\`"),
        (IMG, "&lt;img src=x onerror=alert(1)&gt;"),
        ("&amp; ~ $", "&amp;amp; &#126; &#36;"),
        ("[l](u) *e*", "\\[l\\](u) \\*e\\*"),
        ("snake_case_name aten::__and__", "snake_case_name aten::\\_\\_and\\_\\_"),
        ("line\r\nbreak\u2028x\n", "line break x"),
        (3, "3"),
    ],
)
def test_md_cell(value, expected):
    assert md_cell(value) == expected


HOSTILE = [
    IMG,
    "a|b",
    "a\\|b",
    "`x` ``y``",
    "</td><script>alert(1)</script>",
    "*em* _em_ __strong__ ~~del~~ $x$",
    "[link](http://e) ![img](http://e/i.png) <http://e>",
    "&lt; &amp;",
    "aten::__and__",
    "void f<float>(at::TensorIteratorBase&, char*)",
    "ends with a backslash \\",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_md_cell_reads_back_as_the_same_text(value):
    table = "\n".join(md_table(["name", "n"], [[value, 1]], "lr"))
    for page in (gfm(table), tensorboard_markdown(table)):
        assert page.cells[1] == [value, "1"]
        assert page.tags() <= {"table", "thead", "tbody", "tr", "th", "td"}
    item = f"- {md_line(value)}"
    for page in (gfm(item), tensorboard_markdown(item)):
        assert page.text.strip() == value and page.tags() == {"ul", "li"}


@pytest.mark.parametrize("value", ["# h", "- x", "+ x", "1. x", "12) x", "> q", "---"])
def test_md_line_keeps_a_leading_marker_inline(value):
    for page in (gfm(f"- {md_line(value)}"), tensorboard_markdown(f"- {md_line(value)}")):
        assert page.tags() == {"ul", "li"} and page.text.strip() == value
    assert md_line(value).replace("\\", "", 1) == md_cell(value)  # one backslash more at most


@pytest.mark.parametrize("value", [IMG, "a`b", "`lead", "x``y`", "a\\", "*x* _y_"])
def test_md_code_is_verbatim(value):
    for page in (gfm(md_code(value)), tensorboard_markdown(md_code(value))):
        assert page.tags() == {"p", "code"} and page.text.strip() == value


def test_md_markup_passes_through_and_newlines_collapse():
    assert md_cell(MdMarkup("**ok**")) == "**ok**"
    assert md_code("a\nb") == "`a b`" and md_code("") == ""
    assert md_table(["a"], [["x\ny|z"]], "r") == ["| a |", "|---:|", "| x y\\|z |"]
