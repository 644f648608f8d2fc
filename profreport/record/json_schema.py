"""A document's JSON Schema (draft 2020-12), generated from its classes' field shapes
(record/section.py): what docs/schemas/*.schema.json publish, so that a CI job or a notebook can
check a run.json without profreport. It says what `Section.problems` says: a field's type, which
keys a document must have (a union of classes is one of them, told apart by its tag field),
which may be null, and that keys a class does not declare are allowed (another tool's).

Each class is a `$defs` entry named after it, with its docstring as the description; a field's
description is the comment beside its declaration (the same text docs/record.md shows).
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import re
import sys
import textwrap

from profreport.record.section import FieldSpec, JSONObject, Section, Shape, schema_of

DIALECT = "https://json-schema.org/draft/2020-12/schema"
_TRAILING = re.compile(r"^\s+(\w+):[^#]*#\s*(?P<doc>.+)$")
TYPES = {  # a primitive kind's JSON type
    "text": "string",
    "path": "string",
    "integer": "integer",
    "number": "number",
    "flag": "boolean",
}


def base_of(cls: type[Section]) -> type[Section] | None:
    """The Section `cls` extends (a mode's `ModeEntry`), else None."""
    base = cls.__bases__[0]
    return base if issubclass(base, Section) and base is not Section else None


def own_fields(cls: type[Section]) -> list[FieldSpec]:
    """The fields `cls` declares itself: all of them, or (a class extending another Section)
    those its own body declares again."""
    own = vars(cls).get("__annotations__", {})
    return [s for s in schema_of(cls) if base_of(cls) is None or s.name in own]


def sections(root: type[Section]) -> list[type[Section]]:
    """`root` and every Section class reachable from its fields (and bases), in order of
    first mention."""
    order: list[type[Section]] = []
    pending = [root]
    while pending:
        cls = pending.pop(0)
        if cls in order:
            continue
        order.append(cls)
        pending[:0] = [base] if (base := base_of(cls)) is not None else []
        for spec in schema_of(cls):
            shape: Shape | None = spec.shape
            while shape is not None:
                if shape.section is not None:
                    pending.append(shape.section)
                pending += [c for _, v in shape.variants for c in (base_of(v), v) if c]
                shape = shape.item
    return order


def descriptions(cls: type[Section]) -> dict[str, str]:
    """Field name -> the comment beside its declaration."""
    lines, spans = _module_source(cls.__module__)
    first, last = spans[cls.__qualname__]
    found = {}
    for line in lines[first - 1 : last]:
        m = _TRAILING.match(line)
        if m:
            found[m.group(1)] = m.group("doc").strip()
    return found


@functools.cache
def _module_source(module: str) -> tuple[list[str], dict[str, tuple[int, int]]]:
    """A module's source lines and the line span of each top-level class (parsed once: finding
    one class's source with `inspect` parses its whole module each time)."""
    source = inspect.getsource(sys.modules[module])
    spans = {
        node.name: (node.lineno, node.end_lineno or node.lineno)
        for node in ast.parse(source).body
        if isinstance(node, ast.ClassDef)
    }
    return source.splitlines(), spans


def class_description(cls: type[Section]) -> str:
    """The class's docstring on one line ("" for the one dataclass writes itself)."""
    doc = textwrap.dedent(cls.__doc__ or "").strip()
    return "" if doc.startswith(f"{cls.__name__}(") else " ".join(doc.split())


def shape_schema(shape: Shape, nullable: bool) -> JSONObject:
    """The JSON Schema of one value of `shape` (`nullable`: null is allowed too)."""
    out: JSONObject
    if shape.kind == "section" and shape.section is not None:
        out = {"$ref": f"#/$defs/{shape.section.__name__}"}
    elif shape.kind == "union":  # each variant's own tag value tells them apart
        out = {"oneOf": [{"$ref": f"#/$defs/{cls.__name__}"} for _, cls in shape.variants]}
    elif shape.kind == "list":
        out = {"type": "array"}
        if shape.item is not None:
            out["items"] = shape_schema(shape.item, shape.item.nullable)
    elif shape.kind == "pair":
        out = {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2}
    elif shape.kind == "map":
        out = {"type": "object"}
        if shape.item is not None:
            out["additionalProperties"] = shape_schema(shape.item, shape.item.nullable)
    elif shape.kind == "choice":
        return {"enum": [*shape.choices, *([None] if nullable else [])]}
    elif shape.kind == "any":
        return {}
    else:
        out = {"type": TYPES[shape.kind]}
        if shape.minimum is not None:
            bound = "exclusiveMinimum" if shape.minimum.exclusive else "minimum"
            out[bound] = shape.minimum.value
    if not nullable:
        return out
    if "type" in out:
        return {**out, "type": [out["type"], "null"]}
    return {"anyOf": [out, {"type": "null"}]}


def _field_schema(spec: FieldSpec, what: str) -> JSONObject:
    out = shape_schema(spec.shape, spec.null)
    if spec.finding:
        what = "finding" + (f": {what}" if what else "")
    return {**out, "description": what} if what else out


def class_schema(cls: type[Section]) -> JSONObject:
    """One `$defs` entry: the object `cls` describes (a class extending another: all of its
    base, and its own fields)."""
    comments = descriptions(cls)
    specs = own_fields(cls)
    out: JSONObject = {"type": "object"}
    doc = class_description(cls)
    if doc:
        out["description"] = doc
    properties = {s.name: _field_schema(s, comments.get(s.name, "")) for s in specs}
    if cls.SCHEMA is not None:
        # an earlier version the class rewrites (`upgraded`) is not of this shape: not listed
        earlier = () if "upgraded" in vars(cls) else cls.EARLIER
        kinds = {"enum": [cls.SCHEMA, *earlier]} if earlier else {"const": cls.SCHEMA}
        properties["schema"] = {**properties.get("schema", {}), **kinds}
    out["properties"] = properties
    always = [s.name for s in specs if s.required]
    if cls.SCHEMA is not None and "schema" not in always:
        always.insert(0, "schema")
    if always:
        out["required"] = always
    base = base_of(cls)
    if base is not None:
        out["allOf"] = [{"$ref": f"#/$defs/{base.__name__}"}]
    return out


def json_schema(root: type[Section]) -> JSONObject:
    classes = sections(root)
    names = [c.__name__ for c in classes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TypeError(f"two classes of one document are named {twice[0]}")
    top: JSONObject = {"$schema": DIALECT}
    if root.SCHEMA is not None:
        top["title"] = f"{root.SCHEMA}: the profreport {root.NOUN}"
    return {
        **top,
        "$ref": f"#/$defs/{root.__name__}",
        "$defs": {c.__name__: class_schema(c) for c in classes},
    }


def schema_text(root: type[Section]) -> str:
    """`json_schema(root)` as the text a docs/schemas/ file holds."""
    return json.dumps(json_schema(root), indent=1, ensure_ascii=False) + "\n"
