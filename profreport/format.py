"""Number formatting shared by renderers and verdicts (units always shown), and the Markdown
escaping every Markdown renderer applies to strings that come from input."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any


def fmt_bytes(n: float | int | None) -> str:
    if n is None:
        return "n/a"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} GiB"


def fmt_ms(x: float | None) -> str:
    if x is None:
        return "n/a"
    if x < 1:
        return f"{x * 1000:.1f} µs"
    return f"{x:.3f} ms"


def signed_pct(percent: float) -> str:
    """+10%, -38%, or unchanged."""
    return f"{percent:+.0f}%" if round(percent) else "unchanged"


def fmt_pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1f}%"


def plural(n: int, noun: str) -> str:
    """ "1 kernel", "3 kernels"."""
    return f"{n} {noun}{'s' if n != 1 else ''}"


# Markdown escaping for strings that come from input (model files, traces, records). The output
# must mean the same in GitHub's CommonMark and in Python-Markdown, which TensorBoard's text
# plugin uses: backslash escapes where both honour them, character references where Python-Markdown
# has none (<, >, &, ~, $), so no input can open HTML, a code span, a link, emphasis, a
# strikethrough, math or a table cell.
_MD_ESCAPES = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "`": "\\`",
        "*": "\\*",
        "[": "\\[",
        "]": "\\]",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
        "~": "&#126;",
        "$": "&#36;",
    }
)
_LINE_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+")
# Only an underscore at a word boundary can open or close emphasis (both parsers ignore intraword
# ones), so snake_case kernel names stay readable in the raw file.
_LOOSE_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
_BLOCK_START = re.compile(r"^(?:[#+-]|\d{1,9}(?=[.)]))")


NAME_WIDTH = 90


def short(name: str | None, width: int = NAME_WIDTH) -> str:
    """A long name (a generated or templated kernel's) cut to `width` characters."""
    if name is None:
        return "–"
    return name if len(name) <= width else name[: width - 1] + "…"


def _one_line(value: object) -> str:
    return _LINE_BREAKS.sub(" ", str(value)).strip()


class MdMarkup(str):
    """Markdown a renderer composed itself from escaped parts (emphasis around `md_cell` text):
    `md_cell` passes it through, as Jinja2 does a `Markup`."""


def md_cell(value: object) -> str:
    """`value` as literal Markdown text on one line: safe in a table cell and anywhere inline."""
    if isinstance(value, MdMarkup):
        return value
    return _LOOSE_UNDERSCORE.sub(r"\\_", _one_line(value).translate(_MD_ESCAPES))


def md_line(value: object) -> str:
    """`md_cell`, for text that starts a list item or heading, where a leading `#`, `-`, `+` or
    `1.` would open a nested block."""
    text = md_cell(value)
    match = _BLOCK_START.match(text)
    if match is None:
        return text
    end = match.end()
    return text[:end] + "\\" + text[end:] if text[0].isdigit() else "\\" + text


def md_code(value: object) -> str:
    """`value` as an inline code span: shown verbatim, markup inert. Not for table cells (a `|`
    would still split the cell there)."""
    text = _one_line(value)
    if not text:
        return ""
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_table(header: list[Any], rows: Iterable[Iterable[Any]], align: str) -> list[str]:
    """A Markdown table's lines, every cell escaped; `align` holds `l` or `r` per column."""
    lines = [_md_row(header)]
    lines.append("|" + "|".join(":---" if a == "l" else "---:" for a in align) + "|")
    lines += [_md_row(row) for row in rows]
    return lines


def _md_row(cells: Iterable[Any]) -> str:
    return "| " + " | ".join(md_cell(c) for c in cells) + " |"
