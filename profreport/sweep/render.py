"""Renderers of a sweep record: sweep.html (self-contained: inline CSS and SVG, no scripts),
sweep.md, and the summary's terminal lines. All read one view-model, built from the typed record
(profreport.sweep.model), which every renderer of the registry's sweep entry takes (registered by
profreport.sweep; sweep.json is the record's own JSON, registry.render_json)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from markupsafe import Markup

from profreport.format import fmt_bytes, fmt_ms, md_cell, md_line, md_table
from profreport.render.jinja import render_page
from profreport.render.noise_view import speedup_cell
from profreport.sweep import charts
from profreport.sweep.model import DecodeCrossing, ModeSummary, Sweep, SweepRow, SweepSummary
from profreport.sweep.summary import AXIS_LABELS, Series, series, summarize

NOT_RECORDED = "not recorded"


def _rate(m: ModeSummary) -> str:
    return f"{m.passed}/{m.points} ({m.pass_rate:.0%})"


def _geomean(m: ModeSummary) -> str:
    if m.mode == "eager":
        return "baseline"
    if m.geomean_speedup is None:
        return "n/a (no passing point with a speedup)"
    noisy = f", {m.speedup_inconclusive} timed under noise" if m.speedup_inconclusive else ""
    return f"{m.geomean_speedup:.2f}x over {m.speedup_points} points{noisy}"


def _compile(m: ModeSummary) -> str:
    return "n/a" if m.mean_compile_s is None else f"{m.mean_compile_s:.2f} s"


def _compression(m: ModeSummary) -> str:
    if m.mode == "eager":
        return "baseline"
    if m.compression_ratio is None:
        return NOT_RECORDED
    return f"{m.compression_ratio:.2f}x over {m.compression_points} points"


def compile_cache_note(sweep: Sweep) -> str:
    if sweep.grid.cold_compile:
        return "cold: each point compiled into an empty Inductor cache"
    return "warm: points shared Inductor's on-disk cache"


BANDWIDTH_BOUND = "bandwidth-bound"  # the decode report's "bound by its kernels"


def _bound(overhead: bool) -> str:
    return "overhead-bound" if overhead else BANDWIDTH_BOUND


def _contexts(values: Iterable[int]) -> str:
    return ", ".join(str(v) for v in values)


def crossing_line(c: DecodeCrossing, models: int) -> str:
    """One mode of a decode sweep: at which context it crosses from overhead- to bandwidth-bound."""
    who = f"{c.model} {c.mode}" if models > 1 else c.mode
    swept = f"contexts {_contexts(c.contexts)}"
    if c.crosses_at is not None:
        return f"{who}: crosses from overhead-bound to {BANDWIDTH_BOUND} at context {c.crosses_at} ({swept})"
    if len(set(c.overhead_bound)) == 1:
        return f"{who}: {_bound(c.overhead_bound[0])} at every context swept ({swept}): no crossing"
    at = {
        state: _contexts(x for x, o in zip(c.contexts, c.overhead_bound, strict=True) if o == state)
        for state in (True, False)
    }
    return (
        f"{who}: no single crossing within the contexts swept: overhead-bound at {at[True]}, "
        f"{BANDWIDTH_BOUND} at {at[False]}"
    )


def crossing_lines(s: SweepSummary) -> list[str]:
    """A decode sweep's crossing lines, one per model and mode (none for other sweeps)."""
    models = len({c.model for c in s.decode or ()})
    return [crossing_line(c, models) for c in s.decode or ()]


def summary_lines(s: SweepSummary) -> list[str]:
    """The summary for the terminal: one line per mode."""
    lines = [
        f"sweep: {s.ok_points} of {s.points} points ran ({len(s.failed)} failed, {s.pending} not run)"
    ]
    for m in s.modes:
        if m.mode == "eager":
            lines.append(f"  eager (the baseline): pass rate {_rate(m)}")
            continue
        lines.append(
            f"  {m.mode}: pass rate {_rate(m)}; geomean speedup {_geomean(m)} (measured); "
            f"mean compile time {_compile(m)} (measured); peak-memory compression ratio "
            f"{_compression(m)}"
        )
    return lines + [f"  decode: {line}" for line in crossing_lines(s)]


def _row_view(r: SweepRow) -> dict[str, Any]:
    ok = r.ok
    lat, sp = r.latency_ms, r.speedup_vs_eager
    return {
        "point": r.point,
        "mode": r.mode,
        "status": r.status,
        "ok": ok,
        "kernels": str(r.kernels_per_step) if ok else "",
        "bytes": (fmt_bytes(r.bytes_per_step) + (" partial" if r.bytes_partial else ""))
        if ok
        else "",
        "latency": f"{fmt_ms(lat.median)} [{fmt_ms(lat.p10)} – {fmt_ms(lat.p90)}]"
        if ok and lat is not None and lat.has("median") and lat.median is not None
        else "",
        "speedup": speedup_cell(sp) if ok else "",
        "compile": f"{r.compile_s:.2f} s" if ok and r.compile_s is not None else "",
        "peak": fmt_bytes(r.peak_memory_bytes) if ok and r.peak_memory_bytes else "",
        "error": r.error or "",
        "report": f"{r.run}/report.html" if r.run else None,
    }


def _decode_view(r: SweepRow) -> dict[str, Any] | None:
    """A decode point's per-token cells (None: the row holds no decode figures)."""
    figures = (r.ms_per_token, r.achieved, r.host_share, r.overhead_bound)
    if not r.ok or all(f is None for f in figures):
        return None
    return {
        "point": r.point,
        "context": "" if r.seq_len is None else str(r.seq_len),
        "mode": r.mode,
        "ms_per_token": fmt_ms(r.ms_per_token) if r.ms_per_token is not None else NOT_RECORDED,
        "achieved": f"{r.achieved:.0%}" if r.achieved is not None else NOT_RECORDED,
        "host_share": f"{r.host_share:.0%}" if r.host_share is not None else NOT_RECORDED,
        "bound": NOT_RECORDED
        if r.overhead_bound is None
        else f"{_bound(r.overhead_bound)} ({r.time_bound or 'host share'})",
    }


def _ticks(rows: Sequence[SweepRow], axis: str | None) -> list[Any]:
    if axis is None:
        return [None]
    values = {r.on_axis(axis) for r in rows if r.ok}
    if axis == "dtype":
        return [d for d in ("float32", "bfloat16", "float16") if d in values]
    return sorted(v for v in values if v is not None)


def _gaps(values: Iterable[float | None]) -> list[float]:
    """A line's values; one not recorded (None) is a gap in the line."""
    return [math.nan if v is None else v for v in values]


def build_charts(sweep: Sweep, axis: str | None) -> dict[str, Markup]:
    rows = sweep.rows
    ticks = _ticks(rows, axis)
    lines = series(rows, axis)
    if not lines:
        return {}
    xlabel = AXIS_LABELS[axis] if axis else "point"
    labels = [str(t) if t is not None else "" for t in ticks]

    def pos(s: Series) -> list[int]:
        return [ticks.index(x) for x in s.x]

    def line(s: Series, values: Iterable[float | None]) -> charts.Line:
        return charts.Line(s.label, s.mode, pos(s), _gaps(values))

    def banded(s: Series, bands: Iterable[tuple[float, float, float]]) -> charts.Line:
        """A line over the series' rows with a band around it: each row's value, low, high."""
        y, low, high = zip(*bands, strict=True)
        return charts.Line(s.label, s.mode, pos(s), _gaps(y), _gaps(low), _gaps(high))

    speed = [
        banded(s, [(sp.median, *sp.ci95) for r in s.rows if (sp := r.speedup_vs_eager)])
        for s in lines
        if s.mode != "eager" and all(r.speedup_vs_eager is not None for r in s.rows)
    ]
    kernels = [line(s, (r.kernels_per_step for r in s.rows)) for s in lines]
    mib = [
        line(s, (None if r.bytes_per_step is None else r.bytes_per_step / 2**20 for r in s.rows))
        for s in lines
    ]
    latency = [
        banded(s, [(lat.median, lat.p10, lat.p90) for r in s.rows if (lat := r.latency_ms)])
        for s in lines
        if all(r.latency_ms and r.latency_ms.median for r in s.rows)
    ]
    drawn = {  # name: (lines, title, y label)
        "speedup": (speed, "Speedup over eager (band: 95% CI)", "x eager (measured)"),
        "kernels": (kernels, "Kernels per step", "count (profiler)"),
        "bytes": (mib, "Memory traffic per step", "MiB (modeled)"),
        "latency": (latency, "Latency median (band: p10-p90)", "ms per call (measured)"),
    }
    # Inlined unescaped: each SVG passed render.charts.checked_svg; labels are matplotlib text.
    return {
        name: Markup(
            charts.line_chart(
                drawn_lines, labels, title, xlabel, ylabel, 1.0 if name == "speedup" else None
            )
        )
        for name, (drawn_lines, title, ylabel) in drawn.items()
    }


def build_view(sweep: Sweep) -> dict[str, Any]:
    s = summarize(sweep)
    devices = sorted({r.device for r in sweep.rows if r.device})
    models = ", ".join(sweep.grid.models)
    return {
        "title": f"profreport sweep: {models} on {', '.join(devices) or sweep.grid.device}",
        "created": sweep.created_utc or "n/a",
        "version": (sweep.tool.version if sweep.tool is not None else None) or "n/a",
        "executor": sweep.executor or "n/a",
        "compile_cache": compile_cache_note(sweep),
        "points": s.points,
        "ok_points": s.ok_points,
        "pending": s.pending,
        "axis": AXIS_LABELS[s.axis] if s.axis else "none (one value per axis)",
        "summary": [
            {
                "mode": m.mode,
                "pass_rate": _rate(m),
                "geomean": _geomean(m),
                "compile": _compile(m),
                "compression": _compression(m),
            }
            for m in s.modes
        ],
        "rows": [_row_view(r) for r in sweep.rows],
        "decode": [v for r in sweep.rows if (v := _decode_view(r)) is not None],
        "crossings": crossing_lines(s),
        "failed": [{"label": f.label, "status": f.status, "error": f.error} for f in s.failed],
        "charts": build_charts(sweep, s.axis),
    }


def render_html(sweep: Sweep) -> str:
    return render_page("sweep.html.j2", **build_view(sweep))


# sweep.md's tables: header -> the view's key, in column order
SUMMARY_COLUMNS = {
    "mode": "mode",
    "pass rate": "pass_rate",
    "geomean speedup (measured)": "geomean",
    "mean compile time (measured)": "compile",
    "peak-memory compression ratio": "compression",
}
ROW_COLUMNS = {
    "point": "point",
    "mode": "mode",
    "status": "status",
    "kernels / step (profiler)": "kernels",
    "bytes / step (modeled)": "bytes",
    "latency median [p10 – p90] (measured)": "latency",
    "speedup (95% CI)": "speedup",
    "compile": "compile",
}
DECODE_COLUMNS = {
    "point": "point",
    "context": "context",
    "mode": "mode",
    "latency / token (measured)": "ms_per_token",
    "of the bandwidth floor (floor modeled / latency measured)": "achieved",
    "host overhead (profiled step)": "host_share",
    "bound": "bound",
}
DECODE_NOTE = (
    "<sub>decode: each point's per-token finding (its run.json, decode_tokens); bound: the decode "
    "report's classification (the time breakdown's host- or launch-bound, else a host share of at "
    f"least half the step, is overhead-bound; otherwise bound by its kernels, {BANDWIDTH_BOUND} "
    "here: how near the floor it runs is the achieved fraction)</sub>"
)


def _table(columns: dict[str, str], rows: list[dict[str, Any]], align: str) -> list[str]:
    return md_table(list(columns), [[row[key] for key in columns.values()] for row in rows], align)


def render_markdown(sweep: Sweep) -> str:
    v = build_view(sweep)
    lines = [
        f"### {md_line(v['title'])}",
        "",
        f"{v['ok_points']} of {v['points']} points ran ({len(v['failed'])} failed, {v['pending']} "
        f"not run); executor {md_cell(v['executor'])}; swept axis: {md_cell(v['axis'])}; "
        f"compile times {md_cell(v['compile_cache'])}",
        "",
        *_table(SUMMARY_COLUMNS, v["summary"], "lrrrr"),
        "",
        *_table(ROW_COLUMNS, v["rows"], "lllrrrrr"),
        "",
    ]
    if v["decode"]:
        lines += [
            "#### Decode, per token: overhead-bound to bandwidth-bound over context",
            "",
            *[f"- {md_cell(line)}" for line in v["crossings"]],
            "",
            *_table(DECODE_COLUMNS, v["decode"], "lrlrrrl"),
            "",
            DECODE_NOTE,
            "",
        ]
    lines += [
        f"- ❌ {md_cell(f['label'])}: {md_cell(f['status'])}: {md_cell(f['error'])}"
        for f in v["failed"]
    ]
    lines.append(
        "<sub>kernels: profiler; bytes: modeled; latency and speedup: measured (median, 95% "
        "bootstrap interval); geometric mean over passing points; compression ratio = eager "
        f"peak memory / mode peak memory, {NOT_RECORDED} where the run records hold no peak "
        "memory</sub>"
    )
    return "\n".join(lines) + "\n"
