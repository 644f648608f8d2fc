"""Attribution end to end: a generate of the held-out three-block model and of hf:gpt2, read
back from run.json, report.html and summary.md."""

import inspect
import json
from pathlib import Path

import pytest

from tests.conftest import generate_run
from tests.test_attribution import GATE_LINE, MODEL_FILE

pytestmark = pytest.mark.slow  # real generate runs with torch.compile


@pytest.fixture(scope="module")
def mixer_run(tmp_path_factory) -> Path:
    return generate_run(
        tmp_path_factory.mktemp("mixers"),
        "--model", f"{MODEL_FILE}:build", "--modes", "eager,compile,trace",
    )  # fmt: skip


def test_mixer_blocks_eager_table_compile_groups_and_report(mixer_run):
    record = json.loads((mixer_run / "run.json").read_text())
    gate = f"mixer_blocks.py:{GATE_LINE}"
    eager = record["modes"]["eager"]
    addmm = next(r for r in eager["kernels"]["table"] if r["name"] == "aten::addmm")
    assert "mixers.2.down" in addmm["modules"]
    assert f"mixer_blocks.py:{GATE_LINE + 1}" in addmm["source_lines"]
    compile_ = record["modes"]["compile"]
    fused = [g for g in compile_["fusion"]["groups"] if g["fused"]]
    block1 = [g for g in fused if g["modules"] == ["mixers.1"]]
    assert len(block1) == 1 and {"gelu", "sigmoid", "mul"} <= set(block1[0]["eager_ops"])
    assert block1[0]["source_lines"] == [gate]
    why = [w for w in compile_["why_not_fused"] if w["kind"] == "fused"]
    assert any(w["modules"] == ["mixers.1"] and w["source_lines"] == [gate] for w in why)
    # TorchScript: modules from the profiler's module hierarchy; no Python frames, no lines
    trace = record["modes"]["trace"]
    assert trace["bytes"]["attribution"].startswith("TorchScript module hierarchy")
    traced = next(r for r in trace["kernels"]["table"] if r["name"] == "aten::addmm")
    assert "mixers.2.down" in traced["modules"] and "source_lines" not in traced
    page = (mixer_run / "report.html").read_text()
    assert 'id="module-tree"' in page and "0–2 (×3, identical blocks" in page
    # the three blocks' fused groups are one fusion-map row (×3) naming each block
    assert f"mixers.0, mixers.1, mixers.2: gelu + sigmoid + mul at {gate}" in page
    summary = (mixer_run / "summary.md").read_text()
    assert "| mixers.1 | compile |" in summary and gate in summary


@pytest.mark.slow
def test_gpt2_block1_mlp_fusion_is_placed_in_h1_mlp_at_the_activation_call(gpt2_run):
    import transformers.models.gpt2.modeling_gpt2 as gpt2

    record = json.loads((gpt2_run / "run.json").read_text())
    source, first = inspect.getsourcelines(gpt2.GPT2MLP.forward)
    (offset,) = [i for i, text in enumerate(source) if "self.act(" in text]
    act_call = f"transformers/models/gpt2/modeling_gpt2.py:{first + offset}"
    groups = record["modes"]["compile"]["fusion"]["groups"]
    mlp = [
        g for g in groups
        if g["fused"] and g["modules"] and all(m.startswith("h.1.mlp") for m in g["modules"])
    ]  # fmt: skip
    assert mlp, [(g["eager_ops"], g.get("modules")) for g in groups if g["fused"]]
    assert any("tanh" in g["eager_ops"] and act_call in g["source_lines"] for g in mlp)
    eager = record["modes"]["eager"]
    tanh = next(r for r in eager["kernels"]["table"] if r["name"] == "aten::tanh")
    assert tanh["modules"] == ["h.0.mlp.act", "h.1.mlp.act"] and act_call in tanh["source_lines"]
    # traced through profreport's output-flattening wrapper: the same named_modules() paths
    traced = record["modes"]["trace"]["kernels"]["table"]
    assert next(r for r in traced if r["name"] == "aten::tanh")["modules"] == tanh["modules"]
