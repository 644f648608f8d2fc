"""Does the noise guard keep generate from calling the wrong direction under load?

Runs `profreport generate` N times quiet and N times with a busy loop that this script starts,
pinned to the last CPU, partway through the latency timing (a fixed delay after generate's first
"timing" progress line). Prints, per run, the paired speedup of the non-eager mode, its 95%
interval, the verdict's direction or "inconclusive", the other processes' CPU share the guard
measured, and the guard's reasons; then whether any loaded run gave the opposite direction of
the quiet runs' majority with an interval excluding 1.

    python bench/noise_guard.py [--model mlp-block] [--modes eager,compile] [--runs 10]
                                [--min-time 1.0] [--load-after 0.5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUSY = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass\n"


def direction(sp: dict) -> str:
    if sp.get("inconclusive"):
        return "inconclusive"
    lo, hi = sp["ci95"]
    return "faster" if lo > 1 else "slower" if hi < 1 else "unchanged"


def one_run(args: argparse.Namespace, loaded: bool, out: Path) -> dict:
    cmd = [sys.executable, "-m", "profreport", "generate", "--model", args.model]
    cmd += ["--modes", args.modes, "--device", "cpu", "--min-time", str(args.min_time)]
    cmd += ["--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    busy: list[subprocess.Popen] = []

    def watch_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            if loaded and not busy and "timing" in line:
                time.sleep(args.load_after)
                cpu = max(os.sched_getaffinity(0))
                busy.append(subprocess.Popen([sys.executable, "-c", BUSY, str(cpu)]))

    reader = threading.Thread(target=watch_stderr)
    reader.start()
    proc.stdout.read() if proc.stdout else None
    proc.wait()
    reader.join()
    for b in busy:
        b.kill()
        b.wait()
    (run,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    record = json.loads((run / "run.json").read_text())
    mode = next(m for m in record["modes"] if m != "eager")
    sp = record["modes"][mode]["speedup_vs_eager"]
    noise = record["timing_noise"]
    return {
        "mode": mode,
        "median": sp["median"],
        "ci95": sp["ci95"],
        "spread": sp["ratios"]["spread"],
        "direction": direction(sp),
        "others": noise["load"].get("other_busy_share"),
        "why": sp.get("inconclusive") or sp.get("noise") or "",
        "load_started": bool(busy),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp-block")
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--load-after", type=float, default=0.5, help="seconds into the timing")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs * 2):
            loaded = i % 2 == 1  # alternate quiet and loaded so slow machine drift hits both
            rows.append((loaded, one_run(args, loaded, Path(tmp) / str(i))))
    print(
        f"model {args.model}, modes {args.modes}, min-time {args.min_time}s, cpus {os.cpu_count()}"
    )
    print(
        f"{'run':>3} {'load':<6} {'speedup':>8} {'95% CI':>13} {'spread':>7} {'others':>7}  "
        "verdict       guard"
    )
    for i, (loaded, r) in enumerate(rows):
        others = "?" if r["others"] is None else f"{r['others']:.0%}"
        ci = f"{r['ci95'][0]:.2f}-{r['ci95'][1]:.2f}"
        print(
            f"{i:>3} {'busy' if loaded else 'quiet':<6} {r['median']:>8.3f} {ci:>13} "
            f"{r['spread']:>7.1%} {others:>7}  {r['direction']:<13} {r['why'][:90]}"
        )
    quiet = Counter(r["direction"] for loaded, r in rows if not loaded)
    busy = Counter(r["direction"] for loaded, r in rows if loaded)
    print(f"quiet: {dict(quiet)}; loaded: {dict(busy)}")
    calls = [d for d in quiet if d in ("faster", "slower")]
    reference = max(calls, key=lambda d: quiet[d]) if calls else None
    opposite = {"faster": "slower", "slower": "faster"}.get(reference or "")
    wrong = sum(1 for loaded, r in rows if loaded and r["direction"] == opposite)
    print(
        f"quiet majority direction: {reference}; loaded runs with the opposite direction: {wrong}"
    )


if __name__ == "__main__":
    main()
