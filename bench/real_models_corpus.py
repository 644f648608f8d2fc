"""Real architectures as a new user builds them: transformers config classes, random weights,
default outputs (the language models keep `use_cache` at its default, so they return a cache).

Each function is a `generate --model bench/real_models_corpus.py:<name>` factory returning
`(module, example_inputs)`. Widths are cut so that every mode, export included, builds in
minutes on a 2-core CPU; the layer counts are the smallest that keep each architecture's
structure (an encoder and a decoder, a shifted Swin window, a ConvNeXt stage). Nothing is
downloaded (`HF_HUB_OFFLINE=1` is set before transformers is imported).

    python bench/corpus_modes.py           # runs each through generate, prints modes x models
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

Built = tuple[nn.Module, tuple[torch.Tensor, ...]]
SEQ_LEN = 32
VOCAB = 1000


def _transformers() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import transformers

    transformers.logging.set_verbosity_error()  # config advice is not what is measured
    return transformers


def _tokens(vocab: int = VOCAB, batch: int = 1) -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, vocab, (batch, SEQ_LEN)),)


# Decoder-only language models: their output holds a DynamicCache (use_cache defaults to True).
_DECODER_WIDTHS = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "vocab_size": VOCAB,
}


def mistral() -> Built:
    t = _transformers()
    torch.manual_seed(0)
    return t.MistralModel(t.MistralConfig(**_DECODER_WIDTHS)), _tokens()


def mixtral() -> Built:
    """A mixture of experts: each token routed to 2 of 4 experts (a data-dependent gather)."""
    t = _transformers()
    torch.manual_seed(0)
    cfg = t.MixtralConfig(**_DECODER_WIDTHS, num_local_experts=4, num_experts_per_tok=2)
    return t.MixtralModel(cfg), _tokens()


def qwen2() -> Built:
    t = _transformers()
    torch.manual_seed(0)
    return t.Qwen2Model(t.Qwen2Config(**_DECODER_WIDTHS)), _tokens()


def phi3() -> Built:
    t = _transformers()
    torch.manual_seed(0)
    cfg = t.Phi3Config(**_DECODER_WIDTHS, pad_token_id=None, bos_token_id=1, eos_token_id=2)
    return t.Phi3Model(cfg), _tokens()


def gpt_neox() -> Built:
    t = _transformers()
    torch.manual_seed(0)
    cfg = t.GPTNeoXConfig(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=8,
        vocab_size=VOCAB,
    )
    return t.GPTNeoXModel(cfg), _tokens()


def bart() -> Built:
    """One encoder and one decoder layer; the output holds an EncoderDecoderCache."""
    t = _transformers()
    torch.manual_seed(0)
    cfg = t.BartConfig(
        encoder_layers=1,
        decoder_layers=1,
        d_model=256,
        encoder_ffn_dim=512,
        decoder_ffn_dim=512,
        encoder_attention_heads=8,
        decoder_attention_heads=8,
        vocab_size=VOCAB,
    )
    return t.BartModel(cfg), _tokens()


def distilbert() -> Built:
    """DistilBERT's own widths (768, a 30,522-token vocabulary: a 94 MB embedding table), two
    layers, 128 tokens: the model whose export bytes once counted the table whole."""
    t = _transformers()
    torch.manual_seed(0)
    cfg = t.DistilBertConfig(n_layers=2)
    return t.DistilBertModel(cfg), (torch.randint(0, cfg.vocab_size, (1, 128)),)


def mobilenet_v2() -> Built:
    t = _transformers()
    torch.manual_seed(0)
    cfg = t.MobileNetV2Config(image_size=96, depth_multiplier=0.5)
    return t.MobileNetV2Model(cfg), (torch.randn(1, 3, 96, 96),)


def convnext() -> Built:
    t = _transformers()
    torch.manual_seed(0)
    cfg = t.ConvNextConfig(hidden_sizes=[32, 64], depths=[1, 1], num_stages=2)
    return t.ConvNextModel(cfg), (torch.randn(1, 3, 64, 64),)


def wav2vec2() -> Built:
    """Audio: a convolutional feature encoder over 0.5 s of 16 kHz samples, then 2 layers."""
    t = _transformers()
    torch.manual_seed(0)
    cfg = t.Wav2Vec2Config(
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        conv_dim=(64,) * 7,
    )
    return t.Wav2Vec2Model(cfg), (torch.randn(1, 8000),)


def whisper_encoder() -> Built:
    """Whisper's audio encoder alone: two convolutions over 80 log-mel bins, then 2 layers; its
    input is as long as its position table allows (2 x max_source_positions frames)."""
    t = _transformers()
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    torch.manual_seed(0)
    cfg = t.WhisperConfig(
        d_model=128,
        encoder_layers=2,
        encoder_attention_heads=4,
        encoder_ffn_dim=256,
        num_mel_bins=80,
        max_source_positions=100,
    )
    return WhisperEncoder(cfg), (torch.randn(1, cfg.num_mel_bins, 2 * cfg.max_source_positions),)


def swin() -> Built:
    """Its second stage is as small as its window: Swin then computes the window as a tensor
    while tracing (what once made optimize fail)."""
    t = _transformers()
    torch.manual_seed(0)
    cfg = t.SwinConfig(image_size=56, embed_dim=16, depths=[2, 2], num_heads=[1, 2], window_size=7)
    return t.SwinModel(cfg), (torch.randn(1, 3, 56, 56),)


CORPUS: dict[str, Callable[[], Built]] = {
    f.__name__: f
    for f in (
        mistral,
        mixtral,
        qwen2,
        phi3,
        gpt_neox,
        bart,
        distilbert,
        mobilenet_v2,
        convnext,
        wav2vec2,
        whisper_encoder,
        swin,
    )
}
