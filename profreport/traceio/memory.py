"""How much memory analysing a trace takes, and how much this process may still use.

The loader asks before each step that grows with the document (reading it in, inflating gzip,
the whole-document fallback parse) so that a trace too large for the machine is refused with one
line instead of the process being killed by the kernel's out-of-memory killer.

The per-byte factors come from ``bench/analyze_scale.py``: peak memory of ``profreport analyze``
over all its processes (resident pages and memory files), less the ~30 MiB interpreter, per
byte of trace JSON, on real traces tiled to 1M events (173 MiB) and 4M events (697 MiB):

=================================  ===========  ===========  =================================
path                               1M events    4M events    estimate (per byte, + 128 MiB)
=================================  ===========  ===========  =================================
helpers, plain file                0.95         0.92         1.1 (file in the page cache)
one process, plain file            1.86         1.75         2.1 (file read in whole)
gzip, helpers / one process        1.76 / 2.00  1.71 / 2.00  2.1 (inflated into memory)
whole-document parse (fallback)    8.50         8.45         9.6
=================================  ===========  ===========  =================================
"""

from __future__ import annotations

import os

from profreport.format import fmt_bytes
from profreport.traceio.errors import TraceError

# Bytes of memory per byte of trace JSON for the columns, the count and the rendering, over
# all processes (measured 0.92-0.95 with helpers; the one-process paths, less the document,
# 0.75-1.0: a bytearray that gzip data is inflated into grows by an eighth at a time).
COLUMNS_PER_BYTE = 1.1
# The whole-document parse (orjson dicts for every event) on top of that and of the document
# itself (measured 6.5: 8.45 bytes per byte in all).
WHOLE_PER_BYTE = 7.5
# Slices in flight, helper interpreters, string tables: independent of the document's size.
FIXED_BYTES = 128 << 20

_UNLIMITED = 1 << 60  # cgroup v1 writes a huge number for "no limit"


def analysis_bytes(doc_bytes: int, *, doc_in_memory: bool, whole: bool = False) -> int:
    """Memory (beyond what the process already holds) to analyse ``doc_bytes`` bytes of JSON.

    ``doc_in_memory``: the step also brings the document itself into memory (read in whole, or
    inflated from gzip); ``whole``: it parses the document in one piece (the fallback path).
    """
    factor = COLUMNS_PER_BYTE + (1.0 if doc_in_memory else 0.0) + (WHOLE_PER_BYTE if whole else 0)
    return FIXED_BYTES + int(doc_bytes * factor)


def largest_document(available: int, *, doc_in_memory: bool) -> int:
    """The largest document (bytes of JSON) that :func:`analysis_bytes` fits in ``available``."""
    factor = COLUMNS_PER_BYTE + (1.0 if doc_in_memory else 0.0)
    return max(int((available - FIXED_BYTES) / factor), 0)


ADVICE = "free some memory or analyse it on a machine with more"


class MemoryBudget:
    """The memory available when a trace is opened; refuses, with a one-line
    :class:`TraceError`, any step that would need more (``available`` is ``None``: no limit
    known, nothing refused)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.available = available_memory_bytes()

    def check(self, doc_bytes: int, *, doc_in_memory: bool, whole: bool = False) -> None:
        """Refuse a step over ``doc_bytes`` of JSON that will not fit (see :func:`analysis_bytes`)."""
        need = analysis_bytes(doc_bytes, doc_in_memory=doc_in_memory, whole=whole)
        if self.available is not None and need > self.available:
            raise TraceError(
                f"{self.path}: needs about {fmt_bytes(need)} to analyse, "
                f"only {fmt_bytes(self.available)} available; {ADVICE}"
            )

    def inflate_limit(self) -> int | None:
        """The most bytes gzip data may inflate to and still be analysed."""
        available = self.available
        return None if available is None else largest_document(available, doc_in_memory=True)

    def inflated_too_far(self, produced: int) -> TraceError:
        """The refusal of gzip data that went past :meth:`inflate_limit` (``produced`` bytes)."""
        return TraceError(
            f"{self.path}: its gzip data inflates to more than {fmt_bytes(produced)}, more than "
            f"can be analysed in the {fmt_bytes(self.available)} available; {ADVICE}"
        )


def available_memory_bytes(root: str = "/") -> int | None:
    """Memory this process may still take: the system's available memory (psutil: the kernel's
    ``MemAvailable`` on Linux, its own figure on macOS and Windows), or less where a cgroup limit
    (v2 ``memory.max`` or v1 ``memory.limit_in_bytes``, at the root of the cgroup mount under
    ``root``: a container's own group) leaves less. ``None`` when neither is known.

    A cgroup's usage counts its page cache, which is reclaimed before anything is killed, so
    the inactive file pages are not counted as used (as container runtimes report it).
    """
    import psutil

    try:
        system: int | None = psutil.virtual_memory().available
    except (OSError, psutil.Error):  # no figure from the platform: the cgroup's alone, if any
        system = None
    found = [n for n in (system, _cgroup_available(root)) if n is not None]  # 0 is a limit
    return min(found) if found else None


def _cgroup_available(root: str) -> int | None:
    base = os.path.join(root, "sys/fs/cgroup")
    for limit_file, usage_file, inactive_key in (
        ("memory.max", "memory.current", "inactive_file"),  # v2
        ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes", "total_inactive_file"),
    ):
        limit = _read_int(os.path.join(base, limit_file))
        if limit is None or limit >= _UNLIMITED:
            continue
        used = _read_int(os.path.join(base, usage_file)) or 0
        stat = os.path.join(base, os.path.dirname(limit_file), "memory.stat")
        used -= _field(stat, inactive_key) or 0
        return max(limit - max(used, 0), 0)
    return None


def _read_int(path: str) -> int | None:
    """An integer file of the cgroup tree; ``None`` when missing or ``max`` (no limit)."""
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _field(path: str, key: str) -> int | None:
    """The number after `key` in a file of `key value` lines (a cgroup's memory.stat)."""
    try:
        with open(path, encoding="ascii") as fh:
            for line in fh:
                parts = line.split()
                if parts and parts[0] == key:
                    return int(parts[1])
    except (OSError, ValueError, IndexError):
        pass
    return None
