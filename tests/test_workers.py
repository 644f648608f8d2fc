"""Latency timed in fresh worker processes (capture/workers.py, profreport/timing_worker.py): the
budget split, the requests and results, how the parent combines K workers' blocks (a mode that
fails in one of them is that mode's failure), a worker that crashes or is interrupted, a worker
run in-process on a tiny model, and (slow) generate and ab with real workers."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

import pytest
import torch

from profreport import pipeline, runner
from profreport.capture import workers
from profreport.modes import PreparedMode
from profreport.record.model import (
    MachineLoad,
    MachineReference,
    OkMode,
    ProcessBlocks,
    ReferencePart,
    TimingSettings,
)
from profreport.runner import run_options
from tests.conftest import FAST, run_dir_in, setup

QUIET = MachineLoad(other_busy_share=0.01)


def test_the_default_is_three_workers_and_the_environment_may_change_it(monkeypatch):
    monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
    assert workers.default_workers() == 3 and run_options(["eager"]).workers == 3
    monkeypatch.setenv(workers.WORKERS_ENV, "0")
    assert run_options(["eager"]).workers == 0
    assert run_options(["eager"], workers=2).workers == 2  # the option wins over the variable
    monkeypatch.setenv(workers.WORKERS_ENV, "three")
    with pytest.raises(ValueError, match="PROFREPORT_WORKERS='three'"):
        run_options(["eager"])
    with pytest.raises(ValueError, match="workers must be 0 or more"):
        run_options(["eager"], workers=-1)


def test_each_worker_gets_its_share_of_the_budget_and_all_its_rounds():
    timing = TimingSettings(min_time_s=1.5, max_time_s=60.0, min_blocks=15)
    share = workers.worker_share(timing, 3, min_rounds=6)
    assert share.min_time_s == pytest.approx(0.5) and share.max_time_s == pytest.approx(20.0)
    assert share.min_blocks == 6  # 15 / 3, raised to the rounds a process's own interval needs
    assert workers.worker_share(timing, 2, min_rounds=6).min_blocks == 8


def _reference(samples: tuple[float, ...], spent_s: float) -> MachineReference:
    part = ReferencePart(work="w", median_ms=samples[0], ci95_ms=(0, 0), samples_ms=samples)
    return MachineReference(
        method="m", parts={"copy": part}, share=0.05, spent_s=spent_s, timing_s=1.0
    )


def test_timings_of_one_process_each_combine_into_one():
    one = pipeline.Timed(
        ({"": {"eager": ProcessBlocks(samples=(1.0,))}},), (QUIET,), _reference((2.0, 2.1), 0.1)
    )
    two = pipeline.Timed(
        ({"": {"eager": ProcessBlocks(samples=(1.5,))}},), (None,), _reference((3.0, 3.1), 0.2)
    )
    both = pipeline.Timed.across([one, two], resamples=200)
    assert [s[""]["eager"].samples for s in both.processes] == [(1.0,), (1.5,)]
    assert both.loads == (QUIET, None)
    assert both.stage("")[1]["eager"].samples == (1.5,) and both.stage("base") == [{}, {}]
    part = both.reference.parts["copy"]
    assert part.process_samples() == ((2.0, 2.1), (3.0, 3.1)) and part.n == 4
    assert both.reference.spent_s == pytest.approx(0.3) and both.reference.timing_s == 2.0
    # a process whose reference raised: the combined one says why, with no parts
    broken = MachineReference(method="m", parts={}).adding(error="copy raised: boom")
    failed = pipeline.Timed.across([pipeline.Timed((), (None,), broken), two], 200)
    assert failed.reference.parts == {} and failed.reference.error == "copy raised: boom"
    assert pipeline.Timed.across([], 200).reference is None


def _stage(modes: list[str], spec: str | None = "simple") -> pipeline.TimingStage:
    options = pipeline.RunOptions(modes=tuple(modes), workers=3)
    run = setup(options)
    model = dataclasses.replace(run.model, spec=spec)
    prepared = {m: PreparedMode(m, lambda *_: None) for m in modes}
    return pipeline.TimingStage(
        {m: OkMode() for m in modes}, prepared, print, dataclasses.replace(run, model=model)
    )


def _blocks(level_ms: float) -> ProcessBlocks:
    return ProcessBlocks(samples=tuple(level_ms * (1 + 0.001 * (i % 3)) for i in range(15)))


def test_the_parent_combines_the_workers_and_a_mode_failing_in_one_fails_in_all(monkeypatch):
    """Worker 2 of 3 cannot time compile: compile is a failure with one line naming the worker,
    its blocks from worker 1 are dropped, worker 3 is not asked for it (and its own failure to
    build compile, side by side with worker 2, adds nothing); script's speedup comes from all
    three workers."""
    asked: list[tuple[str, ...]] = []
    requests: list[workers.WorkerRequest] = []
    levels = {"eager": 10.0, "script": 5.0, "compile": 2.0}

    @contextlib.contextmanager
    def fake(request: workers.WorkerRequest, k: int, at_once: int, ahead: object):
        requests.append(request)

        def result(i: int, leave_out: Collection[str]) -> workers.WorkerResult:
            modes = tuple(m for m in request.models[0].modes if m not in leave_out)
            asked.append(modes)
            failed = {
                1: {"compile": "raised while timed: RuntimeError: out of memory"},
                2: {"compile": "failed to build again: RuntimeError: out of memory"},
            }
            return workers.WorkerResult(
                blocks={m: _blocks(levels[m]) for m in modes if i != 1 or m != "compile"},
                failed=failed.get(i, {}),
                load=QUIET,
                reference=_reference((1.0, 1.1), 0.1),
            )

        yield result

    monkeypatch.setattr(workers, "started_workers", fake)
    stage = _stage(["eager", "script", "compile"])
    timed = pipeline.time_stages({"": stage}, pipeline.ON_ITS_OWN, print)
    stage.store(timed.stage(""), timed)

    assert asked == [
        ("eager", "script", "compile"),
        ("eager", "script", "compile"),
        ("eager", "script"),
    ]
    assert requests[0].timing.min_time_s == pytest.approx(1.0 / 3)  # its share
    assert requests[0].timing.min_blocks == 6
    failed = stage.modes["compile"]
    assert failed.status == "failed" and failed.error == (
        "in timing worker 2 of 3, raised while timed: RuntimeError: out of memory"
    )
    script = stage.modes["script"]
    assert len(script.latency_ms.processes) == 3
    speedup = script.speedup_vs_eager
    assert speedup.processes == 3 and speedup.median == pytest.approx(2.0, rel=0.01)
    assert speedup.covers == "3 processes" and len(speedup.per_process) == 3
    assert stage.timing_noise.process_loads == (QUIET, QUIET, QUIET)
    assert stage.machine_reference.parts["copy"].n == 6


def test_a_model_passed_as_an_object_is_timed_in_this_process(monkeypatch):
    def never(*_args):
        raise AssertionError("no worker can build a model it has no spec of")

    monkeypatch.setattr(workers, "started_workers", never)
    monkeypatch.setattr(pipeline, "time_here", lambda *_: pipeline.Timed())
    stage = _stage(["eager"], spec=None)
    assert pipeline.time_stages({"": stage}, pipeline.ON_ITS_OWN, print) == pipeline.Timed()


def _request() -> workers.WorkerRequest:
    return workers.WorkerRequest(
        models=(workers.WorkerModel(stage="", spec="simple", batch_size=2, modes=("eager",)),),
        timing=TimingSettings(min_time_s=0.01, max_time_s=5.0, block_s=0.001, min_blocks=3),
    )


# a stand-in worker: says it has imported on the pipe given last, waits for its build line,
# says it is ready, then does what follows
IMPORTED = "import os, sys; os.write(int(sys.argv[-1]), b'i'); "
READY = IMPORTED + (
    "sys.stdin.readline(); os.write(int(sys.argv[-1]), b'r'); os.close(int(sys.argv[-1])); "
)


def _command(code: str):
    return lambda _request, _result, ready_fd, _device, _modes: [
        sys.executable,
        "-c",
        code,
        str(ready_fd),
    ]


class _NoWorkers:
    """Stands in for TimingWorkers where a test's workers are stand-ins themselves: starts
    nothing."""

    def __init__(self, count: int, device: str, modes: tuple[str, ...]) -> None:
        self.count, self.device, self.modes = count, device, modes

    def imported(self) -> None:
        pass

    def close(self) -> None:
        pass


def _first_result(request: workers.WorkerRequest, k: int = 1, at_once: int = 1):
    with workers.started_workers(request, k, at_once) as result:
        return result(0, ())


def test_a_worker_that_crashes_is_a_bug_named_by_its_exit(monkeypatch):
    monkeypatch.setattr(workers, "worker_command", _command("raise SystemExit(7)"))
    pipes: list[int] = []
    start = workers._Worker.__init__

    def recorded(self, name, device, modes):
        start(self, name, device, modes)
        pipes.append(self._ready)

    monkeypatch.setattr(workers._Worker, "__init__", recorded)
    with pytest.raises(workers.WorkerFailed, match="timing worker 1 of 3 ended with exit code 7"):
        _first_result(_request(), 3, 2)  # before it had imported
    assert len(pipes) == 3  # workers 2 and 3 were never read: their pipes are closed all the same
    for fd in pipes:
        with pytest.raises(OSError):
            os.fstat(fd)
    monkeypatch.setattr(workers._Worker, "__init__", start)
    monkeypatch.setattr(
        workers, "worker_command", _command(READY + "sys.stdin.readline(); raise SystemExit(7)")
    )
    with pytest.raises(workers.WorkerFailed, match="timing worker 1 of 2 ended with exit code 7"):
        _first_result(_request(), 2)  # while it timed


def test_a_worker_that_leaves_no_result_is_a_bug(monkeypatch):
    monkeypatch.setattr(workers, "worker_command", _command(READY + "sys.stdin.readline()"))
    with pytest.raises(workers.WorkerFailed, match=r"result\.json"):
        _first_result(_request())


def test_workers_build_side_by_side_and_time_one_after_another(tmp_path: Path, monkeypatch):
    """Three workers, two at once: workers 1 and 2 start building together; worker 1 times only
    once both are ready, worker 2 only when worker 1 has ended, worker 3 starts building only when
    2 has ended; each gets the series to leave out."""
    log = tmp_path / "log"
    code = (
        "import json, os, sys, time\n"
        f"log = open({str(log)!r}, 'a')\n"
        "me = sys.argv[1]\n"
        "os.write(int(sys.argv[-1]), b'i')\n"
        "sys.stdin.readline()\n"
        "log.write(f'start {me} {time.monotonic()}\\n'); log.flush()\n"
        "time.sleep(0.2)\n"
        "log.write(f'ready {me} {time.monotonic()}\\n'); log.flush()\n"
        "os.write(int(sys.argv[-1]), b'r'); os.close(int(sys.argv[-1]))\n"
        "leave_out = json.loads(sys.stdin.readline())\n"
        "log.write(f'go {me} {time.monotonic()} {leave_out}\\n'); log.flush()\n"
        "time.sleep(0.1)\n"
        "log.write(f'end {me} {time.monotonic()}\\n'); log.flush()\n"
        "open(sys.argv[2], 'w').write(json.dumps({'schema': 'profreport.timing-worker-result/1',"
        " 'blocks': {}, 'failed': {}, 'built': {}, 'load': None, 'reference': None}))\n"
    )
    monkeypatch.setattr(
        workers,
        "worker_command",
        lambda request, result, fd, device, modes: [
            sys.executable,
            "-c",
            code,
            str(result.parent),
            str(result),
            str(fd),
        ],
    )
    with workers.started_workers(_request(), 3, 2) as result:
        for i in range(3):
            assert result(i, {"trace"} if i else ()).blocks == {}
    events = [line.split(" ", 3) for line in log.read_text().splitlines()]
    at = {(e[0], e[1]): float(e[2]) for e in events}
    first, second, third = [e[1] for e in events if e[0] == "go"]  # the parent's order
    assert at["start", second] < at["go", first]  # built side by side, before any timing
    assert at["ready", second] < at["go", first]  # timed only when the group is built
    assert at["end", first] < at["go", second] and at["end", second] < at["start", third]
    assert [e[3] for e in events if e[0] == "go"] == ["[]", "['trace']", "['trace']"]


def test_workers_started_ahead_import_first_and_are_killed_when_not_needed(capfd, monkeypatch):
    """Workers started ahead of a run import, say so, and sleep: one never given a request is
    killed when the run ends (a run that timed nothing), and what a worker printed reaches this
    process's stderr (run.log while a command runs) once it is closed."""
    code = "print('worker says hi', flush=True); " + IMPORTED + "import time; time.sleep(60)"
    monkeypatch.setattr(workers, "worker_command", _command(code))
    with workers.workers_ahead(2, "cpu", ("eager",)) as ahead:
        assert ahead is not None and ahead.count == 2
        ahead.imported()
        processes = [w._process for w in ahead._workers]
        assert all(p.poll() is None for p in processes)  # asleep, waiting for a request
    assert all(p.poll() is not None for p in processes)  # killed, waited for
    assert capfd.readouterr().err.count("worker says hi") == 2


def test_workers_started_ahead_do_what_the_modes_builds_do_first(tmp_path: Path, monkeypatch):
    """Workers started ahead are told the device and the run's modes (the workload's defaults
    when none were asked for); a worker does what each mode's build does first (Mode.ahead:
    compile's imports Dynamo and Inductor), and a mode or device it cannot resolve is left to
    the build."""
    from profreport import timing_worker
    from profreport.modes import DECODE_DEFAULT_MODES, default_modes
    from profreport.modes.compile import CompileMode

    asked = []

    class Recorded(_NoWorkers):
        def __init__(self, count: int, device: str, modes: tuple[str, ...]) -> None:
            super().__init__(count, device, modes)
            asked.append((device, tuple(modes)))

    monkeypatch.setattr(workers, "TimingWorkers", Recorded)
    for modes, workload in (((("eager", "trace")), "prefill"), (None, "prefill"), (None, "decode")):
        with runner.workers_ahead(1, "cpu", modes, workload):
            pass
    assert asked == [
        ("cpu", ("eager", "trace")),
        ("cpu", default_modes()),
        ("cpu", DECODE_DEFAULT_MODES["cpu"]),
    ]
    monkeypatch.setenv(workers.WORKERS_ENV, "x")  # the run's options say what is wrong with it
    for count in (0, None):
        with runner.workers_ahead(count, "cpu", None, "prefill") as none:
            assert none is None
    assert len(asked) == 3

    done = []
    monkeypatch.setattr(CompileMode, "ahead", lambda self, device_type: done.append(device_type))
    timing_worker._ahead("cpu", ["eager", "compile", "nope"])
    timing_worker._ahead("tpu", ["compile"])  # no such device here: left to the build
    assert done == ["cpu"]


def test_workers_ahead_that_fail_to_start_leave_the_timing_to_workers_started_then(monkeypatch):
    """A worker started ahead that ends before it has imported does not end the run before
    its capture: the pool is failed and closed, and the timing step starts workers of its own
    (whose crash, after the evidence is saved, is the bug)."""
    monkeypatch.setattr(workers, "worker_command", _command("raise SystemExit(7)"))
    with workers.workers_ahead(2, "cpu", ("eager",)) as ahead:
        assert ahead is not None
        ahead.imported()  # no exception here
        assert (
            ahead.failed == "timing worker 1 of 2 ended with exit code 7 (its output is in run.log)"
        )
        started = []
        real = workers.TimingWorkers

        def recorded(*args):
            started.append(args)
            return real(*args)

        monkeypatch.setattr(workers, "TimingWorkers", recorded)
        crashed = pytest.raises(workers.WorkerFailed, match="worker 1 of 2 ended with exit code 7")
        with crashed, workers.started_workers(_request(), 2, 2, ahead) as result:
            result(0, ())
        assert started == [(2, "cpu", ("eager",))]  # a pool of its own


def test_a_worker_not_needed_after_importing_ends_without_building(tmp_path: Path, monkeypatch):
    from profreport import timing_worker

    ready, ready_w = os.pipe()
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # the parent gave up on it
    asked, answer = tmp_path / "request.json", tmp_path / "result.json"
    assert timing_worker.main([str(asked), str(answer), str(ready_w), "cpu", "eager"]) == 0
    assert os.read(ready, 1) == b"i" and not answer.exists()


def test_workers_build_at_once_as_memory_allows_and_one_at_a_time_on_a_gpu(monkeypatch):
    from profreport.traceio import memory

    gib = 1 << 30
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: 16 * gib)
    assert workers.built_at_once(3, "cpu", 10 << 20, 5) == 3  # a small model: all three
    assert workers.built_at_once(3, "cpu", gib, 5) == 1  # 7 GiB each: one in half of 16
    assert workers.built_at_once(3, "cpu", gib // 2, 3) == 2  # 3 GiB each
    assert workers.built_at_once(3, "cuda", 0, 5) == 1
    monkeypatch.setattr(memory, "available_memory_bytes", lambda: None)
    assert workers.built_at_once(3, "cpu", 0, 5) == 1


def test_an_interrupt_kills_every_worker_started(monkeypatch):
    started: list[subprocess.Popen[bytes]] = []

    class Recorded(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            started.append(self)

    def interrupted(self) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(workers.subprocess, "Popen", Recorded)
    monkeypatch.setattr(workers._Worker, "ready", interrupted)
    monkeypatch.setattr(
        workers, "worker_command", _command(IMPORTED + "import time; time.sleep(60)")
    )
    with pytest.raises(KeyboardInterrupt):
        _first_result(_request(), 3, 2)
    assert len(started) == 3 and all(p.poll() is not None for p in started)  # killed, waited for


def test_a_worker_times_the_modes_it_can_build_and_names_the_one_it_cannot(
    tmp_path: Path, monkeypatch
):
    """The worker's entry, in this process: a saved TorchScript module loaded (its output is
    eager's), one whose file is gone built again, the others built again, all timed by the one
    timer but the one its turn leaves out; it says when it is ready; a mode it cannot build is a
    one-line failure, not a crash."""
    import torch._functorch.config as functorch_config

    from profreport import timing_worker
    from profreport.modes import compile as compile_mode

    # what the worker switches on for itself, switched back after the test
    monkeypatch.setitem(compile_mode.CODE_CACHES, "fx_graph_cache", False)
    monkeypatch.setattr(
        functorch_config, "enable_autograd_cache", functorch_config.enable_autograd_cache
    )
    from profreport.env import make_sync
    from profreport.models import load_model
    from profreport.modes import prepare_mode

    simple = load_model("simple", torch.device("cpu"), torch.float32, 2)
    with torch.no_grad():
        scripted = prepare_mode(
            "script", simple.module, simple.example_inputs, make_sync(torch.device("cpu"))
        )
    saved = workers.saved_torchscript({"script": scripted.fn, "eager": simple.module}, tmp_path, "")
    assert list(saved) == ["script"]  # eager is no TorchScript module: built again
    model = workers.WorkerModel(
        stage="",
        spec="simple",
        batch_size=2,
        modes=("eager", "script", "trace", "nope"),
        saved={**saved, "trace": str(tmp_path / "gone.pt")},
    )
    request = dataclasses.replace(
        _request(), models=(model,), threads=torch.get_num_threads(), resamples=100
    )
    asked, answer = tmp_path / "request.json", tmp_path / "result.json"
    asked.write_text(json.dumps(request.to_json()))
    ready, ready_w = os.pipe()
    # build, then its turn: trace left out
    monkeypatch.setattr(sys, "stdin", io.StringIO('build\n["trace"]\n'))
    assert timing_worker.main([str(asked), str(answer), str(ready_w), "cpu", "eager"]) == 0
    assert os.read(ready, 2) == b"ir"  # it said it had imported, then that it was ready
    assert compile_mode.CODE_CACHES["fx_graph_cache"] is True  # its builds may load cached code
    result = workers.WorkerResult.parse_file(answer)
    assert list(result.blocks) == ["eager", "script"]
    assert len(result.blocks["script"].samples) >= 3
    assert result.built == {
        "eager": workers.BUILT,
        "script": workers.LOADED,
        "trace": workers.BUILT,
    }
    assert result.failed["nope"].startswith("failed to build again: unknown mode 'nope'")
    assert result.reference is not None and result.load is not None


@pytest.mark.slow
def test_generate_and_ab_time_in_real_workers(tmp_path: Path):
    """generate and ab with two real worker processes on the tiny built-in model: each speedup
    covers both processes, run.json keeps each one's blocks, the summary says so; ab pairs base
    and head within each worker."""
    env = {**os.environ, workers.WORKERS_ENV: "0"}
    cli = [sys.executable, "-m", "profreport"]
    flags = ["--batch-size", "2", "--workers", "2"]
    gen = [*cli, "generate", "--model", "simple", "--modes", "eager,script", *FAST, *flags]
    done = subprocess.run(
        [*gen, "--out", str(tmp_path / "gen")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "timing worker" not in done.stderr  # workers' output goes to run.log
    run_dir = run_dir_in(tmp_path / "gen")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["settings"]["timing_processes"] == 2
    speedup = run["modes"]["script"]["speedup_vs_eager"]
    assert speedup["processes"] == 2 and len(speedup["per_process"]) == 2
    assert len(run["modes"]["eager"]["latency_ms"]["processes"]) == 2
    assert "latency was timed in 2 fresh worker processes" in (run_dir / "summary.md").read_text()

    ab = [*cli, "ab", "simple", "simple", "--modes", "eager", "--device", "cpu", "--workers", "2"]
    ab += ["--min-time", "0.05", "--quiet", "--format", "json", "--out", str(tmp_path / "ab")]
    done = subprocess.run(ab, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    folder = run_dir_in(tmp_path / "ab")
    compared = json.loads((folder / "compare.json").read_text())
    text = json.dumps(compared)
    assert '"processes": 2' in text  # the gate's ratio combines both workers
    for side in ("base", "head"):
        side_run = json.loads((folder / side / "run.json").read_text())
        assert len(side_run["modes"]["eager"]["latency_ms"]["processes"]) == 2


def test_a_worker_that_crashes_keeps_the_evidence_and_exits_3(tmp_path: Path, monkeypatch):
    import io

    from profreport import cli

    @contextlib.contextmanager
    def crashing(_request, k, _at_once, _ahead):
        def result(i, _leave_out):
            raise workers.WorkerFailed(f"timing worker {i + 1} of {k} ended with signal SIGSEGV")

        yield result

    monkeypatch.setattr(workers, "started_workers", crashing)
    monkeypatch.setattr(workers, "TimingWorkers", _NoWorkers)
    out, err = tmp_path / "out", io.StringIO()
    argv = ["generate", "--model", "simple", "--modes", "eager", "--batch-size", "2", *FAST]
    code = cli.main([*argv, "--workers", "2", "--out", str(out)], out=io.StringIO(), err=err)
    assert code == 3
    assert "timing worker 1 of 2 ended with signal SIGSEGV" in err.getvalue()
    run = json.loads((run_dir_in(out) / "run.json").read_text())  # the evidence, published
    assert run["modes"]["eager"]["not_timed"] == pipeline.NOT_TIMED_YET
    assert run["settings"]["timing_processes"] == 2
