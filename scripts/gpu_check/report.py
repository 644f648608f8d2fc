"""What a gpu-check leaves in its output folder: three files, within what the device tool brings
back (at most 8 files of 16 MiB, no deeper than two folders).

- gpu-check.txt: what it printed (steps, each check's line, the summary table);
- gpu-check.json: the same as data (steps, checks, table rows);
- gpu-check-work.tar.gz: the work folder (logs, preflight.json, run folders with their records
  and traces, analyze/compare/render outputs), without the traces if it would be too large.
"""

from __future__ import annotations

import json
import tarfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpu_check.checks import Result, format_table, table_rows
from gpu_check.evidence import Evidence

TEXT_NAME = "gpu-check.txt"
JSON_NAME = "gpu-check.json"
ARCHIVE_NAME = "gpu-check-work.tar.gz"
ARCHIVE_MAX_BYTES = 15 * 2**20  # the device tool brings back files of up to 16 MiB
SKIPPED_IN_ARCHIVE = ("cache", "site")  # compiler caches and the installed wheels: rebuilt
# traces (time/: the light passes'), dropped first when the archive is too large
TRACE_DIRS = ("tensorboard", "time")


def counts(results: list[Result]) -> dict[str, int]:
    return {status: sum(r.status == status for r in results) for status in ("ok", "FAIL", "skip")}


def summary_text(evidence: Evidence, results: list[Result]) -> str:
    """The printed summary: steps, checks, table, totals."""
    n = counts(results)
    lines = ["steps:"]
    lines += [f"  {s.describe()}" for s in evidence.steps.values()]
    lines += ["", "checks:"]
    lines += [r.line() for r in results]
    lines += [
        "",
        "per run and mode: kernels and launches per step (profiler); bytes per step, modeled "
        "and measured (Nsight Compute DRAM, read + written); latency median (measured); flags: "
        "what the record calls doubtful (inconclusive, inconsistent, ...) and each FAIL about it",
        format_table(table_rows(evidence, results)),
        "",
        f"gpu-check: {n['ok']} ok, {n['FAIL']} FAIL, {n['skip']} skip in "
        f"{evidence.elapsed_s:.0f} s (budget {evidence.budget_s:.0f} s)",
    ]
    return "\n".join(lines) + "\n"


def summary_json(evidence: Evidence, results: list[Result]) -> dict[str, Any]:
    return {
        "budget_s": evidence.budget_s,
        "elapsed_s": round(evidence.elapsed_s, 1),
        "counts": counts(results),
        "steps": [asdict(s) for s in evidence.steps.values()],
        "checks": [asdict(r) for r in results],
        "table": table_rows(evidence, results),
        # the readings themselves, so a recorded check can be checked again (tests/data/runs)
        "preflight": evidence.preflight,
    }


def _archive(work: Path, target: Path, with_traces: bool) -> None:
    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts[1:]  # below the archive's top folder
        if parts and parts[0] in SKIPPED_IN_ARCHIVE:
            return None
        if not with_traces and any(p in TRACE_DIRS for p in parts):
            return None
        return info

    with tarfile.open(target, "w:gz") as tar:
        tar.add(work, arcname="gpu-check-work", filter=keep)


def write_outputs(out: Path, work: Path, evidence: Evidence, results: list[Result]) -> str:
    """Write the three files into `out`; returns the summary text. The archive drops the traces
    when it would pass ARCHIVE_MAX_BYTES, and says so in the text."""
    out.mkdir(parents=True, exist_ok=True)
    archive = out / ARCHIVE_NAME
    _archive(work, archive, with_traces=True)
    note = ""
    if archive.stat().st_size > ARCHIVE_MAX_BYTES:
        _archive(work, archive, with_traces=False)
        note = (
            f"({ARCHIVE_NAME}: traces left out, the archive was over {ARCHIVE_MAX_BYTES} bytes)\n"
        )
    text = summary_text(evidence, results) + note
    (out / TEXT_NAME).write_text(text, encoding="utf-8")
    data = summary_json(evidence, results)
    (out / JSON_NAME).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return text


def read_summary(out: Path) -> dict[str, Any]:
    """gpu-check.json as written (for a note, or a test fixture made from a real run)."""
    data = json.loads((out / JSON_NAME).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{out / JSON_NAME}: not a gpu-check summary")
    return data
