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
Each mode's `TreeShare` says how much of its median step the modules hold, and where the rest
went.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from profreport.analysis.attribution import group_module
from profreport.analysis.profiler_cost import kernel_time_per_call, mode_median_step
from profreport.record.model import FusionGroup, KernelRow, ModeResult, OkMode, Run

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


@dataclass
class ModeTotals:
    """A module's work in one mode (itself and its submodules)."""

    calls: int = 0
    bytes: int = 0
    bytes_unknown: int = 0  # calls with no modeled bytes (never counted as 0)
    time_us: float = 0.0
    time_unknown: int = 0

    def add(self, work: Work) -> None:
        self.calls += 1
        if work.bytes is None:
            self.bytes_unknown += 1
        else:
            self.bytes += work.bytes
        if work.time_us is None:
            self.time_unknown += 1
        else:
            self.time_us += work.time_us


@dataclass
class ModuleNode:
    """A module (path as `named_modules()` names it, "" the model), its totals per mode, its
    children; `repeats` > 1: this row stands for that many structurally identical sibling
    blocks (`last` the last block's name), totals summed over them."""

    path: str
    name: str
    modes: dict[str, ModeTotals] = field(default_factory=dict)
    children: list[ModuleNode] = field(default_factory=list)
    repeats: int = 1
    last: str = ""


def _table_time(row: KernelRow | None) -> float | None:
    if row is None or row.time_us_per_step is None or not row.calls_per_step:
        return None
    return row.time_us_per_step / row.calls_per_step


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
        if light is None:
            return _table_time(row)
        return None if row is None else light.get(row.name)

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


def _child(node: ModuleNode, path: str, name: str) -> ModuleNode:
    """`node`'s child at `path`, added when it has none."""
    child = next((c for c in node.children if c.path == path), None)
    if child is None:
        child = ModuleNode(path, name)
        node.children.append(child)
    return child


def _insert(root: ModuleNode, mode: str, work: Work) -> None:
    root.modes.setdefault(mode, ModeTotals()).add(work)
    if work.module is None:
        _child(root, UNPLACED, UNPLACED).modes.setdefault(mode, ModeTotals()).add(work)
        return
    node, parts = root, work.module.split(".") if work.module else []
    for i, part in enumerate(parts):
        node = _child(node, ".".join(parts[: i + 1]), part)
        node.modes.setdefault(mode, ModeTotals()).add(work)


def _shape(node: ModuleNode) -> tuple[object, ...]:
    """What must agree for two sibling blocks to fold: names and per-mode calls and bytes of
    the block and of every descendant (time may differ: it is measured)."""
    own = tuple(sorted((m, t.calls, t.bytes, t.bytes_unknown) for m, t in node.modes.items()))
    return (own, tuple((c.name, _shape(c)) for c in node.children))


def _merge(into: ModuleNode, other: ModuleNode) -> None:
    """Add `other`'s totals to `into`'s, and its children's to theirs (same structure)."""
    for mode, totals in other.modes.items():
        mine = into.modes[mode]
        for f in dataclasses.fields(ModeTotals):
            setattr(mine, f.name, getattr(mine, f.name) + getattr(totals, f.name))
    for a, b in zip(into.children, other.children, strict=True):
        _merge(a, b)


def _fold(node: ModuleNode) -> None:
    """Fold runs of numbered siblings (layers.0 ... layers.31) whose shapes agree into one row."""
    for child in node.children:
        _fold(child)
    folded: list[tuple[ModuleNode, tuple[object, ...]]] = []
    for child in node.children:
        shape = _shape(child)
        prev = folded[-1] if folded else None
        if (
            prev is not None
            and child.name.isdigit()
            and prev[0].last.isdigit()
            and int(child.name) == int(prev[0].last) + 1
            and shape == prev[1]
        ):
            _merge(prev[0], child)
            prev[0].repeats += 1
            prev[0].last = child.name
            continue
        child.last = child.name
        folded.append((child, shape))
    node.children = [c for c, _ in folded]


def module_tree(run: Run) -> ModuleNode | None:
    """The model's module tree with each mode's work; None when no mode recorded modules."""
    root = ModuleNode("", "")
    found = False
    for name, mode in run.ok_modes.items():
        work = mode_work(mode)
        if work is None:
            continue
        found = True
        for w in work:
            _insert(root, name, w)
    if not found:
        return None
    _fold(root)
    return root


@dataclass(frozen=True)
class TreeShare:
    """How much of a mode's median step (the profiler's cost removed, where measured) its
    module tree holds, and the rest: calls with no module recorded, ops the profiler cannot
    see (inferred, no module), and host time outside kernels (dispatch, wrappers, Python)."""

    mode: str
    step_us: float
    placed_us: float
    unplaced_us: float
    inferred_us: float
    corrected: bool

    @property
    def outside_us(self) -> float:
        return max(0.0, self.step_us - self.placed_us - self.unplaced_us - self.inferred_us)

    @property
    def share(self) -> float:
        return self.placed_us / self.step_us if self.step_us > 0 else 0.0


def tree_shares(run: Run, tree: ModuleNode) -> list[TreeShare]:
    """Each mode of ``tree``: the share of its median step its modules hold."""
    unplaced = next((c for c in tree.children if c.path == UNPLACED), None)
    out, ran = [], run.ok_modes
    for name, totals in tree.modes.items():
        step = mode_median_step(ran[name])
        if step is None:
            continue
        loose = unplaced.modes.get(name) if unplaced is not None else None
        loose_us = loose.time_us if loose is not None else 0.0
        out.append(
            TreeShare(
                mode=name,
                step_us=step.total_us,
                placed_us=totals.time_us - loose_us,
                unplaced_us=loose_us,
                inferred_us=step.inferred_us,
                corrected=step.corrected,
            )
        )
    return out


@dataclass(frozen=True)
class ModuleSaving:
    """Modeled bytes the fused groups of one module saved in one mode."""

    module: str
    mode: str
    saved_bytes: int
    fused_groups: int
    source_lines: tuple[str, ...]


def top_savings(run: Run, limit: int = 5) -> list[ModuleSaving]:
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
            module,
            mode,
            sum(g.saved_bytes or 0 for g in groups),
            len(groups),
            tuple(dict.fromkeys(x for g in groups for x in g.source_lines or ())),
        )
        for (module, mode), groups in totals.items()
    ]
    found = [s for s in found if s.saved_bytes > 0]
    return sorted(found, key=lambda s: s.saved_bytes, reverse=True)[:limit]
