"""CI runs what the README tells a person to run: both test tiers."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_test_command() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("Run the tests") :]
    return re.search(r"```bash\n(.+?)\n```", section, re.DOTALL).group(1).strip()


def test_ci_runs_the_readme_test_command_with_both_tiers():
    readme = _readme_test_command()
    tests = readme[readme.index("python -m pytest") :]
    assert tests == "python -m pytest -q && python -m pytest -q -m slow"
    ci = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip()]
    assert ci[-1] == tests
