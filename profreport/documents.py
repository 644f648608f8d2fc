"""Every JSON document profreport reads or writes, by name, with the class that declares it: each one's
JSON Schema is published as docs/schemas/<name>.schema.json (generated from the class by
profreport.record.json_schema; tests/test_schemas.py keeps the checked-in files today's).

    python -m profreport.documents docs/schemas
"""

from __future__ import annotations

import sys
from pathlib import Path

from profreport.analysis.comparison import Comparison
from profreport.analysis.trace_document import AnalysisDocument
from profreport.capture.workers import WorkerRequest, WorkerResult
from profreport.record.expectation import Expectation
from profreport.record.json_schema import schema_text
from profreport.record.model import Run
from profreport.record.section import Section
from profreport.runner import GenerateRequest, GenerateResult
from profreport.sweep.compare import SweepComparison
from profreport.sweep.model import Sweep

DOCUMENTS: dict[str, type[Section]] = {
    "run": Run,  # run.json: `profreport generate`
    "analysis": AnalysisDocument,  # `profreport analyze --format json`
    "compare": Comparison,  # `profreport compare --format json` of two runs, `ab`'s comparison
    "sweep": Sweep,  # sweep.json: `profreport sweep`
    "sweep-compare": SweepComparison,  # `profreport compare --format json` of two sweeps
    "generate-request": GenerateRequest,  # a sweep point's request.json
    "generate-result": GenerateResult,  # a sweep point's result.json
    "expect": Expectation,  # a kernel budget: `generate --expect FILE`, the pytest fixture
    "timing-worker-request": WorkerRequest,  # what a latency timing worker is asked
    "timing-worker-result": WorkerResult,  # what it measured
}


def schema_files() -> dict[str, str]:
    """File name -> the JSON Schema text of that document."""
    return {f"{name}.schema.json": schema_text(cls) for name, cls in DOCUMENTS.items()}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m profreport.documents FOLDER")
    folder = Path(sys.argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in schema_files().items():
        (folder / name).write_text(text, encoding="utf-8")
        print(folder / name)
