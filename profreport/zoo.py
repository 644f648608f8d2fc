"""Real architectures, built offline: `hf:<name>` models from `transformers` config classes.

Each zoo model is built from its config class with random weights (seeded): nothing is ever
downloaded, and `HF_HUB_OFFLINE=1` is set before `transformers` is imported so that a stray hub
call fails instead of reaching the network. Sizes are the real architectures' widths with fewer
layers by default, so that `generate` with every mode finishes in about a minute on a 2-core CPU;
`layers`, `seq_len` and `batch` scale them, up to the full published depth (all 12 GPT-2 blocks).

Language models run one prefill forward without a KV cache (`use_cache=False`): the work a
server's first token costs, and the same work in every mode. The causal LMs (`decodes`) also
build with their language-model head for the decode workload (profreport/decode.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

HF_PREFIX = "hf:"
INSTALL_HINT = "pip install 'profreport[hf]' (or pip install transformers)"


class ZooError(Exception):
    """A zoo model cannot be built; the message is one line for the user."""


@dataclass(frozen=True)
class ZooSize:
    batch: int
    layers: int
    seq_len: int | None  # None for vision models (their input is an image)


@dataclass(frozen=True)
class ZooModel:
    name: str
    architecture: str  # the transformers class built
    shows: str  # what the model shows about fusion, one line
    default: ZooSize
    full_layers: int | None  # the published depth, None where the model is only "-style"
    build: Callable[[ZooSize], tuple[nn.Module, tuple[torch.Tensor, ...]]]
    # the same model with its language-model head, for the decode workload (None: not a causal LM)
    causal_lm: Callable[[ZooSize], tuple[nn.Module, tuple[torch.Tensor, ...]]] | None = None

    def describe(self, size: ZooSize) -> str:
        depth = f"{size.layers} of {self.full_layers}" if self.full_layers else f"{size.layers}"
        shape = f"seq {size.seq_len}" if size.seq_len is not None else "224x224 image"
        return (
            f"{self.architecture} ({depth} layers, batch {size.batch}, {shape}, random weights): "
            f"{self.shows}"
        )


def _transformers() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import transformers
    except ImportError as exc:
        raise ZooError(f"hf: models need the transformers package: {INSTALL_HINT}") from exc
    # Model-loading advice and deprecation notes are not profreport's output.
    quiet: Callable[[], None] = transformers.logging.set_verbosity_error  # untyped
    quiet()
    return transformers


def _token_ids(vocab: int, size: ZooSize) -> tuple[torch.Tensor, ...]:
    assert size.seq_len is not None
    return (torch.randint(0, vocab, (size.batch, size.seq_len)),)


def _image(size: ZooSize) -> tuple[torch.Tensor, ...]:
    return (torch.randn(size.batch, 3, 224, 224),)


def _gpt2(size: ZooSize, head: bool = False) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    t = _transformers()
    cfg = t.GPT2Config(n_layer=size.layers, use_cache=False, attn_implementation="sdpa")
    model = t.GPT2LMHeadModel(cfg) if head else t.GPT2Model(cfg)
    return model, _token_ids(cfg.vocab_size, size)


def _bert(size: ZooSize) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    t = _transformers()
    cfg = t.BertConfig(num_hidden_layers=size.layers, attn_implementation="sdpa")
    return t.BertModel(cfg, add_pooling_layer=False), _token_ids(cfg.vocab_size, size)


def _llama(size: ZooSize, head: bool = False) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    t = _transformers()
    cfg = t.LlamaConfig(
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=size.layers,
        num_attention_heads=8,
        num_key_value_heads=4,
        vocab_size=32000,
        use_cache=False,
        attn_implementation="sdpa",
    )
    model = t.LlamaForCausalLM(cfg) if head else t.LlamaModel(cfg)
    return model, _token_ids(cfg.vocab_size, size)


def _t5(size: ZooSize) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    t = _transformers()
    cfg = t.T5Config(num_layers=size.layers, use_cache=False)  # t5-small widths
    return t.T5EncoderModel(cfg), _token_ids(cfg.vocab_size, size)


def _vit(size: ZooSize) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    t = _transformers()
    cfg = t.ViTConfig(num_hidden_layers=size.layers, attn_implementation="sdpa")
    return t.ViTModel(cfg, add_pooling_layer=False), _image(size)


# ResNet-50's bottleneck blocks per stage and the stages' output widths.
_RESNET50_DEPTHS = (3, 4, 6, 3)
_RESNET50_WIDTHS = (256, 512, 1024, 2048)


def with_running_stats(model: nn.Module) -> nn.Module:
    """`model` with non-trivial BatchNorm running statistics, so that folding them is visible
    in the numbers."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                assert module.running_mean is not None and module.running_var is not None
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
    return model


def _resnet(size: ZooSize) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    t = _transformers()
    depths: list[int] = []
    left = size.layers
    for depth in _RESNET50_DEPTHS:  # the first `layers` bottleneck blocks of ResNet-50
        if left <= 0:
            break
        depths.append(min(depth, left))
        left -= depths[-1]
    cfg = t.ResNetConfig(
        depths=depths, hidden_sizes=list(_RESNET50_WIDTHS[: len(depths)]), layer_type="bottleneck"
    )
    return with_running_stats(t.ResNetModel(cfg)), _image(size)


ZOO: dict[str, ZooModel] = {
    m.name: m
    for m in (
        ZooModel(
            "gpt2",
            "GPT2Model",
            "token + position embedding gathers, LayerNorm and GELU chains around GEMMs, SDPA",
            ZooSize(batch=1, layers=2, seq_len=128),
            12,
            _gpt2,
            lambda size: _gpt2(size, head=True),
        ),
        ZooModel(
            "bert",
            "BertModel",
            "three embedding gathers, post-norm residual LayerNorms, bidirectional SDPA",
            ZooSize(batch=2, layers=2, seq_len=128),
            12,
            _bert,
        ),
        ZooModel(
            "llama",
            "LlamaModel (hidden 512, GQA 8/4 heads)",
            "RMSNorm and rotary embedding chains, SiLU-gated MLP, grouped-query SDPA",
            ZooSize(batch=1, layers=2, seq_len=128),
            None,
            _llama,
            lambda size: _llama(size, head=True),
        ),
        ZooModel(
            "t5",
            "T5EncoderModel (t5-small widths)",
            "RMS-style T5 LayerNorm, relative position bias gather, ReLU MLP",
            ZooSize(batch=1, layers=2, seq_len=128),
            6,
            _t5,
        ),
        ZooModel(
            "vit",
            "ViTModel (ViT-B/16)",
            "patch-embedding convolution, pre-norm LayerNorm and GELU around GEMMs, SDPA",
            ZooSize(batch=1, layers=2, seq_len=None),
            12,
            _vit,
        ),
        ZooModel(
            "resnet",
            "ResNetModel (ResNet-50 bottlenecks)",
            "convolution + BatchNorm + ReLU and in-place residual adds: BatchNorm folding",
            ZooSize(batch=1, layers=3, seq_len=None),  # ResNet-50's first stage
            16,
            _resnet,
        ),
    )
}


def is_zoo_spec(spec: str) -> bool:
    return spec.startswith(HF_PREFIX)


def zoo_spec(name: str, size: ZooSize) -> str:
    """The self-contained spec of a sized zoo model (a child process rebuilds it from this)."""
    seq = f",seq_len={size.seq_len}" if size.seq_len is not None else ""
    return f"{HF_PREFIX}{name},layers={size.layers}{seq}"


def parse_zoo_spec(spec: str) -> tuple[ZooModel, dict[str, int]]:
    """`hf:gpt2` or `hf:gpt2,layers=12,seq_len=128` -> (model, size overrides)."""
    name, *options = spec.removeprefix(HF_PREFIX).split(",")
    zoo = ZOO.get(name)
    if zoo is None:
        known = ", ".join(HF_PREFIX + n for n in ZOO)
        raise ZooError(f"unknown zoo model {spec!r}; choose from {known}")
    overrides: dict[str, int] = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or key not in ("layers", "seq_len") or not value.isdigit() or int(value) < 1:
            raise ZooError(f"bad option {option!r} in {spec!r}: use layers=N or seq_len=N (N >= 1)")
        overrides[key] = int(value)
    return zoo, overrides


def zoo_size(
    zoo: ZooModel, batch: int | None = None, layers: int | None = None, seq_len: int | None = None
) -> ZooSize:
    """The size to build: defaults, overridden where given; checked against the architecture."""
    if seq_len is not None and zoo.default.seq_len is None:
        raise ZooError(f"hf:{zoo.name} takes an image, not a sequence: --seq-len does not apply")
    if layers is not None and zoo.full_layers is not None and layers > zoo.full_layers:
        raise ZooError(f"hf:{zoo.name} has {zoo.full_layers} layers; --layers {layers} is more")
    return ZooSize(
        batch=batch or zoo.default.batch,
        layers=layers or zoo.default.layers,
        seq_len=seq_len or zoo.default.seq_len,
    )


def build_zoo_model(
    zoo: ZooModel, size: ZooSize, causal_lm: bool = False
) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The zoo model; `causal_lm`: with its language-model head (ZooError: it has none)."""
    build = zoo.causal_lm if causal_lm else zoo.build
    if build is None:
        lms = ", ".join(HF_PREFIX + m.name for m in ZOO.values() if m.causal_lm)
        raise ZooError(f"hf:{zoo.name} is not a causal LM and cannot decode; decode {lms}")
    try:
        return build(size)
    except ZooError:
        raise
    except Exception as exc:  # a transformers release that renamed a config field, say
        from profreport.text import error_line

        raise ZooError(f"building hf:{zoo.name} failed: {error_line(exc)}") from exc
