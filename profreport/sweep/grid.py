"""A sweep's specification and its points: the grid the flags or a sweep.toml describe.

An axis applies to the models that take it, the way `generate` accepts the flag: batch sizes to
built-in and hf: zoo models, sequence lengths to hf: language models. A model file or module
(`file.py:function`) runs at its own size, so its points carry no batch size or sequence length.
An axis that no model of the sweep takes is bad input.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from profreport.files import read_text, slug
from profreport.record.section import Minimum, Section, omitted, required
from profreport.runner import GenerateRequest

DType = Literal["float32", "float16", "bfloat16"]
DEFAULT_MODES = ("eager", "compile")
Count = Annotated[int, Minimum(1)]  # a batch size, a sequence length, threads
Seconds = Annotated[float, Minimum(0, exclusive=True)]


class GridError(ValueError):
    """The sweep's specification is bad input; the message is one line for the user."""


def takes_batch_size(model: str) -> bool:
    from profreport.models import BUILTIN_MODELS
    from profreport.zoo import is_zoo_spec

    return model in BUILTIN_MODELS or is_zoo_spec(model)


def takes_seq_len(model: str) -> bool:
    """hf: language models (a vision model's input is an image); an unknown hf: name too, so
    that its points fail with generate's own message."""
    from profreport.zoo import ZooError, is_zoo_spec, parse_zoo_spec

    if not is_zoo_spec(model):
        return False
    try:
        return parse_zoo_spec(model)[0].default.seq_len is not None
    except ZooError:
        return True


PointStatus = Literal["ok", "failed", "pending", "interrupted"]


@dataclass(frozen=True)
class Point(Section):
    """One `generate` run of the sweep: where it sits on the grid (its model and axis values,
    and the folder name they make, `id`) and how it ended (pending until it runs: its status,
    the error and exit code of a point that failed, its run folder and log relative to
    sweep.json, how long it took and what ran it). One of sweep.json's `points`."""

    id: str = required("")
    model: str = required("")
    batch_size: int | None = None
    seq_len: int | None = None
    dtype: str = required("")
    status: PointStatus = required("pending")
    error: str | None = None
    exit_code: int | None = None
    run: str | None = None
    log: str | None = None
    duration_s: float | None = None
    worker: str | None = None

    @classmethod
    def at(cls, model: str, batch_size: int | None, seq_len: int | None, dtype: str) -> Point:
        """The pending point of these axis values, its id a folder name unique in a sweep."""
        batch = f"-b{batch_size}" if batch_size is not None else ""
        seq = f"-s{seq_len}" if seq_len is not None else ""
        name = f"{slug(model, 80) or 'model'}{batch}{seq}-{dtype}"
        return cls(id=name, model=model, batch_size=batch_size, seq_len=seq_len, dtype=dtype)

    @property
    def key(self) -> tuple[str, int | None, int | None, str]:
        """What matches a point of one sweep with the same point of another."""
        return (self.model, self.batch_size, self.seq_len, self.dtype)

    @property
    def label(self) -> str:
        batch = [] if self.batch_size is None else [f"batch {self.batch_size}"]
        seq = [] if self.seq_len is None else [f"seq {self.seq_len}"]
        return ", ".join([self.model, *batch, *seq, self.dtype])

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class SweepSpec(Section):
    """What to sweep, and the `generate` settings every point shares: one class for the flags,
    sweep.toml and the `grid` of sweep.json (whose keys are its fields). Read from plain values
    by `checked_spec`, which names a bad field."""

    models: tuple[str, ...] = ()  # as generate --model takes them
    batch_sizes: tuple[Count, ...] = ()  # built-in and hf: zoo models
    seq_lens: tuple[Count, ...] = ()  # hf: language models
    dtypes: tuple[DType, ...] = ("float32",)
    modes: tuple[str, ...] = DEFAULT_MODES
    device: str = "auto"  # auto | cpu | cuda[:N]
    min_time_s: Seconds | None = None  # generate --min-time (None: its default)
    max_time_s: Seconds | None = None
    threads: Count | None = None
    # Each point compiles into an empty Inductor cache (a cold compile, as the PyTorch
    # dashboard's cold-start compile time); False: the cache on disk is shared (warm).
    cold_compile: bool = True
    # decode: each point one greedy decode step, its seq_len the context (absent: prefill)
    workload: Literal["prefill", "decode"] | None = omitted()

    def points(self) -> list[Point]:
        out: list[Point] = []
        for model in self.models:
            batches = self.batch_sizes if takes_batch_size(model) and self.batch_sizes else [None]
            seqs = self.seq_lens if takes_seq_len(model) and self.seq_lens else [None]
            for batch, seq, dtype in itertools.product(batches, seqs, self.dtypes):
                out.append(Point.at(model, batch, seq, dtype))
        return out

    def request(self, point: Point, out: Path) -> GenerateRequest:
        """The `generate` run of `point`, its run folder to be made under `out`."""
        return GenerateRequest(
            model=point.model,
            device=self.device,
            dtype=point.dtype,
            modes=self.modes,
            batch_size=point.batch_size,
            seq_len=point.seq_len,
            out=out,
            min_time_s=GenerateRequest.min_time_s if self.min_time_s is None else self.min_time_s,
            max_time_s=GenerateRequest.max_time_s if self.max_time_s is None else self.max_time_s,
            threads=self.threads,
            workload=self.workload or "prefill",
        )


def _unique(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(values))


def checked_spec(data: Mapping[str, Any], source: str) -> SweepSpec:
    """A SweepSpec from plain values (flags, TOML or sweep.json), or GridError naming the field."""
    from profreport.modes import mode_names

    values = dict(data)
    for key in ("models", "dtypes", "modes"):  # one name where a list of one is meant
        if isinstance(values.get(key), str):
            values[key] = [values[key]]
    spec = SweepSpec.parse(values, source, GridError, closed=True)
    if not spec.models:
        raise GridError(f"{source}: no model given (--model or models = [...])")
    for key in ("dtypes", "modes"):
        if not getattr(spec, key):
            raise GridError(f"{source}: {key}: expected a non-empty list")
    unknown = [m for m in spec.modes if m not in mode_names()]
    if unknown:
        raise GridError(
            f"{source}: unknown mode {unknown[0]!r}; choose from {', '.join(mode_names())}"
        )
    spec = dataclasses.replace(
        spec,
        models=_unique(tuple(m.strip() for m in spec.models)),
        batch_sizes=_unique(spec.batch_sizes),
        seq_lens=_unique(spec.seq_lens),
        dtypes=_unique(spec.dtypes),
        modes=_unique(tuple(m.strip() for m in spec.modes)),
        device=spec.device or "auto",
        json_keys=None,  # a grid writes all its settings, the defaults too
    )
    if spec.batch_sizes and not any(takes_batch_size(m) for m in spec.models):
        raise GridError("batch sizes apply to built-in and hf: zoo models only")
    if spec.seq_lens and not any(takes_seq_len(m) for m in spec.models):
        raise GridError("sequence lengths apply to hf: language models only")
    return spec


# sweep.toml keys that are not part of the grid: where and how to run it.
RUN_KEYS = ("executor", "ray_address", "out")


def read_config(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """sweep.toml -> (grid settings for `checked_spec`, run settings of RUN_KEYS)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise GridError("reading sweep.toml needs Python 3.11 or `pip install tomli`") from None
    try:
        data = tomllib.loads(read_text(path, GridError))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise GridError(f"{path} is not valid TOML ({exc})") from None
    renamed = {"min_time": "min_time_s", "max_time": "max_time_s", "model": "models"}
    grid = {renamed.get(k, k): v for k, v in data.items() if k not in RUN_KEYS}
    run = {k: data[k] for k in RUN_KEYS if k in data}
    for key, value in run.items():
        if not isinstance(value, str):
            raise GridError(f"{path}: {key}: expected a string")
    return grid, run
