"""The decode section of a run's reports (report.html, summary.md, the terminal): the per-token
table of analysis/decode_tokens, formatted, each number with its source and unit."""

from __future__ import annotations

from typing import Any

from profreport.format import fmt_bytes, fmt_ms
from profreport.record.model import DecodeInfo, DecodeTokens, Run

HEADER = [
    "mode",
    "kernels/token (profiled)",
    "bytes/token (modeled)",
    "latency/token (measured)",
    "vs eager (95% CI)",
    "tokens/s",
    "of bandwidth floor",
    "host overhead (profiled)",
]


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def _method(d: DecodeInfo, t: DecodeTokens) -> str:
    per = "token" if t.batch == 1 else f"step ({t.batch} tokens, one per sequence)"
    bandwidth = f"{t.bandwidth / 1e9:.1f} GB/s" if t.bandwidth else "(not measured)"
    last = d.position + max(len(d.greedy_tokens[0]) if d.greedy_tokens else 0, 1) - 1
    return (
        f"Each step decodes one greedy token per sequence at position {d.position} (a prompt of "
        f"{d.context} tokens prefilled outside the profiled and timed region; a static KV cache "
        f"of {d.cache_len} slots, {fmt_bytes(d.kv_cache_bytes)}). Every profiled and timed step "
        f"writes slot {d.position} again and attends to the whole static cache, masked, so its "
        f"cost does not depend on the position. Numbers are per {per}. The floor is eager's "
        f"modeled weights {fmt_bytes(d.weight_bytes)} + KV cache read "
        f"{fmt_bytes(d.kv_read_bytes)} + cache update written {fmt_bytes(d.cache_written_bytes)} "
        f"(activations: {fmt_bytes(d.total_bytes - t.floor_bytes)} more) at the measured copy "
        f"bandwidth {bandwidth}; achieved = floor / measured latency. Greedy check: each mode's "
        f"tokens at positions {d.position}-{last} against eager's."
    )


def decode_view(run: Run) -> dict[str, Any] | None:
    """The decode section's view-model (None: not a decode run)."""
    t, d = run.decode_tokens, run.model.decode
    if t is None or d is None:
        return None
    rows = []
    for r in t.rows:
        speedup = "baseline" if r.mode == "eager" else "n/a"
        if r.speedup is not None and r.mode != "eager":
            speedup = f"{r.speedup:.2f}x ({r.speedup_low:.2f}-{r.speedup_high:.2f})"
        kernels = str(r.kernels) + (f" ({r.launches} launches)" if r.launches else "")
        tokens = "n/a" if r.tokens_per_s is None else f"{r.tokens_per_s:.1f}"
        cells = [fmt_bytes(r.bytes), fmt_ms(r.latency_ms), speedup, tokens]
        rows.append([r.mode, kernels, *cells, _pct(r.achieved), _pct(r.host_share)])
    floor = f"{fmt_ms(t.floor_ms)}" if t.floor_ms is not None else "n/a (no measured bandwidth)"
    return {
        "header": HEADER,
        "rows": rows,
        "floor": f"bandwidth floor {floor} a step ({fmt_bytes(t.floor_bytes)} modeled)",
        "words": list(t.words),
        "method": _method(d, t),
    }
