"""View-model text for the timing noise guard and the paired speedup cell."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from profreport.record.model import Speedup


def speedup_cell(sp: Speedup | None) -> str:
    """'1.23x (1.10-1.31)', 'inconclusive 1.05x (0.80-1.30)', or 'baseline' (no speedup: eager,
    or a record without one)."""
    if sp is None or not sp.has("median"):  # none, or an empty one (`{}` in its document)
        return "baseline"
    text = f"{sp.median:.2f}x ({sp.ci95[0]:.2f}-{sp.ci95[1]:.2f})"
    return f"inconclusive {text}" if sp.inconclusive else text


def _pct(x: Any) -> str:
    return "unknown" if x is None else f"{x:.0%}"


def noise_text(noise: Mapping[str, Any] | None) -> str:
    """One paragraph: what the guard measured, its limits, and its decision."""
    if not noise:
        return "not recorded (a record written before the noise guard)."
    load = noise.get("load") or {}
    th = noise.get("thresholds") or {}
    base = (noise.get("signals") or {}).get("baseline") or {}
    parts = [
        f"machine ({load.get('source', 'unknown')}): other processes used "
        f"{_pct(load.get('other_busy_share'))} of all CPU time while timing (limit "
        f"{_pct(th.get('max_other_busy_share'))}), load average "
        f"{load.get('load1_before', 'unknown')} before and {load.get('load1_after', 'unknown')} "
        "after",
    ]
    if load.get("children_busy_share") is not None:  # runs recorded before have no such share
        parts.append(
            "profreport's own child processes (compile workers, compilers; not counted as "
            f"other processes) used {_pct(load['children_busy_share'])}"
        )
    if base.get("rounds"):
        parts.append(
            f"eager over {base['rounds']} rounds: blocks spread {_pct(base.get('block_spread'))} "
            f"(IQR/median, limit {_pct(th.get('max_block_spread'))}), "
            f"{_pct(base.get('moved_rounds'))} of rounds moved more than "
            f"{_pct(th.get('round_move'))} from the median (limit "
            f"{_pct(th.get('max_moved_rounds'))}), "
            + ("two peaks" if base.get("two_peaks") else "one peak")
        )
    for name, mode in ((noise.get("signals") or {}).get("modes") or {}).items():
        parts.append(
            f"{name}: paired ratios spread {_pct(mode.get('ratio_spread'))} (limit "
            f"{_pct(th.get('max_ratio_spread'))})"
        )
    decision = (
        "tripped: a change is reported as inconclusive unless its 95% interval and three "
        f"rounds in four (the ratios' quartile) are beyond {th.get('noise_band', 1.5)}x the "
        "same way"
        if noise.get("tripped")
        else "quiet: directions are stated"
    )
    two_peaks = (
        "Two peaks = the sorted log-blocks split into two groups of at least "
        f"{_pct(th.get('min_peak_share'))} each with a gap wider than "
        f"{th.get('peak_gap_factor')}x the wider group's IQR."
    )
    return "; ".join(parts) + f". Decision: {decision}. {two_peaks}"
