"""`analyze`'s "where the time goes" section: one trace's time breakdown, and two traces' side by
side, as formatted view-models (and their Markdown); the HTML lays out the same dicts."""

from __future__ import annotations

from typing import Any

from profreport.analysis.time_breakdown import TraceTimeBreakdown
from profreport.analysis.trace_compare import TIME_PARTS
from profreport.analysis.trace_document import CountChange, TimeChanges
from profreport.format import md_cell, md_table
from profreport.record.model import StepTime
from profreport.render.methods import method_templates
from profreport.render.time_view import PART_LABELS

# the paragraph of `analyze`'s method section: render/methods.md, the one source of the method text
METHOD = method_templates()["trace_time"]
COUNTS = ("dispatched_ops", "launches")  # parts that are counts (the others µs)


def _us(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.1f}" if abs(value) >= 100 else f"{value:,.2f}"


def _parts(step: StepTime) -> list[tuple[str, str]]:
    """(label, value) of each part the step has (a part of the other definition is None)."""
    rows = []
    for key in TIME_PARTS:
        value = getattr(step, key)
        if value is None or (key == "launches" and step.op_us is not None):
            continue
        rows.append((PART_LABELS[key], f"{value:,}" if key in COUNTS else _us(value)))
    return rows


def time_view(t: TraceTimeBreakdown) -> dict[str, Any]:
    """One trace's breakdown, formatted (µs)."""
    device = t.device
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
                ("span", _us(device.span_us), ""),
                ("idle", _us(device.idle_us), f"{device.idle_pct:.2f}%"),
                ("compute", _us(device.compute_us), f"{device.compute_pct:.2f}%"),
                ("non-compute", _us(device.non_compute_us), f"{device.non_compute_pct:.2f}%"),
                ("of which sync records alone", _us(device.sync_us), ""),
            ],
        }
        view["streams"] = [
            (
                f"{s.device}/{s.stream}",
                f"{s.events:,}",
                _us(s.busy_us),
                _us(s.idle_us),
                _us(s.host_wait_us),
                _us(s.kernel_wait_us),
                _us(s.other_us),
            )
            for s in device.streams
        ]
    if t.launch is not None:
        la = t.launch
        view["launch"] = (
            f"{la.launches:,} launch calls, {_us(la.call_us)} µs inside them (median "
            f"{_us(la.call_median_us)} µs); kernel start after its call: median "
            f"{_us(la.delay_median_us)} µs, p90 {_us(la.delay_p90_us)} µs "
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


def _change_row(label: str, d: CountChange, count: bool) -> tuple[str, str, str, str]:
    def show(v: float | None) -> str:
        if v is None:
            return "–"
        return f"{v:,.0f}" if count else _us(v)

    delta = "–" if d.delta is None else (f"{d.delta:+,.0f}" if count else f"{d.delta:+,.2f}")
    return (label, show(d.baseline), show(d.value), delta)


def time_compare_view(c: TimeChanges) -> dict[str, Any]:
    """Two traces' median steps part by part, and their whole-trace idle shares."""
    rows = [
        _change_row(PART_LABELS[k], d, k in COUNTS) for k, d in c.step.items() if k in PART_LABELS
    ]
    idle = c.idle_pct
    if idle is not None:
        rows.append(
            (
                "whole-trace device idle (%)",
                "–" if idle.baseline is None else f"{idle.baseline:.2f}",
                "–" if idle.value is None else f"{idle.value:.2f}",
                "–" if idle.delta is None else f"{idle.delta:+.2f}",
            )
        )
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
