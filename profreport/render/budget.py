"""A kernel-budget check (analysis/budget.py) laid out: a view-model of formatted strings (the
outcome, the counts, one row per breach with expected -> actual and where in the model it ran),
its Markdown lines (summary.md opens with them), its plain-text lines (the terminal, and the
pytest fixture's failure message) and the HTML partial's context (templates/_budget.html.j2)."""

from __future__ import annotations

from typing import TypedDict

from profreport.analysis.budget import Breach, BudgetCheck, FusedGroupChange
from profreport.format import fmt_bytes, md_cell, md_code, md_table, plural
from profreport.render.kernel_diff import places, signed

# How to accept an intended change, said under the rows (the pytest fixture says its own).
GENERATE_ACCEPT = (
    "to accept an intended change, run the same command with --update-expect {source} "
    "and commit the file"
)
ROWS_SHOWN = 15  # Markdown rows visible; the rest fold under <details>


class BudgetRowView(TypedDict):
    mode: str
    what: str  # the metric, kernel or fused group, with its source
    expected: str
    actual: str
    change: str  # "+1", "+11.6%", "new", "gone", "no longer fused", the error
    allowed: str  # exact, ±N, ±1%, ≥ 1.20×
    where: str  # module paths ("" where not recorded)


class BudgetView(TypedDict):
    source: str
    device: str
    outcome: str  # within budget | OVER BUDGET | not checked
    tone: str  # good | bad | neutral
    counts: str
    rows: list[BudgetRowView]
    notes: list[str]
    accept: str


def _n(x: float | str) -> str:
    if isinstance(x, str):
        return x
    return f"{x:g}" if float(x).is_integer() else f"{x:.3g}"


def _kernel_row(b: Breach) -> tuple[str, str, str, str]:
    """(expected, actual, change, allowed) of a kernel by name."""
    assert isinstance(b.expected, (int, float)) and isinstance(b.actual, (int, float))
    allowed = "exact" if not b.tolerance else f"{plural(int(b.tolerance), 'kernel')} may change"
    if b.kernel_status == "appeared":
        return "—", _n(b.actual), "new", allowed
    if b.kernel_status == "disappeared":
        return _n(b.expected), "—", "gone", allowed
    return _n(b.expected), _n(b.actual), signed(b.actual - b.expected, _n), allowed


def breach_row(b: Breach) -> BudgetRowView:
    """One breach as formatted cells; every number says its source and unit."""
    what, change, allowed = b.subject, "", "exact"
    expected, actual = _n(b.expected), _n(b.actual)
    if b.kind == "status":
        what, change = "status", b.error or ""
    elif b.kind == "kernels per step":
        assert isinstance(b.expected, (int, float)) and isinstance(b.actual, (int, float))
        what = "kernels / step (profiler)"
        change = signed(b.actual - b.expected, _n)
        allowed = "exact" if not b.tolerance else f"±{_n(b.tolerance)}"
    elif b.kind == "bytes per step":
        assert isinstance(b.expected, (int, float)) and isinstance(b.actual, (int, float))
        what = "bytes / step (modeled)"
        expected, actual = fmt_bytes(b.expected), fmt_bytes(b.actual)
        pct = (b.actual - b.expected) / b.expected * 100 if b.expected else float("inf")
        change = f"{'+' if pct >= 0 else '−'}{abs(pct):.1f}%"
        allowed = f"±{_n(b.tolerance)}%"
    elif b.kind == "fused group":
        what = f"fused group {b.subject} (per step, fusion map)"
        change = "no longer fused into one kernel" if b.actual == 0 else "fused fewer times"
    elif b.kind == "kernel":
        what = f"kernel {b.subject} (calls / step, profiler)"
        expected, actual, change, allowed = _kernel_row(b)
    elif b.kind == "speedup":
        what = "speedup vs eager (measured, paired 95% lower bound)"
        expected = f"≥ {b.expected:.2f}×" if not isinstance(b.expected, str) else b.expected
        actual = actual if isinstance(b.actual, str) else f"{b.actual:.2f}×"
        change, allowed = b.error or "below the minimum", f"≥ {_n(b.tolerance)}×"
    return {
        "mode": b.mode,
        "what": what,
        "expected": expected,
        "actual": actual,
        "change": change,
        "allowed": allowed,
        "where": places(b.modules),
    }


def _gained(g: FusedGroupChange) -> str:
    where = places(g.modules)
    more = "new" if g.expected == 0 else f"{g.expected} → {g.actual} per step"
    return (
        f"{g.mode}: fused group {g.eager_ops} is {more} (not a breach; --update-expect "
        f"records it){f', in {where}' if where else ''}"
    )


def _counts(check: BudgetCheck) -> str:
    parts = [
        f"{plural(check.count('within budget'), 'mode')} within budget",
        f"{check.count('over budget')} over",
        plural(check.kernels("appeared"), "new kernel"),
        plural(check.kernels("disappeared"), "gone kernel"),
    ]
    if check.count("not in file"):
        parts.append(f"{check.count('not in file')} not in the file")
    return " · ".join(parts)


def _notes(check: BudgetCheck) -> list[str]:
    notes = []
    if not check.device_in_file:
        notes.append(
            f"the file has no {check.device} section: nothing was compared (--update-expect "
            "adds it)"
        )
    else:
        notes += [
            f"{m.mode}: not in the file (--update-expect adds it)"
            for m in check.modes
            if m.outcome == "not in file"
        ]
    notes += [
        f"{m.mode}: not run here (the file's entry is kept)"
        for m in check.modes
        if m.outcome == "not run"
    ]
    notes += [f"{m.mode}: {m.note}" for m in check.modes if m.note]
    notes += [_gained(g) for m in check.modes for g in m.new_fused_groups]
    if check.torch_then:
        notes.append(
            f"the file was written with torch {check.torch_then}, this run used "
            f"{check.torch_now}: kernel names and counts may differ for that reason alone"
        )
    if check.device_then:
        notes.append(
            f"the file was written on {check.device_then}, this run ran on {check.device_now}: "
            "library kernels (cuBLAS, cuDNN, oneDNN) are chosen per device"
        )
    return notes


def budget_view(check: BudgetCheck, accept: str = GENERATE_ACCEPT) -> BudgetView:
    """The check as formatted strings; `accept` says how to accept an intended change
    (`{source}` is the file)."""
    if not check.device_in_file:
        outcome, tone = "not checked", "neutral"
    elif check.passed:
        outcome, tone = "within budget", "good"
    else:
        outcome, tone = "OVER BUDGET", "bad"
    return {
        "source": check.source,
        "device": check.device,
        "outcome": outcome,
        "tone": tone,
        "counts": _counts(check),
        "rows": [breach_row(b) for b in check.breaches],
        "notes": _notes(check),
        "accept": accept.format(source=check.source) if not check.passed else "",
    }


def row_line(r: BudgetRowView) -> str:
    """One breach on one line: `mode: what: expected → actual (change; allowed), in where`."""
    detail = "; ".join(x for x in (r["change"], f"allowed {r['allowed']}") if x)
    where = f", in {r['where']}" if r["where"] else ""
    return f"{r['mode']}: {r['what']}: {r['expected']} → {r['actual']} ({detail}){where}"


def budget_text(view: BudgetView) -> list[str]:
    """The check as plain lines: the outcome and counts, one line per breach, the notes and how
    to accept (the terminal, the pytest fixture's message)."""
    lines = [
        f"kernel budget {view['source']} ({view['device']}): {view['outcome']}: {view['counts']}"
    ]
    lines += [f"  over budget: {row_line(r)}" for r in view["rows"]]
    lines += [f"  note: {n}" for n in view["notes"]]
    if view["accept"]:
        lines.append(f"  {view['accept']}")
    return lines


def _md_row(r: BudgetRowView) -> list[str]:
    moved = f"{r['expected']} → {r['actual']}"
    return [r["mode"], r["what"], moved, r["change"], r["allowed"], r["where"]]


def budget_markdown(view: BudgetView) -> list[str]:
    """The check as the opening lines of summary.md (every string escaped)."""
    mark = {"good": "✅", "bad": "❌", "neutral": "➖"}[view["tone"]]
    lines = [
        f"**{mark} Kernel budget: {md_cell(view['outcome'])}** "
        f"({md_code(view['source'])}, {md_cell(view['device'])}): {md_cell(view['counts'])}",
        "",
    ]
    header = ["mode", "what", "expected → actual", "change", "allowed", "where"]
    shown, rest = view["rows"][:ROWS_SHOWN], view["rows"][ROWS_SHOWN:]
    if shown:
        lines += [*md_table(header, [_md_row(r) for r in shown], "llllll"), ""]
    if rest:
        more = f"{len(rest)} more breach{'es' if len(rest) != 1 else ''}"
        lines += [f"<details><summary>{more}</summary>", ""]
        lines += [*md_table(header, [_md_row(r) for r in rest], "llllll"), "", "</details>", ""]
    lines += [f"- {md_cell(n)}" for n in view["notes"]]
    if view["accept"]:
        lines.append(f"- {md_cell(view['accept'])}")
    if view["notes"] or view["accept"]:
        lines.append("")
    return lines
