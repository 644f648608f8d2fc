"""The local executor: one `python -m profreport generate` child process per point, in sequence.

A fresh process per point keeps compile caches, thread pools and allocator state from leaking
from one point into the next; each point also gets an empty Inductor cache folder of its own
(unless the sweep says warm), so its compile time is a cold compile. On Ctrl-C (or SIGTERM to the sweep) the running child is asked to
stop (SIGTERM: it removes its half-written run folder), then killed if it does not.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import profreport
from profreport.sweep.document import PointOutcome
from profreport.sweep.grid import Point, SweepSpec

LOG_NAME = "generate.log"
CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"  # Triton's cache lives under it unless TRITON_CACHE_DIR
STOP_GRACE_S = 30.0
EXIT_INTERRUPTED = 130


def _error_line(log: str, exit_code: int) -> str:
    """The child's one-line error (generate prints `error: ...`), else its last line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    if errors:
        return errors[0] if len(errors) == 1 else "; ".join(errors)
    if exit_code < 0:
        name = signal.Signals(-exit_code).name if -exit_code in signal.valid_signals() else "?"
        return f"generate was killed by signal {-exit_code} ({name})"
    return lines[-1] if lines else f"generate exited with code {exit_code}"


def outcome_of(exit_code: int, output: str, point_dir: Path, **extra: object) -> PointOutcome:
    """A point's outcome from generate's exit code and output; its run folder is the one named
    on generate's `record: <folder>/run.json` line, looked up under `point_dir` by name."""
    run_dir = None
    for line in output.splitlines():
        if line.startswith("record: ") and line.rstrip().endswith("run.json"):
            candidate = point_dir / Path(line[len("record: ") :].strip()).parent.name
            if (candidate / "run.json").is_file():
                run_dir = candidate
    if exit_code == 0:
        status, error = "ok", None
    else:
        status = "interrupted" if exit_code == EXIT_INTERRUPTED else "failed"
        error = _error_line(output, exit_code)
    return PointOutcome(status, error, exit_code, run_dir, **extra)  # type: ignore[arg-type]


def child_environment() -> dict[str, str]:
    """This process's environment, with the profreport being run first on PYTHONPATH, so the
    child runs the same code (a checkout as well as an installed package)."""
    env = dict(os.environ)
    here = str(Path(profreport.__file__).resolve().parent.parent)
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
        proc.send_signal(signal.SIGTERM)  # generate treats it like Ctrl-C: nothing half-written
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_point(spec: SweepSpec, point: Point, point_dir: Path) -> PointOutcome:
    """Run one point's generate in a child process, its output to point_dir/generate.log."""
    point_dir.mkdir(parents=True, exist_ok=True)
    log_path = point_dir / LOG_NAME
    args = [sys.executable, "-m", "profreport", *spec.generate_args(point), "--out", str(point_dir)]
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
    text = log_path.read_text(encoding="utf-8", errors="replace")
    return outcome_of(
        exit_code,
        text,
        point_dir,
        log=log_path,
        duration_s=round(time.monotonic() - started, 3),
        worker=f"local pid {proc.pid}",
    )


def run_local(
    spec: SweepSpec,
    points: list[Point],
    root: Path,
    on_start: Callable[[Point], None],
    on_done: Callable[[Point, PointOutcome], None],
) -> None:
    """Run `points` one after another under root/points/<id>/, reporting each as it ends."""
    for point in points:
        on_start(point)
        on_done(point, run_point(spec, point, root / "points" / point.id))
