"""Where in the model: module paths and source lines captured per op, and what the analyses and
renderers make of them (module tree, fused groups named by module, summary.md's top savings)."""

import importlib.util
from pathlib import Path

import pytest
import torch

from profreport.analysis.attribution import common_module, kernel_places
from profreport.analysis.bytes_model import calls_from_tensor_io
from profreport.analysis.kernel_definitions import BOOKKEEPING_OPS
from profreport.analysis.module_tree import module_tree, top_savings
from profreport.capture.opio import record_tensor_io
from profreport.capture.provenance import (
    CallSites,
    module_path,
    short_file,
    stack_trace_lines,
    user_lines,
)
from profreport.modes.bytes_sources import (
    EAGER_ATTRIBUTION,
    SCRIPT_ATTRIBUTION,
    SWITCHED_OFF,
    _attribution_root,
)
from profreport.record.model import (
    Bytes,
    FusionGroup,
    FusionMap,
    KernelCounts,
    KernelRow,
    OkMode,
    Run,
    TensorIO,
)
from profreport.render import html, markdown
from profreport.render.module_view import groups_place_text, module_tree_view

MODEL_FILE = Path(__file__).parent / "data" / "models" / "mixer_blocks.py"
GATE_LINE = next(
    i for i, text in enumerate(MODEL_FILE.read_text().splitlines(), 1) if "GATE_LINE" in text
)
TORCH_DIR = str(Path(torch.__file__).parent)


def _mixer_blocks():
    spec = importlib.util.spec_from_file_location("mixer_blocks_attribution", MODEL_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build()


# ---------------------------------------------------------------- capture


def test_eager_ops_carry_their_leaf_module_and_the_users_line():
    model, inputs = _mixer_blocks()
    with torch.no_grad():
        ops = record_tensor_io(model, inputs, lambda: None, root=model)
    calls = calls_from_tensor_io(ops, BOOKKEEPING_OPS)
    addmm = [c.module for c in calls if c.op == "aten::addmm"]
    assert addmm == [f"mixers.{i}.{side}" for i in range(3) for side in ("up", "down")]
    gelu = [c for c in calls if c.op == "aten::gelu"]
    assert [c.module for c in gelu] == ["mixers.0", "mixers.1", "mixers.2"]
    # all in one file: one line, the one that runs the op (nothing of pytest's or profreport's)
    assert {c.lines for c in gelu} == {(f"mixer_blocks.py:{GATE_LINE}",)}
    down_line = GATE_LINE + 1
    assert calls[-1].module == "mixers.2.down"
    assert calls[-1].lines == (f"mixer_blocks.py:{down_line}",)


def test_without_a_root_nothing_is_attributed():
    model, inputs = _mixer_blocks()
    with torch.no_grad():
        ops = record_tensor_io(model, inputs, lambda: None)
    assert ops and all(op.module is None and op.lines == () for op in ops)
    call = calls_from_tensor_io(ops, BOOKKEEPING_OPS)[0]
    assert not call.has("module") and "module" not in call.to_json()


def test_attribution_root_says_why_a_mode_has_none():
    model, _ = _mixer_blocks()
    assert _attribution_root(model, True) == (model, None, EAGER_ATTRIBUTION)
    assert _attribution_root(model, False) == (None, None, SWITCHED_OFF)
    scripted = torch.jit.script(model)
    assert _attribution_root(scripted, True) == (None, scripted, SCRIPT_ATTRIBUTION)


@pytest.mark.parametrize(
    ("dynamo", "named"),
    [
        ("L['self'].h[1].mlp", "h.1.mlp"),
        ("L['self'].mixers.1", "mixers.1"),
        ("L['self']._modules['h']._modules['1'].mlp", "h.1.mlp"),
        ("L['self']", ""),
        ("L['args'][0].layers[10].self_attn", "layers.10.self_attn"),
    ],
)
def test_dynamo_module_paths_read_as_named_modules(dynamo, named):
    assert module_path(dynamo) == named


def test_stack_trace_gives_the_innermost_line_and_its_caller_in_another_file():
    site = "/venv/lib/python3.11/site-packages"
    trace = (
        f'  File "{site}/transformers/models/gpt2/modeling_gpt2.py", line 300, in forward\n'
        "    feed_forward = self.mlp(hidden_states)\n"
        f'  File "{site}/transformers/models/gpt2/modeling_gpt2.py", line 251, in forward\n'
        "    hidden_states = self.act(hidden_states)\n"
        f'  File "{site}/transformers/activations.py", line 55, in forward\n'
        "    return 0.5 * input * (1.0 + torch.tanh(x))\n"
        f'  File "{TORCH_DIR}/nn/functional.py", line 10, in gelu\n'
    )
    assert stack_trace_lines(trace) == (
        "transformers/activations.py:55",
        "transformers/models/gpt2/modeling_gpt2.py:251",
    )
    assert stack_trace_lines(None) == ()


def test_user_lines_skip_torch_and_keep_one_file_once():
    frames = [(f"{TORCH_DIR}/nn/modules/module.py", 1), ("/home/u/model.py", 13)]
    frames += [("/home/u/model.py", 24), ("/home/u/run.py", 5)]
    assert user_lines(frames) == ("model.py:13", "run.py:5")
    assert short_file("/x/site-packages/transformers/activations.py") == (
        "transformers/activations.py"
    )


def test_call_sites_stop_where_profreport_called_the_model():
    # Called from this test file (not profreport, not torch): the walk keeps going up through
    # pytest's frames, which are user frames to it; inside a generate the model is called from
    # profreport, where the walk stops (test_eager_ops_carry_... checks that end).
    lines = CallSites().here()
    assert lines[0].startswith("test_attribution.py:")


# ---------------------------------------------------------------- analyses


def _group(ops, modules, lines, kernel="k0", saved=100, fused=True):
    return FusionGroup(
        eager_ops=tuple(ops),
        kernels=(kernel,),
        eager_bytes=saved + 10,
        kernel_bytes=10,
        saved_bytes=saved,
        fused=fused,
        modules=tuple(modules),
        source_lines=tuple(lines),
    )


def test_common_module_and_groups_place_text():
    assert common_module(["mixers.1.up", "mixers.1"]) == "mixers.1"
    assert common_module(["mixers.1", "mixers.2"]) == "mixers"
    assert common_module(["h.1.mlp.act", "h.10.mlp"]) == "h"
    assert common_module([]) == ""
    g = _group(["gelu", "sigmoid", "mul"], ["mixers.1"], ["blocks.py:13"])
    assert groups_place_text([g]) == "mixers.1: gelu + sigmoid + mul at blocks.py:13"
    assert groups_place_text([FusionGroup(eager_ops=("add",), kernels=("k",))]) == ""


def _eager_mode():
    seq = []
    for i in range(3):
        seq += [
            TensorIO("aten::addmm", 100, 20, None, "dispatcher", f"mixers.{i}.up", ("m.py:12",)),
            TensorIO("aten::gelu", 20, 20, None, "dispatcher", f"mixers.{i}", ("m.py:13",)),
            TensorIO("aten::addmm", 100, 20, None, "dispatcher", f"mixers.{i}.down", ("m.py:14",)),
        ]
    rows = (
        KernelRow(name="aten::addmm", kind="cpu", calls_per_step=6.0, time_us_per_step=60.0),
        KernelRow(name="aten::gelu", kind="cpu", calls_per_step=3.0, time_us_per_step=9.0),
    )
    rows = tuple(r.adding(bytes_op=r.name) for r in rows)
    return OkMode(
        kernels=KernelCounts(per_step=9, table=rows),
        bytes=Bytes(read=0, written=0, source="modeled", method="", sequence=tuple(seq)),
    )


def _compile_mode():
    groups = []
    for i in range(3):
        groups += [
            _group(["addmm"], [f"mixers.{i}.up"], ["m.py:12"], "library addmm", 0, False),
            _group(["gelu", "mul"], [f"mixers.{i}"], ["m.py:13"], "cpp_fused_gelu_0", 30 + i),
            _group(["addmm"], [f"mixers.{i}.down"], ["m.py:14"], "library addmm", 0, False),
        ]
    rows = (
        KernelRow(name="aten::addmm", kind="cpu", calls_per_step=6.0, time_us_per_step=30.0),
        KernelRow(name="cpp_fused_gelu_0", kind="cpu", calls_per_step=3.0, time_us_per_step=3.0),
    )
    rows = (rows[0].adding(bytes_op="aten::addmm"), rows[1])
    fusion = FusionMap(groups=tuple(groups), per_kernel={})
    return OkMode(
        kernels=KernelCounts(per_step=9, table=rows),
        bytes=Bytes(read=0, written=0, source="modeled", method=""),
    ).adding(fusion=fusion)


def test_kernel_rows_list_the_modules_and_lines_of_their_calls():
    eager = kernel_places(_eager_mode())
    assert eager[0].modules == tuple(f"mixers.{i}.{s}" for i in range(3) for s in ("up", "down"))
    assert eager[0].source_lines == ("m.py:12", "m.py:14")
    compiled = kernel_places(_compile_mode())
    assert compiled[1].modules == ("mixers.0", "mixers.1", "mixers.2")
    assert compiled[1].source_lines == ("m.py:13",)
    no_places = OkMode(
        kernels=KernelCounts(per_step=1, table=(KernelRow(name="aten::mul", kind="cpu"),)),
        bytes=Bytes(read=0, written=0, source="modeled", method=""),
    )
    assert kernel_places(no_places)[0].modules is None  # not recorded, never an empty guess


def _run():
    return Run(modes={"eager": _eager_mode(), "compile": _compile_mode()})


def _found(run):
    """`run` with its module tree findings (derived as analysis/derive does), for the views."""
    return run.adding(module_tree=module_tree(run), module_savings=top_savings(run))


def test_module_tree_folds_identical_blocks_and_sums_them():
    tree = module_tree(_run())
    assert tree is not None
    (mixers,) = tree.root.children
    (blocks,) = mixers.children  # three numbered blocks with equal calls and bytes: one row
    assert (blocks.name, blocks.last, blocks.repeats) == ("0", "2", 3)
    eager = blocks.modes["eager"]
    assert (eager.calls, eager.bytes) == (9, 3 * (120 + 40 + 120))
    # time: each call at its row's mean per call: addmm 60/6 = 10 us, gelu 9/3 = 3 us
    assert eager.time_us == pytest.approx(3 * (10 + 3 + 10))
    up = blocks.children[0]
    assert (up.name, up.modes["eager"].calls, up.modes["compile"].calls) == ("up", 3, 3)
    assert blocks.modes["compile"].time_us == pytest.approx(3 * (5 + 1 + 5))


def test_blocks_that_differ_stay_apart():
    run = _run()
    eager = run.modes["eager"]
    assert eager.bytes is not None
    seq = list(eager.bytes.sequence)
    seq[4] = TensorIO("aten::gelu", 99, 20, None, "dispatcher", "mixers.1", ("m.py:13",))
    changed = Run(
        modes={"eager": eager.adding(bytes=Bytes(read=0, written=0, sequence=tuple(seq)))}
    )
    tree = module_tree(changed)
    assert tree is not None
    assert [c.name for c in tree.root.children[0].children] == ["0", "1", "2"]


def test_top_savings_rank_modules_by_saved_bytes():
    saved = top_savings(_run())
    assert [(s.module, s.saved_bytes) for s in saved] == [
        ("mixers.2", 32),
        ("mixers.1", 31),
        ("mixers.0", 30),
    ]
    assert saved[0].source_lines == ("m.py:13",)


def test_no_module_tree_when_no_mode_recorded_modules():
    bare = OkMode(
        kernels=KernelCounts(per_step=1, table=()),
        bytes=Bytes(read=0, written=0, sequence=(TensorIO("aten::mul", 1, 1),)),
    )
    assert module_tree(Run(modes={"eager": bare})) is None


# ---------------------------------------------------------------- renderers


def test_module_tree_view_and_report_render():
    view = module_tree_view(_found(_run()))
    assert view is not None
    assert view["modes"] == ["eager", "compile"]
    root = view["root"]
    assert root["label"] == "(model)" and root["open"]
    block = root["children"][0]["children"][0]
    assert block["label"].startswith("0–2 (×3") and not block["open"]
    assert block["cells"][0] == {"mode": "eager", "calls": "9", "bytes": "840 B", "time": "69.0 µs"}
    page = html.render(_found(_run()))
    assert 'id="module-tree"' in page and "0–2 (×3" in page
    # the three blocks' identical groups are one fusion-map row that names each block
    assert "mixers.0, mixers.1, mixers.2: gelu + mul at m.py:13" in page


def test_summary_lists_the_modules_that_saved_most_inside_details():
    text = markdown.render(_found(_run()))
    start = text.index("<summary>Modules whose fused groups saved the most bytes")
    block = text[start : text.index("</details>", start)]
    assert "| mixers.2 | compile | 32 B | 1 | m.py:13 |" in block


def test_kernels_with_no_recorded_module_count_at_the_root_under_their_own_row():
    mode = _compile_mode()
    assert mode.fusion is not None
    mask = FusionGroup(eager_ops=(), kernels=("cpp_fused_mask_0",), kernel_bytes=8, fused=False)
    fusion = FusionMap(groups=(*mode.fusion.groups, mask), per_kernel={})
    tree = module_tree(Run(modes={"compile": mode.adding(fusion=fusion)}))
    assert tree is not None
    assert tree.root.modes["compile"].calls == 10  # nine placed kernel calls and the mask's
    unplaced = tree.root.children[-1]
    assert unplaced.name == "(no module recorded)" and unplaced.modes["compile"].bytes == 8


def test_torchscript_ops_take_their_module_from_the_profilers_hierarchy():
    model, inputs = _mixer_blocks()
    with torch.no_grad():
        traced = torch.jit.trace(model, inputs)
        ops = record_tensor_io(traced, inputs, lambda: None, script_root=traced)
    modules = [op.module for op in ops if op.op == "aten::addmm"]
    assert modules == [f"mixers.{i}.{side}" for i in range(3) for side in ("up", "down")]
    assert all(op.lines == () for op in ops)  # TorchScript runs no Python frames


@pytest.mark.parametrize(
    ("hierarchy", "path"),
    [
        ("TOP(MixerBlocks)::forward.1(Mixer)::forward.down(Linear)::forward.", "mixers.1.down"),
        ("TOP(MixerBlocks)::forward.1(Mixer)::forward.", "mixers.1"),
        ("TOP(MixerBlocks)::forward.", ""),
        ("TOP(MixerBlocks)::forward.1(Linear)::forward.", None),  # the type does not match
        ("", None),  # not run by the TorchScript interpreter
    ],
)
def test_module_hierarchies_resolve_through_module_lists(hierarchy, path):
    from profreport.capture.script_modules import ModuleResolver

    model, _ = _mixer_blocks()
    assert ModuleResolver(model).path(hierarchy) == path


def test_kernel_csv_has_the_rows_places_one_cell_each():
    from profreport.render.tables import kernel_csv

    eager = _eager_mode()
    assert eager.kernels is not None
    placed = eager.adding(kernels=eager.kernels.adding(table=kernel_places(eager)))
    lines = kernel_csv(Run(modes={"eager": placed}), "eager").splitlines()
    assert lines[0].endswith(",modules,source_lines")
    assert lines[2].endswith(",mixers.0 mixers.1 mixers.2,m.py:13")


def test_source_lines_stop_where_profreport_calls_the_model():
    """A built-in model's ops are at its lines in profreport/models.py; the frames that called
    profreport (this test, pytest) are never the model's."""
    import torch

    from profreport.capture.opio import record_tensor_io
    from profreport.models import load_model

    model = load_model("gated-residual", torch.device("cpu"), torch.float32, 1, False)
    ops = record_tensor_io(model.module, model.example_inputs, lambda: None, root=model.module)
    lines = {line for op in ops for line in op.lines}
    assert lines and all(line.startswith("models.py:") for line in lines), lines
