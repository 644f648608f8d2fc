"""View-model rows of the why-not-fused finding (analysis/why_not_fused): plain strings the HTML
template and the Markdown renderer lay out."""

from __future__ import annotations

from profreport.record.model import ModeResult
from profreport.render.module_view import why_place

_KIND_LABELS: dict[str, str] = {
    "graph_break": "graph break",
    "split": "kept apart",
    "refused": "scheduler refused",
    "fused": "fused",
    "layout": "layout conversion",
    "recompute": "recomputed",
    "fuser_limit": "fuser limit",
    "not_fused": "not fused",
    "applied": "pattern applied",
    "not_applied": "pattern not applied",
}


def why_rows(mode: ModeResult) -> list[dict[str, str]]:
    """One row per why-not-fused entry of a mode (with findings), in finding order."""
    return [
        {
            "kind": _KIND_LABELS.get(e.kind, e.kind),
            # a split names two ops that stayed apart: an arrow, never a "+" of fused ops
            "ops": (" -> " if e.kind == "split" else " + ").join(e.ops),
            "reason": e.reason,
            "where": e.where,
            "source_text": e.source_text,
            "source": e.source,
            "evidence": e.evidence,
            "hint": e.hint,
            "hint_test": e.hint_test,
            "place": why_place(e),
        }
        for e in mode.why_not_fused or ()
    ]
