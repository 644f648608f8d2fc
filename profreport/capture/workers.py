"""Latency timed in fresh worker processes: what one is asked (a typed request file), what it
hands back (a typed result file), and running them.

One process's memory layout, thread placement and cache state is one sample of what a rerun
sees (issue 48: the same code's paired speedup read 0.877 in one process and 0.99-1.01 in four
others, each "conclusive"). So the latency is timed in K fresh processes
(`python -m profreport.timing_worker REQUEST RESULT READY_FD DEVICE MODES`). They start ahead of
the run (workers_ahead: generate and ab start them before this process imports torch) and do
what the modes' builds do first (Mode.ahead: import the compilers) while this process loads
the model; the capture waits until they
have, and they sleep through it. After the capture each rebuilds the model from its spec
(load_model seeds the weights and inputs, so they are the run's) and builds the modes the
capture built (from the compilers' caches: modes/compile.use_code_caches); on CPU several build
side by side, as memory allows (built_at_once). Then they time one after another, never at once
(they would time each other), with the one timer (pipeline.time_here,
capture/timing.measure_latency), interleaved and paired as in one process.
The parent combines their blocks (pipeline.Timed.across); the statistics across processes are
analysis/speedups.py's. A worker's output (stdout, stderr) is copied to the parent's stderr when
it ends: the run's run.log while a command runs.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, NoReturn

from profreport.files import dumps
from profreport.record.model import MachineLoad, MachineReference, ProcessBlocks, TimingSettings
from profreport.record.section import Section, omitted, required, required_factory

WORKER_MODULE = "profreport.timing_worker"
# Three processes by default: the fewest whose spread says anything (the interval is Student's t
# with K - 1 degrees of freedom: 4.30 at K = 3, 12.7 at K = 2). Its cost is each worker's start
# (torch, Dynamo and Inductor imported, the modes built) and warm-up: generate --model simple took
# 1.65x and 1.64x the wall time of --workers 0 (25.7 s against 15.5 s, 26.1 against 15.9: medians
# of 3 interleaved runs, two benches on a quiet 2-core CPU, bench/latency_workers.py), its workers
# started ahead of the run (workers_ahead) and built side by side (built_at_once); started after
# the capture, 1.72x. PROFREPORT_WORKERS sets the default.
DEFAULT_WORKERS = 3
WORKERS_ENV = "PROFREPORT_WORKERS"


def default_workers() -> int:
    """PROFREPORT_WORKERS when set (a whole number, 0 or more), else DEFAULT_WORKERS."""
    given = os.environ.get(WORKERS_ENV, "").strip()
    if not given:
        return DEFAULT_WORKERS
    if not given.isdigit():
        raise ValueError(f"{WORKERS_ENV}={given!r}: expected a whole number, 0 or more")
    return int(given)


def worker_share(timing: TimingSettings, workers: int, min_rounds: int) -> TimingSettings:
    """One worker's timing budget: the run's measured time, its rounds and its overall limit
    split evenly, so K workers time about as long as one process did (a model whose call outlasts
    a block is timed by its rounds: 15 rounds in each of 3 workers tripled its timing); each
    still times at least `min_rounds`, the rounds a process's own paired interval needs."""
    return replace(
        timing,
        min_time_s=timing.min_time_s / workers,
        max_time_s=timing.max_time_s / workers,
        min_blocks=max(min_rounds, math.ceil(timing.min_blocks / workers)),
    )


class WorkerFailed(RuntimeError):
    """A timing worker ended without its result (a crash, a bug): the run's bug, exit 3."""


@dataclass(frozen=True)
class WorkerModel(Section):
    """One stage's model as a worker builds it again (models.load_model's arguments), and the
    modes it times (those the capture built, in its order)."""

    stage: str = required("")  # "" for a run, base or head for `profreport ab`
    spec: str = required("")
    batch_size: int | None = required(None, null=True)
    channels_last: bool = False
    workload: str = "prefill"  # "decode": the causal LM's greedy decode step (profreport/decode.py)
    modes: tuple[str, ...] = required(())
    # mode -> its TorchScript module as the capture built it (torch.jit.save), to load
    saved: Mapping[str, str] = required_factory(dict)


@dataclass(frozen=True)
class WorkerRequest(Section):
    """What one timing worker is asked: the models, where and how they run, its timing budget,
    and the order of a round (`order`: the run's TimingPlan.order_name; None: each run's modes
    rotated, judged against eager)."""

    SCHEMA: ClassVar[str] = "profreport.timing-worker-request/1"
    NOUN: ClassVar[str] = "timing worker request"

    schema: str = SCHEMA
    models: tuple[WorkerModel, ...] = required(())
    device: str = required("cpu")
    dtype: str = required("float32")
    threads: int = required(1)
    timing: TimingSettings = required(TimingSettings())
    resamples: int = 2000
    order: str | None = required(None, null=True)


@dataclass(frozen=True)
class WorkerResult(Section):
    """What one timing worker measured: each series' blocks (capture/timing.series_key), the machine's load
    over its timing and the machine reference timed with them; the modes that failed in it (one
    line each: failed to build again, or raised while timed), and why nothing could be timed
    (`not_timed`, a lost CUDA context)."""

    SCHEMA: ClassVar[str] = "profreport.timing-worker-result/1"
    NOUN: ClassVar[str] = "timing worker result"

    schema: str = SCHEMA
    blocks: Mapping[str, ProcessBlocks] = required_factory(dict)
    failed: Mapping[str, str] = required_factory(dict)
    # series -> how its mode was made: "saved TorchScript loaded" or "built again"
    built: Mapping[str, str] = required_factory(dict)
    load: MachineLoad | None = required(None, null=True)
    reference: MachineReference | None = required(None, null=True)
    not_timed: str | None = omitted()


LOADED, BUILT = "saved TorchScript loaded", "built again"


def saved_torchscript(fns: Mapping[str, Any], folder: Path, stage: str) -> dict[str, str]:
    """The modes whose callable is a TorchScript module (script, trace, optimize), saved in
    `folder` for the workers to load: loading one takes a fraction of a second where tracing
    again took 2-3 s a worker. One that cannot be saved is built again in each worker."""
    import torch

    saved = {}
    for mode, fn in fns.items():
        if not isinstance(fn, torch.jit.ScriptModule):
            continue
        path = folder / f"{stage or 'run'}-{mode}.pt"
        try:
            torch.jit.save(fn, str(path))
        except Exception:  # not every module saves: the worker builds it again
            continue
        saved[mode] = str(path)
    return saved


def worker_command(
    request: Path, result: Path, ready_fd: int, device: str, modes: Sequence[str]
) -> list[str]:
    return [
        sys.executable,
        "-m",
        WORKER_MODULE,
        str(request),
        str(result),
        str(ready_fd),
        device,
        ",".join(modes),
    ]


# What a worker says on its ready pipe: it has done what its builds do first (Mode.ahead:
# IMPORTED), it has built its modes (BUILT_ALL).
IMPORTED, BUILT_ALL = b"i", b"r"
# What it is told on stdin, a line each: build (its request file is written), then its turn
# (the JSON list of the series to leave out). An end of file instead: it is not needed.
BUILD = "build"


# What one worker holds besides the model (torch, Dynamo and Inductor imported, a worker's
# Python heap): about 0.5 GiB resident on CPU (generate --model simple's whole process peaked at
# 0.53 GB), rounded up. Each mode may hold the weights once more (a loaded TorchScript module, an
# AOTInductor package's constants).
WORKER_BASE_BYTES = 1 << 30


def built_at_once(workers: int, device_type: str, weights_bytes: int, modes: int) -> int:
    """How many of `workers` build their modes together, side by side, before the first is
    timed (the rest build, as a group, when those have ended): on CPU as many as half
    the memory still available holds, each counted as WORKER_BASE_BYTES and the weights once per
    mode and once more; on a GPU one at a time (each holds its model in device memory beside the
    capture's, and the builds would share the one device). Nothing is ever built beside a timing."""
    if device_type != "cpu":
        return 1
    from profreport.traceio.memory import available_memory_bytes

    available = available_memory_bytes()
    if available is None:
        return 1
    each = WORKER_BASE_BYTES + weights_bytes * (modes + 1)
    return max(1, min(workers, available // 2 // each))


class _Worker:
    """One timing worker process. It starts by doing what building `modes` on `device` does
    first (Mode.ahead: the imports) and says so on its ready pipe; given its request (`build`)
    it builds the modes and says so; given its turn (`result`) it times them and writes its
    result. Its output (stdout and stderr) goes
    to a file, copied to this process's stderr when it is closed: run.log while a command runs,
    wherever the worker was started."""

    def __init__(self, name: str, device: str, modes: Sequence[str]) -> None:
        self.name = name
        self._folder = tempfile.TemporaryDirectory(prefix="profreport-worker-")
        folder = Path(self._folder.name)
        self._asked, self._answer = folder / "request.json", folder / "result.json"
        self._output = folder / "output.txt"
        package_root = str(Path(__file__).resolve().parents[2])
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
        ready, ready_w = os.pipe()
        self._ready: int | None = ready  # until closed (close)
        try:
            with self._output.open("wb") as output:
                self._process = subprocess.Popen(
                    worker_command(self._asked, self._answer, ready_w, device, modes),
                    env={**os.environ, "PYTHONPATH": path},
                    stdin=subprocess.PIPE,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    pass_fds=(ready_w,),
                    # a Ctrl-C reaches this process only, which kills it (close)
                    start_new_session=True,
                )
        except BaseException:  # not started: nothing of it is left open
            os.close(ready)
            self._folder.cleanup()
            raise
        finally:
            os.close(ready_w)

    def _said(self, what: bytes) -> None:
        """Wait until it says `what` on its ready pipe (WorkerFailed: it ended before)."""
        if self._ready is None or os.read(self._ready, 1) != what:
            self._failed(self._process.wait())

    def _tell(self, line: str, last: bool = False) -> None:
        try:
            if self._process.stdin is not None:  # (always: it starts with a pipe)
                self._process.stdin.write(line.encode() + b"\n")
                self._process.stdin.flush()
                if last:
                    self._process.stdin.close()
        except BrokenPipeError:  # it ended already: its exit says why
            pass

    def imported(self) -> None:
        """Wait until it has imported what its builds need."""
        self._said(IMPORTED)

    def build(self, request: WorkerRequest) -> None:
        """Let it build the modes of `request` (imported first)."""
        self._asked.write_text(dumps(request.to_json()), encoding="utf-8")
        self._tell(BUILD)

    def ready(self) -> None:
        """Wait until it has built its modes (WorkerFailed: it ended before)."""
        self._said(BUILT_ALL)

    def result(self, leave_out: Collection[str]) -> WorkerResult:
        """Let it time (leaving out the series `leave_out`), and read its result."""
        self._tell(json.dumps(sorted(leave_out)), last=True)
        code = self._process.wait()
        if code != 0:
            self._failed(code)
        return WorkerResult.parse_file(self._answer, error=WorkerFailed)

    def _failed(self, code: int) -> NoReturn:
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        raise WorkerFailed(f"timing {self.name} ended with {how} (its output is in run.log)")

    def close(self) -> None:
        """Kill it if it still runs (an interrupt, a failure elsewhere, a run that timed
        nothing), copy its output, and remove its files."""
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        if self._ready is not None:
            os.close(self._ready)
            self._ready = None
        if self._process.stdin is not None and not self._process.stdin.closed:
            with suppress(BrokenPipeError):
                self._process.stdin.close()
        output = self._output.read_bytes() if self._output.exists() else b""
        if output:
            sys.stderr.write(output.decode("utf-8", "replace"))
            sys.stderr.flush()
        self._folder.cleanup()


class TimingWorkers:
    """`count` timing worker processes, started before the run is captured: each imports what
    building the run's modes needs (torch, and Dynamo and Inductor for a compiled mode: most of
    what a worker costs) while this process loads the model, where one of its cores was idle;
    after the capture they only build, side by side as memory allows (built_at_once), then time
    one after another (`turns`). The capture waits until all have imported (`imported`), so
    none runs beside it, and they then sleep until their request arrives. One that ends before
    it has imported makes the pool `failed`: its workers are closed, and the timing step starts
    its own, after the evidence is saved (a worker's crash is then a bug with the evidence kept).
    Closing kills every worker still running (one that timed nothing, a run that failed or was
    interrupted)."""

    def __init__(self, count: int, device: str, modes: Sequence[str]) -> None:
        self.count = count
        self.failed: str | None = None  # why, when a worker ended before it had imported
        self._workers: list[_Worker] = []
        self._imported = False
        try:
            for i in range(count):
                self._workers.append(_Worker(f"worker {i + 1} of {count}", device, modes))
        except BaseException:
            self.close()
            raise

    def imported(self) -> None:
        """Wait until every worker has imported what its builds need (once); one that ended
        before makes the pool `failed` (see the class)."""
        if self._imported:
            return
        self._imported = True
        try:
            for worker in self._workers:
                worker.imported()
        except WorkerFailed as exc:
            self.failed = str(exc)
            self.close()

    @contextmanager
    def turns(
        self, request: WorkerRequest, at_once: int
    ) -> Iterator[Callable[[int, Collection[str]], WorkerResult]]:
        """Yields `result(i, leave_out)`, worker i's result, called for i = 0, 1, ... in turn.
        Workers build `request` `at_once` together, side by side; the first of a group times
        only when all of the group are ready, and no group builds before the one before it has
        ended, so no build and no other worker runs while one times. Every worker is closed at
        the end (an interrupt, a failure, or done)."""
        built = 0

        def result(i: int, leave_out: Collection[str]) -> WorkerResult:
            nonlocal built
            if i == built:  # the next group
                self.imported()
                if self.failed is not None:
                    raise WorkerFailed(self.failed)
                group = self._workers[i : i + at_once]
                for worker in group:
                    worker.build(request)
                for worker in group:
                    worker.ready()
                built += len(group)
            return self._workers[i].result(leave_out)

        try:
            yield result
        finally:
            self.close()

    def close(self) -> None:
        for worker in self._workers:
            worker.close()
        self._workers = []


@contextmanager
def workers_ahead(
    workers: int | None, device: str, modes: Sequence[str]
) -> Iterator[TimingWorkers | None]:
    """The timing workers a run of `modes` on `device` asks for (`workers` None: the default),
    started now (TimingWorkers) and closed when the block ends; None when there are none (0, or
    a number the run's options refuse: they say why)."""
    try:
        count = max(0, default_workers() if workers is None else workers)
    except ValueError:
        count = 0
    if not count:
        yield None
        return
    ahead = TimingWorkers(count, device, modes)
    try:
        yield ahead
    finally:
        ahead.close()


@contextmanager
def started_workers(
    request: WorkerRequest, workers: int, at_once: int, ahead: TimingWorkers | None = None
) -> Iterator[Callable[[int, Collection[str]], WorkerResult]]:
    """The turns (TimingWorkers.turns) of `workers` timing workers of `request`: those started
    `ahead` of the run (workers_ahead) when there are as many and none failed, else started
    now."""
    if ahead is None or ahead.count != workers or ahead.failed is not None:
        modes = dict.fromkeys(mode for model in request.models for mode in model.modes)
        ahead = TimingWorkers(workers, request.device, tuple(modes))
    with ahead.turns(request, at_once) as result:
        yield result
