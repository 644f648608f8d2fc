"""Text from models, traces and exceptions, as one line and safe for the terminal."""

from __future__ import annotations

import re
from collections.abc import Callable

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_TENSOR_OPEN = re.compile(r"(?<![\w.])tensor\(")

# An error line is read in a terminal row, a table cell and a verdict: a few clauses, never a
# paragraph. The full message stays in run.json (`error_full`, `traceback`).
MAX_LINE_CHARS = 300


class Notice(str):
    """A progress message that stays on the terminal (how long a heavy run will take), where
    the other progress messages replace one another."""


Progress = Callable[[str], None]  # what a run tells of its progress, a message at a time


def without_tensor_reprs(text: str) -> str:
    """`text` with every printed tensor (`tensor([[1.30, ...]])`, which may span many lines)
    replaced by `tensor(...)`. A scalar such as `tensor(3.)` is short and kept."""
    out: list[str] = []
    pos = 0
    for match in _TENSOR_OPEN.finditer(text):
        if match.start() < pos:  # inside a repr already replaced
            continue
        depth, end = 1, match.end()
        while end < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        inner = text[match.end() : end - 1 if depth == 0 else end]
        if not inner.lstrip().startswith("[") and "\n" not in inner and depth == 0:
            continue
        out.append(text[pos : match.start()] + "tensor(...)")
        pos = end
    out.append(text[pos:])
    return "".join(out)


def one_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """The first non-blank line of `text`, tensor reprs shortened, cut to `limit` characters."""
    lines = [ln.strip() for ln in without_tensor_reprs(text).splitlines()]
    line = next((ln for ln in lines if ln), "")
    line = re.sub(r"\s+", " ", line)
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def cut_before(text: str, tail: str) -> str:
    """`text` on one line, cut so that `tail` (where it happened, what to do) fits whole after
    it within MAX_LINE_CHARS: the message is cut first, so that the place survives (and keeps
    40 characters; a longer tail is cut at its end)."""
    return one_line(one_line(text, limit=max(MAX_LINE_CHARS - len(tail), 40)) + tail)


def short_path(path: str, limit: int = 80) -> str:
    """A source file's path as a line shows it: from the package on for an installed one
    (`transformers/models/...`), its last `limit` characters for any other."""
    path = path.rsplit("site-packages/", 1)[-1]
    return path if len(path) <= limit else "…" + path[-(limit - 1) :]


def error_line(exc: BaseException) -> str:
    """`Type: first line of the message` (just `Type` when there is no message), one line of at
    most MAX_LINE_CHARS characters and without tensor reprs."""
    first = one_line(str(exc))
    return one_line(f"{type(exc).__name__}: {first}") if first else type(exc).__name__


def exception_chain(exc: BaseException) -> list[BaseException]:
    """`exc` and the exceptions it was raised from (its cause, else its context), each once."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in found:
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def full_error(exc: BaseException) -> str:
    """`Type: whole message` of an exception and of the exceptions it was raised from."""
    parts = [f"{type(e).__name__}: {e}".rstrip() for e in exception_chain(exc)]
    return "\n\nraised from\n\n".join(parts)


def terminal_text(text: str) -> str:
    """`text` on one line with control characters (an ANSI escape sequence in an exception
    message, say) shown as `?`, so a model or a trace cannot drive the terminal."""
    return _CONTROL.sub("?", text.replace("\r\n", " ").replace("\n", " "))
