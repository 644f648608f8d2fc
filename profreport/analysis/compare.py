"""Compare two run records of the same model: what changed per mode, and what crossed a threshold.

A pure function over two records. Kernels and launches come from the profiler, bytes from the
model, latency from the timed samples: each median gets its own 95% bootstrap interval, and a
latency change counts as a regression only when it exceeds the threshold *and* the two intervals
do not overlap, so noise never fails a gate.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from profreport.analysis.latency import bootstrap_median_ci
from profreport.analysis.paired import NOISE_BAND, paired_gate, record_noise
from profreport.format import fmt_bytes, fmt_ms, fmt_pct

SCHEMA = "profreport.compare/1"


class CompareError(ValueError):
    """The two records cannot be compared (different model or device type); one line."""


@dataclass(frozen=True)
class Thresholds:
    max_kernel_increase: int | None = None  # kernels per step, absolute
    max_bytes_increase_pct: float | None = None  # modeled read + written bytes per step
    max_latency_regression_pct: float | None = None  # latency median
    max_peak_memory_increase_pct: float | None = None  # peak memory of one call

    @property
    def any_set(self) -> bool:
        return any(
            v is not None
            for v in (
                self.max_kernel_increase,
                self.max_bytes_increase_pct,
                self.max_latency_regression_pct,
                self.max_peak_memory_increase_pct,
            )
        )


@dataclass(frozen=True)
class MetricChange:
    metric: str  # kernels_per_step | launches_per_step | bytes_per_step | latency_median_ms
    # | peak_memory_bytes
    source: str  # profiler | modeled | measured
    base: float | None
    head: float | None
    change: float | None  # head - base
    change_pct: float | None  # relative to base; None when base is 0 or a side is missing
    base_ci95: tuple[float, float] | None = None
    head_ci95: tuple[float, float] | None = None
    limit: str | None = None  # the threshold applied, as text ("+2 kernels", "+5%")
    regression: bool = False
    note: str = ""
    # Set when the noise guard tripped: the gate neither passed nor failed this metric.
    inconclusive: str | None = None
    paired: dict[str, Any] | None = None  # `ab`: head/base per-round ratio and its interval


@dataclass(frozen=True)
class ModeComparison:
    mode: str
    base_status: str
    head_status: str
    metrics: list[MetricChange] = field(default_factory=list)

    def metric(self, name: str) -> MetricChange | None:
        return next((m for m in self.metrics if m.metric == name), None)


@dataclass(frozen=True)
class Regression:
    mode: str
    metric: str
    message: str


@dataclass(frozen=True)
class RunIdentity:
    label: str  # where the record came from (a path), as the caller names it
    created_utc: str | None
    torch: str | None
    device_name: str | None


@dataclass(frozen=True)
class Comparison:
    model: str
    device_type: str
    base: RunIdentity
    head: RunIdentity
    thresholds: Thresholds
    modes: list[ModeComparison]
    only_in_base: list[str]
    only_in_head: list[str]
    warnings: list[str]
    regressions: list[Regression]

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    @property
    def inconclusive(self) -> list[str]:
        """`<mode>: latency inconclusive: <why>` for each latency the gate could not judge."""
        return [
            f"{mc.mode}: latency inconclusive: {m.inconclusive}"
            for mc in self.modes
            for m in mc.metrics
            if m.inconclusive
        ]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data = {
            "schema": SCHEMA,
            **data,
            "regressed": self.regressed,
            "inconclusive": self.inconclusive,
        }
        return data


def _pct(base: float | None, head: float | None) -> float | None:
    if base is None or head is None or base == 0:
        return None
    return (head - base) / base * 100.0


def _identity(record: dict[str, Any], label: str) -> RunIdentity:
    return RunIdentity(
        label=label,
        created_utc=record.get("created_utc"),
        torch=record.get("env", {}).get("torch"),
        device_name=record.get("device", {}).get("name"),
    )


def _setup_warnings(base: dict[str, Any], head: dict[str, Any]) -> list[str]:
    """Differences that make numbers less comparable but are legitimate things to compare."""
    out = []
    checks = [
        ("inputs", lambda r: r["model"].get("inputs")),
        ("dtype", lambda r: r["model"].get("dtype")),
        ("memory format", lambda r: r["model"].get("memory_format")),
        ("device", lambda r: r["device"].get("name")),
        ("torch", lambda r: r["env"].get("torch")),
        ("intra-op threads", lambda r: r["env"].get("threads")),
    ]
    for what, get in checks:
        a, b = get(base), get(head)
        if a != b:
            out.append(f"{what} differ: base {a!r}, head {b!r}")
    return out


def _kernels(base: dict, head: dict, limit: int | None) -> MetricChange:
    b, h = base["kernels"]["per_step"], head["kernels"]["per_step"]
    regression = limit is not None and h - b > limit
    return MetricChange(
        "kernels_per_step",
        "profiler",
        b,
        h,
        h - b,
        _pct(b, h),
        limit=None if limit is None else f"+{limit} kernels",
        regression=regression,
    )


def _launches(base: dict, head: dict) -> MetricChange:
    b, h = base["kernels"].get("launches", 0), head["kernels"].get("launches", 0)
    return MetricChange("launches_per_step", "profiler", b, h, h - b, _pct(b, h))


def _bytes(base: dict, head: dict, limit_pct: float | None) -> MetricChange:
    b = base["bytes"]["read"] + base["bytes"]["written"]
    h = head["bytes"]["read"] + head["bytes"]["written"]
    pct = _pct(b, h)
    partial = [
        side for side, m in (("base", base), ("head", head)) if m["bytes"].get("not_modeled")
    ]
    regression = False
    if limit_pct is not None:
        # From nothing to something is an unbounded increase.
        regression = (pct > limit_pct) if pct is not None else (b == 0 and h > 0)
    return MetricChange(
        "bytes_per_step",
        "modeled",
        b,
        h,
        h - b,
        pct,
        limit=None if limit_pct is None else f"+{limit_pct:g}%",
        regression=regression,
        note=f"partial in {' and '.join(partial)} (some kernels not modeled)" if partial else "",
    )


def _peak_memory(base: dict, head: dict, limit_pct: float | None) -> MetricChange:
    """Peak memory of one call (capture/peak_memory); gated like modeled bytes."""
    b_peak, h_peak = base.get("peak_memory") or {}, head.get("peak_memory") or {}
    b, h = b_peak.get("bytes"), h_peak.get("bytes")
    source = h_peak.get("source") or b_peak.get("source") or "measured"
    if b is None or h is None:
        missing = " and ".join(s for s, v in (("base", b), ("head", h)) if v is None)
        return MetricChange(
            "peak_memory_bytes", source, b, h, None, None, note=f"not measured in {missing}"
        )
    pct = _pct(b, h)
    regression = False
    if limit_pct is not None:
        regression = (pct > limit_pct) if pct is not None else (b == 0 and h > 0)
    note = "" if b_peak.get("source") == h_peak.get("source") else "measured differently"
    return MetricChange(
        "peak_memory_bytes",
        source,
        b,
        h,
        h - b,
        pct,
        limit=None if limit_pct is None else f"+{limit_pct:g}%",
        regression=regression,
        note=note,
    )


def _latency(
    base: dict,
    head: dict,
    limit_pct: float | None,
    resamples: int,
    noise: list[str],
    load: dict[str, Any] | None,
) -> MetricChange:
    bs = (base.get("latency_ms") or {}).get("samples") or []
    hs = (head.get("latency_ms") or {}).get("samples") or []
    if not bs or not hs:
        return MetricChange(
            "latency_median_ms", "measured", None, None, None, None, note="no timed samples"
        )
    b_med = base["latency_ms"]["median"]
    h_med = head["latency_ms"]["median"]
    b_ci = bootstrap_median_ci(bs, resamples=resamples)
    h_ci = bootstrap_median_ci(hs, resamples=resamples)
    pct = _pct(b_med, h_med)
    inconclusive, paired = None, None
    if load is not None:  # base and head timed in the same rounds (`ab`)
        gate = paired_gate(bs, hs, limit_pct, load)
        lo, hi = gate.ratio.ci95
        note = f"paired head/base {gate.ratio.median:.3f} (95% CI {lo:.3f}-{hi:.3f})"
        regression, inconclusive, paired = gate.regression, gate.inconclusive, gate.to_dict()
        if inconclusive:
            note = f"latency inconclusive: {inconclusive}; {note}"
    else:
        overlap = b_ci[0] <= h_ci[1] and h_ci[0] <= b_ci[1]
        note = "intervals overlap: within noise" if overlap else "intervals do not overlap"
        # Slower beyond the limit, and the head's whole interval lies above the base's.
        regression = (
            limit_pct is not None and pct is not None and pct > limit_pct and h_ci[0] > b_ci[1]
        )
        if noise and not h_ci[0] > b_ci[1] * NOISE_BAND:  # noisy timing: only a huge change
            inconclusive, regression = "; ".join(noise), False
            note = f"latency inconclusive: {inconclusive}"
    return MetricChange(
        "latency_median_ms",
        "measured",
        b_med,
        h_med,
        h_med - b_med,
        pct,
        base_ci95=b_ci,
        head_ci95=h_ci,
        limit=None if limit_pct is None else f"+{limit_pct:g}%",
        regression=regression,
        note=note,
        inconclusive=inconclusive,
        paired=paired,
    )


def _regression_message(mode: str, m: MetricChange) -> str:
    pct = fmt_pct(m.change_pct)
    if m.metric == "kernels_per_step":
        text = f"kernels per step {m.base:g} -> {m.head:g} ({m.change:+g}), limit {m.limit}"
    elif m.metric == "bytes_per_step":
        text = (
            f"modeled bytes per step {fmt_bytes(m.base)} -> {fmt_bytes(m.head)} ({pct}), "
            f"limit {m.limit}"
        )
    elif m.metric == "peak_memory_bytes":
        text = f"peak memory {fmt_bytes(m.base)} -> {fmt_bytes(m.head)} ({pct}), limit {m.limit}"
    elif m.paired is not None:
        lo = m.paired["ratio"]["ci95"][0]
        text = (
            f"latency median {fmt_ms(m.base)} -> {fmt_ms(m.head)} ({pct}), limit {m.limit}, "
            f"paired head/base {m.paired['ratio']['median']:.3f}, 95% CI from {lo:.3f}"
        )
    else:
        text = (
            f"latency median {fmt_ms(m.base)} -> {fmt_ms(m.head)} ({pct}), limit {m.limit}, "
            "95% intervals do not overlap"
        )
    return f"{mode}: {text}"


def compare_runs(
    base: dict[str, Any],
    head: dict[str, Any],
    thresholds: Thresholds = Thresholds(),
    base_label: str = "base",
    head_label: str = "head",
    resamples: int = 2000,
    paired_load: dict[str, Any] | None = None,
) -> Comparison:
    """Compare two validated run records; raise CompareError if they are not the same setup.

    `paired_load` (from `ab`, which timed base and head in the same rounds) switches the latency
    gate to per-round head/base ratios; the machine load it carries feeds the noise guard.
    """
    base_model, head_model = base["model"].get("name"), head["model"].get("name")
    if base_model != head_model:
        raise CompareError(f"different models: base {base_model!r}, head {head_model!r}")
    base_dev, head_dev = base["device"].get("type"), head["device"].get("type")
    if base_dev != head_dev:
        raise CompareError(f"different device types: base {base_dev!r}, head {head_dev!r}")

    modes: list[ModeComparison] = []
    regressions: list[Regression] = []
    shared = [m for m in base["modes"] if m in head["modes"]]
    for name in shared:
        b, h = base["modes"][name], head["modes"][name]
        metrics: list[MetricChange] = []
        if b["status"] == "ok" and h["status"] == "ok":
            metrics = [
                _kernels(b, h, thresholds.max_kernel_increase),
                _launches(b, h),
                _bytes(b, h, thresholds.max_bytes_increase_pct),
                _peak_memory(b, h, thresholds.max_peak_memory_increase_pct),
                _latency(
                    b,
                    h,
                    thresholds.max_latency_regression_pct,
                    resamples,
                    [f"base: {r}" for r in record_noise(base, name)]
                    + [f"head: {r}" for r in record_noise(head, name)],
                    paired_load,
                ),
            ]
            regressions += [
                Regression(name, m.metric, _regression_message(name, m))
                for m in metrics
                if m.regression
            ]
        elif b["status"] == "ok" and thresholds.any_set:
            # A mode that worked and now does not is worse than any number: gate on it too.
            error = h.get("error") or h["status"]
            regressions.append(Regression(name, "status", f"{name}: was ok, now {error}"))
        modes.append(ModeComparison(name, b["status"], h["status"], metrics))

    return Comparison(
        model=base_model,
        device_type=base_dev,
        base=_identity(base, base_label),
        head=_identity(head, head_label),
        thresholds=thresholds,
        modes=modes,
        only_in_base=[m for m in base["modes"] if m not in head["modes"]],
        only_in_head=[m for m in head["modes"] if m not in base["modes"]],
        warnings=_setup_warnings(base, head),
        regressions=regressions,
    )
