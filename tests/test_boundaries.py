"""Dependencies point one way: nothing below the command line imports it (the CLI is the edge;
the sweep's executors and the renderers talk to it through data)."""

import ast
from pathlib import Path

import profreport

PACKAGE = Path(profreport.__file__).parent
EDGE = {PACKAGE / "cli", PACKAGE / "__main__.py"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_nothing_below_the_cli_imports_it():
    below = [
        p
        for p in sorted(PACKAGE.rglob("*.py"))
        if not any(p == edge or edge in p.parents for edge in EDGE)
    ]
    assert PACKAGE / "sweep" / "ray_executor.py" in below
    offenders = {
        str(p.relative_to(PACKAGE)): sorted(
            name
            for name in _imports(p)
            if name == "profreport.cli" or name.startswith("profreport.cli.")
        )
        for p in below
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_check_sees_an_import_inside_a_function(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from profreport.cli.common import UsageError\n")
    assert "profreport.cli.common" in _imports(sample)


def _strings(path: Path) -> list[str]:
    return [
        node.value
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    ]


def test_capture_and_render_import_no_layer_above_them_not_even_by_name():
    """Capture never builds a mode (the process Nsight Compute runs, which does, sits beside the
    pipeline); the renderers' registry names no sweep module (sweep registers its own)."""
    above = {
        "capture": (
            "profreport.modes",
            "profreport.pipeline",
            "profreport.sweep",
            "profreport.api",
        ),
        "render": ("profreport.sweep", "profreport.pipeline", "profreport.api"),
    }
    offenders = {}
    for folder, names in above.items():
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            found = sorted(
                name
                for name in _imports(path) | {s.partition(":")[0] for s in _strings(path)}
                if name.startswith(names)
            )
            if found:
                offenders[str(path.relative_to(PACKAGE))] = found
    assert offenders == {}
