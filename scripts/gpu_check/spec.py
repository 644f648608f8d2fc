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

    def generate_args(self) -> list[str]:
        model = self.model
        if ".py:" in model and not Path(model).is_absolute():  # a file in this checkout
            model = str(REPO_ROOT / model)
        args = ["--model", model, "--modes", ",".join(self.modes), "--dtype", self.dtype]
        if self.batch_size is not None:
            args += ["--batch-size", str(self.batch_size)]
        if self.measure_bytes:
            args.append("--measure-bytes")
        return args


GATED = "gated-residual"
CONV = "conv-bn-relu"
MLP = "mlp-block"
OPT_IN = "mlp-block-opt-in"
SIMPLE = "simple"
DECODER = "decoder-lm"
EXPORT = "export"

# In order of importance: when the budget runs short, the later ones are cut.
RUNS = (
    # The README's first command, DRAM bytes measured by ncu beside the modeled ones.
    RunSpec(SIMPLE, "simple", measure_bytes=True, cap_s=90),
    # A real decoder LM as a user builds it (2-layer Qwen2 from its config, default outputs with
    # a KV cache); script fails on transformers models with its one line.
    RunSpec(
        DECODER,
        "bench/real_models_corpus.py:qwen2",
        may_fail=("script",),
        cap_s=90,
    ),
    # export apart: on torch 2.11 + CUDA 13 it ended the whole generate process with SIGSEGV
    # (simple, Qwen2 and mlp-block alike), which took every other mode's evidence with it.
    RunSpec(EXPORT, "simple", modes=("eager", "export"), cap_s=45),
    # Batch 256: each of its two inputs is 256 MiB, several times an H200's 60 MB L2, so DRAM
    # traffic is what the modeled bytes count.
    RunSpec(GATED, "gated-residual", batch_size=256, measure_bytes=True, cap_s=200),
    RunSpec(CONV, "conv-bn-relu", cap_s=100),
    RunSpec(MLP, "mlp-block", dtype="bfloat16", cap_s=100),
    # The opt-in modes on GEMMs: max-autotune weighs Triton templates against cuBLAS(Lt),
    # bias_addmm included; cudagraphs has several kernels to replay.
    RunSpec(
        OPT_IN,
        "mlp-block",
        modes=("eager", "export", "compile-max-autotune", "compile-cudagraphs"),
        dtype="bfloat16",
        cap_s=170,
    ),
)
RUN_SPECS = {spec.label: spec for spec in RUNS}

# Timing kept short: the checks need a median, not a tight one.
GENERATE_TIMING = ["--min-time", "0.2", "--max-time", "4", "--active-steps", "3"]
