"""A sweep's specification and its points: the grid the flags or a sweep.toml describe.

An axis applies to the models that take it, the way `generate` accepts the flag: batch sizes to
built-in and hf: zoo models, sequence lengths to hf: language models. A model file or module
(`file.py:function`) runs at its own size, so its points carry no batch size or sequence length.
An axis that no model of the sweep takes is bad input.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profreport.files import read_text
from profreport.record.section import Section
from profreport.runner import GenerateRequest

DTYPE_NAMES = ("float32", "float16", "bfloat16")
DEFAULT_MODES = ("eager", "compile")


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


@dataclass(frozen=True)
class Point:
    """One `generate` run of the sweep."""

    model: str
    batch_size: int | None
    seq_len: int | None
    dtype: str

    @property
    def key(self) -> tuple[str, int | None, int | None, str]:
        """What matches a point of one sweep with the same point of another."""
        return (self.model, self.batch_size, self.seq_len, self.dtype)

    @property
    def label(self) -> str:
        parts = [self.model]
        if self.batch_size is not None:
            parts.append(f"batch {self.batch_size}")
        if self.seq_len is not None:
            parts.append(f"seq {self.seq_len}")
        return ", ".join([*parts, self.dtype])

    @property
    def id(self) -> str:
        """A folder name: the model's slug and the axis values (unique within a sweep)."""
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", self.model).strip("-.")[:80] or "model"
        batch = f"-b{self.batch_size}" if self.batch_size is not None else ""
        seq = f"-s{self.seq_len}" if self.seq_len is not None else ""
        return f"{slug}{batch}{seq}-{self.dtype}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "model": self.model,
            "batch_size": self.batch_size,
            "seq_len": self.seq_len,
            "dtype": self.dtype,
        }


@dataclass(frozen=True)
class SweepSpec(Section):
    """What to sweep, and the `generate` settings every point shares: one class for the flags,
    sweep.toml and the `grid` of sweep.json (whose keys are its fields). Read from plain values
    by `checked_spec`, which names a bad field."""

    models: tuple[str, ...] = ()
    batch_sizes: tuple[int, ...] = ()
    seq_lens: tuple[int, ...] = ()
    dtypes: tuple[str, ...] = ("float32",)
    modes: tuple[str, ...] = DEFAULT_MODES
    device: str = "auto"
    min_time_s: float | None = None
    max_time_s: float | None = None
    threads: int | None = None
    # Each point compiles into an empty Inductor cache (a cold compile, as the PyTorch
    # dashboard's cold-start compile time); False: the cache on disk is shared (warm).
    cold_compile: bool = True
    # Kept so that sweep.json's grid keeps its shape; always empty (a point is a typed
    # GenerateRequest, not command-line flags).
    generate_flags: tuple[str, ...] = field(default=(), compare=False)

    def points(self) -> list[Point]:
        out: list[Point] = []
        for model in self.models:
            batches = self.batch_sizes if takes_batch_size(model) and self.batch_sizes else [None]
            seqs = self.seq_lens if takes_seq_len(model) and self.seq_lens else [None]
            for batch, seq, dtype in itertools.product(batches, seqs, self.dtypes):
                out.append(Point(model, batch, seq, dtype))
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
        )


def _text_list(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise GridError(f"{what}: expected a non-empty list of strings")
    return tuple(v.strip() for v in value)


def _int_list(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise GridError(f"{what}: expected a list of integers")
    bad = [v for v in value if v < 1]
    if bad:
        raise GridError(f"{what}: must be at least 1: {bad[0]}")
    return tuple(dict.fromkeys(value))


def _number(value: Any, what: str, kind: type) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise GridError(f"{what}: expected a positive number")
    if kind is int and not isinstance(value, int):
        raise GridError(f"{what}: expected a positive integer")
    return kind(value)


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise GridError(f"{what}: expected true or false")
    return value


_SPEC_KEYS = {
    "models",
    "batch_sizes",
    "seq_lens",
    "dtypes",
    "modes",
    "device",
    "min_time_s",
    "max_time_s",
    "threads",
    "cold_compile",
    "generate_flags",
}


def checked_spec(data: Mapping[str, Any], source: str) -> SweepSpec:
    """A SweepSpec from plain values (flags, TOML or sweep.json), or GridError naming the field."""
    from profreport.modes import mode_names

    unknown = sorted(set(data) - _SPEC_KEYS)
    if unknown:
        raise GridError(f"{source}: unknown setting {unknown[0]!r}")
    if "models" not in data:
        raise GridError(f"{source}: no model given (--model or models = [...])")
    models = tuple(dict.fromkeys(_text_list(data["models"], f"{source}: models")))
    dtypes = _text_list(data.get("dtypes", ["float32"]), f"{source}: dtypes")
    for dtype in dtypes:
        if dtype not in DTYPE_NAMES:
            raise GridError(
                f"{source}: unknown dtype {dtype!r}; choose from float32, float16, bfloat16"
            )
    modes = _text_list(data.get("modes", list(DEFAULT_MODES)), f"{source}: modes")
    for mode in modes:
        if mode not in mode_names():
            raise GridError(
                f"{source}: unknown mode {mode!r}; choose from {', '.join(mode_names())}"
            )
    spec = SweepSpec(
        models=models,
        batch_sizes=_int_list(data.get("batch_sizes", []), f"{source}: batch_sizes"),
        seq_lens=_int_list(data.get("seq_lens", []), f"{source}: seq_lens"),
        dtypes=tuple(dict.fromkeys(dtypes)),
        modes=tuple(dict.fromkeys(modes)),
        device=str(data.get("device") or "auto"),
        min_time_s=_number(data.get("min_time_s"), f"{source}: min_time_s", float),
        max_time_s=_number(data.get("max_time_s"), f"{source}: max_time_s", float),
        threads=_number(data.get("threads"), f"{source}: threads", int),
        cold_compile=_flag(data.get("cold_compile", True), f"{source}: cold_compile"),
    )
    if data.get("generate_flags"):
        raise GridError(
            f"{source}: generate_flags: no longer taken (set the grid's settings instead)"
        )
    if spec.batch_sizes and not any(takes_batch_size(m) for m in models):
        raise GridError("batch sizes apply to built-in and hf: zoo models only")
    if spec.seq_lens and not any(takes_seq_len(m) for m in models):
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
