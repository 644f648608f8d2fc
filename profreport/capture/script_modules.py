"""The module each op of a TorchScript forward ran in, from the profiler's TorchScript module
hierarchy (`with_modules=True`): the interpreter records it on every op it runs, Python hooks
never fire inside a scripted graph.

Each op the recording TorchDispatchMode sees is one `PythonDispatchMode` event in the trace (the
dispatcher entering the mode), carrying the hierarchy of the op that entered it: the i-th such
event is the i-th recorded op, and the counts must agree or nothing is attributed. A hierarchy
("TOP(Mixers)::forward.0(Block)::forward.up(Linear)::forward.") names the instances called,
not the containers between them (a ModuleList has no forward): each step is resolved against the
scripted module's `named_modules()`, directly or through one ModuleList / ModuleDict, with the
type name checked; a step that does not resolve to exactly one module leaves the op unplaced.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

_DISPATCH_EVENT = "PythonDispatchMode"
_CONTAINERS = ("ModuleList", "ModuleDict")
# profreport's wrapper that flattens a model's outputs for tracing (modes/outputs.py)
_WRAPPER, _WRAPPED = "TensorOutputs", "model"


def _steps(hierarchy: str) -> list[tuple[str, str]]:
    """(instance, type) of each module call below the top: "forward.0(Block)" -> ("0", "Block")."""
    steps = []
    for part in hierarchy.split("::")[1:]:
        if "(" not in part:
            continue  # the innermost method's own name ("forward.")
        head, _, kind = part.partition("(")
        steps.append((head.split(".", 1)[-1], kind.rstrip(")")))
    return steps


class ModuleResolver:
    """Maps TorchScript module hierarchies to `named_modules()` paths of the scripted module
    (without profreport's output-flattening wrapper)."""

    def __init__(self, scripted: torch.nn.Module) -> None:
        self._kinds = {name: _kind(m) for name, m in scripted.named_modules()}
        self._wrapped = self._kinds.get("") == _WRAPPER and _WRAPPED in self._kinds
        self._cache: dict[str, str | None] = {}

    def path(self, hierarchy: str) -> str | None:
        if not hierarchy.startswith("TOP("):
            return None  # an op the TorchScript interpreter did not run
        if hierarchy not in self._cache:
            self._cache[hierarchy] = self._resolve(_steps(hierarchy))
        return self._cache[hierarchy]

    def _resolve(self, steps: Sequence[tuple[str, str]]) -> str | None:
        current = ""
        for instance, kind in steps:
            direct = f"{current}.{instance}" if current else instance
            found = [direct] if self._kinds.get(direct) == kind else []
            for name, container in self._kinds.items():
                inside = name.rpartition(".")[0] == current if current else "." not in name
                if container in _CONTAINERS and inside:
                    candidate = f"{name}.{instance}"
                    if self._kinds.get(candidate) == kind:
                        found.append(candidate)
            if len(found) != 1:
                return None
            current = found[0]
        if self._wrapped:
            if current != _WRAPPED and not current.startswith(_WRAPPED + "."):
                return None
            return current[len(_WRAPPED) + 1 :]
        return current


def _kind(module: torch.nn.Module) -> str:
    original = getattr(module, "original_name", None)  # a scripted module's Python class
    return str(original) if original is not None else type(module).__name__


def dispatch_hierarchies(run: Callable[[], None]) -> list[str] | None:
    """Run `run` (one forward under a TorchDispatchMode) under the CPU profiler with module
    hierarchies on; the hierarchy of each op the mode saw, in order (None: no events)."""
    from profreport.capture.profiling import cpu_trace_events

    events = cpu_trace_events(run, with_modules=True)
    entered = [e for e in events if e.get("name") == _DISPATCH_EVENT and "ts" in e]
    if not entered:
        return None
    entered.sort(key=lambda e: float(e["ts"]))
    return [str((e.get("args") or {}).get("Module Hierarchy", "")) for e in entered]
