"""JSON renderer of a record document (a run, a comparison, a sweep, two sweeps compared): the
document itself (run.json, comparison.json, sweep.json), as `record.dumps` writes it."""

from __future__ import annotations

from profreport.record import dumps
from profreport.record.section import Section


def render(document: Section) -> str:
    """The JSON of `document`: the same keys, order and values as the document it was read from."""
    return dumps(document.to_json())
