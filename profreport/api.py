"""The library API: profile a model from Python and get the run record, reports and tables.

    import profreport
    result = profreport.profile(model, (x,), modes=("eager", "compile"), device="cpu")
    print(result.to_markdown())
    result.kernels("compile")          # pandas DataFrame
    result.save("reports/my-run")      # run.json, report.html, summary.md, CSVs, traces

    done = profreport.run_sweep(SweepSpec(models=("simple",), batch_sizes=(1, 8)))
    done.root                          # sweep.json, sweep.html, sweep.md, points/<id>/...

`profile` runs on the same driver as `profreport generate` and `ab` (runner.profile_runs); a
sweep's entry point, `profreport.run_sweep`, is profreport.sweep.lifecycle's.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from profreport.env import DTYPES, resolve_device
from profreport.files import RunFolder
from profreport.models import LoadedModel, for_decode
from profreport.modes import mode_analyses
from profreport.pipeline import RunSetup, quiet
from profreport.record.model import Run
from profreport.record.section import JSONObject
from profreport.runner import profile_runs, run_options, save_reports
from profreport.text import Progress, error_line

if TYPE_CHECKING:
    import pandas as pd

    from profreport.analysis.budget import BudgetCheck


class ModelRunError(RuntimeError):
    """The model does not run in eager mode with the given inputs, device and dtype (one line)."""


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
        """Write run.json, report.html, summary.md, kernels_<mode>.csv, the TensorBoard summary
        and all_modes.timeline.json (every mode's profiled step in one trace) into `folder`
        (default: the run folder), moving or copying the traces there; return it. With `budget`
        (analysis/budget.py), report.html and summary.md open with that check.

        A folder that already holds another run's record is refused (FileExistsError).
        """
        target = Path(folder) if folder is not None else self.run_dir
        if target.resolve() != self.run_dir.resolve():
            RunFolder(self.run_dir).move_traces(target, copy=not self.owns_run_dir)
            if self.owns_run_dir:
                RunFolder(self.run_dir).remove()
            self.run_dir, self.owns_run_dir = target, False
        self.run = save_reports(self.run, RunFolder(target), budget)
        return target


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
    workload: str = "prefill",
    **options: Any,
) -> RunResult:
    """Profile `model(*example_inputs)` in each mode (default: all five) and return the result.

    device: None = where the inputs are, or "cpu", "cuda", "cuda:1", "auto". dtype: None = the
    inputs' floating dtype, or float32 / float16 / bfloat16. The module is moved to the device and
    dtype in place (like `.to()`) and profiled in eval mode (its training flag is restored after).
    Traces go to `run_dir/tensorboard/<mode>/` (a new empty folder; default: a temporary one that
    `save()` moves from). options: active_steps, min_time_s, max_time_s, bootstrap_resamples,
    time_latency (False: profile only, no latency timing), workers (accepted; a model passed as
    an object has no spec a worker process could build again, so it is timed in this process).
    workload "decode": `model` is a transformers causal LM and `example_inputs` its prompt's
    token ids; one greedy decode step with its static KV cache is profiled (profreport/decode.py;
    ModelError: it cannot be).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    inputs = (
        (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    )
    if not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise TypeError("example_inputs must be a tensor or a tuple of tensors")
    dev = inputs[0].device if device is None else resolve_device(str(device))
    opts = run_options(modes, workload=workload, device_type=dev.type, **options)
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
    if workload == "decode":  # its step is built, the model run first, by the capture
        loaded = for_decode(loaded)
    owned = run_dir is None
    folder = RunFolder.temporary() if run_dir is None else RunFolder(Path(run_dir))
    try:
        if loaded.workload == "prefill":
            check_eager(loaded, dev, dtype_name)  # before any folder is made for the run
        setup = RunSetup(loaded, dev, dtype_name, folder, opts, progress or quiet)
        run = profile_runs({"": setup}, setup.progress, reports=False).runs[""]
    except BaseException:
        if owned:
            folder.remove()
        raise
    finally:
        model.train(was_training)
    return RunResult(run, folder.path, owns_run_dir=owned)
