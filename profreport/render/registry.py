"""One registry of renderers: each is a name (the `--format` value), the kind of document it
renders (a run, a comparison, a trace analysis, a sweep, a comparison of sweeps), the file it
writes, and `render(document) -> str | bytes`. `--format` choices, `RunResult.save`,
`profreport render`, `compare`, `analyze --out` and the sweep's pages read it; writing the files
stays with the caller (the CLI, `RunResult.save`). A run is handed over as the typed
`profreport.record.Run` with today's findings (`analysis.derive.derived_run`). The sweep package
sits above this one and registers its own renderers (of a sweep and of two sweeps compared)
when it is imported, so nothing here names it.

Renderers are typed by their document kind: `get(RUN, "html")` is a `Renderer[Run]`, whose
`render` takes a Run. A new format is one module with a render function plus one entry in
_BUILTIN (or a `register` call)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from profreport.files import RECORD, dumps

if TYPE_CHECKING:
    from profreport.analysis.comparison import Comparison
    from profreport.analysis.trace_document import AnalysisDocument
    from profreport.record.model import Run
    from profreport.record.section import Section

D = TypeVar("D")


@dataclass(frozen=True)
class Document(Generic[D]):
    """A kind of document; its type parameter is what its renderers are handed."""

    name: str


RUN: Document[Run] = Document("run")  # a run record (profreport.run/2)
COMPARISON: Document[Comparison] = Document("comparison")  # `profreport compare` of two runs
# `profreport analyze` over Kineto traces: the analysis document (profreport.analysis/2)
ANALYSIS: Document[AnalysisDocument] = Document("analysis")
# a sweep record (profreport.sweep/2) and two sweeps gated point by point: kinds whose renderers
# (and document types) belong to the sweep package, which registers them
SWEEP: Document[Any] = Document("sweep")
SWEEP_COMPARISON: Document[Any] = Document("sweep-comparison")


@dataclass(frozen=True)
class Renderer(Generic[D]):
    name: str  # what --format takes: "html", "md", "json"
    document: Document[D]
    filename: str  # the file it writes in a run folder or --out folder
    # "package.module:function", imported when first used: function(document, **options)
    function: str

    def render(self, document: D, **options: Any) -> str | bytes:
        module, _, name = self.function.partition(":")
        result: str | bytes = getattr(importlib.import_module(module), name)(document, **options)
        return result

    def text(self, document: D, **options: Any) -> str:
        """`render` for a format that is text (TypeError if the renderer returned bytes)."""
        content = self.render(document, **options)
        if not isinstance(content, str):
            raise TypeError(
                f"the {self.name} renderer of {self.document.name} documents gave bytes"
            )
        return content


def render_json(document: Section, **_options: object) -> str:
    """Every document's JSON renderer: the document itself, the same keys, order and values as
    the document it was read from (another format's options, `analyze`'s `top`, shape none)."""
    return dumps(document.to_json())


# The built-in renderers (their modules are imported when they render).
_BUILTIN = (
    Renderer("json", RUN, RECORD, "profreport.render.registry:render_json"),
    Renderer("html", RUN, "report.html", "profreport.render.html:render"),
    Renderer("md", RUN, "summary.md", "profreport.render.markdown:render"),
    Renderer("md", COMPARISON, "comparison.md", "profreport.render.compare:render_markdown"),
    Renderer("json", COMPARISON, "comparison.json", "profreport.render.registry:render_json"),
    Renderer("html", COMPARISON, "comparison.html", "profreport.render.compare:render_html"),
    Renderer("json", ANALYSIS, "analysis.json", "profreport.render.registry:render_json"),
    Renderer("md", ANALYSIS, "analysis.md", "profreport.render.analyze:render_markdown"),
    Renderer("html", ANALYSIS, "analysis.html", "profreport.render.analyze:render_html"),
)
_REGISTRY: dict[tuple[str, str], Renderer[Any]] = {(r.document.name, r.name): r for r in _BUILTIN}


def register(renderer: Renderer[D]) -> Renderer[D]:
    _REGISTRY[(renderer.document.name, renderer.name)] = renderer
    return renderer


def renderers(document: Document[D]) -> tuple[Renderer[D], ...]:
    """The renderers of one kind of document, in registration order."""
    return tuple(
        cast("Renderer[D]", r) for (doc, _), r in _REGISTRY.items() if doc == document.name
    )


def formats(document: Document[Any]) -> tuple[str, ...]:
    return tuple(r.name for r in renderers(document))


def get(document: Document[D], name: str) -> Renderer[D]:
    """The renderer `name` of `document`; ValueError naming the choices when there is none."""
    try:
        return cast("Renderer[D]", _REGISTRY[(document.name, name)])
    except KeyError:
        raise ValueError(
            f"unknown format {name!r}: choose from {', '.join(formats(document))}"
        ) from None


def report_renderers() -> tuple[Renderer[Run], ...]:
    """What `profreport render` writes: every run renderer but the record's own JSON."""
    return tuple(r for r in renderers(RUN) if r.filename != RECORD)
