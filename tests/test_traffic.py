"""The traffic change against eager, one source for the headline and the verdict
(analysis/traffic.py), on the runs recorded on an H200: where Nsight Compute's bytes and the
modeled ones disagree, both say the measured change, and the verdict says which figure differs
and why."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from profreport.analysis.derive import derived_run
from profreport.analysis.traffic import traffic_change
from profreport.modes import mode_analyses
from profreport.record import Run, parse
from profreport.render import markdown
from profreport.render.headline import headline

H200 = Path(__file__).parent / "data" / "runs" / "h200"
MiB = 2**20


def _document(label: str) -> dict[str, Any]:
    return dict(json.loads(gzip.decompress((H200 / label / "run.json.gz").read_bytes())))


def _run(label: str, edit: Any = None) -> Run:
    document = _document(label)
    if edit is not None:
        edit(document)
    return derived_run(parse(document, str(H200 / label)), mode_analyses())


def _change(run: Run, name: str) -> Any:
    l2 = run.ceilings.l2_bytes if run.ceilings is not None else None
    return traffic_change(name, run.ok_modes[name], run.ok_modes["eager"], l2)


def test_compile_on_the_h200_measures_less_where_the_model_says_more():
    """simple's compile: ncu -33% (eager's cuDNN transposes and bias add read 74 MiB beyond the
    per-op model; both modes' writes short of it by what stays in L2), modeled +10%."""
    run = _run("simple")
    change = _change(run, "compile")
    assert change.source == "measured"
    assert (change.eager_bytes, change.mode_bytes) == (302786048, 203202560)
    assert round(change.percent) == -33 and round(change.modeled_percent) == 10
    assert "the modeled figure leaves out work Nsight Compute saw" in change.differs
    assert "eager read 73.70 MiB more than modeled (aten::convolution's bytes cover" in (
        change.differs
    )
    assert "nchwToNhwcKernel x2" in change.differs
    assert "written less than modeled by eager 42.26 MiB, compile 88.27 MiB" in change.differs
    assert "compile read" not in change.differs  # compile's reads are the model's, within 5%


def test_the_headline_and_the_verdict_quote_the_same_source():
    for label in ("simple", "gated-residual", "decoder-lm"):
        run = _run(label)
        cells = {r["mode"]: r["bytes"] for r in headline(run)["rows"] if r["bytes"]}
        for name, mode in run.ok_modes.items():
            if name == "eager":
                continue
            cell, verdict = cells[name], str(mode.verdict)
            source = cell["detail"].split(",")[0].split(" ")[0]
            said = re.search(r"(measured|modeled) traffic ([+-]\d+%|unchanged)", verdict)
            assert said is not None, verdict
            assert said.group(1) == source, (label, name, cell, verdict)
            shown = "unchanged" if cell["text"] == "±0%" else cell["text"]
            assert said.group(2) == shown, (label, name, cell, verdict)


def test_the_report_says_which_figure_differs():
    run = _run("simple")
    md = markdown.render(run)
    assert (
        "| compile | ok | 6 → 5 (launches 6 → 5) | -33% measured (modeled +10%: see the verdict) |"
        in md
    )
    verdict = str(run.ok_modes["compile"].verdict)
    assert (
        "measured traffic -33% (Nsight Compute DRAM), modeled +10%: the modeled figure" in verdict
    )
    assert "modeled traffic +10%" not in verdict
    compile_cell = next(r["bytes"] for r in headline(run)["rows"] if r["mode"] == "compile")
    assert compile_cell["tone"] == "neutral"  # the sources point different ways: no colour


def test_agreeing_sources_give_the_measured_change_and_the_modeled_beside_it():
    run = _run("gated-residual")
    change = _change(run, "compile")
    assert change.differs == "" and round(change.percent) == -82
    assert "measured traffic -82% (Nsight Compute DRAM; modeled -82%)" in str(
        run.ok_modes["compile"].verdict
    )
    # optimize was recorded modeling 0 bytes: ncu's reads name the kernel the model left out
    assert "optimize read 512.01 MiB more than modeled (not modeled: fused_sigmoid" in (
        _change(run, "optimize").differs
    )


def test_without_measured_bytes_the_modeled_change_stands_alone():
    run = _run("decoder-lm")
    change = _change(run, "compile")
    assert change.source == "modeled" and change.modeled_percent is None
    assert "modeled traffic -30%" in str(run.ok_modes["compile"].verdict)


def test_writes_short_of_the_model_alone_blame_the_measured_figure():
    """compile's measured writes cut to a third, its reads as modeled: only the measured figure
    differs, and the sentence says so without blaming the model."""

    def short_writes(document: dict[str, Any]) -> None:
        for name in ("eager", "compile"):
            measured = document["modes"][name]["bytes"]["measured"]
            modeled = document["modes"][name]["bytes"]
            measured["read"] = modeled["read"]
            measured["written"] = modeled["written"] // (3 if name == "compile" else 1)
            measured["total"] = measured["read"] + measured["written"]

    change = _change(_run("simple", short_writes), "compile")
    assert change.differs.startswith("the measured figure misses writes still in L2")
    assert "modeled figure" not in change.differs


@pytest.mark.parametrize("label", ["simple", "gated-residual"])
def test_eager_states_its_measured_total_as_its_headline_does(label):
    run = _run(label)
    eager = next(r["bytes"] for r in headline(run)["rows"] if r["mode"] == "eager")
    assert eager["detail"].startswith("measured")
    assert f"{eager['text']} measured traffic (" in str(run.ok_modes["eager"].verdict)
