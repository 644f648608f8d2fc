"""Whether this process can still use its CUDA device after a mode failed.

A fatal CUDA error (an illegal memory access, a device-side assert, a launch failure) is sticky:
the process's CUDA context is lost and every later CUDA call raises it again, clean-up calls such
as `torch.cuda.empty_cache` included, until the process ends. Out of memory is not sticky: the
allocator frees its cache and the run goes on. The one reliable test is to ask the device: a
synchronize that raises means the context is gone.
"""

from __future__ import annotations

import torch

from profreport.text import error_line


def lost_context(device: torch.device) -> str | None:
    """The error a synchronize on `device` raises (its CUDA context is lost), None when it
    succeeds or `device` is no CUDA device."""
    if device.type != "cuda":
        return None
    try:
        torch.cuda.synchronize(device)
    except Exception as exc:  # torch.AcceleratorError (a RuntimeError) for a CUDA error
        return error_line(exc)
    return None


def lost_after(mode: str, device: torch.device) -> str | None:
    """Why nothing more can run on `device` after `mode` failed (the reason a later mode is
    skipped, or an earlier one not timed); None when the device still works."""
    error = lost_context(device)
    if error is None:
        return None
    return (
        f"the CUDA context was lost when {mode} failed ({error}): every later CUDA call in this "
        f"process fails (run again without {mode} in --modes to measure it)"
    )
