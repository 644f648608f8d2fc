"""Writes traces shaped like Kineto's CUPTI range-profiler output (per-kernel counters, no
``kernel`` events), with values chosen so that every total can be checked by hand.

Shape, after ``CuptiRangeProfilerSession::addRangeEvents``: one ``cuda_profiler_range`` event per
kernel launch, named after the kernel, on ``pid`` = device id, its ``args`` the counter values,
its ``ts`` / ``dur`` the profiled span divided evenly; beside them the CPU side as usual
(``ProfilerStep#N``, ``cpu_op`` operators, ``cudaLaunchKernel`` in ``cuda_runtime``) and the
``deviceProperties`` list.
"""

from __future__ import annotations

FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
FADD = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"
FMUL = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"
DFMA = "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum"
SM_FFMA = "sm__sass_thread_inst_executed_op_ffma_pred_on.sum"  # same count as FFMA, other unit
READ = "dram__bytes_read.sum"
WRITE = "dram__bytes_write.sum"
WARPS = "sm__warps_active.avg.pct_of_peak_sustained_active"
GEMM = "ampere_sgemm_128x64_nn"
RELU = "void at::native::vectorized_elementwise_kernel<4, at::native::relu_kernel>"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::add_kernel>"

# (launching op, kernel, counters) per launch, the same in every step.
# FLOPs: gemm 2 x 1000 = 2000 (the sm__ duplicate is not added), relu 100, add 200 + 2 x 10 = 220.
STEP = [
    ("aten::addmm", GEMM, {FFMA: 1000, SM_FFMA: 1000, READ: 4096, WRITE: 1024, WARPS: 50}),
    ("aten::relu", RELU, {FMUL: 100, READ: 512, WRITE: 512, WARPS: 20}),
    ("aten::add", ADD, {FADD: 200, DFMA: 10, READ: 1024, WRITE: 512, WARPS: 30}),
]
STEPS = 2
FLOPS_PER_STEP = 2000 + 100 + 220
READ_PER_STEP = 4096 + 512 + 1024
WRITE_PER_STEP = 1024 + 512 + 512
A100 = {"id": 0, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0}


def x_event(
    name: str, ts: float, dur: float, cat: str = "cpu_op", pid: int = 1, tid: int = 1, **args
) -> dict:
    """A complete ("ph": "X") event in Kineto's shape; the tests' traces are built from these."""
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def cpu(name: str, ts: float, dur: float, cat: str = "cpu_op", **args) -> dict:
    return x_event(name, ts, dur, cat, **args)


def counter_trace(steps: int = STEPS, launches: bool = True, ranges: bool = True) -> dict:
    """The whole document; ``launches=False`` drops the runtime calls, ``ranges=False`` the
    device side (what a trace with launch calls but no device activity looks like)."""
    events: list[dict] = []
    corr = 0
    t = 1000.0
    for s in range(steps):
        events.append(cpu(f"ProfilerStep#{s}", t, 300, cat="user_annotation"))
        for i, (op, _, _) in enumerate(STEP):
            start = t + 10 + 90 * i
            events.append(cpu(op, start, 80, **{"External id": corr + 1}))
            if launches:
                corr += 1
                events.append(
                    cpu(
                        "cudaLaunchKernel",
                        start + 10,
                        20,
                        cat="cuda_runtime",
                        correlation=corr,
                        **{"External id": corr},
                    )
                )
        t += 300
    if ranges:
        n = steps * len(STEP)
        span_start, span = 1000.0, 300.0 * steps  # Kineto: the profiled span split evenly
        for r in range(n):
            _, kernel, counters = STEP[r % len(STEP)]
            events.append(
                {
                    "ph": "X",
                    "cat": "cuda_profiler_range",
                    "name": kernel,
                    "pid": 0,
                    "tid": 0,
                    "ts": span_start + r * span / n,
                    "dur": span / n,
                    "args": dict(counters),
                }
            )
    return {"schemaVersion": 1, "deviceProperties": [A100], "traceEvents": events}
