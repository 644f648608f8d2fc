"""The run record: the pivot between collection and everything after it.

- `document`: the versioned JSON document (`profreport.run/1`): dump, load, and `validate`,
  derived from the typed record, so a bad file is one line naming the field.
- `model`: the record as frozen dataclasses (`Run`, `ModeResult`, `KernelCounts`, `Bytes`,
  `Latency`, `CompilerEvidence`, `Environment`, ...) with `from_json`/`to_json`; readers use
  attributes.

Renderers and comparisons read only the record (and the traces beside it), so a run collected on
a GPU box re-renders anywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profreport.record.document import (
    SCHEMA,
    RecordError,
    dumps,
    load,
    validate,
)
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


def parse(document: Any, source: str = "record") -> Run:
    """A validated run record document as a typed `Run` (RecordError: not one, naming why)."""
    return Run.from_json(validate(document, source))


def load_run(path: Path) -> Run:
    """Read, validate and type a run record from a run.json file or a run folder."""
    return Run.from_json(load(path))
