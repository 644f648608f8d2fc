"""Whole trace documents as JSON objects, for the few readers that need every field of every
event (the merged timeline rewrites events as they are), not the columnar `Trace`."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson

GZIP_MAGIC = b"\x1f\x8b"


def read_document(path: Path) -> Any:
    """The JSON document of a trace file, plain or gzip (told by its magic bytes)."""
    raw = path.read_bytes()
    return orjson.loads(gzip.decompress(raw) if raw[:2] == GZIP_MAGIC else raw)
