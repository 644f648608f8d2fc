"""What must be true of a CUDA run of profreport: pure checks over the evidence, and the table.

Each check is a function `Evidence -> list[Result]` registered with `@check` (registry.py); a
result is `ok`, `FAIL` (with the numbers that failed) or `skip` (the run was left out, and why).
Each holds what profreport wrote against a source profreport did not compute: the trace's raw
events (rawtrace.py), Nsight Compute's bytes, torch.utils.benchmark, the profiler's device
properties, nvidia-smi, a kernel of known size. The checks live by subject:

- checks_preflight: the machine, its requirements, ncu's probe, the ceilings;
- checks_counts: every mode ran, counts per step, what each compiler was to do;
- checks_bytes: ncu's bytes per kernel and mode, ceilings, latency floor, allocator peak;
- checks_outputs: compare, render, the time budget.
"""

from __future__ import annotations

import re
from typing import Any

from gpu_check import checks_bytes, checks_counts, checks_outputs, checks_preflight
from gpu_check.evidence import Evidence
from gpu_check.registry import CHECKS, Result, measured, run_checks
from gpu_check.spec import RUN_SPECS

__all__ = [
    "CHECKS",
    "Result",
    "checks_bytes",
    "checks_counts",
    "checks_outputs",
    "checks_preflight",
    "format_table",
    "run_checks",
    "table_rows",
]

MiB = 2**20

TABLE_COLUMNS = (
    ("run", "<", 17),
    ("mode", "<", 21),
    ("status", "<", 8),
    ("kernels", ">", 8),
    ("launches", ">", 9),
    ("graphs", ">", 7),
    ("modeled MiB", ">", 12),
    ("measured MiB", ">", 13),
    ("meas/model", ">", 11),
    ("median ms", ">", 10),
    ("  flags", "<", 0),
)


def record_flags(mode: dict[str, Any]) -> list[str]:
    """What the record itself says is doubtful about a mode: a latency called inconclusive, a
    median below its roofline floor (inconsistent), an output that differs from eager, a
    finding that failed, a mode not timed."""
    flags = []
    speedup = mode.get("speedup_vs_eager") or {}
    if speedup.get("inconclusive"):
        flags.append("inconclusive")
    if (mode.get("roofline") or {}).get("consistent") is False:
        flags.append("inconsistent")
    if (mode.get("output_check") or {}).get("within_tolerance") is False:
        flags.append("output differs")
    if mode.get("failed_finding"):
        flags.append("finding failed")
    if mode.get("status") == "ok" and not mode.get("latency_ms"):
        flags.append("not timed")
    return flags


def _fails_of(results: list[Result], label: str, mode: str) -> list[str]:
    """The FAIL lines about one run and mode: the run's checks of that mode (`label.x[mode]`),
    the run's other checks whose problems name the mode first (`mode: ...`), and checks over
    all runs that name `label/mode`."""
    about = re.compile(rf"(^|; ){re.escape(mode)}[ :]")
    found = []
    for r in results:
        if r.status != "FAIL":
            continue
        own = r.name.startswith(f"{label}.")
        if (own and r.name.endswith(f"[{mode}]")) or (
            own and "[" not in r.name and about.search(r.detail)
        ):
            found.append("FAIL " + r.name.removeprefix(f"{label}."))
        elif f"{label}/{mode}:" in r.detail:
            found.append("FAIL " + r.name)
    return found


def table_rows(ev: Evidence, results: list[Result] | None = None) -> list[dict[str, Any]]:
    """One row per run and mode: kernels and launches per step (profiler), bytes per step modeled
    and measured (Nsight Compute, read + written), latency median (measured), and its flags:
    the record's own (record_flags) and every FAIL line about it."""
    rows = []
    for label in RUN_SPECS:
        record = ev.runs.get(label)
        if record is None:
            step = ev.steps.get(f"generate {label}")
            if step is not None:  # asked for, and left no record: its FAILs still get a row
                fails = [f"FAIL {r.name}" for r in results or [] if r.name.startswith(f"{label}.")]
                rows.append({"run": label, "mode": "-", "status": step.status, "flags": fails})
            continue
        for mode_name, mode in record.get("modes", {}).items():
            row: dict[str, Any] = {"run": label, "mode": mode_name, "status": mode.get("status")}
            if mode.get("status") == "ok":
                k, b = mode["kernels"], mode["bytes"]
                found = measured(mode)
                latency = mode.get("latency_ms") or {}
                row.update(
                    kernels=k["per_step"],
                    launches=k["launches"],
                    graphs=k.get("graph_launches", 0),
                    modeled_bytes=int(b["read"]) + int(b["written"]),
                    measured_bytes=None if found is None else found.get("total"),
                    median_ms=latency.get("median"),
                )
            row["flags"] = record_flags(mode) + _fails_of(results or [], label, mode_name)
            rows.append(row)
    return rows


def _cell(row: dict[str, Any], column: str) -> str:
    value: Any
    if column == "modeled MiB":
        value = row.get("modeled_bytes")
        return "-" if value is None else f"{value / MiB:.1f}"
    if column == "measured MiB":
        value = row.get("measured_bytes")
        return "-" if value is None else f"{value / MiB:.1f}"
    if column == "meas/model":
        m, s = row.get("modeled_bytes"), row.get("measured_bytes")
        return "-" if not m or s is None else f"{s / m:.2f}"
    if column == "median ms":
        value = row.get("median_ms")
        return "-" if value is None else f"{value:.3f}"
    if column == "  flags":
        return "  " + ", ".join(row.get("flags") or [])
    value = row.get(column)
    return "-" if value is None else str(value)


def format_table(rows: list[dict[str, Any]]) -> str:
    """The summary table as fixed-width text (bytes per step; measured = Nsight Compute DRAM);
    the flags column last, at its full length."""
    lines = ["".join(f"{title:{align}{width}}" for title, align, width in TABLE_COLUMNS).rstrip()]
    for row in rows:
        cells = []
        for title, align, width in TABLE_COLUMNS:
            text = _cell(row, title)
            cells.append(f"{text[: width - 1]:{align}{width}}" if width else text)
        lines.append("".join(cells).rstrip())
    return "\n".join(lines)


# The summary lists the checks by subject, in this order (each module's in its own order).
MODULE_ORDER = (checks_preflight, checks_counts, checks_bytes, checks_outputs)
CHECKS.sort(key=lambda fn: [m.__name__ for m in MODULE_ORDER].index(fn.__module__))
