"""Is identical code ever called different, and is a real difference called? (A/A and A/B.)

Two ways of timing base against head, each N times per pair:

- `ab`: `profreport ab BASE HEAD --modes eager,compile` as a user runs it, where HEAD is
  bench/ab_models/same/ (a byte-for-byte copy of base in another folder: A/A) or
  bench/ab_models/double/ (the same block applied twice: A/B, twice the work);
- `timer`: in one process, one model's mode against itself through the paired timer
  (capture/timing.measure_latency with two series, judged by analysis/speedups.paired_gate), for
  eager and compile: the model built twice from the same file, each instance with its own
  weights, as `ab` has them (A/A); and against the double model's same mode (A/B).

Each run appends one JSON line per mode to `--record FILE` (so that a long bench can be split
into short calls under /work/bin/quiet), with base's and head's blocks per timing process;
`--table FILE...` prints, per pair and mode, how often a difference was called (the gate
conclusive and the 95% interval beyond the 1% resolution), how often it was inconclusive, the
median of the paired medians and the median |ratio - 1|: as each run judged it (`then`) and
judged again from its blocks with today's statistics (`today`; lines recorded before the blocks
were kept are judged as recorded).

    python bench/latency_aa.py ab --runs 2 --record aa.jsonl [--min-time 1.0] [--pairs aa,ab]
    python bench/latency_aa.py timer --runs 20 --record aa.jsonl
    python bench/latency_aa.py --table aa.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "bench" / "ab_models"
BASE = f"{MODELS / 'base' / 'block.py'}:build"
BUSY = 0.10  # other processes' CPU share above which the noise guard calls a machine busy
HEADS = {
    "aa": f"{MODELS / 'same' / 'block.py'}:build",
    "ab": f"{MODELS / 'double' / 'block.py'}:build",
}


def _called(median: float, ci95: list[float], inconclusive: str | None) -> bool:
    """What profreport calls a difference: conclusive, and the whole interval beyond the paired
    timer's resolution (analysis/paired.beyond_resolution)."""
    from profreport.analysis.paired import beyond_resolution

    return not inconclusive and beyond_resolution(ci95) != 0


def _row(tool: str, pair: str, mode: str, run: int, **fields: Any) -> dict[str, Any]:
    return {"tool": tool, "pair": pair, "mode": mode, "run": run, "code": str(ROOT), **fields}


def run_ab(pair: str, run: int, args: argparse.Namespace, out: Path) -> list[dict[str, Any]]:
    cmd = [sys.executable, "-m", "profreport", "ab", BASE, HEADS[pair], "--modes", args.modes]
    cmd += ["--min-time", str(args.min_time), "--device", "cpu", "--quiet", "--format", "json"]
    cmd += ["--out", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, env=env, text=True)
    wall_s = time.perf_counter() - started
    folders = [p for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")]
    if len(folders) != 1:
        raise SystemExit(f"ab exited {done.returncode}: {done.stderr[-2000:]}")
    folder = folders[0]
    cmp = json.loads((folder / "compare.json").read_text())
    runs = {s: json.loads((folder / s / "run.json").read_text()) for s in ("base", "head")}
    rows = []
    for mc in cmp["modes"]:
        lat = next(m for m in mc["metrics"] if m["metric"] == "latency_median_ms")
        r = lat["paired"]["ratio"]
        latency = {s: runs[s]["modes"][mc["mode"]]["latency_ms"] for s in runs}
        calls = [latency[s]["calls_per_block"] for s in runs]
        noise = runs["base"].get("timing_noise") or {}
        loads = noise.get("process_loads") or [noise.get("load")]
        rows.append(
            _row(
                "ab",
                pair,
                mc["mode"],
                run,
                median=r["median"],
                ci95=r["ci95"],
                spread=r["spread"],
                rounds=r["n"],
                inconclusive=lat["inconclusive"],
                called=_called(r["median"], r["ci95"], lat["inconclusive"]),
                calls_per_block=calls,
                other_busy=runs["base"]["timing_noise"]["load"].get("other_busy_share"),
                timing_s=runs["base"]["phases_s"].get("timing"),
                wall_s=round(wall_s, 1),
                base_blocks=_blocks(latency["base"]),
                head_blocks=_blocks(latency["head"]),
                loads=loads,
            )
        )
    return rows


def _blocks(latency: dict[str, Any]) -> list[list[float]]:
    """A stored latency's blocks per timing process."""
    if latency.get("processes"):
        return [p["samples"] for p in latency["processes"]]
    return [latency["samples"]]


def _judged(r: dict[str, Any]) -> tuple[float, list[float], str | None]:
    """(median, 95% CI, inconclusive) of a line: judged again from its blocks with today's
    statistics (analysis/speedups.paired_gate), or as recorded when it has none."""
    if "base_blocks" not in r:
        return r["median"], r["ci95"], r["inconclusive"]
    from profreport.analysis.speedups import paired_gate
    from profreport.record.model import MachineLoad

    loads = [MachineLoad.from_json(x) if x else None for x in r["loads"]]
    if len(loads) != len(r["base_blocks"]):
        loads = [None] * len(r["base_blocks"])
    gate = paired_gate(r["base_blocks"], r["head_blocks"], None, loads)
    return gate.ratio.median, list(gate.ratio.ci95), gate.inconclusive


def run_timer(args: argparse.Namespace) -> list[dict[str, Any]]:
    import torch

    from profreport.analysis.speedups import paired_gate
    from profreport.capture.noise import watch
    from profreport.capture.timing import TimingConfig, measure_latency
    from profreport.models import load_model
    from profreport.modes import prepare_mode

    device = torch.device("cpu")
    cfg = TimingConfig(min_time_s=args.min_time)
    fns: dict[tuple[str, str], Callable[[], Any]] = {}
    with torch.no_grad():
        for side, spec in (("base", BASE), ("same", BASE), ("double", HEADS["ab"])):
            model = load_model(spec, device, torch.float32)
            for mode in args.modes.split(","):
                prepared = prepare_mode(mode, model.module, model.example_inputs, lambda: None)
                fns[side, mode] = partial(prepared.fn, *model.example_inputs)
        rows = []
        for run in range(args.runs):
            for mode in args.modes.split(","):
                for pair, head in (("aa", fns["same", mode]), ("ab", fns["double", mode])):
                    with watch() as watched:
                        res = measure_latency(
                            {"base": fns["base", mode], "head": head}, lambda: None, cfg
                        )
                    base_ms, head_ms = res["base"].samples_ms, res["head"].samples_ms
                    gate = paired_gate([base_ms], [head_ms], None, [watched.load])
                    r = gate.ratio
                    rows.append(
                        _row(
                            "timer",
                            pair,
                            mode,
                            run,
                            median=r.median,
                            ci95=list(r.ci95),
                            spread=r.spread,
                            rounds=r.n,
                            inconclusive=gate.inconclusive,
                            called=_called(r.median, list(r.ci95), gate.inconclusive),
                            calls_per_block=[res[s].calls_per_block for s in ("base", "head")],
                            other_busy=None
                            if watched.load is None
                            else watched.load.other_busy_share,
                            base_blocks=[base_ms],
                            head_blocks=[head_ms],
                            loads=[None if watched.load is None else watched.load.to_json()],
                        )
                    )
    return rows


def table(paths: list[str]) -> None:
    rows = [json.loads(line) for p in paths for line in Path(p).read_text().splitlines() if line]
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r["tool"], r["pair"], r["mode"]].append(r)
    print(f"code: {sorted({r['code'] for r in rows})}")
    print(
        f"{'tool':<6} {'pair':<5} {'mode':<8} {'runs':>4} {'called':>7} {'then':>7} "
        f"{'excl. 1':>7} {'inconcl.':>8} {'then':>4} "
        f"{'median ratio':>12} {'med |r-1|':>9} {'max |r-1|':>9} {'others':>6} {'busy':>4}  "
        "calls/block base/head"
    )
    for (tool, pair, mode), rs in sorted(groups.items()):
        dev = [abs(r["median"] - 1) for r in rs]
        today = [_judged(r) for r in rs]
        # `called`: today's statistics and rule; `then`: as each run judged it (the resolution
        # rule applied to lines recorded before it); `excl. 1`: the rule before the resolution
        # (the interval excluding 1), on the recorded intervals
        called = sum(_called(*t) for t in today)
        then = sum(_called(r["median"], r["ci95"], r["inconclusive"]) for r in rs)
        excl = sum(not r["inconclusive"] and (r["ci95"][0] > 1 or r["ci95"][1] < 1) for r in rs)
        inconclusive = sum(bool(t[2]) for t in today)
        inconclusive_then = sum(bool(r["inconclusive"]) for r in rs)
        med = statistics.median(r["median"] for r in rs)
        calls = ", ".join(f"{a}/{b}" for a, b in (r["calls_per_block"] for r in rs[:6]))
        more = ", ..." if len(rs) > 6 else ""
        shares = [r["other_busy"] for r in rs if r["other_busy"] is not None]
        others = f"{statistics.median(shares):.0%}" if shares else "?"
        busy = sum(s > BUSY for s in shares)
        print(
            f"{tool:<6} {pair:<5} {mode:<8} {len(rs):>4} {called:>3}/{len(rs):<3} "
            f"{then:>3}/{len(rs):<3} {excl:>3}/{len(rs):<3} "
            f"{inconclusive:>8} {inconclusive_then:>4} {med:>12.3f} {statistics.median(dev):>9.3f} {max(dev):>9.3f} "
            f"{others:>6} {busy:>4}  {calls}{more}"
        )
    print(
        "pair aa: base and a byte-identical head (a call is wrong); ab: a head doing twice the "
        "work (a call is right). called = conclusive and the 95% interval beyond the 1% "
        "resolution, judged with today's statistics from the recorded blocks (then: as the run "
        "judged it); excl. 1 = conclusive and the interval excluding 1 (the rule before). others: "
        f"median share of the CPU other processes used while timing; busy: runs above {BUSY:.0%}."
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tool", nargs="?", choices=["ab", "timer"])
    ap.add_argument("--runs", type=int, default=1, help="runs per pair")
    ap.add_argument("--pairs", default="aa,ab", help="aa (identical), ab (twice the work)")
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--record", help="append one JSON line per run and mode to this file")
    ap.add_argument("--table", nargs="+", help="print the table of these record files")
    args = ap.parse_args()
    if args.table:
        table(args.table)
        return
    if args.tool is None or args.record is None:
        ap.error("give a tool (ab or timer) and --record, or --table FILE...")
    rows: list[dict[str, Any]] = []
    if args.tool == "timer":
        rows = run_timer(args)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            for run in range(args.runs):
                for pair in args.pairs.split(","):  # alternate: drift hits both pairs
                    rows += run_ab(pair, run, args, Path(tmp) / f"{pair}{run}")
    with open(args.record, "a", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    table([args.record])


if __name__ == "__main__":
    main()
