"""compile: torch.compile. Its bytes come from Inductor's scheduler nodes (the dispatcher cannot
see Inductor's kernels), and its fusion map pairs each generated kernel with the eager calls it
computes. Variants (another backend, Inductor options such as max-autotune) are instances with
other parameters, registered under their own name.

Every build compiles afresh without clearing Dynamo's caches: its torch.compile gets a name of
its own, and Dynamo reuses a cached graph only for a backend that compares equal (same options
and name). Clearing the caches (`torch._dynamo.reset()`, as each build did before) dropped the
compiled code of every compile mode built earlier in the process, base's included when `ab`
built head: that mode then recompiled on its first timed call, without the build's Inductor
settings, and that one 220 ms call sized its timing blocks (issue 39). A run clears them once,
before it builds anything (reset_compiler_caches).
"""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from profreport.analysis.fusion import compile_fusion
from profreport.analysis.fusion_evidence import inductor_evidence
from profreport.analysis.why_not_fused import inductor_why_not
from profreport.modes.base import WARMUP_CALLS, Mode, ModeError, PreparedMode, Sync, warm_up
from profreport.modes.bytes_sources import INDUCTOR_SCHEDULER
from profreport.record.model import CompilerEvidence, FusionMap, OkMode, Run, WhyNotFused

# Inductor settings every compile mode needs while it compiles (restored afterwards): CPU kernels
# appear in the profiler, and (CODE_CACHES) no FX-graph cache hit skips code generation and its
# metrics.
_CAPTURE_CONFIG = {"cpp.enable_kernel_profile": True}
# The compilers' caches of generated code while a mode builds: off where the evidence is captured;
# a timing worker (profreport/timing_worker.py) turns them on (use_code_caches).
CODE_CACHES = {"fx_graph_cache": False}
_BUILDS = itertools.count(1)  # each build's torch.compile name: profreport:<mode>#<n>


class CompileMode(Mode):
    bytes_source = INDUCTOR_SCHEDULER
    timed_build = False  # compile_s is the first call (Dynamo capture + Inductor codegen)

    def __init__(
        self,
        name: str = "compile",
        *,
        compile_kwargs: Mapping[str, Any] | None = None,
        inductor_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.compile_kwargs = dict(compile_kwargs or {})
        self.inductor_options = dict(inductor_options or {})

    def build(self, module: Any, inputs: tuple[Any, ...], sync: Sync) -> PreparedMode:
        import torch
        import torch._inductor.config as inductor_config
        from torch._dynamo.utils import counters
        from torch._inductor import metrics

        from profreport.modes.capture_errors import failure_line, known_failure, model_files
        from profreport.modes.compile_logs import capturing_compiler_logs
        from profreport.modes.inductor_capture import InductorNodeCapture, capturing_nodes

        counters.clear()  # a second compile mode would count both
        metrics.reset()
        handler = InductorNodeCapture()
        config = {**_CAPTURE_CONFIG, **CODE_CACHES, **self.inductor_options}
        name = f"profreport:{self.name}#{next(_BUILDS)}"  # never equal to another build's
        with inductor_config.patch(config):
            compiled: Callable[..., Any] = torch.compile(module, name=name, **self.compile_kwargs)
            start = time.perf_counter()
            with capturing_nodes(handler), capturing_compiler_logs() as logs:
                try:
                    warm_up(compiled, inputs, sync, 1)
                except Exception as exc:
                    # under fullgraph, a break is a failure: say where, as export does
                    if not self.compile_kwargs.get("fullgraph") or not known_failure(exc):
                        raise
                    line = failure_line("torch.compile(fullgraph=True)", exc, model_files(module))
                    raise ModeError(line) from exc
            compile_s = time.perf_counter() - start
            compiler = CompilerEvidence(
                inductor_nodes=tuple(handler.nodes),
                inductor_bytes_accessed=int(metrics.num_bytes_accessed),
                generated_kernel_count=int(metrics.generated_kernel_count),
                graphs=int(counters["stats"].get("unique_graphs", 0)),
                graph_breaks=int(sum(counters["graph_break"].values())),
                # why-not-fused evidence: Dynamo's and Inductor's own words (compile_logs)
                graph_break_records=tuple(logs.graph_breaks),
                fusion_refusals=tuple(logs.fusion_refusals),
            )
            warm_up(compiled, inputs, sync, WARMUP_CALLS)
        return PreparedMode(self.name, compiled, compile_s=compile_s, compiler=compiler)

    def fusion_map(self, mode: OkMode, eager: OkMode) -> FusionMap | None:
        from profreport.analysis.kernel_definitions import BOOKKEEPING_OPS, is_inductor_kernel

        return compile_fusion(
            (mode.compiler.inductor_nodes if mode.compiler is not None else None) or (),
            eager.bytes.sequence,
            BOOKKEEPING_OPS,
            # the kernels of its profiler table that Inductor generated
            [r.name for r in mode.kernels.table if is_inductor_kernel(r.name)],
        )

    def fusion_evidence(self, mode: OkMode, run: Run) -> str:
        return inductor_evidence(mode, run)

    def why_not_fused(self, mode: OkMode, run: Run) -> list[WhyNotFused] | None:
        return inductor_why_not(mode, run, self.name)

    def ahead(self, device_type: str) -> None:
        """Import Dynamo and Inductor (about 1.5 of a timing worker's 2.7 CPU-s of imports)."""
        import torch._dynamo
        import torch._inductor.compile_fx  # noqa: F401

    def reset_after_failure(self) -> None:
        """Dynamo's counters cleared and Inductor's compile workers stopped: a failed build
        leaves no compile job running beside the modes that follow. Its caches stay: they hold
        the other compile modes' code (a failed build added nothing to them under its name)."""
        from torch._dynamo.utils import counters

        counters.clear()
        stop_compile_workers()


def cuda_graph_evidence(mode: OkMode) -> str:
    """The launch-count clause: kernels per step against the launch calls that started them, and
    how many of those were graph launches (one graph launch replays many kernels)."""
    kernels = mode.kernels
    per_step, launches = kernels.per_step, kernels.launches
    graphs = kernels.graph_launches or 0
    if not graphs:
        return f"no CUDA graph launch recorded ({per_step} kernel(s), {launches} launch(es)/step)"
    saved = max(per_step - launches, 0)
    return (
        f"{per_step} kernel(s)/step from {launches} launch call(s), {graphs} of them CUDA graph "
        f"launch(es): {saved} launch call(s)/step saved against one launch per kernel"
    )


class CudaGraphsMode(CompileMode):
    """compile-cudagraphs: torch.compile(mode="reduce-overhead"). Inductor's kernels are recorded
    into a CUDA graph and replayed by one `cudaGraphLaunch` per call, so the launch count falls
    while the kernel count stays what Inductor generated. CUDA only; on any other device it is
    skipped with the reason."""

    def __init__(self) -> None:
        super().__init__("compile-cudagraphs", compile_kwargs={"mode": "reduce-overhead"})

    def unavailable_reason(self, device_type: str) -> str | None:
        on = device_type
        return None if on == "cuda" else f"CUDA graphs need a CUDA device (this run is on {on})"

    def fusion_evidence(self, mode: OkMode, run: Run) -> str:
        return f"{super().fusion_evidence(mode, run)}; {cuda_graph_evidence(mode)}"


def use_code_caches() -> None:
    """Builds in this process may load generated code from the caches: Inductor's FX-graph cache
    and AOTAutograd's. For a timing worker, which needs the modes' code, not the evidence of
    generating it: the first worker of a run fills the caches (the C++ kernels the capture
    compiled are on disk already), the later ones load from them."""
    import torch._functorch.config as functorch_config

    CODE_CACHES["fx_graph_cache"] = True
    functorch_config.enable_autograd_cache = True


def reset_compiler_caches() -> None:
    """Dynamo's caches and counters cleared, once before a run builds its modes (both sides'
    builds, in `ab`): earlier runs' compiled code is dropped, and Dynamo's recompile limit (8
    entries per function) counts one run's builds only. Does nothing when Dynamo was never
    imported."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()
        dynamo.utils.counters.clear()


def stop_compile_workers() -> None:
    """Stop what Inductor keeps compiling or waiting in the background: its subprocess compile
    pools (the Triton workers a CUDA build starts, kept for a minute after a compile), its
    autotuning processes, and its compile thread pool, whose pending C++ builds are cancelled or
    waited for. Nothing compiles once the modes are built; a later compile starts them again.
    Does nothing when Inductor was never imported."""
    async_compile = sys.modules.get("torch._inductor.async_compile")
    if async_compile is None:
        return
    async_compile.shutdown_compile_workers()
    threads = async_compile.AsyncCompile.pool
    if threads.cache_info().currsize:
        threads().shutdown(wait=True, cancel_futures=True)
        threads.cache_clear()
    autotune = sys.modules.get("torch._inductor.autotune_process")
    tuning = None if autotune is None else autotune.get_tuning_process_pool
    if tuning is not None and tuning.cache_info().currsize:
        tuning().shutdown()
        tuning.cache_clear()
