"""The checks of bytes, ceilings, latency and memory against sources profreport did not compute:
Nsight Compute's DRAM bytes kernel by kernel (matched to the raw trace's kernels in launch
order), torch.utils.benchmark's bandwidth and matmul rate from the preflight, the tensor sizes
and device memory the profiler wrote into each trace."""

from __future__ import annotations

from functools import partial
from typing import Any

from gpu_check.checks_preflight import CEILING_AGREEMENT
from gpu_check.evidence import JSON, Evidence
from gpu_check.rawtrace import RawTrace, base_name
from gpu_check.registry import (
    MB,
    MiB,
    Missing,
    Result,
    check,
    each_run,
    fail,
    kernel_rows,
    l2_bytes,
    lines,
    measured,
    needed,
    ok_modes,
    per_run,
    preflight,
    raw,
    skip,
    verdict,
)
from gpu_check.spec import RUN_SPECS

READ_FACTOR = 1.25  # measured reads within 1/1.25 .. 1.25 x modeled reads (a kernel's own)
WRITE_FACTOR = 1.25  # measured writes at most 1.25 x modeled writes, and at least modeled writes
# less one L2 per kernel: a kernel's last writes can sit in L2 when ncu stops counting
ORDER_RATIO = 1.5  # modes whose modeled totals differ this much are ordered alike when measured

MEASURED_RUNS = tuple(label for label, spec in RUN_SPECS.items() if spec.measure_bytes)


def _mib(x: float) -> str:
    return f"{x / MiB:.1f}"


def _ncu_sequence(m: JSON) -> list[tuple[str, int, JSON]]:
    return [(str(k["name"]), int(k.get("calls") or 0), k) for k in m.get("kernels") or []]


def match_kernels(trace: RawTrace, m: JSON) -> tuple[list[tuple[str, JSON]], list[str]]:
    """ncu's kernels of its one step paired with the trace's first step, both in order of
    first launch: (the trace's kernel name, ncu's row) per pair, and what did not pair (a
    different count, or a different kernel at the same place)."""
    traced, profiled = trace.first_step_sequence(), _ncu_sequence(m)
    pairs, problems = [], []
    if len(traced) != len(profiled):
        problems.append(f"{len(profiled)} distinct kernels under ncu, {len(traced)} in the trace")
    for (t_name, t_calls), (n_name, n_calls, row) in zip(traced, profiled, strict=False):
        if base_name(t_name) != base_name(n_name) or t_calls != n_calls:
            problems.append(
                f"ncu's {base_name(n_name)} x{n_calls} where the trace has "
                f"{base_name(t_name)} x{t_calls}"
            )
            break
        pairs.append((t_name, row))
    return pairs, problems


def _own_bytes(mode: JSON) -> tuple[dict[str, JSON], dict[str, list[JSON]]]:
    """The record's kernel rows by name whose modeled bytes are their own (one kernel, its op's
    bytes), and the rows that share one op's bytes, by that op."""
    own: dict[str, JSON] = {}
    shared: dict[str, list[JSON]] = {}
    for r in kernel_rows(mode):
        if r.get("bytes_read") is None or r.get("bytes_written") is None:
            continue
        if int(r.get("bytes_shared_by") or 0) == 1:
            own[str(r["name"])] = r
        elif r.get("bytes_op"):
            shared.setdefault(str(r["bytes_op"]), []).append(r)
    return own, shared


def _compare(
    what: str,
    m_read: int,
    m_written: int,
    read: int,
    written: int,
    kernels: int,
    l2: int,
    upper: bool,
) -> list[str]:
    """Measured against modeled: reads at least modeled / READ_FACTOR (and at most x
    READ_FACTOR with `upper`: the model is all the traffic); writes at least modeled less one
    L2 per kernel (and at most x WRITE_FACTOR with `upper`)."""
    problems = []
    if m_read < read / READ_FACTOR or (upper and m_read > read * READ_FACTOR):
        problems.append(f"{what}: read {_mib(m_read)} MiB measured, {_mib(read)} modeled")
    floor = max(written - kernels * l2, 0)
    if m_written < floor or (upper and m_written > written * WRITE_FACTOR):
        problems.append(
            f"{what}: wrote {_mib(m_written)} MiB measured, {_mib(written)} modeled "
            f"(at least {_mib(floor)}: {kernels} kernel(s) x L2)"
        )
    return problems


def _ncu_bytes(ev: Evidence, label: str, mode_name: str) -> Result:
    """One mode's Nsight Compute bytes against its modeled bytes, kernel by kernel."""
    name = f"{label}.ncu_bytes[{mode_name}]"
    record, (mode,) = needed(ev, name, label, mode_name)
    m = measured(mode)
    if m is None:
        reason = ((mode.get("bytes") or {}).get("measured") or {}).get("reason")
        return fail(name, f"not measured: {reason}")
    l2 = l2_bytes(ev, record)
    if l2 is None:
        return fail(name, "L2 size unknown (neither the ceilings nor the preflight have it)")
    read, written = int(mode["bytes"]["read"]), int(mode["bytes"]["written"])
    m_read, m_written = m.get("read"), m.get("written")
    if m_read is None or m_written is None:
        return fail(name, f"ncu reported no bytes for {m.get('launches')} launches")
    if not read and not written:
        return fail(
            name,
            f"the record models 0 bytes for {mode_name} while ncu read {_mib(m_read)} MiB: "
            "nothing to compare (a model that leaves its kernels out)",
        )
    pairs, problems = match_kernels(raw(ev, name, label, mode_name), m)
    own, shared = _own_bytes(mode)
    compared = 0
    by_op: dict[str, list[int]] = {}
    unmodeled: list[str] = []
    op_calls = {str(o["op"]): int(o.get("calls") or 0) for o in mode["bytes"].get("table", [])}
    for traced, row in pairs:
        n_read, n_written, n_calls = int(row["read"]), int(row["written"]), int(row["calls"])
        mine = own.get(traced)
        if mine is not None:
            compared += 1
            found = _compare(
                f"{base_name(traced)} x{n_calls}", n_read, n_written, int(mine["bytes_read"]),
                int(mine["bytes_written"]), n_calls, l2, upper=True,
            )  # fmt: skip
            op = str(mine.get("bytes_op"))
            if found and op_calls.get(op, n_calls) != n_calls:
                found.append(
                    f"(its row carries {op}'s bytes of {op_calls[op]} call(s) for {n_calls} "
                    "launches: the kernel also ran under another op)"
                )
            problems += found
            continue
        owner = next((o for o, rows in shared.items() if traced in {r["name"] for r in rows}), None)
        if owner is None:
            unmodeled.append(base_name(traced))
            continue
        got = by_op.setdefault(owner, [0, 0, 0])
        got[0], got[1], got[2] = got[0] + n_read, got[1] + n_written, got[2] + n_calls
    for op, (g_read, g_written, g_calls) in by_op.items():
        r = shared[op][0]  # each row of the op carries the op's bytes
        problems += _compare(
            f"{op} ({g_calls} kernels)", g_read, g_written, int(r["bytes_read"]),
            int(r["bytes_written"]), g_calls, l2, upper=False,
        )  # fmt: skip
    spec = RUN_SPECS[label]
    launches = int(m.get("launches") or 0)
    problems += _compare(
        "mode", m_read, m_written, read, written, launches, l2, upper=spec.streams_from_dram
    )
    detail = (
        f"read {_mib(m_read)} MiB measured vs {_mib(read)} modeled "
        f"(x{m_read / read if read else float('nan'):.2f}); written {_mib(m_written)} vs "
        f"{_mib(written)}; {compared} kernel(s) with bytes of their own within "
        f"{1 / READ_FACTOR:.2f}-{READ_FACTOR}x, {len(by_op)} op(s) whose kernels share its bytes "
        f"at least its modeled reads"
        + (f", not modeled: {', '.join(unmodeled)}" if unmodeled else "")
        + ("; the mode's reads both ways (tensors far beyond L2)" if spec.streams_from_dram else "")
        + f"; writes may fall short by one L2 ({l2 / MB:.0f} MB) per kernel"
    )
    return verdict(name, problems, detail)


@check
def ncu_bytes(ev: Evidence) -> list[Result]:
    """Each mode's DRAM bytes measured by Nsight Compute against its modeled bytes: per kernel
    where a kernel has bytes of its own, per op where an op's kernels share them, and for the
    whole mode where every tensor streams from DRAM (RunSpec.streams_from_dram)."""
    results: list[Result] = []
    for label in MEASURED_RUNS:
        try:
            record, _ = needed(ev, f"{label}.ncu_bytes", label)
        except Missing as missing:
            results += missing.results
            continue
        for mode_name in RUN_SPECS[label].modes:
            if mode_name in ok_modes(record):
                results += lines(partial(_ncu_bytes, ev, label, mode_name))
    return results


def _ncu_order(ev: Evidence, label: str) -> Result:
    """Two modes whose modeled totals differ by ORDER_RATIO or more measure in that order; a mode
    that models no bytes orders nothing (ncu_bytes FAILs it)."""
    name = f"{label}.ncu_order"
    record, _ = needed(ev, name, label)
    totals: dict[str, tuple[int, int]] = {}
    zero = []
    for mode_name, mode in ok_modes(record).items():
        m = measured(mode)
        if m is None or m.get("total") is None:
            continue
        modeled = int(mode["bytes"]["read"]) + int(mode["bytes"]["written"])
        if modeled <= 0:
            zero.append(mode_name)
            continue
        totals[mode_name] = (modeled, int(m["total"]))
    if len(totals) < 2:
        return fail(name, f"measured and modeled bytes for {len(totals)} mode(s): nothing to order")
    problems = [
        f"{a} models {ma / MiB:.0f} MiB >= {ORDER_RATIO}x {b}'s {mb / MiB:.0f} but measures "
        f"{sa / MiB:.0f} <= {sb / MiB:.0f}"
        for a, (ma, sa) in totals.items()
        for b, (mb, sb) in totals.items()
        if a != b and ma >= ORDER_RATIO * mb and sa <= sb
    ]
    pairs = sum(
        1 for a, (ma, _) in totals.items() for b, (mb, _) in totals.items()
        if a != b and ma >= ORDER_RATIO * mb
    )  # fmt: skip
    detail = ", ".join(
        f"{n} {mo / MiB:.0f}/{s / MiB:.0f}"
        for n, (mo, s) in sorted(totals.items(), key=lambda kv: -kv[1][0])
    )
    left = f"; {', '.join(zero)} models 0 bytes: left out" if zero else ""
    return verdict(name, problems, f"{pairs} pair(s) ordered; modeled/measured MiB: {detail}{left}")


@check
def ncu_order(ev: Evidence) -> list[Result]:
    """Modes that model clearly different traffic measure in the same order."""
    return per_run(ev, _ncu_order, *((label,) for label in MEASURED_RUNS))


def _ncu_kernels(ev: Evidence, label: str) -> Result:
    name = f"{label}.ncu_kernels"
    record, _ = needed(ev, name, label)
    problems, shown = [], []
    for mode_name, mode in ok_modes(record).items():
        m = measured(mode)
        if m is None:
            problems.append(f"{mode_name}: not measured")
            continue
        trace = raw(ev, name, label, mode_name)
        traced = trace.step_kernel_counts()[0] if trace.steps else 0
        launches = int(m.get("launches") or 0)
        if launches != traced:
            problems.append(f"{mode_name}: ncu {launches}, the trace's first step {traced}")
        _, unmatched = match_kernels(trace, m)
        problems += [f"{mode_name}: {p}" for p in unmatched]
        if m.get("launches_missing_values"):
            problems.append(f"{mode_name}: {m['launches_missing_values']} launches without values")
        shown.append(f"{mode_name} {launches}/{traced}")
    return verdict(
        name, problems, "ncu/trace kernels in one step, same kernels in order: " + ", ".join(shown)
    )


@check
def ncu_kernels(ev: Evidence) -> list[Result]:
    """ncu profiles in its one step the kernels the trace's step ran, in the same order."""
    return per_run(ev, _ncu_kernels, *((label,) for label in MEASURED_RUNS))


@check
def ceilings_cuda_events(ev: Evidence) -> list[Result]:
    """Each run's ceilings were timed with CUDA events on this device, and agree with
    torch.utils.benchmark's add and matmul from the preflight."""
    name = "ceilings.cuda_events"
    runs = list(each_run(ev, RUN_SPECS))
    if not runs:
        return [fail(name, "no run record")]
    p = preflight(ev, name)
    bench, device = p.get("ceilings") or {}, ((p.get("cuda") or {}).get("device"))
    if not bench.get("available"):
        return [fail(name, f"no benchmark to compare with: {bench.get('reason')}")]
    low, high = CEILING_AGREEMENT
    problems, shown = [], []
    for label, record in runs:
        c = record.get("ceilings") or {}
        if not str(c.get("timer", "")).startswith("CUDA events"):
            problems.append(f"{label}: {c.get('timer') or c.get('reason')}")
            continue
        bw, mm = c["memory_bandwidth"]["value"], c["matmul_rate"]["value"]
        bw_x, mm_x = bw / bench["add_bytes_per_s"], mm / bench["benchmark_matmul_flops"]
        if not low <= bw_x <= high or not low <= mm_x <= high:
            problems.append(f"{label}: copy x{bw_x:.2f}, matmul x{mm_x:.2f} of the benchmark's")
        if (c.get("key") or {}).get("device_name") not in (None, device):
            problems.append(f"{label}: measured on {c['key']['device_name']}")
        shown.append(f"{label} x{bw_x:.2f}/x{mm_x:.2f}")
    detail = (
        f"copy and matmul over torch.utils.benchmark's add "
        f"{bench['add_bytes_per_s'] / 1e12:.2f} TB/s and matmul "
        f"{bench['benchmark_matmul_flops'] / 1e12:.0f} TFLOP/s (allowed {low}-{high}): "
        + ", ".join(shown)
    )
    return [verdict(name, problems, detail)]


def independent_floor_ms(mode: JSON, l2: int, bandwidth: float) -> float | None:
    """The least time one call can take to move what Nsight Compute measured (less one L2 that
    a warm call may find cached) at `bandwidth`; None without measured bytes."""
    m = measured(mode)
    if m is None or m.get("total") is None:
        return None
    return max(int(m["total"]) - l2, 0) / bandwidth * 1e3


@check
def latency_floor(ev: Evidence) -> list[Result]:
    """Every timed mode with Nsight Compute bytes has its median at or above the time its DRAM
    traffic takes at the fastest bandwidth measured (profreport's copy or the benchmark's add):
    a floor from ncu and the preflight, none of profreport's model in it."""
    name = "latency.floor"
    p = preflight(ev, name)
    bench = (p.get("ceilings") or {}).get("add_bytes_per_s") or 0.0
    problems, shown, unchecked = [], [], []
    for label, record in each_run(ev, RUN_SPECS):
        c = (record.get("ceilings") or {}).get("memory_bandwidth") or {}
        bandwidth = max(float(c.get("value") or 0.0), float(bench))
        l2 = l2_bytes(ev, record) or 0
        for mode_name, mode in ok_modes(record).items():
            median = (mode.get("latency_ms") or {}).get("median")
            floor = independent_floor_ms(mode, l2, bandwidth) if bandwidth else None
            where = f"{label}/{mode_name}"
            if floor is None:
                unchecked.append(where)
            elif median is None:
                problems.append(f"{where}: not timed ({mode.get('not_timed')})")
            elif median < floor:
                problems.append(f"{where}: median {median:.4f} ms below {floor:.4f} ms")
            else:
                shown.append((median / floor if floor else float("inf"), where))
    if not shown and not problems:
        return [skip(name, "no mode has Nsight Compute bytes to floor it")]
    closest = ", ".join(f"{w} x{x:.2f}" for x, w in sorted(shown)[:3])
    detail = (
        f"{len(shown)} medians at or above (ncu bytes - L2) / bandwidth; closest: {closest}"
        + (f"; no ncu bytes: {len(unchecked)} modes" if unchecked else "")
    )
    return [verdict(name, problems, detail)]


@check
def allocator_peaks(ev: Evidence) -> list[Result]:
    """Each mode's peak is the CUDA caching allocator's, at least the largest tensor one of its
    operators was handed (from the trace's input shapes) and at most the device's memory (the
    trace's deviceProperties)."""
    name = "memory.allocator_peak"
    problems, count = [], 0
    for label, record in each_run(ev, RUN_SPECS):
        for mode_name, mode in ok_modes(record).items():
            where = f"{label}/{mode_name}"
            peak: dict[str, Any] = mode.get("peak_memory") or {}
            trace = ev.traces.get(label, {}).get(mode_name)
            if not isinstance(trace, RawTrace):
                problems.append(f"{where}: no trace to bound the peak")
                continue
            total = float((trace.device_properties or [{}])[0].get("totalGlobalMem") or 0)
            got = int(peak.get("bytes") or 0)
            if "CUDA caching allocator" not in str(peak.get("source")):
                problems.append(f"{where}: {peak.get('source')}")
            elif got < trace.largest_input_bytes:
                problems.append(
                    f"{where}: peak {_mib(got)} MiB under a {_mib(trace.largest_input_bytes)} MiB "
                    "input tensor"
                )
            elif not total or got > total:
                problems.append(f"{where}: peak {_mib(got)} MiB over the device's {_mib(total)}")
            else:
                count += 1
    if not count and not problems:
        return [fail(name, "no run record")]
    return [
        verdict(
            name,
            problems,
            f"{count} modes' allocator peaks between their largest input tensor and device memory",
        )
    ]
