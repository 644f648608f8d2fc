"""The headline of a run: one row per mode with the five answers a reviewer reads first (status,
kernels eager -> mode, bytes change, speedup, output check), each already worded and given a tone
(good / bad / neutral / muted) that the page colours from render/palette.py.

The same rows head report.html, summary.md and `generate`'s terminal table, so the three agree."""

from __future__ import annotations

from typing import Literal, TypedDict

from profreport.analysis.paired import RESOLUTION
from profreport.format import fmt_bytes, signed_pct
from profreport.record.model import ModeResult, OkMode, Run
from profreport.render.palette import mode_color
from profreport.text import one_line

Tone = Literal["good", "bad", "neutral", "muted"]

# A failed mode's error in the headline: its first words, the whole line in the mode's section.
ERROR_CHARS = 160


class HeadlineCell(TypedDict):
    text: str  # the answer: "47 → 20", "-38%", "1.24x", "inconclusive", "ok"
    detail: str  # what it rests on: "modeled", "95% CI 1.04-1.31", "max abs err 2.4e-06"
    tone: Tone


class HeadlineRow(TypedDict):
    mode: str
    color: str  # the mode's chart colour
    status: HeadlineCell
    kernels: HeadlineCell | None  # None: the mode did not run
    launches: HeadlineCell | None  # None: not CUDA, or the mode did not run
    bytes: HeadlineCell | None
    speedup: HeadlineCell | None
    output: HeadlineCell | None
    error: str  # a mode that did not run: why, cut at a word


class Headline(TypedDict):
    rows: list[HeadlineRow]
    show_launches: bool
    kernel_label: str  # "CPU kernels" | "device kernels"


def _cell(text: str, detail: str = "", tone: Tone = "neutral") -> HeadlineCell:
    return {"text": text, "detail": detail, "tone": tone}


def _count_cell(eager: int | None, mode: int, unit: str) -> HeadlineCell:
    if eager is None:  # eager itself, or no eager to compare with
        return _cell(str(mode), f"{unit} per step, profiler")
    tone: Tone = "good" if mode < eager else "bad" if mode > eager else "neutral"  # fewer: better
    return _cell(f"{eager} → {mode}", f"{unit} per step, profiler", tone)


def short_text(text: str, limit: int) -> str:
    """`text` on one line, cut at the last word boundary before `limit` characters (an ellipsis
    says it was cut); a reader never sees half a word."""
    line = one_line(text)
    if len(line) <= limit:
        return line
    cut = line[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def _bytes_cell(mode: OkMode, eager: OkMode | None) -> HeadlineCell:
    """The traffic change against eager from the one source the verdict quotes too (the mode's
    `traffic` finding: measured by Nsight Compute where both modes have it, else modeled);
    eager (or a run without eager) shows its own total. The detail starts with the source,
    which the Markdown cell keeps, and says when the modeled change disagrees."""
    if eager is None:
        measured = None if mode.bytes.measured is None else mode.bytes.measured.dram_bytes
        if measured is not None:
            return _cell(fmt_bytes(measured), "measured, per step")
        return _cell(fmt_bytes(mode.bytes.read + mode.bytes.written), "modeled, per step")
    change = mode.traffic
    if change is None:
        return _cell("n/a", "partial model: not comparable", "muted")
    percent = change.percent
    if percent is None:
        return _cell("n/a", f"{change.source}: eager moved no bytes", "muted")
    source: str = change.source
    if change.differs and change.modeled_percent is not None:
        source += f" (modeled {signed_pct(change.modeled_percent)}: see the verdict)"
    detail = f"{source}, {fmt_bytes(change.eager_bytes)} → {fmt_bytes(change.mode_bytes)}"
    rounded = round(percent)
    if rounded == 0:
        return _cell("±0%", detail)
    tone: Tone = "neutral" if change.differs else "good" if rounded < 0 else "bad"
    return _cell(f"{rounded:+d}%", detail, tone)


def _speedup_cell(mode: ModeResult) -> HeadlineCell:
    sp = mode.speedup_vs_eager
    if sp is None or not sp.has("median"):
        return _cell("n/a", "not timed", "muted")
    lo, hi = sp.ci95
    ci = f"95% CI {lo:.2f}-{hi:.2f}, measured in {sp.covers}"
    call = mode.speedup_call
    if call == "inconclusive":
        return _cell("inconclusive", f"{sp.median:.2f}x, {ci}", "muted")
    if call in ("faster", "slower"):
        return _cell(f"{sp.median:.2f}x", ci, "good" if call == "faster" else "bad")
    if call == "within resolution":  # off 1, but not beyond what identical code can show
        return _cell(f"{sp.median:.2f}x", f"no change beyond {RESOLUTION:.0%} is certain: {ci}")
    return _cell(f"{sp.median:.2f}x", f"no change: {ci}")


def _output_cell(name: str, mode: ModeResult) -> HeadlineCell:
    if name == "eager":
        return _cell("reference", "", "muted")
    check = mode.output_check
    if check is None or not check.to_json():
        return _cell("not checked", "", "muted")
    if check.within_tolerance is None:
        return _cell("not compared", check.note or "", "muted")
    err = "" if check.max_abs_err is None else f"max abs err {check.max_abs_err:.2g}"
    if check.greedy_equal is not None:  # a decode step: its greedy tokens against eager's
        same = f"greedy tokens equal eager's over {check.greedy_steps} steps"
        if not check.greedy_equal:
            same = f"greedy token differs from eager's at step {check.greedy_first_difference}"
        err = "; ".join(p for p in (err, same) if p)
        if not check.greedy_equal:
            return _cell("DIFFERS", err, "bad")
    if check.within_tolerance:
        return _cell("ok", err, "good")
    return _cell("DIFFERS", "; ".join(p for p in (err, check.note or "") if p), "bad")


def _row(name: str, mode: ModeResult, eager: ModeResult | None, cuda: bool) -> HeadlineRow:
    row: HeadlineRow = {
        "mode": name,
        "color": mode_color(name),
        "status": _cell(mode.status, "", "bad" if mode.status == "failed" else "muted"),
        "kernels": None,
        "launches": None,
        "bytes": None,
        "speedup": None,
        "output": None,
        "error": short_text(mode.error or "no error recorded", ERROR_CHARS),
    }
    if not isinstance(mode, OkMode):
        return row
    baseline = eager if name != "eager" and isinstance(eager, OkMode) else None
    k, b = mode.kernels, baseline.kernels if baseline else None
    row["status"], row["error"] = _cell("ok", "", "good"), ""
    row["kernels"] = _count_cell(b.per_step if b else None, k.per_step, "kernels")
    if cuda:
        row["launches"] = _count_cell(b.launches if b else None, k.launches, "launches")
    row["bytes"] = _bytes_cell(mode, baseline)
    row["speedup"] = _cell("baseline", "", "muted") if name == "eager" else _speedup_cell(mode)
    row["output"] = _output_cell(name, mode)
    return row


def headline(run: Run) -> Headline:
    """The headline rows of a run with findings, in the run's mode order."""
    cuda = run.device.type == "cuda"
    eager = run.modes.get("eager")
    return {
        "rows": [_row(name, mode, eager, cuda) for name, mode in run.modes.items()],
        "show_launches": cuda,
        "kernel_label": "device kernels" if cuda else "CPU kernels",
    }
