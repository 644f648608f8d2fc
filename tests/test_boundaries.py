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
