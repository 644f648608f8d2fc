"""A mode is one object plus one registry entry: a toy mode defined here, outside the package, gets
a full run (kernels, bytes, fusion map, verdict), a report with a chart colour of its own (picked
from its name), CLI re-render, and its failure reset, without any name check in profreport
knowing it."""

import io
import json

import pytest
import torch
from torch import nn

import profreport
from profreport import cli, modes
from profreport.modes import Mode, PreparedMode
from profreport.record.model import CompilerEvidence, FusionMap
from profreport.render.palette import MODE_COLORS, mode_color
from profreport.runner import run_options


class Gate(nn.Module):
    def forward(self, x, g):
        return torch.sigmoid(g) * torch.tanh(x)


class ToyMode(Mode):
    """Runs the model through a Python closure; says what it 'fused' from the record's evidence."""

    name = "toy"

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.resets = 0

    def build(self, module, inputs, sync):
        if self.fail:
            raise RuntimeError("toy cannot build this model")

        def run(*args):
            return module(*args)

        run(*inputs)
        sync()
        # evidence only this mode records: kept beside the declared fields
        compiler = CompilerEvidence(extra={"wrapped": type(module).__name__})
        return PreparedMode(self.name, run, compiler=compiler)

    def fusion_map(self, mode, eager):
        ops = [c.op for c in eager.bytes.sequence]
        return FusionMap(source="toy: one group per eager op", extra={"ops_seen": ops})

    def fusion_evidence(self, mode, run):
        # evidence only this mode records is kept beside the declared fields
        return f"toy wrapped {mode.compiler.extra['wrapped']}"

    def reset_after_failure(self):
        self.resets += 1


@pytest.fixture
def toy(mode_registry):
    return modes.register(ToyMode(), summary="the model behind a closure (test only)")


def _profile(mode_names):
    inputs = (torch.randn(4, 64), torch.randn(4, 64))
    return profreport.profile(
        Gate(), inputs, modes=mode_names, device="cpu", min_time_s=0.02, bootstrap_resamples=100
    )


@pytest.mark.slow
def test_a_toy_mode_registered_from_a_test_gets_a_full_report(toy, tmp_path):
    assert "toy" in modes.mode_names()
    assert "toy" not in modes.default_modes()  # registered without default=True
    assert run_options(("eager", "toy")).modes == ("eager", "toy")

    res = _profile(("eager", "toy"))
    rec = res.record
    eager, entry = rec["modes"]["eager"], rec["modes"]["toy"]
    assert entry["status"] == "ok"
    assert entry["kernels"]["per_step"] == eager["kernels"]["per_step"] == 3
    # its bytes come from the dispatcher log (the default source): the same ops as eager
    assert entry["bytes"]["read"] == eager["bytes"]["read"] > 0
    assert entry["bytes"]["written"] == eager["bytes"]["written"] > 0
    assert entry["fusion"]["ops_seen"] == ["aten::sigmoid", "aten::tanh", "aten::mul"]
    assert entry["verdict"].startswith("toy: kernel count unchanged (3 per step)")
    assert "toy wrapped Gate" in entry["verdict"]
    assert all(r["bytes_read"] is not None for r in entry["kernels"]["table"])

    folder = res.save(tmp_path / "run")
    html = (folder / "report.html").read_text()
    assert "toy wrapped Gate" in html
    toy_color = mode_color("toy")  # a colour of its own, the same on every run
    assert toy_color not in MODE_COLORS.values() and toy_color in html.lower()
    assert "toy wrapped Gate" in (folder / "summary.md").read_text()
    assert json.loads((folder / "run.json").read_text())["modes"]["toy"]["status"] == "ok"

    out, err = io.StringIO(), io.StringIO()
    code = cli.main(
        ["render", str(folder / "run.json"), "--out", str(tmp_path / "again")], out, err
    )
    assert code == 0, err.getvalue()
    assert "toy wrapped Gate" in (tmp_path / "again" / "report.html").read_text()


@pytest.mark.slow
def test_a_failing_toy_mode_is_recorded_and_reset(mode_registry):
    mode = modes.register(ToyMode(fail=True))
    res = _profile(("eager", "toy"))
    entry = res.record["modes"]["toy"]
    assert entry["status"] == "failed"
    assert entry["error"] == "RuntimeError: toy cannot build this model"
    assert mode.resets == 1
    assert res.record["modes"]["eager"]["status"] == "ok"


@pytest.mark.parametrize("name", ["toy/v2", "toy,v2", " toy", ""])
def test_a_mode_name_that_cannot_be_a_folder_or_a_modes_item_is_refused(name):
    # a slash made the mode's trace folder two folders deep: its run failed with "expected one
    # trace in .../tensorboard/toy/v2, found 0"
    class Named(ToyMode):
        pass

    Named.name = name
    with pytest.raises(ValueError, match="without commas, slashes or outer spaces"):
        modes.register(Named())
    assert name not in modes.mode_names()


def test_an_unregistered_mode_is_refused_with_the_registry_names():
    with pytest.raises(ValueError, match=r"unknown mode.*toy.*choose from eager, script, trace"):
        run_options(("eager", "toy"))


class NeedsAccelerator(ToyMode):
    name = "toy"

    def unavailable_reason(self, device_type):
        return None if device_type == "cuda" else "needs a CUDA device"


@pytest.mark.slow
def test_a_mode_that_cannot_run_on_the_device_is_skipped_with_its_reason(mode_registry):
    mode = modes.register(NeedsAccelerator())
    res = _profile(("eager", "toy"))
    entry = res.record["modes"]["toy"]
    assert (entry["status"], entry["error"]) == ("skipped", "needs a CUDA device")
    assert entry["verdict"] == "toy: skipped - needs a CUDA device"
    assert mode.resets == 0
