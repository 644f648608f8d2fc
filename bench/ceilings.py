"""Are profreport's measured ceilings what an independent measurement of this machine gives?

Measures the ceilings the way `generate` does (capture/ceilings.measure, no cache) and, in the
same process and alternately, the same quantities with NumPy: `np.copyto` between arrays of the
same sizes (bytes = read + written) and `a @ b` on the same square float32 matrices. Each side
is the best of its samples; the table prints both, their ratio profreport / NumPy, and the time
profreport's measurement took. NumPy's copy is single-threaded and its matmul uses NumPy's own
BLAS, so a ratio away from 1 says how the two libraries differ as much as how the measurement
does; the point is the order of magnitude and the spread across rounds.

    python bench/ceilings.py [--rounds 3] [--threads N] [--dtype float32]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from profreport.capture import ceilings
from profreport.record.model import Ceilings


def _best_rate(op, amount: float, samples: int, min_s: float = 0.004) -> float:
    op()
    once = min(_time(op, 1) for _ in range(3))
    calls = max(1, int(min_s / max(once, 1e-7)) + 1)
    return max(amount * calls / _time(op, calls) for _ in range(samples))


def _time(op, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        op()
    return time.perf_counter() - start


def numpy_side(found: Ceilings, dtype: np.dtype) -> dict[str, float]:
    out = {}
    for key, samples in (
        ("memory_bandwidth", ceilings.MEMORY_SAMPLES),
        ("cache_bandwidth", ceilings.SAMPLES),
    ):
        ceiling = getattr(found, key)
        n = ceiling.source_bytes // dtype.itemsize
        src, dst = np.ones(n, dtype=dtype), np.empty(n, dtype=dtype)
        out[key] = _best_rate(lambda s=src, d=dst: np.copyto(d, s), 2 * n * dtype.itemsize, samples)
    n = found.matmul_rate.n
    rng = np.random.default_rng(0)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    out["matmul_rate"] = _best_rate(lambda: a @ b, 2.0 * n**3, ceilings.SAMPLES)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, numpy {np.__version__}, {threads} torch thread(s), float32")
    header = f"{'round':>5} {'ceiling':<18}{'profreport':>14}{'numpy':>14}{'ratio':>8}"
    print(header + f"{'measure s':>11}")
    ratios: dict[str, list[float]] = {}
    for r in range(1, args.rounds + 1):
        start = time.perf_counter()
        found = ceilings.measure(torch.device("cpu"), torch.float32, threads)
        took = time.perf_counter() - start
        ref = numpy_side(found, np.dtype(np.float32))
        for key in ceilings.CEILING_KEYS:
            ours = getattr(found, key).value
            unit = "GFLOP/s" if key == "matmul_rate" else "GB/s"
            ratio = ours / ref[key]
            ratios.setdefault(key, []).append(ratio)
            print(
                f"{r:>5} {key:<18}{ours / 1e9:>9.1f} {unit:<4}{ref[key] / 1e9:>9.1f} {unit:<4}"
                f"{ratio:>8.2f}{took:>11.2f}"
            )
    print("median ratio profreport / numpy:")
    for key, values in ratios.items():
        print(
            f"  {key:<18}{statistics.median(values):.2f} (rounds: {', '.join(f'{v:.2f}' for v in values)})"
        )


if __name__ == "__main__":
    main()
