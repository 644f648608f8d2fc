"""Mode outputs: flattening for torch.jit.trace, toy models traced as before, and a mode whose
output is wrong is flagged in the record, the verdict and the reports."""

from collections import namedtuple

import pytest
import torch
from torch import nn

from profreport import api, modes
from profreport.modes import PreparedMode, prepare_mode
from profreport.modes.outputs import TensorOutputs, flatten_output
from profreport.render import html, markdown

Pair = namedtuple("Pair", "first second")


def test_flatten_output_keeps_tensors_in_pytree_order_and_names_what_it_dropped():
    a, b = torch.zeros(1), torch.ones(2)
    flat = flatten_output({"a": a, "b": [b, None, 3]})
    assert flat.tensors == (a, b)
    assert flat.dropped == ("None", "int")
    assert not flat.plain
    assert flat.describe() == (
        "flattened dict to a tuple of 2 tensors; dropped None, int (not tensors, and "
        "torch.utils._pytree cannot look inside them)"
    )
    assert flatten_output(Pair(b, a)).tensors == (b, a)
    assert flatten_output(Pair(b, a)).container == "namedtuple Pair"
    nested = flatten_output((a, (b, a)))
    assert nested.plain and nested.container == "tuple" and len(nested.tensors) == 3
    assert flatten_output(a).plain and flatten_output(a).describe() == (
        "flattened tensor to a tuple of 1 tensor"
    )
    assert not flatten_output([a]).plain  # strict tracing refuses lists


class TwoOutputs(nn.Module):
    def forward(self, x):
        return torch.relu(x), x + 1


class DictOutput(nn.Module):
    def forward(self, x, **options):  # **options: torch.jit.script refuses it, trace does not
        return {"relu": torch.relu(x), "scale": 2}


def _prepare(name, module, x):
    with torch.no_grad():
        return prepare_mode(name, module.eval(), (x,), lambda: None)


@pytest.mark.parametrize("mode", ["trace", "optimize"])
def test_a_model_returning_tensors_is_traced_as_it_is(mode):
    prepared = _prepare(mode, TwoOutputs(), torch.randn(3, 3))
    assert not prepared.compiler.has("outputs")
    assert prepared.fn.original_name == "TwoOutputs"  # not wrapped


@pytest.mark.parametrize("mode", ["trace", "optimize"])
def test_a_model_returning_a_dict_is_traced_through_the_wrapper(mode):
    x = torch.randn(3, 3)
    prepared = _prepare(mode, DictOutput(), x)
    assert prepared.compiler.outputs == (
        "flattened dict to a tuple of 1 tensor; dropped int (not a tensor, and "
        "torch.utils._pytree cannot look inside it)"
    )
    assert prepared.fn.original_name == TensorOutputs.__name__
    (out,) = prepared.fn(x)
    assert torch.equal(out, torch.relu(x))
    if mode == "optimize":  # script failed, and the trace it fell back to was flattened too
        (note,) = prepared.compiler.notes
        assert note.startswith("traced instead of scripted (torch.jit.script cannot compile ")


class Doubles(nn.Module):
    """Doubles its input: outputs exact in float32."""

    def forward(self, x):
        return x * 2


def _profile_with_trace_replaced(monkeypatch, fn_of_module):
    def fake_trace(module, inputs, sync):
        return PreparedMode("trace", fn_of_module(module))

    monkeypatch.setattr(modes.mode_for("trace"), "build", fake_trace)
    return api.profile(
        Doubles(),
        (torch.arange(16.0).reshape(4, 4),),
        modes=("eager", "trace"),
        device="cpu",
        min_time_s=0.02,
        bootstrap_resamples=100,
    )


@pytest.mark.slow
def test_a_mode_whose_output_is_wrong_is_flagged(monkeypatch):
    res = _profile_with_trace_replaced(monkeypatch, lambda m: lambda x: m(x) + 1.0)
    rec = res.record
    assert rec["modes"]["eager"]["output_check"] is None
    check = rec["modes"]["trace"]["output_check"]
    assert check == {
        "max_abs_err": 1.0,
        "max_rel_err": 1.0 / 30.0,  # eager's largest value is 2 x 15
        "atol": 1e-5,
        "rtol": 1e-4,
        "within_tolerance": False,
        "compared_tensors": 1,
        "note": "",
    }
    verdict = rec["modes"]["trace"]["verdict"]
    assert verdict.startswith(
        "trace: OUTPUT DIFFERS from eager (max abs err 1, max rel err 0.0333; tolerance rtol "
        "0.0001, atol 1e-05): a speedup that changes the result is not a speedup; "
    )
    md = markdown.render(res.run)
    assert "| DIFFERS: max abs err 1, rel 0.033 (rtol 0.0001, atol 1e-05; 1 tensor) |" in md
    page = html.render(res.run)
    assert "<b>DIFFERS: max abs err 1, rel 0.033" in page


@pytest.mark.slow
def test_a_mode_with_a_different_output_structure_is_flagged(monkeypatch):
    res = _profile_with_trace_replaced(monkeypatch, lambda m: lambda x: (m(x), m(x)))
    check = res.record["modes"]["trace"]["output_check"]
    assert check["within_tolerance"] is False
    assert check["note"] == "output structure differs: 2 tensor(s), eager has 1"
    assert check["max_abs_err"] == 0.0  # the pair that exists matches
    assert "OUTPUT DIFFERS from eager (max abs err 0, " in res.record["modes"]["trace"]["verdict"]


@pytest.mark.slow
def test_a_mode_that_matches_passes_and_the_report_says_so(monkeypatch):
    res = _profile_with_trace_replaced(monkeypatch, lambda m: m)
    check = res.record["modes"]["trace"]["output_check"]
    assert check["within_tolerance"] is True and check["max_abs_err"] == 0.0
    assert "OUTPUT DIFFERS" not in res.record["modes"]["trace"]["verdict"]
    assert "| ok: max abs err 0, rel 0 (rtol 0.0001, atol 1e-05; 1 tensor) |" in (
        markdown.render(res.run)
    )


def test_view_model_of_output_checks_and_of_an_old_record():
    from profreport.record import OkMode, Run
    from profreport.render.viewmodel import build_view, output_check_view

    differs = {
        "output_check": {
            "max_abs_err": 0.5,
            "max_rel_err": 0.125,
            "atol": 1e-5,
            "rtol": 1e-4,
            "within_tolerance": False,
            "compared_tensors": 2,
            "note": "tensor 1: dtype float64, eager's float32",
        }
    }
    assert output_check_view("compile", OkMode.from_json(differs)) == {
        "text": "DIFFERS: max abs err 0.5, rel 0.12 (rtol 0.0001, atol 1e-05; 2 tensors)",
        "differs": True,
        "note": "tensor 1: dtype float64, eager's float32",
    }
    assert (
        output_check_view("eager", OkMode.from_json({"output_check": None}))["text"] == "reference"
    )
    # a record from before
    assert output_check_view("trace", OkMode.from_json({}))["text"] == "not checked"

    repr_error = (
        "RuntimeError: Tracer cannot infer type of Out(x=tensor([[1.0, 2.0],\n [3.0, 4.0]]))"
    )
    record = {
        "model": {"name": "m"},
        "device": {"type": "cpu"},
        "env": {},
        "modes": {"trace": {"status": "failed", "error": repr_error, "verdict": "trace: failed"}},
    }
    view = build_view(Run.from_json(record))
    assert view["summary"][0]["error"] == (
        "RuntimeError: Tracer cannot infer type of Out(x=tensor(...))"
    )
    assert view["details"][0]["error"] == view["summary"][0]["error"]
