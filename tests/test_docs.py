"""The README fits a screen or two and the docs it links exist: every relative link in README.md
and docs/*.md names a file of the repository."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README_CHARS = 15_000
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(page.read_text(encoding="utf-8")) if "://" not in t]


def test_readme_is_short_and_links_at_least_two_docs_pages():
    readme = ROOT / "README.md"
    assert len(readme.read_text(encoding="utf-8")) <= README_CHARS
    docs = {t for t in _relative_links(readme) if t.startswith("docs/") and t.endswith(".md")}
    assert len(docs) >= 2, docs


def test_every_relative_link_names_a_file():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = [
        f"{page.relative_to(ROOT)} -> {target}"
        for page in pages
        for target in _relative_links(page)
        if not (page.parent / target).exists()
    ]
    assert broken == []
