"""The typed run record: a profreport.run/1 document read into frozen dataclasses and written
back unchanged (names and values), including records written before the record was typed; the
order of its keys means nothing (declared fields in declaration order, then unknown keys)."""

import dataclasses
import gzip
import json
import re
from pathlib import Path

import pytest

from profreport.record import (
    SCHEMA,
    Bytes,
    FailedMode,
    KernelCounts,
    OkMode,
    RecordError,
    Run,
    SkippedMode,
    dumps,
    load_run,
    parse,
)
from profreport.record.section import DocumentError

BEFORE = Path(__file__).parent / "data" / "run1_simple_cpu_before.json.gz"


@pytest.fixture(scope="module")
def document():
    return json.loads(gzip.decompress(BEFORE.read_bytes()))


def test_a_run1_record_from_before_loads_with_attributes(document):
    run = parse(document, str(BEFORE))
    # written before run/2 (each timing process's samples), read as one process's record
    assert run.schema == "profreport.run/1" and SCHEMA == "profreport.run/2"
    assert run.model.name == "simple" and run.device.type == "cpu"
    assert run.model.inputs[0].shape == (8, 32, 56, 56)
    assert list(run.modes) == ["eager", "script", "trace", "optimize", "compile"]
    compile_ = run.mode("compile")
    assert isinstance(compile_, OkMode) and compile_.status == "ok"
    assert isinstance(compile_.kernels, KernelCounts) and compile_.kernels.per_step == 3
    assert isinstance(compile_.bytes, Bytes)
    assert compile_.bytes.traffic == compile_.bytes.read + compile_.bytes.written == 24305920
    assert (
        compile_.kernels.table[0].name
        == document["modes"]["compile"]["kernels"]["table"][0]["name"]
    )
    assert compile_.compiler is not None and compile_.compiler.graph_breaks == 0
    assert run.mode("eager").speedup_vs_eager is None  # absent in the document
    assert run.mode("script").speedup_vs_eager.ci95[0] <= run.mode("script").speedup_vs_eager.median
    assert run.settings.profile_schedule.active == 3


def test_to_json_gives_back_the_same_document(document):
    again = Run.from_json(document).to_json()
    assert again == document
    assert json.loads(dumps(again)) == document


def test_keys_are_written_in_declaration_order_then_unknown_keys_whatever_order_was_read():
    mode = {"from_another_tool": 1, "bytes": None, "error": "boom", "status": "failed"}
    doc = {
        "modes": {"m": mode},
        "device": {"type": "cpu"},
        "zzz": True,
        "model": {"name": "m"},
        "schema": SCHEMA,
        "env": {},
    }
    run = parse(doc)
    written = run.to_json()
    assert written == doc
    assert list(written) == ["schema", "model", "device", "env", "modes", "zzz"]
    assert list(written["modes"]["m"]) == ["status", "error", "bytes", "from_another_tool"]
    added = run.mode("m").adding(verdict="v", compile_s=1.5, note="n")
    assert list(added.to_json()) == [
        *("status", "error", "compile_s", "bytes", "verdict"),
        *("from_another_tool", "note"),
    ]


def test_records_are_frozen(document):
    run = Run.from_json(document)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.mode("eager").status = "failed"  # type: ignore[misc]


def test_unknown_keys_survive_the_round_trip(document):
    doc = json.loads(json.dumps(document))
    doc["modes"]["eager"]["kernels"]["from_a_newer_writer"] = {"x": [1, 2]}
    doc["another_tool"] = "kept"
    run = Run.from_json(doc)
    assert run.mode("eager").kernels.extra["from_a_newer_writer"] == {"x": [1, 2]}
    assert run.to_json() == doc


def test_a_failed_mode_has_only_what_was_recorded():
    doc = {
        "schema": SCHEMA,
        "model": {"name": "m"},
        "device": {"type": "cpu"},
        "env": {},
        "modes": {"trace": {"status": "failed", "error": "RuntimeError: no", "verdict": "x"}},
    }
    run = parse(doc)
    trace = run.mode("trace")
    assert (type(trace), trace.error, trace.kernels, trace.bytes) == (
        FailedMode,
        "RuntimeError: no",
        None,
        None,
    )
    assert trace.has("error") and not trace.has("kernels")
    assert run.to_json() == doc


def test_each_mode_is_read_as_the_class_its_status_names(document):
    modes = dict(document["modes"])
    modes["script"] = {"status": "failed", "error": "RuntimeError: no"}
    modes["trace"] = {"status": "skipped", "error": "needs a GPU"}
    run = parse({**document, "modes": modes})
    kinds = {name: type(mode) for name, mode in run.modes.items()}
    assert kinds == {
        "eager": OkMode,
        "script": FailedMode,
        "trace": SkippedMode,
        "optimize": OkMode,
        "compile": OkMode,
    }
    assert list(run.ok_modes) == ["eager", "optimize", "compile"]
    assert run.to_json()["modes"] == modes  # the same keys written back


def test_an_unknown_status_is_refused_in_one_line_naming_it(document):
    modes = {**document["modes"], "eager": {**document["modes"]["eager"], "status": "fine"}}
    wrong = {**document, "modes": modes}
    found = 'expected one of ok, failed, skipped, found "fine"'
    with pytest.raises(RecordError, match=re.escape(f"modes.eager.status: {found}")):
        parse(wrong)
    with pytest.raises(DocumentError, match=re.escape(f"status: {found}")):
        Run.from_json(wrong)  # even unchecked: no class to read it as


def test_a_mode_recast_as_failed_keeps_its_evidence_and_says_failed(document):
    ran = parse(document).mode("compile")
    failed = ran.recast(FailedMode, error="RuntimeError: later")
    assert isinstance(failed, FailedMode) and failed.status == "failed"
    assert failed.kernels == ran.kernels and failed.error == "RuntimeError: later"
    assert failed.to_json() == {**ran.to_json(), "status": "failed", "error": "RuntimeError: later"}


def test_a_document_that_is_not_a_run_record_is_refused():
    with pytest.raises(RecordError, match="not a profreport run record"):
        parse({"schema": "profreport.run/0"}, "old.json")


def test_load_run_reads_a_folder(tmp_path, document):
    (tmp_path / "run.json").write_text(json.dumps(document))
    assert load_run(tmp_path).to_json() == document
