"""Where a mode's modeled bytes come from: the dispatcher's tensor-I/O log of one forward, or the
scheduler nodes Inductor reported while it compiled (the dispatcher cannot see Inductor's kernels).

The analysis modules are imported when bytes are captured, so that the registry stays light.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from profreport.modes.base import BytesSource, BytesWork, PreparedMode, Sync


class DispatcherLog(BytesSource):
    """Every dispatched operation of one forward (TorchDispatchMode); TorchScript fusion groups,
    which bypass the dispatcher, sized from the profiled graph's tensor types."""

    name = "dispatcher"

    def capture(self, prepared: PreparedMode, inputs: Sequence[Any], sync: Sync) -> BytesWork:
        from profreport.analysis.bytes_model import DISPATCH_METHOD, calls_from_tensor_io
        from profreport.analysis.kernel_definitions import BOOKKEEPING_OPS
        from profreport.capture.opio import record_tensor_io
        from profreport.capture.provenance import attribution_enabled
        from profreport.record.model import TensorIO

        root, scripted, attribution = _attribution_root(prepared.fn, attribution_enabled())
        ops = record_tensor_io(prepared.fn, tuple(inputs), sync, root, scripted)
        if scripted is not None and not any(op.module is not None for op in ops):
            attribution = SCRIPT_NOT_LINED_UP
        calls = calls_from_tensor_io(ops, BOOKKEEPING_OPS)
        method = DISPATCH_METHOD
        not_modeled: list[str] = []
        groups = prepared.compiler.fusion_groups or ()
        for g in groups:  # fused kernels bypass the dispatcher: size them from the graph's types
            if g.read is None or g.written is None:
                not_modeled.append(g.kind)
            else:
                calls.append(TensorIO(g.kind, g.read, g.written, None, "graph types"))
        if groups:
            method += "; fusion groups from the profiled graph's tensor types"
        not_modeled += prepared.compiler.unrecorded_ops or ()
        return BytesWork(calls, method, not_modeled, attribution)


EAGER_ATTRIBUTION = (
    "module forward hooks (named_modules() paths) and the Python stack of each dispatched op"
)
SCRIPT_ATTRIBUTION = (
    "TorchScript module hierarchy of each dispatched op (profiler with_modules); source lines "
    "not recorded (TorchScript runs no Python frames)"
)
SCRIPT_FROZEN = "; the frozen graph kept no submodules, so its ops are placed at the model itself"
SCRIPT_NOT_LINED_UP = (
    "not recorded: the profiler's TorchScript module hierarchy did not line up with the "
    "dispatched ops"
)
SWITCHED_OFF = "not recorded: PROFREPORT_ATTRIBUTION=0"


def _attribution_root(fn: Any, enabled: bool) -> tuple[Any, Any, str]:
    """The module whose forward hooks name the ops' modules, the TorchScript module whose
    profiled module hierarchy names them instead (TorchScript runs no hooks), and how the
    modules are recorded or why they are not."""
    import torch

    if not enabled:
        return None, None, SWITCHED_OFF
    if isinstance(fn, torch.jit.ScriptFunction):
        return None, None, "not recorded: a TorchScript function has no modules"
    if isinstance(fn, torch.jit.ScriptModule):
        frozen = len(dict(fn.named_modules())) == 1
        return None, fn, SCRIPT_ATTRIBUTION + (SCRIPT_FROZEN if frozen else "")
    if isinstance(fn, torch.nn.Module):
        return fn, None, EAGER_ATTRIBUTION
    return None, None, "not recorded: the mode runs a function, not the model's module"


class InductorScheduler(BytesSource):
    """The scheduler nodes Inductor reported at compile time (captured by the mode's build)."""

    name = "inductor"

    def capture(self, prepared: PreparedMode, inputs: Sequence[Any], sync: Sync) -> BytesWork:
        from profreport.analysis.bytes_model import INDUCTOR_METHOD, inductor_calls

        compiler = prepared.compiler
        from profreport.capture.provenance import attribution_enabled

        calls, unsized = inductor_calls(compiler.inductor_nodes or ())
        if compiler.graph_breaks:
            unsized.append("code outside the compiled graphs (graph breaks)")
        attribution = INDUCTOR_ATTRIBUTION if attribution_enabled() else SWITCHED_OFF
        return BytesWork(calls, INDUCTOR_METHOD, unsized, attribution)


INDUCTOR_ATTRIBUTION = (
    "FX node meta of each scheduler node's origins: nn_module_stack (module) and stack_trace "
    "(source lines)"
)
DISPATCHER_LOG = DispatcherLog()
INDUCTOR_SCHEDULER = InductorScheduler()
