"""docs/record.md's tables are generated from the record's dataclasses: the checked-in page is
today's."""

from pathlib import Path

from profreport.record.expectation import Expectation
from profreport.record.model import ModeEntry, OkMode, Run
from profreport.record.reference import intro, reference_markdown, section_markdown

PAGE = Path(__file__).parent.parent / "docs" / "record.md"


def test_the_checked_in_record_reference_is_up_to_date():
    page = PAGE.read_text()
    assert page == reference_markdown(Run, page), "run scripts/record-docs"
    assert intro(page).startswith("# The run record")  # the page's own text, above the tables


def test_a_section_table_names_type_requirement_and_the_declarations_comment():
    table = section_markdown(ModeEntry)
    assert "| `status` | one of `ok`, `failed`, `skipped` | yes |" in table
    assert "| `kernels` | [KernelCounts](#kernelcounts) or null |  |" in table
    assert "absent when the mode failed while timed" in table  # the comment beside latency_ms
    ok = section_markdown(OkMode)  # what a mode that ran adds to every mode's fields
    assert "Every field of [ModeEntry](#modeentry), and:" in ok
    assert "| `kernels` | [KernelCounts](#kernelcounts) | yes |" in ok
    assert "latency_ms" not in ok


def test_the_checked_in_expectation_reference_is_up_to_date():
    page = (PAGE.parent / "expect.md").read_text()
    assert page == reference_markdown(Expectation, page), "run scripts/record-docs"
    assert "| `min_speedup` | number or null |  | set by a person" in page
