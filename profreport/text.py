"""Text from models and traces, made safe for the terminal."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_text(text: str) -> str:
    """`text` on one line with control characters (an ANSI escape sequence in an exception
    message, say) shown as `?`, so a model or a trace cannot drive the terminal."""
    return _CONTROL.sub("?", text.replace("\r\n", " ").replace("\n", " "))
