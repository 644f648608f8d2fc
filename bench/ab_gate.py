"""Does `profreport ab` keep identical code from failing the latency gate, and catch 2x work?

Runs `profreport ab` N times with base = head (bench/ab_models/base/block.py) and N times with a
head that runs the block twice (bench/ab_models/double/block.py: the same file and module name,
another folder, its own relative import), both gated at --max-latency-regression 10. Prints per
run the exit code and, per mode, the paired head/base ratio, its 95% interval, the ratios'
spread (IQR/median) and whether the gate said inconclusive.

    python bench/ab_gate.py [--runs 10] [--modes eager,compile] [--min-time 0.5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = f"{ROOT / 'bench/ab_models/base/block.py'}:build"
DOUBLE = f"{ROOT / 'bench/ab_models/double/block.py'}:build"


def one(head: str, args: argparse.Namespace, out: Path) -> tuple[int, list[dict]]:
    cmd = [sys.executable, "-m", "profreport", "ab", BASE, head, "--modes", args.modes]
    cmd += ["--min-time", str(args.min_time), "--device", "cpu", "--quiet", "--format", "json"]
    cmd += ["--max-latency-regression", "10", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rc = subprocess.run(cmd, capture_output=True, env=env).returncode
    (folder,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    cmp = json.loads((folder / "compare.json").read_text())
    rows = []
    for mc in cmp["modes"]:
        lat = next(m for m in mc["metrics"] if m["metric"] == "latency_median_ms")
        r = lat["paired"]["ratio"]
        rows.append(
            {
                "mode": mc["mode"],
                "ratio": r["median"],
                "ci95": r["ci95"],
                "spread": r["spread"],
                "n": r["n"],
                "regression": lat["regression"],
                "inconclusive": lat["inconclusive"] or "",
            }
        )
    return rc, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--min-time", type=float, default=0.5)
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs * 2):
            kind = "same" if i % 2 == 0 else "double"
            rc, rows = one(BASE if kind == "same" else DOUBLE, args, Path(tmp) / str(i))
            results.append((kind, rc, rows))
    print(f"modes {args.modes}, min-time {args.min_time}s, limit +10%, cpus {os.cpu_count()}")
    print(
        f"{'run':>3} {'head':<7} {'exit':>4} {'mode':<8} {'head/base':>9} {'95% CI':>13} "
        f"{'spread':>7} {'n':>3}  gate"
    )
    for i, (kind, rc, rows) in enumerate(results):
        for r in rows:
            gate = "FAIL" if r["regression"] else ("inconclusive" if r["inconclusive"] else "pass")
            ci = f"{r['ci95'][0]:.3f}-{r['ci95'][1]:.3f}"
            print(
                f"{i:>3} {kind:<7} {rc:>4} {r['mode']:<8} {r['ratio']:>9.3f} {ci:>13} "
                f"{r['spread']:>7.1%} {r['n']:>3}  {gate} {r['inconclusive'][:70]}"
            )
    same_fail = sum(1 for k, rc, _ in results if k == "same" and rc != 0)
    double_fail = sum(1 for k, rc, _ in results if k == "double" and rc == 1)
    print(
        f"identical specs: {same_fail}/{args.runs} runs exited non-zero; "
        f"twice the work: {double_fail}/{args.runs} runs failed the gate (exit 1)"
    )


if __name__ == "__main__":
    main()
