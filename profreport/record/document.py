"""The run record as a versioned JSON document: dump, load, and `validate` (derived from the
typed record, record/model.py).

Renderers and comparisons read only this record (and the traces beside it), so a run collected on
a GPU box re-renders anywhere. The names under `modes.<mode>` are a contract for other tools.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from profreport.record.model import Run
from profreport.record.section import JSONObject, read_json

SCHEMA = Run.SCHEMA


class RecordError(Exception):
    """Not a readable profreport run record; the message is one line for the user."""


def _clean(value: Any) -> Any:
    # JSON has no NaN/Infinity; a number we could not compute is written as null.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def dumps(record: JSONObject) -> str:
    return json.dumps(_clean(record), indent=1, sort_keys=False) + "\n"


def validate(record: Any, source: str = "record") -> JSONObject:
    """Check the document against the typed record (record/model.py: a field's type and its
    `required` default say what a reader may rely on); raise RecordError naming the first field
    that is missing or of the wrong type. A mode that did not run needs no kernels or bytes."""
    return Run.checked(record, source, RecordError)


def load(path: Path) -> JSONObject:
    """Read and validate a run record from a run.json file or a run folder."""
    path = Path(path)
    if path.is_dir():
        path = path / "run.json"
    return validate(read_json(path, RecordError), str(path))
