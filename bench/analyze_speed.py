"""How fast is ``profreport analyze`` on a large trace, against the bare parse and against HTA?

Builds a ~1M-event trace by tiling a real trace from tests/data (timestamps, correlation ids,
External ids and flow ids shifted per tile), writes it to a temporary folder, then runs each
contender in a fresh process and reports wall time, in-process work time and peak RSS:

  (a)  profreport analyze --format json          (load + count + JSON rendering)
  (a') the same, one process                     (PROFREPORT_TRACE_WORKERS=0: no helper process)
  (b)  bare orjson.loads + kernel count           (the parse as most code writes it)
  (b') bare orjson.loads + kernel count, GC off   (the same with the cyclic GC paused)
  (c)  Holistic Trace Analysis                    (TraceAnalysis load + get_gpu_kernel_breakdown)

Peak memory is measured by a small wrapper process started for each contender: the largest sum
of the resident sizes of the contender and every process it starts, plus the memory files
(memfd) they hold open, counted once (sampled from /proc every few milliseconds, so parallel
helper processes and an inflated gzip trace are counted together), and never less than the
peak of its largest single process (getrusage). ``--repeat N`` runs every contender N times
and reports each run and the median.

    python bench/analyze_speed.py [--events 1000000] [--source TRACE] [--keep DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT / "tests" / "data" / "a100_alexnet_inference.json.gz"
DEFAULT_EVENTS = 1_000_000

# Each contender prints one line: "RESULT <kernels> <work seconds>".
PROFREPORT = """
import io, sys, time
t0 = time.perf_counter()
import orjson
out = io.StringIO()
from profreport.cli import main
code = main(["analyze", sys.argv[1], "--format", "json"], out=out)
doc = orjson.loads(out.getvalue())
print("RESULT", doc["traces"][0]["kernels"], time.perf_counter() - t0)
"""
BARE = """
import sys, time
t0 = time.perf_counter()
import orjson
if sys.argv[2] == "gc-off":
    import gc; gc.disable()
with open(sys.argv[1], "rb") as fh:
    doc = orjson.loads(fh.read())
kernels = sum(1 for e in doc["traceEvents"] if e.get("cat") == "kernel")
print("RESULT", kernels, time.perf_counter() - t0)
"""
HTA = """
import sys, time, os
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=os.path.dirname(sys.argv[1]))
analysis.get_gpu_kernel_breakdown(visualize=False)
df = analysis.t.get_trace(0)
kernels = int((df["cat"] == analysis.t.symbol_table.sym_index["kernel"]).sum())
print("RESULT", kernels, time.perf_counter() - t0)
"""
# Runs one command and reports its exit code and peak memory: the largest sum of the memory of
# it and all its descendants (resident pages and the memory files they hold), sampled every few
# milliseconds from /proc (so helper processes count), and at least the peak of the largest
# single process (getrusage).
WRAPPER = """
import os, resource, subprocess, sys, threading, time

def tree_memory_kib(root):
    # Private and file-backed resident pages of each process, plus each memory file (memfd)
    # they hold open once: an inflated gzip trace lives in one without being mapped.
    total, todo, memfds = 0, [root], {}
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith(("RssAnon:", "RssFile:")):
                        total += int(line.split()[1])
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                        st = os.stat(f"/proc/{pid}/fd/{fd}")
                        memfds[(st.st_dev, st.st_ino)] = st.st_blocks // 2
                except OSError:
                    pass
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except (OSError, ValueError):
            pass
    return total + sum(memfds.values())

proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
peak_tree = [0]
def sample():
    while proc.poll() is None:
        peak_tree[0] = max(peak_tree[0], tree_memory_kib(proc.pid))
        time.sleep(0.004)
if os.path.isdir("/proc/self/task"):
    threading.Thread(target=sample, daemon=True).start()
stdout, stderr = proc.communicate()
peak_kib = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, peak_tree[0])
lines = [l for l in stdout.splitlines() if l.startswith("RESULT")]
tail = (stderr.strip().splitlines() or [""])[-1]
print(proc.returncode, peak_kib, lines[-1] if lines else "RESULT - -", "|", tail)
"""


def build_tiled_trace(source: Path, target_events: int, out_path: Path) -> int:
    """Write ``source`` tiled until it holds at least ``target_events`` events; returns the count."""
    raw = source.read_bytes()
    doc = orjson.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), int | float)]
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - min(e["ts"] for e in timed) + 1000
    id_span = 1 + max(
        [v for e in events for v in _ids(e)] or [0],
    )
    per_tile = [e for e in events if e.get("ph") != "M"]
    tiles = max(1, -(-(target_events - (len(events) - len(per_tile))) // len(per_tile)))
    written = 0
    with out_path.open("wb") as fh:
        fh.write(orjson.dumps(doc)[:-1] + b', "traceEvents": [\n')
        for tile in range(tiles):
            batch = events if tile == 0 else per_tile
            if tile:
                fh.write(b",\n")
            fh.write(b",\n".join(orjson.dumps(_shift(e, tile, span, id_span)) for e in batch))
            written += len(batch)
        fh.write(b"\n]}\n")
    return written


def _ids(event: dict):
    if isinstance(event.get("id"), int):
        yield event["id"]
    args = event.get("args") or {}
    for key in ("correlation", "External id"):
        if isinstance(args.get(key), int):
            yield args[key]


def _shift(event: dict, tile: int, span: float, id_span: int) -> dict:
    if not tile:
        return event
    out = dict(event)
    if isinstance(out.get("ts"), int | float):
        out["ts"] = out["ts"] + tile * span
    if isinstance(out.get("id"), int):
        out["id"] += tile * id_span
    args = out.get("args")
    if isinstance(args, dict) and ("correlation" in args or "External id" in args):
        args = dict(args)
        for key in ("correlation", "External id"):
            if isinstance(args.get(key), int):
                args[key] += tile * id_span
        out["args"] = args
    return out


def measure(argv: list[str], env: dict | None = None) -> dict:
    """Run ``argv`` through the wrapper; wall time is measured around the wrapper's child."""
    import time

    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=None if env is None else {**os.environ, **env},
    )
    wall = time.perf_counter() - started
    head, _, tail = done.stdout.strip().partition(" | ")
    parts = head.split()
    if done.returncode != 0 or len(parts) < 5 or parts[0] != "0":
        reason = tail or done.stderr.strip().splitlines()[-1:] or ["failed"]
        failed = {"ok": False, "error": str(reason)[:240], "wall_s": wall}
        if len(parts) > 1 and parts[1].isdigit():  # the wrapper ran: its figures still hold
            failed["exit_code"], failed["peak_mib"] = parts[0], int(parts[1]) / 1024
        return failed
    kernels, work = parts[3], parts[4]
    return {
        "ok": True,
        "wall_s": wall,
        "work_s": float(work),
        "peak_mib": int(parts[1]) / 1024,
        "kernels": kernels,
    }


def hta_available() -> str | None:
    probe = subprocess.run(
        [sys.executable, "-c", "import hta.trace_analysis"], capture_output=True, text=True
    )
    if probe.returncode == 0:
        return None
    last = (probe.stderr.strip().splitlines() or ["import failed"])[-1]
    return f"not installed ({last[:80]}); pip install holistictraceanalysis"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=DEFAULT_EVENTS)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--keep", type=Path, help="build the trace in this folder and keep it")
    parser.add_argument("--repeat", type=int, default=1, help="runs per contender (interleaved)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        trace_dir = folder / "trace"
        trace_dir.mkdir(parents=True, exist_ok=True)
        path = trace_dir / "rank0.pt.trace.json"
        n = build_tiled_trace(args.source, args.events, path)
        size_mib = path.stat().st_size / 2**20
        print(f"trace: {n:,} events, {size_mib:,.0f} MiB, tiled from {args.source.name}")
        print(f"python {sys.version.split()[0]}, {sys.platform}, {os.cpu_count()} CPUs")
        p = str(path)
        py = sys.executable
        contenders: list[tuple[str, list[str] | None, dict | None]] = [
            ("(a) profreport analyze --format json", [py, "-c", PROFREPORT, p], None),
            (
                "(a') the same, one process",
                [py, "-c", PROFREPORT, p],
                {"PROFREPORT_TRACE_WORKERS": "0"},
            ),
            ("(b) bare orjson.loads + count", [py, "-c", BARE, p, "gc-on"], None),
            ("(b') bare orjson.loads + count, GC off", [py, "-c", BARE, p, "gc-off"], None),
        ]
        missing = hta_available()
        hta = "(c) HTA TraceAnalysis + kernel breakdown"
        contenders.append((hta, None if missing else [py, "-c", HTA, p], None))
        runs: dict[str, list[dict]] = {label: [] for label, _, _ in contenders}
        for _ in range(max(args.repeat, 1)):
            for label, command, env in contenders:
                result = (
                    {"ok": False, "error": missing} if command is None else measure(command, env)
                )
                runs[label].append(result)
    for k in range(len(runs[contenders[0][0]])):
        if args.repeat > 1:
            print(f"\nrun {k + 1} of {args.repeat}")
        print_table([(label, r[k]) for label, r in runs.items()], size_mib)
    if args.repeat > 1:
        print(f"\nmedian of {args.repeat} runs")
        print_table([(label, _median_run(r)) for label, r in runs.items()], size_mib)
    return 0


def _median_run(results: list[dict]) -> dict:
    ok = [r for r in results if r["ok"]]
    if not ok:
        return results[0]
    med = {"ok": True, "kernels": ok[0]["kernels"]}
    for key in ("wall_s", "work_s", "peak_mib"):
        med[key] = statistics.median(r[key] for r in ok)
    return med


def print_table(rows: list[tuple[str, dict]], size_mib: float) -> None:
    base = rows[0][1]
    header = (
        f"{'contender':<42} {'wall s':>7} {'work s':>7} {'peak MiB':>9} {'x file':>6} "
        f"{'time/(a)':>9} {'RSS/(a)':>8} {'kernels':>8}"
    )
    print(header)
    print("-" * len(header))
    for label, r in rows:
        if not r["ok"]:
            print(f"{label:<42} {'n/a: ' + str(r['error'])}")
            continue
        t_ratio = r["wall_s"] / base["wall_s"] if base.get("ok") else float("nan")
        m_ratio = r["peak_mib"] / base["peak_mib"] if base.get("ok") else float("nan")
        print(
            f"{label:<42} {r['wall_s']:>7.2f} {r['work_s']:>7.2f} {r['peak_mib']:>9.0f} "
            f"{r['peak_mib'] / size_mib:>6.1f} {t_ratio:>8.2f}x {m_ratio:>7.2f}x {r['kernels']:>8}"
        )
    print(
        "wall: whole process incl. interpreter start and imports; work: inside the process; "
        "peak: all its processes together."
    )


if __name__ == "__main__":
    raise SystemExit(main())
