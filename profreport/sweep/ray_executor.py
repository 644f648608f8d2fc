"""The Ray executor: one Ray task per point, each in a fresh worker process (`max_calls=1`).

A task runs the point's runner.GenerateRequest in its worker (runner.run_point, with an empty
Inductor cache, as locally), packs the run folder it wrote into a tar and returns the bytes with
the runner.GenerateResult as data; the driver unpacks the folder under the sweep's points/<id>/
folder and writes the result beside it, as the local executor's child does, so nothing assumes a
disk shared between the driver and the workers. A task asks for one GPU on a cluster that has
GPUs (unless the sweep's device is cpu), else for the CPUs of the smallest node, so two points
never share a machine's cores while they are timed. Tasks are never retried: a point that raises,
or whose worker dies, is recorded as failed with the reason and the other points go on.

Every worker needs what the driver has: Python with torch, profreport (same version) and, for
hf: models, transformers. `ray` itself is the optional extra `profreport[ray]`.
"""

from __future__ import annotations

import dataclasses
import io
import os
import socket
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profreport.files import dumps, write_atomic
from profreport.runner import GenerateRequest, GenerateResult, run_point
from profreport.sweep.grid import Point, SweepSpec
from profreport.sweep.local import LOG_NAME, RESULT_NAME, compile_cache, ended, write_request
from profreport.sweep.point import summary_line
from profreport.text import one_line

INSTALL_HINT = "the ray executor needs Ray: pip install 'profreport[ray]'"


class RayUnavailable(Exception):
    """Ray is not installed, or no cluster could be reached; one line for the user."""


def run_point_task(request: dict[str, Any], cold_compile: bool) -> dict[str, Any]:
    """The Ray task (runs in the worker): the point's generate request run into a temporary
    folder, returned as a tar with its result."""
    import shutil
    import sys
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="profreport-point-"))
    started = time.monotonic()
    try:
        with compile_cache(cold_compile) as cache:
            os.environ.update(cache)  # this worker runs this one task (max_calls=1)
            asked = GenerateRequest.parse({**request, "out": str(tmp)}, "the point's request")
            result = run_point(asked, sys.stderr)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for child in sorted(tmp.iterdir()):
                tar.add(child, arcname=child.name)
        return {
            "result": result.to_json(),
            "tar": buf.getvalue(),
            "duration_s": round(time.monotonic() - started, 3),
            "worker": f"ray {socket.gethostname()} pid {os.getpid()}",
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable(INSTALL_HINT) from None
    return ray


def connect(address: str | None) -> bool:
    """Join the cluster at `address` (None: start a local Ray on this machine) unless this
    process already has Ray running; True when this call started the connection."""
    ray = _ray()
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"at {address}" if address else "locally"
        raise RayUnavailable(f"cannot start or reach Ray {where}: {one_line(str(exc))}") from None
    return True


def task_resources(device: str) -> dict[str, float]:
    """One GPU per point on a GPU cluster; otherwise the CPUs of the smallest node."""
    ray = _ray()
    if device != "cpu" and ray.cluster_resources().get("GPU", 0) >= 1:
        return {"num_gpus": 1, "num_cpus": 1}
    cpus = [
        n["Resources"].get("CPU", 0)
        for n in ray.nodes()
        if n.get("Alive") and n["Resources"].get("CPU")
    ]
    if not cpus:
        raise RayUnavailable("the Ray cluster has no node with CPUs")
    return {"num_cpus": min(cpus)}


def _failure(exc: BaseException) -> str:
    """Why a task failed, in one line."""
    ray = _ray()
    if isinstance(exc, ray.exceptions.WorkerCrashedError):
        return "the Ray worker died while running this point (killed, or out of memory)"
    if isinstance(exc, ray.exceptions.RayTaskError):
        cause = exc.cause if getattr(exc, "cause", None) is not None else exc
        return f"the Ray task raised {type(cause).__name__}: {one_line(str(cause))}"
    return f"{type(exc).__name__}: {one_line(str(exc))}"  # its first non-blank line


def _unpack(task: dict[str, Any], point: Point, root: Path) -> Point:
    """The task's run folder under the point's folder, its result and log beside it (as a
    local point leaves them), and the point as it ended, read from the result."""
    point_dir = root / "points" / point.id
    point_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(task["tar"]), mode="r:gz") as tar:
        tar.extractall(point_dir, filter="data")
    result = GenerateResult.parse(task["result"], "the task's result")
    write_atomic(point_dir / RESULT_NAME, dumps(task["result"]))
    log = point_dir / LOG_NAME
    log.write_text(summary_line(result) + "\n", encoding="utf-8")
    took, worker = task["duration_s"], task["worker"]
    return ended(point, result, result.exit_code, root, log=log, duration_s=took, worker=worker)


def run_ray(
    spec: SweepSpec,
    points: list[Point],
    root: Path,
    on_start: Callable[[Point], None],
    on_done: Callable[[Point], None],
    address: str | None = None,
) -> None:
    """Run every point as a Ray task and record each as it finishes; on Ctrl-C the tasks still
    running are cancelled and the interrupt goes on up."""
    ray = _ray()
    started = connect(address)
    try:
        remote = ray.remote(max_calls=1, max_retries=0)(run_point_task)
        resources = task_resources(spec.device)

        def submit(point: Point) -> Any:
            # the request as the driver sees it (its run folder under the point's folder); the
            # worker runs it into a temporary folder of its own
            request = spec.request(point, root / "points" / point.id)
            write_request(root / "points" / point.id, request)
            return remote.options(**resources).remote(request.to_json(), spec.cold_compile)

        pending = {submit(p): p for p in points}
        for point in points:
            on_start(point)
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                point = pending.pop(done[0])
                try:
                    on_done(_unpack(ray.get(done[0]), point, root))
                except ray.exceptions.RayError as exc:
                    error = _failure(exc)
                    on_done(dataclasses.replace(point, status="failed", error=error, worker="ray"))
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    finally:
        if started:
            ray.shutdown()
