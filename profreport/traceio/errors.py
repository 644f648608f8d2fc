"""The errors trace loading reports (re-exported by :mod:`profreport.traceio`)."""

from __future__ import annotations


class TraceError(Exception):
    """The input cannot be read as a profiler trace; the message is one line."""


class NotATraceError(TraceError):
    """Valid JSON, but not a trace (no ``traceEvents`` list): e.g. a run record next to traces."""
