"""JSON renderer of a document (a run, a comparison, a trace analysis, a sweep, two sweeps
compared): the document itself (run.json, comparison.json, analysis.json, sweep.json), as the
document model writes it (files.dumps)."""

from __future__ import annotations

from profreport.files import dumps
from profreport.record.section import Section


def render(document: Section, **_options: object) -> str:
    """The JSON of `document`: the same keys, order and values as the document it was read from
    (another format's options, `analyze`'s `top`, shape no document)."""
    return dumps(document.to_json())
