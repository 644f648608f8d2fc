"""`profreport ab`: base and head profiled in one process, their latency blocks interleaved.

Each side is profiled as `generate` profiles a run, into `base/` and `head/` inside the ab
folder, and both are timed together by the one driver (runner.profile_runs), in each timing
worker (capture/workers.py: base and head paired within a worker, the gate across the workers)
in the rounds `ab_order` makes. Block *i* of base and of head ran moments apart, so the gate
compares them round by round (analysis/paired.py); compare_runs reads the two records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from profreport.analysis.compare import Comparison, Thresholds, compare_runs
from profreport.capture.timing import series_key, stage_and_mode
from profreport.env import DTYPES, device_for
from profreport.exits import UsageError
from profreport.files import RunFolder, run_folder_name
from profreport.models import LoadedModel, ModelError, load_model
from profreport.pipeline import RunSetup, TimingPlan
from profreport.record.model import Run
from profreport.runner import Terminal, profile_runs, run_options, staged_run, workers_ahead
from profreport.text import Progress

SIDES = ("base", "head")
COMPARE_NAMES = {"md": "compare.md", "json": "compare.json", "html": "compare.html"}


def ab_order(round_no: int, names: list[str]) -> list[str]:
    """One round's order: modes rotated by one place per round; base and head of a mode
    adjacent, base first on even rounds and head first on odd ones. A key without its partner
    (a mode that failed on one side) keeps its mode's place."""
    modes = list(dict.fromkeys(stage_and_mode(name)[1] for name in names))  # first-seen order
    shift = round_no % len(modes)
    sides = SIDES if round_no % 2 == 0 else SIDES[::-1]
    present = set(names)
    return [
        series_key(side, mode)
        for mode in modes[shift:] + modes[:shift]
        for side in sides
        if series_key(side, mode) in present
    ]


def compared_pairs(names: list[str]) -> list[tuple[str, str]]:
    """The series the comparison and each side's record judge against each other: base and head
    of every mode, and each side's modes against its eager."""
    series = [(k, *stage_and_mode(k)) for k in names]
    pairs = [(series_key("base", mode), k) for k, side, mode in series if side == "head"]
    pairs += [(series_key(side, "eager"), k) for k, side, mode in series if mode != "eager"]
    return pairs


# base and head in shared rounds, in `ab_order`; each side's record names the order
AB_TIMING = TimingPlan(
    compared_pairs, ab_order, "series of base and head", "ab_order (profreport/ab.py)"
)


@dataclass(frozen=True)
class AbRequest:
    """What one `profreport ab` is asked for: the two models (as `generate --model` takes
    them), how they run, the folder the ab folder goes under, and the comparison's gates and
    format (md, json or html)."""

    base: str
    head: str
    modes: tuple[str, ...] = ("eager", "compile")
    device: str = "auto"
    dtype: str = "float32"
    out: Path = Path("reports")
    min_time_s: float = 1.0
    max_time_s: float = 120.0
    threads: int | None = None
    workers: int | None = None  # timing processes (None: the default, runner.run_options)
    thresholds: Thresholds = field(default_factory=Thresholds)
    format: str = "md"
    workload: str = "prefill"  # decode: both sides' greedy decode step (profreport/decode.py)


@dataclass(frozen=True)
class AbResult:
    """A published ab folder: each side's run (base/, head/), their comparison and its file."""

    folder: Path
    base: Run
    head: Run
    comparison: Comparison
    comparison_file: Path


def run_ab(request: AbRequest, terminal: Terminal, now: datetime | None = None) -> AbResult:
    """Profile base and head into one ab folder under `request.out`, timed together; compare
    and publish. Bad input raises UsageError before anything is written; a bug after both
    sides' evidence was saved publishes the folder and says where (as `generate` does)."""
    from profreport.render.registry import COMPARISON, get

    try:
        options = run_options(
            request.modes,
            min_time_s=request.min_time_s,
            max_time_s=request.max_time_s,
            workers=request.workers,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    # the timing workers import torch while this process does (capture/workers.TimingWorkers)
    with workers_ahead(request.workers, request.device, request.modes, request.workload) as ahead:
        device = device_for(request.device, request.dtype, request.threads)

        def build() -> dict[str, LoadedModel]:
            models = {}
            for side, spec in zip(SIDES, (request.base, request.head), strict=True):
                try:
                    models[side] = load_model(
                        spec, device, DTYPES[request.dtype], workload=request.workload
                    )
                except ModelError as exc:
                    raise UsageError(f"{side}: {exc}") from None
            return models

        models, build_log = terminal.built(build)
        stamp = now or datetime.now(timezone.utc)
        names = dict.fromkeys(models[side].name for side in SIDES)  # one name when they agree
        name = run_folder_name(f"{'-vs-'.join(names)}-ab", device.type, stamp)
        folder = RunFolder.staged(request.out, name)
        with staged_run(folder, terminal, build_log) as progress:
            setups = {
                side: RunSetup(
                    models[side],
                    device,
                    request.dtype,
                    folder.side(side),
                    options,
                    _tagged(progress, side),
                    lambda: stamp,
                    workers=ahead,
                )
                for side in SIDES
            }
            done = profile_runs(setups, progress, plan=AB_TIMING)
            base, head = done.runs["base"], done.runs["head"]
            comparison = compare_runs(
                base,
                head,
                request.thresholds,
                base_label=request.base,
                head_label=request.head,
                paired_loads=done.loads,  # each timing process's
                allow_different_models=True,  # `ab` compares whatever two models it is given
            )
            content = get(COMPARISON, request.format).text(comparison)
            written = folder.write(COMPARE_NAMES[request.format], content)
        return AbResult(folder.path, base, head, comparison, folder.path / written.name)


def _tagged(progress: Progress, side: str) -> Progress:
    return lambda msg: progress(f"{side}: {msg}")
