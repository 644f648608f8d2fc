"""One registry of renderers: each is a name (the `--format` value), the document it renders
(a run, a comparison, a trace analysis), the file it writes, and `render(document) ->
str | bytes`. `--format` choices, `RunResult.save`, `profreport render` and `analyze --out` read
it; writing the files stays with the caller (the CLI, `RunResult.save`). A run is handed over as
the typed `profreport.record.Run` with today's findings (`analysis.derive.derived_run`).

A new format is one module with a render function plus one entry in _BUILTIN (or a `register` call)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

RUN = "run"  # a run record (profreport.run/1): run.json, report.html, summary.md
COMPARISON = "comparison"  # `profreport compare`
ANALYSIS = "analysis"  # `profreport analyze` over Kineto traces
SWEEP = "sweep"  # a sweep record (profreport.sweep/1): sweep.json, sweep.html, sweep.md


@dataclass(frozen=True)
class Renderer:
    name: str  # what --format takes: "html", "md", "json"
    document: str  # RUN, COMPARISON or ANALYSIS
    filename: str  # the file it writes in a run folder or --out folder
    function: (
        str  # "package.module:function", imported when first used: render(document, **options)
    )

    def render(self, document: Any, **options: Any) -> str | bytes:
        module, _, name = self.function.partition(":")
        result: str | bytes = getattr(importlib.import_module(module), name)(document, **options)
        return result

    @property
    def extension(self) -> str:
        return self.filename[self.filename.rindex(".") :]


# The built-in renderers (their modules are imported when they render).
_BUILTIN = (
    Renderer("json", RUN, "run.json", "profreport.render.run_json:render"),
    Renderer("html", RUN, "report.html", "profreport.render.html:render"),
    Renderer("md", RUN, "summary.md", "profreport.render.markdown:render"),
    Renderer("md", COMPARISON, "comparison.md", "profreport.render.compare:render_markdown"),
    Renderer("json", COMPARISON, "comparison.json", "profreport.render.compare:render_json"),
    Renderer("html", COMPARISON, "comparison.html", "profreport.render.compare:render_html"),
    Renderer("json", ANALYSIS, "analysis.json", "profreport.render.analyze:render_json"),
    Renderer("md", ANALYSIS, "analysis.md", "profreport.render.analyze:render_markdown"),
    Renderer("html", ANALYSIS, "analysis.html", "profreport.render.analyze:render_html"),
    Renderer("json", SWEEP, "sweep.json", "profreport.record:dumps"),
    Renderer("html", SWEEP, "sweep.html", "profreport.sweep.render:render_html"),
    Renderer("md", SWEEP, "sweep.md", "profreport.sweep.render:render_markdown"),
)
_REGISTRY: dict[tuple[str, str], Renderer] = {(r.document, r.name): r for r in _BUILTIN}


def register(renderer: Renderer) -> Renderer:
    _REGISTRY[(renderer.document, renderer.name)] = renderer
    return renderer


def unregister(document: str, name: str) -> None:
    _REGISTRY.pop((document, name), None)


def renderers(document: str) -> tuple[Renderer, ...]:
    """The renderers of one kind of document, in registration order."""
    return tuple(r for (doc, _), r in _REGISTRY.items() if doc == document)


def formats(document: str) -> tuple[str, ...]:
    return tuple(r.name for r in renderers(document))


def get(document: str, name: str) -> Renderer:
    """The renderer `name` of `document`; ValueError naming the choices when there is none."""
    try:
        return _REGISTRY[(document, name)]
    except KeyError:
        raise ValueError(
            f"unknown format {name!r}: choose from {', '.join(formats(document))}"
        ) from None


def render(document: str, name: str, content: Any, **options: Any) -> str | bytes:
    return get(document, name).render(content, **options)


def report_renderers() -> tuple[Renderer, ...]:
    """What `profreport render` re-renders from a record: every run renderer but the record's
    own JSON."""
    return tuple(r for r in renderers(RUN) if r.filename != "run.json")
