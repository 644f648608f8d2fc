"""The method text, from one source (render/methods.md) for both the report and docs/metrics.md.

The report's method paragraphs are the file's `<!-- report:<key> -->` blocks, with `{name}`
fields filled from the run's settings; the docs page is the whole file with the defaults filled
in. Both read the same blocks, so the report and the docs cannot say different things."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from profreport.capture.workers import DEFAULT_WORKERS
from profreport.record.model import ProfileSchedule, Settings, TimingSettings

METHODS_FILE = Path(__file__).with_name("methods.md")
_BLOCK = re.compile(r"<!-- report:(\w+) -->\n(.*?)\n<!-- /report -->\n", re.DOTALL)
_COMMENT = re.compile(r"<!--(?! report:|\s*/report).*?-->\n\n?", re.DOTALL)

# What a run records when nothing overrides it (a record written before a setting existed too).
JIT_WARMUP_CALLS = 3


@cache
def method_templates() -> dict[str, str]:
    """Each report block as one paragraph, its `{name}` fields unfilled."""
    text = METHODS_FILE.read_text(encoding="utf-8")
    return {key: " ".join(body.split()) for key, body in _BLOCK.findall(text)}


def method_values(settings: Settings, definition: str) -> dict[str, object]:
    """The fields the paragraphs name, from a run's settings (defaults where it has none)."""
    sched = settings.profile_schedule or ProfileSchedule()
    timing = settings.timing or TimingSettings()
    return {
        "definition": definition,
        "wait": sched.wait,
        "warmup": sched.warmup,
        "active": sched.active,
        "block_ms": timing.block_s * 1000,
        "min_blocks": timing.min_blocks,
        "min_time_s": timing.min_time_s,
        "resamples": 2000 if settings.bootstrap_resamples is None else settings.bootstrap_resamples,
        "jit_calls": JIT_WARMUP_CALLS,
        "timed_in": f" {timing_scope(settings.timing_processes)}"
        if settings.timing_processes
        else "",
    }


def timing_scope(processes: int) -> str:
    """What the latency of a run timed in `processes` worker processes covers: the latency
    paragraph's last sentence, and the summary's."""
    return (
        f"The latency was timed in {processes} fresh worker processes, one after another, "
        "after the evidence was captured: each built the model again (same seed: the same "
        "weights and inputs) and the modes (from the compilers' caches), and timed them as "
        f"above with 1/{processes} of the measured time, of the rounds (never fewer than its own "
        "interval needs) and of the budget; each speedup's "
        f"interval covers the {processes} processes, as a rerun would see them."
    )


def method_paragraphs(values: dict[str, object]) -> dict[str, str]:
    """The report's method paragraphs, filled with `values`."""
    return {key: template.format(**values) for key, template in method_templates().items()}


DOCS_DEFINITION = (
    "The kernel definition (device or CPU) is the run's own; the report names it, and the "
    "In depth section below gives both."
)


def docs_page() -> str:
    """docs/metrics.md: the source with the default settings filled in and its notes removed."""
    settings = Settings().adding(timing_processes=DEFAULT_WORKERS)
    paragraphs = method_paragraphs(method_values(settings, DOCS_DEFINITION))
    text = METHODS_FILE.read_text(encoding="utf-8")
    text = _BLOCK.sub(lambda m: paragraphs[m.group(1)] + "\n", text)
    header = (
        "<!-- Generated from profreport/render/methods.md by scripts/method-docs: edit that "
        "file, not this one. -->\n\n"
    )
    return header + _COMMENT.sub("", text)


if __name__ == "__main__":
    print(docs_page(), end="")
