"""One mode's latency in two runs: what can be called, and what cannot be judged.

Two ways, by how the runs were timed:

- `ab` timed base and head in the same rounds of the same processes: the gate reads the paired
  head/base ratios (analysis/speedups.paired_gate), combined across the processes.
- Two runs timed apart (CI jobs, commits): nothing is paired, and a process's luck moves a
  latency (issue 48: the same code's script mode 12% apart in two processes). Each run's level
  and the change between them come from its processes (analysis/processes.level_change): across
  processes when both runs timed several, else widened by what one process's luck can do. The
  machine reference is one more witness (analysis/machine_reference.MachineChange.explains): it
  can withhold a change the runs call, never create one.

A change beyond the threshold that cannot be judged is inconclusive: it neither passes nor fails,
and says why (never "ok"). Pure: (two typed latencies, options) -> MetricChange.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from profreport.analysis.comparison import MetricChange
from profreport.analysis.machine_reference import MachineChange
from profreport.analysis.paired import NOISE_BAND, beyond_resolution, resolution_note
from profreport.analysis.processes import PROCESS_ALLOWANCE, Level, LevelChange, level, level_change
from profreport.analysis.speedups import paired_gate
from profreport.format import fmt_ms, fmt_pct
from profreport.record.model import MachineLoad

METRIC = "latency_median_ms"


def pct_limit(limit_pct: float | None) -> str | None:
    """A relative limit as a metric states it ("+5%"; None: not gated)."""
    return None if limit_pct is None else f"+{limit_pct:g}%"


def latency_change(
    b_groups: Sequence[Sequence[float]],
    h_groups: Sequence[Sequence[float]],
    limit_pct: float | None,
    resamples: int,
    noise: list[str],
    paired_loads: Sequence[MachineLoad | None] | None,
    machine: MachineChange | None,
    noise_band: float = NOISE_BAND,
) -> MetricChange:
    """The latency metric of one mode from its blocks in each of base's and head's timing
    processes (speedups.mode_processes): paired (`paired_loads`: `ab`, one machine load per
    process) or across two runs (`machine`: their references compared, or None); `noise`: the
    runs' own noise-guard reasons for this mode, which withhold a change across runs unless its
    interval lies beyond `noise_band` (paired.busy_band of the runs' loads)."""
    if not b_groups or not h_groups:
        return MetricChange.of(
            None, None, metric=METRIC, source="measured", note="no timed samples"
        )
    b, h = level(b_groups, resamples), level(h_groups, resamples)
    m = MetricChange.of(
        b.estimate,
        h.estimate,
        metric=METRIC,
        source="measured",
        base_ci95=b.ci95,
        head_ci95=h.ci95,
        limit=pct_limit(limit_pct),
        base_processes=b.processes,
        head_processes=h.processes,
    )
    if paired_loads is not None:
        return _paired(m, b_groups, h_groups, limit_pct, paired_loads)
    return _across_runs(m, b, h, limit_pct, noise, machine, noise_band)


def _paired(
    m: MetricChange,
    b_groups: Sequence[Sequence[float]],
    h_groups: Sequence[Sequence[float]],
    limit_pct: float | None,
    loads: Sequence[MachineLoad | None],
) -> MetricChange:
    k = min(len(b_groups), len(h_groups))
    loads = list(loads) if len(loads) == k else [None] * k
    gate = paired_gate(b_groups[:k], h_groups[:k], limit_pct, loads)
    lo, hi = gate.ratio.ci95
    note = f"{fmt_pct(m.change_pct)}, paired head/base {gate.ratio.median:.3f} (95% CI {lo:.3f}-{hi:.3f}"
    note += f", {k} processes)" if k > 1 else ", one process)"
    widened = gate.widened and f"interval widened to nine rounds in ten: {gate.widened}"
    extras = [e for e in (resolution_note((lo, hi)), gate.unstable, widened) if e]
    if extras:
        note = f"{note}: {'; '.join(extras)}"
    if gate.inconclusive:
        note = f"latency inconclusive: {gate.inconclusive}; {note}"
    return replace(
        m,
        regression=gate.regression,
        note=note,
        inconclusive=gate.inconclusive,
        paired=gate,
        ratio_ci95=gate.ratio.ci95,
    )


def scope_text(b: Level, h: Level, found: LevelChange) -> str:
    """What a head/base interval of two runs covers."""
    if found.across:
        return f"across {b.processes} and {h.processes} processes"
    one = " and ".join(side for side, lv in (("base", b), ("head", h)) if lv.processes == 1)
    return (
        f"{one} timed one process: widened {PROCESS_ALLOWANCE:g}x either way for what a "
        "process's luck can do"
    )


def _across_runs(
    m: MetricChange,
    b: Level,
    h: Level,
    limit_pct: float | None,
    noise: list[str],
    machine: MachineChange | None,
    noise_band: float,
) -> MetricChange:
    found = level_change(b, h)
    lo, hi = found.ci95
    called = beyond_resolution(found.ci95)
    interval = f"95% CI {lo:.3f}-{hi:.3f}, {scope_text(b, h, found)}"
    numbers = f"{fmt_pct(m.change_pct)}, head/base {found.ratio:.3f} ({interval})"
    relative_pct = None
    if machine is not None:
        relative_pct = (found.ratio / machine.factor - 1) * 100
        numbers += (
            f"; machine reference head/base {machine.factor:.3f} ({fmt_pct(relative_pct)} "
            "relative to it: shown, not gated)"
        )
    why: list[str] = []
    if called and machine is not None and machine.explains(found.ci95):
        why.append(f"the machine changed (head vs base: {machine.parts_text}) as far")
    if noise and not (lo > noise_band or hi < 1 / noise_band):  # noisy timing: only huge
        why += noise
    beyond_limit = limit_pct is not None and m.grew_beyond_pct(limit_pct)
    regression = beyond_limit and called > 0 and not why
    if beyond_limit and not regression and not why:
        why.append(
            f"head/base {found.ratio:.3f} is beyond the {pct_limit(limit_pct)} limit, but not "
            f"beyond what the runs can tell apart ({interval})"
        )
    if why:
        note = f"latency inconclusive: {'; '.join(why)}; {numbers}"
    elif called:
        note = f"{numbers}: {'slower' if called > 0 else 'faster'} in head"
    else:
        note = f"{numbers}: no change beyond what the runs can tell apart"
    return replace(
        m,
        regression=regression,
        note=note,
        inconclusive="; ".join(why) or None,
        relative_change_pct=relative_pct,
        ratio_ci95=found.ci95,
    )


def regression_message(mode: str, m: MetricChange) -> str:
    """The line a latency regression prints."""
    moved = f"{mode}: latency median {fmt_ms(m.base)} -> {fmt_ms(m.head)}"
    limit = f"limit {m.limit}"
    if m.paired is not None:
        return (
            f"{moved} ({fmt_pct(m.change_pct)}), {limit}, paired head/base "
            f"{m.paired.ratio.median:.3f}, 95% CI from {m.paired.ratio.ci95[0]:.3f}"
        )
    lo = "" if m.ratio_ci95 is None else f", head/base 95% CI from {m.ratio_ci95[0]:.3f}"
    return f"{moved} ({fmt_pct(m.change_pct)}), {limit}{lo}"
