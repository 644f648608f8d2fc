"""View-model of the module tree (analysis/module_tree) and of where a fused group or a
why-not-fused entry ran: plain strings the HTML template and the Markdown renderer lay out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from profreport.analysis.attribution import ROOT_LABEL, group_title
from profreport.analysis.module_tree import (
    TIME_METHOD,
    ModuleNode,
    module_tree,
    top_savings,
)
from profreport.format import fmt_bytes, fmt_ms, md_table
from profreport.record.model import FusionGroup, Run, WhyNotFused

OPEN_DEPTH = 2  # the model and its top-level modules start unfolded


class ModuleCellView(TypedDict):
    mode: str
    calls: str
    bytes: str
    time: str


class ModuleRowView(TypedDict):
    label: str
    path: str
    repeats: int
    open: bool
    cells: list[ModuleCellView]
    children: list[ModuleRowView]


class ModuleTreeView(TypedDict):
    modes: list[str]
    root: ModuleRowView
    time_method: str
    not_recorded: list[tuple[str, str]]  # (mode, why its modules were not recorded)


def _label(node: ModuleNode) -> str:
    if not node.path:
        return ROOT_LABEL
    if node.repeats > 1:
        return f"{node.name}–{node.last} (×{node.repeats}, identical blocks, totals over all)"
    return node.name


def _row(node: ModuleNode, modes: Sequence[str], depth: int) -> ModuleRowView:
    cells: list[ModuleCellView] = []
    for mode in modes:
        t = node.modes.get(mode)
        if t is None:
            cells.append({"mode": mode, "calls": "-", "bytes": "-", "time": "-"})
            continue
        unknown = f" (+{t.bytes_unknown} unsized)" if t.bytes_unknown else ""
        cells.append(
            {
                "mode": mode,
                "calls": str(t.calls),
                "bytes": fmt_bytes(t.bytes) + unknown,
                "time": fmt_ms(t.time_us / 1000) if t.time_unknown < t.calls else "-",
            }
        )
    return {
        "label": _label(node),
        "path": node.path,
        "repeats": node.repeats,
        "open": depth < OPEN_DEPTH,
        "cells": cells,
        "children": [_row(c, modes, depth + 1) for c in node.children],
    }


def module_tree_view(run: Run) -> ModuleTreeView | None:
    """The module tree section of the report; None when no mode recorded modules."""
    tree = module_tree(run)
    if tree is None:
        return None
    modes = [m for m in run.modes if m in tree.modes]
    not_recorded = [
        (name, m.bytes.attribution)
        for name, m in run.modes.items()
        if m.ok and name not in tree.modes and m.bytes is not None and m.bytes.attribution
    ]
    return {
        "modes": modes,
        "root": _row(tree, modes, 0),
        "time_method": TIME_METHOD,
        "not_recorded": not_recorded,
    }


def place_text(modules: Sequence[str] | None, lines: Sequence[str] | None) -> str:
    """Where a row ran, "mixers.1 at blocks.py:13" ("" when nothing was recorded); long lists
    are shortened."""
    parts = []
    if modules:
        shown = [m or ROOT_LABEL for m in modules[:3]]
        more = f" (+{len(modules) - 3} more)" if len(modules) > 3 else ""
        parts.append(", ".join(shown) + more)
    if lines:
        parts.append("at " + ", ".join(lines[:2]))
    return " ".join(parts)


def group_place_text(group: FusionGroup) -> str:
    """A fusion group named by where it ran: "mixers.1: gelu + sigmoid + mul at blocks.py:13"
    ("" when the mode recorded no module)."""
    if not group.modules:
        return ""
    lines = group.source_lines or ()
    return group_title(group) + (f" at {', '.join(lines[:2])}" if lines else "")


def why_place(entry: WhyNotFused) -> str:
    return place_text(entry.modules, entry.source_lines)


def savings_markdown(run: Run) -> list[str]:
    """summary.md's lines for the five modules that saved the most modeled bytes (folded in a
    <details> block); none when no fused group recorded its module."""
    rows = top_savings(run)
    if not rows:
        return []
    table = md_table(
        ["module", "mode", "saved (modeled)", "fused groups", "source"],
        [
            [
                s.module or ROOT_LABEL,
                s.mode,
                fmt_bytes(s.saved_bytes),
                s.fused_groups,
                ", ".join(s.source_lines[:2]),
            ]
            for s in rows
        ],
        "llrrl",
    )
    return [
        "<details><summary>Modules whose fused groups saved the most bytes</summary>",
        "",
        *table,
        "",
        "</details>",
        "",
    ]
