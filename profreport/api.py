"""The library API: profile a model from Python and get the run record, reports and tables.

    import profreport
    result = profreport.profile(model, (x,), modes=("eager", "compile"), device="cpu")
    print(result.to_markdown())
    result.kernels("compile")          # pandas DataFrame
    result.save("reports/my-run")      # run.json, report.html, summary.md, CSVs, traces

    done = profreport.run_sweep(SweepSpec(models=("simple",), batch_sizes=(1, 8)))
    done.root                          # sweep.json, sweep.html, sweep.md, points/<id>/...

The CLI's `generate` is built on `pipeline.collect_run`, `save_evidence` (the evidence on disk
before any finding is derived: `pipeline.derive_findings`) and `RunResult.save`. A sweep's entry
point, `profreport.run_sweep`, is profreport.sweep.lifecycle's (a sweep runs each point's
`generate` through profreport.runner, which calls this module: exposing it here would close a
loop).
"""

from __future__ import annotations

import html
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import torch
from torch import nn

from profreport.env import DTYPES, resolve_device
from profreport.files import LIGHT_TRACES, TIMELINE_NAME, write_atomic, write_tensorboard_summary
from profreport.models import LoadedModel
from profreport.modes import default_modes, mode_analyses, mode_names
from profreport.pipeline import (
    Progress,
    RunOptions,
    RunSetup,
    ceilings_again,
    collect_run,
    derive_findings,
    quiet,
)
from profreport.record.model import ProfileSchedule, Run, TimingSettings
from profreport.record.section import JSONObject
from profreport.text import error_line

if TYPE_CHECKING:
    import pandas as pd

    from profreport.analysis.budget import BudgetCheck

# the run renderers that open with a kernel-budget check when the run was checked
_CHECKED = ("html", "md")


class ModelRunError(RuntimeError):
    """The model does not run in eager mode with the given inputs, device and dtype (one line)."""


def run_options(
    modes: Sequence[str] | None = None,
    *,
    active_steps: int = 3,
    min_time_s: float = 1.0,
    max_time_s: float = 60.0,
    bootstrap_resamples: int = 2000,
    measure_bytes: bool = False,
    remeasure_ceilings: bool = False,
    time_latency: bool = True,
) -> RunOptions:
    """Options of one run; raise ValueError on an unknown mode or a schedule too short.
    `time_latency=False`: no latency timing (each mode's record says so in `not_timed`), for
    a check that needs only the profiled counts and bytes (the kernel-budget fixture)."""
    known = mode_names()
    chosen = tuple(modes) if modes is not None else default_modes()
    unknown = [m for m in chosen if m not in known]
    if unknown or not chosen:
        raise ValueError(
            f"unknown mode(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(known)}"
        )
    if len(set(chosen)) != len(chosen):
        raise ValueError("a mode is listed twice")
    if active_steps < 3:
        raise ValueError("active_steps must be at least 3")
    if not (min_time_s > 0 and max_time_s > 0):
        raise ValueError("min_time_s and max_time_s must be positive")
    return RunOptions(
        modes=chosen,
        profile=ProfileSchedule(wait=1, warmup=1, active=active_steps),
        timing=TimingSettings(min_time_s=min_time_s, max_time_s=max_time_s),
        bootstrap_resamples=bootstrap_resamples,
        measure_bytes=measure_bytes,
        remeasure_ceilings=remeasure_ceilings,
        time_latency=time_latency,
    )


def check_eager(model: LoadedModel, device: torch.device, dtype_name: str) -> None:
    """Run one eager forward, so a model that cannot run at all fails before five modes build."""
    try:
        with torch.no_grad():
            model.module(*model.example_inputs)
    except (Exception, SystemExit) as exc:  # sys.exit() in forward is the model failing
        raise ModelRunError(
            f"{model.name} does not run in eager mode on {device.type} in {dtype_name}: "
            f"{error_line(exc)}"
        ) from exc


@dataclass
class RunResult:
    """One profiled run: the typed run record with today's findings (what the reports and
    tables read, and what run.json holds) and the folder holding its traces."""

    run: Run = field(repr=False)
    run_dir: Path
    owns_run_dir: bool = field(default=False, repr=False)  # a temp folder profile() made

    def __repr__(self) -> str:
        run = self.run
        modes = {n: m.status for n, m in run.modes.items()}
        return (
            f"RunResult(model={run.model.name!r}, "
            f"device={run.device.type!r}, modes={modes}, run_dir={str(self.run_dir)!r})"
        )

    @classmethod
    def of_record(cls, record: Run | Mapping[str, Any], run_dir: Path) -> RunResult:
        """The result of a run read back from its record (a run.json document or a typed Run):
        its findings derived again from the evidence, as `profreport render` does."""
        from profreport.analysis.derive import derived_run

        return cls(derived_run(record, mode_analyses()), run_dir)

    @property
    def record(self) -> JSONObject:
        """The run record as the run.json document (a new dict each time: the run is frozen)."""
        return self.run.to_json()

    @property
    def findings(self) -> Run:
        """Today's fusion maps, per-kernel bytes and verdicts derived from the record's evidence
        (each mode's `fusion`, `why_not_fused`, `roofline`, `verdict`, its kernel rows' bytes)."""
        from profreport.analysis.derive import derived_run

        return derived_run(self.run, mode_analyses())

    def to_html(self) -> str:
        from profreport.render import html as html_render

        return html_render.render(self.run)

    def to_markdown(self) -> str:
        from profreport.render import markdown

        return markdown.render(self.run)

    def kernels(self, mode: str) -> pd.DataFrame:
        """The kernel table of one mode (KeyError: not in the run; ValueError: it failed)."""
        from profreport.render.tables import kernel_frame

        return kernel_frame(self.run, mode)

    def kernel_table(self) -> pd.DataFrame:
        """All modes' kernel tables stacked, with a leading `mode` column."""
        from profreport.render.tables import kernel_table

        return kernel_table(self.run)

    def summary(self) -> pd.DataFrame:
        """One row per mode: kernels, bytes, latency, speedup, verdict (unformatted numbers)."""
        from profreport.render.tables import summary_frame

        return summary_frame(self.run)

    def _repr_html_(self) -> str:
        # A compact notebook view: the full report is a whole page with its own styles.
        run = self.run
        title = html.escape(f"profreport: {run.model.name} on {run.device.type}")
        verdicts = "".join(
            f"<li>{html.escape(n if m.verdict is None else m.verdict)}</li>"
            for n, m in run.modes.items()
        )
        table = self.summary().drop(columns=["verdict"]).to_html(index=False, na_rep="")
        return f"<h4>{title}</h4>{table}<ul>{verdicts}</ul>"

    def save(self, folder: str | Path | None = None, budget: BudgetCheck | None = None) -> Path:
        """Write run.json, report.html, summary.md, kernels_<mode>.csv, the TensorBoard summary and
        all_modes.timeline.json (every mode's profiled step in one trace) into `folder` (default: the run folder), moving or copying the traces there; return it.
        With `budget` (analysis/budget.py), report.html and summary.md open with that check.

        A folder that already holds another run's record is refused (FileExistsError).
        """
        from profreport.render import tensorboard_summary as tb
        from profreport.render.registry import RUN, renderers
        from profreport.render.tables import kernel_csv

        target = Path(folder) if folder is not None else self.run_dir
        if target.resolve() != self.run_dir.resolve():
            self._relocate_traces(target)
        timeline = self._write_timeline(target)  # linked from the report
        # the timeline is no evidence: the findings stand, only the link is added
        run = self.run = self.run.adding(timeline=timeline)
        outputs = {
            r.filename: r.render(
                run, **({"budget": budget} if budget and r.name in _CHECKED else {})
            )
            for r in renderers(RUN)
        }
        markdown = outputs["summary.md"]  # also the TensorBoard summary's text
        assert isinstance(markdown, str)
        for name in run.ok_modes:
            outputs[f"kernels_{name}.csv"] = kernel_csv(run, name)
        for name, content in outputs.items():
            write_atomic(target / name, content)
        write_tensorboard_summary(
            target / "tensorboard" / "summary",
            tb.scalars(run),
            tb.TEXT_TAG,
            markdown,
            tb.walltime(run),
        )
        return target

    def _write_timeline(self, folder: Path) -> str | None:
        """Write every mode's profiled step as one trace (render/timeline); returns its file
        name, or None when no mode left a trace."""
        from profreport.render import timeline
        from profreport.traceio.load import read_document

        traces = {}
        for mode, entry in self.run.ok_modes.items():
            rel = entry.trace
            if rel and (folder / rel).is_file():
                traces[mode] = read_document(folder / rel)
        if not traces:
            return None
        write_atomic(folder / TIMELINE_NAME, orjson.dumps(timeline.build(traces)))
        return TIMELINE_NAME

    def _relocate_traces(self, target: Path) -> None:
        if (target / "run.json").exists():
            raise FileExistsError(f"{target} already holds a run record: save into a new folder")
        source = self.run_dir / "tensorboard"
        mode_dirs = (
            [p for p in sorted(source.iterdir()) if p.is_dir() and p.name != "summary"]
            if source.is_dir()
            else []
        )
        moves = [(p, target / "tensorboard" / p.name) for p in mode_dirs]
        light = self.run_dir / LIGHT_TRACES  # the light passes' traces (time breakdown)
        if light.is_dir():
            moves.append((light, target / LIGHT_TRACES))
        clashes = [str(to) for _, to in moves if to.exists()]
        if clashes:  # checked before anything moves, so a refusal leaves both folders intact
            raise FileExistsError(f"{clashes[0]} exists: save into a new folder")
        (target / "tensorboard").mkdir(parents=True, exist_ok=True)
        for p, to in moves:
            if self.owns_run_dir:
                shutil.move(str(p), str(to))
            else:
                shutil.copytree(p, to)
        if self.owns_run_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        self.run_dir, self.owns_run_dir = target, False


def profile_loaded(
    model: LoadedModel,
    device: torch.device,
    dtype_name: str,
    run_dir: Path,
    options: RunOptions | None = None,
    progress: Progress | None = None,
    now: Callable[[], datetime] | None = None,
) -> RunResult:
    """Profile an already built model; traces land under `run_dir/tensorboard/<mode>/`."""
    options = options or run_options()
    evidence = collect_run(
        RunSetup(model, device, dtype_name, run_dir, options, progress or quiet, now)
    )
    again = ceilings_again(device, dtype_name)
    return RunResult(derive_findings(evidence, remeasure=again, progress=progress), run_dir)


def save_record(run: Run, folder: Path) -> Path:
    """Write `run` as `folder`/run.json (atomically); return its path."""
    from profreport.record import dumps

    path = folder / "run.json"
    write_atomic(path, dumps(run.to_json()))
    return path


def save_evidence(evidence: Run, folder: Path) -> Path:
    """Write a run's evidence before anything is derived from it: run.json and each mode's
    kernel table (kernels_<mode>.csv, its finding columns empty until the findings are saved).
    A finding that raises then costs one `profreport render`, never the run. Returns run.json's
    path."""
    from profreport.render.tables import kernel_csv

    for name in evidence.ok_modes:
        write_atomic(folder / f"kernels_{name}.csv", kernel_csv(evidence, name))
    return save_record(evidence, folder)


def _resolve_dtype(
    dtype: str | torch.dtype | None, module: nn.Module, inputs: tuple[torch.Tensor, ...]
) -> str:
    names = {v: k for k, v in DTYPES.items()}
    if dtype is None:
        floats = [t.dtype for t in inputs if t.is_floating_point()]
        floats += [p.dtype for p in module.parameters() if p.is_floating_point()]
        dtype = floats[0] if floats else torch.float32
    if isinstance(dtype, torch.dtype):
        if dtype not in names:
            raise ValueError(f"unsupported dtype {dtype}: use one of {', '.join(DTYPES)}")
        return names[dtype]
    if dtype not in DTYPES:
        raise ValueError(f"unsupported dtype {dtype!r}: use one of {', '.join(DTYPES)}")
    return dtype


def profile(
    model: nn.Module,
    example_inputs: torch.Tensor | Sequence[torch.Tensor],
    modes: Sequence[str] | None = None,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    *,
    name: str | None = None,
    run_dir: str | Path | None = None,
    progress: Progress | None = None,
    **options: Any,
) -> RunResult:
    """Profile `model(*example_inputs)` in each mode (default: all five) and return the result.

    device: None = where the inputs are, or "cpu", "cuda", "cuda:1", "auto". dtype: None = the
    inputs' floating dtype, or float32 / float16 / bfloat16. The module is moved to the device and
    dtype in place (like `.to()`) and profiled in eval mode (its training flag is restored after).
    Traces go to `run_dir/tensorboard/<mode>/` (a new empty folder; default: a temporary one that
    `save()` moves from). options: active_steps, min_time_s, max_time_s, bootstrap_resamples,
    time_latency (False: profile only, no latency timing).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    inputs = (
        (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    )
    if not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise TypeError("example_inputs must be a tensor or a tuple of tensors")
    opts = run_options(modes, **options)
    dev = inputs[0].device if device is None else resolve_device(str(device))
    dtype_name = _resolve_dtype(dtype, model, inputs)
    dt = DTYPES[dtype_name]
    if run_dir is not None and Path(run_dir).exists() and any(Path(run_dir).iterdir()):
        raise FileExistsError(f"run_dir {run_dir} is not empty: every run needs a new folder")

    was_training = model.training
    module = model.to(device=dev, dtype=dt).eval()
    cast = tuple(t.to(device=dev, dtype=dt) if t.is_floating_point() else t.to(dev) for t in inputs)
    doc = (type(model).__doc__ or type(model).__name__).strip().splitlines()[0]
    nhwc = any(
        t.dim() == 4
        and not t.is_contiguous()
        and t.is_contiguous(memory_format=torch.channels_last)
        for t in cast
    )
    layout = "channels_last" if nhwc else "contiguous"
    loaded = LoadedModel(name or type(model).__name__, doc, module, cast, None, layout)
    owned = run_dir is None
    folder = Path(tempfile.mkdtemp(prefix="profreport-")) if run_dir is None else Path(run_dir)
    try:
        check_eager(loaded, dev, dtype_name)  # before any folder is made for the run
        folder.mkdir(parents=True, exist_ok=True)
        result = profile_loaded(loaded, dev, dtype_name, folder, opts, progress)
    except BaseException:
        if owned:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        model.train(was_training)
    result.owns_run_dir = owned
    return result
