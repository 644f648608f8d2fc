"""Renderers for ``profreport analyze`` documents: each takes the typed ``profreport.analysis/2``
document (analysis/trace_document.py) and returns the content (Markdown or a self-contained
HTML page; its JSON is the document itself, registry.render_json); writing it is the caller's job.

Its "where the time goes" section (one trace's time breakdown, and two traces' side by side) is
a formatted view-model of its own with its Markdown; the HTML partials lay out the same dicts."""

from __future__ import annotations

from typing import Any

from profreport.analysis.change import Change
from profreport.analysis.kernel_diff import ModeKernelDiff
from profreport.analysis.time_breakdown import TraceTimeBreakdown
from profreport.analysis.trace_compare import TIME_PARTS
from profreport.analysis.trace_document import (
    PER_STEP_FIELDS,
    AnalysisDocument,
    TimeChanges,
    TraceComparison,
    TraceSummary,
)
from profreport.format import md_cell, md_line, md_table, short
from profreport.record.model import StepTime
from profreport.record.section import JSONObject
from profreport.render.kernel_diff import mode_markdown, mode_view
from profreport.render.methods import method_templates
from profreport.render.time_view import PART_LABELS

TEMPLATE_NAME = "analyze.html.j2"
EMPTY_TRACE = "The trace holds no events."
KERNELS_TITLE = "Kernels that changed"
# the paragraph of the time section's method: render/methods.md, the one source of the method text
TIME_METHOD = method_templates()["trace_time"]
ROWS = (
    ("kernels", "kernels", "int"),
    ("launches", "launch calls", "int"),
    ("graph_launches", "graph launches", "int"),
    ("memcpy", "memcpy", "int"),
    ("memset", "memset", "int"),
    ("kernel_time_us", "kernel time (µs)", "us"),
    ("memcpy_bytes", "memcpy bytes", "bytes"),
    ("memset_bytes", "memset bytes", "bytes"),
    ("unlinked_kernels", "unlinked kernels", "int"),
)


def fmt(value: Any, style: str = "int") -> str:
    if value is None:
        return "–"
    if style == "us":
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:,.2f}"
    if style == "bytes":
        return _human_bytes(int(value))
    if style == "pct":
        return f"{value:,.2f}"
    if style == "ratio":
        return f"×{value:.2f}"
    if style == "delta":
        return f"{value:+,.1f}" if isinstance(value, float) else f"{value:+,}"
    return f"{value:,}"


def _human_bytes(n: int) -> str:
    size, unit = float(n), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{n:,} B" if unit == "B" else f"{n:,} B ({size:.1f} {unit})"


# Fields a trace cannot know, by its device activity, and what their cells say instead.
MISSING = {
    "not recorded": (
        {"kernels", "memcpy", "memset", "memcpy_bytes", "memset_bytes", "unlinked_kernels"}
        | {"kernel_time_us"},
        "not recorded",
    ),
    "counters": ({"kernel_time_us"}, "not measured"),
}


def _cell(value: Any, key: str, style: str, activity: str) -> str:
    keys, text = MISSING.get(activity, (set(), ""))
    return text if value is None and key in keys else fmt(value, style)


def counters_view(t: TraceSummary) -> JSONObject | None:
    """The counter section of one trace: totals, derived figures per kernel, every metric."""
    c = t.counters
    if c is None:
        return None
    return {
        "source": c.source,
        "ranges": fmt(c.ranges),
        "totals": [
            ("FLOPs", _counter(c.flops, "count")),
            ("DRAM bytes read", _counter(c.dram_bytes_read, "bytes")),
            ("DRAM bytes written", _counter(c.dram_bytes_written, "bytes")),
        ],
        "kernels": [
            {
                "name": short(k.name),
                "full_name": k.name,
                "calls": fmt(k.calls),
                "flops": _counter(k.flops, "count"),
                "dram_read": _counter(k.dram_bytes_read, "bytes"),
                "dram_written": _counter(k.dram_bytes_written, "bytes"),
            }
            for k in t.top_kernels
            if k.has("counter_totals")
        ],
        "metrics": [(name, _counter(v, "count")) for name, v in c.totals.items()],
        "not_additive": ", ".join(c.not_additive),
        "texts": [c.flops_formula, c.dram_text],
    }


def _counter(value: Any, style: str) -> str:
    if value is None:
        return "not recorded"
    if style == "bytes":
        return _human_bytes(round(value))
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def view_model(doc: AnalysisDocument, top: int = 15) -> JSONObject:
    """Everything a page or a Markdown file shows, already formatted as strings."""
    many = len(doc.traces) > 1
    traces = [_trace_view(t, many and i == 0, top) for i, t in enumerate(doc.traces)]
    comparisons = [_comparison_view(c, top) for c in doc.comparison]
    return {"traces": traces, "comparisons": comparisons, "definitions": dict(doc.definitions)}


def _trace_view(t: TraceSummary, baseline: bool, top: int) -> dict[str, Any]:
    step, activity = t.per_step, t.device_activity
    steps = step.steps
    return {
        "title": t.path + (" (baseline)" if baseline else ""),
        "device": f"{t.device.get('name') or 'unknown device'} ({t.device.get('kind')})",
        "definition": t.definition,
        "evidence": t.definition_evidence,
        "notes": list(t.notes),
        "counters": counters_view(t),
        "steps": steps,
        "steps_text": _steps_text(steps),
        "empty": t.events == 0,
        "totals": [
            (
                label,
                _cell(getattr(t, key), key, style, activity),
                _cell(getattr(step, key, None), key, style, activity) if steps else "",
            )
            for key, label, style in ROWS
        ],
        "launch_apis": ", ".join(f"{k} × {v:,}" for k, v in t.launch_api_counts.items())
        or ("none (CPU work has no launch API)" if t.definition == "cpu" else "none"),
        "kernels": [
            {
                "name": short(k.name),
                "full_name": k.name,
                "kind": k.kind,
                "calls": fmt(k.calls),
                "time_us": fmt(k.time_us, "us"),
                "launched_by": short(k.launched_by, 48),
            }
            for k in t.top_kernels[:top]
        ],
        "distinct_kernels": t.distinct_kernels,
        "time": None if t.time_breakdown is None else time_view(t.time_breakdown),
    }


def _comparison_view(c: TraceComparison, top: int) -> dict[str, Any]:
    per_step = c.per_step
    steps = per_step["steps"]
    return {
        "title": f"{c.path} vs {c.baseline}",
        "steps": f"{_steps_text(steps.base)} in the baseline, {_steps_text(steps.head)} here",
        "note": c.note,
        "totals": [_delta_row(label, c.totals[key], style) for key, label, style in ROWS],
        "per_step": [
            _delta_row(label, per_step[key], style)
            for key, label, style in ROWS
            if key in PER_STEP_FIELDS
        ],
        "kernel_diff": mode_view(
            ModeKernelDiff("", c.kernels, c.kernels_paired), top, per="trace", title=KERNELS_TITLE
        ),
        "ops": [
            (short(o.op, 60), fmt(o.base), fmt(o.head), fmt(o.change, "delta"))
            for o in c.launching_ops[:top]
        ],
        "time": None if c.time_breakdown is None else time_compare_view(c.time_breakdown),
    }


def _steps_text(n: float | None) -> str:
    if not n:
        return "no ProfilerSteps (whole trace)"
    return "1 ProfilerStep" if n == 1 else f"{n} ProfilerSteps"


def _delta_row(label: str, d: Change, style: str) -> tuple[str, str, str, str, str]:
    plain = d.change is None or style not in ("us", "pct")
    delta = fmt(d.change, "delta") if plain else f"{d.change:+,.2f}"
    return (label, fmt(d.base, style), fmt(d.head, style), delta, fmt(d.ratio, "ratio"))


def render_markdown(doc: AnalysisDocument, top: int = 15) -> str:
    vm = view_model(doc, top)
    out = ["# Trace analysis", ""]
    for i, t in enumerate(vm["traces"], 1):
        out += [f"## {i}. {md_cell(t['title'])}", ""]
        out += [
            f"{md_line(t['device'])} · {md_cell(t['definition'])} definition · {t['steps_text']}",
            "",
        ]
        out += [f"Definition evidence: {md_cell(t['evidence'])}", ""] if t["evidence"] else []
        out += [EMPTY_TRACE, ""] if t["empty"] else []
        out += [line for note in t["notes"] for line in (f"**Note:** {md_cell(note)}", "")]
        header = ["", "whole trace", "per step (median)" if t["steps"] else ""]
        out += [*md_table(header, t["totals"], "lrr"), ""]
        out += [f"Launch calls: {md_cell(t['launch_apis'])}", ""]
        shown = len(t["kernels"])
        out += [f"Top {shown} of {t['distinct_kernels']} distinct kernels by time:", ""]
        rows = [
            (n, k["name"], k["kind"], k["calls"], k["time_us"], k["launched_by"])
            for n, k in enumerate(t["kernels"], 1)
        ]
        if rows:
            header = ["#", "kernel", "kind", "calls", "time (µs)", "launched by"]
            out += [*md_table(header, rows, "rllrrl"), ""]
        out += _counters_markdown(t["counters"])
        out += time_markdown(t["time"])
    for c in vm["comparisons"]:
        out += [f"## Comparison: {md_cell(c['title'])}", ""]
        if c["note"]:
            out += [f"**Note:** {md_cell(c['note'])}", ""]
        out += md_table(["whole trace", "baseline", "this", "Δ", "ratio"], c["totals"], "lrrrr")
        out += ["", f"Per step (median; {md_cell(c['steps'])}):", ""]
        out += md_table(["per step", "baseline", "this", "Δ", "ratio"], c["per_step"], "lrrrr")
        out += ["", *mode_markdown(c["kernel_diff"])]
        out += ["Kernels per launching CPU op (where different):", ""]
        out += [*md_table(["op", "baseline", "this", "Δ"], c["ops"], "lrrr"), ""]
        out += time_markdown(c["time"])
    out += ["## Method", ""]
    for text in vm["definitions"].values():
        out += [text, ""]
    out += [TIME_METHOD, ""]
    return "\n".join(out)


def _counters_markdown(c: JSONObject | None) -> list[str]:
    if c is None:
        return []
    out = [f"Hardware counters, {c['source']}, {c['ranges']} ranges:", ""]
    out += [*md_table(["whole trace", c["source"]], c["totals"], "lr"), ""]
    if c["kernels"]:
        header = ["kernel", "calls", "FLOPs", "DRAM read", "DRAM written"]
        rows = [
            (k["name"], k["calls"], k["flops"], k["dram_read"], k["dram_written"])
            for k in c["kernels"]
        ]
        out += [*md_table(header, rows, "lrrrr"), ""]
    out += [*md_table(["counter (sum over all ranges)", "total"], c["metrics"], "lr"), ""]
    if c["not_additive"]:
        out += [f"Not additive (per-kernel means in JSON only): {md_cell(c['not_additive'])}", ""]
    out += [line for text in c["texts"] for line in (md_cell(text), "")]
    return out


def render_html(doc: AnalysisDocument, top: int = 15) -> str:
    from profreport.render.jinja import render_page

    return render_page(
        TEMPLATE_NAME, vm=view_model(doc, top), empty_trace=EMPTY_TRACE, time_method=TIME_METHOD
    )


# Where the time goes: one trace's breakdown and two traces' median steps, formatted (µs).
COUNTS = ("dispatched_ops", "launches")  # parts that are counts (the others µs)


def _parts(step: StepTime) -> list[tuple[str, str]]:
    """(label, value) of each part the step has (a part of the other definition is None)."""
    rows = []
    for key in TIME_PARTS:
        value = getattr(step, key)
        if value is None or (key == "launches" and step.op_us is not None):
            continue
        rows.append((PART_LABELS[key], f"{value:,}" if key in COUNTS else fmt(value, "us")))
    return rows


def time_view(t: TraceTimeBreakdown) -> dict[str, Any]:
    """One trace's breakdown, formatted (µs)."""
    device, la = t.device, t.launch
    view: dict[str, Any] = {
        "rank": "–" if t.rank is None else str(t.rank),
        "rounding": "times rounded inward to whole µs (as HTA)" if t.hta_rounding else "exact",
        "bound": "" if t.bound is None else t.bound.label,
        "bound_evidence": "" if t.bound is None else t.bound.evidence,
        "notes": list(t.notes),
        "device": None,
        "streams": [],
        "launch": None,
        "steps": [s.name for s in t.steps],
        "step_rows": _step_rows(t.steps),
        "typical": None if t.typical is None else t.typical.name,
    }
    if device is not None:
        view["device"] = {
            "window": device.window,
            "rows": [
                ("span", fmt(device.span_us, "us"), ""),
                ("idle", fmt(device.idle_us, "us"), f"{device.idle_pct:.2f}%"),
                ("compute", fmt(device.compute_us, "us"), f"{device.compute_pct:.2f}%"),
                ("non-compute", fmt(device.non_compute_us, "us"), f"{device.non_compute_pct:.2f}%"),
                ("of which sync records alone", fmt(device.sync_us, "us"), ""),
            ],
        }
        view["streams"] = [
            (
                f"{s.device}/{s.stream}",
                f"{s.events:,}",
                fmt(s.busy_us, "us"),
                fmt(s.idle_us, "us"),
                fmt(s.host_wait_us, "us"),
                fmt(s.kernel_wait_us, "us"),
                fmt(s.other_us, "us"),
            )
            for s in device.streams
        ]
    if la is not None:
        view["launch"] = (
            f"{la.launches:,} launch calls, {fmt(la.call_us, 'us')} µs inside them (median "
            f"{fmt(la.call_median_us, 'us')} µs); kernel start after its call: median "
            f"{fmt(la.delay_median_us, 'us')} µs, p90 {fmt(la.delay_p90_us, 'us')} µs "
            f"({la.kernels_linked:,} kernels linked)"
        )
    return view


def _step_rows(steps: tuple[StepTime, ...]) -> dict[str, Any]:
    """A table with one column per step: its parts as rows."""
    if not steps:
        return {"header": [], "rows": []}
    labels = [label for label, _ in _parts(steps[0])]
    columns = [dict(_parts(s)) for s in steps]
    return {
        "header": [s.name for s in steps],
        "rows": [(label, *(c.get(label, "–") for c in columns)) for label in labels],
    }


def time_compare_view(c: TimeChanges) -> dict[str, Any]:
    """Two traces' median steps part by part, and their whole-trace idle shares."""
    rows = [
        _delta_row(PART_LABELS[k], d, "int" if k in COUNTS else "us")[:4]
        for k, d in c.step.items()
        if k in PART_LABELS
    ]
    if c.idle_pct is not None:
        rows.append(_delta_row("whole-trace device idle (%)", c.idle_pct, "pct")[:4])
    return {"bound": f"{c.baseline_bound or '–'} → {c.bound or '–'}", "rows": rows}


def time_markdown(view: dict[str, Any] | None) -> list[str]:
    """The Markdown of :func:`time_view` or :func:`time_compare_view` (None: nothing)."""
    if view is None:
        return []
    if "streams" not in view:  # a comparison
        out = [f"Where the time goes, median steps (bound {md_cell(view['bound'])}):", ""]
        header = ["µs (count)", "baseline", "this", "Δ"]
        return [*out, *md_table(header, view["rows"], "lrrr"), ""]
    out = [
        f"Where the time goes: rank {view['rank']}, {view['rounding']}; "
        f"{md_cell(view['bound'])} ({md_cell(view['bound_evidence'])})",
        "",
    ]
    out += [line for note in view["notes"] for line in (f"**Note:** {md_cell(note)}", "")]
    if view["device"] is not None:
        out += [f"Device, whole trace ({md_cell(view['device']['window'])}):", ""]
        out += [*md_table(["", "µs", "share"], view["device"]["rows"], "lrr"), ""]
        header = ["device/stream", "events", "busy", "idle", "host wait", "kernel wait", "other"]
        out += [*md_table(header, view["streams"], "lrrrrrr"), ""]
    if view["launch"]:
        out += [f"Launch overhead: {md_cell(view['launch'])}", ""]
    table = view["step_rows"]
    if table["header"]:
        out += [f"Per ProfilerStep (µs; median step {md_cell(view['typical'])}):", ""]
        header = ["", *table["header"]]
        out += [*md_table(header, table["rows"], "l" + "r" * len(table["header"])), ""]
    return out
