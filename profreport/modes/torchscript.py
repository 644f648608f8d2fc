"""The TorchScript modes: script (torch.jit.script), trace (torch.jit.trace) and optimize
(torch.jit.freeze + torch.jit.optimize_for_inference). Their bytes come from the dispatcher log plus
the optimized graph's fusion groups; the TorchScript profiling executor specialises only after a few
calls, so building includes that warm-up."""

from __future__ import annotations

import dataclasses
from typing import Any

from profreport.analysis.fusion import script_fusion
from profreport.analysis.fusion_evidence import optimize_evidence, torchscript_evidence
from profreport.analysis.fusion_optimize import graph_kind, optimize_fusion
from profreport.analysis.why_not_fused import optimize_why_not, torchscript_why_not
from profreport.modes.base import Mode, ModeError, PreparedMode, Sync
from profreport.record.model import FusionMap, OkMode, Run, WhyNotFused


class _TorchScriptGroups(Mode):
    """script and trace: fusion evidence is the optimized graph's fusion groups."""

    graph_kind = "scripted"  # how the graph is made, as a verdict names it

    def fusion_map(self, mode: OkMode, eager: OkMode) -> FusionMap | None:
        groups = (mode.compiler.fusion_groups if mode.compiler is not None else None) or ()
        return script_fusion(groups, eager.bytes.sequence)

    def fusion_evidence(self, mode: OkMode, run: Run) -> str:
        return torchscript_evidence(mode, run, self.graph_kind)

    def why_not_fused(self, mode: OkMode, run: Run) -> list[WhyNotFused] | None:
        return torchscript_why_not(mode, run)


class ScriptMode(_TorchScriptGroups):
    name = "script"

    def build(self, module: Any, inputs: tuple[Any, ...], sync: Sync) -> PreparedMode:
        import torch

        from profreport.modes import torchscript_graph as tg
        from profreport.script_errors import script_failure_line

        with tg.quiet_torchscript_deprecations():
            try:
                scripted = torch.jit.script(module)
            except Exception as exc:
                raise ModeError(script_failure_line(exc, type(module).__name__)) from exc
        return tg.prepared_after_warmup(self.name, scripted, inputs, sync)


class TraceMode(_TorchScriptGroups):
    graph_kind = "traced"
    name = "trace"

    def build(self, module: Any, inputs: tuple[Any, ...], sync: Sync) -> PreparedMode:
        from profreport.modes import torchscript_graph as tg

        with tg.quiet_torchscript_deprecations():
            traced, flattened = tg.traced(module, inputs, sync)
        return tg.prepared_after_warmup(self.name, traced, inputs, sync, flattened)


class OptimizeMode(Mode):
    name = "optimize"

    def build(self, module: Any, inputs: tuple[Any, ...], sync: Sync) -> PreparedMode:
        import torch

        from profreport.modes import torchscript_graph as tg
        from profreport.script_errors import script_failure_line

        notes = []
        flattened = None
        with tg.quiet_torchscript_deprecations():
            try:
                base = torch.jit.script(module)
                notes.append("scripted, then frozen and optimized for inference")
            except Exception as exc:  # models that cannot be scripted can often be traced
                why = script_failure_line(exc, type(module).__name__)
                base, flattened = tg.traced(module, inputs, sync)
                notes.append(f"traced instead of scripted ({why})")
            before = tg.describe_graph(base.inlined_graph).op_counts
            frozen = torch.jit.freeze(base.eval())
            optimized = torch.jit.optimize_for_inference(frozen)
            # The graph the profiling executor ran: on CUDA it holds the NNC fusion groups the
            # frozen graph does not (their kernels and bytes); else the frozen graph itself.
            executed = tg.jit_graph_after_warmup(optimized, inputs, sync)
        compiler = dataclasses.replace(
            tg.describe_graph(executed if executed is not None else optimized.graph),
            op_counts_before=before,
            notes=tuple(notes),
            outputs=flattened or None,
        )
        return PreparedMode(self.name, optimized, compiler=compiler)

    def fusion_map(self, mode: OkMode, eager: OkMode) -> FusionMap | None:
        from profreport.analysis.kernel_definitions import BOOKKEEPING_OPS

        compiler = mode.compiler
        return optimize_fusion(
            eager.bytes.sequence,
            mode.bytes.sequence,
            BOOKKEEPING_OPS,
            compiler.op_counts_before if compiler is not None else None,
            graph_kind(mode),
            compiler.op_counts if compiler is not None else None,
            (compiler.fusion_groups if compiler is not None else None) or (),
        )

    def fusion_evidence(self, mode: OkMode, run: Run) -> str:
        return optimize_evidence(mode, run)

    def why_not_fused(self, mode: OkMode, run: Run) -> list[WhyNotFused] | None:
        return optimize_why_not(mode, run)
