"""A gpu-check's evidence for the checks' tests, from the run recorded on an H200
(tests/data/runs/h200/: run.json.gz and traces of simple, decoder-lm and gated-residual, and
gpu-check.json.gz, the check's own output).

- the runs, their raw traces, the steps as that check recorded them;
- analyze, compare and render made again by today's profreport on copies of those runs (the
  H200 check ran them too; their outputs were not kept);
- the preflight readings read back from the lines gpu-check printed of them (that run kept no
  preflight.json; gpu-check.json keeps the readings from now on);
- for the runs never recorded on a GPU (export, cudagraphs, max-autotune, conv-bn-relu,
  mlp-block), records and traces made by hand from the models' shapes (`handmade_runs`),
  so their checks have something to pass and fail on until a GPU run records them.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
import shutil
from pathlib import Path
from typing import Any

from gpu_check.evidence import Evidence, StepOutcome, read_traces
from gpu_check.spec import (
    COMPARED,
    CONV,
    CUDAGRAPHS,
    EXPORT,
    MAX_AUTOTUNE,
    MLP,
    RENDERED,
    RUN_SPECS,
)

H200 = Path(__file__).parent / "data" / "runs" / "h200"
RECORDED = ("simple", "decoder-lm", "gated-residual")
NEVER_RECORDED = (EXPORT, CUDAGRAPHS, MAX_AUTOTUNE, CONV, MLP)
GiB = 2**30


def recorded_summary() -> dict[str, Any]:
    """gpu-check.json as the H200 run wrote it."""
    return dict(json.loads(gzip.decompress((H200 / "gpu-check.json.gz").read_bytes())))


def unpacked_runs(parent: Path) -> dict[str, Path]:
    """Copies of the recorded run folders under `parent`, each file as generate wrote it (the
    checked-in copies are gzipped)."""
    found = {}
    for label in RECORDED:
        folder = Path(shutil.copytree(H200 / label, parent / label))
        for packed in folder.rglob("*.gz"):
            packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
            packed.unlink()
        found[label] = folder
    return found


def _detail(summary: dict[str, Any], name: str) -> str:
    return next(str(c["detail"]) for c in summary["checks"] if c["name"] == name)


def preflight_from_lines(summary: dict[str, Any]) -> dict[str, Any]:
    """The preflight readings, as far as the lines gpu-check printed of them hold them."""
    cuda = re.match(
        r"(?P<device>.+?) \(sm (?P<cap>[\d.]+), (?P<mem>\d+) GiB, L2 (?P<l2>\d+) MB\); torch "
        r"(?P<torch>\S+), CUDA (?P<cuda>\S+), driver (?P<driver>\S+), triton (?P<triton>\S+), "
        r"python (?P<python>\S+)$",
        _detail(summary, "preflight.cuda"),
    )
    assert cuda is not None
    deps = _detail(summary, "preflight.dependencies")
    version, location, listed = re.match(r"profreport (\S+) from (\S+); (.*)$", deps).groups()  # type: ignore[union-attr]
    requirements = [
        {"requirement": req, "installed": have, "satisfied": True}
        for req, have in re.findall(r"(\S+) \(([^)]+)\)", listed)
    ]
    ncu = re.match(
        r"(?P<version>.+?): (?P<kernels>\d+) kernel, DRAM read (?P<read>[\d.]+) MB of "
        r"(?P<expected>[\d.]+) MB its input holds.*written (?P<written>[\d.]+) MB",
        _detail(summary, "preflight.ncu_probe"),
    )
    assert ncu is not None
    ceilings = re.match(
        r"copy (?P<copy>[\d.]+) TB/s vs add (?P<add>[\d.]+) .*matmul (?P<mm>\d+) vs "
        r"(?P<bench>\d+) TFLOP/s",
        _detail(summary, "preflight.ceilings"),
    )
    assert ceilings is not None
    cudnn = re.match(r"cuDNN (\d+), enabled (\w+)", _detail(summary, "preflight.cudnn"))
    assert cudnn is not None
    return {
        "python": cuda["python"],
        "torch": cuda["torch"],
        "triton": cuda["triton"],
        "cuda": {
            "available": True,
            "device": cuda["device"],
            "capability": cuda["cap"],
            "memory_bytes": int(cuda["mem"]) * GiB,
            "l2_bytes": int(cuda["l2"]) * 10**6,
            "multiprocessors": None,
            "runtime": cuda["cuda"],
            "driver": cuda["driver"],
        },
        "fusers": {"nnc_can_fuse_on_gpu": "= True" in _detail(summary, "preflight.nnc_gpu")},
        "cudnn": {"available": True, "enabled": cudnn[2] == "True", "version": int(cudnn[1])},
        "dependencies": {
            "version": version,
            "location": location,
            "wheels_site": location.rsplit("/", 1)[0],
            "requirements": requirements,
        },
        "ncu": {
            "available": True,
            "version": ncu["version"],
            "kernels": int(ncu["kernels"]),
            "read": round(float(ncu["read"]) * 1e6),
            "written": round(float(ncu["written"]) * 1e6),
            "expected_read": round(float(ncu["expected"]) * 1e6),
            "expected_written": round(float(ncu["expected"]) * 1e6),
        },
        "ceilings": {
            "available": True,
            "copy_bytes_per_s": float(ceilings["copy"]) * 1e12,
            "add_bytes_per_s": float(ceilings["add"]) * 1e12,
            "matmul_flops": float(ceilings["mm"]) * 1e12,
            "benchmark_matmul_flops": float(ceilings["bench"]) * 1e12,
        },
    }


def _profreport(*argv: str) -> None:
    from profreport.cli import main

    assert main(list(argv)) == 0, argv


def h200_evidence(work: Path) -> Evidence:
    """The H200 check's evidence, with analyze, compare and render made again under `work`."""
    summary = recorded_summary()
    folders = unpacked_runs(work / "runs")
    runs = {label: json.loads((f / "run.json").read_text()) for label, f in folders.items()}
    steps = {
        s["name"]: StepOutcome(**s)
        for s in summary["steps"]
        if s["name"] not in ("analyze", "compare", "render")  # made again below, per today's plan
    }
    analyses = {}
    for label, folder in folders.items():
        traces = [str(folder / m["trace"]) for m in runs[label]["modes"].values() if m.get("trace")]
        out = work / "analyze" / label
        _profreport("analyze", "--format", "json", "--out", str(out), *traces)
        analyses[label] = json.loads((out / "analysis.json").read_text())
        steps[f"analyze {label}"] = StepOutcome(f"analyze {label}", "ok", 1.0, 0, 60.0)
    base, head = (folders[label] for label in COMPARED)
    _profreport(
        "compare", str(base), str(head), "--allow-different-models", "--format", "json",
        "--out", str(work / "compare.json"),
    )  # fmt: skip
    _profreport("render", str(folders[RENDERED]), "--out", str(work / "render"))
    for name in ("compare", "render"):
        steps[name] = StepOutcome(name, "ok", 1.0, 0, 30.0)
    rendered = work / "render"
    return Evidence(
        steps=steps,
        preflight=preflight_from_lines(summary),
        runs=runs,
        run_dirs=folders,
        traces={label: read_traces(runs[label], folders[label]) for label in runs},
        analyses=analyses,
        comparison=json.loads((work / "compare.json").read_text()),
        rendered={p.name: p.stat().st_size for p in rendered.iterdir() if p.is_file()},
        rendered_summary=(rendered / "summary.md").read_text(),
        budget_s=float(summary["budget_s"]),
        elapsed_s=float(summary["elapsed_s"]),
    )


# ---------------------------------------------------------------------------------------------
# runs never recorded on a GPU: made by hand, traces included
# ---------------------------------------------------------------------------------------------

H200_PROPS = {
    "id": 0,
    "name": "NVIDIA H200",
    "totalGlobalMem": 150109880320,
    "computeMajor": 9,
    "computeMinor": 0,
    "numSms": 132,
}


def synthetic_trace(
    kernels: list[tuple[str, str, str]], steps: int = 3, input_dims: list[int] | None = None
) -> dict[str, Any]:
    """A Chrome trace as the profiler writes one: `steps` ProfilerStep windows, each running
    `kernels` as (kernel name, the op that launches it, the launch call) in order, a graph
    launch's kernels all linked to one cudaGraphLaunch."""
    events: list[dict[str, Any]] = []
    t, correlation = 0.0, 0
    for step in range(steps):
        start = t
        graph_call: int | None = None
        for kernel, op, call in kernels:
            events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": t,
                           "dur": 8.0, "args": {"Input Dims": [input_dims or [1024, 1024]],
                                                "Input type": ["c10::BFloat16"]}})  # fmt: skip
            if call == "cudaGraphLaunch" and graph_call is not None:
                link = graph_call
            else:
                correlation += 1
                link = correlation
                events.append({"ph": "X", "cat": "cuda_driver" if call.startswith("cu")
                               and not call.startswith("cuda") else "cuda_runtime",
                               "name": call, "pid": 1, "tid": 1, "ts": t + 1, "dur": 2.0,
                               "args": {"correlation": link}})  # fmt: skip
                if call == "cudaGraphLaunch":
                    graph_call = link
            events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7,
                           "ts": t + 5, "dur": 3.0, "args": {"correlation": link}})  # fmt: skip
            t += 10
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step + 2}",
                       "pid": 1, "tid": 1, "ts": start - 0.5, "dur": t - start})  # fmt: skip
        t += 10
    return {"deviceProperties": [H200_PROPS], "traceEvents": events}


def _row(name: str, calls: float, launched_by: str) -> dict[str, Any]:
    return {"name": name, "kind": "kernel", "calls": int(calls * 3), "calls_per_step": calls,
            "launched_by": launched_by}  # fmt: skip


def _mode(
    kernels: list[tuple[str, str, str]], graph: bool = False, **extra: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A mode's record entry and its trace, from the kernels one step runs."""
    calls: dict[tuple[str, str], int] = {}
    for name, op, _ in kernels:
        calls[(name, op)] = calls.get((name, op), 0) + 1
    n = len(kernels)
    launches = 1 if graph else n
    entry = {
        "status": "ok",
        "error": None,
        "kernels": {
            "definition": "device",
            "per_step": n,
            "launches": launches,
            "memcpy": 0,
            "memset": 0,
            "graph_launches": 1 if graph else 0,
            "steps": 3,
            "table": [_row(k, c, op) for (k, op), c in calls.items()],
        },
        "bytes": {
            "read": 16 * 2**20,
            "written": 8 * 2**20,
            "source": "modeled",
            "measured": {"available": False, "reason": "not requested"},
        },
        "latency_ms": {"median": 0.05 + n / 100},
        "peak_memory": {
            "bytes": 64 * 2**20,
            "source": "measured (CUDA caching allocator, max_memory_allocated)",
        },
        **extra,
    }
    return entry, synthetic_trace(kernels)


def _record(label: str, modes: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> tuple[
    dict[str, Any], dict[str, Any]
]:  # fmt: skip
    spec = RUN_SPECS[label]
    record = {
        "model": {"name": spec.model, "dtype": spec.dtype},
        "device": {
            "type": "cuda",
            "name": "NVIDIA H200",
            "capability": "9.0",
            "memory_gib": 139.8,
            "multiprocessors": 132,
        },
        "env": {
            "torch": "2.11.0+cu130",
            "cuda_runtime": "13.0",
            "cudnn": 91900,
            "fusers": {"nnc_can_fuse_on_gpu": True},
        },
        "ceilings": {
            "timer": "CUDA events around each sample",
            "l2_bytes": 62914560,
            "memory_bandwidth": {"value": 4.17e12},
            "matmul_rate": {"value": 5.08e13},
            "key": {"device_name": "NVIDIA H200"},
        },
        "modes": {
            name: {**entry, "trace": f"tensorboard/{name}/{name}.pt.trace.json"}
            for name, (entry, _) in modes.items()
        },
    }
    return record, {name: trace for name, (_, trace) in modes.items()}


GEMM = "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT"
LN = "void at::native::vectorized_layer_norm_kernel<c10::BFloat16, float>"
GELU = "void at::native::vectorized_elementwise_kernel<4, GeluCUDAKernelImpl>"
ADD = "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add>"
CONV_KERNEL = "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw"
BN = "void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, true, 1>"
RELU = "void at::native::vectorized_elementwise_kernel<4, clamp_min>"
LIBRARY_GROUPS = [
    {"eager_ops": ["native_layer_norm"], "kernels": ["triton_per_fused_native_layer_norm_0"], "note": ""},
    {"eager_ops": ["addmm"], "kernels": ["library addmm"], "note": "library call"},
    {"eager_ops": ["gelu"], "kernels": ["triton_poi_fused_gelu_1"], "note": ""},
    {"eager_ops": ["addmm"], "kernels": ["library addmm"], "note": "library call"},
]  # fmt: skip


def _mlp_eager() -> tuple[dict[str, Any], dict[str, Any]]:
    return _mode([
        (LN, "aten::native_layer_norm", "cudaLaunchKernel"),
        (GEMM, "aten::addmm", "cudaLaunchKernelExC"),
        (GELU, "aten::gelu", "cudaLaunchKernel"),
        (GEMM, "aten::addmm", "cudaLaunchKernelExC"),
        (ADD, "aten::add", "cudaLaunchKernel"),
    ])  # fmt: skip


def _mlp_compiled(**extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    return _mode([
        ("triton_per_fused_native_layer_norm_0", "triton_per_fused_native_layer_norm_0", "cuLaunchKernel"),
        (GEMM, "aten::addmm", "cudaLaunchKernelExC"),
        ("triton_poi_fused_gelu_1", "triton_poi_fused_gelu_1", "cuLaunchKernel"),
        (GEMM, "aten::addmm", "cudaLaunchKernelExC"),
    ], fusion={"groups": copy.deepcopy(LIBRARY_GROUPS)}, **extra)  # fmt: skip


def handmade_runs() -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Records and traces (as Chrome-trace documents) of the runs no GPU has recorded yet."""
    conv_eager = _mode([
        (CONV_KERNEL, "aten::cudnn_convolution", "cudaLaunchKernelExC"),
        (BN, "aten::cudnn_batch_norm", "cudaLaunchKernel"),
        (RELU, "aten::clamp_min", "cudaLaunchKernel"),
        (CONV_KERNEL, "aten::cudnn_convolution", "cudaLaunchKernelExC"),
        (BN, "aten::cudnn_batch_norm", "cudaLaunchKernel"),
        (RELU, "aten::clamp_min", "cudaLaunchKernel"),
    ])  # fmt: skip
    fused = [(CONV_KERNEL + "_relu", "aten::cudnn_convolution_relu", "cudaLaunchKernelExC")] * 2
    conv_optimized = _mode(fused, compiler={"op_counts": {"aten::cudnn_convolution_relu": 2}})
    plain = _mode([(CONV_KERNEL, "aten::cudnn_convolution", "cudaLaunchKernelExC")] * 2)
    graphed = [(GEMM, "aten::addmm", "cudaGraphLaunch"), ("triton_poi_fused_gelu_1", "x",
               "cudaGraphLaunch"), (GEMM, "aten::addmm", "cudaGraphLaunch")]  # fmt: skip
    autotuned = {
        "groups": [
            {"eager_ops": ["addmm"], "kernels": ["library addmm"], "note": "library call"},
            {"eager_ops": ["gelu"], "kernels": ["triton_poi_fused_gelu_1"], "note": ""},
            {"eager_ops": ["addmm"], "kernels": ["triton_tem_fused_addmm_2"], "note": ""},
        ]
    }
    aoti = [("triton_poi_fused_convolution_0", "aoti_torch_cuda_convolution", "cuLaunchKernel"),
            (CONV_KERNEL, "aten::cudnn_convolution", "cudaLaunchKernelExC"),
            ("triton_poi_fused_relu_1", "x", "cuLaunchKernel")]  # fmt: skip
    runs = {
        CONV: _record(CONV, {
            "eager": conv_eager, "script": conv_eager, "trace": conv_eager,
            "optimize": conv_optimized, "compile": plain,
        }),
        MLP: _record(MLP, {
            "eager": _mlp_eager(), "script": _mlp_eager(), "trace": _mlp_eager(),
            "optimize": _mlp_eager(), "compile": _mlp_compiled(),
        }),
        CUDAGRAPHS: _record(CUDAGRAPHS, {
            "eager": _mlp_eager(), "compile-cudagraphs": _mode(graphed, graph=True),
        }),
        MAX_AUTOTUNE: _record(MAX_AUTOTUNE, {
            "eager": _mlp_eager(),
            "compile-max-autotune": _mode([(GEMM, "aten::addmm", "cudaLaunchKernelExC"),
                                           ("triton_tem_fused_addmm_2", "x", "cuLaunchKernel")],
                                          fusion=autotuned),
        }),
        EXPORT: _record(EXPORT, {
            "eager": plain, "export": _mode(aoti, compiler={"package_bytes": 90_000}),
        }),
    }  # fmt: skip
    return runs


def with_handmade_runs(evidence: Evidence, work: Path) -> Evidence:
    """`evidence` and the hand-made runs, as if their steps had run (their traces written under
    `work`)."""
    from gpu_check import rawtrace

    ev = copy.deepcopy(evidence)
    for label, (record, traces) in handmade_runs().items():
        ev.runs[label] = record
        ev.run_dirs[label] = work / label
        ev.traces[label] = {m: rawtrace.from_document(t) for m, t in traces.items()}
        ev.steps[f"generate {label}"] = StepOutcome(f"generate {label}", "ok", 20.0, 0, 100.0)
        ev.steps[f"analyze {label}"] = StepOutcome(f"analyze {label}", "ok", 1.0, 0, 60.0)
        # what analyze would say of these traces: their raw counts (the check of analyze itself
        # is tested on the recorded runs)
        ev.analyses[label] = {
            "traces": [
                {"path": str(work / label / record["modes"][m]["trace"]), "per_step": t.per_step()}
                for m, t in ev.traces[label].items()
                if isinstance(t, rawtrace.RawTrace)
            ]
        }
    ev.elapsed_s = min(ev.elapsed_s, ev.budget_s)
    return ev


def copied(evidence: Evidence) -> Evidence:
    return copy.deepcopy(evidence)
