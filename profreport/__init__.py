"""profreport: what kernel fusion really did, per PyTorch execution mode.

`profreport.profile(model, inputs)` is the library entry point (imported on first use, so
`import profreport` stays light); `profreport` on the command line is built on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["RunResult", "__version__", "profile"]

if TYPE_CHECKING:
    from profreport.api import RunResult, profile

_LAZY = {"profile", "RunResult"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from profreport import api

        return getattr(api, name)
    raise AttributeError(f"module 'profreport' has no attribute {name!r}")
