"""Long op lists folded and repeated rows counted (render/folding.py), and the report's fusion map
and why-not-fused rows built with them, on the recorded 2-layer Llama run."""

import gzip
import json
from pathlib import Path

import pytest

from profreport.analysis.derive import derived_run
from profreport.format import fmt_bytes
from profreport.modes import mode_analyses
from profreport.record import parse
from profreport.render.folding import fold_ops, grouped, without_serials
from profreport.render.viewmodel import build_view

LLAMA_RUN = Path(__file__).parent / "data" / "runs" / "hf-llama-2layers-cpu"


def test_fold_ops_keeps_six_names_and_counts_the_rest():
    ops = ["embedding", "pow", "mean", "add", "rsqrt", "mul", "mul", "add"]
    folded = fold_ops(ops)
    assert folded == {
        "short": "embedding + pow + mean + add + rsqrt + mul + … 2 more",
        "full": " + ".join(ops),
        "more": 2,
    }
    assert fold_ops(ops[:6]) == {
        "short": " + ".join(ops[:6]),
        "full": " + ".join(ops[:6]),
        "more": 0,
    }
    assert fold_ops([])["short"] == "-"
    assert fold_ops(["a", "b", "c"], " -> ", shown=2)["short"] == "a -> b -> … 1 more"


def test_serials_of_generated_kernels_are_dropped_and_nothing_else():
    assert without_serials("graph_0_cpp_fused_add_mul_7 after cpp_fused_add_3") == (
        "graph_0_cpp_fused_add_mul after cpp_fused_add"
    )
    assert without_serials("layers.1.mlp, x_1 at 42") == "layers.1.mlp, x at 42"


def test_grouped_keeps_first_seen_order():
    groups = grouped(["b", "a", "b", "c", "b"], key=lambda x: x)
    assert [(same[0], len(same)) for same in groups] == [("b", 3), ("a", 1), ("c", 1)]


@pytest.fixture(scope="module")
def llama():
    document = json.loads(gzip.decompress((LLAMA_RUN / "run.json.gz").read_bytes()))
    return derived_run(parse(document, str(LLAMA_RUN)), mode_analyses())


def test_fusion_map_shows_each_repeated_group_once_with_summed_bytes(llama):
    groups = llama.modes["compile"].fusion.groups
    rows = next(d for d in build_view(llama)["details"] if d["mode"] == "compile")["fusion"]
    assert sum(r["count"] for r in rows) == len(groups)
    assert len(rows) < len(groups)  # the two layers' identical groups collapse
    mm = [g for g in groups if g.eager_ops == ("mm",)]
    (mm_row,) = [r for r in rows if r["eager_ops"]["full"] == "mm"]
    assert mm_row["count"] == len(mm) > 1
    assert mm_row["eager_bytes"] == fmt_bytes(sum(g.eager_bytes for g in mm))


def test_why_not_fused_rows_are_distinct_and_count_their_repeats(llama):
    entries = llama.modes["compile"].why_not_fused
    rows = next(d for d in build_view(llama)["details"] if d["mode"] == "compile")["why"]
    assert sum(r["count"] for r in rows) == len(entries)
    # alike but for a kernel's serial number is alike: the same entry in each layer
    keys = [(r["kind"], r["ops"]["full"], without_serials(r["entry"].reason)) for r in rows]
    assert len(keys) == len(set(keys))
    assert any(r["count"] > 1 for r in rows)


def test_a_folded_row_names_every_module_it_stands_for():
    from profreport.record.model import FusionGroup, FusionMap, OkMode, WhyNotFused
    from profreport.render.viewmodel import _fusion_rows
    from profreport.render.why_view import why_rows

    def why(layer: int) -> WhyNotFused:
        return WhyNotFused(
            kind="split",
            ops=("add", "mm"),
            reason=f"mm is a library call (cpp_fused_add_{layer})",
            modules=(f"h.{layer}.mlp",),
            source_lines=("model.py:12",),
        )

    def group(layer: int) -> FusionGroup:
        return FusionGroup(
            eager_ops=("gelu", "mul"),
            kernels=(f"cpp_fused_gelu_mul_{layer}",),
            modules=(f"h.{layer}.mlp",),
            source_lines=("model.py:13",),
        )

    mode = OkMode(
        status="ok",
        why_not_fused=(why(0), why(1)),
        fusion=FusionMap(groups=(group(0), group(1))),
    )
    (row,) = why_rows(mode)
    assert row["count"] == 2 and row["place"] == "h.0.mlp, h.1.mlp at model.py:12"
    (fused,) = _fusion_rows(mode)
    assert fused["count"] == 2 and fused["place"] == "h.0.mlp, h.1.mlp: gelu + mul at model.py:13"
