"""`profreport ab`: base and head in one process, their latency blocks interleaved.

Both models are built, profiled and warmed up as `generate` does (pipeline.RunCollector), then
timed together: each round runs every mode of both sides, modes in rotating order and, within a
mode, base and head adjacent in alternating order (base first on even rounds). Block *i* of base
and of head ran moments apart, so the gate compares them round by round (analysis/paired.py).
Each side then finishes as an ordinary run; compare_runs reads the two records.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

import torch

from profreport.analysis.compare import Comparison, Thresholds, compare_runs
from profreport.models import LoadedModel
from profreport.pipeline import (
    Progress,
    RunCollector,
    RunOptions,
    RunSetup,
    TimingStage,
    ceilings_again,
    derive_findings,
    time_stages,
)
from profreport.record.model import MachineLoad, Run

Side = Literal["base", "head"]
SIDES: tuple[Side, Side] = ("base", "head")


def key(side: str, mode: str) -> str:
    return f"{side}/{mode}"


def ab_order(round_no: int, names: list[str]) -> list[str]:
    """One round's order: modes rotated by one place per round; base and head of a mode
    adjacent, base first on even rounds and head first on odd ones. A key without its partner
    (a mode that failed on one side) keeps its mode's place."""
    modes = list(dict.fromkeys(name.split("/", 1)[1] for name in names))  # first-seen order
    shift = round_no % len(modes)
    sides = SIDES if round_no % 2 == 0 else SIDES[::-1]
    present = set(names)
    return [
        key(side, mode)
        for mode in modes[shift:] + modes[:shift]
        for side in sides
        if key(side, mode) in present
    ]


def compared_pairs(names: list[str]) -> list[tuple[str, str]]:
    """The series the comparison and each side's record judge against each other: base and head
    of every mode, and each side's modes against its eager."""
    pairs = [(key("base", k.split("/", 1)[1]), k) for k in names if k.startswith("head/")]
    pairs += [(key(k.split("/", 1)[0], "eager"), k) for k in names if not k.endswith("/eager")]
    return pairs


def time_together(
    collectors: dict[Side, RunCollector],
    inputs: dict[str, tuple[torch.Tensor, ...]],
    device: torch.device,
    options: RunOptions,
    progress: Progress,
) -> MachineLoad | None:
    """Time base and head in shared rounds (pipeline.time_stages, in `ab_order`); store each
    side's latency in its record; return the machine load over the timing (None: nothing was
    timed). A mode that raises is marked failed on its side and the rest are timed again
    without it."""
    stages: dict[str, TimingStage] = {
        side: c.stage for side, c in collectors.items() if c.stage is not None
    }

    def on_round(n: int, round_no: int, samples: int) -> None:
        progress(f"timing base and head, {n} series interleaved: round {round_no}, {samples}")

    load = time_stages(stages, inputs, device, options, on_round, compared_pairs, ab_order)
    for side in SIDES:
        if stages[side].machine_reference is not None:  # timed
            collectors[side].mark_ab(side)
    return load


@dataclass
class AbResult:
    base: Run
    head: Run
    comparison: Comparison


def run_ab(
    models: dict[Side, LoadedModel],
    device: torch.device,
    dtype: str,
    run_dirs: dict[Side, Path],
    options: RunOptions,
    thresholds: Thresholds,
    progress: Progress = lambda _msg: None,
    labels: dict[Side, str] | None = None,
    now: Callable[[], datetime] | None = None,
) -> AbResult:
    """Profile base and head (run folders `run_dirs[side]`), time them together, compare."""
    collectors: dict[Side, RunCollector] = {}
    for side in SIDES:

        def tagged(msg: str, side: str = side) -> None:
            progress(f"{side}: {msg}")

        setup = RunSetup(models[side], device, dtype, run_dirs[side], options, tagged, now)
        collectors[side] = RunCollector(setup)
        # one clear of the compilers' caches for both sides: head's builds keep base's code
        collectors[side].prepare(fresh_compilers=side == "base")
    with (
        collectors["base"].phases.phase("timing"),
        collectors["head"].phases.phase("timing"),
        torch.no_grad(),
    ):
        load = time_together(
            collectors, {s: models[s].example_inputs for s in SIDES}, device, options, progress
        )
    # each side finishes as an ordinary run: the typed record with today's findings
    again = ceilings_again(device, dtype)
    runs = {
        side: derive_findings(collectors[side].finish(), remeasure=again, progress=progress)
        for side in SIDES
    }
    labels = labels or {side: side for side in SIDES}
    comparison = compare_runs(
        runs["base"],
        runs["head"],
        thresholds,
        base_label=labels["base"],
        head_label=labels["head"],
        paired_loads=(load,),  # one timing process: this one
        allow_different_models=True,  # `ab` compares whatever two models it is given
    )
    return AbResult(runs["base"], runs["head"], comparison)
