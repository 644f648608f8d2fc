"""JSON renderer of a run: the run record document itself (run.json), as `record.dumps` writes it."""

from __future__ import annotations

from profreport.record import dumps
from profreport.record.model import Run


def render(run: Run) -> str:
    """run.json of `run`: the same keys, order and values as the document it was read from."""
    return dumps(run.to_json())
