"""The fusion map on the real lowering of real architectures (transformers configs, random
weights), through the same path users take: `profreport.profile(..., modes=("eager","compile"))`.
"""

import re

import pytest
import torch

import profreport

transformers = pytest.importorskip("transformers")

# Ops Inductor leaves to a library (extern kernels) in these models.
LIBRARY_OPS = {"mm", "addmm", "bmm", "convolution", "cumsum"} | {
    "_scaled_dot_product_flash_attention_for_cpu"
}
LAYER = re.compile(r"(?:^|\.)layers\.(\d+)(?:\.|$)")


def _profile(model, inputs):
    torch.manual_seed(0)
    return profreport.profile(
        model.eval(),
        inputs,
        modes=("eager", "compile"),
        device="cpu",
        min_time_s=0.01,
        max_time_s=1.0,
        bootstrap_resamples=50,
    ).record


@pytest.fixture(scope="module")
def llama_record():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=1000,
        use_cache=False,
    )
    return _profile(transformers.LlamaModel(config), (torch.randint(0, 1000, (1, 32)),))


class Bottleneck(torch.nn.Module):
    """A ResNet bottleneck with the in-place residual `+=` and ReLU(inplace=True)."""

    def __init__(self, c=64, mid=16):
        super().__init__()
        conv = lambda i, o, k: torch.nn.Conv2d(i, o, k, padding=k // 2, bias=False)  # noqa: E731
        self.conv1, self.bn1 = conv(c, mid, 1), torch.nn.BatchNorm2d(mid)
        self.conv2, self.bn2 = conv(mid, mid, 3), torch.nn.BatchNorm2d(mid)
        self.conv3, self.bn3 = conv(mid, c, 1), torch.nn.BatchNorm2d(c)
        self.relu = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += x
        return self.relu(out)


@pytest.fixture(scope="module")
def bottleneck_record():
    torch.manual_seed(0)
    return _profile(Bottleneck(), (torch.randn(1, 64, 32, 32),))


def _check_map_against_profile(record):
    """What holds for every compiled model: one group per kernel call, generated kernels named
    as the profiler saw them, no library op in a fused group, totals that add up."""
    compile_ = record["modes"]["compile"]
    fusion = compile_["fusion"]
    groups = [g for g in fusion["groups"] if g["kernels"]]  # the last may hold unmatched ops
    profiled = {r["name"] for r in compile_["kernels"]["table"]}
    nodes = compile_["compiler"]["inductor_nodes"]
    generated_calls = {n["kernel_call"] for n in nodes if n["kernel_call"] is not None}
    assert len([g for g in groups if g["note"] != "library call"]) == len(generated_calls)
    for g in groups:
        (kernel,) = g["kernels"]
        if g["note"] == "library call":
            assert kernel.startswith("library ") and not g["fused"]
            assert len(g["eager_ops"]) <= 1
        else:
            assert kernel in profiled, kernel
            assert not LIBRARY_OPS & set(g["eager_ops"]), g
    # per-kernel bytes: each generated kernel row carries the bytes of its own kernel calls
    for row in compile_["kernels"]["table"]:
        if row["name"] in fusion["per_kernel"]:
            mine = [n for n in nodes if n["kernel"] == row["name"]]
            assert row["bytes_read"] == sum(n["read"] for n in mine)
    # every eager byte counted once and every compiled byte once: the savings add up exactly
    eager_total = record["modes"]["eager"]["bytes"]["total"]
    assert isinstance(fusion["saved_bytes"], int)
    assert fusion["saved_bytes"] == eager_total - compile_["bytes"]["total"]
    assert sum(g["saved_bytes"] for g in fusion["groups"]) == fusion["saved_bytes"]
    return groups


@pytest.mark.slow
def test_llama_fusion_groups_are_per_kernel_and_never_merge_layers(llama_record):
    groups = _check_map_against_profile(llama_record)
    fused = [g for g in groups if g["fused"]]
    assert fused
    # Each RMSNorm (two per layer and the final one) is counted in its own kernel: the old
    # map merged every kernel recomputing a norm into one group spanning all layers.
    owners_of_mean = [g for g in groups if "mean" in g["eager_ops"]]
    counted_means = [g for g in owners_of_mean if "mean" not in g["counted_elsewhere"]]
    assert len(counted_means) == 5
    for g in groups:
        # a kernel holds at most one norm, and its ops come from one layer or, where a layer's
        # residual add is fused with the next layer's norm, two adjacent ones
        norms = [m for m in g["modules"] if m.endswith("norm")]
        assert len(norms) <= 1, g
        layers = sorted({int(x.group(1)) for m in g["modules"] if (x := LAYER.search(m))})
        assert len(layers) <= 2 and (len(layers) < 2 or layers[1] - layers[0] == 1), g
    recomputed = [g for g in groups if g["recomputed"]]
    assert recomputed and all("recomputed: " in g["note"] for g in recomputed)
    # one name per op: the eager kernel table (embedding, not index_select; mean, not sum +
    # div_; _to_copy, not copy_) lists exactly the ops and calls of the bytes table
    eager = llama_record["modes"]["eager"]
    assert {r["name"]: r["calls_per_step"] for r in eager["kernels"]["table"]} == {
        r["op"]: r["calls"] for r in eager["bytes"]["table"]
    }
    verdict = llama_record["modes"]["compile"]["verdict"]
    assert "_scaled_dot_product" not in verdict.split(";")[1]
    # the fusion sentence stays short (the latency clause's length depends on the machine's noise)
    fused = next(part for part in verdict.split("; ") if part.startswith("Inductor fused"))
    assert "more fused kernel(s)" in fused and len(fused) < 400


@pytest.mark.slow
def test_bottleneck_in_place_residual_matches_and_savings_are_sized(bottleneck_record):
    groups = _check_map_against_profile(bottleneck_record)
    fusion = bottleneck_record["modes"]["compile"]["fusion"]
    # the in-place `out += x` and ReLU(inplace=True) pair with Inductor's add and relu
    assert not any(g["note"].startswith("eager ops with no compiled kernel") for g in groups)
    assert all(g["eager_bytes"] is not None for g in fusion["groups"])
    tail = [g for g in groups if "add" in g["eager_ops"]]
    assert len(tail) == 1 and {"native_batch_norm", "add", "relu"} <= set(tail[0]["eager_ops"])
    assert tail[0]["fused"] and tail[0]["saved_bytes"] > 0
    libraries = [g for g in groups if g["note"] == "library call"]
    assert [g["eager_ops"] for g in libraries] == [["convolution"]] * 3
    verdict = bottleneck_record["modes"]["compile"]["verdict"]
    assert "add_" not in verdict and "fusion map:" in verdict


@pytest.mark.slow
def test_transformers_resnet_bottleneck_map_and_kernel_names():
    torch.manual_seed(0)
    config = transformers.ResNetConfig(
        depths=[1], hidden_sizes=[64], embedding_size=32, layer_type="bottleneck"
    )
    record = _profile(transformers.ResNetModel(config), (torch.randn(1, 3, 64, 64),))
    groups = _check_map_against_profile(record)
    # `hidden_state += residual` pairs with Inductor's add, inside the block's last kernel
    assert not any(g["note"].startswith("eager ops with no compiled kernel") for g in groups)
    (tail,) = [g for g in groups if "add" in g["eager_ops"]]
    assert tail["fused"] and {"native_batch_norm", "add", "relu"} <= set(tail["eager_ops"])
    # eager kernel table and bytes table name the same ops: relu not clamp_min, convolution
    # not its backend, mean (adaptive pooling) not sum + div_, no _nnpack_available query
    eager = record["modes"]["eager"]
    kernel_names = {r["name"] for r in eager["kernels"]["table"]}
    assert kernel_names == {r["op"] for r in eager["bytes"]["table"]}
    assert eager["kernels"]["per_step"] == sum(r["calls"] for r in eager["bytes"]["table"])
