"""export: the deployment path. torch.export.export captures the whole graph, AOTInductor compiles
it ahead of time into a package (.pt2: a shared library plus weights), and the loaded package runs.

Its bytes come from Inductor's scheduler nodes, captured during the ahead-of-time build (Inductor
emits the same per-graph metrics record there as under torch.compile), and its fusion map pairs
each generated kernel with the eager calls it computes, as for compile. The package is written into
a temporary folder that is removed once it is loaded (the loader keeps its own extracted copy).

C++ kernels appear in the profiler only when the package is built with
`cpp.enable_kernel_profile`: without it the loaded package records no event at all. A model whose
output torch.export cannot take (a transformers cache inside a ModelOutput) is exported with its
output flattened to tensors, as trace does (`compiler.outputs` says what was dropped).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

from profreport.files import library_writes
from profreport.format import fmt_bytes
from profreport.modes.base import WARMUP_CALLS, ModeError, PreparedMode, Sync, warm_up
from profreport.modes.capture_errors import failure_line, model_files
from profreport.modes.compile import CODE_CACHES, CompileMode
from profreport.record.model import CompilerEvidence, OkMode, Run


def aoti_capture_config(device_type: str) -> dict[str, Any]:
    """The package's build settings on `device_type`: no FX-graph cache hit that would skip code
    generation (and with it the scheduler's metrics record), except in a timing worker
    (compile.CODE_CACHES). On CPU the C++ wrapper must record
    its kernels for the profiler (`cpp.enable_kernel_profile`); on CUDA the profiler records the
    kernels themselves (CUPTI), and that setting switches the GPU wrapper onto a separate path
    that wraps every Triton launch in a record function, so it stays off there. (On an H200 with
    torch 2.11, generate with export died of SIGSEGV with it on; that it is the cause is not
    confirmed on a GPU yet.)"""
    return {**CODE_CACHES, "cpp.enable_kernel_profile": device_type == "cpu"}


class ExportMode(CompileMode):
    """torch.export -> AOTInductor package -> loaded and run. Fusion map, verdict clause,
    generated-kernel names and failure reset are compile's (the same Inductor underneath)."""

    def __init__(self) -> None:
        super().__init__("export")

    def build(self, module: Any, inputs: tuple[Any, ...], sync: Sync) -> PreparedMode:
        import torch
        from torch._inductor import metrics

        from profreport.modes.inductor_capture import InductorNodeCapture, capturing_nodes
        from profreport.modes.outputs import with_tensor_outputs

        # torch.export accepts only outputs pytree can open: a ModelOutput holding a
        # DynamicCache is flattened to its tensors first, as trace does (the record says so).
        eager_output = warm_up(module, inputs, sync, 1)
        target, flattened = with_tensor_outputs(module, eager_output, "torch.export")
        del eager_output
        start = time.perf_counter()
        try:
            program = torch.export.export(target, tuple(inputs))
        except Exception as exc:  # data-dependent control flow, unsupported ops, ...
            raise ModeError(failure_line("torch.export", exc, model_files(module))) from exc
        export_s = time.perf_counter() - start

        metrics.reset()
        handler = InductorNodeCapture()
        device = next((t.device.type for t in inputs if isinstance(t, torch.Tensor)), "cpu")
        config = {**aoti_capture_config(device), **self.inductor_options}
        with (
            tempfile.TemporaryDirectory(prefix="profreport-aoti-") as folder,
            library_writes(Path(folder)),  # a package cut short by a full disk fails to load
        ):
            with capturing_nodes(handler):
                package = torch._inductor.aoti_compile_and_package(
                    program,
                    package_path=os.path.join(folder, "model.pt2"),
                    inductor_configs=config,
                )
            build_s = time.perf_counter() - start - export_s
            package_bytes = os.path.getsize(package)
            loaded = torch._inductor.aoti_load_package(package)
        compile_s = time.perf_counter() - start  # export + ahead-of-time build + load
        compiler = CompilerEvidence(
            inductor_nodes=tuple(handler.nodes),
            inductor_bytes_accessed=int(metrics.num_bytes_accessed),
            generated_kernel_count=int(metrics.generated_kernel_count),
            graphs=1,  # export captures the whole forward or fails
            graph_breaks=0,
            export_s=export_s,
            aot_build_s=build_s,
            package_bytes=package_bytes,
            outputs=flattened,
        )
        warm_up(loaded, inputs, sync, WARMUP_CALLS)
        return PreparedMode(self.name, loaded, compile_s=compile_s, compiler=compiler)

    def fusion_evidence(self, mode: OkMode, run: Run) -> str:
        return "; ".join(filter(None, [super().fusion_evidence(mode, run), package_clause(mode)]))


def package_clause(mode: OkMode) -> str:
    """The package's size and what building it cost (measured here, once)."""
    compiler = mode.compiler
    if compiler is None or compiler.package_bytes is None:
        return ""
    return (
        f"AOTInductor package {fmt_bytes(compiler.package_bytes)}, built in "
        f"{compiler.aot_build_s or 0.0:.1f} s (export {compiler.export_s or 0.0:.2f} s)"
    )
