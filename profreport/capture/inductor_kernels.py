"""Which generated kernel each Inductor scheduler node went into, read at code generation.

On CPU one C++ kernel holds every scheduler node between two library calls (the C++ backend
flushes only at an extern call, a template or a device change), and identical kernel source is
reused under one name, so a node's kernel cannot be told from the node or from the kernel's
descriptive name (which Inductor truncates and which many kernels share a prefix of). Every
scheduling backend announces each kernel it emits through `codegen_comment(node_schedule,
kernel_name)`; we listen there while torch.compile compiles, and name the kernel as the profiler
records it (`graph_<id>_cpp_fused_..._<n>` for C++ kernels with `cpp.enable_kernel_profile`, the
Triton kernel name on GPU).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any


class KernelCalls:
    """Scheduler node -> (kernel name as profiled, kernel call number) for one graph."""

    def __init__(self) -> None:
        self._of: dict[Any, tuple[str, int]] = {}
        self._calls = 0

    def record(self, scheduling: Any, node_schedule: Any, kernel_name: Any) -> None:
        """One emitted kernel call: its name and the scheduler nodes it holds."""
        if not kernel_name:
            return
        from torch._inductor.virtualized import V

        name = str(kernel_name)
        graph_id = getattr(V.graph, "graph_id", None)
        if type(scheduling).__name__ == "CppScheduling" and graph_id is not None:
            # The C++ kernel's RECORD_FUNCTION is "graph_<id>_<kernel name>" (codegen/cpp.py).
            name = f"graph_{graph_id}_{name}"
        call = self._calls
        self._calls += 1
        for snode in node_schedule:
            get_nodes = getattr(snode, "get_nodes", None)
            if get_nodes is None:  # EnableReduction / DisableReduction markers
                continue
            for sub in get_nodes():
                self._of[sub] = (name, call)

    def of_node(self, node: Any) -> tuple[str | None, int | None, bool]:
        """(kernel, kernel call) of a scheduler node, None when it went into no single
        generated kernel (extern calls, no-op nodes, an unannounced kernel), and whether the
        node runs no kernel at all (a no-op node, or the unpacking of a library call's
        outputs)."""
        nop = type(node).__name__ == "NopKernelSchedulerNode" or (
            type(getattr(node, "node", None)).__name__ == "MultiOutput"
        )
        found = {self._of.get(sub) for sub in node.get_nodes()}
        kernel, call = (found.pop() if len(found) == 1 else None) or (None, None)
        return kernel, call, nop

    def clear(self) -> None:
        self._of.clear()


def _scheduling_classes() -> list[type]:
    """Inductor's scheduling backends that define `codegen_comment`."""
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.scheduler import BaseScheduling

    classes: list[type] = [BaseScheduling, CppScheduling]
    try:
        from torch._inductor.codegen.triton import TritonScheduling

        classes.append(TritonScheduling)
    except Exception:  # no Triton in this build: no Triton kernels either
        pass
    return [c for c in classes if "codegen_comment" in vars(c)]


@contextmanager
def recording_kernel_calls(calls: KernelCalls) -> Iterator[None]:
    """While Inductor generates code, record into `calls` which kernel each node went into.
    A backend that stops announcing leaves its nodes without a kernel: reported as not
    identified, never guessed."""
    originals = {cls: vars(cls)["codegen_comment"] for cls in _scheduling_classes()}

    def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
        def codegen_comment(self: Any, node_schedule: Any, kernel_name: Any = None) -> Any:
            with suppress(Exception):  # bookkeeping must never break compilation
                calls.record(self, node_schedule, kernel_name)
            return original(self, node_schedule, kernel_name)

        return codegen_comment

    for cls, original in originals.items():
        cls.codegen_comment = wrap(original)  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for cls, original in originals.items():
            cls.codegen_comment = original  # type: ignore[attr-defined]
