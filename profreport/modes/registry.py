"""The one registry of execution modes: the CLI's choices and default, the API's check, chart
colours, the docs table and the pipeline all read it. Built-in modes are registered on first use
(so importing the registry imports no torch); `register` adds another one."""

from __future__ import annotations

from profreport.modes.base import Mode, UnknownMode

_REGISTRY: dict[str, Mode] = {}
_DEFAULT: list[str] = []
_loaded = False


def _builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from profreport.modes.compile import CompileMode
    from profreport.modes.eager import EagerMode
    from profreport.modes.torchscript import OptimizeMode, ScriptMode, TraceMode

    for mode in (EagerMode(), ScriptMode(), TraceMode(), OptimizeMode(), CompileMode()):
        register(mode, default=True)
    # Opt-in (--modes): slower to build, or for one device only.
    from profreport.modes.cudagraphs import CudaGraphsMode
    from profreport.modes.export import ExportMode

    for mode in (
        ExportMode(),
        CompileMode(
            "compile-max-autotune",
            color="#ff7f0e",
            compile_kwargs={"mode": "max-autotune-no-cudagraphs"},
            summary='torch.compile(mode="max-autotune-no-cudagraphs"): benchmarks GEMM/conv '
            "templates with fused epilogues against the library call",
        ),
        CudaGraphsMode(),
        CompileMode(
            "compile-dynamic",
            color="#bcbd22",
            compile_kwargs={"dynamic": True},
            summary="torch.compile(dynamic=True): kernels generated for symbolic shapes",
        ),
        CompileMode(
            "compile-fullgraph",
            color="#98df8a",
            compile_kwargs={"fullgraph": True},
            summary="torch.compile(fullgraph=True): a graph break is an error, not a split",
        ),
    ):
        register(mode)


def register(mode: Mode, *, default: bool = False) -> Mode:
    """Add `mode` (replacing one of the same name); `default`: run it when --modes is not given."""
    _builtins()
    if not mode.name or "," in mode.name or mode.name != mode.name.strip():
        raise ValueError(f"a mode needs a name without commas or outer spaces, not {mode.name!r}")
    if mode.bytes_source is None:
        from profreport.modes.bytes_sources import DISPATCHER_LOG

        mode.bytes_source = DISPATCHER_LOG
    _REGISTRY[mode.name] = mode
    if default and mode.name not in _DEFAULT:
        _DEFAULT.append(mode.name)
    return mode


def unregister(name: str) -> None:
    _builtins()
    _REGISTRY.pop(name, None)
    if name in _DEFAULT:
        _DEFAULT.remove(name)


def mode_names() -> tuple[str, ...]:
    """Every registered mode, in registration order."""
    _builtins()
    return tuple(_REGISTRY)


def default_modes() -> tuple[str, ...]:
    """The modes a run uses when none are chosen."""
    _builtins()
    return tuple(_DEFAULT)


def get_mode(name: str) -> Mode:
    """The registered mode `name`; KeyError if there is none."""
    _builtins()
    return _REGISTRY[name]


def mode_for(name: str) -> Mode:
    """The registered mode `name`, or a stand-in that derives nothing (a record's unknown mode)."""
    _builtins()
    return _REGISTRY.get(name) or UnknownMode(name)


def mode_color(name: str) -> str:
    return mode_for(name).color
