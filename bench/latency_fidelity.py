"""Does profreport's latency agree with torch.utils.benchmark?

For each model, in one process and with the same thread count, measure the eager median with
profreport's timer (the one `generate` uses) and with
`torch.utils.benchmark.Timer(...).blocked_autorange()`, alternating the two A-B-A-B so machine
drift hits both, and print both medians and their ratio. Target: ratio within 1 +/- 0.05.

    python bench/latency_fidelity.py [--models simple,mlp-block] [--min-time 2] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.utils.benchmark as tbench

from profreport.analysis.latency import summarize
from profreport.capture.timing import TimingConfig, measure_latency
from profreport.models import load_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="simple,mlp-block")
    ap.add_argument("--min-time", type=float, default=2.0, help="seconds per measurement")
    ap.add_argument("--repeats", type=int, default=2, help="A-B pairs per model")
    args = ap.parse_args()
    threads = torch.get_num_threads()
    rows = []
    for name in args.models.split(","):
        m = load_model(name, torch.device("cpu"), torch.float32)
        x = m.example_inputs
        ours, theirs = [], []
        with torch.no_grad():
            for _ in range(5):
                m.module(*x)
            for _ in range(args.repeats):
                res = measure_latency(
                    {"eager": lambda m=m, x=x: m.module(*x)},
                    sync=lambda: None,
                    cfg=TimingConfig(min_time_s=args.min_time, max_time_s=args.min_time * 5),
                )
                ours.append(summarize(res["eager"].samples_ms).median)
                timer = tbench.Timer(
                    stmt="model(*inputs)",
                    globals={"model": m.module, "inputs": x},
                    num_threads=threads,
                )
                theirs.append(timer.blocked_autorange(min_run_time=args.min_time).median * 1e3)
        a, b = statistics.median(ours), statistics.median(theirs)
        rows.append((name, a, b, a / b))
    print(f"CPU: {threads} threads, torch {torch.__version__}")
    print(f"{'model':<14}{'profreport ms':>15}{'blocked_autorange ms':>22}{'ratio':>8}  within 5%")
    for name, a, b, r in rows:
        print(f"{name:<14}{a:>15.3f}{b:>22.3f}{r:>8.3f}  {'yes' if abs(r - 1) <= 0.05 else 'NO'}")


if __name__ == "__main__":
    main()
