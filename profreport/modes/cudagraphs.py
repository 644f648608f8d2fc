"""compile-cudagraphs: torch.compile(mode="reduce-overhead"). Inductor's kernels are recorded into
a CUDA graph and replayed by one `cudaGraphLaunch` per call, so the launch count falls while the
kernel count stays what Inductor generated. CUDA only; on any other device it is skipped with the
reason."""

from __future__ import annotations

from profreport.modes.compile import CompileMode
from profreport.record.model import OkMode, Run


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
    def __init__(self) -> None:
        super().__init__("compile-cudagraphs", compile_kwargs={"mode": "reduce-overhead"})

    def unavailable_reason(self, device_type: str) -> str | None:
        if device_type == "cuda":
            return None
        return f"CUDA graphs need a CUDA device (this run is on {device_type})"

    def fusion_evidence(self, mode: OkMode, run: Run) -> str:
        return f"{super().fusion_evidence(mode, run)}; {cuda_graph_evidence(mode)}"
