"""Preflight readings on the GPU machine, written as one JSON object (`--out`): versions, what
CUDA shows, the TorchScript fuser's GPU support, cuDNN, profreport's installed requirements, and
whether Nsight Compute reads DRAM bytes with profreport's own options (a probe on one kernel),
and profreport's measured ceilings beside torch.utils.benchmark's.

Each reading is taken on its own: one that fails records its error and the others go on, so
the JSON is always written.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROBE_ELEMENTS = 4 * 2**20  # float32: the probe's kernel reads 16 MiB and writes 16 MiB
PROBE_TIMEOUT_S = 75.0
# One kernel bracketed by cudaProfilerStart/Stop, as profreport's ncu child brackets one step.
PROBE = f"""
import torch
x = torch.ones({PROBE_ELEMENTS}, device="cuda")
torch.cuda.synchronize()
torch.cuda.profiler.start()
y = x * 2
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print("probe done", float(y[0]))
"""


def _reading(take: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return take()
    except Exception as exc:  # recorded, and the other readings go on
        return {"error": f"{type(exc).__name__}: {exc}"}


def _run(cmd: list[str], timeout_s: float) -> tuple[int | None, str]:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return done.returncode, (done.stdout + done.stderr).strip()


def cuda_reading() -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        return {"available": False, "reason": "torch.cuda.is_available() is False"}
    props = torch.cuda.get_device_properties(0)
    return {
        "available": True,
        "device": props.name,
        "capability": f"{props.major}.{props.minor}",
        "memory_bytes": props.total_memory,
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "multiprocessors": props.multi_processor_count,
        "runtime": torch.version.cuda,
        **smi_reading(),
    }


def smi_reading() -> dict[str, Any]:
    """The driver version, and the device as nvidia-smi lists it (NVML: a second opinion on
    what torch's CUDA runtime reports)."""
    query = "--query-gpu=driver_version,name,memory.total"
    code, out = _run(["nvidia-smi", query, "--format=csv,noheader,nounits"], timeout_s=15)
    fields = [f.strip() for f in out.splitlines()[0].split(",")] if code == 0 and out else []
    if len(fields) != 3:
        return {"driver": None, "smi": None}
    driver, name, memory_mib = fields
    try:
        memory = int(float(memory_mib) * 2**20)
    except ValueError:
        return {"driver": driver, "smi": None}
    return {"driver": driver, "smi": {"name": name, "memory_bytes": memory}}


def fusers_reading() -> dict[str, Any]:
    import torch

    return {
        "nnc_can_fuse_on_gpu": bool(torch._C._jit_can_fuse_on_gpu()),
        "texpr_fuser_enabled": bool(torch._C._jit_texpr_fuser_enabled()),
    }


def cudnn_reading() -> dict[str, Any]:
    import torch

    cudnn = torch.backends.cudnn
    return {
        "available": bool(cudnn.is_available()),  # type: ignore[no-untyped-call]
        "enabled": bool(cudnn.enabled),
        "version": cudnn.version(),  # type: ignore[no-untyped-call]
    }


def dependencies_reading(wheels_site: str | None) -> dict[str, Any]:
    """profreport's requirements (no extras) against what is installed here."""
    from importlib import metadata

    from packaging.requirements import Requirement

    import profreport

    requirements = []
    for text in metadata.requires("profreport") or []:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an optional extra's requirement
        try:
            installed: str | None = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            installed = None
        satisfied = installed is not None and req.specifier.contains(installed, prereleases=True)
        requirements.append(
            {"requirement": str(req), "installed": installed, "satisfied": satisfied}
        )
    return {
        "version": metadata.version("profreport"),
        "location": str(Path(profreport.__file__).resolve().parent),
        "wheels_site": wheels_site,
        "requirements": requirements,
    }


def ceilings_reading() -> dict[str, Any]:
    """profreport's measured ceilings beside torch.utils.benchmark's median of an add (memory)
    and a matmul of the same size, in one process: an independent second opinion."""
    import torch
    from torch.utils.benchmark import Timer

    from profreport.capture.ceilings import measure

    if not torch.cuda.is_available():
        return {"available": False, "reason": "no CUDA device"}
    device = torch.device("cuda")
    found = measure(device, torch.float32, torch.get_num_threads())
    n = 64 * 2**20  # 256 MiB per float32 tensor
    a, b, c = (torch.ones(n, device=device) for _ in range(3))
    add = Timer("torch.add(a, b, out=c)", globals={"torch": torch, "a": a, "b": b, "c": c})
    add_bytes_per_s = 3 * n * 4 / add.blocked_autorange(min_run_time=1).median
    del a, b, c
    if found.matmul_rate is None or found.memory_bandwidth is None:
        return {"available": False, "reason": found.reason or "no ceilings measured"}
    m = int(found.matmul_rate.n or 0)
    x, y = torch.rand(m, m, device=device), torch.rand(m, m, device=device)
    mm = Timer("torch.mm(x, y)", globals={"torch": torch, "x": x, "y": y})
    mm_flops = 2 * m**3 / mm.blocked_autorange(min_run_time=1).median
    return {
        "available": True,
        "timer": found.timer,
        "copy_bytes_per_s": found.memory_bandwidth.value,
        "add_bytes_per_s": add_bytes_per_s,
        "matmul_flops": found.matmul_rate.value,
        "benchmark_matmul_flops": mm_flops,
        "matmul_n": m,
    }


def ncu_reading(timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    """Run the probe under ncu with the options profreport's --measure-bytes uses."""
    from profreport.capture.ncu import ncu_command
    from profreport.capture.ncu_results import measured_bytes, parse_ncu_csv

    ncu = shutil.which("ncu")
    if ncu is None:
        return {"available": False, "reason": "ncu not found on PATH"}
    _, version = _run([ncu, "--version"], timeout_s=30)
    expected = PROBE_ELEMENTS * 4
    with tempfile.TemporaryDirectory(prefix="gpu-check-ncu-") as tmp:
        log = Path(tmp) / "ncu.csv"
        cmd = ncu_command(ncu, str(log), [sys.executable, "-c", PROBE])
        start = time.monotonic()
        code, output = _run(cmd, timeout_s)
        seconds = time.monotonic() - start
        text = log.read_text(errors="replace") if log.is_file() else ""
    base = {
        "version": version.splitlines()[-1] if version else None,
        "command": cmd,
        "seconds": round(seconds, 1),
        "expected_read": expected,
        "expected_written": expected,
    }
    if code != 0:
        errors = [ln for ln in (text + "\n" + output).splitlines() if "==ERROR==" in ln]
        reason = (errors or [output.splitlines()[-1] if output else "no output"])[-1]
        return {**base, "available": False, "reason": f"ncu exited {code}: {reason}"}
    kernels = parse_ncu_csv(text) or parse_ncu_csv(output)
    measured = measured_bytes(kernels, cmd)
    if not measured.available:
        return {**base, "available": False, "reason": measured.reason}
    return {
        **base,
        "available": measured.read is not None,
        "reason": None if measured.read is not None else "no dram__bytes_read.sum value",
        "kernels": len(kernels),
        "read": measured.read,
        "written": measured.written,
    }


def readings(wheels_site: str | None, ncu_timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, Any]:
    def versions() -> dict[str, Any]:
        import torch

        try:
            import triton

            triton_version: str | None = triton.__version__
        except ImportError:
            triton_version = None
        return {"torch": torch.__version__, "triton": triton_version}

    found: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine()}
    found.update(_reading(versions))
    found["cuda"] = _reading(cuda_reading)
    found["fusers"] = _reading(fusers_reading)
    found["cudnn"] = _reading(cudnn_reading)
    found["dependencies"] = _reading(lambda: dependencies_reading(wheels_site))
    found["ncu"] = _reading(lambda: ncu_reading(ncu_timeout_s))
    found["ceilings"] = _reading(ceilings_reading)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--wheels-site", default=None)
    parser.add_argument("--ncu-timeout", type=float, default=PROBE_TIMEOUT_S)
    args = parser.parse_args(argv)
    found = readings(args.wheels_site, args.ncu_timeout)
    args.out.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
