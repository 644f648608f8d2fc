"""How the model executes: execution modes as objects in one registry.

Each mode (eager, script, trace, optimize, compile, and any registered later) is a `Mode`: how to
build and warm it, where its modeled bytes come from, how its compiler's evidence becomes a fusion
map and a verdict clause, and what to reset after it fails. Building includes the warm-up, so that
what is profiled and timed afterwards is the optimized code.

This package imports no torch until a mode is built.
"""

from __future__ import annotations

import time
from typing import Any

from profreport.modes.base import (
    BytesSource,
    BytesWork,
    Mode,
    ModeError,
    PreparedMode,
    Sync,
    UnknownMode,
)
from profreport.modes.registry import (
    DECODE_DEFAULT_MODES,
    default_modes,
    mode_analyses,
    mode_for,
    mode_names,
    mode_summary,
    register,
)

__all__ = [
    "DECODE_DEFAULT_MODES",
    "BytesSource",
    "BytesWork",
    "Mode",
    "ModeError",
    "PreparedMode",
    "Sync",
    "UnknownMode",
    "default_modes",
    "mode_analyses",
    "mode_for",
    "mode_names",
    "mode_summary",
    "prepare_mode",
    "register",
]


def prepare_mode(name: str, module: Any, inputs: tuple[Any, ...], sync: Sync) -> PreparedMode:
    """Build mode `name` and warm it up. Must run under torch.no_grad() with `module` in eval."""
    if name not in mode_names():
        raise ModeError(f"unknown mode {name!r}; choose from {', '.join(mode_names())}")
    mode = mode_for(name)
    start = time.perf_counter()
    prepared = mode.build(module, inputs, sync)
    if prepared.compile_s is None and mode.timed_build:
        # For TorchScript modes: scripting/tracing/freezing plus warm-up calls.
        prepared.compile_s = time.perf_counter() - start
    return prepared
