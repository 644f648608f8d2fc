"""What does the machine reference cost, and does it see the machine change?

`cost`: runs `profreport generate --model simple` (its default modes) N times and prints, per
run, the timing phase, the seconds the reference's blocks took inside it and their share (the
target: at most 5%), and each part's median with its 95% interval and sample count.

`busy`: two runs of a model, the second with a CPU burner (`python -c "while True: pass"`)
running beside it the whole time, then `profreport compare` of the two (and of the two the
other way round) with `--max-latency-regression 10`: what the references say, and whether any
latency change is called.

    python bench/machine_reference.py cost [--runs 3] [--model simple]
    python bench/machine_reference.py busy [--model simple] [--out DIR]
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
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
BURNER = [sys.executable, "-c", "while True: pass"]


def generate(model: str, out: Path, extra: list[str]) -> Path:
    cmd = [sys.executable, "-m", "profreport", "generate", "--model", model, "--device", "cpu"]
    subprocess.run([*cmd, "--out", str(out), *extra], check=True, env=ENV, capture_output=True)
    (run,) = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return run


def cost(args: argparse.Namespace) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            record = json.loads(
                (generate(args.model, Path(tmp) / str(i), []) / "run.json").read_text()
            )
            ref = record["machine_reference"]
            rows.append((record["phases_s"]["timing"], ref))
    print(f"model {args.model}, default modes, cpus {os.cpu_count()}")
    print(
        f"{'run':>3} {'timing s':>8} {'reference s':>11} {'share':>6}  parts (median ms [95% CI], n)"
    )
    for i, (timing_s, ref) in enumerate(rows):
        parts = "; ".join(
            f"{name} {p['median_ms']:.3f} [{p['ci95_ms'][0]:.3f}-{p['ci95_ms'][1]:.3f}], n={p['n']}"
            for name, p in ref["parts"].items()
        )
        print(
            f"{i:>3} {timing_s:>8.2f} {ref['spent_s']:>11.3f} {ref['spent_s'] / timing_s:>6.1%}  "
            f"{parts}"
        )
    worst = max(ref["spent_s"] / timing_s for timing_s, ref in rows)
    print(f"largest share of the timing phase: {worst:.1%} (target: at most 5%)")


def busy(args: argparse.Namespace) -> None:
    out = Path(args.out or tempfile.mkdtemp(prefix="machine-reference-"))
    quiet = generate(args.model, out / "quiet", [])
    burner = subprocess.Popen(BURNER)
    try:
        loaded = generate(args.model, out / "busy", [])
    finally:
        burner.kill()
        burner.wait()
    for base, head in ((quiet, loaded), (loaded, quiet)):
        cmd = [sys.executable, "-m", "profreport", "compare", str(base), str(head)]
        done = subprocess.run(
            [*cmd, "--max-latency-regression", "10"], env=ENV, capture_output=True, text=True
        )
        print(
            f"$ profreport compare {base.parent.name}/ {head.parent.name}/ "
            f"--max-latency-regression 10   (exit {done.returncode})"
        )
        print(done.stdout)
        print(done.stderr)
    print(f"runs kept in {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["cost", "busy"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--model", default="simple")
    ap.add_argument("--out", default=None, help="busy: where to keep the two runs")
    args = ap.parse_args()
    cost(args) if args.what == "cost" else busy(args)


if __name__ == "__main__":
    main()
