"""View-model rows of the why-not-fused finding (analysis/why_not_fused): plain strings the HTML
template and the Markdown renderer lay out."""

from __future__ import annotations

from profreport.record.model import ModeResult

_KIND_LABELS = {
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
    rows = []
    for e in mode.why_not_fused or ():
        rows.append(
            {
                "kind": _KIND_LABELS.get(str(e.get("kind")), str(e.get("kind", ""))),
                # a split names two ops that stayed apart: an arrow, never a "+" of fused ops
                "ops": (" -> " if e.get("kind") == "split" else " + ").join(
                    str(op) for op in e.get("ops") or []
                ),
                "reason": str(e.get("reason", "")),
                "where": str(e.get("where") or ""),
                "source_text": str(e.get("source_text") or ""),
                "source": str(e.get("source", "")),
                "evidence": str(e.get("evidence", "")),
                "hint": str(e.get("hint") or ""),
                "hint_test": str(e.get("hint_test") or ""),
            }
        )
    return rows
