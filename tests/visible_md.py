"""What a reader sees of summary.md before opening anything, for the tests of its size limits."""

from __future__ import annotations

import re

_FOLDED = re.compile(r"<details>.*?</details>", re.DOTALL)


def outside_details(summary_md: str) -> str:
    """What a reader sees of a summary before opening anything (its `<details>` blocks removed;
    the renderer never nests them, and escapes `<` in every string from the record)."""
    return _FOLDED.sub("", summary_md)
