"""The reference pages of the documents declared as record Sections: below a page's own text
(written by hand, kept as it is), one table per class generated from its dataclass: the class's
docstring, and per field its JSON type, whether a document must have it, and the comment beside
its declaration. docs/record.md is the run record's, docs/expect.md the kernel budget's
(`python -m profreport.record.reference docs/record.md docs/expect.md` rewrites their tables); a
test keeps the checked-in tables today's.
"""

from __future__ import annotations

import sys
from pathlib import Path

from profreport.record import expectation
from profreport.record.json_schema import (
    TYPES,
    base_of,
    class_description,
    descriptions,
    own_fields,
    sections,
)
from profreport.record.model import Run
from profreport.record.section import Section, Shape

_TYPES = {**TYPES, "flag": "true or false", "any": "any value", "pair": "list of two numbers"}


def _link(cls: type[Section]) -> str:
    return f"[{cls.__name__}](#{cls.__name__.lower()})"


def _type(shape: Shape) -> str:
    if shape.kind == "section" and shape.section is not None:
        text = _link(shape.section)
    elif shape.kind == "union":
        links = [_link(cls) for _, cls in shape.variants]
        text = f"{', '.join(links[:-1])} or {links[-1]}"
    elif shape.kind == "list":
        text = "list" if shape.item is None else f"list of {_type(shape.item)}"
    elif shape.kind == "map":
        text = "object" if shape.item is None else f"object of {_type(shape.item)} by name"
    elif shape.kind == "choice":
        text = "one of " + ", ".join(f"`{c}`" for c in shape.choices)
    else:
        text = _TYPES[shape.kind]
    return f"{text} or null" if shape.nullable and shape.kind != "any" else text


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def section_markdown(cls: type[Section]) -> str:
    doc = class_description(cls)
    comments = descriptions(cls)
    lines = [f"## {cls.__name__}", ""]
    if doc:
        lines += [doc, ""]
    base = base_of(cls)
    if base is not None:
        lines += [f"Every field of {_link(base)}, and:", ""]
    lines += ["| key | type | required | what it is |", "|---|---|---|---|"]
    for spec in own_fields(cls):
        what = comments.get(spec.name, "")
        if spec.finding:
            what = "finding" + (f": {what}" if what else "")
        required = ("yes, may be null" if spec.null else "yes") if spec.required else ""
        row = (f"`{spec.name}`", _type(spec.shape), required, what)
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def intro(page: str) -> str:
    """A reference page's own text: all above its first class table."""
    return page[: page.index("\n## ")]


def reference_markdown(root: type[Section], page: str) -> str:
    """`page` (docs/<name>.md) with today's tables: its own text, then one table per class
    reachable from `root`."""
    return "\n".join([intro(page), *(section_markdown(cls) for cls in sections(root))])


# each document's page (docs/<name>.md) by name: its root class
PAGES: dict[str, type[Section]] = {"record": Run, "expect": expectation.Expectation}


if __name__ == "__main__":
    for path in map(Path, sys.argv[1:]):
        text = reference_markdown(PAGES[path.stem], path.read_text(encoding="utf-8"))
        path.write_text(text, encoding="utf-8")
