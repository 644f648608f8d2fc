"""Where a real model's run goes: wall time per phase for each hf: zoo model, beside its kernels.

Each model runs `profreport generate` in a fresh child process (every mode, as a user would run
it), then the report is rendered again here and timed. The table shows, per model and mode set,
the seconds spent building (scripting, tracing, Inductor codegen and warm-up), profiling, counting
kernels from the trace, modeling bytes (the dispatcher log or Inductor's scheduler), timing
(interleaved latency), deriving the fusion map and verdicts, and rendering HTML + Markdown; and
the kernels per step of eager and compile, with the per-kernel cost of the analysis phases
(bytes + fusion map + render, in ms per eager kernel), so a phase that grows faster than the
number of kernels stands out.

    python bench/real_models.py [--models gpt2,bert,llama,t5,vit,resnet] [--layers N]
                                [--modes eager,script,trace,optimize,compile] [--min-time 0.5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from profreport.record import Run
from profreport.render import html, markdown

PHASES = ("ceilings", "build", "profile", "kernels", "peak_memory", "bytes", "timing", "fusion_map")


def _run(model: str, args: argparse.Namespace, out: Path) -> tuple[dict, float]:
    cmd = [
        sys.executable, "-m", "profreport", "generate", "--model", f"hf:{model}",
        "--device", "cpu", "--modes", args.modes, "--min-time", str(args.min_time),
        "--quiet", "--out", str(out),
    ]  # fmt: skip
    if args.layers:
        cmd += ["--layers", str(args.layers)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{model}: generate exited {proc.returncode}: {proc.stderr.strip()}")
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return json.loads((run / "run.json").read_text()), wall


def _render_s(record: dict) -> float:
    run = Run.from_json(record)  # the findings generate derived, as written
    start = time.perf_counter()
    html.render(run)
    markdown.render(run)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2,bert,llama,t5,vit,resnet")
    ap.add_argument("--layers", type=int, default=None, help="override each model's layers")
    ap.add_argument("--modes", default="eager,script,trace,optimize,compile")
    ap.add_argument("--min-time", type=float, default=0.5, help="measured seconds per mode")
    args = ap.parse_args()

    header = (
        "| model | modes ok | eager kernels | compile kernels | "
        + " | ".join(f"{p} s" for p in PHASES)
        + " | render s | wall s | analysis ms / eager kernel |"
    )
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for model in args.models.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            record, wall = _run(model, args, Path(tmp))
        phases = record.get("phases_s", {})
        render = _render_s(record)
        modes = record["modes"]
        ok = [m for m, e in modes.items() if e["status"] == "ok"]

        def kernels(mode: str, modes: dict = modes) -> str:
            entry = modes.get(mode, {})
            return str(entry["kernels"]["per_step"]) if entry.get("status") == "ok" else "-"

        eager_k = modes.get("eager", {}).get("kernels", {}).get("per_step") or 0
        analysis = phases.get("bytes", 0) + phases.get("fusion_map", 0) + render
        per_kernel = f"{analysis / eager_k * 1000:.1f}" if eager_k else "-"
        cells = [
            f"hf:{model}",
            f"{len(ok)}/{len(modes)}",
            kernels("eager"),
            kernels("compile"),
            *(f"{phases.get(p, 0):.2f}" for p in PHASES),
            f"{render:.2f}",
            f"{wall:.1f}",
            per_kernel,
        ]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
