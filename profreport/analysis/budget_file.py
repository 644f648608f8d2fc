"""What a run puts in its kernel-budget file (record/expectation.py): kernels by name (an
Inductor-generated name without its graph prefix and per-process counter), fused groups from the
fusion map, counts and status per mode; and the file refreshed from a run, keeping what a person
set. Pure: (run with findings, the file as it was) -> Expectation. The check is analysis/budget.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from profreport.analysis.kernel_diff import generated_stem, mode_kernels
from profreport.record.expectation import (
    DEFAULT_TOLERANCES,
    SCHEMA,
    DeviceExpectation,
    Expectation,
    ExpectedMode,
    FailedExpectation,
    FusedGroupExpectation,
    KernelExpectation,
    OkExpectation,
    SkippedExpectation,
)
from profreport.record.model import ModeResult, OkMode, Run


def kernel_key(name: str) -> str:
    """A kernel's name as a budget lists it: an Inductor-generated kernel's without its graph
    prefix and per-process counter (`graph_0_cpp_fused_relu_3` -> `cpp_fused_relu`), any other
    name as it is."""
    return generated_stem(name) or name


def union(groups: Iterable[Iterable[str]]) -> tuple[str, ...]:
    """Every name of `groups`, once, in first-seen order."""
    return tuple(dict.fromkeys(m for g in groups for m in g))


def _per_step(x: float) -> float:
    """Calls per step as the file writes them: a whole number as an integer."""
    rounded = round(x, 3)
    return int(rounded) if rounded.is_integer() else rounded


def kernels_by_name(mode: OkMode) -> dict[str, KernelExpectation]:
    """A mode's kernel table by budget name (kernel_key), calls per step summed, sorted."""
    calls: dict[str, float] = {}
    places: dict[str, list[tuple[str, ...]]] = {}
    for side in mode_kernels(mode):
        key = kernel_key(side.name)
        calls[key] = calls.get(key, 0.0) + side.calls
        places.setdefault(key, []).append(side.modules)
    return {
        k: KernelExpectation(calls_per_step=_per_step(calls[k]), modules=union(places[k]) or None)
        for k in sorted(calls)
    }


def fused_groups(mode: OkMode) -> dict[str, FusedGroupExpectation]:
    """A mode's fused groups (its fusion map's groups where one kernel computes several eager
    calls) by their eager ops, counted per forward, sorted."""
    found: dict[str, list[tuple[tuple[str, ...], tuple[str, ...]]]] = {}
    for group in mode.fusion.groups if mode.fusion is not None else ():
        if group.counts_as_fused:
            name = " + ".join(group.eager_ops)
            found.setdefault(name, []).append((group.kernels, group.modules or ()))
    return {
        name: FusedGroupExpectation(
            per_step=len(groups),
            kernels=union(tuple(kernel_key(k) for k in kernels) for kernels, _ in groups),
            modules=union(modules for _, modules in groups) or None,
        )
        for name, groups in sorted(found.items())
    }


def mode_expectation(mode: ModeResult) -> ExpectedMode:
    """What a run's mode (with findings) puts in the file: its status and, when it ran, its
    counts; nothing a person sets."""
    if not isinstance(mode, OkMode):
        return FailedExpectation() if mode.status == "failed" else SkippedExpectation()
    return OkExpectation(
        kernels_per_step=mode.kernels.per_step,
        bytes_per_step=mode.bytes.traffic,
        fused_groups=fused_groups(mode),
        kernels=kernels_by_name(mode),
    )


def _refreshed(new: ExpectedMode, old: ExpectedMode | None) -> ExpectedMode:
    """`new` keeping what a person set in `old`."""
    if old is None:
        return new
    return dataclasses.replace(
        new, min_speedup=old.min_speedup, tolerances=old.tolerances, note=old.note, extra=old.extra
    )


def expectation_of(run: Run, previous: Expectation | None = None) -> Expectation:
    """The expectation file after this run: `previous` (None: a new file, its tolerances the
    defaults written out) with the run's device kind's modes written from the run. Modes and
    device kinds this run did not cover, tolerances, `min_speedup` and notes are kept."""
    before = previous or Expectation(schema=SCHEMA, tolerances=DEFAULT_TOLERANCES)
    kind = run.device.type
    old = before.devices.get(kind)
    modes = dict(old.modes) if old is not None else {}
    for name, mode in run.modes.items():
        modes[name] = _refreshed(mode_expectation(mode), modes.get(name))
    device = DeviceExpectation(
        device=run.device.name,
        torch=run.env.torch,
        # eager, the reference, first; then by name
        modes={name: modes[name] for name in sorted(modes, key=lambda n: (n != "eager", n))},
        extra={} if old is None else old.extra,
    )
    devices = {**before.devices, kind: device}
    return Expectation(
        schema=SCHEMA,
        model=run.model.name,
        tolerances=before.tolerances,
        devices={k: devices[k] for k in sorted(devices)},
        note=before.note,
        extra=before.extra,
    )


def needs_timing(expectation: Expectation, device_kind: str, modes: Iterable[str]) -> bool:
    """Whether checking `modes` on `device_kind` needs latency timing: a `min_speedup` is set
    for one of them (only the paired speedup can answer it)."""
    device = expectation.devices.get(device_kind)
    if device is None:
        return False
    wanted = set(modes)
    return any(e.min_speedup is not None for m, e in device.modes.items() if m in wanted)
