"""Peak memory of one forward call of a prepared mode.

CUDA: the caching allocator's `max_memory_allocated` after `reset_peak_memory_stats`, around one
call: everything allocated on the device at the peak (weights and inputs included). CPU: the
profiler's memory events (`profile_memory=True`) over one call: the most bytes allocated through
PyTorch's CPU allocator at any point of the call, counted from the call's start (weights and
inputs allocated before it are not included; memory a library allocates on its own, such as
oneDNN scratch space, is not seen).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from profreport.capture.profiling import cpu_trace_events
from profreport.record.model import PeakMemory
from profreport.record.section import JSON

CUDA_SOURCE = "measured (CUDA caching allocator, max_memory_allocated)"
CPU_SOURCE = "profiler memory events (profile_memory=True)"
CUDA_SCOPE = "device memory allocated at the peak of one call, weights and inputs included"
CPU_SCOPE = (
    "host memory allocated through PyTorch's allocator at the peak of one call, counted from the "
    "call's start (weights and inputs already allocated are not included)"
)


def peak_from_memory_events(events: Iterable[JSON]) -> int | None:
    """The largest `Total Allocated` of the profiler's `[memory]` events, relative to the level
    before the first of them (the first event's total less its own `Bytes`); None without any."""
    memory = [e for e in events if e.get("name") == "[memory]" and isinstance(e.get("args"), dict)]
    if not memory:
        return None
    first = min(memory, key=lambda e: e.get("ts", 0))["args"]
    start = int(first.get("Total Allocated", 0)) - int(first.get("Bytes", 0))
    peak = max(int(e["args"].get("Total Allocated", 0)) for e in memory)
    return max(peak - start, 0)


def measure_peak(
    fn: Callable[..., Any],
    inputs: tuple[torch.Tensor, ...],
    device: torch.device,
    sync: Callable[[], None],
) -> PeakMemory:
    """Peak memory of one call of `fn(*inputs)` (bytes None: no memory event seen)."""
    if device.type == "cuda":
        sync()
        torch.cuda.reset_peak_memory_stats(device)
        fn(*inputs)
        sync()
        peak: int | None = int(torch.cuda.max_memory_allocated(device))
        return PeakMemory(bytes=peak, source=CUDA_SOURCE, scope=CUDA_SCOPE)

    def one_call() -> None:
        fn(*inputs)
        sync()

    peak = peak_from_memory_events(cpu_trace_events(one_call, profile_memory=True))
    return PeakMemory(bytes=peak, source=CPU_SOURCE, scope=CPU_SCOPE)
