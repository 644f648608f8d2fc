"""Trace loading and kernel counting, on real GPU traces and small synthetic ones."""

from __future__ import annotations

import gzip
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from profreport.analysis.kernels import (
    BOOKKEEPING_OPS,
    CPU_DEFINITION_TEXT,
    DEVICE_DEFINITION_TEXT,
    count_kernels,
    per_step,
)
from profreport.traceio.load import TraceError, load_trace

DATA = Path(__file__).parent / "data"
PID = 100


def write_trace(path: Path, events: list, gz: bool = False, **meta) -> Path:
    doc = {"schemaVersion": 1, **meta, "traceEvents": events}
    raw = orjson.dumps(doc)
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


def op(name, ts, dur, tid=1, cat="cpu_op", **args):
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": PID,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def api(name, ts, corr, dur=2, tid=1, cat="cuda_runtime"):
    return op(name, ts, dur, tid=tid, cat=cat, correlation=corr)


def dev(name, ts, dur, corr=None, cat="kernel", **args):
    if corr is not None:
        args["correlation"] = corr
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, **args},
    }


def counts_of(tmp_path, events, definition="auto", **meta):
    return count_kernels(load_trace(write_trace(tmp_path / "t.json", events, **meta)), definition)


# --- real GPU traces (counts from tests/data / shared/traces/README.md) -------------------------


def test_a100_alexnet_counts_exact():
    c = count_kernels(load_trace(DATA / "a100_alexnet_inference.json.gz"))
    assert c.definition == "device"
    assert (c.kernels, c.memcpy, c.memset, c.launches) == (79, 16, 3, 79)
    assert c.launch_api_counts == {"cudaLaunchKernel": 79}
    assert c.memcpy_bytes == 244_403_360
    assert c.graph_launches == 0
    assert c.unlinked_kernels == 0
    assert c.device["kind"] == "cuda"
    assert c.device["name"] == "NVIDIA A100-PG509-200"
    assert c.steps == []
    assert sum(r.calls for r in c.table if r.kind == "kernel") == 79
    assert [r.time_us for r in c.table] == sorted((r.time_us for r in c.table), reverse=True)


def _naive_launching_ops(path: Path) -> dict[str, int]:
    """Independent O(n^2) reference: innermost cpu_op around each launch, kernels per op."""
    events = orjson.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    launch_by_corr = {
        e["args"]["correlation"]: e for e in events if e.get("name") == "cudaLaunchKernel"
    }
    out: dict[str, int] = {}
    for k in (e for e in events if e.get("cat") == "kernel"):
        call = launch_by_corr[k["args"]["correlation"]]
        around = [
            o for o in ops if o["tid"] == call["tid"] and o["ts"] <= call["ts"] < o["ts"] + o["dur"]
        ]
        name = min(around, key=lambda o: o["dur"])["name"] if around else "(no CPU op)"
        out[name] = out.get(name, 0) + 1
    return out


def test_a100_alexnet_kernels_linked_to_innermost_op():
    path = DATA / "a100_alexnet_inference.json.gz"
    c = count_kernels(load_trace(path))
    assert c.kernels_by_op == _naive_launching_ops(path)
    conv = [r for r in c.table if r.launched_by == "aten::cudnn_convolution"]
    assert conv and all(r.launched_by_top == "aten::conv2d" for r in conv)
    memcpy = [r for r in c.table if r.kind == "memcpy"]
    assert sum(r.bytes for r in memcpy) == 244_403_360


def test_a100_triton_driver_launch():
    c = count_kernels(load_trace(DATA / "a100_torch_compile_triton.json.gz"))
    assert (c.kernels, c.launches, c.memcpy) == (1, 1, 0)
    assert c.launch_api_counts == {"cuLaunchKernel": 1}
    assert [(s.name, s.kernels, s.launches) for s in c.steps] == [("ProfilerStep#1", 1, 1)]
    (row,) = c.table
    assert row.name == "triton_poi_fused_add_cos_sin_0"
    assert row.launched_by == "triton_poi_fused_add_cos_sin_0"  # Inductor's kernel record op
    (rec,) = c.inductor_kernels
    assert rec["backend"] == "triton"
    assert rec["hash"] == "cqaokwf2bph4egogzevc22vluasiyuui4i54zpemp6knbsggfbuu"


def test_mi250_hip_launches_and_steps():
    c = count_kernels(load_trace(DATA / "mi250_rocm_train.json.gz"))
    assert (c.kernels, c.memcpy, c.launches) == (14, 2, 14)
    assert c.launch_api_counts == {"hipLaunchKernel": 12, "hipExtModuleLaunchKernel": 2}
    assert c.device["kind"] == "rocm"
    assert c.device["device_ids"] == [2]
    # The trace has no bytes on its memcpy events: they come from the API call's "size" ("2560").
    assert c.memcpy_bytes == 2 * 2560
    assert [(s.name, s.kernels, s.memcpy) for s in c.steps] == [
        ("ProfilerStep#1", 14, 2),
        ("ProfilerStep#2", 0, 0),
    ]
    assert per_step(c).kernels == 14
    assert per_step(c).steps == 2
    assert c.kernels_by_op["aten::addmm"] == 2


def test_cpu_only_trace():
    trace = load_trace(DATA / "cpu_only_rank34.json.gz")
    dev = count_kernels(trace, "device")
    assert (dev.kernels, dev.launches, dev.memcpy, dev.memset) == (0, 0, 0, 0)
    auto = count_kernels(trace)
    assert auto.definition == "cpu"
    assert auto.device["kind"] == "cpu"
    assert auto.kernels == 0  # its only cpu_ops are aten::empty: bookkeeping
    assert [s.name for s in auto.steps] == ["ProfilerStep#551"]
    assert trace.metadata["distributedInfo"]["rank"] == 34


def test_loader_keeps_columns_compact():
    trace = load_trace(DATA / "a100_alexnet_inference.json.gz")
    assert trace.ts_ns.dtype.kind == "i"
    # Exact integer nanoseconds from microsecond timestamps around 1.7e15.
    first = trace.strings.index("[param|cuda]")
    row = int((trace.name == first).nonzero()[0][0])
    assert int(trace.ts_ns[row]) == 1695835542514261 * 1000
    assert int(trace.dur_ns[row]) == 43425283 * 1000
    assert "traceEvents" not in trace.metadata
    assert trace.metadata["deviceProperties"][0]["id"] == 0


# --- synthetic device traces -----------------------------------------------------------------


def test_graph_launch_one_launch_many_kernels(tmp_path):
    events = [
        op("aten::graph_replay", 0, 50),
        api("cudaGraphLaunch_v10000", 5, corr=9),
        *[dev(f"k{i}", 100 + 10 * i, 5, corr=9) for i in range(3)],
    ]
    c = counts_of(tmp_path, events)
    assert (c.kernels, c.launches, c.graph_launches, c.unlinked_kernels) == (3, 1, 1, 0)
    assert {r.launched_by for r in c.table} == {"aten::graph_replay"}


def test_versioned_launch_names_and_memcpy_calls(tmp_path):
    events = [
        api("cudaLaunchKernel_v7000", 1, corr=1),
        api("cudaLaunchKernelExC_v11060", 4, corr=2),
        api("cudaMemcpyAsync", 8, corr=3),
        api("cudaMemsetAsync", 12, corr=4),
        dev("a", 20, 3, corr=1),
        dev("b", 25, 3, corr=2),
        dev("Memcpy DtoH", 30, 3, corr=3, cat="gpu_memcpy", bytes=4096),
        dev("Memset (Device)", 35, 1, corr=4, cat="gpu_memset", bytes=512),
    ]
    c = counts_of(tmp_path, events)
    assert (c.kernels, c.launches, c.memcpy, c.memset) == (2, 2, 1, 1)
    assert c.launch_api_counts == {"cudaLaunchKernel_v7000": 1, "cudaLaunchKernelExC_v11060": 1}
    assert (c.memcpy_bytes, c.memset_bytes) == (4096, 512)


def test_legacy_categories(tmp_path):
    events = [
        op("aten::mm", 0, 10, cat="Operator"),
        api("cudaLaunchKernel", 2, corr=1, cat="Runtime"),
        dev("gemm", 20, 4, corr=1, cat="Kernel"),
        dev("Memcpy HtoD", 30, 2, cat="Memcpy", bytes=8),
        dev("Memset", 40, 2, cat="Memset"),
    ]
    c = counts_of(tmp_path, events)
    assert (c.kernels, c.memcpy, c.memset, c.launches) == (1, 1, 1, 1)
    assert c.table[0].launched_by == "aten::mm"
    assert c.unlinked_kernels == 0


def test_unlinked_kernels_counted_and_flow_fallback(tmp_path):
    events = [
        op("aten::add", 0, 10),
        api("cudaLaunchKernel", 2, corr=5),
        {"ph": "s", "id": 5, "pid": PID, "tid": 1, "ts": 2, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 5, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g"},
        dev("via_flow", 20, 3),  # no correlation arg: linked through the ac2g flow
        dev("ncclKernel_AllReduce", 40, 30),  # no CPU side at all
    ]
    c = counts_of(tmp_path, events)
    assert c.kernels == 2
    assert c.unlinked_kernels == 1
    by_name = {r.name: r for r in c.table}
    assert by_name["via_flow"].launched_by == "aten::add"
    assert by_name["ncclKernel_AllReduce"].launched_by is None
    assert c.kernels_by_op == {"aten::add": 1, "(unlinked)": 1}


def test_step_follows_the_launch_not_the_kernel(tmp_path):
    events = [
        op("ProfilerStep#3", 0, 100, cat="user_annotation"),
        op("ProfilerStep#4", 100, 100, cat="user_annotation"),
        api("cudaLaunchKernel", 90, corr=1),
        dev("late", 150, 5, corr=1),  # runs during step 4, launched in step 3
        dev("orphan", 160, 5),  # no launch: falls back to its own time (step 4)
        dev("outside", 500, 5),
        {
            "ph": "X",
            "cat": "gpu_user_annotation",
            "name": "ProfilerStep#3",
            "pid": 0,
            "tid": 7,
            "ts": 150,
            "dur": 60,
        },
    ]
    c = counts_of(tmp_path, events)
    assert [(s.name, s.kernels, s.launches) for s in c.steps] == [
        ("ProfilerStep#3", 1, 1),
        ("ProfilerStep#4", 1, 0),
    ]
    assert c.kernels == 3


def test_robust_to_real_trace_oddities(tmp_path):
    long_name = "void at::native::kernel<" + "float, " * 3000 + "int>(Args...)"
    events = [
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "python"}},
        {"name": "Iteration Start", "ph": "i", "s": "g", "pid": "Traces", "tid": "T", "ts": 1},
        {"name": "mem", "ph": "C", "pid": PID, "ts": 3, "args": {"Total Allocated": 12}},
        {"ph": "i", "cat": "kernel", "name": "instant_not_a_kernel", "pid": 0, "tid": 7, "ts": 4},
        {"ph": "X", "cat": "kernel", "name": "no_dur", "pid": 0, "tid": "stream 7 ", "ts": 5},
        dev("INVALID", 10, 2, stream="0x0"),
        dev(long_name, 20, 2),
        dev("weird", 30, 2, cat="some_future_category"),
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": 0,
            "dur": 100,
        },
    ]
    c = counts_of(tmp_path, events)  # no deviceProperties, no distributedInfo
    assert c.kernels == 3  # no_dur, INVALID, long_name
    names = {r.name for r in c.table}
    assert names == {"no_dur", "INVALID", long_name}
    assert {r.name: r.time_us for r in c.table}["no_dur"] == 0.0
    assert c.device["kind"] == "cuda"
    assert c.device["name"] is None
    assert c.unlinked_kernels == 3


def test_empty_trace_events(tmp_path):
    c = counts_of(tmp_path, [])
    assert c.definition == "cpu"
    assert (c.kernels, c.launches, c.steps, c.table) == (0, 0, [], [])
    assert per_step(c).to_json() == {
        "kernels": 0,
        "launches": 0,
        "memcpy": 0,
        "memset": 0,
        "graph_launches": 0,
        "kernel_time_us": 0.0,
        "steps": 0,
    }


def test_gzip_detected_by_magic_not_suffix(tmp_path):
    events = [dev("k", 1, 1)]
    gz_named_json = write_trace(tmp_path / "a.json", events, gz=True)
    plain_named_gz = write_trace(tmp_path / "b.json.gz", events, gz=False)
    assert count_kernels(load_trace(gz_named_json)).kernels == 1
    assert count_kernels(load_trace(plain_named_gz)).kernels == 1


def test_json_array_format_accepted(tmp_path):
    path = tmp_path / "array.json"
    path.write_bytes(orjson.dumps([dev("k", 1, 1), dev("k", 5, 1)]))
    c = count_kernels(load_trace(path))
    assert c.kernels == 2
    assert c.table[0].calls == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (b"this is not json", "not valid JSON"),
        (b'{"hello": 1}', "not a profiler trace"),
        (b'{"traceEvents": 3}', "not a profiler trace"),
        (gzip.compress(b'{"traceEvents": []}')[:12], "gzip"),
    ],
)
def test_bad_input_raises_trace_error(tmp_path, content, message):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(TraceError) as err:
        load_trace(path)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_counter_ranges_attach_to_kernel_rows(tmp_path):
    events = [
        dev("gemm", 10, 4, corr=1),
        {
            "ph": "X",
            "cat": "cuda_profiler_range",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 10,
            "dur": 4,
            "args": {
                "External id": 3,
                "dram__bytes_read.sum": 100.0,
                "sm__warps_active.avg.pct_of_peak_sustained_active": 40,
            },
        },
        {
            "ph": "X",
            "cat": "cuda_profiler_range",
            "name": "gemm",
            "pid": 0,
            "tid": 7,
            "ts": 20,
            "dur": 4,
            "args": {
                "dram__bytes_read.sum": 300.0,
                "sm__warps_active.avg.pct_of_peak_sustained_active": 60,
            },
        },
    ]
    c = counts_of(tmp_path, events)
    assert c.kernels == 1  # ranges are not kernels
    (row,) = c.table
    assert row.counters == {
        "dram__bytes_read.sum": 200.0,
        "sm__warps_active.avg.pct_of_peak_sustained_active": 50.0,
    }
    assert c.counter_ranges[0]["ranges"] == 2


def test_unknown_definition_rejected(tmp_path):
    with pytest.raises(ValueError, match="definition"):
        counts_of(tmp_path, [], definition="gpu")


# --- CPU definition ----------------------------------------------------------------------------


def test_cpu_definition_nesting_rules(tmp_path):
    base = 1_695_835_542_514_261  # microseconds large enough to lose precision as float ns
    events = [
        # container whose only children are bookkeeping: the container is the kernel
        op("aten::copy_", base, 10),
        op("aten::empty", base + 1, 2),
        op("aten::as_strided", base + 4, 6),  # ends exactly with its parent
        # an op with a compute child is not a kernel; its bookkeeping sibling is ignored
        op("aten::linear", base + 20, 30),
        op("aten::t", base + 21, 4),
        op("aten::transpose", base + 22, 2),
        op("aten::addmm", base + 30, 15),
        # starts exactly when linear ends: a sibling, not a child
        op("aten::relu", base + 50, 5),
        op("aten::clamp_min", base + 51, 3),
        # autograd / compiled containers never qualify, even around bookkeeping only
        op("autograd::engine::evaluate_function: ViewBackward0", base + 60, 10),
        op("aten::view", base + 61, 2),
        op("## Call CompiledFxGraph fabc ##", base + 80, 20),
        op("graph_0_cpp_fused_gelu_view_1", base + 81, 10),
        op("inductor::_reinterpret_tensor", base + 92, 1),
        op("forward", base + 110, 30, cat="cpu_op"),
        op("prim::ListConstruct", base + 111, 1),
        # another thread overlapping in time is not a descendant
        op("aten::mul", base + 20, 40, tid=2),
    ]
    c = counts_of(tmp_path, events)
    assert c.definition == "cpu"
    assert {r.name for r in c.table} == {
        "aten::copy_",
        "aten::addmm",
        "aten::relu",  # the op the model called, not the clamp_min it runs
        "graph_0_cpp_fused_gelu_view_1",
        "aten::mul",
    }
    assert (c.kernels, c.launches) == (5, 0)  # CPU work has no launch API
    by_name = {r.name: r for r in c.table}
    assert by_name["aten::addmm"].launched_by == "aten::linear"
    assert by_name["aten::relu"].launched_by is None
    assert by_name["aten::copy_"].launched_by is None
    assert by_name["aten::mul"].time_us == 40.0


def test_cpu_helper_copies_belong_to_the_operator_that_makes_them(tmp_path):
    base = 1_000_000
    events = [
        # addmm copies its bias into the output, then runs the GEMM itself
        op("aten::linear", base, 40),
        op("aten::addmm", base + 1, 38),
        op("aten::copy_", base + 2, 5),
        # mul by a Python scalar converts the scalar: to -> _to_copy -> copy_
        op("aten::mul", base + 50, 20),
        op("aten::to", base + 51, 6),
        op("aten::_to_copy", base + 52, 4),
        op("aten::copy_", base + 53, 2),
        # a copy the model asked for is a kernel of its own (aten::to only forwards)
        op("aten::to", base + 80, 10),
        op("aten::_to_copy", base + 81, 8),
        op("aten::copy_", base + 82, 6),
        # zeros fills through fill_/zero_: the kernel is zeros
        op("aten::zeros", base + 100, 10),
        op("aten::empty", base + 101, 1),
        op("aten::zero_", base + 103, 6),
        op("aten::fill_", base + 104, 4),
    ]
    c = counts_of(tmp_path, events)
    assert sorted(r.name for r in c.table) == [
        "aten::_to_copy",  # named like the bytes model's op, not by the copy_ inside it
        "aten::addmm",
        "aten::mul",
        "aten::zeros",
    ]
    assert c.kernels == 4
    by_name = {r.name: r for r in c.table}
    assert by_name["aten::_to_copy"].calls == 1  # only the top-level one
    assert by_name["aten::addmm"].launched_by == "aten::linear"


def test_cpu_kernel_is_the_operator_the_model_called(tmp_path):
    base = 2_000_000
    events = [
        # embedding gathers rows with index_select
        op("aten::embedding", base, 20),
        op("aten::index_select", base + 2, 15),
        # mean sums, then divides in place: one operator, one kernel
        op("aten::mean", base + 30, 20),
        op("aten::sum", base + 31, 10),
        op("aten::div_", base + 42, 5),
        # a layer norm copies its non-contiguous input first (Whisper's layer norms)
        op("aten::layer_norm", base + 60, 30),
        op("aten::native_layer_norm", base + 61, 28),
        op("aten::clone", base + 62, 8),
        op("aten::copy_", base + 63, 6),
        # a convolution asks whether NNPACK is there, then runs the slow path
        op("aten::conv2d", base + 100, 40),
        op("aten::convolution", base + 101, 38),
        op("aten::_convolution", base + 102, 36),
        op("aten::_nnpack_available", base + 103, 1),
        op("aten::_slow_conv2d_forward", base + 105, 30),
        # adaptive_avg_pool2d forwards to mean
        op("aten::adaptive_avg_pool2d", base + 150, 20),
        op("aten::mean", base + 151, 18),
        op("aten::sum", base + 152, 10),
        op("aten::div_", base + 163, 5),
    ]
    c = counts_of(tmp_path, events)
    assert {(r.name, r.calls, r.launched_by) for r in c.table} == {
        ("aten::embedding", 1, None),
        ("aten::mean", 2, "aten::adaptive_avg_pool2d"),
        ("aten::native_layer_norm", 1, "aten::layer_norm"),
        ("aten::convolution", 1, "aten::conv2d"),
    }
    assert c.kernels == 5


def test_bookkeeping_list_documented():
    required = [
        "empty",
        "empty_strided",
        "empty_like",
        "new_empty",
        "new_empty_strided",
        "resize_",
        "as_strided",
        "as_strided_",
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "view_as",
        "flatten",
        "unflatten",
        "squeeze",
        "squeeze_",
        "unsqueeze",
        "unsqueeze_",
        "expand",
        "expand_as",
        "permute",
        "transpose",
        "transpose_",
        "t",
        "numpy_T",
        "select",
        "slice",
        "narrow",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "alias",
        "detach",
        "detach_",
        "lift_fresh",
        "set_",
        "to",
        "type_as",
        "contiguous",
        "dropout",
        "feature_dropout",
        "item",
        "_local_scalar_dense",
        "size",
        "stride",
        "dim",
        "result_type",
        "is_nonzero",
    ]
    import profreport.analysis.kernel_definitions as definitions_module

    for name in required:
        assert f"aten::{name}" in BOOKKEEPING_OPS
        assert name in definitions_module.__doc__
    assert "aten::copy_" not in BOOKKEEPING_OPS
    assert "bookkeeping" in CPU_DEFINITION_TEXT
    assert "correlation" in DEVICE_DEFINITION_TEXT


RECORD_CPU_TRACE = textwrap.dedent(
    """
    import sys, torch
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(4, 8, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
    x = torch.randn(2, 4, 16, 16)
    with torch.no_grad(), profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=0, warmup=1, active=3),
        on_trace_ready=tensorboard_trace_handler(sys.argv[1]),
    ) as prof:
        for _ in range(4):
            model(x)
            prof.step()
    """
)


@pytest.mark.slow
def test_cpu_definition_on_a_real_eager_trace(tmp_path):
    out = tmp_path / "tb"
    subprocess.run(
        [sys.executable, "-c", RECORD_CPU_TRACE, str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (path,) = out.glob("*.pt.trace.json")
    c = count_kernels(load_trace(path))
    assert c.definition == "cpu"
    assert len(c.steps) == 3
    assert [s.kernels for s in c.steps] == [3, 3, 3]
    assert {r.name: (r.calls, r.launched_by) for r in c.table} == {
        "aten::convolution": (3, "aten::conv2d"),
        "aten::relu": (3, None),
        "aten::max_pool2d_with_indices": (3, "aten::max_pool2d"),
    }
    assert per_step(c).to_json() == per_step(c).to_json() | {
        "kernels": 3,
        "launches": 0,
        "steps": 3,
    }


RECORD_NNC_CPU_TRACE = textwrap.dedent(
    """
    import sys, torch
    from torch.profiler import ProfilerActivity, profile, schedule

    class Gated(torch.nn.Module):
        def forward(self, x, g):
            y = torch.sigmoid(g) * torch.tanh(x)
            return x + y * 0.5 - torch.relu(y)

    old_fuse = torch._C._jit_can_fuse_on_cpu()
    old_llvm = torch._C._jit_get_te_must_use_llvm_cpu()
    torch._C._jit_override_can_fuse_on_cpu(True)  # NNC on CPU, without needing LLVM
    torch._C._jit_set_te_must_use_llvm_cpu(False)
    try:
        torch.manual_seed(0)
        model = torch.jit.script(Gated())
        x, g = torch.randn(2, 8), torch.randn(2, 8)
        with torch.no_grad():
            for _ in range(4):  # the profiling executor specialises, then fuses
                model(x, g)
            with profile(
                activities=[ProfilerActivity.CPU],
                schedule=schedule(wait=0, warmup=1, active=3),
                on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1]),
            ) as prof:
                for _ in range(4):
                    model(x, g)
                    prof.step()
    finally:
        torch._C._jit_override_can_fuse_on_cpu(old_fuse)
        torch._C._jit_set_te_must_use_llvm_cpu(old_llvm)
    """
)


@pytest.mark.slow
def test_cpu_definition_counts_nnc_fused_kernels(tmp_path):
    torch = pytest.importorskip("torch")
    if not hasattr(torch._C, "_jit_get_te_must_use_llvm_cpu"):
        pytest.skip("this torch has no NNC fuser switches")
    path = tmp_path / "nnc.json"
    script = tmp_path / "record_nnc.py"  # TorchScript reads the module's source from a file
    script.write_text(RECORD_NNC_CPU_TRACE)
    subprocess.run(
        [sys.executable, str(script), str(path)], check=True, capture_output=True, timeout=300
    )
    trace = load_trace(path)
    fused = "fused_sigmoid_tanh_mul_mul_add_relu_sub"
    assert fused in trace.strings  # the real name of the NNC kernel's cpu_op
    c = count_kernels(trace)
    assert c.definition == "cpu"
    assert [s.kernels for s in c.steps] == [1, 1, 1]
    # Only the fused kernel: its aten::empty_strided is bookkeeping, forward is a container.
    assert [(r.name, r.calls, r.launched_by) for r in c.table] == [(fused, 3, None)]
    assert c.kernels_by_op == {fused: 3}
    assert per_step(c).kernels == 1


def test_per_step_upper_median():
    from profreport.analysis.kernels import StepCounts, TraceCounts

    steps = [
        StepCounts(f"ProfilerStep#{i}", k, k + 1, 0, 0, 0, float(k))
        for i, k in enumerate([9, 4, 4, 5])
    ]
    c = TraceCounts("device", {}, 22, 0, 0, 26, 0, 0, 0, 22.0, 0, steps, [], {})
    assert per_step(c).to_json() == {
        "kernels": 5,
        "launches": 6,
        "memcpy": 0,
        "memset": 0,
        "graph_launches": 0,
        "kernel_time_us": 5.0,
        "steps": 4,
    }


# --- sliced parsing and nesting internals ------------------------------------------------------


def _tricky_events() -> list:
    events = []
    for i in range(60):
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"op}}, {{weird}}] name {i}",  # cut candidates inside strings
                "pid": 1,
                "tid": 1,
                "ts": i * 10,
                "dur": 5,
                "args": {"External id": i, "nested": [{"a": 1}, {"b": [{"c": 2}]}]},
            }
        )
        events.append({"ph": "f", "id": i, "pid": 0, "tid": 7, "ts": i, "cat": "ac2g"})
    return events


@pytest.mark.parametrize("layout", ["compact", "spaced"])
def test_sliced_scan_matches_whole_parse(layout):
    from profreport.traceio.slices import scan_sliced, scan_whole

    doc = {"schemaVersion": 1, "traceEvents": _tricky_events(), "traceName": "x}, {y"}
    raw = orjson.dumps(doc, option=orjson.OPT_INDENT_2 if layout == "spaced" else 0)
    whole: list = []
    meta_whole = scan_whole(raw, whole.extend)
    batches: list = []
    meta = scan_sliced(raw, batches.append, slice_bytes=300)
    assert len(batches) > 5  # really sliced
    assert [e for b in batches for e in b] == whole == doc["traceEvents"]
    assert meta == meta_whole == {"schemaVersion": 1, "traceName": "x}, {y"}


def test_sliced_scan_falls_back_when_it_cannot_vouch(tmp_path):
    # "traceEvents": [ inside a string before the real key: the sliced scan must not be fooled.
    doc = {"note": 'see "traceEvents": [ below', "traceEvents": [dev("k", 1, 1)] * 3}
    path = tmp_path / "t.json"
    path.write_bytes(orjson.dumps(doc))
    trace = load_trace(path)
    assert count_kernels(trace).kernels == 3
    assert trace.metadata == {"note": 'see "traceEvents": [ below'}


def test_odd_value_types_do_not_break_loading(tmp_path):
    events = [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k1",
            "pid": [0],
            "tid": {"s": 7},
            "ts": "12.5",
            "dur": "2",
            "args": {"correlation": "0x10", "bytes": 2**64 - 1},
        },
        {"ph": "X", "cat": "kernel", "name": 42, "pid": 0, "tid": 7, "ts": 20, "dur": 1},
        {"ph": ["X"], "cat": "kernel", "name": "k3", "pid": 0, "tid": 7, "ts": 30, "dur": 1},
        "not an event",
        17,
    ]
    trace = load_trace(write_trace(tmp_path / "odd.json", events))
    c = count_kernels(trace)
    assert c.kernels == 2  # k1 and "42"; k3 has no usable phase
    assert {r.name for r in c.table} == {"k1", "42"}
    row = int((trace.name == trace.strings.index("k1")).nonzero()[0][0])
    assert int(trace.ts_ns[row]) == 12_500
    assert int(trace.correlation[row]) == 16
    assert int(trace.nbytes[row]) == -1  # out of int64 range: treated as missing


def test_vectorised_nesting_matches_reference_sweep():
    import numpy as np

    from profreport.analysis._nesting import innermost_container, innermost_container_loop

    rng = np.random.default_rng(7)

    def build(spans: list, lane: int, a: int, b: int, depth: int) -> None:
        t = a
        while t < b and rng.random() < 0.8:
            s = t + int(rng.integers(0, 3))
            if s >= b:
                break
            e = min(b, s + int(rng.integers(0, 20)))
            spans.append((lane, s, e, rng.random() < 0.7))
            if depth < 4 and e > s:
                build(spans, lane, s, e, depth + 1)
            t = e + int(rng.integers(0, 2))

    for _ in range(200):
        spans: list = []
        for lane in range(3):
            build(spans, lane, 0, 200, 0)
        lanes, starts, ends, conts = zip(*spans, strict=True)
        perm = rng.permutation(len(lanes))
        cols = [np.array(x)[perm] for x in (lanes, starts, ends, conts)]
        cols[1] += 10**15  # realistic absolute nanoseconds
        cols[2] += 10**15
        cols[3] = cols[3].astype(bool)
        assert np.array_equal(innermost_container(*cols), innermost_container_loop(*cols))


# --- the fast (chunked, parallel) parse against the plain one ----------------------------------


def _assert_same_trace(a, b) -> None:
    import numpy as np

    assert (a.strings, a.lanes, a.metadata, a.extra_args) == (
        b.strings,
        b.lanes,
        b.metadata,
        b.extra_args,
    )
    for name in ("ph", "cat", "name", "lane", "ts_ns", "dur_ns"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    for name in ("correlation", "external_id", "flow_id", "nbytes"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name


@pytest.fixture
def tiny_parallel_chunks(monkeypatch):
    """Make the parallel parse run on small documents: 1 KiB chunks and 512-byte slices, gzip
    files decompressed 512 bytes at a time (so that chunks are planned and handed out while
    the rest is still coming), and this process holding its first chunk until the helper
    process has claimed one.

    Returns the list of parties that parsed each chunk, filled in by every parse.
    """
    import os
    import time

    from profreport.traceio import chunks as _chunks
    from profreport.traceio import load as trace_module

    parties: list[list[int]] = []
    real_run = trace_module.run_chunks

    def spy(chunks, parser, claims, workers):
        class WaitForHelper(trace_module.ChunkParser):
            def parse(self, chunk):
                deadline = time.monotonic() + 30
                alive = [w for w in workers if w.proc.poll() is None]
                while alive and time.monotonic() < deadline:
                    claimed = int.from_bytes(os.pread(claims.fd, 8, 0), "little")
                    if claimed >= min(2, len(chunks)):
                        break
                    time.sleep(0.002)
                return super().parse(chunk)

        waiting = WaitForHelper(parser.source, parser.slice_bytes)
        results = real_run(chunks, waiting, claims, workers)
        parties.append([party for party, _ in results])
        return results

    monkeypatch.setattr(trace_module, "run_chunks", spy)
    monkeypatch.setattr(trace_module, "MIN_CHUNK_BYTES", 1024)
    monkeypatch.setattr(trace_module, "MAX_CHUNK_BYTES", 1024)
    monkeypatch.setattr(trace_module, "SLICE_BYTES", 512)
    monkeypatch.setattr(trace_module, "_HEAD_BYTES", 8192)
    monkeypatch.setattr(trace_module, "_GUNZIP_BLOCK", 512)
    monkeypatch.setattr(_chunks, "_CUT_WINDOW", 2048)
    return parties


@pytest.mark.parametrize(
    "fixture",
    [
        "a100_alexnet_inference.json.gz",
        "a100_torch_compile_triton.json.gz",
        "mi250_rocm_train.json.gz",
        "cpu_only_rank34.json.gz",
    ],
)
def test_fast_parse_matches_reference_parse(fixture, tmp_path, tiny_parallel_chunks):
    from profreport.traceio.load import _parse_reference

    raw = gzip.decompress((DATA / fixture).read_bytes())
    reference = _parse_reference(raw, "t")
    plain = tmp_path / "plain.json"
    plain.write_bytes(raw)
    fast = {
        "file, parallel": load_trace(plain, workers=1),
        "gzip, parallel": load_trace(DATA / fixture, workers=1),
        "one process": load_trace(plain, workers=0),
    }
    for how, trace in fast.items():
        trace.path = "t"
        _assert_same_trace(trace, reference)
        for definition in ("device", "cpu"):
            assert count_kernels(trace, definition) == count_kernels(reference, definition), how
    # two parallel parses, each split into many chunks, some of them parsed by the helper
    assert len(tiny_parallel_chunks) == 2
    for parties in tiny_parallel_chunks:
        assert len(parties) > 5 and 0 in parties and 1 in parties


def test_parallel_parse_of_tricky_text(tmp_path, tiny_parallel_chunks):
    from profreport.traceio.load import _parse_reference

    events = _tricky_events() * 4
    events.insert(7, {"ph": "X", "cat": "kernel", "name": "k", "pid": [0], "tid": 7, "ts": 1})
    events.insert(9, "not an event")
    doc = {"schemaVersion": 1, "traceEvents": events, "traceName": "x}, {y"}
    for option in (0, orjson.OPT_INDENT_2):
        raw = orjson.dumps(doc, option=option)
        path = tmp_path / "t.json"
        path.write_bytes(raw)
        trace = load_trace(path, workers=1)
        trace.path = "t"
        _assert_same_trace(trace, _parse_reference(raw, "t"))
    # A wrong guess at a chunk boundary (objects nested in args look like events) is caught, and
    # the result is still exact.
    nested = [{"name": f"n{j}"} for j in range(30)]
    doc["traceEvents"] = [dev("k}, {", i, 1, corr=i, nested=nested) for i in range(40)]
    raw = orjson.dumps(doc)
    path.write_bytes(raw)
    trace = load_trace(path, workers=1)
    trace.path = "t"
    _assert_same_trace(trace, _parse_reference(raw, "t"))
    assert count_kernels(trace).kernels == 40
    assert len(tiny_parallel_chunks) == 2  # the third parallel parse gave up: no proof


def test_parallel_parse_survives_a_dead_helper(tmp_path, monkeypatch, tiny_parallel_chunks):
    from profreport.traceio import chunks as _chunks

    real_send = _chunks.ChunkWorker.send

    def die_then_send(self, chunks, last=False):
        self.proc.kill()
        self.proc.wait()
        real_send(self, chunks, last)

    monkeypatch.setattr(_chunks.ChunkWorker, "send", die_then_send)
    raw = gzip.decompress((DATA / "a100_alexnet_inference.json.gz").read_bytes())
    path = tmp_path / "t.json"
    path.write_bytes(raw)
    c = count_kernels(load_trace(path, workers=1))
    assert (c.kernels, c.memcpy, c.memset, c.launches) == (79, 16, 3, 79)
    assert set(tiny_parallel_chunks[0]) == {0}  # this process parsed every chunk


def test_inductor_kernels_are_told_by_their_generated_names():
    from profreport.analysis.kernel_definitions import is_inductor_kernel

    generated = [
        "cpp_fused_gelu_view_1",
        "graph_0_cpp_fused_gelu_view_1",
        "triton_poi_fused_add_relu_0",
        "triton_red_fused_native_layer_norm_2",
        "triton_per_fused__softmax_3",
        "triton_tem_fused_mm_4",
    ]
    library = [
        "aten::_fused_sdp_choice",  # a dispatcher op, not a kernel Inductor wrote
        "aten::addmm",
        "fused_sigmoid_tanh_mul",  # TorchScript NNC's CPU kernel
        "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_fused",
        "void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, int, true>(float, float)",
        "mkldnn_convolution",
    ]
    assert [n for n in generated + library if is_inductor_kernel(n)] == generated
