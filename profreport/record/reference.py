"""The reference pages of the documents declared as record Sections, generated from their
dataclasses: each class's docstring, and per field its JSON type, whether a document must have
it, and the comment beside its declaration. docs/record.md is the run record's
(`python -m profreport.record.reference`), docs/expect.md the kernel budget's
(`python -m profreport.record.reference expect`); a test keeps the checked-in pages equal to them.
"""

from __future__ import annotations

import sys

from profreport.record import expectation
from profreport.record.json_schema import (
    base_of,
    class_description,
    descriptions,
    own_fields,
    sections,
)
from profreport.record.model import Run
from profreport.record.section import Section, Shape

_TYPES = {
    "text": "string",
    "path": "string",
    "integer": "integer",
    "number": "number",
    "flag": "true or false",
    "any": "any value",
    "pair": "list of two numbers",
}

INTRO = """\
# The run record (`run.json`, schema `profreport.run/2`)

Generated from `profreport/record/` (model.py, evidence.py, findings.py) by
`scripts/record-docs`; do not edit by hand (tests/test_record_reference.py checks it).

One JSON object per run, written once by `profreport generate` (or `RunResult.save`) and read by
every renderer and comparison through the same classes (`profreport.record.load_run`). A field's
type is its schema: `profreport render` refuses a record whose field has another type, naming
the field. **Required**: *yes* = every object of that class has the key. A mode is read as the
class its `status` names: every mode that ran (an OkMode) has its `kernels` and `bytes`. A type
"or null" may be null; any other field may be left out. Keys a class does not
declare (another tool's) are kept as they are. The same description as a JSON Schema, to check
a run.json without profreport: [schemas/run.schema.json](schemas/run.schema.json).
Records of schema `profreport.run/1` (written before run/2 kept each timing process's samples)
are read too: they timed one process, and every speedup in them covers that process only.

Evidence is what capture observed; the fields marked *finding* (the run's `roofs`,
`module_tree` and `module_savings`; a mode's `fusion`, `roofline`, `why_not_fused`,
`time_findings`, `median_step`, `speedup_call` and `verdict`; the bytes and roofline fields of a
kernel row) are a copy for other tools: profreport derives them again from the evidence whenever
it reads a record (`profreport.analysis.derive`). A run/1 record (written before run/2 added the
run's findings, the median step and the speedup's call) is read the same way.
"""


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


def reference_markdown(root: type[Section] = Run, intro: str = INTRO) -> str:
    """docs/record.md: the intro, then one table per class reachable from `root`."""
    return "\n".join([intro, *(section_markdown(cls) for cls in sections(root))])


# each document's page: its root class and intro (docs/<name>.md)
PAGES: dict[str, tuple[type[Section], str]] = {
    "record": (Run, INTRO),
    "expect": (expectation.Expectation, expectation.REFERENCE_INTRO),
}


if __name__ == "__main__":
    root, intro = PAGES[sys.argv[1] if len(sys.argv) > 1 else "record"]
    print(reference_markdown(root, intro), end="")
