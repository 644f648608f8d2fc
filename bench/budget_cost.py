"""What a kernel-budget check costs: `generate --expect FILE` against a plain `generate` of the
same model, and the `profreport_expect` fixture's path (profile without latency timing, then
the check), all in one process, interleaved round by round (order rotated), after one warm-up
round that fills Inductor's caches.

Prints, per variant, the median wall time of a run, its ratio to the plain generate measured in
the same rounds, and the seconds the run spent in latency timing (its record's
`phases_s.timing`); then what the check itself costs (read the file, compare, lay out the rows),
timed on the last run's record. `--expect` adds no timing to a generate (it reads its record);
the fixture's path times nothing unless the file sets a `min_speedup`.

    python bench/budget_cost.py [--model simple] [--modes eager,compile] [--rounds 3]
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from profreport import api, cli
from profreport.analysis.budget import check_budget
from profreport.record import load
from profreport.record.expectation import load as load_expectation


def _generate(model: str, modes: str, out: Path, *extra: str) -> tuple[float, float | None]:
    """One `profreport generate` in this process: (wall seconds, seconds spent timing)."""
    argv = ["generate", "--model", model, "--modes", modes, "--device", "cpu", "--quiet"]
    started = time.perf_counter()
    code = cli.main([*argv, "--out", str(out), *extra], out=io.StringIO(), err=io.StringIO())
    wall = time.perf_counter() - started
    assert code == 0, f"generate {' '.join(extra)} exited {code}"
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    phases = load(run).get("phases_s") or {}
    return wall, phases.get("timing")


def _fixture_path(model: str, modes: str, budget: Path) -> tuple[float, float | None]:
    """What `profreport_expect` does: build, profile without timing, check (no report saved)."""
    import torch

    from profreport.models import load_model

    started = time.perf_counter()
    built = load_model(model, torch.device("cpu"), torch.float32)
    result = api.profile(
        built.module, built.example_inputs, modes.split(","), "cpu", time_latency=False
    )
    check = check_budget(load_expectation(budget).expectation, result.run, str(budget))
    wall = time.perf_counter() - started
    assert check.passed, [b.subject for b in check.breaches]
    timed = any(m.latency_ms is not None for m in result.run.modes.values())
    phases = result.run.phases_s or {}
    return wall, phases.get("timing") if timed else 0.0


def _check_cost(run_dir: Path, budget: Path, repeat: int = 20) -> float:
    """Median milliseconds of what --expect adds to a generate: read and parse the file, check
    the run, build the rows (terminal lines, summary.md lines)."""
    from profreport.analysis.derive import derived_run
    from profreport.modes import mode_analyses
    from profreport.render.budget import budget_markdown, budget_text, budget_view

    run = derived_run(load(run_dir), mode_analyses())
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        check = check_budget(load_expectation(budget).expectation, run, str(budget))
        view = budget_view(check)
        budget_text(view), budget_markdown(view)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="simple")
    parser.add_argument("--modes", default="eager,compile")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="budget-cost-") as folder:
        root = Path(folder)
        budget = root / "budget.json"
        _generate(args.model, args.modes, root / "update", "--update-expect", str(budget))
        variants: dict[str, Callable[[Path], tuple[float, float | None]]] = {
            "generate": lambda out: _generate(args.model, args.modes, out),
            "generate --expect": lambda out: _generate(
                args.model, args.modes, out, "--expect", str(budget)
            ),
            "fixture path (no timing)": lambda out: _fixture_path(args.model, args.modes, budget),
        }
        names = list(variants)
        walls: dict[str, list[float]] = {n: [] for n in names}
        timing: dict[str, list[float]] = {n: [] for n in names}
        for round_no in range(args.rounds + 1):  # round 0 warms the caches, not counted
            order = names[round_no % len(names) :] + names[: round_no % len(names)]
            for name in order:
                wall, timed = variants[name](root / f"r{round_no}-{names.index(name)}")
                if round_no:
                    walls[name].append(wall)
                    timing[name].append(timed or 0.0)
        (last,) = [p for p in (root / f"r{args.rounds}-0").iterdir() if p.is_dir()]
        check_ms = _check_cost(last, budget)
    base = statistics.median(walls["generate"])
    print(f"model {args.model}, modes {args.modes}, {args.rounds} rounds after a warm-up round")
    print(f"{'variant':<26} {'median s':>9} {'vs generate':>12} {'timing s':>9}  runs (s)")
    for name in names:
        median = statistics.median(walls[name])
        runs = " ".join(f"{w:.1f}" for w in walls[name])
        print(
            f"{name:<26} {median:>9.2f} {median / base:>11.2f}x "
            f"{statistics.median(timing[name]):>9.2f}  {runs}"
        )
    print(f"the check itself (read the file, compare, lay out the rows): {check_ms:.1f} ms")


if __name__ == "__main__":
    main()
