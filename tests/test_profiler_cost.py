"""The light pass and the profiler's measured cost (capture/profiling, analysis/profiler_cost,
pipeline._light_pass): how many steps, the load check around it, the module tree's times and
shares, and the build time's payback in the report."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from profreport.analysis.derive import derived_run
from profreport.analysis.module_tree import LIGHT_TIME_METHOD, module_tree
from profreport.analysis.profiler_cost import kernel_time_per_call, median_step, mode_median_step
from profreport.capture.noise import Snapshot, watch
from profreport.capture.profiling import LightSchedule, ProfilingFailed, light_schedule
from profreport.files import LIGHT_TRACES
from profreport.light_pass import light_pass
from profreport.modes import mode_analyses
from profreport.record.model import (
    Bytes,
    KernelCounts,
    KernelRow,
    KernelTime,
    ModeResult,
    OkMode,
    ProfilerCost,
    Run,
    StepTime,
    TensorIO,
    TimeBreakdown,
)
from profreport.render import html, markdown
from profreport.render.module_view import module_tree_view
from profreport.render.viewmodel import build_view

CPU = torch.device("cpu")


@pytest.mark.parametrize(
    ("walls", "at_least", "schedule"),
    [
        # two modes of 5 ms steps: a round (each twice) is 20 ms; 0.6 s would need 30 rounds
        ([[5000.0] * 3] * 2, 3, LightSchedule(rounds=20)),
        # 100 ms: 3 rounds would do, 5 at least; steps this long are not repeated
        ([[100_000.0] * 3], 3, LightSchedule(rounds=5, repeat=1)),
        ([[30_000.0, 50_000.0, 10_000.0]], 3, LightSchedule(rounds=5)),  # the median: 30 ms
        ([[1000.0], [2000.0], [3000.0]], 3, LightSchedule(rounds=20)),  # 75 would: at most 20
        ([[100_000.0]], 12, LightSchedule(rounds=12, repeat=1)),  # never fewer than --active-steps
        # one mode's 3 s steps: the run's 3 rounds, no warm-up round, each mode once a round
        ([[3e6, 2.5e6, 4e6], [1000.0]], 3, LightSchedule(rounds=3, warmup_rounds=0, repeat=1)),
        ([], 3, LightSchedule(rounds=20)),
    ],
)
def test_the_light_pass_runs_enough_rounds_for_about_a_third_of_a_second_a_mode(
    walls, at_least, schedule
):
    assert light_schedule(walls, at_least) == schedule


def _reads(*shares: float):
    """A fake noise reader: each pair of reads (before, after) gives the next share of other
    processes' CPU time."""
    readings = []
    for share in shares:
        readings += [Snapshot(0.0, 0, 0, 0, 0), Snapshot(0.0, int(share * 1000), 1000, 0, 0)]
    it = iter(readings)
    return lambda: next(it)


@pytest.mark.parametrize(
    ("shares", "attempts", "busy"),
    [((0.0,), 1, False), ((0.5, 0.0), 2, False), ((0.5, 0.6), 2, True)],
)
def test_the_light_pass_interleaves_the_modes_and_on_a_busy_machine_runs_again_then_says_so(
    tmp_path, shares, attempts, busy
):
    read = _reads(*shares)
    order: list[str] = []

    def fn(name: str, size: int):
        def call():
            order.append(name)
            return torch.ones(size) * 2

        return call

    fns = {"eager": fn("eager", 8), "compile": fn("compile", 64)}
    schedule = LightSchedule(rounds=5)
    found = light_pass(fns, CPU, lambda: None, tmp_path, schedule, lambda: watch(read))
    assert list(found) == ["eager", "compile"]
    # one warm-up round and five read, each mode twice in a row, the order rotating by round
    per_pass = (1 + 5) * 2 * 2
    assert len(order) == attempts * per_pass
    assert order[:4] == ["eager", "eager", "compile", "compile"]
    assert order[4:8] == ["compile", "compile", "eager", "eager"]
    for tb in found.values():
        assert tb.attempts == attempts and (tb.warmup_rounds, tb.repeat) == (1, 2)
        assert tb.steps is not None and len(tb.steps) == 5
        assert tb.trace == "time/light.pt.trace.json.gz"
        assert tb.kernels and tb.kernels[0].name == "aten::mul"
        cost = tb.profiler_cost
        assert cost is not None and cost.calls == 200 and cost.steps == 5
        assert cost.events_per_step >= 200 and cost.per_event_us >= 0 and cost.per_step_us > 0
        if busy:
            assert tb.busy is not None
            assert "used 60% of the machine's CPU time while profiling" in tb.busy[0]
        else:
            assert tb.busy is None
    assert (tmp_path / "time" / "light.pt.trace.json.gz").is_file()


def test_a_mode_that_raises_in_the_light_pass_is_named(tmp_path):
    def broken():
        raise RuntimeError("out of memory")

    with pytest.raises(ProfilingFailed) as info:
        light_pass(
            {"eager": lambda: None, "compile": broken},
            CPU,
            lambda: None,
            tmp_path,
            LightSchedule(rounds=5),
        )
    assert info.value.mode == "compile" and "out of memory" in str(info.value)


def _step(wall: float, op: float, events: dict[str, int]) -> StepTime:
    return StepTime(
        name="ProfilerStep#2",
        wall_us=wall,
        op_us=op,
        dispatch_us=0.0,
        wrapper_us=0.0,
        python_us=wall - op,
        dispatched_ops=6,
        events=events,
    )


def _mode(light: bool) -> ModeResult:
    """Three blocks of addmm (mixers.i.up) and gelu (mixers.i), one gelu with no module; the
    light pass's addmm holds a copy_ event per call, at 2 µs each."""
    seq = []
    for i in range(3):
        seq += [
            TensorIO("aten::addmm", 100, 20, None, "dispatcher", f"mixers.{i}.up", ("m.py:12",)),
            TensorIO("aten::gelu", 20, 20, None, "dispatcher", f"mixers.{i}", ("m.py:13",)),
        ]
    seq.append(TensorIO("aten::gelu", 20, 20, None, "dispatcher"))
    rows = (
        KernelRow(name="aten::addmm", kind="cpu", calls_per_step=3.0, time_us_per_step=90.0),
        KernelRow(name="aten::gelu", kind="cpu", calls_per_step=4.0, time_us_per_step=40.0),
    )
    rows = tuple(r.adding(bytes_op=r.name) for r in rows)
    breakdown = TimeBreakdown(definition="cpu", step=_step(200.0, 90.0, {}))
    if light:
        breakdown = TimeBreakdown(
            definition="cpu",
            steps=(_step(200.0, 90.0, {"op": 3, "python": 7}),) * 3,
            profiler_cost=ProfilerCost(per_event_us=2.0, per_step_us=4.0),
            kernels=(
                KernelTime(name="aten::addmm", calls=3.0, time_us=66.0, events=3.0),
                KernelTime(name="aten::gelu", calls=4.0, time_us=24.0, events=0.0),
            ),
        )
    return OkMode(
        kernels=KernelCounts(per_step=7, table=rows),
        bytes=Bytes(read=0, written=0, source="modeled", method="", sequence=tuple(seq)),
        time_breakdown=breakdown,
    )


def _found(mode) -> Run:
    """A run of `mode` with its median step and module tree, the findings analysis/derive adds
    (its kernel rows' bytes are set by hand here) and the report formats."""
    run = Run(modes={"eager": mode.adding(median_step=mode_median_step(mode))})
    return run.adding(module_tree=module_tree(run))


def test_module_times_come_from_the_light_pass_with_the_cost_inside_removed():
    run = _found(_mode(light=True))
    tb = run.modes["eager"].time_breakdown
    assert tb is not None
    assert kernel_time_per_call(tb) == {"aten::addmm": 20.0, "aten::gelu": 6.0}  # (66 - 6) / 3
    tree = run.module_tree  # a finding of the derived run, which the report only formats
    assert tree is not None
    assert tree.root.modes["eager"].time_us == 3 * 20.0 + 4 * 6.0
    (share,) = tree.shares
    step = median_step(tb)
    assert step is not None and share.step_us == step.total_us == 200.0 - 6 - 14 - 4
    assert share.placed_us == 78.0 and share.unplaced_us == 6.0  # the gelu with no module
    assert share.placed_us + share.unplaced_us <= share.step_us  # never more than the step
    assert share.outside_us == pytest.approx(176.0 - 84.0)
    view = module_tree_view(run)
    assert view is not None and view["time_method"] == LIGHT_TIME_METHOD
    assert view["shares"] == [
        "eager: modules hold 78.0 µs of its 176.0 µs median step (44%); unattributed "
        "98.0 µs: 92.0 µs host time outside kernels (dispatch, wrappers, Python), "
        "6.0 µs no module recorded"
    ]
    assert "modules hold 78.0 µs" in html.render(run)


def test_records_before_the_light_pass_keep_the_kernel_tables_mean_and_say_the_cost_is_inside():
    run = _found(_mode(light=False))
    tree = run.module_tree
    assert tree is not None and tree.root.modes["eager"].time_us == 3 * 30.0 + 4 * 10.0
    view = module_tree_view(run)
    assert view is not None
    assert view["shares"][0].startswith(
        "eager: modules hold 120.0 µs of its 200.0 µs median step (the profiler's cost inside)"
    )


def test_the_build_times_payback_is_in_the_modes_detail_and_the_numbers_table():
    from tests.test_speedup_breakdown import LIGHT_EAGER, _light_mode

    compiled = _light_mode((2000 / 1200, 1.5, 1.9), timed_ms=1.2, compile_s=3.6)
    run = derived_run(Run(modes={"eager": LIGHT_EAGER, "compile": compiled}), mode_analyses())
    assert run.modes["compile"].time_findings is not None
    assert run.modes["compile"].time_findings.payback_calls == 4500.0
    detail = build_view(run)["details"][1]
    assert detail["payback"] == (
        "the 3.6 s build is paid back after 4,500 calls (3.6 s ÷ 0.8 ms saved per call)"
    )
    assert "3.60 s (paid back after 4,500 calls)" in markdown.render(run)
    assert "Compile time: the 3.6 s build is paid back after 4,500 calls" in html.render(run)


@pytest.mark.slow
def test_light_pass_traces_move_with_a_saved_run(tmp_path):
    from profreport import api

    model = torch.nn.Linear(4, 4)
    result = api.profile(model, torch.randn(2, 4), modes=("eager",), device="cpu", min_time_s=0.05)
    saved = result.save(tmp_path / "run")
    tb = result.run.modes["eager"].time_breakdown
    assert tb is not None and tb.trace is not None
    assert (saved / tb.trace).is_file() and Path(tb.trace).parts[0] == LIGHT_TRACES


def test_a_mode_failing_in_the_light_pass_is_marked_failed_and_the_others_profiled_again(
    tmp_path,
):
    from profreport.files import RunFolder
    from profreport.models import LoadedModel
    from profreport.modes import PreparedMode
    from profreport.pipeline import RunCollector, RunSetup, TimingStage

    x = torch.ones(4)
    model = LoadedModel("tiny", "", torch.nn.Identity(), (x,), None)
    collector = RunCollector(RunSetup(model, CPU, "float32", RunFolder(tmp_path)))

    def broken(_x):
        raise RuntimeError("out of memory")

    prepared = {
        "eager": PreparedMode("eager", fn=lambda t: t * 2),
        "trace": PreparedMode("trace", fn=broken),
    }
    stage = TimingStage(
        {name: OkMode() for name in prepared}, prepared, collector.sync, collector.setup
    )
    collector._light_pass(stage)
    assert stage.context_lost is None
    modes = stage.modes
    assert (modes["trace"].status, modes["trace"].error) == (
        "failed",
        "RuntimeError: out of memory",
    )
    assert list(prepared) == ["eager"]  # not timed either
    tb = modes["eager"].time_breakdown
    assert tb is not None and tb.steps and modes["trace"].time_breakdown is None


def test_analyze_of_a_run_folder_skips_the_light_pass(tmp_path):
    from profreport.cli.analyze import find_traces
    from profreport.files import LIGHT_TRACE_NAME

    (tmp_path / "tensorboard" / "eager").mkdir(parents=True)
    (tmp_path / LIGHT_TRACES).mkdir()
    mode_trace = tmp_path / "tensorboard" / "eager" / "eager.1.pt.trace.json"
    mode_trace.write_text("{}")
    (tmp_path / LIGHT_TRACES / LIGHT_TRACE_NAME).write_bytes(b"")
    assert find_traces([str(tmp_path)]) == [mode_trace]
