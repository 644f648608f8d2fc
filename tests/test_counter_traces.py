"""Traces of CUPTI per-kernel counters (``cuda_profiler_range``), traces with launch calls but no
device activity, and how the kernel definition is chosen: counts, counters, derived figures and
their rendering, on a trace written in that shape (see ``counter_trace.py``) and the real ones."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from profreport.analysis.counters import FLOPS_FORMULA, flops
from profreport.analysis.kernels import count_kernels, per_step
from profreport.analysis.trace_compare import analysis_document
from profreport.analysis.trace_document import AnalysisDocument
from profreport.render.analyze import render_html, render_markdown, view_model
from profreport.traceio.load import load_trace, parse_trace
from tests.counter_trace import (
    ADD,
    DFMA,
    FADD,
    FFMA,
    FLOPS_PER_STEP,
    GEMM,
    READ,
    READ_PER_STEP,
    RELU,
    SM_FFMA,
    STEPS,
    WARPS,
    WRITE,
    WRITE_PER_STEP,
    counter_trace,
)
from tests.test_analyze import run_cli

DATA = Path(__file__).parent / "data"


def counts(doc: dict, definition: str = "auto"):
    return count_kernels(parse_trace(orjson.dumps(doc)), definition)


def document(doc: dict) -> AnalysisDocument:
    return analysis_document([("counters.json", counts(doc))])


# --- the counter trace ---------------------------------------------------------------------------


def test_counter_trace_is_a_device_trace_with_one_kernel_per_range():
    c = counts(counter_trace())
    assert c.definition == "device"
    assert c.device_activity == "counters"
    assert c.device["kind"] == "cuda"
    assert c.device["name"] == "NVIDIA A100-SXM4-80GB"
    assert (c.kernels, c.launches, c.memcpy, c.memset) == (6, 6, 0, 0)
    assert c.unlinked_kernels == 0  # each range paired with its launch call, in order
    assert c.evidence.startswith("6 cuda_profiler_range events (CUPTI counters), 6 launch calls")
    assert "NVIDIA A100-SXM4-80GB" in c.evidence
    # the launching ops come from the pairing: range i <-> i-th cudaLaunchKernel
    assert {r.name: r.launched_by for r in c.table} == {
        GEMM: "aten::addmm",
        RELU: "aten::relu",
        ADD: "aten::add",
    }
    assert [(s.name, s.kernels, s.launches) for s in c.steps] == [
        ("ProfilerStep#0", 3, 3),
        ("ProfilerStep#1", 3, 3),
    ]


def test_counter_ranges_invent_no_kernel_time():
    c = counts(counter_trace())
    assert c.kernel_time_us is None  # the ranges span 600 us of synthetic time
    assert all(r.time_us is None for r in c.table)
    assert all(s.kernel_time_us is None for s in c.steps)
    assert per_step(c).kernel_time_us is None
    assert any("synthetic timestamps" in n for n in c.notes)


def test_counter_totals_and_derived_figures_by_hand():
    c = counts(counter_trace())
    rows = {r.name: r for r in c.table}
    assert rows[GEMM].counter_totals == {
        READ: 2 * 4096,
        WRITE: 2 * 1024,
        SM_FFMA: 2 * 1000,
        FFMA: 2 * 1000,
    }  # the .avg counter is not additive: only its mean is kept
    assert rows[GEMM].counters[WARPS] == 50
    total = c.counters
    assert total["source"] == "measured (CUPTI)"
    assert total["ranges"] == 6
    # 2 steps x (2 x 1000 ffma + 100 fmul + 200 fadd + 2 x 10 dfma); sm__ ffma is the same count
    assert total["flops"] == STEPS * FLOPS_PER_STEP == 4640
    assert total["dram_bytes_read"] == STEPS * READ_PER_STEP == 11264
    assert total["dram_bytes_written"] == STEPS * WRITE_PER_STEP == 4096
    assert total["totals"][FADD] == 400 and total["totals"][DFMA] == 20
    assert total["not_additive"] == [WARPS]
    assert "2 × (ffma + hfma + dfma)" in total["flops_formula"]


def test_flop_formula_counts_fma_twice_and_prefers_smsp():
    assert flops({FFMA: 3, FADD: 5}) == 11
    assert flops({SM_FFMA: 4}) == 8  # sm__ alone counts
    assert flops({SM_FFMA: 4, FFMA: 3}) == 6  # both: one count, smsp__ wins
    assert flops({"sm__sass_thread_inst_executed_op_hfma_pred_on.sum": 2}) == 4
    assert flops({READ: 10}) is None  # no instruction counter: no FLOPs, not 0
    assert "an FMA is a multiply and an add" in FLOPS_FORMULA


def test_unpaired_ranges_are_unlinked_and_in_no_step():
    doc = counter_trace()
    launches = [e for e in doc["traceEvents"] if e["name"] == "cudaLaunchKernel"]
    doc["traceEvents"].remove(launches[-1])  # 6 ranges, 5 launch calls: order proves nothing
    c = counts(doc)
    assert (c.kernels, c.launches, c.unlinked_kernels) == (6, 5, 6)
    assert [s.kernels for s in c.steps] == [0, 0]
    assert any("could not be paired" in n for n in c.notes)


def test_counter_json_document():
    t = document(counter_trace()).to_json()["traces"][0]
    assert t["device_activity"] == "counters"
    assert t["kernel_time_us"] is None
    assert t["per_step"]["kernels"] == 3
    assert t["counters"]["flops"] == 4640
    gemm = next(k for k in t["top_kernels"] if k["name"] == GEMM)
    assert (gemm["flops"], gemm["dram_bytes_read"], gemm["dram_bytes_written"]) == (
        4000,
        8192,
        2048,
    )
    assert gemm["time_us"] is None


def test_counter_view_model_and_renders():
    doc = document(counter_trace())
    (t,) = view_model(doc)["traces"]
    totals = {label: (whole, step) for label, whole, step in t["totals"]}
    assert totals["kernels"] == ("6", "3")
    assert totals["kernel time (µs)"] == ("not measured", "not measured")
    c = t["counters"]
    assert c["source"] == "measured (CUPTI)"
    assert dict(c["totals"]) == {
        "FLOPs": "4,640",
        "DRAM bytes read": "11,264 B (11.0 KiB)",
        "DRAM bytes written": "4,096 B (4.0 KiB)",
    }
    rows = {k["full_name"]: k for k in c["kernels"]}
    assert (rows[RELU]["flops"], rows[RELU]["dram_read"]) == ("200", "1,024 B (1.0 KiB)")
    md = render_markdown(doc)
    assert "Hardware counters, measured (CUPTI), 6 ranges" in md
    assert "| FLOPs | 4,640 |" in md
    assert "Definition evidence: 6 cuda_profiler_range events" in md
    html = render_html(doc)
    assert "Hardware counters, measured (CUPTI), 6 ranges" in html
    assert "<td>4,640</td>" in html


def test_cli_on_a_written_counter_trace(tmp_path):
    path = tmp_path / "counters.pt.trace.json"
    path.write_bytes(orjson.dumps(counter_trace()))
    code, out = run_cli(str(path), "--format", "json")
    assert code == 0
    (t,) = orjson.loads(out)["traces"]
    assert (t["definition"], t["kernels"], t["launches"]) == ("device", 6, 6)
    assert t["counters"]["dram_bytes_read"] == 11264


def test_cpu_definition_on_request_still_counts_operators():
    c = counts(counter_trace(), "cpu")
    assert c.definition == "cpu" and c.launches == 0
    assert c.kernels == 6  # addmm, relu, add per step: the operators, as asked
    assert c.evidence.startswith("--definition cpu given; the trace shows: 6 cuda_profiler_range")


# --- launch calls without device activity, deviceProperties alone --------------------------------


def test_launch_calls_without_device_events_say_not_recorded():
    c = counts(counter_trace(ranges=False))
    assert c.definition == "device"  # not switched to the CPU definition
    assert c.device_activity == "not recorded"
    assert c.launches == 6
    assert c.kernel_time_us is None
    assert c.evidence.startswith("6 launch calls")
    step = per_step(c)
    assert step.kernels is None and step.launches == 3
    t = document(counter_trace(ranges=False)).to_json()["traces"][0]
    assert (t["kernels"], t["memcpy"], t["launches"]) == (None, None, 6)
    assert "Device activity was not recorded" in t["notes"][0]
    totals = {
        label: whole
        for label, whole, _ in view_model(document(counter_trace(ranges=False)))["traces"][0][
            "totals"
        ]
    }
    assert totals["kernels"] == "not recorded"
    assert totals["launch calls"] == "6"


def test_device_properties_alone_do_not_make_a_device_trace():
    c = counts(counter_trace(launches=False, ranges=False))
    assert c.definition == "cpu"
    assert c.kernels == 6
    assert "deviceProperties lists NVIDIA A100-SXM4-80GB" in c.evidence
    assert "CPU-only profiles included" in c.evidence


# --- the real traces keep their counts --------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "definition", "kernels", "launches", "evidence"),
    [
        (
            "a100_alexnet_inference.json.gz",
            "device",
            79,
            79,
            "79 kernel events, 16 memcpy events, 3 memset events, 79 launch calls",
        ),
        ("a100_torch_compile_triton.json.gz", "device", 1, 1, "1 kernel event, 1 launch call;"),
        ("mi250_rocm_train.json.gz", "device", 14, 14, "14 kernel events, 2 memcpy events"),
        ("cpu_only_rank34.json.gz", "cpu", None, 0, "no device events, no launch calls"),
    ],
)
def test_real_traces_same_counts_with_evidence(name, definition, kernels, launches, evidence):
    c = count_kernels(load_trace(DATA / name))
    assert c.definition == definition
    assert c.device_activity == ("none" if definition == "cpu" else "recorded")
    if kernels is not None:
        assert c.kernels == kernels
    assert c.launches == launches
    assert c.evidence.startswith(evidence)
    assert c.counters is None and not c.notes


def test_compare_a_counter_trace_with_a_timed_one():
    timed = count_kernels(load_trace(DATA / "a100_alexnet_inference.json.gz"))
    doc = analysis_document([("alexnet", timed), ("counters", counts(counter_trace()))])
    (cmp,) = doc.comparison
    assert cmp.totals["kernels"].change == 6 - 79
    assert cmp.totals["kernel_time_us"].change is None  # unknown on one side: no difference
    (c,) = view_model(doc)["comparisons"]
    row = next(r for r in c["totals"] if r[0] == "kernel time (µs)")
    assert row[2:] == ("–", "–", "–")
    assert "Comparison: counters vs alexnet" in render_markdown(doc)
