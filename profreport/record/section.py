"""The document model: the base of every typed object profreport writes as JSON, its reading,
writing, validation and schema, all read from the dataclass's own type hints.

A `Section` subclass is a frozen dataclass; its field types say everything: a field typed as
another Section is a JSON object read into that class, `tuple[X, ...]` or `list[X]` a list (of
X), `Mapping[str, X]` an object whose values are X, `tuple[float, float]` a list of two numbers,
`Literal[...]` one of those values, `JSON` (`Mapping[str, Any]`) an object kept as parsed, and
a union of Sections (`OkMode | FailedMode | SkippedMode`) an object read as the one whose own
single-valued `Literal` field (`status`) it has (`recast` turns one into another).
`from_json`, `to_json`, `problems` (what `record.validate` reports) and the generated reference
(record/reference.py, docs/record.md) all read that one description, so a new field is one
annotated line.

A whole document's class names its kind (`SCHEMA`, its `schema` key) and what it is called in
a message (`NOUN`); `parse` and `parse_file` check a document or a file against it and type
it, with one line naming the first wrong field; `record/json_schema.py` publishes the same
description as a JSON Schema (docs/schemas/). A `Path` field is a string in the document;
`Annotated[int, Minimum(1)]` a number with a lower bound.

Whether a key must be in a document is the field's `required(...)` default (a field with no
default is required too, null where its type admits None); whether a present key may be null
is whether its type admits None (a `required(...)` field: `required(..., null=True)`).
An object built in code writes every declared field, less the `omitted()` ones left at None
(`adding(key=None)` writes some of those too, where a writer's keys depend on the case); an object
read from a document writes the keys it had. Either way the declared fields come in declaration
order, then the kept unknown keys (`extra`): the order of the keys in a document means nothing.

Why not pydantic v2 (bench/document_model.py, 2026-12-04, on the largest checked-in record): it
loads 2.6x and writes 7x faster, but a process pays ~88 ms more to import it and build the run
record's schema, so a command that reads a few records (render, compare, analyze) is faster
here; and what the record needs (keys written only when set, unknown keys kept and written back,
strict types, one-line messages) would be code of our own on top of it.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Annotated, Any, ClassVar, Literal, TypeVar, Union

from profreport.files import read_text

JSON = Mapping[str, Any]
# A JSON object being built, kept as JSON on purpose (a trace's or another tool's document)
JSONObject = dict[str, Any]
_T = TypeVar("_T", bound="Section")
_V = TypeVar("_V")


class _Number:
    """`Annotated[int, NUMBER]`: written as an integer, accepted as any number (a byte count
    another tool may have stored as a float)."""


NUMBER = _Number()
ByteCount = Annotated[int, NUMBER]


@dataclass(frozen=True)
class Minimum:
    """`Annotated[int, Minimum(1)]`: a number at least `value` (`exclusive`: above it)."""

    value: float
    exclusive: bool = False

    def refuses(self, number: float) -> bool:
        return number <= self.value if self.exclusive else number < self.value

    @property
    def text(self) -> str:
        return f"{'above' if self.exclusive else 'at least'} {self.value:g}"


class DocumentError(ValueError):
    """A document that does not have its declared shape; one line for the user."""


_SKIP = ("json_keys", "extra")


def required(default: _V, *, null: bool = False, omit: bool = False) -> _V:
    """A field every document has; `null`: it may be null there; `omit`: see `omitted`.
    The default is for objects built in code."""
    meta = {"required": True, "null": null, "omitted": omit}
    made: _V = field(default=default, metadata=meta)
    return made


def required_factory(factory: Callable[[], _V]) -> _V:
    """`required` with a default made by `factory` (a mutable or Section default)."""
    made: _V = field(default_factory=factory, metadata={"required": True})
    return made


def omitted() -> Any:
    """A field (default None) an object built in code writes only when it is set: a key some
    writers add and others do not (compile's fusion map has `per_kernel`, TorchScript's not)."""
    return field(default=None, metadata={"omitted": True})


def finding() -> Any:
    """A field holding a finding, not evidence (`omitted` otherwise): derived from the evidence
    by profreport.analysis.derive, which drops what a record stored before deriving it again."""
    return field(default=None, metadata={"omitted": True, "finding": True})


# ---------------------------------------------------------------- shapes from type hints


@dataclass(frozen=True)
class Shape:
    """What a JSON value must look like: `kind` is section, union, list, pair, map, text, path,
    integer, number, flag, choice or any; `item` the shape of a list's items or a map's values;
    `minimum` a number's lower bound; a union's `variants` are the Sections it may be, each
    chosen by its own value of the field `tag`."""

    kind: str
    nullable: bool = False
    item: Shape | None = None
    section: type[Section] | None = None
    choices: tuple[object, ...] = ()
    minimum: Minimum | None = None
    as_list: bool = False  # a `list[X]` field: read as a list, not a tuple
    tag: str = ""
    variants: tuple[tuple[object, type[Section]], ...] = ()

    @property
    def noun(self) -> str:
        """How a message names what is expected ("an integer", "a list of two numbers")."""
        if self.kind == "choice":
            return "one of " + ", ".join(str(c) for c in self.choices)
        return _KINDS[self.kind][0]

    def accepts(self, value: Any) -> bool:
        return _KINDS[self.kind][1](value) and (self.kind != "choice" or value in self.choices)

    def read(self, value: Any) -> Any:
        if value is None:
            return None
        if self.kind == "section" and self.section is not None:
            return self.section.from_json(value)
        if self.kind == "union":
            tag = value.get(self.tag, self.variants[0][0])
            variant = self.variant(tag)
            if variant is None:
                raise DocumentError(f"{self.tag}: {self.tag_noun}, found {_found(tag)}")
            return variant.from_json(value)
        if self.kind == "path":
            return Path(value)
        if self.kind in ("list", "pair"):
            item = self.item
            nested = item is not None and item.kind in ("section", "union", "list", "pair", "map")
            items = (item.read(v) for v in value) if item is not None and nested else value
            return list(items) if self.as_list else tuple(items)
        if self.kind == "map" and self.item is not None and self.item.kind in ("section", "union"):
            return {k: self.item.read(v) for k, v in value.items()}
        return value

    def variant(self, tag: Any) -> type[Section] | None:
        """The class a union's object whose tag field is `tag` is (None: none)."""
        return next((cls for value, cls in self.variants if value == tag), None)

    @property
    def tag_noun(self) -> str:
        return "expected one of " + ", ".join(str(value) for value, _ in self.variants)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# each kind: how a message names what is expected, and what a JSON value of it is
_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "section": ("an object", lambda v: isinstance(v, dict)),
    "union": ("an object", lambda v: isinstance(v, dict)),
    "map": ("an object", lambda v: isinstance(v, dict)),
    "list": ("a list", lambda v: isinstance(v, list)),
    "pair": (
        "a list of two numbers",
        lambda v: isinstance(v, list) and len(v) == 2 and all(map(_is_number, v)),
    ),
    "text": ("a string", lambda v: isinstance(v, str)),
    "path": ("a string", lambda v: isinstance(v, str)),
    "integer": ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    "number": ("a number", _is_number),
    "flag": ("true or false", lambda v: isinstance(v, bool)),
    "choice": ("", lambda v: isinstance(v, (str, int, bool))),
    "any": ("a value", lambda v: True),
}
_PRIMITIVES: dict[Any, str] = {
    str: "text",
    int: "integer",
    float: "number",
    bool: "flag",
    Path: "path",
}


def shape_of(hint: Any) -> Shape:
    """The shape a field's type hint describes (TypeError for a hint no JSON value fits)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            inner = shape_of(rest[0])
        elif all(isinstance(a, type) and issubclass(a, Section) for a in rest):
            inner = _union(rest)
        elif all(shape_of(a).kind in ("integer", "number") for a in rest):
            inner = Shape("number")
        else:
            inner = Shape("any")
        return dataclasses.replace(inner, nullable=len(rest) < len(args) or inner.nullable)
    if origin is Annotated:
        number = any(isinstance(a, _Number) for a in args[1:])
        inner = Shape("number") if number else shape_of(args[0])
        bound = next((a for a in args[1:] if isinstance(a, Minimum)), None)
        return inner if bound is None else dataclasses.replace(inner, minimum=bound)
    if hint is Any:
        return Shape("any", nullable=True)
    if origin is Literal:
        return Shape("choice", choices=args)
    if isinstance(hint, type) and issubclass(hint, Section):
        return Shape("section", section=hint)
    if hint in _PRIMITIVES:
        return Shape(_PRIMITIVES[hint])
    if origin is list:
        return Shape("list", item=shape_of(args[0]), as_list=True)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return Shape("list", item=shape_of(args[0]))
        if len(args) == 2 and all(shape_of(a).kind == "number" for a in args):
            return Shape("pair", item=Shape("number"))
    if origin in (Mapping, dict, types.MappingProxyType) or hint in (dict,):
        value = args[1] if len(args) == 2 else Any
        return Shape("map", item=None if value is Any else shape_of(value))
    raise TypeError(f"no JSON shape for the type hint {hint!r}")


def _union(classes: list[Any]) -> Shape:
    """A union of Sections: the first field each declares as a different single `Literal`
    value tells which one an object is."""
    hints = [typing.get_type_hints(cls) for cls in classes]
    for name in hints[0]:
        values = [typing.get_args(h.get(name)) for h in hints]
        tags = [v[0] for v in values if len(v) == 1]
        if len(tags) == len(classes) == len(set(tags)) and all(
            typing.get_origin(h.get(name)) is Literal for h in hints
        ):
            return Shape("union", tag=name, variants=tuple(zip(tags, classes, strict=True)))
    raise TypeError(f"no Literal field tells {classes} apart")


@dataclass(frozen=True)
class FieldSpec:
    """One declared field: its JSON key, shape, and when a document must have it."""

    name: str
    shape: Shape
    required: bool
    null: bool = False  # may be null where present
    omitted: bool = False
    finding: bool = False


_SCHEMAS: dict[type, tuple[FieldSpec, ...]] = {}


def _field_spec(f: dataclasses.Field[Any], shape: Shape) -> FieldSpec:
    """A field without a default is in every document, null where its type admits None."""
    bare = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    meta = f.metadata
    return FieldSpec(
        f.name,
        shape,
        meta.get("required", bare),
        meta.get("null", shape.nullable),
        meta.get("omitted", False),
        meta.get("finding", False),
    )


def schema_of(cls: type[Section]) -> tuple[FieldSpec, ...]:
    """The declared fields of `cls`, in declaration order (derived once from its type hints)."""
    found = _SCHEMAS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls, include_extras=True)
        found = tuple(
            _field_spec(f, shape_of(hints[f.name]))
            for f in dataclasses.fields(cls)
            if f.name not in _SKIP
        )
        _SCHEMAS[cls] = found
    return found


# ---------------------------------------------------------------- validation


def _found(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:39] + "…"


def _where(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def problems(
    cls: type[Section], data: Mapping[str, Any], path: str = "", closed: bool = False
) -> Iterator[str]:
    """`<field>: <what is wrong>` for every declared field of `data` that does not have the
    shape `cls` declares, outermost first (children of a field already wrong are not looked at);
    `closed`: a key `cls` does not declare is wrong too (a request or a setting, not a record)."""
    specs = schema_of(cls)
    if closed:
        declared = [s.name for s in specs]
        for key in data:
            if key not in declared:
                yield f"{_where(path, key)}: unknown field {key!r} (known: {', '.join(declared)})"
    for spec in specs:
        where = _where(path, spec.name)
        if spec.name not in data:
            if spec.required:
                yield f"{where}: missing (expected {spec.shape.noun})"
            continue
        yield from _value_problems(spec.shape, data[spec.name], where, spec.null, closed)


def _value_problems(
    shape: Shape, value: Any, where: str, null_ok: bool, closed: bool = False
) -> Iterator[str]:
    if value is None:
        if not null_ok:
            yield f"{where}: expected {shape.noun}, found null"
        return
    if not shape.accepts(value):
        yield f"{where}: expected {shape.noun}, found {_found(value)}"
        return
    if shape.minimum is not None and shape.minimum.refuses(value):
        yield f"{where}: must be {shape.minimum.text}, found {_found(value)}"
        return
    item = shape.item
    if shape.kind == "section" and shape.section is not None:
        yield from problems(shape.section, value, where, closed)
    elif shape.kind == "union":
        tag, variant = _where(where, shape.tag), shape.variant(value.get(shape.tag))
        if shape.tag not in value:
            yield f"{tag}: missing ({shape.tag_noun})"
        elif variant is None:
            yield f"{tag}: {shape.tag_noun}, found {_found(value[shape.tag])}"
        else:
            yield from problems(variant, value, where, closed)
    elif shape.kind == "list" and item is not None:
        for i, v in enumerate(value):
            yield from _value_problems(item, v, f"{where}[{i}]", item.nullable, closed)
    elif shape.kind == "map" and item is not None:
        for k, v in value.items():
            yield from _value_problems(item, v, f"{where}.{k}", item.nullable, closed)


def read_json(path: Path, error: type[Exception] = DocumentError) -> Any:
    """The parsed JSON of the file at `path`, or `error` in one line naming why not."""
    try:
        return json.loads(read_text(path, error))
    except json.JSONDecodeError as exc:
        raise error(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except UnicodeDecodeError as exc:
        raise error(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


# ---------------------------------------------------------------- the base class


def _dump(value: Any) -> Any:
    if isinstance(value, Section):
        return value.to_json()
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, (tuple, list)):
        return [_dump(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _dump(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Section:
    """One object of a record. `json_keys`: the keys of the document it was read from (None,
    for an object built in code: every declared field less the `omitted` ones left at None);
    `extra`: keys this class does not declare, kept and written back."""

    # a whole document's kind (its `schema` key) and what a message calls it; None: a part.
    # EARLIER: the kinds of its earlier versions, still read (their fields a subset of today's,
    # or rewritten into today's shape by `upgraded`)
    SCHEMA: ClassVar[str | None] = None
    EARLIER: ClassVar[tuple[str, ...]] = ()
    NOUN: ClassVar[str] = "document"

    json_keys: tuple[str, ...] | None = field(default=None, kw_only=True, repr=False, compare=False)
    extra: JSON = field(default_factory=dict, kw_only=True, repr=False)

    @classmethod
    def finding_keys(cls) -> tuple[str, ...]:
        """The fields that hold findings (see `finding`), in declaration order."""
        return tuple(s.name for s in schema_of(cls) if s.finding)

    @classmethod
    def from_json(cls: type[_T], data: JSON) -> _T:
        specs = {s.name: s for s in schema_of(cls)}
        kwargs: JSONObject = {}
        extra: JSONObject = {}
        for key, value in data.items():
            spec = specs.get(key)
            if spec is None:
                extra[key] = value
            else:
                kwargs[key] = spec.shape.read(value)
        return cls(**kwargs, json_keys=tuple(data), extra=extra)

    @classmethod
    def checked(
        cls,
        data: Any,
        source: str = "document",
        error: type[Exception] = DocumentError,
        closed: bool = False,
    ) -> JSONObject:
        """`data` if it is a document of this class (its `SCHEMA` or one it reads, when it has
        one, in today's shape: `upgraded`; and every field of its declared shape); otherwise
        `error` naming the first thing wrong, in one line beginning with `source`. `closed`: an
        undeclared key is wrong too."""
        if cls.SCHEMA is not None and (
            not isinstance(data, dict) or data.get("schema") not in (cls.SCHEMA, *cls.EARLIER)
        ):
            found = data.get("schema") if isinstance(data, dict) else type(data).__name__
            raise error(
                f"{source} is not a profreport {cls.NOUN} (schema {found!r}, want {cls.SCHEMA!r})"
            )
        if not isinstance(data, dict):
            raise error(f"{source}: expected an object, found {_found(data)}")
        document = cls.upgraded(data)
        for problem in problems(cls, document, closed=closed):
            raise error(f"{source}: {problem}")
        return document

    @classmethod
    def upgraded(cls, data: JSONObject) -> JSONObject:
        """`data` in today's shape: a document class whose `EARLIER` version is not a subset of
        today's rewrites such a document here (what it cannot rewrite, it leaves for the shape
        check to name). The default changes nothing."""
        return data

    @classmethod
    def parse(
        cls: type[_T],
        data: Any,
        source: str = "document",
        error: type[Exception] = DocumentError,
        closed: bool = False,
    ) -> _T:
        """`checked`, then typed."""
        return cls.from_json(cls.checked(data, source, error, closed))

    @classmethod
    def parse_file(
        cls: type[_T], path: Path, error: type[Exception] = DocumentError, closed: bool = False
    ) -> _T:
        """`parse` of the JSON file at `path`; a file that cannot be read, is not UTF-8 or not
        JSON is `error` too, in one line."""
        return cls.parse(read_json(path, error), str(path), error, closed)

    def to_json(self) -> JSONObject:
        """The document: its declared fields in declaration order, then its unknown keys."""
        out = {key: _dump(getattr(self, key)) for key in self._own_keys()}
        out.update((key, _dump(value)) for key, value in self.extra.items())
        return out

    def has(self, key: str) -> bool:
        """Whether this object's document has `key` (an absent field reads as its default):
        the document it was read from, or the one it writes."""
        return key in self.extra or key in self._own_keys()

    def _own_keys(self) -> tuple[str, ...]:
        """The declared fields its document has, in declaration order."""
        keys = self.json_keys
        return tuple(
            s.name
            for s in schema_of(type(self))
            if (
                s.name in keys
                if keys is not None
                else not s.omitted or getattr(self, s.name) is not None
            )
        )

    def without(self: _T, *keys: str) -> _T:
        """A copy with `keys` absent: declared fields back to their defaults, extra keys gone."""
        declared = {f.name: f for f in dataclasses.fields(self) if f.name not in _SKIP}
        defaults = {
            key: f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
            for key in keys
            if (f := declared.get(key)) is not None
        }
        return dataclasses.replace(
            self,
            **defaults,
            json_keys=tuple(k for k in self._own_keys() if k not in keys),
            extra={k: v for k, v in self.extra.items() if k not in keys},
        )

    def recast(self, cls: type[_T], **values: Any) -> _T:
        """This object's document read as `cls` (another variant of its union: a mode that
        failed), its tag set to the one `cls` declares, with `values` added."""
        specs = schema_of(cls)
        tags = {s.name: s.shape.choices[0] for s in specs if len(s.shape.choices) == 1}
        return cls.from_json(self.to_json()).adding(**tags, **values)

    def adding(self: _T, **values: Any) -> _T:
        """A copy with `values` set and written (None too); a key this class does not declare
        is kept with the unknown keys."""
        declared = {s.name for s in schema_of(type(self))}
        own = {k: v for k, v in values.items() if k in declared}
        extra = {**self.extra, **{k: v for k, v in values.items() if k not in declared}}
        keys = (*self._own_keys(), *own)
        return dataclasses.replace(self, **own, json_keys=keys, extra=extra)
