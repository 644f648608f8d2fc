"""Which engine should read, write and describe profreport's JSON documents: the record's own
`Section` (profreport/record/section.py: frozen dataclasses whose type hints are the schema) or
pydantic v2 (a `TypeAdapter` over the very same dataclasses)?

Measured on the largest checked-in run record (tests/data/runs/h200/decoder-lm/run.json.gz) and
on a synthetic one `--copies` times larger (its modes copied under new names), both ways, each
timing the median of `--repeat` interleaved rounds in this one process:

  load    the parsed document validated and typed (Section: `record.validate` + `Run.from_json`;
          pydantic: `TypeAdapter(Run).validate_python`); `parse` (json.loads) is shown apart,
          and pydantic's `validate_json` from the text as well
  write   the typed run to JSON text (Section: `to_json` + `record.dumps`; pydantic:
          `dump_json(indent=1)`)
  schema  building the engine's description of every class of the record (Section: each class's
          field shapes from its type hints, and the JSON Schema from them (record/json_schema.py);
          pydantic: the TypeAdapter's core schema, and its `json_schema()`)
  import  each engine's import in a fresh process, alone and with the run record's classes

The pydantic side does less than the Section side, so its figures are a lower bound on what it
would cost: a TypeAdapter over stdlib dataclasses drops unknown keys instead of keeping them
and writes every field (an `omitted` one too). See the module docstring of
profreport/record/section.py for the choice.

    python bench/document_model.py [--copies 8] [--repeat 7]
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "tests" / "data" / "runs" / "h200" / "decoder-lm" / "run.json.gz"

# Each engine's import in a fresh process: with the run record's classes (the Section engine
# comes with them), then described, ready to load (Section: every class's field shapes;
# pydantic: the TypeAdapter's core schema).
DESCRIBE_SECTIONS = (
    "from profreport.record.json_schema import sections\n"
    "from profreport.record.section import schema_of\n"
    "[schema_of(c) for c in sections(r.Run)]"
)
IMPORTS = {
    "import, with the run record's classes": (
        "import profreport.record",
        "import profreport.record, pydantic; pydantic.TypeAdapter",
    ),
    "the same, and ready to load": (
        "import profreport.record as r\n" + DESCRIBE_SECTIONS,
        "import profreport.record as r, pydantic; pydantic.TypeAdapter(r.Run)",
    ),
}


def synthetic(document: dict[str, Any], copies: int) -> dict[str, Any]:
    """`document` with each mode copied `copies` times under new names."""
    modes = document["modes"]
    more = {f"{name}_{i}": mode for i in range(copies) for name, mode in modes.items()}
    return {**document, "modes": {**modes, **more}}


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def import_ms(statement: str, repeat: int) -> float:
    """Median wall time of `statement` in a fresh interpreter (its own clock, not the start)."""
    code = f"import time\nt = time.perf_counter()\n{statement}\nprint(time.perf_counter() - t)"
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, check=True
            ).stdout
        )
        * 1e3
        for _ in range(repeat)
    ]
    return statistics.median(runs)


def section_build() -> object:
    """Every class of the run record described afresh: its fields' shapes from its type hints."""
    from profreport.record import section
    from profreport.record.json_schema import sections
    from profreport.record.model import Run

    section._SCHEMAS.clear()
    return sections(Run)


def section_json_schema() -> object:
    """The run record's JSON Schema built afresh (what docs/schemas/run.schema.json holds)."""
    from profreport.record import section
    from profreport.record.json_schema import json_schema
    from profreport.record.model import Run

    section._SCHEMAS.clear()
    return json_schema(Run)


def measure(document: dict[str, Any], repeat: int) -> dict[str, tuple[float, float]]:
    """Per step: (Section ms, pydantic ms)."""
    from pydantic import TypeAdapter

    from profreport import record
    from profreport.record.model import Run

    text = json.dumps(document)
    adapter = TypeAdapter(Run)
    run = record.parse(document)
    typed = adapter.validate_python(document)
    rows: dict[str, list[float]] = {k: [] for k in ("parse", "load", "load from text", "write")}
    pyd: dict[str, list[float]] = {k: [] for k in rows}
    for _ in range(repeat):  # interleaved, so that a change in the machine's load hits both
        rows["parse"].append(median_ms(lambda: json.loads(text), 1))
        pyd["parse"].append(rows["parse"][-1])
        rows["load"].append(median_ms(lambda: record.parse(document), 1))
        pyd["load"].append(median_ms(lambda: adapter.validate_python(document), 1))
        rows["load from text"].append(median_ms(lambda: record.parse(json.loads(text)), 1))
        pyd["load from text"].append(median_ms(lambda: adapter.validate_json(text), 1))
        rows["write"].append(median_ms(lambda: record.dumps(run.to_json()), 1))
        pyd["write"].append(median_ms(lambda: adapter.dump_json(typed, indent=1), 1))
    return {k: (statistics.median(rows[k]), statistics.median(pyd[k])) for k in rows}


def schema_times(repeat: int) -> dict[str, tuple[float, float]]:
    from pydantic import TypeAdapter

    from profreport.record.model import Run

    return {
        "field shapes (core schema)": (
            median_ms(section_build, repeat),
            median_ms(lambda: TypeAdapter(Run), repeat),
        ),
        "JSON Schema, shapes included": (
            median_ms(section_json_schema, repeat),
            median_ms(lambda: TypeAdapter(Run).json_schema(), repeat),
        ),
    }


def table(title: str, rows: dict[str, tuple[float, float]], left: str, right: str) -> None:
    print(f"\n{title}")
    print(f"| step | {left} ms | {right} ms | {left} / {right} |")
    print("|---|---:|---:|---:|")
    for step, (a, b) in rows.items():
        print(f"| {step} | {a:.1f} | {b:.1f} | {a / b:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=8, help="the synthetic record's mode copies")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    document = json.loads(gzip.decompress(RECORD.read_bytes()))
    big = synthetic(document, args.copies)
    for name, doc in ((RECORD.relative_to(ROOT), document), (f"synthetic x{args.copies + 1}", big)):
        size_kb = len(json.dumps(doc, indent=1)) / 1e3
        table(
            f"{name} ({size_kb:.0f} KB, {len(doc['modes'])} modes)",
            measure(doc, args.repeat),
            "Section",
            "pydantic",
        )
    table(
        "building the description of the run record",
        schema_times(args.repeat),
        "Section",
        "pydantic",
    )
    imports = {
        step: (import_ms(section, args.repeat), import_ms(pydantic, args.repeat))
        for step, (section, pydantic) in IMPORTS.items()
    }
    table("in a fresh process", imports, "Section", "pydantic")


if __name__ == "__main__":
    main()
