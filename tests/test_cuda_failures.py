"""A fatal CUDA error in one mode: the failed mode is recorded, the other modes' evidence
survives, and the report is still written.

No GPU here: the errors are injected where CUDA raises them. After an illegal memory access the
process's CUDA context is lost and every later CUDA call raises the same error (the clean-up calls
after the failure too); `capture.cuda_context` finds that out with one synchronize.
"""

from __future__ import annotations

import json

import pytest
import torch

from profreport import ab, cli, pipeline
from profreport.capture import cuda_context
from profreport.capture.timing import TimingConfig
from profreport.modes import PreparedMode, mode_for
from profreport.record import Run, load
from profreport.record.model import OkMode
from tests.conftest import FAST, run_dir_in, setup

ILLEGAL = "CUDA error: an illegal memory access was encountered"
CUDA = torch.device("cuda")  # a label: nothing runs on it


def _illegal_address() -> torch.AcceleratorError:
    return torch.AcceleratorError(
        f"{ILLEGAL}\nCUDA kernel errors might be asynchronously reported at some other API call"
    )


def test_a_synchronize_that_raises_means_the_context_is_lost(monkeypatch):
    def sync(_device: torch.device) -> None:
        raise _illegal_address()

    monkeypatch.setattr(torch.cuda, "synchronize", sync)
    assert cuda_context.lost_context(CUDA) == f"AcceleratorError: {ILLEGAL}"
    reason = cuda_context.lost_after("compile", CUDA)
    assert reason is not None
    assert reason.startswith("the CUDA context was lost when compile failed (AcceleratorError: ")
    assert "run again without compile in --modes" in reason
    # a CPU device has no CUDA context: the probe does not touch CUDA at all
    assert cuda_context.lost_context(torch.device("cpu")) is None


def test_a_device_that_still_synchronizes_is_not_lost(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", calls.append)
    assert cuda_context.lost_after("compile", CUDA) is None
    assert calls == [CUDA]


def test_clean_up_that_raises_is_recorded_not_raised(monkeypatch):
    def reset() -> None:
        raise RuntimeError(ILLEGAL)

    def empty_cache() -> None:
        raise _illegal_address()

    monkeypatch.setattr(mode_for("compile"), "reset_after_failure", reset)
    monkeypatch.setattr(torch.cuda, "empty_cache", empty_cache)
    entry = pipeline._mark_failed(OkMode(), "compile", _illegal_address(), CUDA)

    assert entry.status == "failed"
    assert entry.error == f"AcceleratorError: {ILLEGAL}"
    assert entry.error_full is not None
    assert entry.error_full.endswith(
        f"clean-up after the failure raised too: RuntimeError: {ILLEGAL}; "
        f"AcceleratorError: {ILLEGAL}"
    )


def test_clean_up_still_runs_every_step(monkeypatch):
    calls = []

    def reset() -> None:
        calls.append("reset")
        raise RuntimeError("dynamo reset failed")

    monkeypatch.setattr(mode_for("compile"), "reset_after_failure", reset)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    entry = pipeline._mark_failed(OkMode(), "compile", RuntimeError("CUDA out of memory"), CUDA)
    assert calls == ["reset", "empty_cache"]
    assert entry.error_full is not None
    assert entry.error_full.endswith("raised too: RuntimeError: dynamo reset failed")


@pytest.fixture
def poisoned_after_trace(monkeypatch):
    """`trace` raises an illegal memory access while being built; from then on the device
    reports its context lost, and the mode's own clean-up raises the same error."""
    lost: list[str] = []
    real_prepare = pipeline.prepare_mode

    def prepare(name: str, *args, **kwargs):
        if name == "trace":
            lost.append(f"AcceleratorError: {ILLEGAL}")
            raise _illegal_address()
        return real_prepare(name, *args, **kwargs)

    def reset() -> None:
        raise RuntimeError(ILLEGAL)

    monkeypatch.setattr(pipeline, "prepare_mode", prepare)
    monkeypatch.setattr(mode_for("trace"), "reset_after_failure", reset)
    monkeypatch.setattr(cuda_context, "lost_context", lambda _device: lost[0] if lost else None)


def test_generate_after_an_illegal_address_writes_the_report(
    poisoned_after_trace, tmp_path, capsys
):
    out = tmp_path / "out"
    args = ["--model", "gated-residual", "--batch-size", "1", "--modes", "eager,trace,script"]
    rc = cli.main(["generate", *args, "--out", str(out), *FAST])
    err = capsys.readouterr().err

    assert rc == 0, err  # eager ran: the failed mode is a warning
    run_dir = run_dir_in(out)
    record = load(run_dir / "run.json")  # written, and valid
    eager, trace, script = (record["modes"][m] for m in ("eager", "trace", "script"))
    # eager's evidence survives; it could not be timed, and says why
    assert eager["status"] == "ok" and eager["kernels"]["per_step"] == 7
    assert eager["bytes"]["read"] == 10 * 2**20
    assert "latency_ms" not in eager
    assert eager["not_timed"].startswith("the CUDA context was lost when trace failed")
    assert trace["status"] == "failed" and trace["error"] == f"AcceleratorError: {ILLEGAL}"
    assert "clean-up after the failure raised too: RuntimeError: " in trace["error_full"]
    assert script["status"] == "skipped"
    assert script["error"].startswith("not run: the CUDA context was lost when trace failed")
    assert "compiler" not in script  # never built
    assert f"warning: trace failed: AcceleratorError: {ILLEGAL}" in err
    assert "warning: script skipped: not run: the CUDA context was lost" in err
    assert "warning: eager not timed: the CUDA context was lost when trace failed" in err
    # the report is written and says what happened
    assert "not timed" in (run_dir / "summary.md").read_text()
    page = (run_dir / "report.html").read_text()
    assert ILLEGAL in page and "not timed" in page
    assert Run.from_json(json.loads((run_dir / "run.json").read_text())).modes["eager"].not_timed


TIMING = pipeline.RunOptions(
    timing=TimingConfig(min_time_s=0.01, max_time_s=5, block_s=0.001, min_blocks=3)
)


def _stage(prepared: dict[str, PreparedMode]) -> pipeline.TimingStage:
    modes = {name: OkMode() for name in prepared}
    return pipeline.TimingStage(
        modes, prepared, lambda: None, setup(TIMING, (torch.ones(2),), "cuda")
    )


def _timed(stages: dict[str, pipeline.TimingStage], plan=pipeline.ON_ITS_OWN) -> pipeline.Timed:
    timed = pipeline.time_stages(stages, plan, print)
    for side, stage in stages.items():
        stage.store(timed.stage(side), timed)
    return timed


def test_an_illegal_address_while_timed_keeps_the_other_modes(monkeypatch):
    lost: list[str] = []

    def compile_fn(_x: torch.Tensor) -> None:
        lost.append(f"AcceleratorError: {ILLEGAL}")
        raise _illegal_address()

    monkeypatch.setattr(cuda_context, "lost_context", lambda _device: lost[0] if lost else None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    stage = _stage(
        {
            "eager": PreparedMode("eager", lambda x: x + 1),
            "script": PreparedMode("script", lambda x: x + 1),
            "compile": PreparedMode("compile", compile_fn),
        }
    )
    _timed({"": stage})

    modes = stage.modes
    assert modes["compile"].status == "failed"
    # the others were not failed one by one on the poisoned context: ok, without latency
    for name in ("eager", "script"):
        assert modes[name].status == "ok" and modes[name].latency_ms is None
        assert str(modes[name].not_timed).startswith(
            "the CUDA context was lost when compile failed"
        )
    assert list(stage.prepared_modes) == ["eager", "script"]


def test_out_of_memory_while_timed_is_not_a_lost_context(monkeypatch):
    def oom(_x: torch.Tensor) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(torch.cuda, "synchronize", lambda _device: None)  # the device still works
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    stage = _stage(
        {"eager": PreparedMode("eager", lambda x: x + 1), "compile": PreparedMode("compile", oom)}
    )
    _timed({"": stage})
    modes = stage.modes
    assert modes["compile"].status == "failed"
    latency = modes["eager"].latency_ms
    assert latency is not None and (latency.n or 0) >= 3 and modes["eager"].not_timed is None


def test_ab_times_neither_side_once_the_context_is_lost():
    base = _stage({"eager": PreparedMode("eager", lambda x: x + 1)})
    head = _stage({"eager": PreparedMode("eager", lambda x: x + 1)})
    head.context_lost = "the CUDA context was lost when compile failed (AcceleratorError: ...)"

    timed = _timed({"base": base, "head": head}, ab.AB_TIMING)

    assert not timed.loads and timed.reference is None  # nothing was timed
    for stage in (base, head):
        assert stage.modes["eager"].not_timed == head.context_lost
        assert stage.modes["eager"].latency_ms is None
        assert stage.machine_reference is None  # so its record names no ab order
