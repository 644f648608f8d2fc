"""Text from models, traces and exceptions, as one line and safe for the terminal."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message: what a user reads of it in one line."""
    return (str(exc).strip().splitlines() or [""])[0]


def error_line(exc: BaseException) -> str:
    """`Type: first line of the message` (just `Type` when there is no message)."""
    first = first_line(exc)
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def terminal_text(text: str) -> str:
    """`text` on one line with control characters (an ANSI escape sequence in an exception
    message, say) shown as `?`, so a model or a trace cannot drive the terminal."""
    return _CONTROL.sub("?", text.replace("\r\n", " ").replace("\n", " "))
