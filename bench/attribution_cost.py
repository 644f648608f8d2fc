"""What module and source-line attribution costs `generate` on a real model (issue 25: at most 10%).

Two measurements, each with attribution on and off (`PROFREPORT_ATTRIBUTION=0`), interleaved
(on, off, off, on, ...) so that a change in the machine's load falls on both:
1. `profreport generate` wall time, each run in a fresh child process (as a user runs it), with
   the phases attribution touches (bytes: the dispatcher's recording pass; build: Inductor's
   capture) from each run's record;
   and its CPU time (user + sys: less moved by other processes' load than wall time);
2. in this process, the dispatcher's recording pass alone (capture/opio.record_tensor_io on the
   eager model), with and without the module hooks and stack walk: the part that grows.

    nice -n 10 python bench/attribution_cost.py [--model gpt2] [--layers 2] [--seq-len 32]
        [--modes eager,compile] [--rounds 3] [--passes 20]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from profreport.capture.opio import record_tensor_io
from profreport.capture.provenance import ATTRIBUTION_ENV
from profreport.zoo import ZOO, build_zoo_model, zoo_size


def _generate(
    args: argparse.Namespace, on: bool, out: Path
) -> tuple[float, float, dict[str, float]]:
    """Wall seconds, CPU seconds (user + sys of the child) and the record's phase seconds."""
    cmd = [
        sys.executable, "-m", "profreport", "generate", "--model", f"hf:{args.model}",
        "--device", "cpu", "--modes", args.modes, "--layers", str(args.layers),
        "--seq-len", str(args.seq_len), "--min-time", "0.2", "--max-time", "5", "--quiet",
        "--out", str(out),
    ]  # fmt: skip
    env = {**os.environ, ATTRIBUTION_ENV: "1" if on else "0"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"generate exited {proc.returncode}: {proc.stderr.strip()}")
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    record = json.loads((run / "run.json").read_text())
    modes = record["modes"]
    attributed = any(c.get("module") is not None for c in modes["eager"]["bytes"]["sequence"])
    if attributed != on:
        raise SystemExit(f"attribution was {'on' if attributed else 'off'}, expected the other")
    return wall, cpu, record.get("phases_s") or {}


def _recording_pass_s(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...], on: bool) -> float:
    start = time.perf_counter()
    with torch.no_grad():
        record_tensor_io(module, inputs, lambda: None, module if on else None)
    return time.perf_counter() - start


def _order(rounds: int) -> list[bool]:
    """on, off, off, on, on, off, ...: each side first in half the pairs."""
    return [
        side for i in range(rounds) for side in ((True, False) if i % 2 == 0 else (False, True))
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt2")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--rounds", type=int, default=3, help="generate pairs (on + off)")
    ap.add_argument("--passes", type=int, default=20, help="recording-pass pairs")
    args = ap.parse_args()

    walls: dict[bool, list[float]] = {True: [], False: []}
    cpus: dict[bool, list[float]] = {True: [], False: []}
    phases: dict[bool, dict[str, list[float]]] = {True: {}, False: {}}
    with tempfile.TemporaryDirectory() as tmp:
        for i, on in enumerate(_order(args.rounds)):
            wall, cpu, phase_s = _generate(args, on, Path(tmp) / str(i))
            walls[on].append(wall)
            cpus[on].append(cpu)
            for name in ("build", "bytes"):
                phases[on].setdefault(name, []).append(float(phase_s.get(name, 0.0)))

    zoo = ZOO[args.model]
    module, inputs = build_zoo_model(zoo, zoo_size(zoo, None, args.layers, args.seq_len))
    module.eval()
    _recording_pass_s(module, inputs, True)  # warm-up: first-call allocations
    passes: dict[bool, list[float]] = {True: [], False: []}
    for on in _order(args.passes):
        passes[on].append(_recording_pass_s(module, inputs, on))

    def row(label: str, on: list[float], off: list[float], unit: str = "s") -> str:
        a, b = statistics.median(on), statistics.median(off)
        ratio = a / b if b else float("nan")
        return (
            f"| {label} | {b:.3f} {unit} | {a:.3f} {unit} | {ratio:.3f} | {len(on)} + {len(off)} |"
        )

    print(f"hf:{args.model}, {args.layers} layers, seq {args.seq_len}, modes {args.modes}; medians")
    print("| measured | attribution off | attribution on | on / off | runs (on + off) |")
    print("|:---|---:|---:|---:|---:|")
    print(row("generate wall (child process)", walls[True], walls[False]))
    print(row("generate CPU time, user + sys (child)", cpus[True], cpus[False]))
    for name in ("build", "bytes"):
        print(row(f"  phase {name} (from run.json)", phases[True][name], phases[False][name]))
    ms_on = [x * 1000 for x in passes[True]]
    ms_off = [x * 1000 for x in passes[False]]
    print(row("recording pass, in this process", ms_on, ms_off, "ms"))
    print(
        "every run, in order (s): "
        + ", ".join(
            f"{'on' if on else 'off'} {w:.1f}"
            for on, w in zip(_order(args.rounds), _interleave(walls, args.rounds), strict=True)
        )
    )


def _interleave(walls: dict[bool, list[float]], rounds: int) -> list[float]:
    taken = {True: 0, False: 0}
    out = []
    for on in _order(rounds):
        out.append(walls[on][taken[on]])
        taken[on] += 1
    return out


if __name__ == "__main__":
    main()
