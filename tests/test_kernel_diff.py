"""The review diff (analysis/kernel_diff.py): pairing kernels by name, by the eager ops they
compute and by Inductor's generated name; fusion changes; the comparison's kernel section in
Markdown, HTML and JSON; `compare` of two different models; `analyze A B`.

The records under tests/data/kernel_diff are real `generate --modes eager,compile` runs on this
project's CPU machine of the models in tests/data/kernel_diff/models (see each file's docstring).
"""

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from profreport import record
from profreport.analysis.compare import DifferentModels, Thresholds, compare_runs
from profreport.analysis.derive import derived_run
from profreport.analysis.fusion_changes import fusion_changes
from profreport.analysis.kernel_diff import (
    STRATEGIES,
    KernelSide,
    ModeKernelDiff,
    diff_kernels,
    generated_stem,
    mode_kernel_diff,
    pair_kernels,
)
from profreport.cli import main
from profreport.modes import mode_analyses
from profreport.record.model import FusionGroup, FusionMap, Run
from profreport.render import compare as compare_render
from profreport.render.jinja import render_page
from profreport.render.kernel_diff import kernel_diff_markdown, mode_view
from profreport.render.registry import COMPARISON, get

DATA = Path(__file__).parent / "data" / "kernel_diff"


def _run(name: str) -> Run:
    return derived_run(record.load(DATA / name), mode_analyses())


def _side(name: str, calls: float = 1, time: float = 10.0, nbytes: int = 100, ops=()):
    return KernelSide(name, "kernel", calls, time, modeled_bytes=nbytes, eager_ops=tuple(ops))


# ---------------------------------------------------------------- pairing


def test_module_pairs_the_same_ops_reordered_in_one_place_never_other_ops():
    def side(name, ops, modules):
        return KernelSide(name, "kernel", 1, 10.0, 100, eager_ops=ops, modules=modules)

    base = [
        side("cpp_fused_add_native_layer_norm_0", ("add", "native_layer_norm"), ("h.1",)),
        side("cpp_fused_relu_1", ("relu",), ("h.1.mlp.act",)),
    ]
    head = [
        side("cpp_fused_native_layer_norm_add_4", ("native_layer_norm", "add"), ("h.1",)),
        side("cpp_fused_gelu_5", ("gelu",), ("h.1.mlp.act",)),
    ]
    pairs, only_base, only_head = pair_kernels(base, head)
    assert [(b.name, h.name, how) for b, h, how in pairs] == [
        ("cpp_fused_add_native_layer_norm_0", "cpp_fused_native_layer_norm_add_4", "module")
    ]
    assert [k.name for k in only_base] == ["cpp_fused_relu_1"]
    assert [k.name for k in only_head] == ["cpp_fused_gelu_5"]
    # the same kernels without module attribution pair by nothing
    bare = [KernelSide(k.name, k.kind, 1, 10.0, 100, eager_ops=k.eager_ops) for k in base]
    pairs, _, _ = pair_kernels(
        bare, [KernelSide(k.name, k.kind, 1, 10.0, 100, eager_ops=k.eager_ops) for k in head]
    )
    assert pairs == []


def test_diff_rows_name_where_the_kernel_ran():
    change = diff_kernels(
        [KernelSide("aten::relu", "cpu", 1, 5.0, 64, modules=("mixers.0.act", "mixers.1.act"))],
        [],
    )[0][0]
    view = mode_view(ModeKernelDiff("eager", (change,), 0))
    assert view["top"][0]["eager_ops"] == "mixers.0.act, mixers.1.act"


def test_generated_stem_strips_graph_prefix_and_counter_only_from_inductor_names():
    assert generated_stem("triton_poi_fused_add_gelu_0") == "triton_poi_fused_add_gelu"
    assert generated_stem("graph_1_cpp_fused_mul_12") == "cpp_fused_mul"
    assert generated_stem("aten::add_") is None
    assert generated_stem("volta_sgemm_128x64_nn") is None


def test_strategies_pair_by_name_then_eager_ops_then_generated_name():
    base = [
        _side("aten::addmm", calls=2),
        _side("triton_poi_fused_gelu_0", ops=["gelu"]),
        _side("triton_poi_fused_mul_3"),  # no fusion map entry: only its name can pair it
        _side("aten::relu"),
    ]
    head = [
        _side("triton_poi_fused_mul_0"),
        _side("aten::addmm", calls=2),
        _side("triton_poi_fused_gelu_1", ops=["gelu"]),
        _side("aten::native_layer_norm"),
    ]
    pairs, only_base, only_head = pair_kernels(base, head)
    assert [(b.name, h.name, how) for b, h, how in pairs] == [
        ("aten::addmm", "aten::addmm", "name"),
        ("triton_poi_fused_gelu_0", "triton_poi_fused_gelu_1", "eager ops"),
        ("triton_poi_fused_mul_3", "triton_poi_fused_mul_0", "generated name"),
    ]
    assert [k.name for k in only_base] == ["aten::relu"]
    assert [k.name for k in only_head] == ["aten::native_layer_norm"]
    # by name alone, the renamed kernels would be two that vanished and two that appeared
    _, only_base, only_head = pair_kernels(base, head, STRATEGIES[:1])
    assert len(only_base) == len(only_head) == 3


def test_rows_carry_per_step_changes_and_structural_rows_come_first():
    base = [_side("a", calls=1, time=500.0, nbytes=100), _side("b", time=5.0), _side("same")]
    head = [_side("a", calls=1, time=900.0, nbytes=100), _side("b", calls=2, time=6.0)]
    head.append(_side("same"))
    head.append(_side("new", calls=3, time=0.5, nbytes=64))
    rows, paired = diff_kernels(base, head)
    assert paired == 3
    assert [(r.name, r.status) for r in rows] == [
        ("b", "changed"),  # Δ time 1 µs, but its calls per step changed
        ("new", "appeared"),
        ("a", "time only"),  # Δ time 400 µs, same work: after every structural row
    ]  # "same" (identical numbers) is paired but no row
    b, new, a = rows
    assert (b.calls_change, b.time_us_change, b.bytes_change) == (1, 1.0, 0)
    assert (new.calls_change, new.bytes_change, new.matched_by) == (3, 64, None)
    assert a.time_us_change == 400.0 and a.bytes_source == "modeled"


def test_bytes_change_is_measured_only_where_both_sides_were_measured():
    base = [KernelSide("k", "kernel", 1, 1.0, modeled_bytes=100, measured_bytes=150)]
    head = [KernelSide("k", "kernel", 1, 1.0, modeled_bytes=100, measured_bytes=90)]
    (row,), _ = diff_kernels(base, head)
    assert (row.bytes_change, row.bytes_source) == (-60, "measured (Nsight Compute DRAM)")
    unmeasured = [KernelSide("k", "kernel", 1, 1.0, modeled_bytes=200)]
    (row,), _ = diff_kernels(base, unmeasured)
    assert (row.bytes_change, row.bytes_source) == (100, "modeled")


# ---------------------------------------------------------------- fusion changes


def _map(*groups: tuple[tuple[str, ...], tuple[str, ...], int | None]) -> FusionMap:
    return FusionMap(
        groups=tuple(FusionGroup(eager_ops=o, kernels=k, kernel_bytes=b) for o, k, b in groups)
    )


def test_fusion_changes_name_fused_new_gone_and_repeated_groups():
    base = _map(
        (("gelu",), ("k_gelu_0",), 4096),
        (("mul",), ("k_mul_1",), 4096),
        (("relu",), ("k_relu_2",), 2048),
        (("add", "tanh"), ("k_add_tanh_3",), 1000),
    )
    head = _map(
        (("gelu", "mul"), ("k_gelu_mul_0",), 4096),
        (("native_layer_norm",), ("k_ln_1",), 65536),
        (("add", "tanh"), ("k_add_tanh_2",), 1000),
        (("add", "tanh"), ("k_add_tanh_2",), 1000),
    )
    changes = {c.kind: c for c in fusion_changes(base, head)}
    assert set(changes) == {"fused", "new", "gone", "more calls"}
    fused = changes["fused"]
    assert fused.eager_ops == ("gelu", "mul")
    assert fused.base_kernels == ("k_gelu_0", "k_mul_1") and fused.head_kernels == ("k_gelu_mul_0",)
    assert (fused.calls_per_step_change, fused.bytes_change) == (-1, -4096)
    assert fused.summary.startswith("head fuses gelu + mul in one kernel (k_gelu_mul_0) that base")
    assert changes["new"].summary == (
        "head's native_layer_norm is a new kernel (k_ln_1; +1 per step, +64.00 KiB modeled)"
    )
    assert (changes["gone"].eager_ops, changes["gone"].bytes_change) == (("relu",), -2048)
    assert (changes["more calls"].calls_per_step_change, changes["more calls"].bytes_change) == (
        1,
        1000,
    )
    # the reverse direction: what head fused, base now runs apart
    split = {c.kind: c for c in fusion_changes(head, base)}["split"]
    assert split.head_kernels == ("k_gelu_0", "k_mul_1") and split.bytes_change == 4096


def test_a_fusion_is_found_when_the_fused_op_still_runs_alone_elsewhere():
    base = _map((("gelu",), ("k_g",), 10), (("mul",), ("k_m",), 10), (("mul",), ("k_m",), 10))
    head = _map((("gelu", "mul"), ("k_gm",), 10), (("mul",), ("k_m2",), 10))
    (change,) = fusion_changes(base, head)
    assert (change.kind, change.base_kernels, change.bytes_change) == ("fused", ("k_g", "k_m"), -10)


def test_identical_fusion_maps_have_no_changes():
    fusion = _map((("gelu", "mul"), ("k0",), 10))
    assert fusion_changes(fusion, fusion) == ()


# ---------------------------------------------------------------- recorded Inductor runs


def test_recorded_inductor_kernels_renamed_between_builds_pair_by_eager_ops():
    """norm_gelu_block runs the same ops as gelu_norm_block in another order: Inductor numbered
    its kernels the other way round (cpp_fused_gelu_0 vs _1)."""
    base, head = _run("gelu_norm_block"), _run("norm_gelu_block")
    diff = mode_kernel_diff("compile", base.mode("compile"), head.mode("compile"))
    assert diff.of_status("appeared") == diff.of_status("disappeared") == ()
    renamed = {
        (r.base.name, r.head.name): r.matched_by
        for r in diff.rows
        if r.base is not None and r.head is not None and r.base.name != r.head.name
    }
    assert renamed == {
        ("graph_0_cpp_fused_gelu_0", "graph_0_cpp_fused_gelu_1"): "eager ops",
        ("graph_0_cpp_fused_native_layer_norm_1", "graph_0_cpp_fused_native_layer_norm_0"): (
            "eager ops"
        ),
    }
    assert diff.fusion_changes == ()  # the same groups, only renamed


def test_compare_of_two_models_names_what_appeared_and_disappeared():
    base, head = _run("relu_block"), _run("gelu_norm_block")
    with pytest.raises(DifferentModels, match="different models: base 'relu_block:build'"):
        compare_runs(base, head)
    cmp = compare_runs(base, head, allow_different_models=True)
    assert cmp.model == "relu_block:build vs gelu_norm_block:build"
    assert cmp.model_differences[0] == "name: base 'relu_block:build', head 'gelu_norm_block:build'"
    assert "parameters: base 16,576, head 16,704 (+128)" in cmp.model_differences
    eager = cmp.modes[0].kernel_diff
    assert eager is not None
    appeared = {r.name: r for r in eager.of_status("appeared")}
    assert set(appeared) == {"aten::gelu", "aten::native_layer_norm"}
    assert appeared["aten::gelu"].calls_change == 1
    assert appeared["aten::gelu"].bytes_change == 32 * 1024  # 32 x 128 floats, read + written
    ((relu),) = eager.of_status("disappeared")
    assert (relu.name, relu.calls_change, relu.bytes_change) == ("aten::relu", -1, -32768)
    compile_ = cmp.modes[1].kernel_diff
    assert compile_ is not None
    kinds = sorted((c.kind, c.eager_ops) for c in compile_.fusion_changes)
    assert kinds == [("gone", ("relu",)), ("new", ("gelu",)), ("new", ("native_layer_norm",))]


def test_recorded_fusion_of_gelu_and_mul_is_named():
    """Base has a graph break between gelu and mul (two graphs, two kernels); head fuses them."""
    cmp = compare_runs(_run("gelu_mul_apart"), _run("gelu_mul_fused"), allow_different_models=True)
    diff = cmp.modes[1].kernel_diff
    assert diff is not None and diff.mode == "compile"
    (change,) = diff.fusion_changes
    assert change.kind == "fused" and change.eager_ops == ("gelu", "mul")
    assert change.base_kernels == ("graph_0_cpp_fused_gelu_0", "graph_1_cpp_fused_mul_0")
    assert change.head_kernels == ("graph_0_cpp_fused_gelu_mul_0",)
    assert change.bytes_change == -128 * 1024  # the intermediate written once and read once


def test_new_kernel_gate_fails_on_a_matching_kernel_only():
    base, head = _run("relu_block"), _run("gelu_norm_block")
    cmp = compare_runs(
        base, head, Thresholds(new_kernel_pattern="layer_norm"), allow_different_models=True
    )
    assert [(r.mode, r.metric) for r in cmp.regressions] == [
        ("eager", "new_kernel"),
        ("compile", "new_kernel"),
    ]
    assert "new kernel aten::native_layer_norm (+1 per step)" in cmp.regressions[0].message
    clean = compare_runs(
        base, head, Thresholds(new_kernel_pattern="conv"), allow_different_models=True
    )
    assert not clean.regressed


# ---------------------------------------------------------------- rendering


def test_view_model_markdown_folds_rows_beyond_the_top():
    cmp = compare_runs(_run("relu_block"), _run("gelu_norm_block"), allow_different_models=True)
    diff = cmp.modes[0].kernel_diff
    assert diff is not None
    view = mode_view(diff, top=2)
    assert [r["kernel"] for r in view["top"]] == [r.name for r in diff.rows[:2]]
    gelu = next(r for r in view["top"] + view["rest"] if r["kernel"] == "aten::gelu")
    assert (gelu["status"], gelu["calls"], gelu["bytes"]) == (
        "appeared",
        "1 (new)",
        "32.00 KiB (new)",
    )
    assert view["bytes_header"] == "bytes / step (modeled)"
    assert view["rest_label"] == f"{len(diff.rows) - 2} more kernels"
    md = "\n".join(kernel_diff_markdown([view]))
    assert md.count("<details>") == 1 and "| aten::relu | disappeared | — | 1 (gone) |" in md
    assert not view["show_eager_ops"] and "| eager ops |" not in md  # eager: no fusion map
    assert md.index("<details>") > md.index(view["top"][1]["kernel"])


def test_renamed_pair_shows_both_names():
    cmp = compare_runs(
        _run("gelu_norm_block"), _run("norm_gelu_block"), allow_different_models=True
    )
    view = mode_view(cmp.modes[1].kernel_diff)
    kernels = {r["kernel"]: r["matched_by"] for r in view["top"]}
    assert view["show_eager_ops"]
    assert kernels["graph_0_cpp_fused_gelu_1 (base: graph_0_cpp_fused_gelu_0)"] == "eager ops"


def test_comparison_documents_carry_the_kernel_diff():
    cmp = compare_runs(_run("gelu_mul_apart"), _run("gelu_mul_fused"), allow_different_models=True)
    md = compare_render.render_markdown(cmp)
    assert "What differs between the models:" in md and "#### Kernel by kernel" in md
    assert "head fuses gelu + mul in one kernel (graph_0_cpp_fused_gelu_mul_0)" in md
    html = compare_render.render_html(cmp)
    assert 'id="kernel-diff-compile"' in html and "head fuses gelu + mul" in html
    assert 'id="model-differences"' in html
    doc = json.loads(get(COMPARISON, "json").text(cmp))
    kd = doc["modes"][1]["kernel_diff"]
    assert kd["fusion_changes"][0]["kind"] == "fused"
    assert {r["status"] for r in kd["rows"]} == {"appeared", "disappeared"}
    assert doc["model_differences"][0].startswith("name: base 'gelu_mul_apart:build'")


def test_hostile_kernel_names_render_as_text():
    hostile = "<script>alert(1)</script>|`x`"
    rows, paired = diff_kernels([], [_side(hostile)])
    diff = ModeKernelDiff("compile", rows, paired)
    md = "\n".join(kernel_diff_markdown([mode_view(diff)]))
    assert "<script>" not in md and "\\|" in md
    html = render_page("_kernel_diff.html.j2", v=mode_view(diff))
    assert "<script>" not in html and "&lt;script&gt;" in html


# ---------------------------------------------------------------- CLI


def test_compare_cli_refuses_two_models_unless_asked(tmp_path):
    out_file = tmp_path / "cmp.md"
    base, head = str(DATA / "relu_block"), str(DATA / "gelu_norm_block")
    out, err = io.StringIO(), io.StringIO()
    rc = main(["compare", base, head, "--out", str(out_file)], out=out, err=err)
    assert rc == 2 and not out_file.exists()
    (line,) = err.getvalue().strip().splitlines()
    assert "different models" in line and "--allow-different-models" in line
    rc = main(
        ["compare", base, head, "--allow-different-models", "--out", str(out_file)],
        out=out,
        err=io.StringIO(),
    )
    assert rc == 0 and "| aten::native_layer_norm | appeared |" in out_file.read_text()
    err = io.StringIO()
    args = ["compare", base, head, "--allow-different-models", "--fail-on-new-kernel", "gelu"]
    assert main(args, out=io.StringIO(), err=err) == 1
    assert "new kernel aten::gelu" in err.getvalue()
    err = io.StringIO()
    rc = main(["compare", base, head, "--fail-on-new-kernel", "("], out=io.StringIO(), err=err)
    assert rc == 2 and "not a regular expression: '('" in err.getvalue()


def test_compare_cli_subprocess_two_models():
    base, head = str(DATA / "gelu_mul_apart"), str(DATA / "gelu_mul_fused")
    done = subprocess.run(
        [sys.executable, "-m", "profreport", "compare", base, head, "--allow-different-models"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "head fuses gelu + mul" in done.stdout


def test_analyze_two_traces_pairs_renamed_inductor_kernels():
    traces = DATA / "traces"
    out = io.StringIO()
    args = [
        "analyze",
        str(traces / "gelu_norm_block.compile.pt.trace.json.gz"),
        str(traces / "norm_gelu_block.compile.pt.trace.json.gz"),
        "--format",
        "json",
    ]
    assert main(args, out=out, err=io.StringIO()) == 0
    (cmp,) = json.loads(out.getvalue())["comparison"]
    renamed = {
        k["base"]["name"]: (k["head"]["name"], k["matched_by"], k["status"])
        for k in cmp["kernels"]
        if k["base"] and k["head"] and k["base"]["name"] != k["head"]["name"]
    }
    assert renamed == {
        "graph_0_cpp_fused_gelu_0": ("graph_0_cpp_fused_gelu_1", "generated name", "time only"),
        "graph_0_cpp_fused_native_layer_norm_1": (
            "graph_0_cpp_fused_native_layer_norm_0",
            "generated name",
            "time only",
        ),
    }


@pytest.mark.slow
def test_ab_of_two_different_files_names_the_kernels_that_changed(tmp_path):
    """The issue's check: base uses ReLU, head GELU and a LayerNorm, in two different files."""
    models = DATA / "models"
    out, err = io.StringIO(), io.StringIO()
    args = [
        "ab",
        f"{models / 'relu_block.py'}:build",
        f"{models / 'gelu_norm_block.py'}:build",
        "--modes",
        "eager,compile",
        "--device",
        "cpu",
        "--min-time",
        "0.05",
        "--max-time",
        "20",
        "--quiet",
        "--out",
        str(tmp_path),
    ]
    assert main(args, out=out, err=err) == 0, err.getvalue()
    (folder,) = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert folder.name.startswith("relu_block-build-vs-gelu_norm_block-build-ab-cpu-")
    md = (folder / "compare.md").read_text()
    assert "- name: base 'relu_block:build', head 'gelu_norm_block:build'" in md
    assert "- parameters: base 16,576, head 16,704 (+128)" in md
    section = md[md.index("#### Kernel by kernel") :]
    eager, compiled = section.split("**compile**")
    # eager: no eager-ops column; where the kernel ran when the runs recorded it
    row = r"\| {} \| {} \| — \|(?: [^|]* \|)? 1 \({}\) \|"
    assert re.search(row.format("aten::relu", "disappeared", "gone"), eager)
    assert re.search(row.format("aten::gelu", "appeared", "new"), eager)
    assert re.search(row.format("aten::native_layer_norm", "appeared", "new"), eager)
    assert "32.00 KiB (new) |" in eager and "32.00 KiB (gone) |" in eager
    # compile: Inductor's kernels, with the eager ops each computes and the fusion changes
    assert re.search(r"\| (?:[^|]*: )?relu \| 1 \(gone\) \|", compiled)
    assert re.search(r"\| (?:[^|]*: )?gelu \| 1 \(new\) \|", compiled)
    assert re.search(r"\| (?:[^|]*: )?native_layer_norm \| 1 \(new\) \|", compiled)
    assert "head's native_layer_norm is a new kernel (" in compiled
    # Inductor numbers graphs per process: graph_0_ when this test runs first
    assert re.search(
        r"kernel \(graph_\d+_cpp_fused_relu_\d+\) is gone in head \(−1 per step", compiled
    )


def test_analyze_markdown_says_how_renamed_kernels_were_paired():
    traces = DATA / "traces"
    out = io.StringIO()
    args = [
        "analyze",
        str(traces / "gelu_norm_block.compile.pt.trace.json.gz"),
        str(traces / "norm_gelu_block.compile.pt.trace.json.gz"),
    ]
    assert main(args, out=out, err=io.StringIO()) == 0
    md = out.getvalue()
    # the same row and wording as compare's: head's name, base's in brackets, and how they paired
    assert (
        "| graph_0_cpp_fused_gelu_1 (base: graph_0_cpp_fused_gelu_0) | time only | generated name |"
        in md
    )
    assert "3 paired (2 by generated name, 1 by name)" in md
