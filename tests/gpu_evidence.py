"""A gpu-check's evidence as an H200 run should leave it, for the checks' tests.

Hand-made where no CUDA recording exists (numbers from the models' shapes: gated-residual at
batch 256 moves 256 MiB tensors); the compile kernel table and its analysis come from the
recorded A100 Triton trace (tests/data), and simple's eager convolutions from the recorded A100
AlexNet trace, each read by profreport's own code, so the checks meet real CUDA profiler rows.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch
from gpu_check.evidence import Evidence, StepOutcome
from gpu_check.spec import CONV, DECODER, EXPORT, GATED, MLP, OPT_IN, RUN_SPECS, SIMPLE
from gpu_check.steps import plan

from profreport.cli.analyze import analyze_paths
from profreport.modes import PreparedMode
from profreport.pipeline import _kernel_counts
from profreport.traceio import load_trace

DATA = Path(__file__).parent / "data"
TRITON_TRACE = DATA / "a100_torch_compile_triton.json.gz"
ALEXNET_TRACE = DATA / "a100_alexnet_inference.json.gz"
T = 256 * 256 * 1024 * 4  # one gated-residual tensor at batch 256: 256 MiB
L2 = 60 * 2**20
ALLOCATOR = "measured (CUDA caching allocator, max_memory_allocated)"


def recorded_kernels(trace: Path) -> dict[str, Any]:
    """profreport's `kernels` section of a mode whose profile is `trace` (a real CUDA trace)."""
    counts = _kernel_counts(
        load_trace(trace), PreparedMode("eager", fn=lambda: None), torch.device("cuda")
    )
    return counts.to_json()


def recorded_analysis(trace: Path) -> dict[str, Any]:
    """What `profreport analyze --format json` says of `trace` (one entry of its `traces`)."""
    document, _skipped = analyze_paths([str(trace)])
    return dict(document.to_json()["traces"][0])


def _row(name: str, calls: float, launched_by: str | None, kind: str = "kernel") -> dict:
    return {
        "name": name,
        "kind": kind,
        "calls": int(calls * 3),
        "calls_per_step": calls,
        "time_us_per_step": 10.0,
        "launched_by": launched_by,
    }


def mode(
    name: str,
    per_step: int,
    read: int,
    written: int,
    table: list[dict] | None = None,
    measured: dict | None = None,
    kernels: dict | None = None,
    **extra: Any,
) -> dict[str, Any]:
    k = kernels or {
        "definition": "device",
        "per_step": per_step,
        "launches": per_step,
        "memcpy": 0,
        "memset": 0,
        "graph_launches": 0,
        "steps": 3,
        "table": table if table is not None else [_row(f"{name}_kernel", per_step, "aten::add")],
    }
    return {
        "status": "ok",
        "error": None,
        "trace": f"tensorboard/{name}/{name}.pt.trace.json",
        "kernels": k,
        "bytes": {
            "read": read,
            "written": written,
            "source": "modeled",
            "measured": measured or {"available": False, "reason": "not requested"},
        },
        "latency_ms": {"median": 1.0 + per_step / 10},
        "roofline": {"consistent": True, "x_of_floor": 1.1 + per_step / 10, "note": ""},
        "peak_memory": {"bytes": 3 * T, "source": ALLOCATOR},
        **extra,
    }


def ncu(read: int, written: int, launches: int) -> dict[str, Any]:
    return {
        "available": True,
        "reason": None,
        "source": "measured (Nsight Compute)",
        "read": read,
        "written": written,
        "total": read + written,
        "launches": launches,
    }


def record(label: str, modes: dict[str, dict]) -> dict[str, Any]:
    spec = RUN_SPECS[label]
    return {
        "schema": "profreport.run/1",
        "model": {"name": spec.model, "dtype": spec.dtype},
        "device": {"type": "cuda", "name": "NVIDIA H200"},
        "ceilings": {
            "timer": "CUDA events around each sample",
            "l2_bytes": L2,
            "memory_bandwidth": {"value": 4.3e12},
            "matmul_rate": {"value": 6.9e14},
        },
        "modes": modes,
    }


def _gated() -> dict[str, Any]:
    nnc = {"fusion_groups": [{"kind": "prim::TensorExprGroup", "ops": ["aten::sigmoid"] * 7}]}
    fused = {"read": 2 * T, "written": T}
    return record(
        GATED,
        {
            "eager": mode("eager", 7, 10 * T, 7 * T, measured=ncu(10 * T + 4096, 7 * T - L2, 7)),
            "script": mode("script", 1, **fused, measured=ncu(2 * T, T, 1), compiler=nnc),
            "trace": mode("trace", 1, **fused, measured=ncu(2 * T, T - 2**20, 1), compiler=nnc),
            "optimize": mode("optimize", 1, **fused, measured=ncu(2 * T, T, 1), compiler=nnc),
            "compile": mode(
                "compile",
                1,
                **fused,
                measured=ncu(2 * T + 2**20, T, 1),
                kernels=recorded_kernels(TRITON_TRACE),
            ),
        },
    )


def _mlp() -> dict[str, Any]:
    gemm = "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT"
    eager_table = [
        _row(gemm, 2, "aten::addmm"),
        _row("void at::native::vectorized_layer_norm_kernel<c10::BFloat16>", 1, "aten::native_layer_norm"),
        _row("void at::native::vectorized_elementwise_kernel<GeluCUDAKernelImpl>", 1, "aten::gelu"),
        _row("void at::native::vectorized_elementwise_kernel<CUDAFunctor_add>", 1, "aten::add"),
    ]  # fmt: skip
    compile_table = [
        _row("triton_per_fused_native_layer_norm_0", 1, "triton_per_fused_native_layer_norm_0"),
        _row(gemm, 2, "extern_kernels.bias_addmm"),
        _row("triton_poi_fused_gelu_1", 1, "triton_poi_fused_gelu_1"),
    ]
    fusion = {
        "groups": [
            {"eager_ops": ["native_layer_norm"], "kernels": ["triton_per_fused_native_layer_norm_0"], "note": ""},
            {"eager_ops": ["addmm"], "kernels": ["library addmm"], "note": "library call"},
            {"eager_ops": ["gelu"], "kernels": ["triton_poi_fused_gelu_1"], "note": ""},
            {"eager_ops": ["addmm"], "kernels": ["library addmm"], "note": "library call"},
        ]
    }  # fmt: skip
    size = 64 * 128 * 256 * 2
    return record(
        MLP,
        {
            "eager": mode("eager", 5, 12 * size, 8 * size, table=eager_table),
            "script": mode("script", 5, 12 * size, 8 * size),
            "trace": mode("trace", 5, 12 * size, 8 * size),
            "optimize": mode("optimize", 5, 12 * size, 8 * size),
            "compile": mode("compile", 4, 9 * size, 5 * size, table=compile_table, fusion=fusion),
        },
    )


def _conv() -> dict[str, Any]:
    conv = "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw"
    eager_table = [
        _row(conv, 2, "aten::cudnn_convolution"),
        _row("void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, true, 1>", 2, "aten::cudnn_batch_norm"),
        _row("void at::native::vectorized_elementwise_kernel<4, clamp_min>", 2, "aten::relu"),
    ]  # fmt: skip
    optimize_table = [_row(conv + "_relu", 2, "aten::cudnn_convolution_relu")]
    size = 64 * 64 * 28 * 28 * 4
    optimize_compiler = {"op_counts": {"aten::cudnn_convolution_relu": 2}}
    return record(
        CONV,
        {
            "eager": mode("eager", 6, 8 * size, 6 * size, table=eager_table),
            "script": mode("script", 6, 8 * size, 6 * size),
            "trace": mode("trace", 6, 8 * size, 6 * size),
            "optimize": mode(
                "optimize", 2, 3 * size, 2 * size, table=optimize_table, compiler=optimize_compiler
            ),
            "compile": mode("compile", 4, 6 * size, 4 * size),
        },
    )


def _opt_in() -> dict[str, Any]:
    size = 64 * 128 * 256 * 2
    graphs = {
        "definition": "device",
        "per_step": 5,
        "launches": 1,
        "memcpy": 0,
        "memset": 0,
        "graph_launches": 1,
        "steps": 3,
        "table": [_row("triton_poi_fused_gelu_1", 1, None)],
    }
    autotuned = {
        "groups": [
            {"eager_ops": ["addmm"], "kernels": ["library addmm"], "note": "library call"},
            {"eager_ops": ["gelu"], "kernels": ["triton_poi_fused_gelu_1"], "note": ""},
            {"eager_ops": ["addmm"], "kernels": ["triton_tem_fused_addmm_2"], "note": ""},
        ]
    }
    return record(
        OPT_IN,
        {
            "eager": mode("eager", 5, 12 * size, 8 * size),
            "export": mode("export", 4, 9 * size, 5 * size, compiler={"package_bytes": 2_400_000}),
            "compile-max-autotune": mode(
                "compile-max-autotune", 4, 9 * size, 5 * size, fusion=autotuned
            ),
            "compile-cudagraphs": mode("compile-cudagraphs", 5, 9 * size, 5 * size, kernels=graphs),
        },
    )


def _simple() -> dict[str, Any]:
    size = 64 * 64 * 56 * 56 * 4
    fused = [_row("sm90_xmma_fprop_implicit_gemm_relu", 1, "aten::cudnn_convolution_relu")]
    compiler = {"op_counts": {"aten::cudnn_convolution_relu": 1, "aten::max_pool2d": 1}}
    return record(
        SIMPLE,
        {
            "eager": mode("eager", 79, 3 * size, size, kernels=recorded_kernels(ALEXNET_TRACE)),
            "script": mode("script", 79, 3 * size, size),
            "trace": mode("trace", 79, 3 * size, size),
            "optimize": mode("optimize", 2, 2 * size, size, table=fused, compiler=compiler),
            "compile": mode("compile", 3, 2 * size, size),
        },
    )


def _export() -> dict[str, Any]:
    size = 64 * 64 * 56 * 56 * 4
    return record(
        EXPORT,
        {
            "eager": mode("eager", 5, 3 * size, size),
            "export": mode("export", 3, 2 * size, size, compiler={"package_bytes": 90_000}),
        },
    )


def _decoder() -> dict[str, Any]:
    size = 32 * 256 * 4
    failed = {"status": "failed", "error": "torch.jit.script cannot compile Qwen2Model"}
    return record(
        DECODER,
        {
            "eager": mode("eager", 88, 40 * size, 30 * size),
            "script": failed,
            "trace": mode("trace", 91, 40 * size, 30 * size),
            "optimize": mode("optimize", 91, 40 * size, 30 * size),
            "compile": mode("compile", 29, 20 * size, 12 * size),
        },
    )


def _analysis(label: str, rec: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    traces = []
    for name, m in rec["modes"].items():
        if m["status"] != "ok":
            continue
        k = m["kernels"]
        if name == "compile" and label == GATED:
            entry = recorded_analysis(TRITON_TRACE)
        elif name == "eager" and label == SIMPLE:
            entry = recorded_analysis(ALEXNET_TRACE)
        else:
            entry = {
                "per_step": {
                    "kernels": k["per_step"],
                    "launches": k["launches"],
                    "graph_launches": k["graph_launches"],
                },
                "launch_api_counts": {"cudaLaunchKernel": k["launches"] * 3},
            }
        entry["path"] = str(run_dir / m["trace"])
        traces.append(entry)
    return {"traces": traces}


def _comparison(rec: dict[str, Any]) -> dict[str, Any]:
    return {
        "regressed": False,
        "modes": [
            {"mode": name, "metrics": [{"metric": "kernels_per_step", "change": 0}]}
            for name in rec["modes"]
        ],
    }


def good_evidence() -> Evidence:
    """Evidence of a gpu-check run on which every check should pass."""
    records = {
        GATED: _gated(),
        CONV: _conv(),
        MLP: _mlp(),
        OPT_IN: _opt_in(),
        SIMPLE: _simple(),
        DECODER: _decoder(),
        EXPORT: _export(),
    }
    run_dirs = {label: Path(f"/gpu-check/runs/{label}/run") for label in records}
    steps = {s.name: StepOutcome(s.name, "ok", seconds=20.0) for s in plan(wheels=None)}
    cuda = {
        "available": True,
        "device": "NVIDIA H200",
        "capability": "9.0",
        "memory_bytes": 143_771 * 2**20,
        "l2_bytes": L2,
        "runtime": "13.0",
        "driver": "580.159.04",
    }
    requirements = [
        {"requirement": "torch>=2.4", "installed": "2.11.0+cu130", "satisfied": True},
        {"requirement": "orjson>=3.9", "installed": "3.13.0", "satisfied": True},
    ]
    preflight = {
        "python": "3.12.3",
        "torch": "2.11.0+cu130",
        "triton": "3.6.0",
        "cuda": cuda,
        "fusers": {"nnc_can_fuse_on_gpu": True},
        "cudnn": {"available": True, "enabled": True, "version": 91300},
        "dependencies": {
            "version": "0.1.0",
            "location": "/tmp/gpu-check-x/site/profreport",
            "wheels_site": "/tmp/gpu-check-x/site",
            "requirements": requirements,
        },
        "ceilings": {
            "available": True,
            "copy_bytes_per_s": 4.3e12,
            "add_bytes_per_s": 4.1e12,
            "matmul_flops": 5.2e14,
            "benchmark_matmul_flops": 5.0e14,
        },
        "ncu": {
            "available": True,
            "version": "Version 2025.3.1.0",
            "kernels": 1,
            "read": 16_908_288,
            "written": 0,
            "expected_read": 16_777_216,
            "expected_written": 16_777_216,
        },
    }
    return Evidence(
        steps=steps,
        preflight=preflight,
        runs=records,
        run_dirs=run_dirs,
        analyses={label: _analysis(label, rec, run_dirs[label]) for label, rec in records.items()},
        comparison=_comparison(records[GATED]),
        rendered={"report.html": 250_000, "summary.md": 4_000, "run.json": 90_000},
        budget_s=470.0,
        elapsed_s=400.0,
    )


def copied(evidence: Evidence) -> Evidence:
    return copy.deepcopy(evidence)
