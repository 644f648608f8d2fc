"""The checks of what profreport's other commands made of the runs: `compare` of two different
runs against each run's own raw trace and record, `render`'s headline against the raw trace and
Nsight Compute's bytes; and the time the steps took."""

from __future__ import annotations

import math
import re
from typing import Any

from gpu_check.evidence import JSON, Evidence
from gpu_check.registry import (
    Result,
    check,
    fail,
    measured,
    needed,
    no_output,
    ok_modes,
    raw,
    verdict,
)
from gpu_check.spec import COMPARED, RENDERED

RENDERED_MIN_BYTES = {"report.html": 10_000, "summary.md": 200}
COUNTED = (("kernels_per_step", "kernels"), ("launches_per_step", "launches"))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


@check
def compare_runs(ev: Evidence) -> list[Result]:
    """`profreport compare` of two different runs: every mode's kernels and launches per step on
    each side are that run's raw trace counts, its latency medians and peak memory the records',
    each change head - base, and each mode's status on both sides the records'."""
    base_label, head_label = COMPARED
    name = "compare"
    if ev.comparison is None:
        return no_output(name, ev, "compare", "comparison")
    base, _ = needed(ev, name, base_label)
    head, _ = needed(ev, name, head_label)
    problems, compared = [], []
    modes = {m["mode"]: m for m in ev.comparison.get("modes", [])}
    for mode_name in sorted(set(base["modes"]) | set(head["modes"])):
        entry = modes.get(mode_name)
        statuses = tuple(r["modes"].get(mode_name, {}).get("status") for r in (base, head))
        if entry is None:
            if None not in statuses:  # in both runs: compare must show it
                problems.append(f"{mode_name}: missing from the comparison")
            continue
        shown = (entry.get("base_status"), entry.get("head_status"))
        if shown != statuses:
            problems.append(f"{mode_name}: status {shown}, the records say {statuses}")
        if statuses != ("ok", "ok"):
            continue
        metrics = {x["metric"]: x for x in entry.get("metrics", [])}
        expected: dict[str, tuple[Any, Any]] = {
            metric: tuple(  # type: ignore[misc]
                raw(ev, name, label, mode_name).per_step()[what] for label in COMPARED
            )
            for metric, what in COUNTED
        }
        b_mode, h_mode = base["modes"][mode_name], head["modes"][mode_name]
        expected["latency_median_ms"] = (
            (b_mode.get("latency_ms") or {}).get("median"),
            (h_mode.get("latency_ms") or {}).get("median"),
        )
        expected["peak_memory_bytes"] = (
            (b_mode.get("peak_memory") or {}).get("bytes"),
            (h_mode.get("peak_memory") or {}).get("bytes"),
        )
        for metric, (want_base, want_head) in expected.items():
            got = metrics.get(metric)
            if got is None:
                problems.append(f"{mode_name}: no {metric}")
                continue
            if not (_same(got.get("base"), want_base) and _same(got.get("head"), want_head)):
                problems.append(
                    f"{mode_name} {metric}: {got.get('base')} -> {got.get('head')}, the runs "
                    f"say {want_base} -> {want_head}"
                )
            elif (
                want_base is not None
                and want_head is not None
                and not _same(got.get("change"), want_head - want_base)
            ):
                problems.append(f"{mode_name} {metric}: change {got.get('change')}")
        compared.append(mode_name)
    detail = (
        f"{base_label} -> {head_label}: {len(compared)} modes' kernels and launches (raw "
        f"traces), latency and peak memory (records) and their changes: {', '.join(compared)}"
    )
    if not compared:
        problems.append("no mode compared")
    return [verdict(name, problems, detail)]


_ROW = re.compile(
    r"^\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|\s*([^|]*?)\s*\|\s*([^|]*?)\s*\|\s*([^|]*?)\s*\|"
)
_KERNELS = re.compile(r"^(?:(\d+) → )?(\d+) \(launches (?:(\d+) → )?(\d+)\)$")
_CHANGE = re.compile(r"^(±0|[+-]\d+)% (measured|modeled)")
_SPEEDUP = re.compile(r"(\d+\.\d+)x")


def _headline_rows(summary: str) -> dict[str, list[str]]:
    """summary.md's first table: mode -> its cells (status, kernels, bytes, speedup)."""
    rows: dict[str, list[str]] = {}
    for line in summary.splitlines():
        m = _ROW.match(line)
        if m is None or m.group(1) in ("mode", ":---"):
            if rows:
                break  # the headline table ended
            continue
        rows[m.group(1)] = [m.group(i) for i in range(2, 6)]
    return rows


def _bytes_expected(mode: JSON, eager: JSON) -> tuple[int, str]:
    """The traffic change against eager as the check computes it: Nsight Compute's totals where
    both modes have them, else the modeled ones."""
    m, e = measured(mode), measured(eager)
    if m is not None and e is not None and m.get("total") and e.get("total"):
        pair, source = (int(m["total"]), int(e["total"])), "measured"
    else:
        b, eb = mode["bytes"], eager["bytes"]
        pair = (int(b["read"]) + int(b["written"]), int(eb["read"]) + int(eb["written"]))
        source = "modeled"
    return round((pair[0] - pair[1]) / pair[1] * 100) if pair[1] else 0, source


def _rendered_row(
    ev: Evidence, name: str, record: JSON, mode_name: str, cells: list[str]
) -> list[str]:
    status, kernels, traffic, speedup = cells
    mode, eager = record["modes"][mode_name], record["modes"]["eager"]
    problems = []
    if status != "ok":
        problems.append(f"{mode_name}: status {status!r}")
    k = _KERNELS.match(kernels)
    counted = [raw(ev, name, RENDERED, m).per_step() for m in ("eager", mode_name)]
    want: tuple[float | None, ...]
    if mode_name == "eager":
        want = (None, counted[0]["kernels"], None, counted[0]["launches"])
    else:
        want = (
            counted[0]["kernels"], counted[1]["kernels"], counted[0]["launches"],
            counted[1]["launches"],
        )  # fmt: skip
    got = None if k is None else tuple(None if g is None else float(g) for g in k.groups())
    if got != want:
        problems.append(f"{mode_name}: kernels {kernels!r}, the trace counts {want}")
    if mode_name != "eager":
        change, source = _bytes_expected(mode, eager)
        c = _CHANGE.match(traffic)
        shown = None if c is None else (0 if c.group(1) == "±0" else int(c.group(1)), c.group(2))
        if shown != (change, source):
            problems.append(f"{mode_name}: bytes {traffic!r}, {source} totals say {change:+d}%")
        sp = mode.get("speedup_vs_eager") or {}
        s = _SPEEDUP.search(speedup)
        inconclusive = bool(sp.get("inconclusive"))
        if s is None or sp.get("median") is None or float(s.group(1)) != round(sp["median"], 2):
            problems.append(f"{mode_name}: speedup {speedup!r}, recorded {sp.get('median')}")
        elif speedup.startswith("inconclusive") != inconclusive:
            problems.append(f"{mode_name}: speedup {speedup!r}, inconclusive {inconclusive}")
    return problems


@check
def render_outputs(ev: Evidence) -> list[Result]:
    """`profreport render` of a run: its headline per mode shows the raw trace's kernels and
    launches per step, the traffic change Nsight Compute's totals give (modeled where there are
    none) and the recorded speedup; report.html names the device and every mode."""
    name = f"{RENDERED}.render"
    if ev.rendered is None:
        return no_output(name, ev, "render", "report rendered")
    record, _ = needed(ev, name, RENDERED)
    problems = [
        f"{file} {ev.rendered.get(file, 0)} bytes (at least {size})"
        for file, size in RENDERED_MIN_BYTES.items()
        if ev.rendered.get(file, 0) < size
    ]
    if not ev.rendered_summary:
        return [fail(name, "no summary.md rendered")]
    rows = _headline_rows(ev.rendered_summary)
    for mode_name in ok_modes(record):
        cells = rows.get(mode_name)
        if cells is None:
            problems.append(f"{mode_name}: no headline row")
            continue
        problems += _rendered_row(ev, name, record, mode_name, cells)
    device = (record.get("device") or {}).get("name")
    if device and device not in ev.rendered_summary:
        problems.append(f"summary.md does not name {device}")
    sizes = ", ".join(f"{f} {s / 1e3:.0f} kB" for f, s in sorted(ev.rendered.items()))
    detail = f"headline of {len(rows)} modes against the raw traces, ncu and the record; {sizes}"
    return [verdict(name, problems, detail)]


@check
def within_budget(ev: Evidence) -> list[Result]:
    name = "steps.budget"
    late = [s.describe() for s in ev.steps.values() if s.status in ("timeout", "not run")]
    if ev.elapsed_s > ev.budget_s:
        late.append(f"{ev.elapsed_s:.0f} s in all, over the {ev.budget_s:.0f} s budget")
    detail = f"{len(ev.steps)} steps in {ev.elapsed_s:.0f} s of {ev.budget_s:.0f} s"
    return [verdict(name, late, detail)]
