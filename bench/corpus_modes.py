"""Today's modes on real architectures: every default mode plus export, per model of
bench/real_models_corpus.py, as a user runs them (`profreport generate`, one child process each).

Prints one table per figure, modes x models: status (ok, or failed with the error's start),
kernels per step, and modeled bytes per step (read + written); then per model export's modeled
bytes against compile's (the baseline measured in the same run) and the timing noise guard's
CPU shares (other processes; profreport's own children).

    python bench/corpus_modes.py [--models mistral,bart] [--modes eager,...,export]
                                 [--min-time 0.1] [--keep DIR [--reuse]]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_models_corpus import CORPUS

CORPUS_FILE = Path(__file__).resolve().parent / "real_models_corpus.py"
MODES = "eager,script,trace,optimize,compile,export"
ERROR_CHARS = 60


def _generate(model: str, args: argparse.Namespace, out: Path) -> tuple[dict[str, Any], float]:
    command = [sys.executable, "-m", "profreport", "generate", "--model"]
    command += [f"{CORPUS_FILE}:{model}", "--device", "cpu", "--modes", args.modes]
    command += ["--min-time", str(args.min_time), "--quiet", "--out", str(out)]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{model}: generate exited {proc.returncode}: {proc.stderr.strip()}")
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return json.loads((run / "run.json").read_text()), wall


def _mib(n: float) -> str:
    return f"{n / 2**20:.2f}"


def _cell(entry: dict[str, Any], figure: str) -> str:
    if entry.get("status") != "ok" and figure != "status":
        return str(entry.get("status"))
    if entry.get("status") != "ok":
        error = (entry.get("error") or entry.get("status") or "").replace("|", "/")
        return f"{entry.get('status')}: {error[:ERROR_CHARS]}"
    if figure == "status":
        return "ok"
    if figure == "kernels":
        return str(entry["kernels"]["per_step"])
    return _mib(entry["bytes"]["read"] + entry["bytes"]["written"])


def _table(title: str, records: dict[str, dict[str, Any]], modes: list[str], figure: str) -> None:
    print(f"\n{title}\n")
    print("| model | " + " | ".join(modes) + " |")
    print("|---" * (len(modes) + 1) + "|")
    for model, record in records.items():
        cells = [_cell(record["modes"].get(m, {"status": "absent"}), figure) for m in modes]
        print(f"| {model} | " + " | ".join(cells) + " |")


def _export_vs_compile(record: dict[str, Any]) -> str:
    modes = record["modes"]
    if any(modes.get(m, {}).get("status") != "ok" for m in ("compile", "export")):
        return "-"
    total = {
        m: modes[m]["bytes"]["read"] + modes[m]["bytes"]["written"] for m in ("compile", "export")
    }
    return f"{total['export'] / total['compile']:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(CORPUS))
    ap.add_argument("--modes", default=MODES)
    ap.add_argument("--min-time", type=float, default=0.1, help="measured seconds per mode")
    ap.add_argument("--keep", type=Path, default=None, help="keep the run folders here")
    ap.add_argument(
        "--reuse", action="store_true", help="tabulate the runs already kept, running none"
    )
    args = ap.parse_args()
    modes = args.modes.split(",")
    records: dict[str, dict[str, Any]] = {}
    walls: dict[str, float | None] = {}
    for model in args.models.split(","):
        if model not in CORPUS:
            raise SystemExit(f"unknown model {model!r}; the corpus has {', '.join(CORPUS)}")
        with tempfile.TemporaryDirectory() as tmp:
            out = args.keep / model if args.keep else Path(tmp)
            if args.reuse and args.keep:
                (run,) = [p for p in out.iterdir() if p.is_dir()]
                records[model] = json.loads((run / "run.json").read_text())
                walls[model] = None  # not run here
            else:
                records[model], walls[model] = _generate(model, args, out)
        if walls[model] is not None:
            print(f"{model}: {walls[model]:.0f} s", file=sys.stderr, flush=True)

    _table("Status (ok, or the error's start)", records, modes, "status")
    _table("Kernels per step (profiler, CPU definition)", records, modes, "kernels")
    _table("Modeled bytes per step, MiB (read + written; modeled)", records, modes, "bytes")
    print(
        "\n| model | export / compile modeled bytes | other processes' CPU while timing | "
        "profreport's children's CPU while timing | wall s |"
    )
    print("|---|---|---|---|---|")
    for model, record in records.items():
        load = (record.get("timing_noise") or {}).get("load") or {}
        shares = [load.get("other_busy_share"), load.get("children_busy_share")]
        cells = ["-" if s is None else f"{s:.0%}" for s in shares]
        print(
            f"| {model} | {_export_vs_compile(record)} | {cells[0]} | {cells[1]} | "
            f"{'-' if walls[model] is None else format(walls[model], '.0f')} |"
        )


if __name__ == "__main__":
    main()
