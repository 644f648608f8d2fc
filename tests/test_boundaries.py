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


# What a renderer may take from profreport.analysis: the types of the documents it lays out (a
# comparison, an analysis, a budget check, a kernel diff), their constants and labels, and
# formatting helpers. A finding it shows is the document's (a run's: analysis/derive), never
# computed while rendering (issue 47: derive once).
RENDER_MAY_IMPORT = {
    "profreport.analysis.attribution": {"group_module"},  # the common module of a group's paths
    "profreport.analysis.budget": {"Breach", "BudgetCheck", "FusedGroupChange"},
    "profreport.analysis.change": {"Change"},  # the change of one number, in any document
    "profreport.analysis.comparison": {
        "Comparison",
        "MetricChange",
        "ModeComparison",
        "RunIdentity",
        "Thresholds",
    },
    "profreport.analysis.kernel_definitions": {"STEP_RE", "is_inductor_kernel"},  # name rules
    "profreport.analysis.kernel_diff": {
        "KernelChange",
        "KernelSide",
        "MODELED",
        "ModeKernelDiff",
        "TIME_SOURCE",
    },
    "profreport.analysis.paired": {"RESOLUTION"},  # the number its sentence names
    "profreport.analysis.speedup_breakdown": {"payback_text"},  # the payback finding in words
    "profreport.analysis.time_breakdown": {"TraceTimeBreakdown"},
    "profreport.analysis.trace_compare": {"TIME_PARTS"},
    "profreport.analysis.trace_document": {
        "AnalysisDocument",
        "PER_STEP_FIELDS",
        "TimeChanges",
        "TraceComparison",
        "TraceSummary",
    },
}


def _imported_names(path: Path) -> set[tuple[str, str]]:
    """(module, name) of each `from module import name`; (module, "*") of each `import module`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {(node.module, alias.name) for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {(alias.name, "*") for alias in node.names}
    return found


def test_renderers_take_no_analysis_from_profreport_analysis():
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(
            f"{module}.{name}"
            for module, name in _imported_names(path)
            if module.startswith("profreport.analysis")
            and name not in RENDER_MAY_IMPORT.get(module, set())
        )
        for path in sorted((PACKAGE / "render").rglob("*.py"))
    }
    assert {path: names for path, names in offenders.items() if names} == {}
