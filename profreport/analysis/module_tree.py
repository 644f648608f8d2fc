"""The module tree: per module of the model and per mode, the kernel calls, modeled bytes and
profiler time of the work that ran in it (inclusive of its submodules); and the modules whose
fused groups saved the most modeled bytes. Pure functions over a run with findings.

Units of work: eager-like modes (the dispatcher's sequence): one dispatched call each, at its
modeled bytes; compile-like modes (a fusion map with kernel calls): one kernel call per fusion
group, at the kernel's modeled bytes. Time: each call at its kernel's time per call (the
profiler measures a kernel over all its calls, not per module: apportioned by calls): on a CPU
run its time in the light pass's step of median kernel time, the cost of the events recorded
inside it removed (analysis/profiler_cost), so the tree sums to at most the median step; on a
device run, or a record without a light pass, the kernel row's mean profiler time per call.
Each mode's `TreeShare` says how much of its median step (its `median_step` finding) the modules
hold, and where the rest went.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from profreport.analysis.attribution import group_module
from profreport.analysis.profiler_cost import kernel_time_per_call
from profreport.record.model import (
    FusionGroup,
    KernelRow,
    ModeResult,
    ModuleNode,
    ModuleSaving,
    ModuleTree,
    ModuleWork,
    OkMode,
    Run,
    TreeShare,
)

TIME_METHOD = (
    "profiler time apportioned: each call at its kernel row's mean time per call (per step)"
)
LIGHT_TIME_METHOD = (
    "profiler time apportioned: each call at its kernel's time per call in the light pass's "
    "step of median kernel time, the profiler's cost inside the kernel removed"
)


@dataclass(frozen=True)
class Work:
    """One call placed in a module (None: the mode recorded none for it, such as a kernel built
    only from graph ops no eager call pairs with): its modeled bytes and apportioned time."""

    module: str | None
    bytes: int | None
    time_us: float | None


def _light_times(mode: ModeResult) -> Mapping[str, float] | None:
    """The mode's CPU kernels' times per call from its light pass; None without one."""
    tb = mode.time_breakdown
    if tb is None or tb.kernels is None:
        return None
    return kernel_time_per_call(tb)


def time_method(mode: ModeResult) -> str:
    """How a mode's module times were taken."""
    return TIME_METHOD if _light_times(mode) is None else LIGHT_TIME_METHOD


def mode_work(mode: OkMode) -> list[Work] | None:
    """The placed calls of one mode; None when the mode recorded no modules."""
    light = _light_times(mode)

    def _row_time(row: KernelRow | None) -> float | None:
        if row is None:
            return None
        if light is not None:
            return light.get(row.name)
        per_step, calls = row.time_us_per_step, row.calls_per_step
        return None if per_step is None or not calls else per_step / calls

    rows = mode.kernels.table
    by_name = {r.name: r for r in rows}
    by_op: dict[str, KernelRow] = {}
    for r in rows:
        if r.bytes_op is not None:
            by_op.setdefault(r.bytes_op, r)
    if mode.fusion is not None and mode.fusion.per_kernel is not None:
        groups = [g for g in mode.fusion.groups if g.kernels]
        if not any(g.modules for g in groups):
            return None
        return [
            Work(group_module(g), g.kernel_bytes, _row_time(_group_row(g, by_name, by_op)))
            for g in groups
        ]
    sequence = mode.bytes.sequence
    if not any(c.module is not None for c in sequence):
        return None
    return [
        Work(c.module, c.traffic if c.read is not None else None, _row_time(by_op.get(c.op)))
        for c in sequence
    ]


def _group_row(
    group: FusionGroup, by_name: Mapping[str, KernelRow], by_op: Mapping[str, KernelRow]
) -> KernelRow | None:
    """The kernel row of a fusion group's kernel: a generated kernel by its name, a library call
    by the operation whose bytes the row took."""
    row = by_name.get(group.kernels[0])
    if row is None and group.eager_ops:
        row = by_op.get(f"aten::{group.eager_ops[0]}")
    return row


UNPLACED = "(no module recorded)"


def _chain(module: str | None) -> list[str]:
    """The paths a call placed in `module` counts in: the model's, then each enclosing module's
    down to its own (a call with no module: the model's and UNPLACED)."""
    if module is None:
        return ["", UNPLACED]
    parts = module.split(".") if module else []
    return ["", *(".".join(parts[: i + 1]) for i in range(len(parts)))]


def _work(works: list[Work]) -> ModuleWork:
    """The work of the calls placed in one module (or below it) in one mode."""
    sized = [w.bytes for w in works if w.bytes is not None]
    timed = [w.time_us for w in works if w.time_us is not None]
    time_us = 0.0
    for t in timed:  # in call order, as the tree has always added them
        time_us += t
    return ModuleWork(
        calls=len(works),
        bytes=sum(sized),
        bytes_unknown=len(works) - len(sized),
        time_us=time_us,
        time_unknown=len(works) - len(timed),
    )


def _shape(node: ModuleNode) -> tuple[object, ...]:
    """What must agree for two sibling blocks to fold: names and per-mode calls and bytes of
    the block and of every descendant (time may differ: it is measured)."""
    own = tuple(sorted((m, t.calls, t.bytes, t.bytes_unknown) for m, t in node.modes.items()))
    return (own, tuple((c.name, _shape(c)) for c in node.children))


def _merged(into: ModuleNode, other: ModuleNode) -> ModuleNode:
    """`into` with `other`'s work added to its own, and its children's to theirs (same shape)."""
    modes = {
        mode: ModuleWork(
            calls=a.calls + (b := other.modes[mode]).calls,
            bytes=a.bytes + b.bytes,
            bytes_unknown=a.bytes_unknown + b.bytes_unknown,
            time_us=a.time_us + b.time_us,
            time_unknown=a.time_unknown + b.time_unknown,
        )
        for mode, a in into.modes.items()
    }
    children = tuple(_merged(a, b) for a, b in zip(into.children, other.children, strict=True))
    return dataclasses.replace(into, modes=modes, children=children)


def _folded(children: list[ModuleNode]) -> tuple[ModuleNode, ...]:
    """Runs of numbered siblings (layers.0 ... layers.31) whose shapes agree, folded into one."""
    folded: list[tuple[ModuleNode, tuple[object, ...]]] = []
    for child in children:
        shape = _shape(child)
        prev, first = folded[-1] if folded else (None, None)
        if (
            prev is not None
            and child.name.isdigit()
            and prev.last.isdigit()
            and int(child.name) == int(prev.last) + 1
            and shape == first
        ):
            block = _merged(prev, child)
            folded[-1] = (
                dataclasses.replace(block, repeats=prev.repeats + 1, last=child.name),
                shape,
            )
            continue
        folded.append((dataclasses.replace(child, last=child.name), shape))
    return tuple(c for c, _ in folded)


def _node(
    path: str, works: Mapping[str, dict[str, list[Work]]], below: Mapping[str, dict[str, None]]
) -> ModuleNode:
    """The module at `path` with its work per mode and its children, folded (bottom up)."""
    return ModuleNode(
        path=path,
        name=path.rsplit(".", 1)[-1],
        modes={mode: _work(calls) for mode, calls in works[path].items()},
        children=_folded([_node(c, works, below) for c in below.get(path, {})]),
    )


def module_tree(run: Run) -> ModuleTree | None:
    """The model's module tree with each mode's work, how each mode's times were taken and the
    share of its median step the tree holds; None when no mode recorded modules."""
    works: dict[str, dict[str, list[Work]]] = {}  # by path, then mode: in call order
    below: dict[str, dict[str, None]] = {}  # each path's children, in the order first reached
    for name, mode in run.ok_modes.items():
        for w in mode_work(mode) or ():
            chain = _chain(w.module)
            for parent, path in itertools.pairwise(chain):
                below.setdefault(parent, {})[path] = None
            for path in chain:
                works.setdefault(path, {}).setdefault(name, []).append(w)
    if not works:
        return None
    root = _node("", works, below)
    return ModuleTree(
        root=root,
        time_methods={m: time_method(run.modes[m]) for m in run.modes if m in root.modes},
        shares=tuple(_shares(run, root)),
    )


def _shares(run: Run, tree: ModuleNode) -> list[TreeShare]:
    """Each mode of ``tree``: the share of its median step its modules hold."""
    unplaced = next((c for c in tree.children if c.path == UNPLACED), None)
    out, ran = [], run.ok_modes
    for name, totals in tree.modes.items():
        step = ran[name].median_step
        if step is None:
            continue
        loose = unplaced.modes.get(name) if unplaced is not None else None
        unplaced_us = loose.time_us if loose is not None else 0.0
        placed_us, step_us = totals.time_us - unplaced_us, step.total_us
        out.append(
            TreeShare(
                mode=name,
                step_us=step_us,
                placed_us=placed_us,
                unplaced_us=unplaced_us,
                inferred_us=step.inferred_us,
                outside_us=max(0.0, step_us - placed_us - unplaced_us - step.inferred_us),
                share=placed_us / step_us if step_us > 0 else 0.0,
                corrected=step.corrected,
            )
        )
    return out


def top_savings(run: Run, limit: int = 5) -> tuple[ModuleSaving, ...]:
    """The modules (a group's innermost common module) whose fused groups saved the most
    modeled bytes, over every mode with a fusion map; largest first."""
    totals: dict[tuple[str, str], list[FusionGroup]] = {}
    for name, mode in run.ok_modes.items():
        for g in mode.fusion.groups if mode.fusion is not None else ():
            module = group_module(g)
            if g.fused and module is not None and g.saved_bytes is not None:
                totals.setdefault((module, name), []).append(g)
    found = [
        ModuleSaving(
            module=module,
            mode=mode,
            saved_bytes=sum(g.saved_bytes or 0 for g in groups),
            fused_groups=len(groups),
            source_lines=tuple(dict.fromkeys(x for g in groups for x in g.source_lines or ())),
        )
        for (module, mode), groups in totals.items()
    ]
    found = [s for s in found if s.saved_bytes > 0]
    return tuple(sorted(found, key=lambda s: s.saved_bytes, reverse=True)[:limit])
