"""Renderers for a run comparison: Markdown (pull-request comment) and a small HTML page.

Both read one view-model built from the `Comparison` dataclass, so they say the same thing; its
JSON is the document itself (registry.render_json).
"""

from __future__ import annotations

from dataclasses import dataclass

from profreport.analysis.comparison import (
    Comparison,
    MetricChange,
    ModeComparison,
    RunIdentity,
    Thresholds,
)
from profreport.format import (
    MdMarkup,
    fmt_bytes,
    fmt_ms,
    fmt_pct,
    md_cell,
    md_code,
    md_line,
    md_table,
    plural,
)
from profreport.render.jinja import render_page
from profreport.render.kernel_diff import SOURCE_LINE, kernel_diff_markdown, mode_view
from profreport.render.views import CompareRowView, CompareView, SideView

_LABELS = {
    "kernels_per_step": "kernels / step",
    "launches_per_step": "launch calls / step",
    "bytes_per_step": "bytes / step",
    "latency_median_ms": "latency median",
    "peak_memory_bytes": "peak memory",
    "status": "status",
    "new_kernel": "new kernel",
}


def _count(m: MetricChange | None) -> str:
    if m is None or m.base is None or m.head is None:
        return "n/a"
    return f"{m.base:g} → {m.head:g} ({m.change or 0:+g})"


def _bytes(m: MetricChange | None, peak: bool = False) -> str:
    """Bytes base → head (change): a modeled total's note marks it partial; a peak's note is
    shown, alone where a side has no peak."""
    if m is None or m.base is None or m.head is None:
        return (m.note or "n/a") if peak and m is not None else "n/a"
    text = f"{fmt_bytes(m.base)} → {fmt_bytes(m.head)} ({fmt_pct(m.change_pct)})"
    if not m.note:
        return text
    return f"{text}, {m.note}" if peak else f"{text} partial"


def _latency_side(median: float | None, ci: tuple[float, float] | None) -> str:
    if median is None:
        return "n/a"
    if ci is None:
        return fmt_ms(median)
    return f"{fmt_ms(median)} [{fmt_ms(ci[0])} – {fmt_ms(ci[1])}]"


def _latency_change(m: MetricChange | None) -> str:
    if m is None or m.change_pct is None:
        return "n/a"
    return m.note or fmt_pct(m.change_pct)  # the note starts with the change


def _result(flagged: list[str], lat: MetricChange | None) -> str:
    """A row's result: its regressions, else an inconclusive latency (never "ok" for what the
    gate could not judge), else ok."""
    if flagged:
        return "regression: " + ", ".join(_LABELS[m] for m in sorted(flagged))
    if lat is not None and lat.inconclusive:
        return "inconclusive: latency"
    return "ok"


def _row(mc: ModeComparison, regressed: set[tuple[str, str]]) -> CompareRowView:
    lat = mc.metric("latency_median_ms")
    flagged = [metric for mode, metric in regressed if mode == mc.mode]
    result = _result(flagged, lat)
    status = mc.base_status
    if mc.head_status != mc.base_status:
        status = f"{mc.base_status} → {mc.head_status}"
    return {
        "mode": mc.mode,
        "status": status,
        "kernels": _count(mc.metric("kernels_per_step")),
        "launches": _count(mc.metric("launches_per_step")),
        "bytes": _bytes(mc.metric("bytes_per_step")),
        "peak_memory": _bytes(mc.metric("peak_memory_bytes"), peak=True),
        "latency_base": _latency_side(lat.base, lat.base_ci95) if lat else "n/a",
        "latency_head": _latency_side(lat.head, lat.head_ci95) if lat else "n/a",
        "latency_change": _latency_change(lat),
        "result": result,
        "regressed": bool(flagged),
        # CSS class per cell, so the template only lays out.
        "css": {
            "status": "bad" if "status" in flagged else "",
            "kernels": "bad" if "kernels_per_step" in flagged else "",
            "bytes": "bad" if "bytes_per_step" in flagged else "",
            "latency": "bad" if "latency_median_ms" in flagged else "",
            "peak_memory": "bad" if "peak_memory_bytes" in flagged else "",
            "result": "bad" if flagged else "warn" if result != "ok" else "",
        },
    }


def _paired(cmp: Comparison) -> bool:
    """Base and head were timed in the same rounds (`ab`)."""
    return any(m.paired is not None for mc in cmp.modes for m in mc.metrics)


LATENCY_SOURCE = {
    False: "latency: measured; each run's level and the head/base change come from its timing "
    "processes (across them when both runs timed several; a run that timed one process widens "
    "the interval for what a process's luck can do) — a slowdown counts only when its whole 95% "
    "interval lies beyond 1; the machine reference is a witness that can withhold a change "
    "(it moved as far the same way), never a divisor that creates one",
    True: "latency: measured, base and head blocks interleaved in each timing process; the gate "
    "reads the median of per-round head/base ratios with its 95% interval (across the processes "
    "when there were several)",
}
NOISE_SOURCE = (
    "; when the machine was busy (run.json timing_noise), processes disagreed, or a change beyond "
    "the limit cannot be told apart, latency is inconclusive: it neither passes nor fails unless "
    "--fail-on-inconclusive"
)


def _thresholds_text(cmp: Comparison) -> str:
    t = cmp.thresholds
    gates = (
        (t.max_kernel_increase, "kernels / step +{}"),
        (t.max_bytes_increase_pct, "modeled bytes +{:g}%"),
        (t.max_peak_memory_increase_pct, "peak memory +{:g}%"),
    )
    parts = [text.format(value) for value, text in gates if value is not None]
    latency = t.max_latency_regression_pct
    if latency is not None and _paired(cmp):
        parts.append(f"latency: paired head/base ratio +{latency:g}% with its 95% interval above 1")
    elif latency is not None:
        parts.append(f"latency median +{latency:g}% with the head/base 95% interval above 1")
    if t.new_kernel_pattern is not None:
        parts.append(f"no new kernel matching {t.new_kernel_pattern!r}")
    if t.fail_on_inconclusive:
        parts.append("an inconclusive latency fails")
    return "; ".join(parts) if parts else "none"


def _side(ident: RunIdentity) -> SideView:
    return {
        "label": ident.label,
        "created": ident.created_utc or "n/a",
        "torch": ident.torch or "n/a",
        "device": ident.device_name or "n/a",
    }


@dataclass(frozen=True)
class Outcome:
    """A comparison's outcome (of two runs, or of two sweeps): one line, its mark in Markdown
    and its CSS class. A latency the gate could not judge is never a ✅."""

    text: str
    mark: str
    css: str


def gate_outcome(regressions: int, inconclusive: int, thresholds: Thresholds) -> Outcome:
    """The outcome of `regressions` failed gates and `inconclusive` unjudged latencies."""
    unjudged = f"{plural(inconclusive, 'latency result')} inconclusive"
    fails = bool(thresholds.fail_on_inconclusive)
    if regressions:
        text = f"{plural(regressions, 'regression')} beyond the thresholds"
        return Outcome(f"{text}; {unjudged}" if inconclusive else text, "❌", "regressed")
    if inconclusive and fails:
        return Outcome(
            f"no regression called, but {unjudged}: a failed gate (--fail-on-inconclusive)",
            "❌",
            "regressed",
        )
    if inconclusive and thresholds.any_set:
        return Outcome(
            f"no regression called; {unjudged}: not judged (neither passed nor failed)",
            "❔",
            "inconclusive",
        )
    if thresholds.any_set:
        return Outcome("no regression beyond the thresholds", "✅", "clean")
    text = "report only: no thresholds set"
    return Outcome(f"{text} ({unjudged})" if inconclusive else text, "ℹ️", "clean")


def build_compare_view(cmp: Comparison) -> CompareView:
    """The plain, formatted view-model the Markdown and HTML renderers lay out."""
    regressed = {(r.mode, r.metric) for r in cmp.regressions}
    outcome = gate_outcome(len(cmp.regressions), len(cmp.inconclusive), cmp.thresholds)
    return {
        "title": f"profreport compare: {cmp.model} on {cmp.device_type}",
        "model_differences": list(cmp.model_differences),
        # each mode that has a kernel diff (both sides ran), in the comparison's order
        "kernel_diffs": [mode_view(d) for mc in cmp.modes if (d := mc.kernel_diff) is not None],
        "machine": cmp.machine_note,
        "machine_changed": cmp.machine is not None and cmp.machine.changed,
        "base": _side(cmp.base),
        "head": _side(cmp.head),
        "outcome": outcome.text,
        "outcome_mark": outcome.mark,
        "regressed": cmp.regressed,
        "outcome_class": outcome.css,
        "thresholds": _thresholds_text(cmp),
        "show_launches": cmp.device_type == "cuda",
        "rows": [_row(mc, regressed) for mc in cmp.modes],
        "regressions": [r.message for r in cmp.regressions],
        "warnings": list(cmp.warnings),
        "only_in_base": ", ".join(cmp.only_in_base),
        "only_in_head": ", ".join(cmp.only_in_head),
        "inconclusive": cmp.inconclusive,
        "latency_source": LATENCY_SOURCE[_paired(cmp)] + NOISE_SOURCE + ".",
    }


def only_in_lines(base: str, head: str) -> list[str]:
    """The Markdown lines naming what only one side has (none where both have the same)."""
    return [
        f"- only in {side}: {md_cell(names)}"
        for side, names in (("base", base), ("head", head))
        if names
    ]


def render_markdown(cmp: Comparison) -> str:
    v = build_compare_view(cmp)
    mark = v["outcome_mark"]
    base, head = v["base"], v["head"]
    lines = [
        f"### {md_line(v['title'])}",
        "",
        f"{mark} **{md_cell(v['outcome'])}** (thresholds: {md_cell(v['thresholds'])})",
        "",
        f"base {md_code(base['label'])} ({md_cell(base['created'])}, torch "
        f"{md_cell(base['torch'])}) → head {md_code(head['label'])} ({md_cell(head['created'])}, "
        f"torch {md_cell(head['torch'])})",
        "",
    ]
    if v["machine"]:
        lines += [f"{'⚠️' if v['machine_changed'] else 'ℹ️'} {md_cell(v['machine'])}", ""]
    if v["model_differences"]:
        lines += ["What differs between the models:", ""]
        lines += [f"- {md_cell(d)}" for d in v["model_differences"]]
        lines.append("")
    # header -> the row's key, in column order
    columns = {"mode": "mode", "status": "status", "kernels / step": "kernels"}
    if v["show_launches"]:
        columns["launch calls / step"] = "launches"
    columns |= {
        "bytes / step (modeled)": "bytes",
        "latency base [95% CI]": "latency_base",
        "latency head [95% CI]": "latency_head",
        "latency change": "latency_change",
        "peak memory": "peak_memory",
    }
    rows = [
        [
            *(dict(row)[key] for key in columns.values()),
            MdMarkup(f"**{md_cell(row['result'])}**") if row["regressed"] else row["result"],
        ]
        for row in v["rows"]
    ]
    header = [*columns, "result"]
    lines += [*md_table(header, rows, "ll" + "r" * (len(header) - 3) + "l"), ""]
    lines += [f"- ❌ {md_cell(msg)}" for msg in v["regressions"]]
    lines += [f"- ❔ {md_cell(line)} (neither passes nor fails)" for line in v["inconclusive"]]
    lines += [f"- ⚠️ {md_cell(w)}" for w in v["warnings"]]
    lines += only_in_lines(v["only_in_base"], v["only_in_head"])
    lines.append(
        f"<sub>kernels: profiler; bytes: modeled; peak memory: one call (CUDA allocator peak, or "
        f"the profiler's memory events on CPU); {v['latency_source']}</sub>"
    )
    lines += ["", *kernel_diff_markdown(v["kernel_diffs"])]
    return "\n".join(lines).rstrip("\n") + "\n"


def render_html(cmp: Comparison) -> str:
    return render_page("compare.html.j2", **build_compare_view(cmp), kernel_diff_source=SOURCE_LINE)
