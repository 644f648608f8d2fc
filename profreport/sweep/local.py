"""The local executor: one child process per point (`python -m profreport.sweep.point`), in
sequence.

A fresh process per point keeps compile caches, thread pools and allocator state from leaking
from one point into the next; each point also gets an empty Inductor cache folder of its own
(unless the sweep says warm), so its compile time is a cold compile. The child reads the point's
`request.json` and writes its `result.json` (runner.GenerateResult): how the point ended is read
from that file, never from the child's output, which goes to `generate.log` for people to read.
On Ctrl-C (or SIGTERM to the sweep) the running child is asked to stop (SIGTERM: it removes its
half-written run folder), then killed if it does not.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from profreport.files import RECORD, dumps, write_atomic
from profreport.runner import GenerateRequest, GenerateResult, ResultError
from profreport.sweep.grid import Point, SweepSpec

LOG_NAME = "generate.log"
REQUEST_NAME = "request.json"
RESULT_NAME = "result.json"
CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"  # Triton's cache lives under it unless TRITON_CACHE_DIR
STOP_GRACE_S = 30.0


def write_request(point_dir: Path, request: GenerateRequest) -> Path:
    """The point's request.json (what it runs; `python -m profreport.sweep.point` runs it again
    by hand); returns its path."""
    point_dir.mkdir(parents=True, exist_ok=True)
    path = point_dir / REQUEST_NAME
    write_atomic(path, dumps(request.to_json()))
    return path


def read_result(path: Path) -> GenerateResult | None:
    """The result file a point wrote; None when there is none (its process died before writing
    it); ResultError, one line, when the file is not a generate result."""
    if not path.exists():
        return None
    return GenerateResult.parse_file(path, ResultError)


def _no_result(exit_code: int) -> str:
    if exit_code < 0:
        number = -exit_code
        name = signal.Signals(number).name if number in signal.valid_signals() else "?"
        return f"the point's process was killed by signal {number} ({name})"
    return f"the point's process exited with code {exit_code} without a result (see {LOG_NAME})"


def ended(
    point: Point,
    result: GenerateResult | None,
    exit_code: int,
    root: Path,
    *,
    log: Path | None = None,
    duration_s: float | None = None,
    worker: str | None = None,
) -> Point:
    """`point` as it ended, from its result (None: its process wrote none) and its process's
    exit code. The run folder is the result's, looked up by name under the point's folder
    (root/points/<id>), where the executor put it; paths are relative to `root`."""
    point_dir = root / "points" / point.id
    if result is None:
        result = GenerateResult.made(exit_code, None, _no_result(exit_code))
        if exit_code == 0:  # exit 0 without a result is no pass
            result = dataclasses.replace(result, status="failed")
    run_dir = None
    if result.run_dir is not None and (point_dir / result.run_dir.name / RECORD).is_file():
        run_dir = point_dir / result.run_dir.name

    def rel(path: Path | None) -> str | None:
        return None if path is None else path.relative_to(root).as_posix()

    return dataclasses.replace(
        point,
        status=result.status,
        error=result.error,
        exit_code=result.exit_code,
        run=rel(run_dir),
        log=rel(log),
        duration_s=duration_s,
        worker=worker,
    )


def child_environment() -> dict[str, str]:
    """This process's environment, with the profreport being run first on PYTHONPATH, so the
    child runs the same code (a checkout as well as an installed package)."""
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])  # the folder holding profreport/
    env["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [env.get("PYTHONPATH")])])
    return env


@contextmanager
def compile_cache(cold: bool) -> Iterator[dict[str, str]]:
    """Environment entries for one point: with `cold`, an empty Inductor cache of its own
    (removed afterwards), since compiled-kernel caches on disk outlive processes and a point must
    not compile faster because an earlier point or sweep built the same kernel."""
    if not cold:
        yield {}
        return
    with tempfile.TemporaryDirectory(prefix="profreport-inductor-") as cache:
        yield {CACHE_ENV: cache}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # the child treats it like Ctrl-C: nothing half-written
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_point(spec: SweepSpec, point: Point, root: Path) -> Point:
    """Run one point in a child process under root/points/<id>/, its output to generate.log;
    the point as it ended."""
    point_dir = root / "points" / point.id
    request = write_request(point_dir, spec.request(point, point_dir))
    result_path = point_dir / RESULT_NAME
    result_path.unlink(missing_ok=True)  # a result from an earlier try is not this one's
    log_path = point_dir / LOG_NAME
    args = [sys.executable, "-m", "profreport.sweep.point", str(request), str(result_path)]
    started = time.monotonic()
    with open(log_path, "wb") as log, compile_cache(spec.cold_compile) as cache:
        proc = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**child_environment(), **cache},
        )
        try:
            exit_code = proc.wait()
        except BaseException:  # Ctrl-C or SIGTERM to the sweep: stop the child, then unwind
            _stop(proc)
            raise
    took = round(time.monotonic() - started, 3)
    try:
        result = read_result(result_path)
    except ResultError as exc:  # no result to read, whatever the exit code says
        result = dataclasses.replace(
            GenerateResult.made(exit_code, error=str(exc)), status="failed"
        )
    worker = f"local pid {proc.pid}"
    return ended(point, result, exit_code, root, log=log_path, duration_s=took, worker=worker)


def run_local(
    spec: SweepSpec,
    points: list[Point],
    root: Path,
    on_start: Callable[[Point], None],
    on_done: Callable[[Point], None],
) -> None:
    """Run `points` one after another, reporting each as it ends."""
    for point in points:
        on_start(point)
        on_done(run_point(spec, point, root))
