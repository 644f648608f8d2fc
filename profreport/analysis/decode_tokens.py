"""Per-token numbers of a decode run (pure): what each mode costs per generated token against the
bandwidth floor, the number LLM serving quotes.

One decode step generates one token per sequence (batch B), so a step's kernels, launches and
modeled bytes are per token at batch 1 and per B tokens otherwise. The floor is the traffic no
mode can avoid, eager's modeled weights read + KV cache read + cache update written
(record.model.DecodeInfo), at the machine's measured copy bandwidth; the achieved fraction is
floor / measured latency. Host overhead is the profiled median step's time outside kernels (the
profiler's cost removed: analysis/profiler_cost), and the mode's bound is the time breakdown's.
"""

from __future__ import annotations

from profreport.record.model import DecodeTokens, OkMode, Run, TokenCost

OVERHEAD_BOUND = 0.5  # host overhead share of the step from which decode is called overhead-bound


def _host_share(mode: OkMode) -> float | None:
    step = mode.median_step
    if step is None or step.total_us <= 0:
        return None
    return max(0.0, 1.0 - step.work_us / step.total_us)


def _row(name: str, mode: OkMode, batch: int, floor_ms: float | None) -> TokenCost:
    latency = mode.latency_ms.median if mode.latency_ms is not None else None
    sp = mode.speedup_vs_eager
    low, high = (None, None) if sp is None else sp.ci95
    return TokenCost(
        mode=name,
        kernels=mode.kernels.per_step,
        launches=mode.kernels.launches,
        bytes=mode.bytes.traffic,
        latency_ms=latency,
        speedup=None if sp is None else sp.median,
        speedup_low=low,
        speedup_high=high,
        tokens_per_s=batch * 1000.0 / latency if latency else None,
        achieved=floor_ms / latency if latency and floor_ms is not None else None,
        host_share=_host_share(mode),
        bound=mode.time_findings.bound if mode.time_findings is not None else None,
    )


def overhead_bound(row: TokenCost) -> bool | None:
    """Whether decode is overhead-bound in this mode (else bound by its kernels): the time
    breakdown's bound where it was derived (host- or launch-bound), the host share alone
    (>= OVERHEAD_BOUND) otherwise; None where no profiled step says. The report's words and the
    sweep's crossing over context both read this one classification."""
    if row.host_share is None:
        return None
    if row.bound:
        return row.bound in ("host-bound", "launch-bound")
    return row.host_share >= OVERHEAD_BOUND


def _words(rows: tuple[TokenCost, ...]) -> tuple[str, ...]:
    words = []
    for row in rows:
        if row.host_share is None:
            continue
        share = f"{row.host_share:.0%} of its profiled step outside kernels"
        # the time breakdown's bound where it was derived; else the share alone decides
        by = f"the time breakdown's {row.bound}: " if row.bound else ""
        if overhead_bound(row):
            words.append(
                f"{row.mode}: decode is overhead-bound ({by}{share}, {row.kernels} kernels a "
                "token): fewer kernels and launches (fusion, CUDA graphs) pay here"
            )
        elif row.achieved is not None:
            words.append(
                f"{row.mode}: decode is bound by its kernels ({by}{share}); it runs at "
                f"{row.achieved:.0%} of the bandwidth floor"
            )
    eager = next((r for r in rows if r.mode == "eager"), None)
    for row in rows:
        if eager is None or row is eager or row.host_share is None or eager.host_share is None:
            continue
        removed = eager.kernels - row.kernels
        words.append(
            f"{row.mode} removed {removed} of eager's {eager.kernels} kernels a token; host "
            f"overhead {eager.host_share:.0%} → {row.host_share:.0%} of the step"
        )
    return tuple(words)


def decode_tokens(run: Run) -> DecodeTokens | None:
    """The per-token table of a decode run (None: the run is not one)."""
    info = run.model.decode
    if info is None:
        return None
    batch = run.model.inputs[0].shape[0] if run.model.inputs else 1  # the token ids' rows
    floor_bytes = info.weight_bytes + info.kv_read_bytes + info.cache_written_bytes
    measured = run.ceilings.memory_bandwidth if run.ceilings is not None else None
    bandwidth = measured.value if measured is not None else None
    floor_ms = floor_bytes / bandwidth * 1000.0 if bandwidth else None
    rows = tuple(_row(name, mode, batch, floor_ms) for name, mode in run.ok_modes.items())
    return DecodeTokens(
        batch=batch,
        floor_bytes=floor_bytes,
        floor_ms=floor_ms,
        bandwidth=bandwidth,
        rows=rows,
        words=_words(rows),
    )
