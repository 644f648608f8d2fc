"""View-model text for the timing noise guard and the paired speedup cell."""

from __future__ import annotations

from profreport.record.model import (
    BaselineSignals,
    MachineLoad,
    NoiseSignals,
    NoiseThresholds,
    Speedup,
    TimingNoise,
)


def speedup_cell(sp: Speedup | None) -> str:
    """'1.23x (1.10-1.31)', 'inconclusive 1.05x (0.80-1.30)', or 'baseline' (no speedup: eager,
    or a record without one)."""
    if sp is None or not sp.has("median"):  # none, or an empty one (`{}` in its document)
        return "baseline"
    text = f"{sp.median:.2f}x ({sp.ci95[0]:.2f}-{sp.ci95[1]:.2f})"
    return f"inconclusive {text}" if sp.inconclusive else text


def _pct(x: float | None) -> str:
    return "unknown" if x is None else f"{x:.0%}"


def noise_text(noise: TimingNoise | None) -> str:
    """One paragraph: what the guard measured, its limits, and its decision."""
    if noise is None or not noise.to_json():
        return "not recorded (a record written before the noise guard)."
    load = noise.load or MachineLoad(json_keys=())
    th = noise.thresholds or NoiseThresholds(json_keys=())
    signals = noise.signals or NoiseSignals()
    base = signals.baseline or BaselineSignals(json_keys=())
    parts = [
        f"machine ({load.source if load.has('source') else 'unknown'}): other processes used "
        f"{_pct(load.other_busy_share)} of all CPU time while timing (limit "
        f"{_pct(_threshold(th, 'max_other_busy_share'))}), load "
        f"average {_known(load, 'load1_before')} before and {_known(load, 'load1_after')} after",
    ]
    if load.children_busy_share is not None:  # runs recorded before have no such share
        parts.append(
            "profreport's own child processes (compile workers, compilers; not counted as "
            f"other processes) used {_pct(load.children_busy_share)}"
        )
    if base.rounds:
        parts.append(
            f"eager over {base.rounds} rounds (context: the paired ratios cancel a level both "
            f"blocks of a round share): blocks spread {_pct(base.block_spread)} (IQR/median), "
            f"{_pct(base.moved_rounds)} of rounds moved more than "
            f"{_pct(_threshold(th, 'round_move'))} from the median, "
            + ("two peaks" if base.two_peaks else "one peak")
        )
    moved = _threshold(th, "ratio_move")
    for name, mode in (signals.modes or {}).items():
        parts.append(
            f"{name}: paired ratios spread {_pct(mode.ratio_spread)} (limit "
            f"{_pct(_threshold(th, 'max_ratio_spread'))})"
        )
    if moved is not None:
        parts.append(
            f"judged on each mode's ratios: their spread, two peaks, rounds whose ratio moved "
            f"more than {_pct(moved)} from the median (limit "
            f"{_pct(_threshold(th, 'max_moved_ratios'))} of rounds), other processes' CPU and "
            "too few rounds"
        )
    band = th.noise_band if th.has("noise_band") else 1.5
    decision = (
        "tripped: a busy machine or too few rounds make a change inconclusive unless its 95% "
        f"interval and three rounds in four (the ratios' quartile) are beyond {band}x the same "
        "way; a mode's ratios' spread, two peaks or moved rounds widen its interval to the "
        "ratios' 10th-90th percentiles (a call then needs nine rounds in ten on its side)"
        if noise.tripped
        else "quiet: directions are stated"
    )
    if noise.process_loads:
        parts.append(
            f"timed in {len(noise.process_loads)} processes (the busiest one's load above)"
        )
    two_peaks = (
        "Two peaks = the sorted log-blocks split into two groups of at least "
        f"{_pct(_threshold(th, 'min_peak_share'))} each with a gap wider than "
        f"{_threshold(th, 'peak_gap_factor')}x the wider group's IQR."
    )
    return "; ".join(parts) + f". Decision: {decision}. {two_peaks}"


def _threshold(th: NoiseThresholds, name: str) -> float | None:
    """A limit the record holds (None: a record written before it existed)."""
    value: float | None = getattr(th, name) if th.has(name) else None
    return value


def _known(load: MachineLoad, name: str) -> str:
    return str(getattr(load, name)) if load.has(name) else "unknown"
