"""profreport: what kernel fusion really did, per PyTorch execution mode.

`profreport.profile(model, inputs)` and `profreport.run_sweep(spec)` are the library entry points
(imported on first use, so `import profreport` stays light); `profreport` on the command line is
built on them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["RunResult", "SweepSpec", "__version__", "profile", "run_sweep"]

if TYPE_CHECKING:
    from profreport.api import RunResult, SweepSpec, profile, run_sweep

_LAZY = {"profile", "RunResult", "run_sweep", "SweepSpec"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from profreport import api

        return getattr(api, name)
    raise AttributeError(f"module 'profreport' has no attribute {name!r}")
