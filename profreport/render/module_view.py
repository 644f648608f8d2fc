"""View-model of the module tree (the run's `module_tree` and `module_savings` findings) and of
where a fused group or a why-not-fused entry ran: plain strings the HTML template and the
Markdown renderer lay out."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypedDict

from profreport.analysis.attribution import group_module
from profreport.format import fmt_bytes, fmt_ms, md_table
from profreport.record.model import FusionGroup, ModuleNode, Run, TreeShare, WhyNotFused

OPEN_DEPTH = 2  # the model and its top-level modules start unfolded
ROOT_LABEL = "(model)"  # the model itself, whose module path is ""


class ModuleCellView(TypedDict):
    mode: str
    calls: str
    bytes: str
    time: str


class ModuleRowView(TypedDict):
    label: str
    path: str
    open: bool
    cells: list[ModuleCellView]
    children: list[ModuleRowView]


class ModuleTreeView(TypedDict):
    modes: list[str]
    root: ModuleRowView
    time_method: str
    not_recorded: list[tuple[str, str]]  # (mode, why its modules were not recorded)
    shares: list[str]  # per mode: the share of its median step the tree holds, and the rest


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
        "open": depth < OPEN_DEPTH,
        "cells": cells,
        "children": [_row(c, modes, depth + 1) for c in node.children],
    }


def module_tree_view(run: Run) -> ModuleTreeView | None:
    """The module tree section of the report; None when no mode recorded modules."""
    tree = run.module_tree
    if tree is None:
        return None
    modes = [m for m in run.modes if m in tree.root.modes]
    not_recorded = [
        (name, m.bytes.attribution)
        for name, m in run.ok_modes.items()
        if name not in tree.root.modes and m.bytes.attribution
    ]
    return {
        "modes": modes,
        "root": _row(tree.root, modes, 0),
        "time_method": "; ".join(dict.fromkeys(tree.time_methods[m] for m in modes)),
        "not_recorded": not_recorded,
        "shares": [share_text(s) for s in tree.shares],
    }


def share_text(s: TreeShare) -> str:
    """ "eager: modules hold 12.1 ms of its 13.2 ms median step (92%); unattributed 1.1 ms: ..."."""
    step = "median step" + ("" if s.corrected else " (the profiler's cost inside)")
    rest = [
        (s.outside_us, "host time outside kernels (dispatch, wrappers, Python)"),
        (s.unplaced_us, "no module recorded"),
        (s.inferred_us, "ops the profiler cannot see (inferred)"),
    ]
    named = [f"{fmt_ms(us / 1000)} {why}" for us, why in rest if us > 0]
    unattributed = sum(us for us, _ in rest)
    tail = f"; unattributed {fmt_ms(unattributed / 1000)}: {', '.join(named)}" if named else ""
    return (
        f"{s.mode}: modules hold {fmt_ms(s.placed_us / 1000)} of its "
        f"{fmt_ms(s.step_us / 1000)} {step} ({s.share:.0%}){tail}"
    )


def _shown(names: Sequence[str]) -> str:
    """The first three names, and how many more."""
    return ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")


def _at(lines: Sequence[str] | None) -> str:
    return f" at {', '.join(lines[:2])}" if lines else ""


def place_text(modules: Sequence[str] | None, lines: Sequence[str] | None) -> str:
    """Where a row ran, "mixers.1 at blocks.py:13" ("" when nothing was recorded); long lists
    are shortened."""
    return ((_shown([m or ROOT_LABEL for m in modules]) if modules else "") + _at(lines)).lstrip()


def _merged(places: Iterable[Sequence[str] | None]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(p for place in places for p in place or ()))


def why_place(entries: Sequence[WhyNotFused]) -> str:
    """Where the entries of one report row (alike in every layer) were: all their modules."""
    return place_text(_merged(e.modules for e in entries), _merged(e.source_lines for e in entries))


def groups_place_text(groups: Sequence[FusionGroup]) -> str:
    """Where the groups of one fusion-map row (the same ops in every layer) ran: "mixers.1:
    gelu + mul at m.py:13" for one, "mixers.0, mixers.1, mixers.2: gelu + mul at m.py:13" for
    several ("" when the mode recorded no module)."""
    modules = [group_module(g) for g in groups]
    if len(groups) == 1 and modules[0] is None:
        return ""
    if any(m is None for m in modules):
        return place_text(
            _merged(g.modules for g in groups), _merged(g.source_lines for g in groups)
        )
    names = list(dict.fromkeys(m or ROOT_LABEL for m in modules if m is not None))
    ops = " + ".join(groups[0].eager_ops) or "(no eager op)"
    return f"{_shown(names)}: {ops}" + _at(_merged(g.source_lines for g in groups))


def savings_markdown(run: Run) -> list[str]:
    """summary.md's table of the five modules that saved the most modeled bytes (the summary
    folds it); none when no fused group recorded its module."""
    rows = run.module_savings
    if not rows:
        return []
    return md_table(
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
