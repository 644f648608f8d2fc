"""The generate runs a gpu-check makes: what each runs, and the limits the checks hold them to."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_MODES = ("eager", "script", "trace", "optimize", "compile")
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class RunSpec:
    """One `profreport generate` run on CUDA, labelled `label` in the evidence."""

    label: str
    model: str
    modes: tuple[str, ...] = DEFAULT_MODES
    dtype: str = "float32"
    batch_size: int | None = None  # None: the model's CUDA default
    measure_bytes: bool = False
    cap_s: float = 120.0  # its step's own time limit (the overall budget may cut it shorter)
    # Modes allowed to fail with their one clean line (TorchScript cannot script transformers
    # models): the run must still complete, and every other mode must be ok.
    may_fail: tuple[str, ...] = ()
    # True where every tensor is several times the L2 and every op streams it once: Nsight
    # Compute's DRAM reads of a whole mode are then its modeled reads (checked both ways).
    streams_from_dram: bool = False
    why: str = ""  # one line: what this run shows (the docs' table)
    workload: str = "prefill"  # generate --workload

    def generate_args(self) -> list[str]:
        model = self.model
        if ".py:" in model and not Path(model).is_absolute():  # a file in this checkout
            model = str(REPO_ROOT / model)
        args = ["--model", model, "--modes", ",".join(self.modes), "--dtype", self.dtype]
        if self.batch_size is not None:
            args += ["--batch-size", str(self.batch_size)]
        if self.measure_bytes:
            args.append("--measure-bytes")
        if self.workload != "prefill":
            args += ["--workload", self.workload]
        return args


SIMPLE = "simple"
GATED = "gated-residual"
DECODER = "decoder-lm"
EXPORT = "export"
DECODER_BYTES = "decoder-lm-bytes"
CUDAGRAPHS = "cudagraphs"
DECODE = "decode"
DECODE_GRAPHS = "decode-cudagraphs"
MAX_AUTOTUNE = "max-autotune"
CONV = "conv-bn-relu"
MLP = "mlp-block"
QWEN2 = "bench/real_models_corpus.py:qwen2"

# In order of value: the budget cuts the last ones first. Each run is its own process with its
# own time limit, so a crash or a hang costs that run only; the modes known to crash or hang
# on a GPU (export, the opt-in compile variants) each have a run of their own, after the runs
# that hold the most evidence. analyze runs right after each run, compare and render right
# after the runs they read (steps.plan).
RUNS = (
    RunSpec(
        SIMPLE,
        "simple",
        measure_bytes=True,
        cap_s=90,
        why="the README's command: cuDNN conv+ReLU, Inductor; ncu DRAM bytes per mode",
    ),
    RunSpec(
        GATED,
        "gated-residual",
        batch_size=256,
        measure_bytes=True,
        streams_from_dram=True,
        cap_s=120,
        why="NNC fusion on GPU, one Triton kernel; 256 MiB tensors: ncu reads = modeled reads",
    ),
    RunSpec(
        DECODER,
        QWEN2,
        may_fail=("script",),
        cap_s=90,
        why="a 2-layer Qwen2 from its config (KV cache outputs): cuBLAS GEMMs kept by compile",
    ),
    RunSpec(
        EXPORT,
        "simple",
        modes=("eager", "export"),
        cap_s=100,
        why="export + AOTInductor on CUDA (SIGSEGV, then a timeout, on the H200 in 2026-12)",
    ),
    RunSpec(
        DECODER_BYTES,
        QWEN2,
        modes=("eager", "compile"),
        measure_bytes=True,
        cap_s=130,
        why="ncu DRAM bytes of the decoder LM's prefill, kernel by kernel",
    ),
    RunSpec(
        DECODE,
        "hf:llama",
        modes=("eager", "compile"),
        cap_s=120,
        why="per-token decode with a static KV cache: launch overhead against the bandwidth floor",
        workload="decode",
    ),
    RunSpec(
        DECODE_GRAPHS,
        "hf:llama",
        modes=("eager", "compile-cudagraphs"),
        cap_s=120,
        why="the same decode step replayed from CUDA graphs: the launch overhead they remove",
        workload="decode",
    ),
    RunSpec(
        CUDAGRAPHS,
        MLP,
        modes=("eager", "compile-cudagraphs"),
        dtype="bfloat16",
        cap_s=90,
        why="compile-cudagraphs replays several kernels per graph launch",
    ),
    RunSpec(
        MAX_AUTOTUNE,
        MLP,
        modes=("eager", "compile-max-autotune"),
        dtype="bfloat16",
        cap_s=150,
        why="max-autotune weighs Triton templates against cuBLAS(Lt) for the GEMMs",
    ),
    RunSpec(CONV, CONV, cap_s=100, why="optimize folds BatchNorm into cuDNN convolutions"),
    RunSpec(MLP, MLP, dtype="bfloat16", cap_s=100, why="bfloat16 GEMMs through cuBLAS(Lt)"),
)
RUN_SPECS = {spec.label: spec for spec in RUNS}
# `profreport compare` of two different runs (the second a different model: every number
# changes) and `render` of the first, each right after the runs it reads.
COMPARED = (SIMPLE, DECODER)
RENDERED = SIMPLE

# Timing kept short: the checks need a median, not a tight one. --max-time covers the GPU's
# warm-up (at least capture/timing.DEVICE_WARMUP_S) and the rounds after it.
GENERATE_TIMING = ["--min-time", "0.2", "--max-time", "6", "--active-steps", "3"]
