"""A light CLI: `profreport --help` and every `profreport <command> --help` import neither torch,
numpy nor pandas (each command imports what it needs when it runs), and the signal handler is
installed before the commands load, so a SIGTERM while they import is an interrupt (130).

Each check runs in a fresh interpreter: this test process has long imported all three."""

import json
import signal
import subprocess
import sys
from pathlib import Path

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
print(json.dumps(loaded))
"""


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_help_imports_no_torch_numpy_or_pandas():
    done = _python(_HELP)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert set(loaded) == {"--help", *(f"{c} --help" for c in COMMANDS)}
    assert loaded == {argv: [] for argv in loaded}


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
