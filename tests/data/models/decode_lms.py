"""Small causal LMs from transformers config classes, random weights (seeded by the loader),
for the decode tests: a sliding window shorter than the prompt (the window slides) and a
mixture of experts. Each returns (model, (prompt token ids,)) as `generate --model` takes it.
One layer, narrow: the decode tests' checks (kernels and bytes against an independent count,
greedy tokens against the model without a cache, every default mode) need each architecture's
attention and MLP once, and compile and export time grows with the layers."""

import torch
import transformers

SMALL = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,  # grouped-query attention, as both models ship
    "vocab_size": 256,
    "attn_implementation": "sdpa",
}


def mistral():
    """MistralForCausalLM, sliding window 24 over a 40-token prompt."""
    cfg = transformers.MistralConfig(**SMALL, sliding_window=24)
    return transformers.MistralForCausalLM(cfg), (torch.randint(0, 256, (1, 40)),)


def mixtral():
    """MixtralForCausalLM, 4 experts, 2 a token."""
    cfg = transformers.MixtralConfig(**SMALL, num_local_experts=4, num_experts_per_tok=2)
    return transformers.MixtralForCausalLM(cfg), (torch.randint(0, 256, (1, 32)),)


def encoder():
    """BertModel: no language-model head, nothing to decode."""
    cfg = transformers.BertConfig(
        hidden_size=64, num_hidden_layers=1, num_attention_heads=4, intermediate_size=128
    )
    return transformers.BertModel(cfg), (torch.randint(0, 512, (1, 16)),)
