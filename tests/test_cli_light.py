"""A light CLI: `profreport --help` loads the CLI alone (its commands and the built-in modes are
tables), every `profreport <command> --help` imports neither torch, numpy nor pandas (each
command imports what it needs when it runs), and the signal handler is installed before the
commands load, so a SIGTERM while they import is an interrupt (130).

Each import check runs in a fresh interpreter: this test process has long imported all three."""

import contextlib
import io
import json
import signal
import subprocess
import sys
from pathlib import Path

from profreport.cli import main
from profreport.cli.common import BUILTIN_MODES, DEFAULT_MODES

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "numpy", "pandas")
COMMANDS = ("generate", "models", "modes", "render", "compare", "ab", "sweep", "analyze")

_HELP = f"""
import contextlib, io, json, sys
from profreport.cli import main

loaded = {{}}
for argv in [["--help"], *[[c, "--help"] for c in {COMMANDS!r}]]:
    with contextlib.redirect_stdout(io.StringIO()) as shown, contextlib.suppress(SystemExit):
        main(argv)
    assert "usage: profreport" in shown.getvalue(), argv
    loaded[" ".join(argv)] = [m for m in {HEAVY!r} if m in sys.modules]
    if argv == ["--help"]:
        ours = sorted(m for m in sys.modules if m.split(".")[0] == "profreport")
print(json.dumps([loaded, ours]))
"""


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_help_imports_no_torch_numpy_or_pandas_and_the_top_level_help_the_cli_alone():
    done = _python(_HELP)
    assert done.returncode == 0, done.stderr
    loaded, ours = json.loads(done.stdout)
    assert set(loaded) == {"--help", *(f"{c} --help" for c in COMMANDS)}
    assert loaded == {argv: [] for argv in loaded}
    # it was 43 modules: the mode registry (and every mode), the record model, the runner
    assert len(ours) < 12, ours
    assert [m for m in ours if m.startswith(("profreport.modes", "profreport.record"))] == []
    assert "profreport.cli.common" in ours


def test_the_table_of_modes_is_the_registrys(mode_registry):
    assert mode_registry.mode_names() == BUILTIN_MODES
    assert mode_registry.default_modes() == DEFAULT_MODES


def test_a_registered_mode_is_named_in_help_and_accepted_when_the_command_runs(
    mode_registry, tmp_path
):
    from profreport.modes import Mode

    class Extra(Mode):
        name = "extra"

    def generate(modes: str) -> tuple[int, str]:
        out, err = io.StringIO(), io.StringIO()
        argv = ["generate", "--modes", modes, "--model", "no-such-model", "--out", str(tmp_path)]
        return main(argv, out, err), err.getvalue()

    code, err = generate("eager,extra")
    assert code == 2 and err.startswith("error: unknown mode(s) extra; choose from eager,"), err
    mode_registry.register(Extra())
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), contextlib.suppress(SystemExit):
        main(["generate", "--help"])
    assert "compile-fullgraph,extra(`profreportmodes`)" in "".join(shown.getvalue().split())
    code, err = generate("eager,extra")  # the mode passes; the model is what is refused
    assert code == 2 and err.startswith("error: unknown model 'no-such-model'"), err
    assert list(tmp_path.iterdir()) == []


# Sends this process a SIGTERM the moment a command's module starts to import.
_SIGTERM_WHILE_IMPORTING = """
import importlib.abc, os, signal, sys

class Trap(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "profreport.cli.generate":
            os.kill(os.getpid(), signal.SIGTERM)
        return None

sys.meta_path.insert(0, Trap())
from profreport import cli

sys.exit(cli.main(["generate", "--help"]))
"""


def test_a_sigterm_while_the_commands_import_is_an_interrupt():
    done = _python(_SIGTERM_WHILE_IMPORTING)
    assert done.returncode != -signal.SIGTERM, "killed before the handler was installed"
    assert done.returncode == 130, done.stderr
    assert done.stderr.startswith("error: interrupted"), done.stderr
