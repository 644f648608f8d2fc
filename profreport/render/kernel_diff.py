"""The kernel diff laid out, the one renderer of its rows for `compare`, `ab` (per mode, per
profiled step) and `analyze A B` (per trace pair, over the whole trace): a view-model of
formatted rows (the top rows, the rest to fold), its Markdown lines, and the HTML partial's
context (templates/_kernel_diff.html.j2). The rows come from analysis/kernel_diff.py."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Literal, TypedDict

from profreport.analysis.kernel_diff import (
    MODELED,
    TIME_SOURCE,
    KernelChange,
    KernelSide,
    ModeKernelDiff,
)
from profreport.format import fmt_bytes, md_cell, md_table, plural, short

TOP_ROWS = 10  # rows shown before the rest folds under <details>


class KernelDiffRowView(TypedDict):
    kernel: str
    status: str
    matched_by: str
    eager_ops: str
    calls: str
    time: str
    bytes: str


class KernelDiffModeView(TypedDict):
    title: str
    anchor: str  # the section's HTML id ("" for none)
    summary: str
    fusion_changes: list[str]
    note: str
    calls_header: str
    time_header: str
    bytes_header: str
    show_bytes: bool  # some row has bytes (a trace's rows have none)
    show_eager_ops: bool  # some row has a place or eager ops (module attribution, fusion map)
    top: list[KernelDiffRowView]
    rest: list[KernelDiffRowView]
    rest_label: str


def _num(x: float) -> str:
    return f"{x:g}" if float(x).is_integer() else f"{x:.2f}"


def signed(x: float | None, fmt: Callable[[float], str] = _num) -> str:
    """`x` formatted by `fmt` with its sign, a true minus for a decrease ("n/a" for None)."""
    if x is None:
        return "n/a"
    return f"+{fmt(x)}" if x >= 0 else f"−{fmt(-x)}"


def _us(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x / 1000:.2f} ms" if abs(x) >= 1000 else f"{x:.1f} µs"


def _side_bytes(side: KernelSide, source: str | None) -> str:
    value = side.measured_bytes if source != MODELED else side.modeled_bytes
    text = fmt_bytes(value)
    if source == MODELED and side.bytes_shared_by and side.bytes_shared_by > 1:
        text += f" (op's, shared by {side.bytes_shared_by})"
    return text


def _cells(r: KernelChange, cell: Callable[[KernelSide], str], change: str) -> str:
    """One figure of a row: base → head (change), or the one side's, new or gone."""
    base, head = (cell(side) if side is not None else "" for side in (r.base, r.head))
    if r.base is None:
        return f"{head} (new)"
    if r.head is None:
        return f"{base} (gone)"
    return f"{base} → {head} ({change})"


def places(modules: tuple[str, ...]) -> str:
    """Where a kernel ran: its first three modules (`(model)` for the root) and how many more."""
    names = [m or "(model)" for m in modules]
    more = f" + {len(names) - 3} more" if len(names) > 3 else ""
    return ", ".join(names[:3]) + more


def _relative_time(r: KernelChange) -> str:
    """The profiler time's change with the machine's own move taken out: `; −5% relative to
    the machine reference` ("" where the references did not differ)."""
    ratio = r.time_ratio_vs_machine
    return "" if ratio is None else f"; {ratio - 1:+.0%} relative to the machine reference"


def _row(r: KernelChange, mixed_sources: bool) -> KernelDiffRowView:
    b, h = r.base, r.head
    calls = _cells(r, lambda s: _num(s.calls), signed(r.calls_change))
    time = _cells(r, lambda s: _us(s.time_us), signed(r.time_us_change, _us) + _relative_time(r))
    size = _cells(r, lambda s: _side_bytes(s, r.bytes_source), signed(r.bytes_change, fmt_bytes))
    if mixed_sources and r.bytes_source:
        size += f", {r.bytes_source}"
    ops = (h.eager_ops if h and h.eager_ops else b.eager_ops if b else ()) or ()
    modules = (h.modules if h and h.modules else b.modules if b else ()) or ()
    where = places(modules)
    kernel = r.name
    if b is not None and h is not None and b.name != h.name:
        kernel = f"{h.name} (base: {b.name})"
    return {
        "kernel": kernel,
        "status": r.status,
        "matched_by": r.matched_by or "—",
        "eager_ops": f"{where}: {' + '.join(ops)}" if where and ops else where or " + ".join(ops),
        "calls": calls,
        "time": time,
        "bytes": size,
    }


def _summary(diff: ModeKernelDiff, show_bytes: bool) -> str:
    counts = Counter(r.status for r in diff.rows)
    how = Counter(r.matched_by for r in diff.rows if r.matched_by is not None)
    parts = [f"{counts[s]} {s}" for s in ("appeared", "disappeared", "changed") if counts[s]]
    work = ", ".join(parts) if parts else "no kernel appeared, disappeared or changed its work"
    paired = ", ".join(f"{n} by {by}" for by, n in how.most_common())
    text = f"{work}; {diff.paired} paired ({paired})" if diff.paired else f"{work}; none paired"
    if counts["time only"]:
        same = "calls and bytes" if show_bytes else "calls"
        text += f"; {counts['time only']} with the same {same} (profiler time only)"
    return text


# What a diff's calls and time are counted over: a profiled step (a run's modes) or the whole
# trace (`analyze A B`), as its headers say.
Per = Literal["step", "trace"]
OVER = {"step": " / step", "trace": ", whole trace"}


def mode_view(
    diff: ModeKernelDiff, top: int = TOP_ROWS, per: Per = "step", title: str | None = None
) -> KernelDiffModeView:
    """One kernel diff as formatted strings: structural changes first, `top` rows shown (each
    time change relative to the machine too, where the diff has it). `title`: the section's
    heading (the mode's name by default)."""
    sources = {r.bytes_source for r in diff.rows if r.bytes_source is not None}
    mixed = len(sources) > 1
    rows = [_row(r, mixed) for r in diff.rows]
    rest = rows[top:]
    over = OVER[per]
    return {
        "title": diff.mode if title is None else title,
        "anchor": "" if title is not None else f"kernel-diff-{diff.mode}",
        "summary": _summary(diff, bool(sources)),
        "fusion_changes": [c.summary for c in diff.fusion_changes],
        "note": diff.note,
        "calls_header": f"calls{over}",
        "time_header": f"time{over}",
        "bytes_header": f"bytes{over}" + (f" ({next(iter(sources))})" if len(sources) == 1 else ""),
        "show_bytes": bool(sources),
        "show_eager_ops": any(r["eager_ops"] for r in rows),
        "top": rows[:top],
        "rest": rest,
        "rest_label": plural(len(rest), "more kernel"),
    }


SOURCE_LINE = (
    f"calls and time per profiled step: {TIME_SOURCE} (profiler time explains a change and "
    "never decides one: the profiler slows every kernel, and across runs the machine moves it "
    "too; where the two runs' machine references differ, each time change is also shown "
    "relative to them); bytes per step: modeled (compulsory "
    "traffic from tensor sizes, analysis/kernel_bytes), or measured by Nsight Compute where "
    "both sides were; matched by: how base's and head's rows were paired (name, the eager ops "
    "a generated kernel computes from the fusion map, the generated name without "
    "Inductor's counter, or the same ops in any order in the same modules); where / eager ops: "
    "the modules the kernel ran in (module attribution) and the eager ops it computes"
)


def _md_rows(rows: list[KernelDiffRowView], v: KernelDiffModeView) -> list[list[str]]:
    return [
        [short(r["kernel"]), r["status"], r["matched_by"]]
        + ([r["eager_ops"]] if v["show_eager_ops"] else [])
        + [r["calls"], r["time"]]
        + ([r["bytes"]] if v["show_bytes"] else [])
        for r in rows
    ]


def mode_markdown(v: KernelDiffModeView) -> list[str]:
    """One kernel diff in Markdown: its summary, fusion changes and rows (the rest folded)."""
    lines = [f"**{md_cell(v['title'])}**: {md_cell(v['summary'])}", ""]
    lines += [f"- {md_cell(c)}" for c in v["fusion_changes"]]
    if v["note"]:
        lines.append(f"- {md_cell(v['note'])}")
    if v["fusion_changes"] or v["note"]:
        lines.append("")
    ops, size = v["show_eager_ops"], v["show_bytes"]
    header = ["kernel", "status", "matched by", *(["where / eager ops"] if ops else [])]
    header += [v["calls_header"], f"{v['time_header']} (profiler)"]
    header += [v["bytes_header"]] if size else []
    align = "lll" + ("l" if ops else "") + "rr" + ("r" if size else "")
    if v["top"]:
        lines += [*md_table(header, _md_rows(v["top"], v), align), ""]
    if v["rest"]:
        lines += [f"<details><summary>{md_cell(v['rest_label'])}</summary>", ""]
        lines += [*md_table(header, _md_rows(v["rest"], v), align), "", "</details>", ""]
    return lines


def kernel_diff_markdown(views: list[KernelDiffModeView]) -> list[str]:
    """The kernel-diff section of a Markdown comparison (empty when no mode has one)."""
    if not views:
        return []
    lines = ["#### Kernel by kernel", ""]
    for v in views:
        lines += mode_markdown(v)
    lines.append(f"<sub>{md_cell(SOURCE_LINE)}</sub>")
    return [*lines, ""]
