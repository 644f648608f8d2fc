"""The run record: a versioned JSON document, the pivot between collection and everything after.

Renderers and comparisons read only this record (and the traces beside it), so a run collected on
a GPU box re-renders anywhere. The names under `modes.<mode>` are a contract for other tools.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

SCHEMA = "profreport.run/1"
MODE_STATUSES = ("ok", "failed", "skipped")


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


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(_clean(record), indent=1, sort_keys=False) + "\n"


def validate(record: Any, source: str = "record") -> dict[str, Any]:
    """Check the parts of the contract every reader relies on; raise RecordError otherwise."""
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        found = record.get("schema") if isinstance(record, dict) else type(record).__name__
        raise RecordError(
            f"{source} is not a profreport run record (schema {found!r}, want {SCHEMA!r})"
        )
    for key in ("model", "device", "env", "modes"):
        if not isinstance(record.get(key), dict):
            raise RecordError(f"{source}: missing or invalid {key!r}")
    for name, mode in record["modes"].items():
        if not isinstance(mode, dict) or mode.get("status") not in MODE_STATUSES:
            raise RecordError(f"{source}: mode {name!r} has no valid status")
        if mode["status"] == "ok":
            for key in ("kernels", "bytes"):
                if not isinstance(mode.get(key), dict):
                    raise RecordError(f"{source}: mode {name!r} is ok but has no {key!r}")
    return record


def load(path: Path) -> dict[str, Any]:
    """Read and validate a run record from a run.json file or a run folder."""
    path = Path(path)
    if path.is_dir():
        path = path / "run.json"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RecordError(f"no such file: {path}") from None
    except OSError as exc:
        raise RecordError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return validate(data, str(path))
