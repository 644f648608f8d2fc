"""Why a whole-graph capture failed, said in one line with the model's own source line and the
usual fix (modes/capture_errors), on what torch 2.13 really raised for each model of
tests/data/models/export_failures.py (recorded by scripts/record-export-failures)."""

from __future__ import annotations

import gzip
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from profreport.analysis.why_not_fused import VALUE_BRANCH_FIX, _graph_break
from profreport.modes.capture_errors import (
    GRAPH_BREAK,
    VALUE_BRANCH,
    SourceFrame,
    capture_failure_line,
    failure_line,
    quoted_frames,
    user_frame,
)
from profreport.record.model import GraphBreak
from profreport.text import MAX_LINE_CHARS, short_path
from tests.data.models import export_failures

RECORDED = json.loads(
    gzip.decompress((Path(__file__).parent / "data" / "export_failures.json.gz").read_bytes())
)
MODEL_FILE = "/models/export_failures.py"  # the model file's name in the record
WHAT = {
    "export": "torch.export",
    "export-strict": "torch.export",
    "compile-fullgraph": "torch.compile(fullgraph=True)",
}
INT_CAUSE = "a value computed from tensor data made a Python int"
FAKE_CAUSE = "tensor data read outside torch ops (export traces fake tensors)"


def _failing_line(model: str) -> tuple[int, str]:
    """The line number and code of the line marked `# FAILS` in the model's forward."""
    lines, start = inspect.getsourcelines(export_failures.MODELS[model].forward)
    at = next(i for i, text in enumerate(lines) if "# FAILS" in text)
    return start + at, " ".join(lines[at].split())


def _line(case: dict[str, Any]) -> str:
    sources = [[SourceFrame(*f) for f in frames] for frames in case["sources"]]
    frame = user_frame(sources, set(case["model_files"]), RECORDED["library"])
    return capture_failure_line(WHAT[case["capture"]], [tuple(c) for c in case["chain"]], frame)


FAILED = [c for c in RECORDED["cases"] if c["chain"] is not None]


@pytest.mark.parametrize("case", FAILED, ids=[f"{c['model']}-{c['capture']}" for c in FAILED])
def test_every_recorded_failure_names_the_models_line_never_torchs(case):
    line = _line(case)
    number, code = _failing_line(case["model"])
    assert f" (at {MODEL_FILE}:{number}: {code})" in line, line
    assert "/library" not in line  # never a frame inside torch, profreport or the stdlib
    assert "\n" not in line and len(line) <= MAX_LINE_CHARS
    assert line.startswith(f"{WHAT[case['capture']]} failed: {case['chain'][0][0]}: ")


# What profreport's export (non-strict, as modes/export.py calls it) says for each model, and
# what strict capture (compile-fullgraph) says where it differs: (cause, what to do).
EXPECTED = {
    ("item_branch", "export"): (VALUE_BRANCH, f"fix: {VALUE_BRANCH_FIX}"),
    ("tensor_branch", "export"): (VALUE_BRANCH, f"fix: {VALUE_BRANCH_FIX}"),
    ("tolist_branch", "export"): (VALUE_BRANCH, f"fix: {VALUE_BRANCH_FIX}"),
    ("item_size", "export"): (INT_CAUSE, "fix: leave it symbolic (no int(), len() or range()"),
    ("nonzero_length", "export"): (INT_CAUSE, "fix: leave it symbolic"),
    ("numpy_call", "export"): (FAKE_CAUSE, "fix: use torch ops, or make that code a custom op"),
    ("item_branch", "compile-fullgraph"): (VALUE_BRANCH, f"fix: {VALUE_BRANCH_FIX}"),
    # Dynamo's own break for `if x.sum() > 0:` under fullgraph: the same fix as compile's entry
    ("tensor_branch", "compile-fullgraph"): (
        f"{GRAPH_BREAK}: {VALUE_BRANCH}",
        f"fix: {VALUE_BRANCH_FIX}",
    ),
    ("graph_break", "compile-fullgraph"): (
        GRAPH_BREAK,
        "Dynamo's hint: Remove the `torch._dynamo.graph_break()` call.",
    ),
    ("tolist_branch", "compile-fullgraph"): (GRAPH_BREAK, "Dynamo's hint: Ensure the input"),
}


@pytest.mark.parametrize("key", list(EXPECTED), ids=["-".join(k) for k in EXPECTED])
def test_each_failure_class_gets_its_cause_and_fix(key):
    (case,) = [c for c in FAILED if (c["model"], c["capture"]) == key]
    cause, advice = EXPECTED[key]
    line = _line(case)
    assert f"); {cause}; {advice}" in line, line


def test_the_issues_model_reads_as_its_place_cause_and_fix():
    """Issue 46: export said only "GuardOnDataDependentSymNode: Could not guard on
    data-dependent expression zuf0 > 0.0 ..." for `if h.mean().item() > 0:`."""
    (case,) = [c for c in FAILED if (c["model"], c["capture"]) == ("item_branch", "export")]
    number, code = _failing_line("item_branch")
    assert code == "if h.mean().item() > 0: # FAILS"
    assert "(Size-like symbols: none)" in case["chain"][0][1]  # torch's words, recorded
    assert MODEL_FILE not in case["chain"][0][1].split("Caused by:")[0]  # torch names no file
    line = _line(case)
    assert line.startswith(
        "torch.export failed: GuardOnDataDependentSymNode: Could not guard on data-dependent"
    )
    assert line.endswith(
        f" (at {MODEL_FILE}:{number}: {code}); control flow on a value computed from tensor "
        "data; fix: compute the condition outside forward, or branch with torch.cond or "
        "torch.where"
    )


def test_the_models_own_file_is_preferred_to_a_helper_library_it_calls():
    model = SourceFrame("/home/me/model.py", 12, "forward", "y = rearrange(x, 'b c -> c b')")
    helper = SourceFrame("/venv/site-packages/einops/einops.py", 400, "reduce", "raise ...")
    torch_frame = SourceFrame("/venv/site-packages/torch/_ops.py", 10, "__call__", "")
    sources = [[model, helper, torch_frame]]
    library = ["/venv/site-packages/torch/"]
    assert user_frame(sources, {"/home/me/model.py"}, library) == model
    # a model from a file profreport does not know: the innermost frame outside the library
    assert user_frame(sources, set(), library) == helper
    assert user_frame([[torch_frame]], set(), library) is None
    # generated code (an FX graph's "<eval_with_key>.3") is never the place
    generated = SourceFrame("<eval_with_key>.3", 5, "forward", "")
    assert user_frame([[model, generated]], set(), library) == model
    # a built-in model's file is profreport's, yet the model's own
    builtin = SourceFrame("/venv/site-packages/profreport/models.py", 40, "forward", "x.relu()")
    profreport = "/venv/site-packages/profreport/"
    files = {builtin.file}
    assert user_frame([[builtin, torch_frame]], files, [*library, profreport]) == builtin


def test_a_message_without_a_frame_keeps_its_cause_and_fix():
    """Torch's text alone (no frame anywhere): the cause and the fix are still said."""
    exc = RuntimeError(
        "Could not guard on data-dependent expression zuf0 > 0.0 (unhinted: zuf0 > 0.0).  "
        "(Size-like symbols: none)\n\nCaused by: (mp/i46/m_item.py:11 in forward)\n"
    )
    assert failure_line("torch.export", exc) == (
        "torch.export failed: RuntimeError: Could not guard on data-dependent expression zuf0 > "
        "0.0 (unhinted: zuf0 > 0.0). (Size-like symbols: none); control flow on a value "
        f"computed from tensor data; fix: {VALUE_BRANCH_FIX}"
    )


def test_a_failure_of_no_known_class_keeps_torchs_words_and_the_place():
    text = (
        "a leaf Variable that requires grad is being used in an in-place operation.\n\n"
        "The following call raised this error:\n"
        '  File "/home/me/model.py", line 7, in forward\n'
        "    self.a.weight.add_(1)\n"
    )
    (frame,) = quoted_frames(text)
    line = capture_failure_line("torch.export", [("RuntimeError", text)], frame)
    assert line == (
        "torch.export failed: RuntimeError: a leaf Variable that requires grad is being used in "
        "an in-place operation. (at /home/me/model.py:7: self.a.weight.add_(1))"
    )


def test_compiles_graph_break_entry_gives_the_same_fix_for_dynamos_data_dependent_branch():
    """`if x.sum() > 0:` breaks compile's graph as "Data-dependent branching" (no `.item()` on
    the line): its entry now gives the fix export's failure gives."""
    entry = _graph_break(
        GraphBreak(
            file="/home/me/model.py",
            line=9,
            source="if h.sum() > 0:",
            reason="Data-dependent branching",
        ),
        "compile",
    )
    assert VALUE_BRANCH_FIX in entry.hint and entry.hint_test == "--modes compile"


@pytest.mark.slow  # one real generate: eager, then export and fullgraph failing before Inductor
def test_generate_says_where_export_failed_and_how_to_fix_it(tmp_path):
    from tests.conftest import generate_run

    model = Path(export_failures.__file__)
    modes = "eager,export,compile-fullgraph"
    run = generate_run(tmp_path, "--model", f"{model}:build_item_branch", "--modes", modes)
    entries = json.loads((run / "run.json").read_text(encoding="utf-8"))["modes"]
    number, code = _failing_line("item_branch")
    said = (
        f"(at {short_path(str(model))}:{number}: {code}); {VALUE_BRANCH}; fix: {VALUE_BRANCH_FIX}"
    )
    export = entries["export"]
    assert export["status"] == "failed"
    assert export["error"].startswith("torch.export failed: GuardOnDataDependentSymNode: ")
    assert export["error"].endswith(said)
    assert "Could not guard on data-dependent expression zuf0 > 0.0" in export["error_full"]
    fullgraph = entries["compile-fullgraph"]
    assert fullgraph["error"].startswith("torch.compile(fullgraph=True) failed: UserError: ")
    assert fullgraph["error"].endswith(said)
    summary = (run / "summary.md").read_text(encoding="utf-8")
    assert f"{model.name}:{number}: if h.mean().item() &gt; 0:" in summary
    assert VALUE_BRANCH_FIX in summary
