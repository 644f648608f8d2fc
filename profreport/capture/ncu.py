"""Measured DRAM bytes: re-run one mode under Nsight Compute (`ncu`) for exactly one step.

The modeled bytes elsewhere in profreport are a lower bound computed from tensor sizes. This
module measures what the GPU's DRAM actually moved: `ncu` runs a child process
(`profreport.capture.ncu_child`) that builds and warms up the mode, then brackets one forward with
cudaProfilerStart/Stop; with `--profile-from-start off` only that step's kernels are profiled.

ncu facts this relies on (Nsight Compute CLI manual, "Console Output" and "Metrics and Units"):
`--csv` with the default `--page details` prints one row per (kernel launch, metric) with the
columns "ID", ..., "Kernel Name", ..., "Metric Name", "Metric Unit", "Metric Value"; units are
scaled with SI factors (byte-based units by 1000: Kbyte, Mbyte, ...; time by 1000: nsecond,
usecond, msecond) unless `--print-units base`; values carry thousands separators ("2,816").
The default `--cache-control all` flushes GPU caches before each replayed kernel, so the bytes of
each kernel are its cold-cache DRAM traffic.
"""

from __future__ import annotations

import contextlib
import csv
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

SOURCE = "measured (Nsight Compute)"
READ_METRIC = "dram__bytes_read.sum"
WRITE_METRIC = "dram__bytes_write.sum"
DURATION_METRIC = "gpu__time_duration.sum"
METRICS = (READ_METRIC, WRITE_METRIC, DURATION_METRIC)
CHILD_MODULE = "profreport.capture.ncu_child"

# SI factors, as ncu scales them (1000-based for bytes too, not 1024).
_BYTE_UNITS = {
    "byte": 1,
    "kbyte": 10**3,
    "mbyte": 10**6,
    "gbyte": 10**9,
    "tbyte": 10**12,
    "pbyte": 10**15,
}
_NS_PER_UNIT = {
    "nsecond": Decimal(1),
    "ns": Decimal(1),
    "usecond": Decimal(10**3),
    "us": Decimal(10**3),
    "msecond": Decimal(10**6),
    "ms": Decimal(10**6),
    "second": Decimal(10**9),
    "s": Decimal(10**9),
}
_REQUIRED_COLUMNS = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")


class NcuParseError(ValueError):
    """A metric value or unit that cannot be read as a number of bytes or nanoseconds."""


@dataclass(frozen=True)
class NcuKernel:
    """One profiled kernel launch. A value is None when ncu reported it as n/a or not at all."""

    name: str
    dram_read_bytes: int | None
    dram_write_bytes: int | None
    duration_ns: float | None
    launch_id: int  # ncu's result "ID" column


@dataclass
class MeasuredBytes:
    """DRAM bytes measured by Nsight Compute for one step of one mode, or why they are not."""

    available: bool
    reason: str | None
    source: str = SOURCE
    read: int | None = None
    written: int | None = None
    kernels: list[NcuKernel] = field(default_factory=list)
    command: list[str] | None = None

    @classmethod
    def unavailable(cls, reason: str, command: list[str] | None = None) -> MeasuredBytes:
        return cls(available=False, reason=reason, command=command)

    @classmethod
    def from_kernels(
        cls, kernels: list[NcuKernel], command: list[str] | None = None
    ) -> MeasuredBytes:
        if not kernels:
            return cls.unavailable("ncu profiled no kernels", command)
        return cls(
            available=True,
            reason=None,
            read=_sum_known(k.dram_read_bytes for k in kernels),
            written=_sum_known(k.dram_write_bytes for k in kernels),
            kernels=list(kernels),
            command=command,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record: totals, and one row per kernel name in order of first launch.

        Totals and rows add up the launches whose value ncu reported; `launches_missing_values`
        counts launches with any of the three values missing, so a partial sum is never silent.
        """
        rows: dict[str, list[NcuKernel]] = {}
        for kernel in self.kernels:
            rows.setdefault(kernel.name, []).append(kernel)
        missing = sum(
            1
            for k in self.kernels
            if k.dram_read_bytes is None or k.dram_write_bytes is None or k.duration_ns is None
        )
        total = (
            None
            if self.read is None and self.written is None
            else (self.read or 0) + (self.written or 0)
        )
        return {
            "available": self.available,
            "reason": self.reason,
            "source": self.source,
            "read": self.read,
            "written": self.written,
            "total": total,
            "duration_ns": _sum_known_float(k.duration_ns for k in self.kernels),
            "launches": len(self.kernels),
            "launches_missing_values": missing,
            "kernels": [
                {
                    "name": name,
                    "calls": len(launches),
                    "read": _sum_known(k.dram_read_bytes for k in launches),
                    "written": _sum_known(k.dram_write_bytes for k in launches),
                    "duration_ns": _sum_known_float(k.duration_ns for k in launches),
                }
                for name, launches in rows.items()
            ],
            "command": self.command,
        }


def _sum_known(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _sum_known_float(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(sum(known)) if known else None


def ncu_unavailable_reason(device_type: str, ncu_path: str | None = None) -> str | None:
    """None when Nsight Compute can measure on this machine, else a one-line reason."""
    if device_type != "cuda":
        return f"device is {device_type}: Nsight Compute measures NVIDIA GPUs only"
    import torch

    hip = getattr(torch.version, "hip", None)
    if hip:
        return f"torch is a ROCm build (HIP {hip}): Nsight Compute measures NVIDIA GPUs only"
    if _resolve_ncu(ncu_path or "ncu") is None:
        if ncu_path and ncu_path != "ncu":
            return f"ncu not found at {ncu_path!r} (install Nsight Compute)"
        return "ncu not found on PATH (install Nsight Compute)"
    if not torch.cuda.is_available():
        return "CUDA is not available to torch (no NVIDIA GPU or driver visible): nothing for ncu to measure"
    return None


def _resolve_ncu(ncu: str, path: str | None = None) -> str | None:
    return shutil.which(ncu, path=path)


# ---------------------------------------------------------------------------------------------
# CSV parsing
# ---------------------------------------------------------------------------------------------


def _is_tool_message(line: str) -> bool:
    # ncu's own messages: ==PROF==, ==WARNING==, ==ERROR==, ==INFO== ...
    stripped = line.lstrip()
    return stripped.startswith("==") and "==" in stripped[2:]


def _parse_number(text: str) -> Decimal | None:
    cleaned = text.strip().replace(",", "")
    if not cleaned or cleaned.lower() in {"n/a", "na", "nan", "-"}:
        return None
    try:
        value = Decimal(cleaned)
    except InvalidOperation as exc:
        raise NcuParseError(f"not a number: {text!r}") from exc
    return value if value.is_finite() else None


def _scaled(value: str, unit: str, factors: dict, kind: str) -> Decimal | None:
    """`value` times the factor of `unit` in `factors`; None for ncu's "n/a"."""
    number = _parse_number(value)
    if number is None:
        return None
    factor = factors.get(unit.strip().lower())
    if factor is None:
        raise NcuParseError(f"unknown {kind} unit {unit!r}")
    return number * factor


def bytes_from(value: str, unit: str) -> int | None:
    """`("1,234.5", "Kbyte")` -> 1234500. ncu's byte prefixes are powers of 1000."""
    scaled = _scaled(value, unit, _BYTE_UNITS, "byte")
    return None if scaled is None else int(scaled.to_integral_value())


def nanoseconds_from(value: str, unit: str) -> float | None:
    """`("4.86", "usecond")` -> 4860.0."""
    scaled = _scaled(value, unit, _NS_PER_UNIT, "time")
    return None if scaled is None else float(scaled)


def _is_header(fields: list[str]) -> bool:
    return all(column in fields for column in _REQUIRED_COLUMNS)


def parse_ncu_csv(text: str) -> list[NcuKernel]:
    """Kernel launches from `ncu --csv` details-page output, in the order ncu printed them.

    Tolerates ncu's `==PROF==`/`==WARNING==` lines and application output around the table,
    repeated header lines, extra columns (rule results), thousands separators and n/a values.
    Launches are keyed by (process ID, ID), so child processes' results stay apart.
    """
    header: list[str] | None = None
    launches: dict[tuple[str, int], dict[str, Any]] = {}
    for line in text.splitlines():
        if not line.strip() or _is_tool_message(line):
            continue
        # One line at a time: a stray quote in the application's output must not swallow
        # the lines after it.
        fields = next(csv.reader([line]))
        if _is_header(fields):
            header = fields
            continue
        if header is None or len(fields) != len(header):
            continue  # text outside the table (the application's own output)
        row = dict(zip(header, fields, strict=True))
        try:
            launch_id = int(row["ID"].replace(",", ""))
        except ValueError:
            continue
        key = (row.get("Process ID", ""), launch_id)
        launch = launches.setdefault(
            key, {"name": row["Kernel Name"], "id": launch_id, "metrics": {}}
        )
        metric = row["Metric Name"].strip()
        if metric:
            launch["metrics"][metric] = (row["Metric Value"], row["Metric Unit"])
    return [_kernel_from(launch) for launch in launches.values()]


def _kernel_from(launch: dict[str, Any]) -> NcuKernel:
    metrics: dict[str, tuple[str, str]] = launch["metrics"]

    def value(metric: str, convert):
        if metric not in metrics:
            return None
        return convert(*metrics[metric])

    return NcuKernel(
        name=launch["name"],
        dram_read_bytes=value(READ_METRIC, bytes_from),
        dram_write_bytes=value(WRITE_METRIC, bytes_from),
        duration_ns=value(DURATION_METRIC, nanoseconds_from),
        launch_id=launch["id"],
    )


# ---------------------------------------------------------------------------------------------
# Running ncu
# ---------------------------------------------------------------------------------------------


def child_command(
    model_spec: str,
    mode: str,
    device: str,
    dtype: str,
    batch_size: int | None,
    channels_last: bool,
) -> list[str]:
    """The command that builds `mode` and runs one bracketed step (what ncu launches)."""
    cmd = [sys.executable, "-m", CHILD_MODULE, "--model", model_spec, "--mode", mode]
    cmd += ["--device", device, "--dtype", dtype]
    if batch_size is not None:
        cmd += ["--batch-size", str(batch_size)]
    if channels_last:
        cmd.append("--channels-last")
    return cmd


def ncu_command(ncu: str, log_file: str, child: list[str]) -> list[str]:
    """ncu's options, then the child command. Options are spelled out even where they are
    ncu's defaults, because a user's config.ncu-cfg can change defaults."""
    return [
        ncu,
        "--metrics",
        ",".join(METRICS),
        "--csv",
        "--page",
        "details",
        "--print-units",
        "base",
        "--profile-from-start",
        "off",
        "--target-processes",
        "all",
        "--cache-control",
        "all",
        "--log-file",
        log_file,
        *child,
    ]


def _child_env(env: dict[str, str] | None) -> dict[str, str]:
    merged = dict(os.environ)
    merged.update(env or {})
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


def measure_mode(
    model_spec: str,
    mode: str,
    device: str,
    dtype: str,
    batch_size: int | None,
    channels_last: bool,
    timeout_s: float = 600,
    ncu: str = "ncu",
    env: dict | None = None,
) -> MeasuredBytes:
    """Measure one step of `mode` under ncu; never raises for ncu or child failures.

    `env` adds to (does not replace) this process's environment. The device is not checked
    here (call `ncu_unavailable_reason` first); any failure (ncu missing, non-zero exit,
    timeout, no kernels in the CSV) returns available=False with a one-line reason.
    """
    child_env = _child_env(env)
    resolved = _resolve_ncu(ncu, path=child_env.get("PATH"))
    if resolved is None:
        return MeasuredBytes.unavailable(f"ncu not found: {ncu!r} (install Nsight Compute)")
    child = child_command(model_spec, mode, device, dtype, batch_size, channels_last)
    with tempfile.TemporaryDirectory(prefix="profreport-ncu-") as tmp:
        log_path = Path(tmp) / "ncu.csv"
        cmd = ncu_command(resolved, str(log_path), child)
        try:
            code, out, err = _run(cmd, child_env, timeout_s)
        except OSError as exc:
            return MeasuredBytes.unavailable(f"could not start ncu: {exc}", cmd)
        log = log_path.read_text(errors="replace") if log_path.is_file() else ""
    if code is None:
        return MeasuredBytes.unavailable(
            f"ncu timed out after {timeout_s:g} s: {_failure_detail(log, out, err)}", cmd
        )
    if code != 0:
        return MeasuredBytes.unavailable(
            f"ncu exited with code {code}: {_failure_detail(log, out, err)}", cmd
        )
    try:
        # The table is in the log file; stdout is the fallback should an ncu print it there.
        kernels = parse_ncu_csv(log) or parse_ncu_csv(out)
    except NcuParseError as exc:
        return MeasuredBytes.unavailable(f"could not read ncu's CSV: {exc}", cmd)
    if not kernels:
        return MeasuredBytes.unavailable(
            f"ncu profiled no kernels: {_failure_detail(log, out, err)}", cmd
        )
    return MeasuredBytes.from_kernels(kernels, cmd)
