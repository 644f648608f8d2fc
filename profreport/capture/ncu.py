"""Measured DRAM bytes: re-run one mode under Nsight Compute (`ncu`) for exactly one step.

The modeled bytes elsewhere in profreport are a lower bound computed from tensor sizes. This
module measures what the GPU's DRAM actually moved: `ncu` runs a child process
(`profreport.ncu_child`) that builds and warms up the mode, then brackets one forward with
cudaProfilerStart/Stop; with `--profile-from-start off` only that step's kernels are profiled.

ncu facts this relies on (Nsight Compute CLI manual, "Console Output" and "Metrics and Units"):
`--csv` with the default `--page details` prints one row per (kernel launch, metric) with the
columns "ID", ..., "Kernel Name", ..., "Metric Name", "Metric Unit", "Metric Value"; units are
scaled with SI factors (byte-based units by 1000: Kbyte, Mbyte, ...; time by 1000: nsecond,
usecond, msecond) unless `--print-units base`; values carry thousands separators ("2,816").
The default `--cache-control all` flushes GPU caches before each replayed kernel, so the bytes of
each kernel are its cold-cache DRAM traffic. Reads are then complete, but writes are not: what a
kernel writes last can still sit in L2 (write-back) when its range ends, so its measured DRAM
writes can fall short of what it wrote by up to the L2 size (about 50 MB on an H200) per kernel;
ncu_results.WRITES_NOTE says so wherever measured writes are shown beside modeled ones.
`--clock-control none` leaves the GPU clocks as they are: ncu's default locks them to base clock,
which a shared machine may refuse (and which would make durations unlike the timed run's).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from profreport.capture.ncu_results import (
    METRICS,
    NcuParseError,
    measured_bytes,
    parse_ncu_csv,
    unavailable_bytes,
)
from profreport.files import raise_if_full
from profreport.record.model import MeasuredBytes

CHILD_MODULE = "profreport.ncu_child"


def ncu_unavailable_reason(device_type: str) -> str | None:
    """None when Nsight Compute can measure on this machine, else a one-line reason."""
    if device_type != "cuda":
        return f"device is {device_type}: Nsight Compute measures NVIDIA GPUs only"
    import torch

    hip = getattr(torch.version, "hip", None)
    if hip:
        return f"torch is a ROCm build (HIP {hip}): Nsight Compute measures NVIDIA GPUs only"
    if shutil.which("ncu") is None:
        return "ncu not found on PATH (install Nsight Compute)"
    if not torch.cuda.is_available():
        return "CUDA is not available to torch (no NVIDIA GPU or driver visible): nothing for ncu to measure"
    return None


@dataclass(frozen=True)
class ChildModel:
    """The model the ncu child builds: what `profreport.ncu_child` takes as arguments."""

    spec: str
    device: str
    dtype: str = "float32"
    batch_size: int | None = None
    channels_last: bool = False


def child_command(model: ChildModel, mode: str) -> list[str]:
    """The command that builds `mode` and runs one bracketed step (what ncu launches)."""
    cmd = [sys.executable, "-m", CHILD_MODULE, "--model", model.spec, "--mode", mode]
    cmd += ["--device", model.device, "--dtype", model.dtype]
    if model.batch_size is not None:
        cmd += ["--batch-size", str(model.batch_size)]
    if model.channels_last:
        cmd.append("--channels-last")
    return cmd


def ncu_command(ncu: str, log_file: str, child: list[str]) -> list[str]:
    """ncu's options, then the child command. Options are spelled out even where they are
    ncu's defaults, because a user's config.ncu-cfg can change defaults."""
    options = (
        "--csv --page details --print-units base --profile-from-start off --target-processes all "
        "--cache-control all --clock-control none"
    )
    return [ncu, "--metrics", ",".join(METRICS), *options.split(), "--log-file", log_file, *child]


def _child_env() -> dict[str, str]:
    merged = dict(os.environ)
    # Inductor compiles in this process instead of a worker pool: no compile subprocesses for
    # ncu to inject into (they launch no kernels of the step, but cost startup time).
    merged.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    # The child imports profreport even when it runs from a source tree that is not installed.
    package_root = str(Path(__file__).resolve().parents[2])
    existing = merged.get("PYTHONPATH")
    merged["PYTHONPATH"] = package_root + (os.pathsep + existing if existing else "")
    return merged


def _last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else None


def _failure_detail(log: str, out: str, err: str) -> str:
    """One line on why ncu failed: its last ==ERROR== (else ==WARNING==) line, plus the last
    line written to stderr (the child's Python exception, say) when that says something else."""
    lines = f"{log}\n{out}\n{err}".splitlines()
    errors = [line.strip() for line in lines if "==ERROR==" in line] or [
        line.strip() for line in lines if "==WARNING==" in line
    ]
    stderr_line = _last_line(err)
    parts = [errors[-1]] if errors else []
    if stderr_line and stderr_line not in parts:
        parts.append(stderr_line)
    if not parts:
        fallback = _last_line(log) or _last_line(out)
        parts.append(fallback or "no output")
    return "; ".join(parts)


def _run(cmd: list[str], env: dict[str, str], timeout_s: float) -> tuple[int | None, str, str]:
    """Run `cmd` in its own process group; on timeout end that group (ncu and the child)."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # it ended on its own meanwhile
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out, err
    return proc.returncode, out, err


def measure_mode(model: ChildModel, mode: str, timeout_s: float = 600) -> MeasuredBytes:
    """Measure one step of `mode` under ncu; never raises for ncu or child failures.

    The device is not checked here (call `ncu_unavailable_reason` first); any failure (ncu
    missing, non-zero exit, timeout, no kernels in the CSV) returns available=False with a
    one-line reason.
    """
    child_env = _child_env()
    resolved = shutil.which("ncu", path=child_env.get("PATH"))
    if resolved is None:
        return unavailable_bytes("ncu not found: 'ncu' (install Nsight Compute)")
    child = child_command(model, mode)
    with tempfile.TemporaryDirectory(prefix="profreport-ncu-") as tmp:
        log_path = Path(tmp) / "ncu.csv"
        cmd = ncu_command(resolved, str(log_path), child)
        try:
            code, out, err = _run(cmd, child_env, timeout_s)
        except OSError as exc:
            return unavailable_bytes(f"could not start ncu: {exc}", cmd)
        log = log_path.read_text(errors="replace") if log_path.is_file() else ""
        if log and not log.endswith("\n"):  # a table cut short: a full disk is the user's to fix
            raise_if_full(Path(tmp))
    if code != 0:
        what = f"timed out after {timeout_s:g} s" if code is None else f"exited with code {code}"
        return unavailable_bytes(f"ncu {what}: {_failure_detail(log, out, err)}", cmd)
    try:
        # The table is in the log file; stdout is the fallback should an ncu print it there.
        kernels = parse_ncu_csv(log) or parse_ncu_csv(out)
    except NcuParseError as exc:
        return unavailable_bytes(f"could not read ncu's CSV: {exc}", cmd)
    if not kernels:
        return unavailable_bytes(f"ncu profiled no kernels: {_failure_detail(log, out, err)}", cmd)
    return measured_bytes(kernels, cmd)
