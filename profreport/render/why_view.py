"""View-model rows of the why-not-fused finding (analysis/why_not_fused): plain strings the HTML
template and the Markdown renderer lay out."""

from __future__ import annotations

from typing import TypedDict

from profreport.record.model import ModeResult, WhyNotFused
from profreport.render.folding import FoldedOps, fold_ops, grouped, without_serials
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
    "unmatched": "no counterpart",
}


class WhyRowView(TypedDict):
    kind: str
    ops: FoldedOps
    count: int  # how many identical entries this row stands for (a layer repeated N times)
    entry: WhyNotFused  # the first of them, its strings (reason, source, evidence, hint) as shown
    place: str  # the modules and source lines of the entries ("" when not recorded)


def why_rows(mode: ModeResult) -> list[WhyRowView]:
    """One row per distinct why-not-fused entry of a mode (with findings), in finding order;
    entries alike but for a generated kernel's serial number (the same split in every layer)
    are one row, the first's, with their count."""
    return [
        {
            "kind": _KIND_LABELS.get(e.kind, e.kind),
            # a split names two ops that stayed apart: an arrow, never a "+" of fused ops
            "ops": fold_ops(e.ops, " -> " if e.kind == "split" else " + "),
            "count": len(same),
            "entry": e,
            "place": why_place(same),
        }
        for same in grouped(
            mode.why_not_fused or (),
            key=lambda e: (
                e.kind,
                e.ops,
                without_serials(e.reason),
                e.source,
                without_serials(e.evidence),
                e.where,
                e.hint,
            ),
        )
        for e in same[:1]
    ]
