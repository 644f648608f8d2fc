"""Real architectures (transformers configs, random weights, nothing downloaded): trace and
optimize run models that return a ModelOutput and a DynamicCache, script failures name their
cause, and every mode that ran has its output checked against eager's."""

import warnings

import pytest
import torch

from profreport import api
from profreport.analysis.derive import derived_run
from profreport.modes import mode_analyses
from profreport.text import error_line

pytestmark = pytest.mark.slow  # transformers models built and profiled in every mode

transformers = pytest.importorskip("transformers")

DROPPED_CACHE = "dropped DynamicCache (not a tensor, and torch.utils._pytree cannot look inside it)"
TIMING = {"min_time_s": 0.02, "bootstrap_resamples": 100}


def _gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4)  # use_cache=True, the default
    torch.manual_seed(0)
    return transformers.GPT2Model(cfg), (torch.randint(0, cfg.vocab_size, (1, 32)),)


def _bert():
    cfg = transformers.BertConfig(
        num_hidden_layers=2, hidden_size=128, num_attention_heads=4, intermediate_size=256
    )
    torch.manual_seed(0)
    return transformers.BertModel(cfg), (torch.randint(0, cfg.vocab_size, (2, 32)),)


def _profile(build, modes=("eager", "script", "trace", "optimize")):
    model, inputs = build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings from transformers' masking code
        return api.profile(model, inputs, modes=modes, device="cpu", **TIMING).record


@pytest.fixture(scope="module")
def gpt2_record():
    return _profile(_gpt2)


@pytest.fixture(scope="module")
def bert_record():
    return _profile(_bert)


def _assert_checked_and_equal(entry, tensors):
    check = entry["output_check"]
    assert check["compared_tensors"] == tensors
    assert check["within_tolerance"] is True
    assert check["max_abs_err"] <= 1e-5 and check["note"] == ""


def test_gpt2_trace_and_optimize_flatten_the_model_output(gpt2_record):
    modes = gpt2_record["modes"]
    assert modes["eager"]["output_check"] is None
    for name in ("trace", "optimize"):
        assert modes[name]["status"] == "ok", modes[name].get("error")
        assert modes[name]["compiler"]["outputs"] == (
            "flattened ModelOutput (BaseModelOutputWithPastAndCrossAttentions) to a tuple of "
            f"1 tensor; {DROPPED_CACHE}"
        )
        _assert_checked_and_equal(modes[name], 1)


def test_gpt2_script_failure_names_the_cause(gpt2_record):
    script = gpt2_record["modes"]["script"]
    assert script["status"] == "failed"
    assert script["error"] == (
        "torch.jit.script cannot compile GPT2Model: TorchScript needs the Python source of "
        "GPT2Config.__init__, which inspect.getsource cannot find (attribute 'config' of "
        "GPT2Model holds a GPT2Config, which TorchScript compiles as a class)"
    )
    assert "Failed to get source for <function GPT2Config.__init__" in script["error_full"]
    (note,) = gpt2_record["modes"]["optimize"]["compiler"]["notes"]
    assert note == f"traced instead of scripted ({script['error']})"


def test_gpt2_optimize_verdict_says_what_changed_the_calls(gpt2_record):
    """GPT-2's Conv1D calls addmm; TorchScript runs it as mm + add: not freezing's doing."""
    verdict = derived_run(gpt2_record, mode_analyses()).to_json()["modes"]["optimize"]["verdict"]
    assert "TorchScript ran addmm x8 as mm + add (DecomposeOps)" in verdict  # 4 per block
    assert "folded away addmm" not in verdict and "folded away all" not in verdict


def test_bert_optimize_verdict_names_the_linear_rewrite(bert_record):
    """BERT's nn.Linear layers: optimize_for_inference's FrozenLinearTranspose makes each a matmul
    by a transposed weight + add (the graph says so: linear before, matmul after); DecomposeOps
    has nothing to do with it."""
    verdict = derived_run(bert_record, mode_analyses()).to_json()["modes"]["optimize"]["verdict"]
    compiler = bert_record["modes"]["optimize"]["compiler"]
    linears = compiler["op_counts_before"]["aten::linear"]
    assert compiler["op_counts"]["aten::matmul"] == linears
    assert f"rewrote linear x{linears} as matmul + add (FrozenLinearTranspose)" in verdict
    assert "DecomposeOps" not in verdict


def test_bert_trace_and_optimize_compare_both_outputs(bert_record):
    modes = bert_record["modes"]
    assert modes["script"]["status"] == "failed"
    assert modes["script"]["error"].startswith(
        "torch.jit.script cannot compile BertModel: TorchScript needs the Python source of "
        "BertConfig.__init__"
    )
    for name in ("trace", "optimize"):
        assert modes[name]["status"] == "ok", modes[name].get("error")
        assert modes[name]["compiler"]["outputs"] == (
            "flattened ModelOutput (BaseModelOutputWithPoolingAndCrossAttentions) to a tuple "
            "of 2 tensors"  # last_hidden_state, pooler_output; BERT returns no cache
        )
        _assert_checked_and_equal(modes[name], 2)


def test_strict_trace_errors_of_real_models_are_one_clean_line():
    model, inputs = _gpt2()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as info:
            torch.jit.trace(model.eval(), inputs)
    assert "last_hidden_state=tensor([[[" in str(info.value)  # the repr this line must not show
    line = error_line(info.value)
    assert "\n" not in line and "tensor([" not in line
    assert line.startswith(
        "RuntimeError: Tracer cannot infer type of BaseModelOutputWithPastAndCrossAttentions("
        "last_hidden_state=tensor(...), cache=DynamicCache("
    )
