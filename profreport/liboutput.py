"""Keep the libraries' own output off the terminal: Kineto, Inductor, transformers, warnings.

Kineto prints `USDT: ... profiler_start` lines from C++, Inductor's compile workers and the
model's own code may print too; none of it is profreport's. For the duration of a run, file
descriptors 1 and 2 point at `run.log` (so C++ writes and child processes land there as well),
and profreport's own progress goes to a duplicate of the original terminal stream.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TextIO

_PROCESS_FDS = (1, 2)


def _fileno(stream: TextIO) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # StringIO and other in-memory streams
        return None


@contextmanager
def library_output_to(log_path: Path, terminal: TextIO) -> Iterator[TextIO]:
    """Send everything written to fds 1 and 2 to `log_path` until the block ends.

    Yields the stream profreport itself should write progress to: `terminal` unchanged when it
    is not the process's stdout or stderr (a test's StringIO), else a stream on a duplicate of
    that descriptor, so it still reaches the terminal while fd 1/2 go to the log.
    """
    for stream in (sys.stdout, sys.stderr, terminal):
        stream.flush()
    saved = {fd: os.dup(fd) for fd in _PROCESS_FDS}
    term_fd = _fileno(terminal)
    progress: TextIO = terminal
    own: TextIO | None = None
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        if term_fd in saved:
            own = os.fdopen(os.dup(saved[term_fd]), "w", buffering=1, encoding="utf-8")
            progress = own
        for fd in _PROCESS_FDS:
            os.dup2(log_fd, fd)
        yield progress
    finally:
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):
                stream.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        os.close(log_fd)
        if own is not None:
            own.close()
