"""Where in the model each kernel row and fused group ran: pure functions over a mode's record.

A kernel row takes the places of the calls its modeled bytes come from (the same join as
analysis/kernel_bytes: the row's operation in the mode's tensor-I/O sequence, or the fusion map's
groups of a generated kernel), over the whole forward: an aten::addmm row lists every Linear that
ran it. Module paths are `named_modules()` paths ("" is the model itself); source lines come
from capture (profreport.capture.provenance).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from profreport.record.model import FusionGroup, KernelRow, OkMode, TensorIO


def common_module(paths: Iterable[str]) -> str:
    """The innermost module containing all `paths` ("mixers.1" for mixers.1.up and mixers.1)."""
    parts = [p.split(".") if p else [] for p in paths]
    same = itertools.takewhile(lambda names: len(set(names)) == 1, zip(*parts, strict=False))
    return ".".join(names[0] for names in same)


def group_module(group: FusionGroup) -> str | None:
    """The module a fusion group belongs to: the innermost one containing its eager calls'
    modules; None when the map recorded none."""
    return common_module(group.modules) if group.modules else None


def kernel_places(mode: OkMode) -> tuple[KernelRow, ...]:
    """The kernel rows of `mode` (after kernel_bytes) with `modules` and `source_lines` where the
    mode recorded them; rows with no recorded place keep None ("not recorded")."""
    by_op: dict[str, list[TensorIO]] = {}
    for call in mode.bytes.sequence:
        if call.module is not None:
            by_op.setdefault(call.op.removeprefix("extern "), []).append(call)
    by_kernel: dict[str, list[FusionGroup]] = {}
    for group in mode.fusion.groups if mode.fusion is not None else ():
        if group.modules and group.kernels:
            by_kernel.setdefault(group.kernels[0], []).append(group)
    rows = []
    for row in mode.kernels.table:
        if row.name in by_kernel:
            groups = by_kernel[row.name]
            modules = tuple(dict.fromkeys(m for g in groups for m in g.modules or ()))
            lines = tuple(dict.fromkeys(x for g in groups for x in g.source_lines or ()))
        elif row.bytes_op is not None and row.bytes_op in by_op:
            calls = by_op[row.bytes_op]
            modules = tuple(dict.fromkeys(c.module for c in calls if c.module is not None))
            lines = tuple(dict.fromkeys(x for c in calls for x in c.lines or ()))
        else:
            rows.append(row)
            continue
        placed = row.adding(modules=modules)
        rows.append(placed.adding(source_lines=lines) if lines else placed)
    return tuple(rows)
