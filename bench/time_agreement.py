"""Does the time decomposition agree with the clock? (issue 35)

For each model and mode: the profiled step against the timed median, and the saving the
decomposition explains against the timed saving (eager's timed median x (1 - 1 / the paired
speedup), what the headline shows). Target: for every mode whose speedup is not inconclusive,
|decomposed - timed saving| <= 25% of eager's timed median, and never of the opposite sign.

    # one model per call (each a generate run), under /work/bin/quiet, then the table:
    python bench/time_agreement.py run simple --out /tmp/agree
    python bench/time_agreement.py run bench/real_models_corpus.py:qwen2 --out /tmp/agree
    python bench/time_agreement.py table /tmp/agree

    # the two ways to take the profiler's cost out, measured against the clock in one process:
    python bench/time_agreement.py options simple --modes eager,compile

`table` reads each run.json as its writer wrote it (the findings stored beside the evidence,
not derived again), so records of an older profreport give the "before" rows: run `run` with
PYTHONPATH pointing at that checkout. The decomposed saving is `time_findings.profiled_saved_us`
where the record has it; before issue 35 the decomposition explained the profiled steps'
difference, which it stored in `saved_us`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

AGREE_SHARE = 0.25
ZOO_LAYERS = 2


def _load(spec: str) -> Any:
    from profreport.models import load_model

    layers = ZOO_LAYERS if spec.startswith("hf:") else None
    return load_model(spec, torch.device("cpu"), torch.float32, layers=layers)


def run(spec: str, modes: str, out: Path, min_time: float) -> None:
    """One generate run of ``spec`` into out/<name>/ (through the driver generate runs on)."""
    from profreport.files import RunFolder
    from profreport.pipeline import RunSetup, quiet
    from profreport.runner import profile_runs, run_options

    model = _load(spec)
    folder = RunFolder(out / spec.replace("/", "_").replace(":", "_"))
    options = run_options(modes.split(","), min_time_s=min_time, max_time_s=60.0)
    started = time.perf_counter()
    profile_runs({"": RunSetup(model, torch.device("cpu"), "float32", folder, options)}, quiet)
    print(f"{spec}: {folder.path} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1000:.3g}"


def rows(record: dict[str, Any]) -> list[list[str]]:
    """The table's rows of one run record (as written)."""
    modes = record["modes"]
    eager = modes.get("eager") or {}
    if eager.get("status") != "ok" or "latency_ms" not in eager:
        return []
    eager_us = eager["latency_ms"]["median"] * 1000
    stated = [(m.get("time_findings") or {}).get("eager_step_us") for m in modes.values()]
    eager_step = next((v for v in stated if v is not None), None)
    out = []
    for name, mode in modes.items():
        if name == "eager" or mode.get("status") != "ok" or "latency_ms" not in mode:
            continue
        tf = mode.get("time_findings") or {}
        sp = mode.get("speedup_vs_eager") or {}
        timed = eager_us * (1 - 1 / sp["median"]) if sp.get("median") else None
        decomposed = tf.get("profiled_saved_us", tf.get("saved_us"))
        lo, hi = (sp.get("ci95") or [None, None])[:2]
        clear = not sp.get("inconclusive") and lo is not None and not (lo <= 1.0 <= hi)
        off = agree = "-"
        if timed is not None and decomposed is not None:
            gap = abs(decomposed - timed) / eager_us
            off = f"{gap:.0%}"
            same_sign = decomposed * timed >= 0
            agree = "yes" if gap <= AGREE_SHARE and same_sign else "NO"
            if not clear:
                agree += " (inconclusive)"
        out.append(
            [
                record["model"]["name"],
                name,
                f"{_ms(eager_step)} / {_ms(eager_us)}",
                f"{_ms(tf.get('step_us'))} / {_ms(mode['latency_ms']['median'] * 1000)}",
                _ms(decomposed),
                _ms(timed),
                off,
                agree,
            ]
        )
    return out


HEADER = [
    "model",
    "mode",
    "eager: profiled step / timed (ms)",
    "mode: profiled step / timed (ms)",
    "decomposed saving (ms)",
    "timed saving (ms)",
    "off (of eager's timed)",
    "within 25%",
]


def table(folders: list[Path]) -> None:
    found = []
    for folder in folders:
        for path in sorted(folder.glob("**/run.json")):
            found += rows(json.loads(path.read_text()))
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    for row in found:
        print("| " + " | ".join(row) + " |")
    conclusive = [r for r in found if r[-1] in ("yes", "NO")]
    good = sum(r[-1] == "yes" for r in conclusive)
    print(f"\n{good} of {len(conclusive)} conclusive modes within 25% of eager's timed median")


def _timed_us(fn: Any, blocks: int = 15, block_s: float = 0.03) -> float:
    start = time.perf_counter()
    fn()
    calls = max(1, int(block_s / max(time.perf_counter() - start, 1e-6)))
    samples = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def options(spec: str, modes: str, rounds: int) -> None:
    """Each way of reading a mode's step against its timed median, in one process: a pass that
    records shapes and FLOPs (3 steps' upper median, as before issue 35; and the median of
    ``rounds`` steps), with and without its own calibrated cost removed; the light pass, with
    and without. Each pass profiles the modes interleaved, as generate's light pass does."""
    from profreport.analysis.profiler_cost import median_step
    from profreport.capture.profiling import LightSchedule, profile_interleaved
    from profreport.light_pass import breakdowns
    from profreport.modes import prepare_mode
    from profreport.traceio import load_trace

    model = _load(spec)
    x = model.example_inputs
    tmp = Path(tempfile.mkdtemp())
    cpu = torch.device("cpu")

    def sync() -> None:
        return None

    header = ["model", "mode", "timed", "shapes, 3 steps", "shapes, median", "shapes - cost"]
    header += ["light, median", "light - cost"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    with torch.no_grad():
        fns = {}
        for name in modes.split(","):
            prepared = prepare_mode(name, model.module, x, sync)
            fns[name] = partial(prepared.fn, *x)
            for _ in range(3):
                fns[name]()
        timed = {name: [_timed_us(fn)] for name, fn in fns.items()}
        cells: dict[str, list[float]] = {name: [] for name in fns}
        for shapes in (True, False):
            schedule = LightSchedule(rounds=rounds)
            session = profile_interleaved(fns, cpu, sync, tmp / "t.json", schedule, shapes=shapes)
            found = breakdowns(load_trace(session.trace), cpu, session, "t.json")
            for name, tb in found.items():
                removed = median_step(tb)
                plain = median_step(dataclasses.replace(tb, profiler_cost=None))
                assert removed is not None and plain is not None and tb.steps
                if shapes:
                    first = sorted(s.wall_us for s in tb.steps[:3])[1]
                    cells[name] += [first, plain.total_us, removed.total_us]
                else:
                    cells[name] += [plain.total_us, removed.total_us]
            for name, fn in fns.items():
                timed[name].append(_timed_us(fn))
        for name in fns:
            t = statistics.median(timed[name])
            shown = [f"{c / 1000:.3g} ({(c - t) / t:+.0%})" for c in cells[name]]
            print(f"| {model.name} | {name} | {t / 1000:.3g} | " + " | ".join(shown) + " |")
    print("\n(ms; in brackets: off from the timed median)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="one generate run of a model")
    r.add_argument("model")
    r.add_argument("--modes", default="eager,script,trace,optimize,compile")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--min-time", type=float, default=1.0)
    t = sub.add_parser("table", help="the table of every run.json under the folders")
    t.add_argument("folders", type=Path, nargs="+")
    o = sub.add_parser("options", help="shapes pass vs light pass, cost removed or not")
    o.add_argument("model")
    o.add_argument("--modes", default="eager,compile")
    o.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    if args.command == "run":
        run(args.model, args.modes, args.out, args.min_time)
    elif args.command == "table":
        table(args.folders)
    else:
        options(args.model, args.modes, args.rounds)


if __name__ == "__main__":
    main()
