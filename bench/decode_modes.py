"""What each mode costs per generated token, for a small LM and one 8x deeper.

Runs `generate --workload decode` (the library's runner.generate, one run per model) on the zoo
Llama at 2 layers and at `--deep` layers (default 16: 8x deeper), in the default decode modes, and
prints per mode the measured latency per token, the profiled kernels per token, the host-overhead
share of the profiled step (profiler's cost removed), the modeled bytes per token and the
achieved fraction of the bandwidth floor (analysis/decode_tokens: eager's weights + KV cache
read + cache update written at the measured copy bandwidth, / the measured latency).

    python bench/decode_modes.py [--context 128] [--deep 16] [--min-time 1.0] [--device cpu]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from profreport.analysis.decode_tokens import decode_tokens  # noqa: E402
from profreport.format import fmt_bytes, fmt_ms  # noqa: E402
from profreport.runner import GenerateRequest, Terminal, generate  # noqa: E402


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--deep", type=int, default=16)
    parser.add_argument("--min-time", type=float, default=1.0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    print(
        f"{'model':<18} {'mode':<8} {'latency/token':>14} {'kernels/token':>14} "
        f"{'host overhead':>14} {'bytes/token':>12} {'of floor':>9} {'floor':>10}"
    )
    with tempfile.TemporaryDirectory(prefix="decode-modes-") as out:
        for layers in (2, args.deep):
            request = GenerateRequest(
                model="hf:llama",
                device=args.device,
                layers=layers,
                seq_len=args.context,
                workload="decode",
                out=Path(out),
                min_time_s=args.min_time,
            )
            done = generate(request, Terminal(sys.stderr))
            table = decode_tokens(done.run)
            assert table is not None
            for row in table.rows:
                print(
                    f"{f'llama x{layers} layers':<18} {row.mode:<8} "
                    f"{fmt_ms(row.latency_ms):>14} {row.kernels:>14} "
                    f"{_pct(row.host_share):>14} {fmt_bytes(row.bytes):>12} "
                    f"{_pct(row.achieved):>9} {fmt_ms(table.floor_ms):>10}"
                )
            for line in table.words:
                print(f"  {line}")
            for failure in done.failures:
                print(f"  {failure.line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
