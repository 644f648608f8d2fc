"""Measured ceilings of the run's own machine: sustained copy bandwidth and matmul rate.

Two copy bandwidths are measured, each as read + written bytes per second of `Tensor.copy_`:
one through main memory (a source several times the last-level cache, capped in size so the
measurement stays short) and one inside the cache (a source that fits the per-core L2 of the
threads used). Kernels whose traffic fits the last-level cache can run at cache speed, so the
roofline bounds them by the cache ceiling (analysis/roofline.py). The arithmetic ceiling is a
square `torch.mm` in the run's dtype. Each figure is the best of several samples (interference
only slows a machine down), with the median and the worst beside it as the spread.

On CUDA the clock is a pair of CUDA events around each sample (after a synchronize); on CPU it
is `time.perf_counter` with the run's intra-op threads. Results are cached per machine (device
name, threads, torch version) and dtype in a per-user cache folder; `remeasure` ignores the cache.

Over 400 lines on purpose: the cache merges later measurements into an entry taken under load
(best of every attempt) until it settles, so measuring and caching are one mechanism.
"""

from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from profreport.record.model import CacheKey, Ceiling, Ceilings, Device
from profreport.record.section import problems

CEILINGS_VERSION = 1
MiB = 2**20
# Copy sizes (source tensor): main memory = 4 x the last-level cache, within these bounds.
MEMORY_COPY_MIN = 64 * MiB
MEMORY_COPY_MAX_CPU = 256 * MiB
MEMORY_COPY_MAX_CUDA = 1024 * MiB
SAMPLES = 15  # short samples: on a shared machine some land in a quiet moment
MEMORY_SAMPLES = 5  # each main-memory copy is long already
MATMUL_N = {"cpu": 1024, "cuda": 8192}
SAMPLE_S = {"cpu": 0.004, "cuda": 0.005}  # a sample repeats the operation to last this long
SAMPLE_GAP_S = 0.003
# Other processes' share of the machine's CPU time above which a measurement is repeated (up to
# ATTEMPTS times, keeping the best of each ceiling) and not cached: a loaded machine measures
# ceilings below the real ones, which would put the latency floor above what the modes achieve.
LOADED_SHARE = 0.10
ATTEMPTS = 2
# A cached measurement taken under load is trusted once this many attempts (over several runs)
# went into it: the best of them is what this machine gives under its usual load.
SETTLED_ATTEMPTS = 8

Seconds = Callable[[Callable[[], Any], int], float]  # (operation, calls) -> seconds for all calls


def cache_dir() -> Path:
    """PROFREPORT_CACHE_DIR, else $XDG_CACHE_HOME/profreport, else ~/.cache/profreport."""
    explicit = os.environ.get("PROFREPORT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "profreport"


def cache_file(key: CacheKey, folder: Path) -> Path:
    digest = hashlib.sha256(json.dumps(key.to_json(), sort_keys=True).encode()).hexdigest()[:16]
    return folder / f"ceilings-{key.device_type}-{key.dtype}-{digest}.json"


def rate_summary(amount: float, seconds: Sequence[float]) -> Ceiling:
    """Rates (amount / second) of each sample: the best is the ceiling, the median and the worst
    its spread; `spread_pct` = (best - median) / best."""
    rates = sorted((amount / s for s in seconds if s > 0), reverse=True)
    if not rates:
        raise ValueError("no sample took measurable time")
    best, median = rates[0], statistics.median(rates)
    return Ceiling(
        value=best,
        median=median,
        worst=rates[-1],
        samples=len(rates),
        spread_pct=(best - median) / best * 100.0,
    )


def memory_copy_bytes(llc_bytes: int | None, device_type: str) -> tuple[int, str]:
    """Source size of the main-memory copy, and how it was chosen."""
    cap = MEMORY_COPY_MAX_CUDA if device_type == "cuda" else MEMORY_COPY_MAX_CPU
    if llc_bytes is None:
        return MEMORY_COPY_MIN * 4, "last-level cache size unknown: 256 MiB"
    wanted = 4 * llc_bytes
    if wanted > cap:
        return cap, (
            f"4 x the last-level cache ({llc_bytes / MiB:.0f} MiB) would be {wanted / MiB:.0f} MiB;"
            f" capped at {cap / MiB:.0f} MiB to keep the measurement short"
        )
    size = max(wanted, MEMORY_COPY_MIN)
    return size, f"4 x the last-level cache ({llc_bytes / MiB:.1f} MiB), at least 64 MiB"


def cache_copy_bytes(l2_bytes: int | None, threads: int) -> int:
    """Source size of the in-cache copy: source and destination of each thread's share within
    half its L2 (1 MiB when the L2 size is unknown)."""
    if l2_bytes is None:
        return MiB
    return max(64 * 1024, l2_bytes * max(threads, 1) // 4)


def _sysfs_cache(level: int) -> int | None:
    """Size of the CPU cache of `level` as Linux reports it for cpu0 (per instance)."""
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in sorted(root.glob("index*")):
            if (index / "level").read_text().strip() != str(level):
                continue
            if (index / "type").read_text().strip() == "Instruction":
                continue
            text = (index / "size").read_text().strip().upper()
            scale = {"K": 1024, "M": MiB, "G": 2**30}.get(text[-1:], 1)
            return int(text.rstrip("KMG")) * scale
    except (OSError, ValueError):
        return None
    return None


def _cache_sizes(device: torch.device) -> tuple[int | None, int | None, str]:
    """(last-level cache, L2 per core) in bytes, and where they came from."""
    if device.type == "cuda":
        l2 = int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0)) or None
        return l2, l2, "torch.cuda.get_device_properties(...).L2_cache_size"
    l3, l2 = _sysfs_cache(3), _sysfs_cache(2)
    return l3 or l2, l2, "/sys/devices/system/cpu/cpu0/cache"


def _cpu_seconds(op: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        op()
    return time.perf_counter() - start


def _cuda_seconds(device: torch.device) -> Seconds:
    def seconds(op: Callable[[], Any], calls: int) -> float:
        torch.cuda.synchronize(device)
        event: Callable[..., Any] = torch.cuda.Event  # untyped in torch's stubs
        start, end = event(enable_timing=True), event(enable_timing=True)
        start.record()
        for _ in range(calls):
            op()
        end.record()
        end.synchronize()
        elapsed_ms: float = start.elapsed_time(end)
        return elapsed_ms / 1000.0

    return seconds


def _samples(
    op: Callable[[], Any], seconds: Seconds, sample_s: float, samples: int = SAMPLES
) -> tuple[list[float], int]:
    """Per-call seconds of `samples` samples, each `calls` back-to-back calls lasting about
    sample_s (sized from the fastest of three single calls, so one descheduled call does not
    shrink every sample to a call or two)."""
    op()  # warm-up: first-touch page faults, library initialisation
    once = seconds(op, 1)
    if once < sample_s:  # a short op: size from the fastest of three
        once = min(once, seconds(op, 1), seconds(op, 1))
    calls = max(1, min(10_000, int(sample_s / max(once, 1e-7)) + 1))
    per_call = []
    for _ in range(samples):
        time.sleep(SAMPLE_GAP_S)  # spread the samples: one busy moment of the machine spoils few
        per_call.append(seconds(op, calls) / calls)
    return per_call, calls


def _copy(
    device: torch.device,
    dtype: torch.dtype,
    source_bytes: int,
    seconds: Seconds,
    sample_s: float,
    samples: int = SAMPLES,
    memmove: bool = False,
) -> Ceiling:
    """`Tensor.copy_` of `source_bytes`, or with `memmove` libc memmove between the two host
    buffers (one thread)."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    n = source_bytes // itemsize
    src = torch.ones(n, device=device, dtype=dtype)
    dst = torch.empty_like(src)
    op: Callable[[], Any] = (
        (lambda: ctypes.memmove(dst.data_ptr(), src.data_ptr(), n * itemsize))
        if memmove
        else (lambda: dst.copy_(src))
    )
    per_call, calls = _samples(op, seconds, sample_s, samples)
    moved = 2 * n * itemsize  # read + written
    return dataclasses.replace(
        rate_summary(moved, per_call),
        unit="B/s",
        source_bytes=n * itemsize,
        bytes_per_call=moved,
        calls_per_sample=calls,
    )


def _matmul(
    device: torch.device, dtype: torch.dtype, n: int, seconds: Seconds, sample_s: float
) -> Ceiling:
    gen = torch.Generator(device="cpu").manual_seed(0)
    a = torch.rand(n, n, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)
    b = torch.rand(n, n, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)
    per_call, calls = _samples(lambda: torch.mm(a, b), seconds, sample_s)
    return dataclasses.replace(
        rate_summary(2.0 * n**3, per_call),
        unit="FLOP/s",
        n=n,
        flops_per_call=2 * n**3,
        calls_per_sample=calls,
    )


def _best_variant(runs: dict[str, Ceiling]) -> Ceiling:
    """The same copy measured several ways on CPU: the highest rate is the ceiling, the others
    are kept beside it (`variant`, `other_variants`). On a shared machine a parallel region
    waits for its slowest thread, and libc's memmove avoids the read a cached store makes of the
    line it writes, so no single way is the machine's best."""
    name = max(runs, key=lambda k: runs[k].value)
    return dataclasses.replace(
        runs[name],
        variant=name,
        other_variants={k: r.value for k, r in runs.items() if k != name},
    )


def _cpu_copies(
    dtype: torch.dtype, source_bytes: Callable[[int], int], threads: int, samples: int
) -> Ceiling:
    cpu, sample_s = torch.device("cpu"), SAMPLE_S["cpu"]
    runs: dict[str, Ceiling] = {}
    previous = torch.get_num_threads()
    for n in dict.fromkeys((threads, 1)):
        torch.set_num_threads(n)
        try:
            ceiling = _copy(cpu, dtype, source_bytes(n), _cpu_seconds, sample_s, samples)
        finally:
            torch.set_num_threads(previous)
        runs[f"Tensor.copy_, {n} thread(s)"] = ceiling
    runs["libc memmove, 1 thread"] = _copy(
        cpu, torch.float32, source_bytes(1), _cpu_seconds, sample_s, samples, memmove=True
    )
    return _best_variant(runs)


def measure(device: torch.device, dtype: torch.dtype, threads: int) -> Ceilings:
    """Measure both copy bandwidths and the matmul rate now (no cache)."""
    cuda = device.type == "cuda"
    seconds = _cuda_seconds(device) if cuda else _cpu_seconds
    sample_s = SAMPLE_S[device.type]
    llc, l2, cache_source = _cache_sizes(device)
    mem_bytes, mem_why = memory_copy_bytes(llc, device.type)
    dtype_name = str(dtype).removeprefix("torch.")
    timer = "CUDA events around each sample" if cuda else "time.perf_counter around each sample"
    with torch.no_grad():
        if cuda:
            memory = _copy(device, dtype, mem_bytes, seconds, sample_s, MEMORY_SAMPLES)
            # the GPU's L2 is one cache shared by the whole device, not one per CPU thread
            cache = _copy(device, dtype, cache_copy_bytes(l2, 1), seconds, sample_s)
        else:
            memory = _cpu_copies(dtype, lambda n: mem_bytes, threads, MEMORY_SAMPLES)
            cache = _cpu_copies(dtype, lambda n: cache_copy_bytes(l2, n), threads, SAMPLES)
        matmul = _matmul(device, dtype, MATMUL_N[device.type], seconds, sample_s)
    if cuda:
        torch.cuda.empty_cache()
    how = (
        f"Tensor.copy_ of {dtype_name}, device to device"
        if cuda
        else f"the best of Tensor.copy_ of {dtype_name} with {threads} and 1 intra-op thread(s) "
        "and libc memmove (here {variant})"
    )
    memory = dataclasses.replace(
        memory,
        method=f"{how.format(variant=memory.variant)}, source {mem_bytes / MiB:.0f} MiB "
        f"({mem_why}); bytes = read + written",
    )
    cache = dataclasses.replace(
        cache,
        method=f"{how.format(variant=cache.variant)}, source "
        f"{(cache.source_bytes or 0) / 1024:.0f} KiB "
        + (
            "(source and destination within half the L2)"
            if cuda
            else "(each thread's source and destination within half its L2)"
        )
        + "; bytes = read + written",
    )
    matmul = dataclasses.replace(
        matmul,
        method=f"torch.mm of two {matmul.n} x {matmul.n} {dtype_name} matrices, FLOPs = 2 n^3"
        + ("" if cuda else f", {threads} intra-op thread(s)"),
    )
    return Ceilings(
        source="measured",
        timer=timer,
        cache_sizes_from=cache_source,
        memory_bandwidth=memory,
        cache_bandwidth=cache,
        matmul_rate=matmul,
    ).adding(last_level_cache_bytes=llc, l2_bytes=l2)


CEILING_KEYS = ("memory_bandwidth", "cache_bandwidth", "matmul_rate")


def best_of(first: Ceilings, second: Ceilings) -> Ceilings:
    """Two measurements of the same machine merged: each ceiling from the one that measured it
    higher (interference only ever lowers a measured ceiling)."""
    merged = second
    for key in CEILING_KEYS:
        a: Ceiling | None = getattr(first, key)
        b: Ceiling | None = getattr(second, key)
        if a is not None and (b is None or a.value > b.value):
            merged = merged.adding(**{key: a})
    loads = [x for x in (first.other_busy_share, second.other_busy_share) if x is not None]
    return merged.adding(
        attempts=(first.attempts or 1) + (second.attempts or 1),
        other_busy_share=min(loads) if loads else None,
    )


def measure_quietly(
    device: torch.device, dtype: torch.dtype, threads: int, attempts: int = ATTEMPTS
) -> Ceilings:
    """`measure`, repeated while other processes keep the machine busy (up to ATTEMPTS times),
    each ceiling the best over the attempts; `other_busy_share` is the quietest attempt's."""
    from profreport.capture.noise import watch

    found: Ceilings | None = None
    for attempt in range(attempts):
        if attempt:
            time.sleep(0.2)
        with watch() as watched:
            measured = measure(device, dtype, threads)
        share = None if watched.load is None else watched.load.other_busy_share
        this = measured.adding(attempts=1, other_busy_share=share)
        found = this if found is None else best_of(found, this)
        if found.other_busy_share is None or found.other_busy_share <= LOADED_SHARE:
            break
    if found is None:
        raise ValueError(f"measuring the ceilings needs at least one attempt, not {attempts}")
    return found


def under_load(ceilings: Ceilings) -> bool:
    share = ceilings.other_busy_share
    return share is not None and share > LOADED_SHARE


def settled(ceilings: Ceilings) -> bool:
    """Measured on a quiet machine, or the best of SETTLED_ATTEMPTS attempts or more."""
    return not under_load(ceilings) or (ceilings.attempts or 1) >= SETTLED_ATTEMPTS


def _read_cache(path: Path, key: CacheKey) -> Ceilings | None:
    """The cached measurement for `key` (None: no cache file, a damaged one, or another key)."""
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("key") != key.to_json():
        return None
    found = stored.get("ceilings")
    if not isinstance(found, dict) or any(problems(Ceilings, found)):
        return None
    return Ceilings.from_json(found)


def _write_cache(path: Path, key: CacheKey, ceilings: Ceilings) -> bool:
    from profreport.files import write_atomic

    document = {"key": key.to_json(), "ceilings": ceilings.to_json()}
    try:
        write_atomic(path, json.dumps(document, indent=1) + "\n")
    except OSError:
        return False  # an unwritable cache costs a re-measurement next time, nothing else
    return True


def ceilings_for(
    device: torch.device,
    device_record: Device,
    dtype: torch.dtype,
    *,
    remeasure: bool = False,
    folder: Path | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
) -> Ceilings:
    """The ceilings for this machine and dtype: from the cache when it holds a measurement taken
    on a quiet machine (and not `remeasure`); else measured now. A cached measurement that was
    taken under load is measured again and merged, each ceiling the best either reached (load
    only ever lowers a measured ceiling), so the cache converges on what the machine can do.
    The record says which (`cached`)."""
    threads = torch.get_num_threads()
    key = CacheKey(  # what a cached measurement must match to be reused
        version=CEILINGS_VERSION,
        device_type=device_record.type,
        device_name=device_record.name,
        threads=threads,
        torch=torch.__version__,
        dtype=str(dtype).removeprefix("torch."),
    )
    path = cache_file(key, folder or cache_dir())
    found = None if remeasure else _read_cache(path, key)
    if found is not None and settled(found):
        return found.adding(cached=True, cache_file=str(path), key=key)
    fresh = measure_quietly(device, dtype, threads)
    fresh = fresh.adding(measured_utc=now().strftime("%Y-%m-%dT%H:%M:%SZ"))
    merged = fresh if found is None else best_of(found, fresh)
    stored = _write_cache(path, key, merged)
    return merged.adding(cached=False, cache_file=str(path) if stored else None, key=key)


def measured_again(device: torch.device, dtype: torch.dtype, ceilings: Ceilings) -> Ceilings:
    """Ceilings measured under load, measured once more (after the modes ran) and merged, each
    ceiling the best of all attempts, and the cache updated; the record says how many attempts
    there were."""
    again = measure_quietly(device, dtype, torch.get_num_threads(), attempts=1)
    merged = best_of(ceilings, again)
    for name in ("key", "measured_utc", "cached", "cache_file"):
        if ceilings.has(name):
            merged = merged.adding(**{name: getattr(ceilings, name)})
    if ceilings.cache_file and ceilings.key is not None:
        stored = merged.without("key", "cached", "cache_file")
        _write_cache(Path(ceilings.cache_file), ceilings.key, stored)
    return merged
