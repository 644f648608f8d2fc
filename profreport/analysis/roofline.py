"""Each kernel against the machine's measured ceilings, and each mode's latency floor.

A pure analysis over one mode entry whose kernel rows carry modeled bytes (analysis/kernel_bytes)
and the run's measured ceilings (capture/ceilings). For a kernel with modeled traffic B bytes,
F FLOPs (where the flop counter has a formula) and profiler time t per step:

- achieved bandwidth B / t, achieved rate F / t, arithmetic intensity F / B;
- its bound: the larger of B / bandwidth and F / matmul rate. The bandwidth is the in-cache copy
  ceiling when one call's traffic fits the last-level cache (the data can come from cache), else
  the main-memory copy ceiling;
- the percentage of that ceiling: bound time / t (= achieved rate / ceiling of the bounding
  resource).

Kernels that share the bytes of one operation (a cuDNN convolution launching two kernels) are one
group: the operation's bytes against the kernels' summed time, and each row says so.

The mode's floor is the sum of the bound times over every kernel with modeled bytes (timed by the
profiler or not). Modeled bytes are a lower bound on traffic, but the ceilings are what one
`Tensor.copy_` and one matmul achieved, not the hardware's peak: a streaming kernel can beat the
copy by a few percent (Triton's fused kernel moved 4.21 TB/s on an H200 whose copy ceiling read
4.17). So a median more than FLOOR_TOLERANCE below the floor means the bytes model or a ceiling is
wrong for this run: the mode is flagged inconsistent, never shown as a plain number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from profreport.record.model import (
    Ceilings,
    KernelRow,
    KernelsByBound,
    Latency,
    OkMode,
    OpBytes,
    RooflineFloor,
    Roofs,
)

# How far below the floor a median may fall before it is called inconsistent: the ceilings are
# achieved rates of one copy and one matmul kernel, which other kernels can exceed a little.
FLOOR_TOLERANCE = 0.05

# A convolution's FLOPs are the direct algorithm's (2 x MACs of the sliding window); its library
# may compute it with far fewer multiplications (Winograd: 2.25x to 4x fewer for a 3x3 kernel;
# FFT), so they bound no time: oneDNN ran simple's 3x3 convolution at 1.5-1.9x the measured
# matmul rate in direct-FLOP terms on the 2-vCPU CI machine, which put every mode's median under
# its floor. A convolution's floor is its bytes; its achieved direct-FLOP rate is still shown.
DIRECT_CONVOLUTION = (
    "direct-convolution FLOPs bound nothing: its library may compute it with fewer "
    "multiplications (Winograd, FFT)"
)


def is_convolution(row: KernelRow) -> bool:
    """A convolution op (aten::convolution and its backends, an Inductor extern call of one)."""
    return "convolution" in str(row.bytes_op or row.name).lower()


def roofs_of(ceilings: Ceilings | None) -> Roofs | None:
    """The roofs of a record's `ceilings` section; None when it has none (older records, or the
    measurement failed). The in-cache bandwidth only with the last-level cache's size."""
    if ceilings is None or ceilings.memory_bandwidth is None or ceilings.matmul_rate is None:
        return None
    memory = float(ceilings.memory_bandwidth.value)
    rate = float(ceilings.matmul_rate.value)
    if memory <= 0 or rate <= 0:
        return None
    cache = ceilings.cache_bandwidth.value if ceilings.cache_bandwidth is not None else None
    llc = ceilings.last_level_cache_bytes
    return Roofs(
        memory_bytes_per_s=memory,
        flops_per_s=rate,
        cache_bytes_per_s=float(cache) if cache and llc else None,
        last_level_cache_bytes=int(llc) if cache and llc else None,
    )


def bandwidth(roofs: Roofs, bytes_per_call: float) -> tuple[str, float]:
    """("cache" or "memory", bytes/s) for a kernel moving `bytes_per_call` per call."""
    if (
        roofs.cache_bytes_per_s is not None
        and roofs.last_level_cache_bytes is not None
        and bytes_per_call <= roofs.last_level_cache_bytes
    ):
        return "cache", max(roofs.cache_bytes_per_s, roofs.memory_bytes_per_s)
    return "memory", roofs.memory_bytes_per_s


@dataclass(frozen=True)
class KernelBound:
    """One kernel (or group of kernels sharing an operation's bytes) against the roofs."""

    traffic: int
    flops: float | None
    time_s: float | None  # profiler time per step; None: not recorded
    bound_s: float  # max(traffic / bandwidth, flops / rate)
    bound: str | None  # memory | cache | compute; None: nothing to bound (no traffic, no FLOPs)

    @property
    def achieved_bytes_per_s(self) -> float | None:
        return self.traffic / self.time_s if self.time_s else None

    @property
    def achieved_flops_per_s(self) -> float | None:
        return self.flops / self.time_s if self.time_s and self.flops is not None else None

    @property
    def ceiling_pct(self) -> float | None:
        return self.bound_s / self.time_s * 100.0 if self.time_s and self.bound else None


def kernel_bound(
    traffic: int,
    flops: float | None,
    calls: float,
    time_s: float | None,
    roofs: Roofs,
    flops_bound: bool = True,
) -> KernelBound:
    """The bound of a kernel moving `traffic` bytes in `calls` calls per step. `flops_bound`
    False: its FLOPs are shown as an achieved rate but bound nothing (see DIRECT_CONVOLUTION)."""
    name, bytes_per_s = bandwidth(roofs, traffic / max(calls, 1.0))
    memory_s = traffic / bytes_per_s
    compute_s = flops / roofs.flops_per_s if flops and flops_bound else 0.0
    bound_s = max(memory_s, compute_s)
    bound = None if bound_s == 0 else ("compute" if compute_s > memory_s else name)
    return KernelBound(traffic, flops, time_s, bound_s, bound)


def _groups(rows: Sequence[KernelRow]) -> list[list[int]]:
    """Row indexes with modeled bytes, grouped: rows sharing one operation's bytes together."""
    groups: dict[tuple[str, object], list[int]] = {}
    for i, row in enumerate(rows):
        if row.bytes_read is None or row.bytes_written is None:
            continue
        shared = (row.bytes_shared_by or 0) > 1 and row.bytes_op
        groups.setdefault(("op", row.bytes_op) if shared else ("row", i), []).append(i)
    return list(groups.values())


def _group_time_s(rows: list[KernelRow]) -> float | None:
    times = [r.time_us_per_step for r in rows]
    if not times or any(t is None for t in times):
        return None
    total = sum(float(t) for t in times if t is not None)
    return total / 1e6 if total > 0 else None


def _note(rows: list[KernelRow], bound: KernelBound) -> str:
    notes = []
    if len(rows) > 1:
        notes.append(
            f"{rows[0].bytes_op}'s bytes and FLOPs are shared by {len(rows)} kernels: the "
            f"figures are for the {len(rows)} together (summed time)"
        )
    if bound.flops is None and bound.traffic:
        notes.append("FLOPs unknown")
    pct = bound.ceiling_pct
    if pct is not None and pct > 100.0:
        notes.append(
            "faster than its ceiling allows: the bytes model or the ceiling is off for this kernel"
        )
    return "; ".join(notes)


def _eager_flops(row: KernelRow, eager_ops: Mapping[str, OpBytes]) -> tuple[float | None, str]:
    """A library call a compiler kept (Inductor's `extern aten::convolution`) has no FLOPs in the
    compiler's accounting; eager's call of the same op with the same modeled bytes has the flop
    counter's figure. Borrowed only on that exact match."""
    op = str(row.bytes_op or "").removeprefix("extern ")
    same = eager_ops.get(op)
    if same is None or same.flops is None:
        return None, ""
    if same.read != row.bytes_read or same.written != row.bytes_written:
        return None, ""
    return float(same.flops), f"FLOPs from eager's {op} (same op, same modeled bytes)"


@dataclass(frozen=True)
class ModeRoofline:
    """A mode's kernel rows with their roofline fields, and its latency floor."""

    rows: tuple[KernelRow, ...]
    floor: RooflineFloor


def kernel_roofline(
    mode: OkMode, roofs: Roofs | None, eager: OkMode | None = None
) -> ModeRoofline | None:
    """The kernel rows of `mode` (rows carrying modeled bytes, analysis/kernel_bytes) with
    their roofline fields (achieved rates, bound, % of ceiling, note), in table order, and the
    mode's floor; None without roofs. `eager`: the run's eager mode, whose FLOPs a compiler's
    library call may borrow."""
    if roofs is None:
        return None
    eager_ops = {r.op: r for r in eager.bytes.table} if eager else {}
    rows = mode.kernels.table
    found: list[KernelRow] = [r.adding(**_NO_ROOFLINE) for r in rows]
    floor_s, with_bytes = 0.0, 0
    by_bound = {"memory": 0, "cache": 0, "compute": 0}
    for indexes in _groups(rows):
        group = [rows[i] for i in indexes]
        first = group[0]
        flops, borrowed = first.flops, ""
        if flops is None and mode is not eager:
            flops, borrowed = _eager_flops(first, eager_ops)
        convolution = is_convolution(first)
        bound = kernel_bound(
            int(first.bytes_read or 0) + int(first.bytes_written or 0),
            flops,
            float(first.calls_per_step or 1.0),
            _group_time_s(group),
            roofs,
            flops_bound=not convolution,
        )
        floor_s += bound.bound_s
        with_bytes += len(group)
        if bound.bound is not None:
            by_bound[bound.bound] += len(group)
        direct = DIRECT_CONVOLUTION if convolution and flops else ""
        note = "; ".join(n for n in (borrowed, direct, _note(group, bound)) if n)
        for i in indexes:
            found[i] = rows[i].adding(
                achieved_bytes_per_s=bound.achieved_bytes_per_s,
                achieved_flops_per_s=bound.achieved_flops_per_s,
                bound=bound.bound,
                ceiling_pct=bound.ceiling_pct,
                roofline_note=note,
            )
    floor = mode_floor(mode.latency_ms, floor_s, with_bytes, len(rows), by_bound)
    return ModeRoofline(tuple(found), floor)


_NO_ROOFLINE: dict[str, None] = dict.fromkeys(
    ("achieved_bytes_per_s", "achieved_flops_per_s", "bound", "ceiling_pct", "roofline_note")
)


def mode_floor(
    latency: Latency | None,
    floor_s: float,
    kernels_with_bytes: int,
    kernels: int,
    by_bound: dict[str, int],
) -> RooflineFloor:
    """The floor finding of a mode: floor, measured median / floor, and whether they agree."""
    floor_ms = floor_s * 1000.0
    median = latency.median if latency is not None else None
    ratio = median / floor_ms if median is not None and floor_ms > 0 else None
    consistent = None if ratio is None else ratio >= 1.0 - FLOOR_TOLERANCE
    note = ""
    if consistent is False:
        note = (
            f"inconsistent: the measured median ({median:.4g} ms) is below the floor "
            f"({floor_ms:.4g} ms) that modeled bytes and measured ceilings allow, by more than "
            f"the {FLOOR_TOLERANCE:.0%} a kernel can beat the measured ceilings by; the bytes "
            "model or a ceiling is wrong for this run, so its latency figures are not to be trusted"
        )
    return RooflineFloor(
        floor_ms=floor_ms,
        x_of_floor=ratio,
        consistent=consistent,
        kernels_in_floor=kernels_with_bytes,
        kernels_without_bytes=kernels - kernels_with_bytes,
        kernels_by_bound=KernelsByBound(
            memory=by_bound.get("memory", 0),
            cache=by_bound.get("cache", 0),
            compute=by_bound.get("compute", 0),
        ),
        note=note,
    )
