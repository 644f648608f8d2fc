"""What Dynamo and Inductor said about breaks and refusals while a model compiled, captured
in-process from their logging artifacts (no TORCH_LOGS): each graph break with Dynamo's reason and
the user's file, line and source text, and each "cannot fuse" decision of Inductor's scheduler.
The raw text is kept beside what is parsed from it, as evidence.

Recompiles are not captured: torch 2.13 writes the `recompiles` artifact only when it is enabled
in torch._logging's own state (TORCH_LOGS / set_logs), not for a handler on its logger."""

from __future__ import annotations

import linecache
import logging
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from profreport.record.model import FusionRefusal, GraphBreak

# The loggers behind the `graph_breaks` and `fusion` artifacts (TORCH_LOGS names)
# in torch 2.13: getArtifactLogger(module, artifact) names them "<module>.__<artifact>".
GRAPH_BREAK_LOGGERS = (
    "torch._dynamo.symbolic_convert.__graph_breaks",
    "torch._dynamo.convert_frame.__graph_breaks",
    "torch._dynamo.exc.__graph_breaks",
)
FUSION_LOGGERS = ("torch._inductor.scheduler.__fusion",)

_AT = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)\s*$", re.M)
_REASON = re.compile(r"Graph Break Reason:\s*(?P<reason>.*?)(?:\n\s*User code traceback:|\Z)", re.S)
_GB_ID = re.compile(r"/gb/(gb\d+)\.html")
# Text kept per message: enough for the reason and Dynamo's hint, not the whole traceback.
_MAX_TEXT = 2000


def break_summary(reason: str) -> tuple[str, str]:
    """(the one-line reason, Dynamo's own hint) out of a graph-break reason block (a log
    message's, or the message of the `Unsupported` Dynamo raises under fullgraph)."""
    lines = [ln.strip() for ln in reason.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("Encountered graph break")] or lines
    head = lines[0] if lines else ""
    hint = next((ln.removeprefix("Hint:").strip() for ln in lines if ln.startswith("Hint:")), "")
    return head, hint


def parse_graph_break(message: str) -> GraphBreak | None:
    """A graph-break log message as evidence: where (user file, line, source text) and why."""
    at = _AT.search(message.splitlines()[0] if message else "")
    if at is None:
        return None
    why = _REASON.search(message)
    reason = why.group("reason").strip() if why else ""
    summary, hint = break_summary(reason)
    line = int(at.group("line"))
    gb = _GB_ID.search(reason)
    return GraphBreak(
        file=at.group("file"),
        line=line,
        source=linecache.getline(at.group("file"), line).strip(),
        reason=summary or "no reason recorded",
        dynamo_hint=hint,
        gb_id=gb.group(1) if gb else "",
        log=message.split("\nUser code traceback:")[0][:_MAX_TEXT],
    )


class CompilerLogCapture(logging.Handler):
    """Collects graph breaks and scheduler fusion refusals while it is installed."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.graph_breaks: list[GraphBreak] = []
        self.fusion_refusals: list[FusionRefusal] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.name in FUSION_LOGGERS:
                self._fusion(record)
                return
            message = record.getMessage()
        except Exception:  # a log record we cannot format is no evidence; never fail a compile
            return
        found = parse_graph_break(message)
        if found is not None and not any(
            (g.file, g.line, g.reason) == (found.file, found.line, found.reason)
            for g in self.graph_breaks
        ):
            self.graph_breaks.append(found)

    def _fusion(self, record: logging.LogRecord) -> None:
        # Inductor logs a WhyNoFuse object (name1, name2, reason % args) for each refusal.
        why: Any = record.msg
        if not all(hasattr(why, a) for a in ("name1", "name2", "reason")):
            return
        log = str(why)[:_MAX_TEXT]
        refusal = FusionRefusal(first=str(why.name1), second=str(why.name2), log=log)
        if refusal not in self.fusion_refusals:
            self.fusion_refusals.append(refusal)


@contextmanager
def routing_logs(
    handler: logging.Handler, loggers: Iterable[logging.Logger], level: int
) -> Iterator[None]:
    """Send `loggers`' records from `level` up to `handler` alone (not propagated) for the block,
    then restore each logger's level, propagation and handlers."""
    saved = []
    for logger in loggers:
        saved.append((logger, logger.level, logger.propagate))
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
    try:
        yield
    finally:
        for logger, old_level, propagate in saved:
            logger.removeHandler(handler)
            logger.setLevel(old_level)
            logger.propagate = propagate


@contextmanager
def capturing_compiler_logs() -> Iterator[CompilerLogCapture]:
    """Install a CompilerLogCapture on the artifact loggers (DEBUG, not propagated)."""
    handler = CompilerLogCapture()
    loggers = [logging.getLogger(n) for n in GRAPH_BREAK_LOGGERS + FUSION_LOGGERS]
    with routing_logs(handler, loggers, logging.DEBUG):
        yield handler
