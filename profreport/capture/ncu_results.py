"""Nsight Compute's results as profreport reads them: its CSV rows parsed into kernel launches
(`parse_ncu_csv`), and the measured DRAM bytes of one step of one mode (`measured_bytes`).

Pure: text in, values out. Running ncu is `capture/ncu.py`. The CSV layout and unit scaling this
relies on are described there.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TypeVar

from profreport.record.model import MeasuredBytes, MeasuredKernel

_V = TypeVar("_V")
SOURCE = "measured (Nsight Compute)"
READ_METRIC = "dram__bytes_read.sum"
WRITE_METRIC = "dram__bytes_write.sum"
DURATION_METRIC = "gpu__time_duration.sum"
METRICS = (READ_METRIC, WRITE_METRIC, DURATION_METRIC)
# Why measured writes compare with modeled ones only loosely (capture/ncu.py explains the cause).
WRITES_NOTE = (
    "measured writes can fall short of the bytes written by up to the L2 size per kernel (the "
    "last writes of a kernel can still sit in L2 when ncu stops counting): compare them with "
    "modeled writes loosely; reads are complete"
)

# SI factors, as ncu scales them (1000-based for bytes too, not 1024).
_BYTE_UNITS = {f"{prefix}byte": 1000**i for i, prefix in enumerate(("", "k", "m", "g", "t", "p"))}
_TIME_UNITS = (("nsecond", "ns"), ("usecond", "us"), ("msecond", "ms"), ("second", "s"))
_NS_PER_UNIT = {unit: Decimal(1000**i) for i, units in enumerate(_TIME_UNITS) for unit in units}
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


def unavailable_bytes(reason: str, command: list[str] | None = None) -> MeasuredBytes:
    """Why there are no measured bytes for a mode (never a silent zero)."""
    return MeasuredBytes(
        available=False,
        reason=reason,
        source=SOURCE,
        launches=0,
        launches_missing_values=0,
        command=None if command is None else tuple(command),
    )


def measured_bytes(kernels: list[NcuKernel], command: list[str] | None = None) -> MeasuredBytes:
    """The record's measured bytes of one step: totals, and one row per kernel name in order of
    first launch. Totals and rows add up the launches whose value ncu reported;
    `launches_missing_values` counts launches with any of the three values missing, so a
    partial sum is never silent."""
    if not kernels:
        return unavailable_bytes("ncu profiled no kernels", command)
    read, written, duration_ns = _sums(kernels)
    rows: dict[str, list[NcuKernel]] = {}
    for kernel in kernels:
        rows.setdefault(kernel.name, []).append(kernel)
    missing = sum(None in (k.dram_read_bytes, k.dram_write_bytes, k.duration_ns) for k in kernels)
    return MeasuredBytes(
        available=True,
        reason=None,
        source=SOURCE,
        read=read,
        written=written,
        total=None if read is None and written is None else (read or 0) + (written or 0),
        duration_ns=duration_ns,
        launches=len(kernels),
        launches_missing_values=missing,
        kernels=tuple(
            MeasuredKernel(name, len(launches), *_sums(launches)) for name, launches in rows.items()
        ),
        command=None if command is None else tuple(command),
    )


def _sums(launches: list[NcuKernel]) -> tuple[int | None, int | None, float | None]:
    """Read bytes, written bytes and duration of `launches`, each summed over the launches
    whose value ncu reported (None: no launch had it)."""
    read = [k.dram_read_bytes for k in launches if k.dram_read_bytes is not None]
    written = [k.dram_write_bytes for k in launches if k.dram_write_bytes is not None]
    duration = [k.duration_ns for k in launches if k.duration_ns is not None]
    return (
        sum(read) if read else None,
        sum(written) if written else None,
        float(sum(duration)) if duration else None,
    )


def _parse_number(text: str) -> Decimal | None:
    cleaned = text.strip().replace(",", "")
    if not cleaned or cleaned.lower() in {"n/a", "na", "nan", "-"}:
        return None
    try:
        value = Decimal(cleaned)
    except InvalidOperation as exc:
        raise NcuParseError(f"not a number: {text!r}") from exc
    return value if value.is_finite() else None


def _scaled(
    value: str, unit: str, factors: Mapping[str, int] | Mapping[str, Decimal], kind: str
) -> Decimal | None:
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


def parse_ncu_csv(text: str) -> list[NcuKernel]:
    """Kernel launches from `ncu --csv` details-page output, in the order ncu printed them.

    Tolerates ncu's `==PROF==`/`==WARNING==` lines and application output around the table,
    repeated header lines, extra columns (rule results), thousands separators and n/a values.
    Launches are keyed by (process ID, ID), so child processes' results stay apart.
    """
    header: list[str] | None = None
    # (process ID, ID) -> the launch's kernel name, ID, and metric -> (value, unit)
    launches: dict[tuple[str, int], tuple[str, int, dict[str, tuple[str, str]]]] = {}
    for line in text.splitlines():
        stripped = line.lstrip()
        # blank, or ncu's own messages: ==PROF==, ==WARNING==, ==ERROR==, ==INFO== ...
        if not stripped or (stripped.startswith("==") and "==" in stripped[2:]):
            continue
        # One line at a time: a stray quote in the application's output must not swallow
        # the lines after it.
        fields = next(csv.reader([line]))
        if all(column in fields for column in _REQUIRED_COLUMNS):  # a header line
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
        _, _, metrics = launches.setdefault(key, (row["Kernel Name"], launch_id, {}))
        metric = row["Metric Name"].strip()
        if metric:
            metrics[metric] = (row["Metric Value"], row["Metric Unit"])
    return [_kernel_from(*launch) for launch in launches.values()]


def _kernel_from(name: str, launch_id: int, metrics: dict[str, tuple[str, str]]) -> NcuKernel:
    """One launch's rows of the CSV as a kernel launch."""

    def value(metric: str, convert: Callable[[str, str], _V]) -> _V | None:
        return convert(*metrics[metric]) if metric in metrics else None

    return NcuKernel(
        name=name,
        dram_read_bytes=value(READ_METRIC, bytes_from),
        dram_write_bytes=value(WRITE_METRIC, bytes_from),
        duration_ns=value(DURATION_METRIC, nanoseconds_from),
        launch_id=launch_id,
    )
