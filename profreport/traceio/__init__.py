"""Trace I/O: reading Kineto / Chrome trace files into the columnar `Trace` the analyses read.

Everything with side effects of reading traces lives here, apart from the pure analyses:
file reading and gunzip (`load`, `gunzip`), slicing the event array (`slices`), typed row columns
(`rows`), parallel chunk parsing in helper processes (`chunks`), the memory guard (`memory`), and
the one table of Kineto event categories the counting code shares (`categories`).
"""

from profreport.traceio.columns import Trace
from profreport.traceio.errors import NotATraceError, TraceError
from profreport.traceio.load import load_trace, parse_trace

__all__ = ["NotATraceError", "Trace", "TraceError", "load_trace", "parse_trace"]
