"""``profreport analyze``: in-process runs, renderers on their view-model, one real subprocess."""

from __future__ import annotations

import gzip
import io
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from profreport import cli
from profreport.analysis.trace_document import SCHEMA, AnalysisDocument
from profreport.files import dumps
from profreport.record.section import DocumentError
from profreport.render.analyze import render_html, render_markdown, view_model

DATA = Path(__file__).parent / "data"
ALEXNET = str(DATA / "a100_alexnet_inference.json.gz")
TRITON = str(DATA / "a100_torch_compile_triton.json.gz")
MI250 = str(DATA / "mi250_rocm_train.json.gz")
# `analyze --format json` of two kernel_diff traces as profreport.analysis/1 wrote it (the paths
# in it relative to the repository)
ANALYSIS_1 = DATA / "analysis-1" / "norm_gelu_block-gelu_norm_block.json"


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = cli.main(["analyze", *argv], out=out)
    return code, out.getvalue()


def test_json_single_trace():
    code, out = run_cli(ALEXNET, "--format", "json", "--top", "5")
    assert code == 0
    doc = orjson.loads(out)
    assert doc["schema"] == SCHEMA == "profreport.analysis/2"
    assert doc["comparison"] == []
    (t,) = doc["traces"]
    assert t["path"] == ALEXNET
    assert t["definition"] == "device"
    assert (t["kernels"], t["memcpy"], t["memset"], t["launches"]) == (79, 16, 3, 79)
    assert t["memcpy_bytes"] == 244_403_360
    assert t["unlinked_kernels"] == 0
    assert t["device"]["name"] == "NVIDIA A100-PG509-200"
    assert len(t["top_kernels"]) == 5
    top = t["top_kernels"][0]
    assert (top["name"], top["calls"], top["launched_by"]) == (
        "Memcpy HtoD (Pageable -> Device)",
        16,
        "aten::copy_",
    )
    times = [k["time_us"] for k in t["top_kernels"]]
    assert times == sorted(times, reverse=True)
    assert set(doc["definitions"]) == {"device"}


def test_json_steps_and_comparison():
    code, out = run_cli(MI250, TRITON, "--format", "json")
    assert code == 0
    doc = orjson.loads(out)
    assert [t["path"] for t in doc["traces"]] == [MI250, TRITON]
    assert [(s["name"], s["kernels"], s["launches"]) for s in doc["traces"][0]["steps"]] == [
        ("ProfilerStep#1", 14, 14),
        ("ProfilerStep#2", 0, 0),
    ]
    (cmp,) = doc["comparison"]
    assert (cmp["baseline"], cmp["path"]) == (MI250, TRITON)
    pct = (1 - 14) / 14 * 100
    assert cmp["totals"]["kernels"] == {"base": 14, "head": 1, "change": -13, "change_pct": pct}
    assert cmp["totals"]["launches"]["change"] == -13
    assert cmp["totals"]["memcpy_bytes"]["change"] == -5120
    assert cmp["per_step"]["steps"] == {"base": 2, "head": 1, "change": -1, "change_pct": -50.0}
    kernels = {(k["head"] or k["base"])["name"]: k for k in cmp["kernels"]}
    added = kernels["triton_poi_fused_add_cos_sin_0"]
    assert (added["status"], added["base"], added["head"]["calls"]) == ("appeared", None, 1)
    assert added["calls_change"] == 1 and added["time_us_change"] == added["head"]["time_us"]
    # every mi250 kernel/memcpy disappeared, the triton one appeared; none paired
    assert len(kernels) == 13 + 1 and cmp["kernels_paired"] == 0
    ops = {o["op"]: o["change"] for o in cmp["launching_ops"]}
    assert ops["triton_poi_fused_add_cos_sin_0"] == 1
    assert ops["aten::addmm"] == -2


def test_folder_input_recursive_and_skips_non_traces(tmp_path, capsys):
    (tmp_path / "b" / "deep").mkdir(parents=True)
    shutil.copy(TRITON, tmp_path / "b" / "deep" / "w1.pt.trace.json.gz")
    shutil.copy(MI250, tmp_path / "a.json.gz")
    (tmp_path / "run.json").write_bytes(orjson.dumps({"schema": "profreport.run/1"}))
    (tmp_path / "notes.txt").write_text("not json")
    code, out = run_cli(str(tmp_path), "--format", "json")
    assert code == 0
    doc = orjson.loads(out)
    assert [Path(t["path"]).name for t in doc["traces"]] == ["a.json.gz", "w1.pt.trace.json.gz"]
    assert [t["kernels"] for t in doc["traces"]] == [14, 1]
    assert "skipped" in capsys.readouterr().err


def _not_a_trace(tmp_path: Path) -> str:
    path = tmp_path / "record.json"
    path.write_bytes(orjson.dumps({"schema": "profreport.run/1"}))
    return str(path)


def _not_json(tmp_path: Path) -> str:
    path = tmp_path / "broken.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": [ {"ph": "X", '))
    return str(path)


def _empty_file(tmp_path: Path) -> str:
    (tmp_path / "empty.json").write_bytes(b"")
    return str(tmp_path / "empty.json")


def _truncated_gzip(tmp_path: Path) -> str:
    path = tmp_path / "cut.json.gz"
    path.write_bytes(Path(ALEXNET).read_bytes()[:5000])
    return str(path)


def _empty_folder(tmp_path: Path) -> str:
    (tmp_path / "empty").mkdir()
    return str(tmp_path / "empty")


@pytest.mark.parametrize(
    ("make_input", "expected"),
    [
        (lambda p: str(p / "missing.json"), "no such file"),
        (_not_json, "not valid JSON"),
        (_not_a_trace, 'not a profiler trace: expected a JSON object with a "traceEvents" list'),
        (_empty_file, "empty.json: empty file: expected a JSON object"),
        (_truncated_gzip, "cut.json.gz: corrupt gzip data"),
        (_empty_folder, "no *.json or *.json.gz"),
    ],
)
def test_bad_input_exit_2_one_line_nothing_written(tmp_path, capsys, make_input, expected):
    out_dir = tmp_path / "out"
    code, out = run_cli(make_input(tmp_path), ALEXNET, "--format", "html", "--out", str(out_dir))
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert expected in err
    assert out == ""
    assert not out_dir.exists()


def test_markdown_default_format():
    code, out = run_cli(ALEXNET, TRITON)
    assert code == 0
    assert out.startswith("# Trace analysis")
    assert "| kernels | 79 |  |" in out
    assert "| kernels | 79 | 1 | -78 | ×0.01 |" in out
    assert "Launch calls: cudaLaunchKernel × 79" in out
    assert "## Method" in out and "correlation id" in out


def test_view_model_formats_numbers():
    _, out = run_cli(ALEXNET, MI250, "--format", "json")
    vm = view_model(AnalysisDocument.from_json(orjson.loads(out)), top=3)
    base, other = vm["traces"]
    assert base["title"].endswith("(baseline)")
    totals = dict((label, total) for label, total, _ in base["totals"])
    assert totals["memcpy bytes"] == "244,403,360 B (233.1 MiB)"
    assert totals["kernels"] == "79"
    assert other["steps_text"] == "2 ProfilerSteps"
    assert other["launch_apis"] == "hipLaunchKernel × 12, hipExtModuleLaunchKernel × 2"
    assert len(other["kernels"]) == 3
    (cmp,) = vm["comparisons"]
    row = next(r for r in cmp["totals"] if r[0] == "kernels")
    assert row == ("kernels", "79", "14", "-65", "×0.18")


def test_html_written_escaped_and_self_contained(tmp_path):
    code, out = run_cli(ALEXNET, TRITON, "--format", "html", "--out", str(tmp_path / "o"))
    assert code == 0
    page = (tmp_path / "o" / "analysis.html").read_text()
    assert out.strip() == f"wrote {tmp_path / 'o' / 'analysis.html'}"
    assert "elementwise_kernel&lt;128, 2" in page  # C++ template names are escaped
    assert "elementwise_kernel<128" not in page
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")
    doc = AnalysisDocument.from_json(orjson.loads(run_cli(ALEXNET, "--format", "json")[1]))
    assert render_html(doc).count("<section") == 2  # one trace + method
    assert render_markdown(doc).count("## ") == 2


def test_subprocess_module_entry(tmp_path):
    ok = subprocess.run(
        [sys.executable, "-m", "profreport", "analyze", TRITON, "--format", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0
    assert orjson.loads(ok.stdout)["traces"][0]["launch_api_counts"] == {"cuLaunchKernel": 1}
    bad = subprocess.run(
        [sys.executable, "-m", "profreport", "analyze", str(tmp_path / "nope.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr
    assert bad.stderr.strip().endswith("no such file or folder")


def _cpu_trace(tmp_path: Path) -> str:
    """A CPU-only trace: one ProfilerStep holding three compute operators (CPU kernels)."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 1, "dur": 30},
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 2, "dur": 20},
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 40, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 50, "dur": 5},
    ]  # fmt: skip
    path = tmp_path / "cpu.pt.trace.json"
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return str(path)


@pytest.mark.parametrize("definition", ["auto", "cpu"])
def test_cpu_trace_has_no_launch_calls_anywhere(tmp_path, definition):
    """One definition everywhere: CPU work has no launch API, so the CPU definition counts 0
    launch calls, in the table, the per-step column, the "Launch calls" line and the JSON."""
    trace = _cpu_trace(tmp_path)
    code, out = run_cli(trace, "--format", "json", "--definition", definition)
    (t,) = orjson.loads(out)["traces"]
    assert (t["definition"], t["kernels"]) == ("cpu", 3)
    assert (t["launches"], t["per_step"]["launches"], t["steps"][0]["launches"]) == (0, 0, 0)
    assert t["launch_api_counts"] == {}
    code, md = run_cli(trace, "--definition", definition)
    assert code == 0
    assert "| launch calls | 0 | 0 |" in md
    assert "Launch calls: none (CPU work has no launch API)" in md
    assert "launches equal kernels" not in md


def test_forcing_the_cpu_definition_on_a_gpu_trace_counts_no_launches():
    code, out = run_cli(ALEXNET, "--format", "json", "--definition", "cpu")
    (t,) = orjson.loads(out)["traces"]
    assert code == 0 and t["definition"] == "cpu" and t["kernels"] > 0
    assert (t["launches"], t["launch_api_counts"]) == (0, {})


@pytest.mark.parametrize(
    ("content", "found"),
    [
        (b"[1, 2, 3]", "3 values and no event object"),
        (b'{"traceEvents": [1, 2, 3]}', "3 values and no event object"),
        (b'{"traceEvents": ["a", null, [1]]}', "3 values and no event object"),
        (b"[7]", "1 value and no event object"),
    ],
)
def test_an_event_list_without_event_objects_is_not_a_trace(tmp_path, capsys, content, found):
    path = tmp_path / "numbers.json"
    path.write_bytes(content)
    code, out = run_cli(str(path))
    err = capsys.readouterr().err
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert f"numbers.json: not a profiler trace: its event list holds {found}" in err


def test_an_empty_event_list_is_an_empty_trace_and_says_so(tmp_path):
    path = tmp_path / "empty.pt.trace.json"
    path.write_bytes(b'{"traceEvents": []}')
    code, md = run_cli(str(path))
    assert code == 0
    assert "The trace holds no events." in md
    code, out = run_cli(str(path), "--format", "json")
    assert orjson.loads(out)["traces"][0]["events"] == 0
    assert "The trace holds no events." in render_html(
        AnalysisDocument.from_json(orjson.loads(out))
    )
    code, md = run_cli(_cpu_trace(tmp_path))
    assert "holds no events" not in md


def test_a_folder_skips_an_array_of_numbers(tmp_path, capsys):
    (tmp_path / "numbers.json").write_bytes(b"[1, 2, 3]")
    _cpu_trace(tmp_path)
    code, out = run_cli(str(tmp_path), "--format", "json")
    assert code == 0
    assert [t["kernels"] for t in orjson.loads(out)["traces"]] == [3]
    assert capsys.readouterr().err.endswith("numbers.json: not a profiler trace\n")


def _folder_with_bad_files(tmp_path: Path) -> Path:
    folder = tmp_path / "tb"
    (folder / "eager").mkdir(parents=True)
    (folder / "compile").mkdir()
    shutil.copy(MI250, folder / "eager" / "a.pt.trace.json.gz")
    shutil.copy(TRITON, folder / "compile" / "c.pt.trace.json.gz")
    (folder / "compile" / "b.pt.trace.json").write_bytes(b'{"traceEvents": [{"ph": "X"')
    (folder / "eager" / "z.pt.trace.json.gz").write_bytes(gzip.compress(b"[1, 2")[:9])
    return folder


def test_folder_with_a_bad_file_stops_by_default(tmp_path, capsys):
    folder = _folder_with_bad_files(tmp_path)
    code, out = run_cli(str(folder), "--format", "json")
    assert (code, out) == (2, "")
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: ") and "b.pt.trace.json" in err


def test_keep_going_skips_each_bad_file_and_exits_1(tmp_path, capsys):
    folder = _folder_with_bad_files(tmp_path)
    code, out = run_cli(str(folder), "--format", "json", "--keep-going")
    assert code == 1
    doc = orjson.loads(out)
    assert [Path(t["path"]).name for t in doc["traces"]] == [
        "c.pt.trace.json.gz",
        "a.pt.trace.json.gz",
    ]
    assert doc["traces"][1]["kernels"] == 14
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 2
    assert all(w.startswith("warning: skipped ") for w in warnings)
    assert "b.pt.trace.json: not valid JSON" in warnings[0]
    assert "z.pt.trace.json.gz" in warnings[1]


def test_keep_going_with_nothing_readable_is_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"not json")
    code, out = run_cli(str(bad), str(tmp_path / "missing.json"), "--keep-going")
    assert (code, out) == (2, "")
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":")[0] for line in lines] == ["warning", "warning", "error"]
    assert "missing.json: no such file or folder" in lines[0]


def test_keep_going_with_nothing_skipped_exits_0(tmp_path, capsys):
    code, _ = run_cli(MI250, "--keep-going")
    assert code == 0
    assert capsys.readouterr().err == ""


# --- where the time goes (analysis/time_breakdown) in every format ------------------------------

V100 = str(DATA / "hta_v100_ns_resolution.json.gz")


def test_json_time_breakdown_per_trace_and_in_the_comparison():
    code, out = run_cli(MI250, ALEXNET, "--format", "json")
    assert code == 0
    doc = orjson.loads(out)
    base, other = (t["time_breakdown"] for t in doc["traces"])
    assert other["device"]["idle_pct"] == 99.49  # HTA 0.5: 99.49
    assert [s["stream"] for s in other["device"]["streams"]] == [20, 7]
    assert base["rank"] is None and other["rank"] == 0
    assert [s["name"] for s in base["steps"]] == ["ProfilerStep#1", "ProfilerStep#2"]
    assert base["typical"]["name"] == "ProfilerStep#1"
    assert base["bound"]["label"] in ("host-bound", "launch-bound", "device-bound")
    (cmp,) = doc["comparison"]
    changes = cmp["time_breakdown"]
    assert changes["idle_pct"]["base"] == 98.33 and changes["idle_pct"]["head"] == 99.49
    assert changes["step"]["wall_us"]["base"] == base["typical"]["wall_us"]
    assert "op_us" not in changes["step"]  # neither side is a CPU trace


def test_json_is_the_document_models_text_and_a_valid_document_of_its_class():
    """analysis.json is written as every document is (files.dumps) and passes its own
    class's check: a top kernel, over the whole trace, has its per-step keys as null."""
    _, out = run_cli(MI250, TRITON, "--format", "json")
    doc = AnalysisDocument.parse(orjson.loads(out))
    assert out == dumps(doc.to_json())
    row = doc.traces[0].top_kernels[0]
    assert row.has("calls_per_step") and row.calls_per_step is None
    assert row.has("time_us_per_step") and row.time_us_per_step is None


def test_an_analysis_1_document_is_read_as_todays(monkeypatch):
    monkeypatch.chdir(DATA.parent.parent)
    old = orjson.loads(ANALYSIS_1.read_bytes())
    paths = [t["path"] for t in old["traces"]]
    read = AnalysisDocument.parse_file(ANALYSIS_1)
    assert read.schema == SCHEMA
    assert dumps(read.to_json()) == run_cli(*paths, "--format", "json")[1]
    assert render_markdown(read) == run_cli(*paths)[1]
    (was,) = old["comparison"]
    (now,) = read.comparison
    op = was["launching_ops"][0]
    assert (now.launching_ops[0].op, now.launching_ops[0].base, now.launching_ops[0].change) == (
        op["op"],
        op["baseline_kernels"],
        op["delta"],
    )
    assert (now.per_step["steps"].base, now.per_step["steps"].head) == (
        was["per_step"]["steps"]["baseline"],
        was["per_step"]["steps"]["value"],
    )


def test_an_analysis_1_document_of_the_wrong_shape_is_one_line():
    bad = {"schema": "profreport.analysis/1", "comparison": [{"totals": {"kernels": {}}}]}
    with pytest.raises(
        DocumentError, match=r"^doc: comparison\[0\]\.totals\.kernels\.base: missing"
    ):
        AnalysisDocument.parse(bad, "doc")


def test_typed_document_writes_and_reads_the_same_json():
    _, out = run_cli(MI250, ALEXNET, TRITON, "--format", "json")
    data = orjson.loads(out)
    assert AnalysisDocument.from_json(data).to_json() == data


def test_hta_rounding_flag_reproduces_htas_numbers():
    exact = orjson.loads(run_cli(V100, "--format", "json")[1])
    rounded = orjson.loads(run_cli(V100, "--format", "json", "--hta-rounding")[1])
    assert exact["traces"][0]["time_breakdown"]["device"]["idle_pct"] == 1.68
    assert rounded["traces"][0]["time_breakdown"]["device"]["idle_pct"] == 2.78  # HTA: 2.63
    assert rounded["traces"][0]["time_breakdown"]["hta_rounding"] is True


def test_markdown_and_html_show_where_the_time_goes(tmp_path):
    _, md = run_cli(MI250, ALEXNET)
    assert md.count("Where the time goes: rank") == 2
    assert "| idle | 12,853,982.0 | 99.49% |" in md
    assert "Where the time goes, median steps (bound " in md
    assert "HTA rounds starts up and ends down" in md
    code, _ = run_cli(MI250, ALEXNET, "--format", "html", "--out", str(tmp_path))
    page = (tmp_path / "analysis.html").read_text()
    assert code == 0 and page.count("<h3>Where the time goes</h3>") == 2
    assert "99.49%" in page and "Where the time goes, median steps" in page
