"""The one registry of execution modes: the API's check of the modes asked for, the
`profreport modes` table, the pipeline, and the analyses handed to `derive` (`mode_analyses`) all
read it (--help names the built-in modes from the CLI's copy, cli/common.py's, kept equal by a
test). Built-in modes are registered on first use (so importing the registry imports no torch);
`register` adds another one."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from profreport.analysis.mode_analysis import ModeAnalysis
from profreport.modes.base import EagerMode, Mode, UnknownMode

_REGISTRY: dict[str, Mode] = {}
_DEFAULT: list[str] = []
_SUMMARY: dict[str, str] = {}  # one line per mode for `profreport modes` and the docs
# The modes a decode run uses when none are chosen, by device type (any other device: "cpu"'s):
# those that run on real LMs (TorchScript cannot script or trace a transformers cache; --modes
# still tries them, each failing in one line), CUDA graphs on CUDA. Data, not a call: the run's
# options read it beside `default_modes()` (runner.run_options).
DECODE_DEFAULT_MODES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "cuda": ("eager", "compile", "compile-cudagraphs", "export"),
        "cpu": ("eager", "compile", "export"),
    }
)
_loaded = False


def _builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from profreport.modes.compile import CompileMode, CudaGraphsMode
    from profreport.modes.torchscript import OptimizeMode, ScriptMode, TraceMode

    for mode, summary in (
        (EagerMode(), "the model as written (the baseline)"),
        (ScriptMode(), "torch.jit.script"),
        (TraceMode(), "torch.jit.trace"),
        (OptimizeMode(), "torch.jit.freeze + torch.jit.optimize_for_inference"),
        (CompileMode(), "torch.compile (Inductor)"),
    ):
        register(mode, default=True, summary=summary)
    # Opt-in (--modes): slower to build, or for one device only.
    from profreport.modes.export import ExportMode

    for mode, summary in (
        (ExportMode(), "torch.export -> AOTInductor package (.pt2), loaded and run"),
        (
            CompileMode(
                "compile-max-autotune", compile_kwargs={"mode": "max-autotune-no-cudagraphs"}
            ),
            'torch.compile(mode="max-autotune-no-cudagraphs"): benchmarks GEMM/conv '
            "templates with fused epilogues against the library call",
        ),
        (
            CudaGraphsMode(),
            'torch.compile(mode="reduce-overhead"): Inductor kernels replayed from CUDA '
            "graphs (CUDA only)",
        ),
        (
            CompileMode("compile-dynamic", compile_kwargs={"dynamic": True}),
            "torch.compile(dynamic=True): kernels generated for symbolic shapes",
        ),
        (
            CompileMode("compile-fullgraph", compile_kwargs={"fullgraph": True}),
            "torch.compile(fullgraph=True): a graph break is an error, not a split",
        ),
    ):
        register(mode, summary=summary)


def register(mode: Mode, *, default: bool = False, summary: str = "") -> Mode:
    """Add `mode` (replacing one of the same name); `default`: run it when --modes is not given;
    `summary`: its line in `profreport modes`."""
    _builtins()
    # a name is a --modes item (commas), a trace folder and, in `ab`, the mode part of
    # `side/mode` (slashes)
    if not mode.name or set(mode.name) & {",", "/"} or mode.name != mode.name.strip():
        raise ValueError(
            f"a mode needs a name without commas, slashes or outer spaces, not {mode.name!r}"
        )
    if mode.bytes_source is None:
        from profreport.modes.bytes_sources import DISPATCHER_LOG

        mode.bytes_source = DISPATCHER_LOG
    _REGISTRY[mode.name] = mode
    _SUMMARY[mode.name] = summary
    if default and mode.name not in _DEFAULT:
        _DEFAULT.append(mode.name)
    return mode


def mode_names() -> tuple[str, ...]:
    """Every registered mode, in registration order."""
    _builtins()
    return tuple(_REGISTRY)


def default_modes() -> tuple[str, ...]:
    """The modes a run uses when none are chosen."""
    _builtins()
    return tuple(_DEFAULT)


def mode_for(name: str) -> Mode:
    """The registered mode `name`, or a stand-in that derives nothing (a record's unknown mode)."""
    _builtins()
    return _REGISTRY.get(name) or UnknownMode(name)


def mode_summary(name: str) -> str:
    """The registered mode's one line for `profreport modes` ("" if it was given none)."""
    _builtins()
    return _SUMMARY.get(name, "")


def mode_analyses() -> dict[str, ModeAnalysis]:
    """Every registered mode's analysis, by name: what `analysis.derive` is handed."""
    _builtins()
    return dict(_REGISTRY)
