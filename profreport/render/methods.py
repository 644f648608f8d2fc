"""The method text, from one source (render/methods.md) for both the report and docs/metrics.md.

The report's method paragraphs are the file's `<!-- report:<key> -->` blocks, with `{name}`
fields filled from the run's settings; the docs page opens with the whole file, the defaults
filled in, before its own *In depth* section. Both read the same blocks, so the report and the
docs cannot say different things."""

from __future__ import annotations

import re
import sys
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
    return {key: template.format(**values) for key, template in method_templates().items()}


DOCS_DEFINITION = (
    "The kernel definition (device or CPU) is the run's own; the report names it, and the "
    "In depth section below gives both."
)


IN_DEPTH = "\n## In depth\n"  # where docs/metrics.md's own text starts


def docs_page(page: str) -> str:
    """docs/metrics.md (`page`, as it is) with today's method text: the source with the default
    settings filled in and its notes removed, then the page's own *In depth* section."""
    settings = Settings().adding(timing_processes=DEFAULT_WORKERS)
    paragraphs = method_paragraphs(method_values(settings, DOCS_DEFINITION))
    text = METHODS_FILE.read_text(encoding="utf-8")
    text = _BLOCK.sub(lambda m: paragraphs[m.group(1)] + "\n", text)
    header = (
        "<!-- Up to *In depth*, generated from profreport/render/methods.md by scripts/method-docs: "
        "edit that file, not this part. -->\n\n"
    )
    return header + _COMMENT.sub("", text) + page[page.index(IN_DEPTH) :]


if __name__ == "__main__":
    metrics = Path(sys.argv[1])
    metrics.write_text(docs_page(metrics.read_text(encoding="utf-8")), encoding="utf-8")
