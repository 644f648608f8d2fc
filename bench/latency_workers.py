"""What timing in worker processes costs: `profreport generate`'s wall time with `--workers 0`
(the latency timed in the capturing process) and with the default (K fresh worker processes,
capture/workers.py), N runs each, interleaved (0, default, 0, default, ...) so that a slow spell
of the machine hits both alike. Prints each run's wall time, its timing phase (`phases_s.timing`
of its run.json) and the share of the CPU other processes used meanwhile, then the median of each
and the ratio of the default to the `--workers 0` baseline measured in this same session.

    python bench/latency_workers.py --runs 2 [--model simple] [--out DIR] [-- extra generate flags]

Issue 48 asks for the default's wall time at most 1.5x `--workers 0`'s. A figure from a busy
machine (other processes using more than 10% of the CPUs while it ran: the `others %` column)
is labelled so.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 1.5


def _busy_cpu_s(psutil: Any) -> float:
    """The machine's CPU-seconds spent busy so far (all CPUs: neither idle nor waiting on I/O)."""
    t = psutil.cpu_times()
    return float(sum(t) - t.idle - getattr(t, "iowait", 0.0))


def _children_cpu_s() -> float:
    """CPU-seconds of this process's finished children (generate, and the workers it waited for)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _one(model: str, workers: str | None, out: Path, extra: list[str]) -> dict[str, float]:
    """One generate run in a fresh process: its wall time, timing phase, and the share of the
    machine's CPU that other processes used meanwhile (the machine's busy time less the run's)."""
    import psutil

    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    env.pop("PROFREPORT_WORKERS", None)  # the default is the product's own
    cmd = [sys.executable, "-m", "profreport", "generate", "--model", model, "--device", "cpu"]
    cmd += ["--quiet", "--out", str(out), *extra]
    if workers is not None:
        cmd += ["--workers", workers]
    before, own_before = _busy_cpu_s(psutil), _children_cpu_s()
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall_s = time.perf_counter() - started
    others_s = _busy_cpu_s(psutil) - before - (_children_cpu_s() - own_before)
    others = max(0.0, 100 * others_s / (wall_s * (psutil.cpu_count() or 1)))
    if done.returncode not in (0, 1):
        raise SystemExit(f"generate exited {done.returncode}: {done.stderr[-2000:]}")
    (record,) = out.glob("*/run.json")
    run = json.loads(record.read_text())
    return {
        "wall_s": wall_s,
        "timing_s": float(run.get("phases_s", {}).get("timing", 0.0)),
        "others_cpu_pct": others,
        "processes": float(run["settings"].get("timing_processes") or 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model", default="simple")
    parser.add_argument("--out", default=None, help="keep the run folders here")
    parser.add_argument("extra", nargs="*", help="more generate flags (after --)")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="latency-workers-"))
    rows: dict[str, list[dict[str, float]]] = {"--workers 0": [], "default": []}
    print(f"generate --model {args.model} on the CPU, {args.runs} runs each, interleaved")
    print(
        f"{'run':>4} {'timing':<12} {'wall s':>8} {'timing s':>9} {'processes':>9} {'others %':>8}"
    )
    for i in range(args.runs):
        for label, workers in (("--workers 0", "0"), ("default", None)):
            tag = "w0" if workers else "default"
            found = _one(args.model, workers, out / f"{tag}-{i + 1}", args.extra)
            rows[label].append(found)
            print(
                f"{i + 1:>4} {label:<12} {found['wall_s']:>8.1f} {found['timing_s']:>9.1f} "
                f"{found['processes']:>9.0f} {found['others_cpu_pct']:>8.0f}"
            )
    base = statistics.median(r["wall_s"] for r in rows["--workers 0"])
    dflt = statistics.median(r["wall_s"] for r in rows["default"])
    busy = max(r["others_cpu_pct"] for rs in rows.values() for r in rs)
    print(f"median wall time: --workers 0 {base:.1f} s, default {dflt:.1f} s")
    print(
        f"ratio default / --workers 0: {dflt / base:.2f}x (limit {LIMIT}x)"
        + (f"; BUSY: other processes used up to {busy:.0f}% of the CPU" if busy > 10 else "")
    )
    print(f"run folders: {out}")


if __name__ == "__main__":
    main()
