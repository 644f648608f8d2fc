"""docs/schemas/ publishes a JSON Schema per document profreport writes, generated from the
document's classes: the checked-in files are today's, every checked-in run record validates
against run.schema.json with the `jsonschema` package, the schema refuses what the record's own
validation refuses, and the documents the code writes (a sweep, a point's request and result, a
sweep comparison, a fresh `generate` run) validate against theirs."""

import copy
import dataclasses
import gzip
import json
from pathlib import Path

import jsonschema
import pytest

from profreport.documents import DOCUMENTS, schema_files
from profreport.record import RecordError, validate
from profreport.record.json_schema import json_schema
from profreport.record.model import Run
from profreport.runner import GenerateRequest, GenerateResult

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "docs" / "schemas"
RUNS = ROOT / "tests" / "data" / "runs"
RECORDS = sorted([*RUNS.glob("**/run.json"), *RUNS.glob("**/run.json.gz")])


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(name: str, document: object) -> list[str]:
    return [e.message for e in _validator(name).iter_errors(document)]


def _read(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


def test_the_checked_in_schemas_are_todays():
    assert {p.name for p in SCHEMAS.glob("*.schema.json")} == set(schema_files()), (
        "run scripts/record-docs"
    )
    for name, text in schema_files().items():
        assert (SCHEMAS / name).read_text() == text, f"{name} is stale: run scripts/record-docs"
    assert {"run", "analysis", "compare", "sweep", "sweep-compare", "generate-result"} <= set(
        DOCUMENTS
    )


def test_the_records_under_tests_data_runs_are_all_there():
    names = {p.relative_to(RUNS).parts[0] for p in RECORDS}
    assert {"gated-residual-cpu", "hostile-cpu", "hf-llama-2layers-cpu", "h200"} <= names
    assert len([p for p in RECORDS if "h200" in p.parts]) == 3


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: str(p.relative_to(RUNS)))
def test_every_checked_in_run_record_validates_against_the_published_schema(path):
    assert _errors("run", _read(path)) == []


def _gated() -> dict:
    return _read(RUNS / "gated-residual-cpu" / "run.json")


def _broken(change) -> dict:
    doc = copy.deepcopy(_gated())
    change(doc)
    return doc


BROKEN = {
    "another schema": lambda d: d.update(schema="profreport.run/0"),
    "no model": lambda d: d.pop("model"),
    "a mode that ran without kernels": lambda d: d["modes"]["eager"].pop("kernels"),
    "a mode that ran with null bytes": lambda d: d["modes"]["eager"].update(bytes=None),
    "an unknown status": lambda d: d["modes"]["eager"].update(status="fine"),
    "a kernel row's calls as text": lambda d: d["modes"]["eager"]["kernels"]["table"][0].update(
        calls="3"
    ),
    "a null kernel name": lambda d: d["modes"]["eager"]["kernels"]["table"][0].update(name=None),
    "an interval of three numbers": lambda d: d["modes"]["compile"]["speedup_vs_eager"].update(
        ci95=[1, 2, 3]
    ),
    "a reason as a number": lambda d: d["modes"]["compile"]["speedup_vs_eager"].update(
        inconclusive=1
    ),
    "a latency without its median": lambda d: d["modes"]["eager"]["latency_ms"].pop("median"),
}


@pytest.mark.parametrize("change", BROKEN.values(), ids=list(BROKEN))
def test_the_schema_refuses_what_the_records_own_validation_refuses(change):
    doc = _broken(change)
    with pytest.raises(RecordError):
        validate(doc)
    assert _errors("run", doc)


def test_both_accept_another_tools_keys_and_a_mode_that_did_not_run():
    def change(d):
        d["from_another_tool"] = {"anything": [1]}
        d["modes"]["eager"]["kernels"]["also_theirs"] = True
        d["modes"]["script"] = {"status": "failed", "error": "it raised", "kernels": None}

    doc = _broken(change)
    assert validate(doc) is doc
    assert _errors("run", doc) == []


def test_the_schema_describes_fields_from_their_declarations():
    defs = json_schema(Run)["$defs"]
    mode = defs["ModeEntry"]
    assert mode["properties"]["latency_ms"]["description"].startswith("absent when the mode")
    assert mode["properties"]["verdict"]["description"] == "finding"
    assert mode["properties"]["status"] == {"enum": ["ok", "failed", "skipped"]}
    # a mode is one of three classes, told apart by its status; one that ran has its counts
    variants = defs["Run"]["properties"]["modes"]["additionalProperties"]["oneOf"]
    assert [v["$ref"].split("/")[-1] for v in variants] == ["OkMode", "FailedMode", "SkippedMode"]
    ok = defs["OkMode"]
    assert ok["allOf"] == [{"$ref": "#/$defs/ModeEntry"}]
    assert ok["properties"]["status"] == {"enum": ["ok"]}
    assert ok["required"] == ["status", "kernels", "bytes"]
    assert defs["FailedMode"]["required"] == ["status"]


def test_a_points_request_and_result_validate(tmp_path):
    request = GenerateRequest(model="hf:gpt2", modes=("eager",), out=tmp_path, seq_len=64)
    assert _errors("generate-request", json.loads(json.dumps(request.to_json()))) == []
    result = GenerateResult.made(0, tmp_path / "run-1")
    assert _errors("generate-result", json.loads(json.dumps(result.to_json()))) == []
    assert _errors("generate-result", {**result.to_json(), "status": "fine"})


def test_a_sweep_and_a_sweep_comparison_validate(recorded_gated_run):
    from profreport.analysis.compare import Thresholds
    from profreport.analysis.derive import derived_run
    from profreport.modes import mode_analyses
    from profreport.record import load
    from profreport.sweep.compare import compare_sweeps
    from profreport.sweep.grid import Point
    from profreport.sweep.model import Sweep, mode_rows

    run = derived_run(load(recorded_gated_run), mode_analyses())
    point = Point(id="p", model="gated-residual", batch_size=1, dtype="float32", status="ok")
    rows = mode_rows(dataclasses.replace(point, run="points/p/run"), ("eager",), run)
    sweep = Sweep(points=(point,), rows=tuple(rows))
    document = json.loads(json.dumps(sweep.to_json()))
    assert _errors("sweep", document) == []
    assert _errors("sweep", {**document, "points": [{"id": "p"}]})  # no model, dtype or status
    compared = compare_sweeps(sweep, sweep, {"p": run}, {"p": run}, Thresholds(5, 5.0))
    written = json.loads(json.dumps(compared.to_json()))
    assert written["points"][0]["comparison"]["schema"] == "profreport.compare/2"
    assert _errors("sweep-compare", written) == []


def _compare_json(tmp_path: Path, base: str, head: str, *flags: str) -> dict:
    from profreport.cli import main

    paths = []
    for name, source in (("base", base), ("head", head)):
        path = tmp_path / f"{name}.json"
        path.write_bytes(json.dumps(_read(RUNS / source)).encode())
        paths.append(str(path))
    out = tmp_path / "compare.json"
    main(["compare", *paths, "--format", "json", "--out", str(out), *flags])
    return json.loads(out.read_text())


def test_a_run_comparison_validates_and_reads_back(tmp_path):
    """`compare --format json` of two runs (kernel diffs, machine references, a paired `ab`
    latency) validates against compare.schema.json, and reads back to the same document."""
    from profreport.analysis.compare import Thresholds, compare_runs
    from profreport.analysis.comparison import Comparison
    from profreport.record.model import MachineLoad
    from tests.test_ab import _record

    documents = [
        _compare_json(
            tmp_path,
            "h200/simple/run.json.gz",
            "h200/gated-residual/run.json.gz",
            "--allow-different-models",
            "--max-kernel-increase=0",
        ),
        _compare_json(
            tmp_path,
            "machine-reference/simple-quiet.run.json.gz",
            "machine-reference/simple-busy.run.json.gz",
            "--max-latency-regression=5",
        ),
    ]
    samples = [1.0 + 0.01 * i for i in range(20)]
    paired = compare_runs(
        _record({"eager": samples}),
        _record({"eager": [1.15 * x for x in samples]}),
        Thresholds(max_latency_regression_pct=10),
        paired_loads=[MachineLoad(other_busy_share=0.0)],
    )
    documents.append(json.loads(json.dumps(paired.to_json())))
    assert documents[0]["modes"][0]["kernel_diff"]["rows"]
    assert documents[1]["machine"]["parts"]
    assert documents[2]["modes"][0]["metrics"][-1]["paired"]["ratio"]["n"] == 20
    for doc in documents:
        assert doc["schema"] == "profreport.compare/2"
        assert _errors("compare", doc) == []
        assert Comparison.parse(doc).to_json() == doc
        older = {**doc, "schema": "profreport.compare/1"}  # written before compare/2: read too
        assert _errors("compare", older) == [] and Comparison.parse(older).to_json() == older
    broken = copy.deepcopy(documents[2])
    broken["modes"][0]["metrics"][-1]["paired"]["ratio"]["ci95"] = [1.0]
    assert _errors("compare", broken)
    del broken["regressed"]
    assert any("'regressed' is a required property" in e for e in _errors("compare", broken))


def test_an_analysis_validates_against_its_schema_and_an_analysis_1_does_not(capsys):
    """`analyze --format json` (two traces compared, their time breakdowns, top kernels over
    the whole trace) validates against analysis.schema.json; an analysis/1 document, whose
    changes had another shape, is read by profreport (upgraded) but is not of today's schema."""
    from profreport.cli import main

    data = ROOT / "tests" / "data"
    traces = ["a100_alexnet_inference.json.gz", "a100_torch_compile_triton.json.gz"]
    assert main(["analyze", *(str(data / t) for t in traces), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "profreport.analysis/2" and doc["comparison"][0]["launching_ops"]
    assert _errors("analysis", doc) == []
    older = _read(data / "analysis-1" / "norm_gelu_block-gelu_norm_block.json")
    assert _errors("analysis", older)


@pytest.mark.slow
def test_a_fresh_generate_run_validates_against_the_published_schema(gated_run):
    assert _errors("run", json.loads((gated_run / "run.json").read_text())) == []
