"""Why it did not fuse, on real compiler output: each test runs the real modes on small inputs and
checks the finding against what Dynamo, Inductor or TorchScript produced (the graph-break log, the
fusion map of Inductor's scheduler nodes, the fuser state of this build), never a written string."""

import copy
import inspect

import pytest
import torch
from torch import nn

import profreport
from profreport.analysis.derive import derived_run
from profreport.format import md_code
from profreport.modes import mode_analyses
from profreport.modes.compile_logs import capturing_compiler_logs
from profreport.record import validate
from profreport.render import html, markdown

pytestmark = pytest.mark.slow  # real runs (profile) of small models, torch.compile included


def _profile(model, inputs, modes):
    torch.manual_seed(0)
    return profreport.profile(
        model.eval(),
        inputs,
        modes=modes,
        device="cpu",
        min_time_s=0.01,
        max_time_s=0.2,
        bootstrap_resamples=20,
    ).record


def _why(record, mode):
    """The mode's why-not-fused entries as run.json keeps them."""
    return [
        e.to_json() for e in derived_run(record, mode_analyses()).modes[mode].why_not_fused or ()
    ]


class Branchy(nn.Module):
    """A data-dependent branch: `.item()` breaks Dynamo's graph."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = self.fc(x)
        if h.sum().item() > 0:  # the graph break
            h = h * 2
        return torch.relu(h)


def _branch_line():
    lines, start = inspect.getsourcelines(Branchy.forward)
    return start + next(i for i, ln in enumerate(lines) if ".item()" in ln)


@pytest.fixture(scope="module")
def branchy():
    return _profile(Branchy(), (torch.randn(4, 16),), ("eager", "compile"))


def test_graph_break_has_dynamo_reason_user_line_and_source(branchy):
    evidence = branchy["modes"]["compile"]["compiler"]["graph_break_records"]
    assert len(evidence) == 1
    assert evidence[0]["file"] == __file__
    assert evidence[0]["line"] == _branch_line()
    assert evidence[0]["source"] == "if h.sum().item() > 0:  # the graph break"
    assert "Tensor.item()" in evidence[0]["reason"]
    assert "User code traceback" not in evidence[0]["log"]  # the reason block only

    breaks = [e for e in _why(branchy, "compile") if e["kind"] == "graph_break"]
    assert len(breaks) == 1
    assert breaks[0]["where"] == f"{__file__}:{_branch_line()}"
    assert breaks[0]["source"].startswith("Dynamo graph_breaks log")
    assert breaks[0]["hint_test"] == "--modes compile"
    # the ops on either side ran in different compiled graphs, and the finding says why
    across = [e for e in _why(branchy, "compile") if "different compiled graphs" in e["reason"]]
    assert across and across[0]["ops"][0] == "sum"
    verdict = derived_run(branchy, mode_analyses()).modes["compile"].verdict
    assert f"first at test_why_not_fused.py:{_branch_line()}" in verdict


def test_graph_break_shows_in_every_output_escaped(branchy):
    validate(derived_run(branchy, mode_analyses()).to_json())
    record = derived_run(branchy, mode_analyses())
    page = html.render(record)
    assert 'href="#why-compile"' in page and 'id="why-compile"' in page
    assert "if h.sum().item() &gt; 0:" in page  # autoescaped source text
    md = markdown.render(record)
    assert "<summary>Why it did not fuse (" in md  # folded: a reason list is detail
    assert f"test_why_not_fused.py:{_branch_line()}`" in md


@pytest.fixture(scope="module")
def simple():
    model = nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2))
    return _profile(model, (torch.randn(1, 32, 16, 16),), ("eager", "compile", "optimize"))


def test_simple_conv_relu_apart_and_relu_pool_fused(simple):
    why = _why(simple, "compile")
    split = [e for e in why if e["kind"] == "split"]
    assert [e["ops"] for e in split] == [["convolution", "relu"]]
    assert split[0]["source"] == "rule inductor-extern"
    assert "library convolution" in split[0]["evidence"]  # the extern scheduler node
    layout = [e for e in why if e["kind"] == "layout"]
    assert [e["ops"] for e in layout] == [["convolution"]]
    assert layout[0]["hint_test"] == "--channels-last"
    assert "cpp_fused" in layout[0]["evidence"]  # the generated kernel that converts
    fused = [e for e in why if e["kind"] == "fused"]
    assert [e["ops"] for e in fused] == [["relu", "max_pool2d_with_indices"]]
    assert "relu" in fused[0]["evidence"] and "max_pool2d" in fused[0]["evidence"]


def test_optimize_lists_what_applied_and_what_did_not(simple):
    why = _why(simple, "optimize")
    added = [e for e in why if e["kind"] == "applied" and "to_mkldnn" in e["reason"]]
    assert added, why
    missing = [e for e in why if e["kind"] == "not_applied"]
    assert missing and missing[0]["ops"] == ["convolution", "relu"]
    assert "no reason recorded" in missing[0]["reason"]


class MlpBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.fc1 = nn.LayerNorm(64), nn.Linear(64, 128)
        self.act, self.fc2 = nn.GELU(), nn.Linear(128, 64)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(self.norm(x))))


def test_mlp_block_every_split_is_at_a_gemm():
    record = _profile(MlpBlock(), (torch.randn(1, 8, 64),), ("eager", "compile"))
    split = [e for e in _why(record, "compile") if e["kind"] == "split"]
    assert [e["ops"] for e in split] == [
        ["native_layer_norm", "addmm"],
        ["addmm", "gelu"],
        ["gelu", "addmm"],
        ["addmm", "add"],
    ]
    assert {e["source"] for e in split} == {"rule inductor-extern"}
    assert all("library addmm" in e["evidence"] for e in split)
    assert not any(e["hint"] for e in split)  # no GEMM-epilogue hint on CPU
    # Inductor's own words: the norm and the residual add could not fuse across the GEMMs
    refused = [e for e in _why(record, "compile") if e["kind"] == "refused"]
    assert any(
        e["ops"] == ["native_layer_norm", "add"] and "intermediate nodes" in e["evidence"]
        for e in refused
    ), refused


class GatedResidual(nn.Module):
    def forward(self, x, gate):
        y = torch.sigmoid(gate) * torch.tanh(x)
        return x + y * 0.5 - torch.relu(y)


@pytest.mark.skipif(torch._C._jit_can_fuse_on_cpu(), reason="this build fuses on CPU")
def test_script_says_the_cpu_fuser_has_no_llvm():
    record = _profile(
        GatedResidual(), (torch.randn(1, 8, 64), torch.randn(1, 8, 64)), ("eager", "script")
    )
    why = _why(record, "script")
    assert [e["kind"] for e in why] == ["fuser_limit"]
    assert why[0]["source"] == "rule nnc-cpu-llvm"
    assert ("no LLVM" in why[0]["reason"]) == (not torch._C._llvm_enabled())
    assert set(why[0]["ops"]) == {"sigmoid", "tanh", "mul", "add", "sub", "relu"}


def test_scheduler_refusals_are_captured_from_inductor_log():
    def two_reductions(x):
        return x.sum(0).unsqueeze(1) + x.sum(1).unsqueeze(0)

    torch._dynamo.reset()
    # no FX-graph cache hit: a cached graph is not scheduled again, so nothing would be logged
    with torch._inductor.config.patch(fx_graph_cache=False), capturing_compiler_logs() as logs:
        torch.compile(two_reductions)(torch.randn(32, 32))
    torch._dynamo.reset()
    assert logs.fusion_refusals, "Inductor logged no refusal"
    first = logs.fusion_refusals[0]
    assert first.log.startswith(f"cannot fuse {first.first} with {first.second}: ")


def test_graph_break_names_are_escaped_in_html_and_markdown(branchy):
    hostile = copy.deepcopy(branchy)
    gb = hostile["modes"]["compile"]["compiler"]["graph_break_records"][0]
    gb["file"], gb["source"] = "/tmp/a|b<i>.py", "if x.item() > 0: <script>alert(1)</script> | `y`"
    record = derived_run(hostile, mode_analyses())
    page = html.render(record)
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    assert "/tmp/a|b&lt;i&gt;.py" in page
    md = markdown.render(record)
    # markup only inside code spans, where Markdown shows it verbatim
    spans = (md_code(gb["source"]), md_code(f"{gb['file']}:{gb['line']}"))
    assert all(span in md for span in spans) and spans[0].startswith("``")
    outside = md.replace(spans[0], "").replace(spans[1], "")
    assert "<script>" not in outside and "<i>" not in outside
    assert sum(ln.startswith("- compile, graph break: ") for ln in md.splitlines()) == 1


def test_optimize_says_batchnorm_folded_on_conv_bn_relu():
    from profreport.models import load_model

    model = load_model("conv-bn-relu", torch.device("cpu"), torch.float32, 1).module
    record = _profile(model, (torch.randn(1, 32, 12, 12),), ("eager", "optimize"))
    why = _why(record, "optimize")
    folded = [e for e in why if e["kind"] == "applied" and e["reason"].startswith("folded")]
    assert [e["ops"] for e in folded] == [["native_batch_norm", "native_batch_norm"]]


class ConvThenChain(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return torch.sigmoid(y) * torch.tanh(y)


def test_script_with_nnc_names_fused_groups_and_leaves_the_rest_unexplained():
    """NNC forced on through its interpreter (no LLVM needed), as in test_fusion.py."""
    old_fuse = torch._C._jit_can_fuse_on_cpu()
    torch._C._jit_override_can_fuse_on_cpu(True)
    torch._C._jit_set_te_must_use_llvm_cpu(False)
    try:
        record = _profile(ConvThenChain(), (torch.randn(1, 4, 8, 8),), ("eager", "script"))
    finally:
        torch._C._jit_override_can_fuse_on_cpu(old_fuse)
        torch._C._jit_set_te_must_use_llvm_cpu(True)
    groups = record["modes"]["script"]["compiler"]["fusion_groups"]
    assert groups, "NNC formed no group"
    why = _why(record, "script")
    fused = [e for e in why if e["kind"] == "fused"]
    assert [e["ops"] for e in fused] == [[op.split("::")[-1] for op in g["ops"]] for g in groups]
    left = [e for e in why if e["kind"] == "not_fused"]
    assert [e["ops"] for e in left] == [["convolution"]]
    assert left[0]["reason"] == "convolution is in no fusion group: no reason recorded"
    assert not [e for e in why if e["kind"] == "fuser_limit"]
