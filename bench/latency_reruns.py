"""Does a rerun see what the interval says? The same code in fresh processes (issue 48).

`run` runs `profreport generate` N times, each in a fresh process, and keeps every run folder
(with its wall time and the machine's load in `bench.json` beside them). `table` reads saved
run folders (any profreport version's run.json) and prints, per model, the runs x modes table:
each mode's paired speedup median [95% interval] and its call (faster, slower, none: no change
beyond the 1% resolution is certain, inconclusive), twice: as the run stored it (`stored`: the
statistics of the profreport that ran it) and re-read from its saved samples with today's
statistics (`today`: analysis/speedups.run_speedups); then, per mode, whether every run made the
same call and how many pairs of runs have overlapping intervals. `--summary` counts the calls of
every run given (a corpus run of bench/corpus_modes.py --keep, say: how many mode results are
inconclusive before and after). `compare` runs `profreport compare` (today's code) on pairs of
saved runs of the same code with --max-latency-regression 5, and on a run against a head doing
twice the work, and prints each exit code and its calls.

    python bench/latency_reruns.py run --model simple --runs 5 --out DIR [--code PATH]
    python bench/latency_reruns.py run --model hf:llama --layers 2 --runs 3 --out DIR
    python bench/latency_reruns.py run --model simple --runs 3 --out TWICE -- --batch-size 16
    python bench/latency_reruns.py table DIR [DIR...] [--summary]
    python bench/latency_reruns.py compare DIR [--double TWICE]

(`--batch-size 16`: simple's default CPU batch is 8, so its runs do twice the work.)

`--code PATH` runs another checkout's profreport (its folder on PYTHONPATH): the before of a
before/after, measured in the same session. Each run's own load is in the table (other
processes' share of the CPU while timing): a figure from a busy machine is labelled so.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUSY = 0.10  # the noise guard's limit on other processes' share of the CPU


def _run_folders(paths: Sequence[Path]) -> list[Path]:
    """Every run folder (one holding run.json) under `paths`, in name order (the run's time)."""
    found: list[Path] = []
    for path in paths:
        if (path / "run.json").is_file():
            found.append(path)
        else:
            found += sorted(p.parent for p in path.rglob("run.json") if ".partial" not in str(p))
    return found


def run(args: argparse.Namespace) -> None:
    import psutil

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    code = Path(args.code).resolve() if args.code else ROOT
    env = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1"}
    log = []
    for i in range(args.runs):
        cmd = [sys.executable, "-m", "profreport", "generate", "--model", args.model]
        cmd += ["--device", "cpu", "--quiet", "--out", str(out / f"run{i + 1}")]
        if args.layers:
            cmd += ["--layers", str(args.layers)]
        cmd += args.extra
        load_before = os.getloadavg()[0]
        psutil.cpu_percent()
        started = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall_s = time.perf_counter() - started
        cpu = psutil.cpu_percent()
        print(f"run {i + 1}: exit {done.returncode}, {wall_s:.1f} s, machine CPU {cpu:.0f}%")
        if done.returncode not in (0, 1):
            print(done.stderr[-2000:], file=sys.stderr)
        log.append(
            {
                "run": i + 1,
                "code": str(code),
                "model": args.model,
                "exit": done.returncode,
                "wall_s": round(wall_s, 2),
                "load1_before": load_before,
                "machine_cpu_pct": cpu,
            }
        )
    (out / "bench.json").write_text(json.dumps(log, indent=1))


# ---------------------------------------------------------------- the table


def _call(sp: Any) -> str:
    """faster, slower, none (no change beyond the resolution is certain) or inconclusive."""
    from profreport.analysis.paired import beyond_resolution

    if sp.inconclusive:
        return "inconclusive"
    return {1: "faster", -1: "slower", 0: "none"}[beyond_resolution(sp.ci95)]


def _cell(sp: Any) -> str:
    lo, hi = sp.ci95
    return f"{sp.median:.3f} [{lo:.3f}, {hi:.3f}] {_call(sp)}"


def _other_busy(run: Any) -> str:
    noise = run.timing_noise
    share = noise.load.other_busy_share if noise is not None and noise.load is not None else None
    if share is None:
        return "?"
    return f"{share:.0%}{' BUSY' if share > BUSY else ''}"


def _overlapping_pairs(cis: list[tuple[float, float]]) -> tuple[int, int]:
    pairs = [(a, b) for i, a in enumerate(cis) for b in cis[i + 1 :]]
    return sum(a[0] <= b[1] and b[0] <= a[1] for a, b in pairs), len(pairs)


def _print_model(model: str, runs: list[tuple[Path, Any]]) -> None:
    from profreport.analysis.speedups import run_speedups

    modes = list(dict.fromkeys(m for _, r in runs for m in r.ok_modes if m != "eager"))
    stored = [{m: r.mode(m).speedup_vs_eager for m in modes if m in r.ok_modes} for _, r in runs]
    today = [run_speedups(r)[0] for _, r in runs]
    print(f"\n## {model}: {len(runs)} runs")
    for label, table in (("stored", stored), ("today", today)):
        print(f"\n{label}: paired speedup vs eager, median [95% CI] call")
        print(f"{'run':<4} {'others':>9} {'eager ms':>9}  " + "  ".join(f"{m:<36}" for m in modes))
        for i, ((_, r), sps) in enumerate(zip(runs, table, strict=True)):
            eager = r.ok_modes.get("eager")
            lat = eager.latency_ms.median if eager is not None and eager.latency_ms else None
            cells = [(_cell(sps[m]) if sps.get(m) is not None else "n/a") for m in modes]
            print(
                f"{i + 1:<4} {_other_busy(r):>9} {lat or 0:>9.3f}  "
                + "  ".join(f"{c:<36}" for c in cells)
            )
        for m in modes:
            got = [sps[m] for sps in table if sps.get(m) is not None]
            calls = sorted({_call(sp) for sp in got})
            agree, pairs = _overlapping_pairs([sp.ci95 for sp in got])
            processes = sorted({sp.processes or 1 for sp in got})
            print(
                f"  {m}: calls {', '.join(calls)} ({'the same' if len(calls) == 1 else 'DIFFER'}); "
                f"intervals overlap in {agree}/{pairs} pairs; processes per run {processes}"
            )
    walls = _walls(runs)
    if walls:
        print(f"  wall time per run (bench.json): {', '.join(f'{w:.1f}' for w in walls)} s")


def _walls(runs: list[tuple[Path, Any]]) -> list[float]:
    walls = []
    for path, _ in runs:
        log = path.parent.parent / "bench.json"
        if log.is_file():
            number = int(path.parent.name.removeprefix("run") or 0)
            walls += [e["wall_s"] for e in json.loads(log.read_text()) if e["run"] == number]
    return walls


def table(args: argparse.Namespace) -> None:
    from profreport.analysis.speedups import run_speedups
    from profreport.record import load_run

    runs = [(p, load_run(p)) for p in _run_folders([Path(d) for d in args.dirs])]
    runs = [(p, r) for p, r in runs if r.ok_modes]  # a run whose modes all failed: nothing
    if args.summary:
        counts: dict[str, dict[str, int]] = {"stored": {}, "today": {}}
        for _, r in runs:
            again = run_speedups(r)[0]
            for name, mode in r.ok_modes.items():
                if mode.speedup_vs_eager is None or name not in again:
                    continue
                for label, sp in (("stored", mode.speedup_vs_eager), ("today", again[name])):
                    call = _call(sp)
                    counts[label][call] = counts[label].get(call, 0) + 1
        print(f"{len(runs)} runs")
        for label, c in counts.items():
            total = sum(c.values())
            print(
                f"{label}: {total} mode results: "
                + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
            )
        return
    by_model: dict[str, list[tuple[Path, Any]]] = {}
    for path, r in runs:
        by_model.setdefault(r.model.name, []).append((path, r))
    for model, model_runs in by_model.items():
        _print_model(model, model_runs)
    print(
        "\ncall: faster / slower = the whole 95% interval beyond the 1% resolution; none = no "
        "change beyond it is certain; inconclusive = the guard withheld it (busy machine, too "
        "few rounds, processes that disagree). others = other processes' share of the CPU while "
        f"timing (BUSY above {BUSY:.0%}: not a figure to draw a conclusion from)."
    )


# ---------------------------------------------------------------- compare


def _compare(base: Path, head: Path, extra: list[str]) -> tuple[int, dict[str, Any]]:
    cmd = [sys.executable, "-m", "profreport", "compare", str(base), str(head), "--format", "json"]
    cmd += ["--max-latency-regression", "5", *extra]
    done = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"compare exited {done.returncode}: {done.stderr[-2000:]}")
    return done.returncode, json.loads(done.stdout)


def _latency_calls(doc: dict[str, Any]) -> str:
    out = []
    for mc in doc["modes"]:
        lat = next((m for m in mc["metrics"] if m["metric"] == "latency_median_ms"), None)
        if lat is None or lat.get("change_pct") is None:
            continue
        verdict = (
            "REGRESSION" if lat["regression"] else "inconclusive" if lat["inconclusive"] else "ok"
        )
        ci = lat.get("ratio_ci95")
        interval = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
        out.append(f"{mc['mode']} {lat['change_pct']:+.1f}%{interval} {verdict}")
    return "; ".join(out)


def compare(args: argparse.Namespace) -> None:
    runs = _run_folders([Path(args.dir)])
    extra = ["--allow-different-models"] if args.double else []
    print("compare --max-latency-regression 5 (exit 0: no regression called)")
    for a, b in itertools.pairwise(runs):
        rc, doc = _compare(a, b, [])
        print(f"  {a.parent.name} -> {b.parent.name}: exit {rc}: {_latency_calls(doc)}")
    if args.double:
        for a, b in zip(runs, _run_folders([Path(args.double)]), strict=False):
            rc, doc = _compare(a, b, extra)
            print(
                f"  {a.parent.name} -> twice the work {b.parent.name}: exit {rc}: {_latency_calls(doc)}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="N generate runs, each in a fresh process")
    r.add_argument("--model", default="simple")
    r.add_argument("--layers", type=int, default=None)
    r.add_argument("--runs", type=int, default=5)
    r.add_argument("--out", required=True)
    r.add_argument("--code", default=None, help="another checkout's profreport (the before)")
    r.add_argument("extra", nargs="*", help="more generate arguments (after --)")
    t = sub.add_parser("table", help="runs x modes from saved run folders")
    t.add_argument("dirs", nargs="+")
    t.add_argument("--summary", action="store_true", help="only count each call, stored and today")
    c = sub.add_parser("compare", help="compare consecutive saved runs (and a twice-the-work head)")
    c.add_argument("dir")
    c.add_argument("--double", default=None, help="run folders of a head doing twice the work")
    args = ap.parse_args()
    {"run": run, "table": table, "compare": compare}[args.command](args)


if __name__ == "__main__":
    main()
