"""Number formatting shared by renderers and verdicts (units always shown)."""

from __future__ import annotations


def fmt_bytes(n: float | int | None) -> str:
    if n is None:
        return "n/a"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} GiB"


def fmt_ms(x: float | None) -> str:
    if x is None:
        return "n/a"
    if x < 1:
        return f"{x * 1000:.1f} µs"
    return f"{x:.3f} ms"


def fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f}%"
