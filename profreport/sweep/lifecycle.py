"""A sweep's lifecycle as a library: a new sweep folder or one resumed, each point run by an
executor and recorded as it ends, sweep.json saved after every point, and the pages (sweep.html,
sweep.md) with the summary at the end or on an interrupt. `profreport sweep` (cli/sweep.py) is
built on it and only parses arguments, shows progress and prints.

    from profreport.sweep import SweepSpec, run_sweep
    done = run_sweep(SweepSpec(models=("simple",), batch_sizes=(1, 8)), out=Path("reports"))
    done.root, done.sweep.points
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from profreport.exits import UsageError
from profreport.files import RunFolder, slug
from profreport.sweep.grid import GridError, Point, SweepSpec, checked_spec
from profreport.sweep.model import DONE, FILENAME, Sweep, SweepRecordError, load_sweep, mode_rows

EXECUTORS = ("local", "ray")
INTERRUPTED = "the sweep was interrupted"
OnPoint = Callable[[Point], None]  # a point as it starts, or as it ended


def _nothing(*_args: object) -> None:
    return None


def new_folder(parent: Path, spec: SweepSpec, now: datetime) -> Path:
    """A fresh sweep folder under `parent`, named after the first model and the time (`-2`,
    `-3`, ... when that name is taken, as a run folder's is)."""
    more = f"-and-{len(spec.models) - 1}-more" if len(spec.models) > 1 else ""
    name = f"sweep-{slug(spec.models[0], 60) or 'model'}{more}-{now.strftime('%Y%m%dT%H%M%SZ')}"
    try:
        return RunFolder.staged(parent, name).publish()
    except OSError as exc:
        raise UsageError(f"cannot write to {parent}: {exc.strerror or exc}") from None


def save(sweep: Sweep, root: Path, final: bool) -> Sweep:
    """sweep.json after every point; sweep.html and sweep.md at the end (or on an interrupt),
    with the summary in sweep.json. Returns the sweep as written."""
    from profreport.files import write_atomic
    from profreport.render.registry import SWEEP, get, renderers
    from profreport.sweep import summary

    if final:
        sweep = dataclasses.replace(sweep, summary=summary.summarize(sweep))
    for renderer in renderers(SWEEP) if final else (get(SWEEP, "json"),):
        write_atomic(root / renderer.filename, renderer.render(sweep))
    return sweep


@dataclass
class SweepRun:
    """One sweep on disk: its folder (`root`), grid and record, saved as it changes."""

    root: Path
    spec: SweepSpec
    sweep: Sweep
    executor: str = "local"
    done_before: int = 0  # points a resumed sweep had done already

    @classmethod
    def new(
        cls,
        spec: SweepSpec,
        executor: str = "local",
        out: Path = Path("reports"),
        now: datetime | None = None,
    ) -> SweepRun:
        """A new sweep folder under `out`, every point pending, sweep.json written."""
        from profreport.record.model import Tool
        from profreport.version import __version__

        _check_executor(executor)
        when = now or datetime.now(timezone.utc)
        root = new_folder(out, spec, when)
        sweep = Sweep(
            tool=Tool(version=__version__),
            created_utc=when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            executor=executor,
            grid=spec,
            points=tuple(spec.points()),
        )
        return cls(root, spec, save(sweep, root, final=False), executor)

    @classmethod
    def resume(cls, folder: Path, executor: str | None = None) -> SweepRun:
        """The sweep in `folder` (or its sweep.json), to run its points not done yet, with
        `executor` (None: the one it ran with)."""
        root = folder.parent if folder.is_file() else folder
        try:
            sweep = load_sweep(root / FILENAME)
            spec = checked_spec(sweep.grid.to_json(), "sweep.json grid")
        except (SweepRecordError, GridError) as exc:
            raise UsageError(str(exc)) from None
        chosen = executor or sweep.executor or "local"
        _check_executor(chosen)
        # the executor that ran the latest points (see each point's worker)
        sweep = save(dataclasses.replace(sweep, executor=chosen), root, final=False)
        run = cls(root, spec, sweep, chosen)
        run.done_before = len(spec.points()) - len(run.todo())
        return run

    def todo(self) -> list[Point]:
        """The points not done yet (pending, or stopped by an interrupt)."""
        return [p for p in self.spec.points() if self.sweep.status(p.id) not in DONE]

    def record(self, point: Point) -> None:
        """A point as it ended, and one row per mode from its run record, saved to sweep.json."""
        from profreport.record import RecordError, load_run

        run = None
        if point.run is not None:
            try:
                run = load_run(self.root / point.run)
            except RecordError as exc:
                point = dataclasses.replace(
                    point, status="failed", error=f"unreadable run record: {exc}"
                )
        elif point.status == "ok":  # exit 0, yet no run folder named: never count it as a pass
            point = dataclasses.replace(
                point, status="failed", error="generate wrote no run record"
            )
        self.sweep = self.sweep.with_point(point, mode_rows(point, self.spec.modes, run))
        save(self.sweep, self.root, final=False)

    def run(
        self, address: str | None = None, on_start: OnPoint = _nothing, on_done: OnPoint = _nothing
    ) -> Sweep:
        """Run the points not done yet, recording each as it ends (before `on_done` hears of
        it), then `finish`. On Ctrl-C the points still running are recorded as interrupted and
        the pages written before the interrupt goes on up (`resume` runs the rest)."""
        running: set[str] = set()

        def started(point: Point) -> None:
            running.add(point.id)
            on_start(point)

        def done(point: Point) -> None:
            running.discard(point.id)
            # recorded before it is written: a Ctrl-C while writing still keeps the outcome
            self.record(point)
            on_done(point)

        try:  # with the executor named, reporting each point as it starts and ends
            if self.executor == "ray":
                from profreport.sweep import ray_executor

                try:
                    ray_executor.run_ray(self.spec, self.todo(), self.root, started, done, address)
                except ray_executor.RayUnavailable as exc:
                    raise UsageError(str(exc)) from None
            else:
                from profreport.sweep.local import run_local

                run_local(self.spec, self.todo(), self.root, started, done)
        except KeyboardInterrupt:
            for p in self.sweep.points:
                if p.id in running:  # stopped before it finished: --resume runs it again
                    stopped = dataclasses.replace(p, status="interrupted", error=INTERRUPTED)
                    self.sweep = self.sweep.with_point(stopped)
            self.finish()
            raise
        return self.finish()

    def finish(self) -> Sweep:
        """sweep.json with its summary, sweep.html and sweep.md."""
        self.sweep = save(self.sweep, self.root, final=True)
        return self.sweep

    @property
    def finished(self) -> int:
        return sum(1 for p in self.sweep.points if p.status in DONE)


def _check_executor(executor: str) -> None:
    if executor not in EXECUTORS:
        raise UsageError(f"unknown executor {executor!r}: choose local or ray")
    if executor == "ray":  # Ray is an optional extra: say so before anything is written
        from profreport.sweep.ray_executor import INSTALL_HINT

        try:
            import ray  # noqa: F401
        except ImportError:
            raise UsageError(INSTALL_HINT) from None


def run_sweep(
    spec: SweepSpec | None = None,
    *,
    resume: Path | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    out: Path = Path("reports"),
    on_start: OnPoint = _nothing,
    on_done: OnPoint = _nothing,
) -> SweepRun:
    """Run a sweep of `spec` in a new folder under `out`, or finish the one in `resume`; every
    point is one `generate` run in a process of its own (`executor` local, or ray). Returns the
    sweep as finished (its folder, grid and record). UsageError (one line) for bad input."""
    if spec is not None and resume is None:
        run = SweepRun.new(spec, executor or "local", out)
    elif resume is not None and spec is None:
        run = SweepRun.resume(resume, executor)
    else:
        raise ValueError("run_sweep takes a spec (a new sweep) or resume (a sweep folder)")
    run.run(ray_address, on_start, on_done)
    return run
