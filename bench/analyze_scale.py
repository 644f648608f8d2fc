"""Does ``profreport analyze`` stay within its memory bound on a trace several times larger than
the default benchmark one, and does it refuse, in one line, what would not fit?

Builds the trace of bench/analyze_speed.py (a real trace tiled, ids and times shifted per tile)
``--times`` times larger (default 4: ~4M events, ~700 MiB), optionally gzipped too, and runs
``profreport analyze --format json`` on it in a fresh process, with helper processes and
without. Peak memory is the whole process tree's (the wrapper of analyze_speed.py: resident
pages plus memory files, where an inflated gzip trace lives). Each row also shows what the guard
of :mod:`profreport.traceio.memory` estimates that run needs, to check its per-byte factors.

``--whole`` adds the whole-document parse (the fallback for documents the sliced scan cannot
vouch for). ``--pretend-available MIB`` adds two runs of the real command that see only that
much memory available: the tiled trace (refused before reading) and a gzip bomb (a 16 MiB file
that inflates to ``--bomb-gib`` GiB, whose length trailer says 2 bytes; stopped while
inflating).

    python bench/analyze_scale.py [--times 4] [--gzip] [--whole] [--pretend-available MIB]
                                  [--bomb-gib 16] [--source TRACE] [--keep DIR]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from analyze_speed import (  # noqa: E402  (bench/ is not a package)
    DEFAULT_EVENTS,
    DEFAULT_SOURCE,
    PROFREPORT,
    build_tiled_trace,
    measure,
)

from profreport.traceio import memory as _memory  # noqa: E402

# The fallback path alone: one orjson.loads of the whole document, one loop over its events.
WHOLE = """
import sys, time
t0 = time.perf_counter()
from profreport.analysis.kernels import count_kernels
from profreport.traceio.load import _parse_reference
with open(sys.argv[1], "rb") as fh:
    trace = _parse_reference(fh.read())
print("RESULT", count_kernels(trace).kernels, time.perf_counter() - t0)
"""
# The real command, on a machine that has only argv[2] MiB available (as the guard sees it).
PRETEND = """
import sys
from profreport.traceio import memory as _memory
_memory.available_memory_bytes = lambda: int(sys.argv[2]) << 20
from profreport.cli import main
code = main(["analyze", sys.argv[1], "--format", "json"])
print("RESULT accepted 0")
sys.exit(code)
"""
# What each run holds in memory besides the columns (the arguments of the guard's estimate).
STAGES = {
    "parallel": {"doc_in_memory": False},  # helpers read the file from the page cache
    "sliced": {"doc_in_memory": True},  # the file read in whole
    "gzip": {"doc_in_memory": True},  # inflated into memory
    "whole": {"doc_in_memory": True, "whole": True},
}


def write_bomb(path: Path, gib: int) -> None:
    """A valid trace of ``gib`` GiB of blanks, as gzip members of 64 MiB each (~64 KiB apiece):
    the last member's trailer, the one a reader finds at the end of the file, says 2 bytes."""
    blanks = gzip.compress(b" " * (64 << 20), compresslevel=9, mtime=0)
    with path.open("wb") as fh:
        fh.write(gzip.compress(b'{"traceEvents": [', mtime=0))
        for _ in range(gib * 16):
            fh.write(blanks)
        fh.write(gzip.compress(b"]}", mtime=0))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--times", type=float, default=4.0, help="x the default benchmark trace")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--gzip", action="store_true", help="also run on the trace gzipped")
    parser.add_argument("--whole", action="store_true", help="also run the whole-document parse")
    parser.add_argument("--pretend-available", type=int, metavar="MIB", help="also run refusals")
    parser.add_argument("--bomb-gib", type=int, default=16, help="the gzip bomb's inflated size")
    parser.add_argument("--keep", type=Path, help="build the trace in this folder and keep it")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "scale.pt.trace.json"
        n = build_tiled_trace(args.source, int(args.times * DEFAULT_EVENTS), path)
        size = path.stat().st_size
        print(f"trace: {n:,} events, {size / 2**20:,.0f} MiB, tiled from {args.source.name}")
        available = _memory.available_memory_bytes()
        print(
            f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, memory available: "
            f"{'unknown' if available is None else f'{available / 2**20:,.0f} MiB'}"
        )
        py, p = sys.executable, str(path)
        one = {"PROFREPORT_TRACE_WORKERS": "0"}
        runs = [
            ("analyze, helpers", [py, "-c", PROFREPORT, p], None, "parallel"),
            ("analyze, one process", [py, "-c", PROFREPORT, p], one, "sliced"),
        ]
        if args.gzip:
            gz = folder / "scale.pt.trace.json.gz"
            with path.open("rb") as src, gzip.open(gz, "wb", compresslevel=1) as dst:
                shutil.copyfileobj(src, dst, 16 << 20)
            g = str(gz)
            runs += [
                ("analyze .gz, helpers", [py, "-c", PROFREPORT, g], None, "gzip"),
                ("analyze .gz, one process", [py, "-c", PROFREPORT, g], one, "gzip"),
            ]
        if args.whole:
            runs.append(("whole-document parse (fallback)", [py, "-c", WHOLE, p], None, "whole"))
        results = [(label, measure(cmd, env), stage) for label, cmd, env, stage in runs]
        print_table(results, size)
        if args.pretend_available:
            bomb = folder / "bomb.pt.trace.json.gz"
            write_bomb(bomb, args.bomb_gib)
            mib = str(args.pretend_available)
            print(
                f"\nwith {args.pretend_available:,} MiB available (as the guard sees it); the gzip "
                f"bomb: {bomb.stat().st_size / 2**20:.0f} MiB inflating to {args.bomb_gib} GiB"
            )
            refusals = [
                ("tiled trace", measure([py, "-c", PRETEND, p, mib])),
                ("gzip bomb", measure([py, "-c", PRETEND, str(bomb), mib])),
            ]
            for label, r in refusals:
                print(
                    f"{label:<12} exit {r.get('exit_code', '?')}, {r['wall_s']:.2f} s, "
                    f"peak {r.get('peak_mib', float('nan')):.0f} MiB: {r.get('error', 'not refused')}"
                )
    return 0 if all(r["ok"] for _, r, _ in results) else 1


def print_table(rows: list[tuple[str, dict, str]], size: int) -> None:
    header = (
        f"{'run':<34} {'wall s':>7} {'peak MiB':>9} {'x file':>6} {'estimate MiB':>13} "
        f"{'kernels':>8}"
    )
    print(header)
    print("-" * len(header))
    for label, r, stage in rows:
        estimate = _memory.analysis_bytes(size, **STAGES[stage]) / 2**20
        if not r["ok"]:
            print(f"{label:<34} {'failed: ' + str(r['error'])}")
            continue
        print(
            f"{label:<34} {r['wall_s']:>7.2f} {r['peak_mib']:>9.0f} "
            f"{r['peak_mib'] * 2**20 / size:>6.2f} {estimate:>13.0f} {r['kernels']:>8}"
        )
    print(
        "peak: all the run's processes together, resident memory and memory files; estimate: "
        "what the memory guard expects that path to need, on top of the interpreter (~30 MiB)."
    )


if __name__ == "__main__":
    raise SystemExit(main())
