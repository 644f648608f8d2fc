"""scripts/golden, the harness that shows a refactor changes no output byte: it writes the same
bytes twice, and its diff names a file that changed, went or came (so the harness can fail)."""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
PAIR = ("kernel_diff-gelu_mul_apart", "kernel_diff-gelu_mul_fused")


def _harness():
    spec = importlib.util.spec_from_file_location("golden_outputs", SCRIPTS / "golden_outputs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["golden_outputs"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    golden = _harness()
    root = tmp_path_factory.mktemp("golden")
    for side in ("a", "b"):
        golden.write(
            root / side,
            only=lambda r: r.name in PAIR,
            steps=("records", "compare"),
            log=io.StringIO(),
        )
    return golden, root / "a", root / "b"


def test_two_writes_are_byte_identical(written):
    golden, a, b = written
    manifest = (a / "MANIFEST").read_text()
    assert manifest == (b / "MANIFEST").read_text()
    names = {line.split("  ", 1)[1] for line in manifest.splitlines()}
    base, head = PAIR
    assert {
        f"render/{base}/report.html",
        f"render/{base}/summary.md",
        f"resave/{head}/kernels_compile.csv",
        f"derived/{head}.json",
        f"compare/{base}__{head}.md",
        f"compare/{head}__{base}.json",
        f"compare/{base}__{head}.refused.md.cli.txt",
    } <= names
    # the refused pair (different models without the flag) records its exit code and line
    refused = (a / f"compare/{base}__{head}.refused.md.cli.txt").read_text()
    assert "exit: 2" in refused and "--allow-different-models" in refused
    assert "exit: 0" in (a / f"compare/{base}__{head}.md.cli.txt").read_text()
    # the output folder's own path is written as $OUTDIR, so two folders can agree
    assert "$OUTDIR/render" in (a / f"render/{base}/render.cli.txt").read_text()
    out = io.StringIO()
    assert golden.diff(a, b, out) == 0
    assert f"{len(names)} same, 0 changed, 0 removed, 0 added" in out.getvalue()


def test_diff_names_a_one_byte_change_a_removed_and_an_added_file(written, tmp_path):
    import shutil

    golden, a, _b = written
    changed = Path(shutil.copytree(a, tmp_path / "changed"))
    summary = changed / f"render/{PAIR[0]}/summary.md"
    text = summary.read_bytes()
    at = text.index(b"|")
    summary.write_bytes(text[:at] + b"!" + text[at + 1 :])
    (changed / f"derived/{PAIR[1]}.json").unlink()
    (changed / "extra.txt").write_text("new\n")
    out = io.StringIO()
    assert golden.diff(a, changed, out) == 1
    lines = out.getvalue().splitlines()
    assert f"changed: render/{PAIR[0]}/summary.md" in lines
    assert f"removed: derived/{PAIR[1]}.json" in lines
    assert "added: extra.txt" in lines
    assert any(line.startswith("  +") and "!" in line for line in lines)  # the line that differs
    # the command itself, as a subprocess: exit 1, and 0 on two equal folders
    run = [sys.executable, str(SCRIPTS / "golden_outputs.py"), "diff", str(a)]
    assert subprocess.run([*run, str(changed)], capture_output=True).returncode == 1
    assert subprocess.run([*run, str(a)], capture_output=True).returncode == 0
