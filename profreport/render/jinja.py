"""The one Jinja2 environment every HTML page is rendered with: autoescape on for every template,
so a string from input is always escaped and only `Markup` we build ourselves goes in as is."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2


def templates_dir() -> Path:
    """Templates ship inside the wheel (profreport/templates) or sit at the repository root."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "templates", here.parent / "templates"):
        if (candidate / "report.html.j2").is_file():
            return candidate
    raise FileNotFoundError("profreport templates not found")


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_page(template: str, **context: object) -> str:
    return environment().get_template(template).render(**context)
