"""The environment a run happened in: versions, threads, device, and which fusers are active."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import torch

from profreport.exits import UsageError
from profreport.record.model import Device, Environment, Fusers
from profreport.text import one_line

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def make_sync(device: torch.device) -> Callable[[], None]:
    """What waits for the device's queued work: a CUDA synchronize, or nothing on CPU."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


# The processor's model name as the platform's own tool prints it (psutil has none): lscpu's
# "Model name:" line on Linux, sysctl's brand string on macOS; elsewhere `platform`'s guess.
_CPU_NAME_COMMANDS = {
    "Linux": (["lscpu"], "Model name:"),
    "Darwin": (["sysctl", "-n", "machdep.cpu.brand_string"], ""),
}


def _cpu_name() -> str:
    command, label = _CPU_NAME_COMMANDS.get(platform.system(), ([], ""))
    if not command:
        return platform.processor() or platform.machine()
    try:
        text = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
            env={**os.environ, "LC_ALL": "C"},
        ).stdout
    except (OSError, subprocess.SubprocessError):  # no such tool, or it hung
        text = ""
    for line in text.splitlines():
        if line.startswith(label) and line[len(label) :].strip():
            return line[len(label) :].strip()
    return platform.processor() or platform.machine()


def _safe(fn: Callable[[], Any], default: Any = None) -> Any:
    try:
        return fn()
    except Exception:
        return default


def resolve_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda requested but CUDA is not available in this PyTorch build")
    if device.type not in {"cpu", "cuda"}:
        raise ValueError(f"unsupported device {requested!r}: use auto, cpu or cuda")
    if device.type == "cuda" and device.index is not None:
        count = torch.cuda.device_count()
        if device.index >= count:
            raise ValueError(f"--device {requested}: this machine has {count} CUDA device(s)")
    return device


def dtype_problem(device: torch.device, dtype: torch.dtype) -> str | None:
    """Why `dtype` cannot run on `device` (one line), or None when it can.

    bfloat16 needs native support on CUDA (compute capability 8.0+); anything else is probed
    with one small matmul and convolution, the ops every built-in model uses.
    """
    native_bf16 = device.type != "cuda" or torch.cuda.is_bf16_supported(including_emulation=False)
    if dtype == torch.bfloat16 and not native_bf16:
        return f"bfloat16 is not supported natively on {torch.cuda.get_device_name(device)}"
    try:
        _probe_dtype(device, dtype)
    except (RuntimeError, TypeError, NotImplementedError) as exc:
        return f"{str(dtype).removeprefix('torch.')} does not run on {device.type}: {one_line(str(exc))}"
    return None


def _probe_dtype(device: torch.device, dtype: torch.dtype) -> None:
    x = torch.ones(1, 2, 4, 4, device=device, dtype=dtype)
    torch.nn.functional.conv2d(x, torch.ones(2, 2, 3, 3, device=device, dtype=dtype))
    torch.mm(x[0, 0], x[0, 1])


def device_for(device_name: str, dtype_name: str, threads: int | None) -> torch.device:
    """`threads` applied, `device_name` resolved and checked to run `dtype_name` (UsageError
    if not)."""
    if threads:
        torch.set_num_threads(threads)
    try:
        device = resolve_device(device_name)
    except (ValueError, RuntimeError) as exc:
        raise UsageError(one_line(str(exc))) from None
    problem = dtype_problem(device, DTYPES[dtype_name])
    if problem:
        raise UsageError(problem)
    return device


def device_info(device: torch.device) -> Device:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return Device(
            type="cuda",
            name=props.name,
            hip=torch.version.hip is not None,
            capability=f"{props.major}.{props.minor}",
            memory_gib=round(props.total_memory / 2**30, 1),
            multiprocessors=props.multi_processor_count,
        )
    return Device(type="cpu", name=_cpu_name(), logical_cores=os.cpu_count())


def collect_env(device: torch.device) -> Environment:
    cuda = device.type == "cuda"
    return Environment(
        torch=torch.__version__,
        python=platform.python_version(),
        platform=platform.platform(),
        threads=torch.get_num_threads(),
        interop_threads=torch.get_num_interop_threads(),
        cuda_runtime=torch.version.cuda,
        hip_runtime=torch.version.hip,
        cudnn=_safe(torch.backends.cudnn.version) if cuda else None,
        mkldnn=_safe(torch.backends.mkldnn.is_available),  # untyped in torch's stubs
        fusers=Fusers(
            # NNC (TensorExpr) is the TorchScript fuser; it needs LLVM to generate CPU code.
            nnc_enabled=bool(_safe(torch._C._jit_texpr_fuser_enabled, False)),
            nnc_can_fuse_on_cpu=bool(_safe(torch._C._jit_can_fuse_on_cpu, False)),
            nnc_can_fuse_on_gpu=bool(_safe(torch._C._jit_can_fuse_on_gpu, False)),
            llvm_available=bool(_safe(torch._C._llvm_enabled, False)),
            profiling_executor=bool(_safe(torch._C._get_graph_executor_optimize, False)),
            # Inductor generates C++ on CPU (needs a compiler) and Triton on GPU.
            inductor_cpp_compiler=shutil.which(os.environ.get("CXX", "g++"))
            or shutil.which("c++")
            or shutil.which("clang++"),
            triton=_safe(lambda: __import__("triton").__version__) if cuda else None,
        ),
    )
