"""TensorBoard summary of a run: its per-mode numbers as scalars, its Markdown summary as text.

Pure: `scalars(run)` and `walltime(run)` are what `files.write_tensorboard_summary` writes to
`<run>/tensorboard/summary/` (RunResult.save), beside the per-mode profiler traces, so one
`tensorboard --logdir <run>/tensorboard` shows both. The folder holds no `*.pt.trace.json`, so the
PyTorch Profiler plugin still lists exactly the mode runs. All points are at step 0 with the
record's creation time as wall time: the same record always writes the same values.
"""

from __future__ import annotations

from datetime import datetime, timezone

from profreport.record.model import Run

TEXT_TAG = "summary"


def scalars(run: Run) -> dict[str, float]:
    """The scalar tags and values written for a run: `<metric>/<mode>`, ok modes only."""
    out: dict[str, float] = {}
    for name, m in run.ok_modes.items():
        kernels, traffic = m.kernels, m.bytes
        out[f"kernels_per_step/{name}"] = float(kernels.per_step)
        out[f"launches_per_step/{name}"] = float(kernels.launches)
        out[f"bytes_read_per_step/{name}"] = float(traffic.read)
        out[f"bytes_written_per_step/{name}"] = float(traffic.written)
        out[f"bytes_per_step/{name}"] = float(traffic.read + traffic.written)
        lat = m.latency_ms
        if lat is not None and lat.median is not None:
            out[f"latency_ms_median/{name}"] = float(lat.median)
        sp = m.speedup_vs_eager
        if sp and sp.median is not None:
            out[f"speedup_vs_eager/{name}"] = float(sp.median)
    return out


def walltime(run: Run) -> float | None:
    """The record's creation time as seconds since the epoch (every point's wall time)."""
    try:
        stamp = datetime.strptime(run.created_utc or "", "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:  # no creation time, or not one profreport wrote
        return None
    return stamp.replace(tzinfo=timezone.utc).timestamp()
