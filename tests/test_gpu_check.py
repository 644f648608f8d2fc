"""scripts/gpu-check's checks and summary table, on evidence an H200 run should leave (tests/
gpu_evidence.py: hand-made numbers, and real A100 trace rows read by profreport's own code).

Every check passes on the good evidence, and each one FAILs when the one thing it guards goes
wrong: a check no mutation here can fail is reported by the coverage test.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from gpu_check import checks
from gpu_check.checks import Result, format_table, run_checks, table_rows
from gpu_check.evidence import Evidence, StepOutcome
from gpu_check.spec import CONV, DECODER, EXPORT, GATED, MLP, OPT_IN, SIMPLE
from gpu_check.steps import plan

from tests.gpu_evidence import L2, T, copied, good_evidence


@pytest.fixture(scope="module")
def good() -> Evidence:
    return good_evidence()


def _by_name(results: list[Result]) -> dict[str, Result]:
    return {r.name: r for r in results}


def _mode(ev: Evidence, label: str, mode: str) -> dict[str, Any]:
    return ev.runs[label]["modes"][mode]


def test_every_check_passes_on_a_good_run(good):
    results = run_checks(good)
    assert [r.line() for r in results if r.status != "ok"] == []
    names = _by_name(results)
    assert len(names) == len(results)  # one line per check and mode, no duplicates
    # numbers are in the lines: what was compared, against what
    assert (
        "read 2560.0 MiB measured vs 2560.0 modeled (x1.00"
        in names[f"{GATED}.ncu_bytes[eager]"].detail
    )
    assert "7 kernels x L2 63 MB may stay unwritten" in names[f"{GATED}.ncu_bytes[eager]"].detail
    assert "cuLaunchKernel x1" in names[f"{GATED}.compile_triton"].detail
    assert "1 vs 7 kernels" in names[f"{GATED}.nnc_fusion[script]"].detail


def _set(
    path: Callable[[Evidence], dict[str, Any]], key: str, value: Any
) -> Callable[[Evidence], None]:
    def mutate(ev: Evidence) -> None:
        path(ev)[key] = value

    return mutate


def _fail_mode(label: str, mode: str) -> Callable[[Evidence], None]:
    def mutate(ev: Evidence) -> None:
        ev.runs[label]["modes"][mode] = {"status": "failed", "error": "RuntimeError: boom"}

    return mutate


def _analysis(label: str, mode: str) -> Callable[[Evidence], dict[str, Any]]:
    def find(ev: Evidence) -> dict[str, Any]:
        trace = ev.runs[label]["modes"][mode]["trace"]
        (entry,) = [t for t in ev.analyses[label]["traces"] if t["path"].endswith(trace)]
        return entry

    return find


def _timed_out(ev: Evidence) -> None:
    ev.steps["generate mlp-block"] = StepOutcome(
        "generate mlp-block", "timeout", seconds=110, timeout_s=110
    )


def _unclaimed_gemm(ev: Evidence) -> None:
    fusion = _mode(ev, MLP, "compile")["fusion"]
    fusion["groups"] = [g for g in fusion["groups"] if g["eager_ops"] != ["addmm"]]
    fusion["groups"].append(
        {"eager_ops": ["addmm", "addmm"], "kernels": [], "note": checks.NO_KERNEL_NOTE}
    )


def _swap_measured(ev: Evidence) -> None:
    eager, compiled = _mode(ev, GATED, "eager"), _mode(ev, GATED, "compile")
    eager["bytes"]["measured"]["total"] = 700 * 2**20
    compiled["bytes"]["measured"]["total"] = 4000 * 2**20


MUTATIONS: dict[str, tuple[str, Callable[[Evidence], None]]] = {
    "no CUDA": ("preflight.cuda", _set(lambda e: e.preflight["cuda"], "available", False)),
    "no NNC on GPU": ("preflight.nnc_gpu", _set(lambda e: e.preflight["fusers"], "nnc_can_fuse_on_gpu", False)),
    "no cuDNN": ("preflight.cudnn", _set(lambda e: e.preflight["cudnn"], "available", False)),
    "old requirement": (
        "preflight.dependencies",
        _set(lambda e: e.preflight["dependencies"]["requirements"][1], "satisfied", False),
    ),
    "source tree, not the wheel": (
        "preflight.dependencies",
        _set(lambda e: e.preflight["dependencies"], "location", "/repo/profreport"),
    ),
    "ncu reads half": ("preflight.ncu_probe", _set(lambda e: e.preflight["ncu"], "read", 8_000_000)),
    "ncu unavailable": (
        "preflight.ncu_probe",
        _set(lambda e: e.preflight["ncu"], "available", False),
    ),
    "ceilings disagree": (
        "preflight.ceilings",
        _set(lambda e: e.preflight["ceilings"], "add_bytes_per_s", 2.0e12),
    ),
    "a mode failed": (f"{GATED}.modes", _fail_mode(GATED, "trace")),
    "ran on cpu": (f"{CONV}.modes", _set(lambda e: e.runs[CONV]["device"], "type", "cpu")),
    "float32 mlp": (f"{MLP}.modes", _set(lambda e: e.runs[MLP]["model"], "dtype", "float32")),
    "no NNC group": (
        f"{GATED}.nnc_fusion[script]",
        _set(lambda e: _mode(e, GATED, "script")["compiler"], "fusion_groups", []),
    ),
    "NNC without fewer kernels": (
        f"{GATED}.nnc_fusion[trace]",
        _set(lambda e: _mode(e, GATED, "trace")["kernels"], "per_step", 7),
    ),
    "no driver launch": (
        f"{GATED}.compile_triton",
        _set(_analysis(GATED, "compile"), "launch_api_counts", {"cudaLaunchKernel": 3}),
    ),
    "no Triton kernel": (
        f"{GATED}.compile_triton",
        _set(lambda e: _mode(e, GATED, "compile")["kernels"], "table", []),
    ),
    "reads twice modeled": (
        f"{GATED}.ncu_bytes[eager]",
        _set(lambda e: _mode(e, GATED, "eager")["bytes"]["measured"], "read", 20 * T),
    ),
    "writes short by more than L2": (
        f"{GATED}.ncu_bytes[compile]",
        _set(lambda e: _mode(e, GATED, "compile")["bytes"]["measured"], "written", T - L2 - 2**20),
    ),
    "not measured": (
        f"{GATED}.ncu_bytes[script]",
        _set(lambda e: _mode(e, GATED, "script")["bytes"], "measured", {"available": False, "reason": "ncu not found"}),
    ),
    "measured out of order": (f"{GATED}.ncu_order", _swap_measured),
    "ncu saw another kernel count": (
        f"{GATED}.ncu_kernels",
        _set(lambda e: _mode(e, GATED, "eager")["bytes"]["measured"], "launches", 9),
    ),
    "slow conv fallback": (
        f"{CONV}.cudnn_convs",
        _set(lambda e: _mode(e, CONV, "eager")["kernels"]["table"][0], "launched_by", "aten::_slow_conv2d_forward"),
    ),
    "kernel linked to no op": (
        f"{SIMPLE}.cudnn_convs",
        _set(lambda e: _mode(e, SIMPLE, "eager")["kernels"]["table"][1], "launched_by", None),
    ),
    "BatchNorm left": (
        f"{CONV}.bn_folded",
        _set(lambda e: _mode(e, CONV, "optimize")["compiler"]["op_counts"], "aten::batch_norm", 2),
    ),
    "fused op without a kernel": (
        f"{CONV}.conv_relu",
        _set(lambda e: _mode(e, CONV, "optimize")["kernels"]["table"][0], "launched_by", "aten::add"),
    ),
    "GEMM unclaimed by compile": (f"{MLP}.cublas_extern", _unclaimed_gemm),
    "analyze counts differently": (
        f"{CONV}.analyze",
        _set(lambda e: _analysis(CONV, "optimize")(e)["per_step"], "kernels", 3),
    ),
    "trace not analyzed": (f"{MLP}.analyze", _set(lambda e: e.analyses[MLP], "traces", [])),
    "compare sees a change": (
        f"{GATED}.compare",
        _set(lambda e: e.comparison["modes"][0]["metrics"][0], "change", 1),
    ),
    "report too small": (f"{GATED}.render", _set(lambda e: e.rendered, "report.html", 100)),
    "no graph launch": (
        f"{OPT_IN}.cudagraphs",
        _set(lambda e: _mode(e, OPT_IN, "compile-cudagraphs")["kernels"], "graph_launches", 0),
    ),
    "no package": (f"{OPT_IN}.export", _set(lambda e: _mode(e, OPT_IN, "export")["compiler"], "package_bytes", None)),
    "a mode that must run failed": (f"{DECODER}.modes", _fail_mode(DECODER, "compile")),
    "max-autotune failed": (f"{OPT_IN}.max_autotune", _fail_mode(OPT_IN, "compile-max-autotune")),
    "GEMM unclaimed under max-autotune": (
        f"{OPT_IN}.max_autotune",
        _set(lambda e: _mode(e, OPT_IN, "compile-max-autotune")["fusion"]["groups"][2], "note", checks.NO_KERNEL_NOTE),
    ),
    "simple's fused op without a kernel": (
        f"{SIMPLE}.conv_relu",
        _set(lambda e: _mode(e, SIMPLE, "optimize")["kernels"], "table", []),
    ),
    "ceilings by perf_counter": (
        "ceilings.cuda_events",
        _set(lambda e: e.runs[MLP]["ceilings"], "timer", "time.perf_counter around each sample"),
    ),
    "median below floor": (
        "latency.floor",
        _set(lambda e: _mode(e, CONV, "compile")["roofline"], "consistent", False),
    ),
    "not timed": ("latency.floor", _set(lambda e: _mode(e, CONV, "eager"), "latency_ms", None)),
    "host peak": (
        "memory.allocator_peak",
        _set(lambda e: _mode(e, MLP, "trace")["peak_memory"], "source", "profiler memory events"),
    ),
    "a step timed out": ("steps.budget", _timed_out),
    "over budget": ("steps.budget", lambda e: setattr(e, "elapsed_s", 500.0)),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MUTATIONS))
def test_each_check_fails_when_what_it_guards_goes_wrong(good, case):
    target, mutate = MUTATIONS[case]
    ev = copied(good)
    mutate(ev)
    results = _by_name(run_checks(ev))
    assert results[target].status == "FAIL", results[target].line()


def _kind(name: str) -> str:
    """A check line's kind: its name without the run label and the mode ("*.ncu_bytes")."""
    name = re.sub(r"\[.*\]$", "", name)
    return re.sub(
        f"^({'|'.join([GATED, OPT_IN, MLP, CONV, SIMPLE, DECODER, EXPORT])})\\.", "*.", name
    )


def test_every_check_has_a_case_that_fails_it(good):
    kinds = {_kind(r.name) for r in run_checks(good)}
    assert kinds - {_kind(target) for target, _ in MUTATIONS.values()} == set()
    assert len(kinds) == len(checks.CHECKS)  # each registered check has lines of its own kind


def test_conv_relu_is_skipped_when_cudnn_did_not_fuse(good):
    ev = copied(good)
    _mode(ev, CONV, "optimize")["compiler"]["op_counts"] = {"aten::cudnn_convolution": 2}
    _mode(ev, CONV, "optimize")["kernels"]["table"][0]["launched_by"] = "aten::cudnn_convolution"
    result = _by_name(run_checks(ev))[f"{CONV}.conv_relu"]
    assert result.status == "skip"
    assert "left convolution and ReLU apart" in result.detail


def test_a_run_that_timed_out_fails_its_checks_and_says_why(good):
    ev = copied(good)
    del ev.runs[MLP], ev.analyses[MLP]
    _timed_out(ev)
    results = _by_name(run_checks(ev))
    for name in (f"{MLP}.modes", f"{MLP}.cublas_extern", f"{MLP}.analyze"):
        assert results[name].status == "FAIL"
        assert "generate mlp-block: timed out after 110 s (limit 110 s)" in results[name].detail
    # the other runs' checks stand
    assert results[f"{GATED}.ncu_order"].status == "ok"


def test_a_run_left_out_of_a_rerun_is_skipped_not_failed(good):
    ev = copied(good)
    del ev.runs[OPT_IN], ev.steps[f"generate {OPT_IN}"]
    results = _by_name(run_checks(ev))
    assert results[f"{OPT_IN}.cudagraphs"].status == "skip"
    assert results[f"{OPT_IN}.modes"].detail == f"{OPT_IN} is not in this check's runs"


def test_a_check_that_raises_is_a_fail_line():
    def broken(_ev: Evidence) -> list[Result]:
        raise KeyError("kernels")

    (result,) = run_checks(Evidence(), [broken])
    assert (result.name, result.status) == ("broken", "FAIL")
    assert result.detail == "check raised KeyError: 'kernels'"


def test_no_evidence_at_all_fails_every_check():
    steps = {s.name: StepOutcome(s.name, "failed", 3.0, 1, 100, "boom") for s in plan()}
    results = run_checks(Evidence(steps=steps))
    # only the time check holds: nothing ran late
    assert [r.name for r in results if r.status != "FAIL"] == ["steps.budget"]
    assert _by_name(results)["preflight.cuda"].detail.endswith("preflight: exit 1 after 3 s (boom)")


def test_table_has_kernels_launches_bytes_and_latency_per_mode(good):
    rows = table_rows(good)
    assert len(rows) == 31  # 5 + 5 + 5 + 4 + 5 + 5 + 2 modes
    eager = next(r for r in rows if r["run"] == GATED)
    assert (eager["run"], eager["mode"], eager["kernels"], eager["launches"]) == (
        GATED,
        "eager",
        7,
        7,
    )
    assert eager["modeled_bytes"] == 17 * T
    assert eager["measured_bytes"] == 10 * T + 4096 + 7 * T - L2
    text = format_table(rows)
    lines = text.splitlines()
    assert lines[0].split() == [
        "run", "mode", "status", "kernels", "launches", "graphs", "modeled", "MiB", "measured",
        "MiB", "meas/model", "median", "ms",
    ]  # fmt: skip
    assert next(line for line in lines if line.startswith(GATED)).split() == [
        GATED,
        "eager",
        "ok",
        "7",
        "7",
        "0",
        "4352.0",
        "4292.0",
        "0.99",
        "1.700",
    ]
    graphs = next(line for line in lines if "compile-cudagraphs" in line)
    assert graphs.split()[3:6] == ["5", "1", "1"]
    assert re.search(r"mlp-block\s+compile\s+ok\s+4\s+4\s+0\s+56\.0\s+-\s+-\s+1\.400", text)


def test_table_shows_failed_modes_without_numbers(good):
    ev = copied(good)
    _fail_mode(GATED, "trace")(ev)
    lines = format_table(table_rows(ev)).splitlines()
    trace = next(line for line in lines if " trace " in line and line.startswith(GATED))
    assert trace.split() == [GATED, "trace", "failed", "-", "-", "-", "-", "-", "-", "-"]


def test_analyze_counts_leave_out_what_only_the_record_counts(good):
    """On CPU the record also counts ops the TorchScript interpreter ran unrecorded (its
    `unrecorded` list); the trace cannot show them, so analyze's count is the rest."""
    ev = copied(good)
    kernels = _mode(ev, CONV, "optimize")["kernels"]
    kernels["per_step"] += 2
    kernels["unrecorded"] = ["prim::mkldnn_convolution"] * 2
    assert _by_name(run_checks(ev))[f"{CONV}.analyze"].status == "ok"
    kernels["unrecorded"] = ["prim::mkldnn_convolution"]
    assert _by_name(run_checks(ev))[f"{CONV}.analyze"].status == "FAIL"


def test_compare_and_render_are_skipped_when_their_run_is_not_in_the_rerun(good):
    ev = copied(good)
    ev.comparison, ev.rendered = None, None
    del ev.steps["compare"], ev.steps["render"]
    results = _by_name(run_checks(ev))
    assert results[f"{GATED}.compare"].status == "skip"
    assert results[f"{GATED}.render"].status == "skip"
