"""Kernel budgets (analysis/budget.py, record/expectation.py, render/budget.py): a run against a
checked-in expectation, the file written from a run, and its one-line errors.

The runs are the real records under tests/data/kernel_diff (`generate --modes eager,compile` on
this project's CPU machine of the models in tests/data/kernel_diff/models): relu_block (Linear,
ReLU, Linear) against gelu_norm_block (the ReLU a GELU, a LayerNorm added), and gelu_mul_fused
against gelu_mul_apart (one fused kernel against two); and the gated-residual run, timed.
"""

import dataclasses
import json
import re
from pathlib import Path

import jsonschema
import pytest

from profreport import record
from profreport.analysis.budget import check_budget
from profreport.analysis.budget_file import (
    expectation_of,
    kernel_key,
    kernels_by_name,
    needs_timing,
)
from profreport.analysis.derive import derived_run
from profreport.modes import mode_analyses
from profreport.record.expectation import (
    DeviceExpectation,
    ExpectationError,
    FailedExpectation,
    OkExpectation,
    SkippedExpectation,
    Tolerances,
    dumps,
    parse,
)
from profreport.record.model import FailedMode, KernelCounts, KernelRow, ModeResult, OkMode, Run
from profreport.render import html, markdown
from profreport.render.budget import budget_markdown, budget_text, budget_view, row_line
from tests.conftest import RECORDED_GATED_RUN

DATA = Path(__file__).parent / "data" / "kernel_diff"
EXPECT_PAGE = Path(__file__).parent.parent / "docs" / "expect.md"  # its example file


def _run(name: str) -> Run:
    path = RECORDED_GATED_RUN if name == "gated-residual" else DATA / name
    return derived_run(record.load(path), mode_analyses())


def _with_mode(run: Run, name: str, mode: ModeResult | None) -> Run:
    modes = {n: m for n, m in run.modes.items() if n != name}
    if mode is not None:
        modes[name] = mode
    return dataclasses.replace(run, modes=modes)


def _breaches(check, mode):
    return [(b.kind, b.subject, b.expected, b.actual) for b in check.breaches if b.mode == mode]


# ---------------------------------------------------------------- the check


def test_relu_to_gelu_and_an_added_layer_norm_are_over_budget_naming_the_kernels():
    budget = expectation_of(_run("relu_block"))
    check = check_budget(budget, _run("gelu_norm_block"), "budget.json")
    assert not check.passed
    assert [m.outcome for m in check.modes] == ["over budget", "over budget"]
    assert _breaches(check, "compile") == [
        ("kernels per step", "kernels per step", 3, 4),
        ("bytes per step", "bytes per step", 148224, 165120),
        ("kernel", "cpp_fused_gelu", 0, 1),
        ("kernel", "cpp_fused_native_layer_norm", 0, 1),
        ("kernel", "cpp_fused_relu", 1, 0),
    ]
    assert _breaches(check, "eager")[2:] == [
        ("kernel", "aten::gelu", 0, 1),
        ("kernel", "aten::native_layer_norm", 0, 1),
        ("kernel", "aten::relu", 1, 0),
    ]
    assert (check.kernels("appeared"), check.kernels("disappeared")) == (4, 2)
    # where in the model: the LayerNorm's kernel ran in `norm`
    (norm,) = [b for b in check.breaches if b.subject == "cpp_fused_native_layer_norm"]
    assert norm.modules == ("norm",) and norm.kernel_status == "appeared"


def test_the_same_run_is_within_budget_and_the_file_round_trips():
    run = _run("relu_block")
    text = dumps(expectation_of(run))
    budget = parse(text, "budget.json")
    assert dumps(budget) == text
    assert dumps(expectation_of(run, budget)) == text  # a refresh of the same run changes nothing
    check = check_budget(budget, run, "budget.json")
    assert check.passed and [m.outcome for m in check.modes] == ["within budget"] * 2
    assert check.kernels("appeared") == check.kernels("disappeared") == 0


def test_the_file_is_one_entry_per_line_in_a_stable_order():
    run = _run("relu_block")
    reordered = _with_mode(_with_mode(run, "eager", None), "eager", run.modes["eager"])
    assert list(reordered.modes) == ["compile", "eager"]
    text = dumps(expectation_of(reordered))
    assert text == dumps(expectation_of(run))  # eager first, whatever order the run had
    lines = text.splitlines()
    assert '            "aten::addmm": {"calls_per_step": 2},' in lines
    assert '            "cpp_fused_relu": {"calls_per_step": 1}' in lines
    assert '          "kernels_per_step": 3,' in lines
    # every line holds at most one key of the document (an object on one line is one entry)
    assert all(line.count('": ') <= 1 or line.rstrip(",").endswith("}") for line in lines)
    data = json.loads(text)
    assert list(data["devices"]["cpu"]["modes"]) == ["eager", "compile"]


def test_generated_names_lose_their_graph_prefix_and_counter():
    assert kernel_key("graph_0_cpp_fused_relu_3") == "cpp_fused_relu"
    assert kernel_key("triton_poi_fused_add_mul_0") == "triton_poi_fused_add_mul"
    assert kernel_key("aten::addmm") == "aten::addmm"
    assert kernel_key("void at::native::kernel_2") == "void at::native::kernel_2"

    def row(name):
        return KernelRow(name=name, kind="cpu", calls=3, calls_per_step=1.0, time_us_per_step=1.0)

    table = (row("graph_0_cpp_fused_add_0"), row("graph_1_cpp_fused_add_3"), row("aten::mm"))
    mode = OkMode(kernels=KernelCounts(per_step=3, steps=3, table=table))
    found = kernels_by_name(mode)
    assert {k: v.calls_per_step for k, v in found.items()} == {"aten::mm": 1, "cpp_fused_add": 2}


def test_a_fused_group_expected_and_missing_is_a_breach_a_new_one_is_reported():
    fused, apart = _run("gelu_mul_fused"), _run("gelu_mul_apart")
    check = check_budget(expectation_of(fused), apart, "b.json")
    (group,) = [b for b in check.breaches if b.kind == "fused group"]
    assert (group.mode, group.subject, group.expected, group.actual) == (
        "compile",
        "gelu + mul",
        1,
        0,
    )
    (row,) = [r for r in budget_view(check)["rows"] if r["what"].startswith("fused group")]
    assert row["what"] == "fused group gelu + mul (per step, fusion map)"
    assert (row["expected"], row["actual"], row["change"]) == (
        "1",
        "0",
        "no longer fused into one kernel",
    )
    reverse = check_budget(expectation_of(apart), fused, "b.json")
    assert not [b for b in reverse.breaches if b.kind == "fused group"]
    (gained,) = [g for m in reverse.modes for g in m.new_fused_groups]
    assert (gained.mode, gained.eager_ops, gained.expected, gained.actual) == (
        "compile",
        "gelu + mul",
        0,
        1,
    )


def _with_compile(budget, **changes):
    device = budget.devices["cpu"]
    modes = dict(device.modes)
    modes["compile"] = dataclasses.replace(modes["compile"], **changes)
    return dataclasses.replace(budget, devices={"cpu": dataclasses.replace(device, modes=modes)})


def test_tolerances_of_a_mode_override_the_files_key_by_key():
    budget = expectation_of(_run("relu_block"))
    loose = Tolerances(kernels_per_step=1, bytes_pct=15.0, kernel_names=3)
    check = check_budget(_with_compile(budget, tolerances=loose), _run("gelu_norm_block"), "b")
    outcomes = {m.mode: m.outcome for m in check.modes}
    assert outcomes == {"eager": "over budget", "compile": "within budget"}
    # only the bytes loosened: the count and the names still breach
    partial = _with_compile(budget, tolerances=Tolerances(bytes_pct=15.0))
    kinds = {b.kind for b in check_budget(partial, _run("gelu_norm_block"), "b").breaches}
    assert kinds == {"kernels per step", "bytes per step", "kernel"}  # eager's bytes still count
    (compile_check,) = [
        m for m in check_budget(partial, _run("gelu_norm_block"), "b").modes if m.mode == "compile"
    ]
    assert {b.kind for b in compile_check.breaches} == {"kernels per step", "kernel"}


def test_a_mode_expected_ok_that_failed_is_a_breach_and_the_reverse_is_reported():
    run = _run("relu_block")
    budget = expectation_of(run)
    failed = run.modes["compile"].recast(FailedMode, error="RuntimeError: broke")
    check = check_budget(budget, _with_mode(run, "compile", failed), "b")
    (breach,) = check.breaches
    assert (breach.kind, breach.expected, breach.actual, breach.error) == (
        "status",
        "ok",
        "failed",
        "RuntimeError: broke",
    )
    expects_failure = expectation_of(_with_mode(run, "compile", failed))
    assert "kernels" not in json.loads(dumps(expects_failure))["devices"]["cpu"]["modes"]["compile"]
    check = check_budget(expects_failure, run, "b")
    assert check.passed and "runs now" in check.modes[1].note


def test_a_device_kind_or_mode_the_file_lacks_is_reported_never_a_breach():
    run = _run("relu_block")
    budget = expectation_of(run)
    on_cuda = dataclasses.replace(budget, devices={"cuda": budget.devices["cpu"]})
    check = check_budget(on_cuda, run, "b.json")
    view = budget_view(check)
    assert check.passed and not check.device_in_file
    assert (view["outcome"], view["tone"]) == ("not checked", "neutral")
    assert view["notes"][0].startswith("the file has no cpu section")
    # a mode the file lacks, and one it holds that the run did not ask for
    device = budget.devices["cpu"]
    only_eager = dataclasses.replace(
        budget,
        devices={"cpu": dataclasses.replace(device, modes={"eager": device.modes["eager"]})},
    )
    check = check_budget(only_eager, run, "b")
    assert check.passed and [m.outcome for m in check.modes] == ["within budget", "not in file"]
    check = check_budget(budget, _with_mode(run, "compile", None), "b")
    assert check.passed and [m.outcome for m in check.modes] == ["within budget", "not run"]


def test_min_speedup_reads_the_paired_lower_bound_and_asks_for_timing():
    run = _run("gated-residual")
    budget = expectation_of(run)
    assert not needs_timing(budget, "cpu", ["eager", "compile"])
    lower = run.modes["compile"].speedup_vs_eager.ci95[0]
    met = _with_compile(budget, min_speedup=round(lower - 0.1, 2))
    assert check_budget(met, run, "b").passed
    assert needs_timing(met, "cpu", ["compile"]) and not needs_timing(met, "cpu", ["eager"])
    assert not needs_timing(met, "cuda", ["compile"])
    missed = _with_compile(budget, min_speedup=round(lower + 0.5, 2))
    (breach,) = check_budget(missed, run, "b").breaches
    assert (breach.kind, breach.actual) == ("speedup", lower)
    assert budget_view(check_budget(missed, run, "b"))["rows"][0]["actual"] == f"{lower:.2f}×"
    untimed = run.modes["compile"].without("speedup_vs_eager").adding(not_timed="asked not to")
    (breach,) = check_budget(missed, _with_mode(run, "compile", untimed), "b").breaches
    assert (breach.actual, breach.error) == ("not timed", "asked not to")


def test_refreshing_keeps_what_a_person_set():
    run = _run("relu_block")
    budget = expectation_of(run)
    edited = _with_compile(
        budget, min_speedup=1.2, tolerances=Tolerances(bytes_pct=5.0), note="Inductor on CPU"
    )
    device = edited.devices["cpu"]
    script = dataclasses.replace(device.modes["eager"], note="from an older run")
    edited = dataclasses.replace(
        edited,
        tolerances=Tolerances(kernels_per_step=2),
        note="owned by the block team",
        devices={
            "cuda": DeviceExpectation(device="NVIDIA H200", modes={"eager": script}),
            "cpu": dataclasses.replace(device, modes={**device.modes, "script": script}),
        },
    )
    text = dumps(edited)
    refreshed = expectation_of(_run("gelu_norm_block"), parse(text, "b"))
    compile_entry = refreshed.devices["cpu"].modes["compile"]
    assert (compile_entry.min_speedup, compile_entry.note) == (1.2, "Inductor on CPU")
    assert compile_entry.tolerances == Tolerances(bytes_pct=5.0)
    assert compile_entry.kernels_per_step == 4 and "cpp_fused_gelu" in compile_entry.kernels
    assert refreshed.tolerances == Tolerances(kernels_per_step=2)
    assert refreshed.note == "owned by the block team"
    assert list(refreshed.devices) == ["cpu", "cuda"]  # sorted; cuda kept as it was
    assert refreshed.devices["cuda"].device == "NVIDIA H200"
    assert list(refreshed.devices["cpu"].modes) == ["eager", "compile", "script"]
    assert refreshed.model == "gelu_norm_block:build"


# ---------------------------------------------------------------- reading the file


def _problem(text: str) -> str:
    with pytest.raises(ExpectationError) as caught:
        parse(text, "b.json")
    return str(caught.value)


def test_a_malformed_file_is_one_line_with_the_position():
    text = dumps(expectation_of(_run("relu_block")))
    broken = text.replace(
        '"kernels_per_step": 3,\n          "bytes', '"kernels_per_step": 3\n  "bytes', 1
    )
    assert _problem(broken) == "b.json:13:3: not valid JSON (Expecting ',' delimiter)"
    lines = text.splitlines()
    n = next(i for i, line in enumerate(lines) if '"kernels_per_step": 3' in line) + 1
    wrong = text.replace('"kernels_per_step": 3', '"kernels_per_step": "3"', 1)
    assert _problem(wrong) == (
        f'b.json:{n}: devices.cpu.modes.eager.kernels_per_step: expected an integer, found "3"'
    )
    misspelt = text.replace('"status": "ok",', '"status": "ok", "min_speedp": 1.2,', 1)
    assert _problem(misspelt).startswith(
        f"b.json:{n - 1}: devices.cpu.modes.eager.min_speedp: unknown field 'min_speedp' "
        "(known: status, "
    )
    missing = text.replace('"kernels_per_step": 3,\n', "", 1)
    assert _problem(missing).endswith(
        "devices.cpu.modes.eager.kernels_per_step: missing (expected an integer)"
    )
    assert _problem("[]") == (
        "b.json is not a profreport expectation (schema 'list', want 'profreport.expect/1')"
    )


def test_the_documented_example_is_a_valid_file():
    example = EXPECT_PAGE.read_text().split("```json\n", 1)[1].split("```", 1)[0]
    budget = parse(example, "docs/expect.md")
    assert budget.devices["cpu"].modes["compile"].min_speedup == 1.1


def test_a_mode_is_read_as_its_status_names_and_only_an_ok_one_must_have_its_counts():
    schema = json.loads((DATA.parents[2] / "docs" / "schemas" / "expect.schema.json").read_text())
    published = jsonschema.Draft202012Validator(schema)
    example = json.loads(EXPECT_PAGE.read_text().split("```json\n", 1)[1].split("```", 1)[0])
    modes = example["devices"]["cpu"]["modes"]
    modes |= {"eager": {"status": "failed", "note": "raises here"}, "script": {"status": "skipped"}}
    budget = parse(json.dumps(example, indent=2), "b.json")
    kinds = [type(m) for m in budget.devices["cpu"].modes.values()]
    assert kinds == [OkExpectation, FailedExpectation, SkippedExpectation]
    assert list(published.iter_errors(example)) == []
    for name in ("relu_block", "gelu_norm_block", "gelu_mul_fused", "gated-residual"):
        written = dumps(expectation_of(_run(name)))
        assert list(published.iter_errors(json.loads(written))) == [], name
        assert dumps(parse(written, "b.json")) == written
    del modes["compile"]["kernels_per_step"]
    text = json.dumps(example, indent=2)
    line = text.splitlines().index('        "compile": {') + 1
    assert _problem(text) == (
        f"b.json:{line}: devices.cpu.modes.compile.kernels_per_step: missing (expected an integer)"
    )
    assert [e.validator for e in published.iter_errors(example)] == ["oneOf"]


# ---------------------------------------------------------------- what the reviewer sees


def test_the_view_states_outcome_counts_and_one_row_per_breach():
    check = check_budget(expectation_of(_run("relu_block")), _run("gelu_norm_block"), "b.json")
    view = budget_view(check)
    assert (view["outcome"], view["tone"], check.passed) == ("OVER BUDGET", "bad", False)
    assert view["counts"] == ("0 modes within budget · 2 over · 4 new kernels · 2 gone kernels")
    lines = [row_line(r) for r in view["rows"]]
    assert len(lines) == len(check.breaches) == 10
    assert (
        "compile: kernel cpp_fused_native_layer_norm (calls / step, profiler): — → 1 "
        "(new; allowed exact), in norm"
    ) in lines
    assert (
        "compile: kernel cpp_fused_relu (calls / step, profiler): 1 → — (gone; allowed exact)"
        in lines
    )
    assert (
        "compile: bytes / step (modeled): 144.75 KiB → 161.25 KiB (+11.4%; allowed ±1%), in norm"
    ) in lines
    text = budget_text(view)
    assert text[0].startswith("kernel budget b.json (cpu): OVER BUDGET: ")
    assert text[-1] == (
        "  to accept an intended change, run the same command with --update-expect b.json "
        "and commit the file"
    )
    passed = budget_view(check_budget(expectation_of(_run("relu_block")), _run("relu_block"), "b"))
    assert (passed["outcome"], passed["rows"], passed["accept"]) == ("within budget", [], "")


def test_summary_and_report_open_with_the_check():
    head = _run("gelu_norm_block")
    check = check_budget(expectation_of(_run("relu_block")), head, "b.json")
    summary = markdown.render(head, budget=check)
    assert summary.startswith("**❌ Kernel budget: OVER BUDGET** (`b.json`, cpu): 0 modes")
    assert summary.index("cpp_fused_gelu") < summary.index("### profreport:")
    assert markdown.render(head).startswith("### profreport:")  # unchecked: as before
    page = html.render(head, budget=check)
    assert page.index('id="budget"') < page.index('id="headline"')
    assert "cpp_fused_native_layer_norm" in page and "OVER BUDGET" in page
    assert 'id="budget"' not in html.render(head)


def test_markdown_folds_breaches_beyond_the_first_rows():
    check = check_budget(expectation_of(_run("relu_block")), _run("gelu_norm_block"), "b")
    view = budget_view(check)
    view["rows"] = view["rows"] * 3  # 30 rows
    lines = budget_markdown(view)
    assert "<details><summary>15 more breaches</summary>" in lines


def test_a_cuda_record_is_budgeted_by_triton_names_without_counters():
    from tests.test_cuda_records import _run as cuda_run

    run = cuda_run("simple")
    budget = expectation_of(run)
    compile_entry = budget.devices["cuda"].modes["compile"]
    assert "triton_poi_fused_convolution_max_pool2d_with_indices_relu" in compile_entry.kernels
    assert not any(re.search(r"_\d+$", k) for k in compile_entry.kernels if "triton" in k)
    assert compile_entry.fused_groups["relu + max_pool2d_with_indices"].per_step == 1
    assert check_budget(parse(dumps(budget), "b"), run, "b").passed
    # the CPU run checked against a file that holds only CUDA: reported, not compared
    assert not check_budget(budget, _run("relu_block"), "b").device_in_file
    # another GPU of the same kind is compared, and said
    elsewhere = dataclasses.replace(run, device=dataclasses.replace(run.device, name="A100"))
    notes = budget_view(check_budget(budget, elsewhere, "b"))["notes"]
    assert notes == [
        "the file was written on NVIDIA H200, this run ran on A100: library kernels (cuBLAS, "
        "cuDNN, oneDNN) are chosen per device"
    ]
