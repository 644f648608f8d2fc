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
    registry._REGISTRY.pop((RUN.name, TOY.name))
    sys.modules.pop("toy_text_renderer", None)


@pytest.mark.slow
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


def test_sweep_comparisons_render_through_the_same_registry():
    import profreport.sweep  # noqa: F401  (registers its renderers)
    from profreport.render.registry import SWEEP, SWEEP_COMPARISON

    assert registry.formats(SWEEP_COMPARISON) == registry.formats(COMPARISON)
    assert registry.get(SWEEP_COMPARISON, "html").filename == "comparison.html"
    assert registry.formats(SWEEP) == ("json", "html", "md")
    with pytest.raises(ValueError, match="unknown format 'pdf'"):
        registry.get(SWEEP_COMPARISON, "pdf")


def test_every_builtin_renderer_names_a_function_that_exists():
    import importlib

    import profreport.sweep  # noqa: F401  (registers its renderers)
    from profreport.render.registry import SWEEP, SWEEP_COMPARISON

    kinds = (RUN, COMPARISON, ANALYSIS, SWEEP, SWEEP_COMPARISON)
    every = [r for kind in kinds for r in registry.renderers(kind)]
    assert len(every) == 15
    for r in every:
        module, _, name = r.function.partition(":")
        assert callable(getattr(importlib.import_module(module), name)), r


def test_a_renderer_that_returns_bytes_is_not_text(monkeypatch, tmp_path):
    (tmp_path / "toy_bytes_renderer.py").write_text("def render(doc):\n    return b'x'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    renderer = Renderer("bin", ANALYSIS, "analysis.bin", "toy_bytes_renderer:render")
    assert renderer.render({}) == b"x"
    with pytest.raises(TypeError, match="the bin renderer of analysis documents gave bytes"):
        renderer.text({})
    sys.modules.pop("toy_bytes_renderer", None)
