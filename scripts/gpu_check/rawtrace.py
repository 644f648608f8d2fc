"""A profiler trace counted with nothing of profreport's: the raw Chrome-trace events, so the
checks compare what profreport recorded with a second reading that shares none of its code.

- the steps are the host's `ProfilerStep#N` windows;
- a launch is a host call (category cuda_runtime or cuda_driver; hip* on ROCm) whose name holds
  "Launch" (cudaLaunchKernel, cuLaunchKernel for Triton, cudaGraphLaunch ...), in the step whose
  window holds its start;
- a device event (category kernel, gpu_memcpy or gpu_memset) belongs to the host call with its
  correlation id, so to that call's step, and to the innermost `cpu_op` around that call on the
  same thread (the operator that launched it);
- the largest tensor an operator was handed, from the `Input Dims` and `Input type` the profiler
  recorded, and the device's properties as the profiler wrote them.
"""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CATEGORIES = ("cuda_runtime", "cuda_driver")
STEP_PREFIX = "ProfilerStep#"
# the profiler's `Input type` names -> bytes per element
ITEM_BYTES = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
}

Event = dict[str, Any]


@dataclass(frozen=True)
class DeviceEvent:
    """One kernel, memcpy or memset on the device, with what launched it."""

    category: str  # kernel | gpu_memcpy | gpu_memset
    name: str
    ts: float
    step: int | None  # index of the step window its host call started in; None: outside one
    call: str | None  # the host call with its correlation id (cudaLaunchKernel, cuLaunchKernel)
    op: str | None  # the innermost cpu_op around that call on its thread


@dataclass(frozen=True)
class RawTrace:
    """What the raw events of one trace hold, per step where it matters."""

    steps: int
    device: tuple[DeviceEvent, ...]  # in time order
    launch_calls: tuple[tuple[str, int | None], ...]  # (host call name, step) per launch call
    device_properties: tuple[Event, ...]
    largest_input_bytes: int  # the largest tensor one operator was handed

    def kernels(self, step: int | None = None) -> list[DeviceEvent]:
        return [
            e for e in self.device if e.category == "kernel" and (step is None or e.step == step)
        ]

    def in_steps(self, category: str) -> list[DeviceEvent]:
        return [e for e in self.device if e.category == category and e.step is not None]

    def per_step(self) -> dict[str, float]:
        """Kernels, memcpy, memset, launches (graph launches included) and graph launches per
        step: what the step windows hold, divided by the number of steps."""
        if not self.steps:
            return {}
        launches = [name for name, step in self.launch_calls if step is not None]
        graphs = sum("Graph" in name for name in launches)
        counts = {
            "kernels": len(self.in_steps("kernel")),
            "memcpy": len(self.in_steps("gpu_memcpy")),
            "memset": len(self.in_steps("gpu_memset")),
            "launches": len(launches),
            "graph_launches": graphs,
        }
        return {what: n / self.steps for what, n in counts.items()}

    def step_kernel_counts(self) -> list[int]:
        """Kernels in each step window (they should all be alike)."""
        found = Counter(e.step for e in self.device if e.category == "kernel")
        return [found.get(i, 0) for i in range(self.steps)]

    def first_step_sequence(self) -> list[tuple[str, int]]:
        """The first step's kernels by name, in order of first launch, with their calls."""
        calls: Counter[str] = Counter(e.name for e in self.kernels(0))
        return [(name, calls[name]) for name in dict.fromkeys(e.name for e in self.kernels(0))]

    def kernels_per_step_by(self, key: str) -> Counter[str]:
        """Kernels per step counted by `key` (name, op or call)."""
        found: Counter[str] = Counter()
        for e in self.kernels():
            if e.step is not None:
                found[str(getattr(e, key))] += 1
        return Counter({k: n / self.steps for k, n in found.items()}) if self.steps else found

    @property
    def device_name(self) -> str | None:
        return str(self.device_properties[0].get("name")) if self.device_properties else None


def load_document(path: Path) -> dict[str, Any]:
    """A trace file as JSON: `path`, or `path` + ".gz" beside it (how recorded runs keep it)."""
    if not path.is_file() and Path(str(path) + ".gz").is_file():
        path = Path(str(path) + ".gz")
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a Chrome trace (a JSON object with traceEvents)")
    return data


def read(path: Path) -> RawTrace:
    return from_document(load_document(path))


def _is_launch(name: str) -> bool:
    return "Launch" in name


def _tensor_bytes(dims: Any, kind: Any) -> int:
    size = ITEM_BYTES.get(str(kind))
    if size is None or not isinstance(dims, list) or not dims:
        return 0
    if not all(isinstance(d, int) and d >= 0 for d in dims):
        return 0
    return size * math.prod(dims)


def _largest_input(ops: Iterable[Event]) -> int:
    largest = 0
    for op in ops:
        args = op.get("args") or {}
        dims_types = zip(args.get("Input Dims") or [], args.get("Input type") or [], strict=False)
        for dims, kind in dims_types:
            largest = max(largest, _tensor_bytes(dims, kind))
    return largest


def _innermost_ops(ops: list[Event], calls: list[Event]) -> dict[int, str]:
    """For each host call (by its index in `calls`), the innermost cpu_op on its thread whose
    span holds the call's start (operators nest on a thread: one sweep with a stack)."""
    found: dict[int, str] = {}
    threads: dict[tuple[Any, Any], tuple[list[Event], list[int]]] = {}
    for op in ops:
        threads.setdefault((op.get("pid"), op.get("tid")), ([], []))[0].append(op)
    for i, call in enumerate(calls):
        threads.setdefault((call.get("pid"), call.get("tid")), ([], []))[1].append(i)

    def end(op: Event) -> float:
        return float(op["ts"]) + float(op.get("dur", 0.0))

    for thread_ops, thread_calls in threads.values():
        thread_ops.sort(key=lambda o: (float(o["ts"]), -float(o.get("dur", 0.0))))
        thread_calls.sort(key=lambda c: float(calls[c]["ts"]))
        stack: list[Event] = []
        j = 0
        for i in thread_calls:
            ts = float(calls[i]["ts"])
            while j < len(thread_ops) and float(thread_ops[j]["ts"]) <= ts:
                start = float(thread_ops[j]["ts"])
                while stack and end(stack[-1]) < start:
                    stack.pop()
                stack.append(thread_ops[j])
                j += 1
            while stack and end(stack[-1]) < ts:
                stack.pop()
            if stack:
                found[i] = str(stack[-1]["name"])
    return found


def from_document(document: dict[str, Any]) -> RawTrace:
    events: list[Event] = [e for e in document.get("traceEvents", []) if isinstance(e, dict)]
    windows = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0)))
        for e in events
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith(STEP_PREFIX)
    )

    def step_of(ts: float) -> int | None:
        return next((i for i, (a, b) in enumerate(windows) if a <= ts <= b), None)

    calls = [e for e in events if e.get("cat") in HOST_CATEGORIES and "ts" in e]
    ops = [e for e in events if e.get("cat") == "cpu_op" and "ts" in e]
    op_of = _innermost_ops(ops, calls)
    by_correlation: dict[Any, int] = {}
    for i, host in enumerate(calls):
        correlation = (host.get("args") or {}).get("correlation")
        if correlation is not None:
            by_correlation[correlation] = i
    device = []
    for e in events:
        if e.get("cat") not in DEVICE_CATEGORIES:
            continue
        index = by_correlation.get((e.get("args") or {}).get("correlation"))
        call = calls[index] if index is not None else None
        device.append(
            DeviceEvent(
                category=str(e["cat"]),
                name=str(e.get("name", "")),
                ts=float(e.get("ts", 0.0)),
                step=None if call is None else step_of(float(call["ts"])),
                call=None if call is None else str(call.get("name")),
                op=None if index is None else op_of.get(index),
            )
        )
    device.sort(key=lambda d: d.ts)
    launch_calls = tuple(
        (str(c["name"]), step_of(float(c["ts"]))) for c in calls if _is_launch(str(c["name"]))
    )
    props = document.get("deviceProperties") or []
    return RawTrace(
        steps=len(windows),
        device=tuple(device),
        launch_calls=launch_calls,
        device_properties=tuple(p for p in props if isinstance(p, dict)),
        largest_input_bytes=_largest_input(ops),
    )


def base_name(kernel: str) -> str:
    """A kernel's own identifier, without `void`, namespaces, template arguments and parameters:
    profiler and Nsight Compute demangle the same kernel differently (at::native:: against at::,
    `(anonymous namespace)` against `<unnamed>`), but agree on this."""
    name = kernel.removeprefix("void ").strip()
    for anonymous in ("(anonymous namespace)::", "<unnamed>::", "{anonymous}::"):
        name = name.replace(anonymous, "")
    cut = min((i for i in (name.find("<"), name.find("(")) if i >= 0), default=len(name))
    return name[:cut].rsplit("::", 1)[-1].strip()
