"""The kernel budget (`profreport.expect/1`): what a model is expected to run, per device kind and
mode, in a small JSON file checked in beside the model and reviewed like code. It holds the
deterministic numbers (the same code on the same device kind gives the same counts on any machine
of that kind); docs/expect.md (its tables generated from these classes) says how a run is
compared with it (analysis/budget.py) and what a refresh keeps.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from profreport.files import read_text
from profreport.record.model import Status
from profreport.record.section import (
    ByteCount,
    Section,
    Shape,
    omitted,
    problems,
    required,
    required_factory,
    schema_of,
)

SCHEMA = "profreport.expect/1"


class ExpectationError(Exception):
    """Not a readable expectation file; the message is one line naming where the problem is."""


@dataclass(frozen=True)
class Tolerances(Section):
    """How far a run may be from the expectation and still be within budget. A mode's own
    `tolerances` override the file's, key by key; a key left out takes its default."""

    kernels_per_step: int | None = None  # more or fewer kernels per step allowed (default 0)
    bytes_pct: float | None = None  # modeled bytes per step, percent either way (default 1)
    kernel_names: int | None = None  # kernels by name that may appear, go or change (default 0)


# What a file and a mode leave out: kernels per step and by name exact, modeled bytes within 1%
DEFAULT_TOLERANCES = Tolerances(kernels_per_step=0, bytes_pct=1.0, kernel_names=0)


@dataclass(frozen=True)
class KernelExpectation(Section):
    """One kernel by name: an Inductor-generated one without its graph prefix and counter
    (`graph_0_cpp_fused_relu_3` is `cpp_fused_relu`), every kernel of that name counted."""

    calls_per_step: float = required(0.0)  # profiler: calls per profiled step
    modules: tuple[str, ...] | None = omitted()  # where it ran (not compared)


@dataclass(frozen=True)
class FusedGroupExpectation(Section):
    """One fused group by the eager ops it computes in one kernel ("addmm + relu")."""

    per_step: int = required(0)  # groups computing these ops per forward (fusion map)
    kernels: tuple[str, ...] = ()  # the kernels that computed them (not compared)
    modules: tuple[str, ...] | None = omitted()  # where it ran (not compared)


FusedGroups = Mapping[str, FusedGroupExpectation]
Kernels = Mapping[str, KernelExpectation]


@dataclass(frozen=True)
class ModeExpectation(Section):
    """What one mode is expected to run, read as the class its `status` names: OkExpectation,
    FailedExpectation or SkippedExpectation. `min_speedup` and `tolerances` are set by a person
    and kept when the file is refreshed; everything else is written from a run."""

    status: Status = required("ok")  # a mode expected ok that fails is over budget
    kernels_per_step: int | None = omitted()  # profiler
    bytes_per_step: ByteCount | None = omitted()  # modeled read+written
    fused_groups: FusedGroups | None = omitted()  # by their eager ops
    kernels: Kernels | None = omitted()  # by name
    min_speedup: float | None = omitted()  # set by a person: the paired 95% lower bound's minimum
    tolerances: Tolerances | None = omitted()  # set by a person: override the file's
    note: str | None = omitted()  # a person's note, kept


@dataclass(frozen=True)
class OkExpectation(ModeExpectation):
    """A mode expected to run: its counts are always there."""

    status: Literal["ok"] = required("ok")
    kernels_per_step: int = required(0)  # profiler
    bytes_per_step: ByteCount = required(0)  # modeled read+written
    fused_groups: FusedGroups = required_factory(dict)  # by their eager ops
    kernels: Kernels = required_factory(dict)  # by name


@dataclass(frozen=True)
class FailedExpectation(ModeExpectation):
    """A mode expected to fail."""

    status: Literal["failed"] = required("failed")


@dataclass(frozen=True)
class SkippedExpectation(ModeExpectation):
    """A mode expected not to run (e.g. it needs a GPU)."""

    status: Literal["skipped"] = required("skipped")


# a mode of the file, read as the class its `status` names
ExpectedMode = OkExpectation | FailedExpectation | SkippedExpectation


@dataclass(frozen=True)
class DeviceExpectation(Section):
    """The expectation on one device kind (cpu, cuda): one entry per mode."""

    device: str | None = None  # the device the file was written on (not compared)
    torch: str | None = None  # the torch version it was written with (not compared)
    modes: Mapping[str, ExpectedMode] = required_factory(dict)  # by mode name


@dataclass(frozen=True)
class Expectation(Section):
    """A kernel-budget file (`profreport.expect/1`)."""

    schema: str = required(SCHEMA)  # profreport.expect/1
    model: str | None = None  # the model it was written for (not compared)
    tolerances: Tolerances | None = None  # for every mode; a mode's own override them
    devices: Mapping[str, DeviceExpectation] = required_factory(dict)  # by device kind
    note: str | None = omitted()  # a person's note, kept


@dataclass(frozen=True)
class ExpectationFile:
    """An expectation as read from a file (`path` as given, for messages)."""

    path: Path
    expectation: Expectation


# ---------------------------------------------------------------- reading


def _line_of(text: str, where: str) -> int | None:
    """The line of `text` holding the key a problem's path (`devices.cpu.modes.eager.status`)
    ends at: each key found on or after the line of the one before it (None: not found)."""
    lines = text.splitlines()
    at, found = 0, None
    for part in where.split("."):
        key = json.dumps(part.split("[", 1)[0], ensure_ascii=False)
        hit = next((i for i in range(at, len(lines)) if f"{key}:" in lines[i]), None)
        if hit is None:
            break
        at = found = hit
    return None if found is None else found + 1


def parse(text: str, source: str) -> Expectation:
    """The expectation in `text` (ExpectationError: `source:line: what is wrong`)."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExpectationError(
            f"{source}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg})"
        ) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise ExpectationError(
            f"{source} is not a profreport expectation (schema {found!r}, want {SCHEMA!r})"
        )
    for problem in problems(Expectation, data, closed=True):
        where = problem.split(": ", 1)[0]
        line = _line_of(text, where)
        raise ExpectationError(f"{source}:{line}: {problem}" if line else f"{source}: {problem}")
    return Expectation.from_json(data)


def load(path: Path) -> ExpectationFile:
    """Read an expectation file (ExpectationError: unreadable or malformed, one line)."""
    text = read_text(path, ExpectationError)
    return ExpectationFile(path, parse(text, str(path)))


# ---------------------------------------------------------------- writing


def _leaf(cls: type[Section]) -> bool:
    """A class whose objects are one entry: no field holds another object or a map."""
    return all(s.shape.kind not in ("section", "map") for s in schema_of(cls))


def _written(value: Any, shape: Shape, indent: int) -> str:
    """`value` (JSON) as the file writes it: a map one entry per line, an object of several
    parts one field per line, any other object and every list on one line."""
    flat = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if shape.kind == "union" and isinstance(value, dict):  # the class its tag names
        shape = Shape("section", section=shape.variant(value.get(shape.tag)))
    section = shape.section
    if not isinstance(value, dict) or not value:
        return flat
    if shape.kind == "section" and (section is None or _leaf(section)):
        return flat
    specs = {} if section is None else {s.name: s.shape for s in schema_of(section)}
    item = shape.item or Shape("any")
    pad = "  " * (indent + 1)
    entries = [
        f"{pad}{json.dumps(k, ensure_ascii=False)}: "
        f"{_written(v, specs.get(k, item) if section else item, indent + 1)}"
        for k, v in value.items()
    ]
    return "{\n" + ",\n".join(entries) + "\n" + "  " * indent + "}"


def dumps(expectation: Expectation) -> str:
    """The file's text: one entry per line, in the order the expectation holds them."""
    return _written(expectation.to_json(), Shape("section", section=Expectation), 0) + "\n"
