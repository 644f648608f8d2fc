"""Renderers are one registry: --format choices, RunResult.save, `profreport render` and
`analyze --out` read it. A renderer registered from outside the package is one module plus one
entry, and is written by save and render like the built-in ones."""

import io
import sys

import pytest
import torch
from torch import nn

import profreport
from profreport import cli
from profreport.render import registry
from profreport.render.registry import ANALYSIS, COMPARISON, RUN, Renderer

TOY = Renderer("txt", RUN, "summary.txt", "toy_text_renderer:render")


def test_the_builtin_formats_come_from_the_registry():
    assert registry.formats(RUN) == ("json", "html", "md")
    assert [r.filename for r in registry.renderers(RUN)] == [
        "run.json",
        "report.html",
        "summary.md",
    ]
    assert registry.formats(COMPARISON) == ("md", "json", "html")
    assert registry.get(ANALYSIS, "html").filename == "analysis.html"
    assert registry.get(ANALYSIS, "html").extension == ".html"
    with pytest.raises(ValueError, match="unknown format 'pdf': choose from md, json, html"):
        registry.get(COMPARISON, "pdf")


@pytest.fixture
def toy_renderer(monkeypatch, tmp_path):
    (tmp_path / "toy_text_renderer.py").write_text(
        "def render(run):\n"
        "    return ''.join(f\"{n}: {m.status}\\n\" for n, m in run.modes.items())\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.register(TOY)
    yield TOY
    registry.unregister(RUN, "txt")
    sys.modules.pop("toy_text_renderer", None)


def test_a_registered_renderer_is_written_by_save_and_render(toy_renderer, tmp_path):
    res = profreport.profile(
        nn.ReLU(), (torch.randn(4, 8),), modes=("eager",), device="cpu", min_time_s=0.02
    )
    folder = res.save(tmp_path / "run")
    assert (folder / "summary.txt").read_text() == "eager: ok\n"
    (folder / "summary.txt").unlink()
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["render", str(folder / "run.json")], out, err) == 0, err.getvalue()
    assert (folder / "summary.txt").read_text() == "eager: ok\n"
    assert str(folder / "summary.txt") in out.getvalue()
