"""Kernel budgets end to end, on real runs: `generate --update-expect` then `--expect` of the same
model pass, and the model changed (its ReLU a GELU, a LayerNorm added) fails naming the kernels
that appeared and disappeared; the same with the `profreport_expect` fixture in a pytest run of
its own. Every run is its own process, as in CI; runs that do not depend on each other (the
same model and the changed one, each in a folder of its own) run at the same time."""

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import entry_points
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

BEFORE = """
import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(64, 128)
        self.act = torch.nn.ReLU()
        self.down = torch.nn.Linear(128, 64)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


def build():
    torch.manual_seed(0)
    return Block(), (torch.randn(32, 64),)
"""
AFTER = (
    BEFORE.replace("torch.nn.ReLU()", "torch.nn.GELU()")
    .replace(
        "self.down = torch.nn.Linear(128, 64)\n",
        "self.down = torch.nn.Linear(128, 64)\n        self.norm = torch.nn.LayerNorm(64)\n",
    )
    .replace("return self.down(", "return self.norm(self.down(")
    .replace("(self.up(x)))", "(self.up(x))))")
)
TEST_FILE = """
from block import build


def test_block(profreport_expect):
    model, inputs = build()
    profreport_expect(model, inputs, modes=("eager", "compile"), device="cpu")
"""


def _env(folder: Path) -> dict[str, str]:
    path = os.pathsep.join([str(ROOT), str(folder), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, PYTHONPATH=path, PYTHONWARNINGS="ignore")


def _in(folder: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=folder, env=_env(folder), capture_output=True, text=True, timeout=600
    )


Ran = subprocess.CompletedProcess[str]


def _at_once(*runs: Callable[[], Ran]) -> list[Ran]:
    """Runs that do not depend on each other, each its own process in its own folder, at the
    same time: most of a run is one thread (starting Python, compiling), so two share the CI
    machine's two cores."""
    with ThreadPoolExecutor(len(runs)) as pool:
        return list(pool.map(lambda run: run(), runs))


def _changed_copy(folder: Path, *kept: str) -> Path:
    """A folder beside `folder` with the changed model and copies of its `kept` files."""
    changed = folder / "changed"
    changed.mkdir()
    (changed / "block.py").write_text(AFTER)
    for name in kept:
        target = changed / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(folder / name, target)
    return changed


def _generate(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "profreport", "generate", "--model", "block.py:build"]
    command += ["--modes", "eager,compile", "--device", "cpu", "--quiet"]
    # the budget holds kernels, not a speedup: timing only needs to finish (two runs at once
    # count each other as noise and would time on to the default 60 s budget)
    command += ["--min-time", "0.05", "--max-time", "1"]
    return _in(folder, *command, "--out", "runs", *args)


@pytest.mark.slow
def test_generate_expect_passes_on_the_same_model_and_names_the_kernels_that_changed(tmp_path):
    (tmp_path / "block.py").write_text(BEFORE)
    written = _generate(tmp_path, "--update-expect", "budget.json")
    assert written.returncode == 0, written.stderr
    assert "expectation: wrote budget.json (cpu: eager, compile)" in written.stdout
    budget = (tmp_path / "budget.json").read_text()
    assert '"aten::relu": {"calls_per_step": 1, "modules": ["act"]}' in budget
    assert '"cpp_fused_relu": {"calls_per_step": 1, "modules": ["act"]}' in budget

    # the same model, and the model changed (in a folder of its own), checked at once
    folder = _changed_copy(tmp_path, "budget.json")
    same, changed = _at_once(
        lambda: _generate(tmp_path, "--expect", "budget.json"),
        lambda: _generate(folder, "--expect", "budget.json"),
    )
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.startswith("kernel budget budget.json (cpu): within budget: 2 modes")

    assert changed.returncode == 1, changed.stdout + changed.stderr
    lines = changed.stdout.splitlines()
    assert lines[0].startswith("kernel budget budget.json (cpu): OVER BUDGET: 0 modes within")
    assert lines[0].endswith("4 new kernels · 2 gone kernels")
    for kernel, change in [
        ("eager: kernel aten::gelu", "— → 1 (new; allowed exact), in act"),
        ("eager: kernel aten::native_layer_norm", "— → 1 (new; allowed exact), in norm"),
        ("eager: kernel aten::relu", "1 → — (gone; allowed exact), in act"),
        ("compile: kernel cpp_fused_gelu", "— → 1 (new; allowed exact), in act"),
        ("compile: kernel cpp_fused_relu", "1 → — (gone; allowed exact), in act"),
    ]:
        assert f"  over budget: {kernel} (calls / step, profiler): {change}" in lines
    assert "error: over the kernel budget in budget.json: " in changed.stderr
    assert (tmp_path / "budget.json").read_text() == budget
    assert (folder / "budget.json").read_text() == budget


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # the plugin comes through the pytest11 entry point where profreport is installed from this
    # tree; otherwise it is named
    installed = any(e.value == "profreport.pytest_plugin" for e in entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "profreport.pytest_plugin"]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin]
    return _in(folder, *command, "--rootdir", str(folder), "test_block.py", *args)


@pytest.mark.slow
def test_the_fixture_writes_passes_and_fails_with_the_breach_in_its_message(tmp_path):
    (tmp_path / "block.py").write_text(BEFORE)
    (tmp_path / "test_block.py").write_text(TEST_FILE)
    snapshot = tmp_path / "__profreport__" / "test_block.json"
    # with no budget yet (a copy of the folder), and writing it, at once
    unwritten = tmp_path / "unwritten"
    unwritten.mkdir()
    for name in ("block.py", "test_block.py"):
        shutil.copy(tmp_path / name, unwritten / name)
    missing, written = _at_once(
        lambda: _pytest(unwritten), lambda: _pytest(tmp_path, "--profreport-update")
    )
    assert missing.returncode == 1
    absent = unwritten / "__profreport__" / "test_block.json"
    assert f"no kernel budget at {absent}: run pytest --profreport-update" in missing.stdout
    assert not absent.exists()

    assert written.returncode == 0, written.stdout
    assert f"profreport: wrote 1 kernel budget(s):\n  {snapshot}" in written.stdout
    assert '"cpp_fused_relu": {"calls_per_step": 1, "modules": ["act"]}' in snapshot.read_text()

    # the same model, and the model changed (in a folder of its own), checked at once
    folder = _changed_copy(tmp_path, "test_block.py", "__profreport__/test_block.json")
    again, changed = _at_once(lambda: _pytest(tmp_path), lambda: _pytest(folder))
    assert again.returncode == 0, again.stdout

    assert changed.returncode == 1
    out = changed.stdout
    changed_snapshot = folder / "__profreport__" / "test_block.json"
    assert f"AssertionError: kernel budget {changed_snapshot} (cpu): OVER BUDGET" in out
    assert "over budget: compile: kernel cpp_fused_gelu (calls / step, profiler): — → 1" in out
    assert "over budget: eager: kernel aten::relu (calls / step, profiler): 1 → — (gone" in out
    assert "to accept an intended change, run pytest --profreport-update and commit" in out
