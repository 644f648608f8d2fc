"""Interrupt requests (Ctrl-C, SIGTERM), counted as they arrive.

A signal can land inside library code that turns the KeyboardInterrupt into an ordinary exception
(torch.profiler's `__exit__` then fails with an AssertionError, say). Code that records a mode's
exception as the model's failure first asks whether an interrupt arrived since the mode began:
if so it is an interrupt, never a failure.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from profreport.text import exception_chain

_requested = 0  # interrupts delivered to this process through `signals_as_interrupt`


def mark() -> int:
    """A point to compare with later (see `since`)."""
    return _requested


def since(start: int) -> bool:
    """Whether an interrupt was requested after `mark()` returned `start`."""
    return _requested != start


def reraise_if_interrupted(exc: BaseException, start: int) -> None:
    """Raise KeyboardInterrupt when `exc` is an interrupt in disguise: one was requested since
    `start`, or a KeyboardInterrupt is among the exceptions that led to `exc` (a notebook's
    Ctrl-C, where no handler of ours counts it)."""
    if since(start) or any(isinstance(e, KeyboardInterrupt) for e in exception_chain(exc)):
        raise KeyboardInterrupt from exc


@contextmanager
def unmasked() -> Iterator[None]:
    """Run a block in which an exception that is an interrupt in disguise (see
    `reraise_if_interrupted`) is raised as the KeyboardInterrupt it is."""
    start = mark()
    try:
        yield
    except Exception as exc:
        reraise_if_interrupted(exc, start)
        raise


def _interrupt(_signum: int, _frame: object) -> None:
    global _requested
    _requested += 1
    raise KeyboardInterrupt


@contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt and are counted, so `kill` unwinds like Ctrl-C
    (staging folders are removed) and a disguised interrupt is recognised. Main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
