"""`profreport ab`: base and head in one process, their latency blocks interleaved.

Both models are built, profiled and warmed up as `generate` does (pipeline.RunCollector), then
timed together: each round runs every mode of both sides, modes in rotating order and, within a
mode, base and head adjacent in alternating order (base first on even rounds). Block *i* of base
and of head ran moments apart, so the gate compares them round by round (analysis/paired.py).
Each side then finishes as an ordinary run; compare_runs reads the two records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Literal

import torch

from profreport import interrupts
from profreport.analysis.compare import Comparison, Thresholds, compare_runs
from profreport.analysis.paired import wants_more_rounds
from profreport.capture.noise import watch
from profreport.capture.timing import TimingFailed, TimingResult, measure_latency
from profreport.models import LoadedModel
from profreport.pipeline import (
    Progress,
    ReferenceRun,
    RunCollector,
    RunOptions,
    RunSetup,
    TimingStage,
    ceilings_again,
    derive_findings,
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
    modes: list[str] = []
    for name in names:
        mode = name.split("/", 1)[1]
        if mode not in modes:
            modes.append(mode)
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
    """Time base and head in shared rounds; store each side's latency in its record; return the
    machine load over the timing (None: nothing was timed). A mode that raises is marked failed
    on its side and the rest are timed again without it."""
    start = interrupts.mark()
    stages: dict[str, TimingStage] = {
        side: c.stage for side, c in collectors.items() if c.stage is not None
    }
    sync = collectors["base"].sync
    # one machine reference for both sides: they were timed in the same rounds
    reference = ReferenceRun(device, options.bootstrap_resamples)
    while True:
        lost = next((s.context_lost for s in stages.values() if s.context_lost), None)
        if lost is not None:  # one process, one CUDA context: neither side can be timed
            for stage in stages.values():
                stage.not_timed(lost)
            return None
        fns: dict[str, Callable[[], Any]] = {
            key(side, mode): partial(p.fn, *inputs[side])
            for side in SIDES
            for mode, p in stages[side].prepared_modes.items()
        }
        if not fns:
            return None

        def on_round(round_no: int, results: dict[str, TimingResult], n: int = len(fns)) -> None:
            if round_no % 10 == 1:
                done = min(len(r.samples_ms) for r in results.values())
                progress(f"timing base and head, {n} series interleaved: round {round_no}, {done}")

        try:
            with watch() as watched, reference.timed() as timed:
                timings = measure_latency(
                    fns,
                    sync,
                    options.timing,
                    on_round=on_round,
                    order=ab_order,
                    wants_more=partial(wants_more_rounds, pairs=compared_pairs(list(fns))),
                    reference=timed,
                )
        except TimingFailed as failure:
            interrupts.reraise_if_interrupted(failure.error, start)
            if not reference.failed(failure):
                side, mode = failure.mode.split("/", 1)
                stages[side].mark_failed(mode, failure.error, device)
            continue
        machine = reference.record()
        for side in SIDES:
            own = {k.split("/", 1)[1]: r for k, r in timings.items() if k.startswith(side + "/")}
            stages[side].store_latency(own, watched.load)
            stages[side].machine_reference = machine
            collectors[side].mark_ab(side)
        return watched.load


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

        setup = RunSetup(models[side], device, dtype, run_dirs[side], options, tagged)
        if now is not None:
            setup = dataclasses.replace(setup, now=now)
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
        paired_load=load,
        allow_different_models=True,  # `ab` compares whatever two models it is given
    )
    return AbResult(runs["base"], runs["head"], comparison)
