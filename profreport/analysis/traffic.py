"""A mode's memory-traffic change against eager, from one source for every reader: Nsight
Compute's DRAM bytes where both modes were measured, else the modeled bytes. The headline and
the verdict both take it from here, so they never quote different sources.

Where the two sources disagree (they point different ways, or lie DISAGREE_POINTS apart) the
change says which one differs and why, from the numbers each mode holds:

- reads: ncu flushes the caches before each kernel, so its reads are complete; reads beyond the
  model are work the per-operation model does not see (kernels a library runs inside one op,
  such as cuDNN's layout transposes and bias add: the kernel rows that share one op's modeled
  bytes, or have none);
- writes: what a kernel writes last can still sit in L2 when ncu stops counting, so its writes
  fall short of the model's by up to the L2 per kernel (capture/ncu.py).
"""

from __future__ import annotations

from collections import Counter

from profreport.format import fmt_bytes
from profreport.record.model import OkMode, TrafficChange

DISAGREE_POINTS = 10  # percentage points between the measured and the modeled change
GAP_SHARE = 0.05  # a gap between measured and modeled bytes below this share of a mode's is noise
GAP_MIN_BYTES = 2**20


def measured_total(mode: OkMode) -> int | None:
    """Nsight Compute's DRAM bytes of one step, read + written (None: not measured)."""
    m = mode.bytes.measured
    return None if m is None else m.dram_bytes


def _modeled(mode: OkMode) -> int:
    return mode.bytes.read + mode.bytes.written


def _percent(new: int, old: int) -> float | None:
    return None if not old else (new - old) / old * 100


def _disagree(measured: float, modeled: float) -> bool:
    a, b = round(measured), round(modeled)
    return (a > 0) != (b > 0) or (a < 0) != (b < 0) or abs(a - b) >= DISAGREE_POINTS


KERNEL_NAME_CHARS = 40


def _kernel_name(name: str) -> str:
    """A kernel's own identifier, short: no `void`, namespaces, template arguments or
    parameters, cut at KERNEL_NAME_CHARS."""
    bare = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    cut = min((i for i in (bare.find("<"), bare.find("(")) if i >= 0), default=len(bare))
    found = bare[:cut].rsplit("::", 1)[-1] or name
    return found if len(found) <= KERNEL_NAME_CHARS else found[: KERNEL_NAME_CHARS - 1] + "…"


def _outside_model(mode: OkMode) -> str:
    """The kernels whose bytes the per-operation model does not give them alone: those sharing
    one op's modeled bytes (with the op), and those with none."""
    shared: dict[str, Counter[str]] = {}
    unmodeled: Counter[str] = Counter()
    for row in mode.kernels.table:
        if row.kind != "kernel":
            continue
        calls = round(row.calls_per_step or 0)
        if row.bytes_read is None:
            unmodeled[_kernel_name(row.name)] += calls
        elif (row.bytes_shared_by or 0) > 1 and row.bytes_op:
            shared.setdefault(row.bytes_op, Counter())[_kernel_name(row.name)] += calls

    def listed(kernels: Counter[str]) -> str:
        return ", ".join(f"{k} x{n}" if n > 1 else k for k, n in kernels.items())

    parts = [f"{op}'s bytes cover {listed(k)}" for op, k in shared.items()]
    if unmodeled:
        parts.append(f"not modeled: {listed(unmodeled)}")
    return "; ".join(parts)


def _gaps(name: str, mode: OkMode) -> tuple[str, str]:
    """What ncu read beyond (or short of) the model's reads in `mode`, and how far its writes
    fall short of the model's."""
    m = mode.bytes.measured
    if m is None or m.read is None or m.written is None:
        return "", ""
    slack = max(GAP_SHARE * _modeled(mode), GAP_MIN_BYTES)
    reads, writes = "", ""
    extra = m.read - mode.bytes.read
    if extra > slack:
        kernels = _outside_model(mode)
        reads = f"{name} read {fmt_bytes(extra)} more than modeled" + (
            f" ({kernels})" if kernels else ""
        )
    elif -extra > slack:
        reads = f"{name} read {fmt_bytes(-extra)} less than modeled"
    short = mode.bytes.written - m.written
    if short > slack:
        writes = f"{name} {fmt_bytes(short)}"
    return reads, writes


def _why(mode_name: str, mode: OkMode, eager: OkMode, l2: int | None) -> str:
    """Which figure differs, and why, from each mode's gaps between ncu and the model."""
    gaps = [_gaps("eager", eager), _gaps(mode_name, mode)]
    reads, writes = [g[0] for g in gaps], [g[1] for g in gaps]
    found = []
    if any(reads):
        found.append(
            "the modeled figure leaves out work Nsight Compute saw, whose reads are complete: "
            + "; ".join(r for r in reads if r)
        )
    if any(writes):
        bound = "" if l2 is None else f" (up to {fmt_bytes(l2)} per kernel)"
        found.append(
            "the measured figure misses writes still in L2 when a kernel ends: written less "
            f"than modeled by {', '.join(w for w in writes if w)}{bound}"
        )
    return "; ".join(found) or "neither mode's reads or writes are 5% off the model's"


def traffic_change(
    mode_name: str, mode: OkMode, eager: OkMode, l2_bytes: int | None = None
) -> TrafficChange | None:
    """`mode`'s traffic change against `eager`: measured where both have Nsight Compute bytes,
    else modeled; None when the modeled bytes are partial (some kernels not modeled) and nothing
    was measured: then the two are not comparable."""
    mode_measured, eager_measured = measured_total(mode), measured_total(eager)
    if mode_measured is not None and eager_measured:
        measured = _percent(mode_measured, eager_measured)
        modeled = _percent(_modeled(mode), _modeled(eager))
        differs = ""
        if measured is not None and modeled is not None and _disagree(measured, modeled):
            differs = _why(mode_name, mode, eager, l2_bytes)
        return TrafficChange("measured", eager_measured, mode_measured, modeled, differs)
    if mode.bytes.not_modeled or eager.bytes.not_modeled:
        return None
    return TrafficChange("modeled", _modeled(eager), _modeled(mode), None, "")
