"""The run record: the pivot between collection and everything after it.

- here: the versioned JSON document (`profreport.run/2`; run/1 still read): dump, load, and
  `validate`, derived from the typed record, so a bad file is one line naming the field.
- `model`: the record as frozen dataclasses (`Run`, `ModeResult`, `KernelCounts`, `Bytes`,
  `Latency`, `CompilerEvidence`, `Environment`, ...) with `from_json`/`to_json`; readers use
  attributes.

Renderers and comparisons read only the record (and the traces beside it), so a run collected on
a GPU box re-renders anywhere. The names under `modes.<mode>` are a contract for other tools.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profreport.files import dumps, record_file
from profreport.record.model import (
    Bytes,
    CompilerEvidence,
    Device,
    Environment,
    FailedMode,
    KernelCounts,
    KernelDefinition,
    KernelRow,
    Latency,
    ModelInfo,
    ModeResult,
    OkMode,
    OpBytes,
    Run,
    Section,
    Settings,
    SkippedMode,
    Speedup,
    TensorIO,
    Tool,
)
from profreport.record.section import JSONObject, read_json

__all__ = [
    "SCHEMA",
    "Bytes",
    "CompilerEvidence",
    "Device",
    "Environment",
    "FailedMode",
    "KernelCounts",
    "KernelDefinition",
    "KernelRow",
    "Latency",
    "ModeResult",
    "ModelInfo",
    "OkMode",
    "OpBytes",
    "RecordError",
    "Run",
    "Section",
    "Settings",
    "SkippedMode",
    "Speedup",
    "TensorIO",
    "Tool",
    "dumps",
    "load",
    "load_run",
    "parse",
    "validate",
]

SCHEMA = Run.SCHEMA


class RecordError(Exception):
    """Not a readable profreport run record; the message is one line for the user."""


def validate(record: Any, source: str = "record") -> JSONObject:
    """Check the document against the typed record (record/model.py: a field's type and its
    `required` default say what a reader may rely on); raise RecordError naming the first field
    that is missing or of the wrong type. A mode that did not run needs no kernels or bytes."""
    return Run.checked(record, source, RecordError)


def load(path: Path) -> JSONObject:
    """Read and validate a run record from a run.json file (or run.json.gz) or a run folder."""
    path = record_file(Path(path))
    return validate(read_json(path, RecordError), str(path))


def parse(document: Any, source: str = "record") -> Run:
    """A validated run record document as a typed `Run` (RecordError: not one, naming why)."""
    return Run.from_json(validate(document, source))


def load_run(path: Path) -> Run:
    """Read, validate and type a run record from a run.json file or a run folder."""
    return Run.from_json(load(path))
