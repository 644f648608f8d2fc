"""Export on CPU runs AOTInductor's C++ wrapper, which calls each library op's ATen kernel through a
shim (aoti_torch_cpu_mm_out, ...) with no aten:: op recorded beneath it: under the CPU definition
each such call is the kernel of the op it stands for (issue 41). Read from a real recorded run of a
2-layer Qwen2 decoder (tests/data/runs/qwen2-2layers-cpu/README.md)."""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from profreport.analysis.derive import derived_run
from profreport.analysis.kernel_bytes import kernel_bytes
from profreport.analysis.kernel_definitions import aoti_shim_op, is_inductor_kernel
from profreport.analysis.kernels import count_kernels, per_step
from profreport.analysis.time_breakdown import time_breakdown
from profreport.analysis.trace_compare import compare_counts
from profreport.modes import PreparedMode, mode_analyses
from profreport.pipeline import _kernel_counts
from profreport.record import Run, parse
from profreport.record.model import Bytes, KernelCounts, KernelRow, OkMode, OpBytes
from profreport.traceio import load_trace
from tests.test_trace_kernels import api, dev, op, write_trace

RUN = Path(__file__).parent / "data" / "runs" / "qwen2-2layers-cpu"
SHIM_OPS = {
    "aoti_torch_cpu_mm_out": "aten::mm",
    "aoti_torch_cpu_addmm_out": "aten::addmm",
    "aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu": (
        "aten::_scaled_dot_product_flash_attention_for_cpu"
    ),
}
LIBRARY_CALLS = {
    "aten::mm": 8.0,
    "aten::addmm": 6.0,
    "aten::_scaled_dot_product_flash_attention_for_cpu": 2.0,
}


def _document() -> dict:
    return json.loads(gzip.decompress((RUN / "run.json.gz").read_bytes()))


def _trace_path(mode: str) -> Path:
    return RUN / (_document()["modes"][mode]["trace"] + ".gz")


def _raw_steps(mode: str) -> list[list[dict]]:
    """Each ProfilerStep's complete events, read with no profreport code."""
    events = json.loads(gzip.decompress(_trace_path(mode).read_bytes()))["traceEvents"]
    complete = [e for e in events if e.get("ph") == "X"]
    steps = [e for e in complete if e["name"].startswith("ProfilerStep#")]
    return [
        [e for e in complete if s["ts"] <= e["ts"] < s["ts"] + s["dur"] and e is not s]
        for s in sorted(steps, key=lambda s: s["ts"])
    ]


def _per_step_calls(rows: list[KernelRow], steps: int) -> dict[str, float]:
    return {r.name: r.calls / steps for r in rows}


def test_each_shim_call_is_the_kernel_of_the_op_it_runs():
    raw = _raw_steps("export")
    assert len(raw) == 3
    for events in raw:
        shims = Counter(e["name"] for e in events if e["name"].startswith("aoti_torch_"))
        generated = [e for e in events if is_inductor_kernel(e["name"])]
        # the model's 16 matrix multiplies and attention calls, and 13 generated kernels
        assert shims == Counter(
            {
                "aoti_torch_cpu_mm_out": 8,
                "aoti_torch_cpu_addmm_out": 6,
                "aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu": 2,
            }
        )
        assert len(generated) == 13
    counts = count_kernels(load_trace(_trace_path("export")))
    assert counts.definition == "cpu"
    assert [s.kernels for s in counts.steps] == [29, 29, 29]
    rows = {r.name: r for r in counts.table}
    for shim, name in SHIM_OPS.items():
        assert rows[name].launched_by == shim
        assert rows[name].calls == 3 * Counter(e["name"] for e in raw[0])[shim]
    # addmm copies its bias beneath the shim: that copy is addmm's work, as under compile
    assert "aten::copy_" not in rows


def test_export_and_compile_count_the_same_kernels_of_the_same_graph():
    export = count_kernels(load_trace(_trace_path("export")))
    compiled = count_kernels(load_trace(_trace_path("compile")))
    assert per_step(export).kernels == per_step(compiled).kernels == 29

    def library(counts):
        return _per_step_calls([r for r in counts.table if not is_inductor_kernel(r.name)], 3)

    # the model's matrix multiplies and attention calls per step, in both
    assert library(export) == library(compiled) == LIBRARY_CALLS
    # the trace comparison pairs the GEMMs and attention by name, with the same calls
    changes = compare_counts("compile", compiled, "export", export).kernels
    for row in changes:
        if row.name in SHIM_OPS.values():
            assert (row.matched_by, row.calls_change) == ("name", 0)
    for name in SHIM_OPS.values():
        assert export.kernels_by_op[name] == compiled.kernels_by_op[name]


def test_shim_calls_are_cpu_kernel_time_not_wrapper_time():
    trace = load_trace(_trace_path("export"))
    breakdown = time_breakdown(trace, "cpu")
    for step, events in zip(breakdown.steps, _raw_steps("export"), strict=True):
        # shims and generated kernels run one after another on one thread: their union is the sum
        kernels = [e for e in events if e["name"] in SHIM_OPS or is_inductor_kernel(e["name"])]
        assert step.op_us == pytest.approx(sum(e["dur"] for e in kernels), abs=0.01)
        assert step.wrapper_us == 0.0
        assert step.op_us > 0.5 * step.wall_us


def _export_counted_today() -> Run:
    """The recorded run with export's kernel table counted again from its trace by today's code,
    and every finding derived again."""
    run = parse(_document(), str(RUN))
    export = run.modes["export"]
    trace = load_trace(_trace_path("export"))
    counted = _kernel_counts(trace, PreparedMode("export", fn=lambda: None), torch.device("cpu"))
    modes = {**run.modes, "export": dataclasses.replace(export, kernels=counted)}
    return derived_run(dataclasses.replace(run, modes=modes), mode_analyses())


def test_export_gemm_rows_take_the_bytes_and_modules_of_their_op():
    run = _export_counted_today()
    export = {r.name: r for r in run.modes["export"].kernels.table}
    compiled = {r.name: r for r in run.modes["compile"].kernels.table}
    for name in SHIM_OPS.values():
        row, twin = export[name], compiled[name]
        assert row.calls_per_step == twin.calls_per_step
        assert row.bytes_op == name and row.bytes_read is not None and row.bytes_read > 0
        assert row.modules
        # export runs the model inside a wrapper that flattens its outputs: "model." + path
        assert {m.removeprefix("model.") for m in row.modules} == set(twin.modules or ())
    mm = export["aten::mm"]
    assert (mm.bytes_read, mm.bytes_written) == (compiled["aten::mm"].bytes_read, 393216)


@pytest.mark.parametrize(
    ("name", "op_name"),
    [
        ("aoti_torch_cpu_mm_out", "aten::mm"),
        ("aoti_torch_cuda_addmm_out", "aten::addmm"),
        ("aoti_torch_cpu_mm_dtype_out", "aten::mm"),
        ("aoti_torch_cpu_add__Tensor", "aten::add_"),
        ("aoti_torch_cpu_convolution", "aten::convolution"),
        ("aoti_torch_cpu_index_put_v2", "aten::index_put"),
        ("aoti_torch_copy_", "aten::copy_"),
        ("aoti_torch_cpu_mkldnn__convolution_pointwise_binary", "mkldnn::_convolution_pointwise"),
        ("aoti_torch_cpu__linear_pointwise", "mkldnn::_linear_pointwise"),
        ("aoti_torch_empty_strided", None),  # the runtime's own helpers stand for no op
        ("aoti_torch_proxy_executor_call_function", None),
        ("aten::mm", None),
        ("graph_1_cpp_fused_mul_0", None),
    ],
)
def test_a_shim_name_gives_the_op_it_stands_for(name, op_name):
    assert aoti_shim_op(name) == op_name


def test_a_shim_of_a_bookkeeping_op_is_no_kernel_and_what_runs_under_others_is_their_work(
    tmp_path,
):
    events = [
        op("ProfilerStep#1", 0, 100, cat="user_annotation"),
        op("aoti_torch_cpu_view_dtype", 1, 2),
        op("aoti_torch_cpu_addmm_out", 10, 30),
        op("aten::copy_", 12, 3),
        op("aoti_torch_empty_strided", 45, 2),
        op("graph_0_cpp_fused_relu_0", 50, 5),
    ]
    counts = count_kernels(load_trace(write_trace(tmp_path / "t.json", events)), "cpu")
    assert [(r.name, r.calls, r.launched_by) for r in counts.table] == [
        ("aten::addmm", 1, "aoti_torch_cpu_addmm_out"),
        ("graph_0_cpp_fused_relu_0", 1, None),
    ]


def test_on_cuda_the_kernels_a_shim_launches_are_counted_and_take_its_ops_bytes(tmp_path):
    """A CUDA export: the device definition counts the library kernel the shim launched (the
    shim itself is no kernel), and the row takes the bytes of the op the shim stands for."""
    events = [
        op("ProfilerStep#1", 0, 100, cat="user_annotation"),
        op("aoti_torch_cuda_mm_out", 10, 40),
        api("cudaLaunchKernel", 20, corr=7),
        dev("sm90_xmma_gemm_f32f32_tf32f32", 30, 20, corr=7),
    ]
    counts = count_kernels(load_trace(write_trace(tmp_path / "t.json", events)))
    assert (counts.definition, counts.kernels, counts.launches) == ("device", 1, 1)
    (row,) = counts.table
    assert row.launched_by == "aoti_torch_cuda_mm_out"
    mode = OkMode(
        kernels=KernelCounts(per_step=1, table=(row,)),
        bytes=Bytes(
            read=4096,
            written=1024,
            source="modeled",
            method="",
            table=(OpBytes(op="extern aten::mm", calls=1, read=4096, written=1024),),
        ),
    )
    (with_bytes,) = kernel_bytes(mode)
    assert (with_bytes.bytes_op, with_bytes.bytes_read, with_bytes.bytes_written) == (
        "aten::mm",
        4096,
        1024,
    )
