"""profreport: what kernel fusion really did, per PyTorch execution mode.

`profreport.profile(model, inputs)` and `profreport.run_sweep(spec)` are the library entry points
(imported on first use, so `import profreport` stays light); `profreport` on the command line is
built on them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profreport.version import __version__

__all__ = ["RunResult", "SweepSpec", "__version__", "profile", "run_sweep"]

if TYPE_CHECKING:
    from profreport.api import RunResult, profile
    from profreport.sweep.grid import SweepSpec
    from profreport.sweep.lifecycle import run_sweep

# each public name and the module it is imported from on first use
_LAZY = {
    "profile": "profreport.api",
    "RunResult": "profreport.api",
    "run_sweep": "profreport.sweep.lifecycle",
    "SweepSpec": "profreport.sweep.grid",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'profreport' has no attribute {name!r}")
