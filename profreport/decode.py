"""The decode workload: one token of a served request, as a module every mode can build.

`decode_step(lm, prompt)` turns a `transformers` causal LM into `DecodeStep`, a module whose
forward is one greedy decode step at batch B: one new token per sequence, a static KV cache of
`prompt + DECODE_TOKENS` positions attended, every weight read once. The cache is filled by one
prefill of the prompt here, before anything is profiled or timed.

Positions. transformers' StaticCache advances its own write position (`cumulative_length`) on
every call; `DecodeStep` instead sets it from its `position` input at the start of each call, so
every call writes the slot `position` names and attends to the slots before it. The profiled and
timed calls all decode at position P = prompt length (the first new token), writing slot P
again with the same values each time: repeated calls are the same work on the same state. The
greedy check walks positions P .. P+15. The per-token cost does not depend on the position: the
static cache's attention reads all P+16 slots, masked (`get_mask_sizes` of a static layer is the
whole cache), so a step at P and one at P+15 run the same kernels on the same shapes.

The step is built where it is used: the capture builds it from the loaded causal LM and its
prompt (models.decode_loaded, called by pipeline.RunCollector and by a timing worker), and
splits one step's modeled bytes (`traffic_split`) when it captures the run, where the modes'
tensor I/O is recorded too (RunCollector.prepare).

The cache tensors are the module's buffers and are put back into the cache object on every call,
so that torch.export (which swaps buffers for its own tensors while tracing) sees their
mutation; sliding-window layers are plain static layers over the whole cache, the window applied
by the model's own sliding-window mask.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from profreport.record.model import DecodeInfo

DECODE_TOKENS = 16  # new tokens the cache holds beyond the prompt, and the greedy check's steps
WORKLOADS = ("prefill", "decode")

NEEDS = (
    "decode needs a transformers causal LM (a PreTrainedModel with a language-model head, "
    "e.g. LlamaForCausalLM) and integer token ids [batch, prompt length] as its first input"
)


class DecodeError(Exception):
    """The model cannot be decoded; the message is one line for the user."""


@dataclasses.dataclass(frozen=True)
class BuiltStep:
    """What building the step found: the prompt's length (the position every profiled and
    timed step decodes at), the cache's slots and bytes, and eager's greedy tokens from that
    position, per sequence."""

    context: int
    cache_len: int
    kv_cache_bytes: int
    greedy_tokens: tuple[tuple[int, ...], ...]

    def info(self, split: tuple[int, int, int, int]) -> DecodeInfo:
        """The record's decode step, with eager's modeled bytes of one step (`traffic_split`)."""
        return DecodeInfo(
            context=self.context,
            position=self.context,
            cache_len=self.cache_len,
            kv_cache_bytes=self.kv_cache_bytes,
            greedy_tokens=self.greedy_tokens,
            weight_bytes=split[0],
            kv_read_bytes=split[1],
            cache_written_bytes=split[2],
            total_bytes=split[3],
        )


def parse_workloads(text: str) -> tuple[str, ...]:
    """`prefill`, `decode` or `prefill,decode` -> the workloads, in the order given."""
    chosen = tuple(w.strip() for w in text.split(",") if w.strip())
    unknown = [w for w in chosen if w not in WORKLOADS]
    if unknown or not chosen or len(set(chosen)) != len(chosen):
        raise ValueError(f"--workload takes prefill, decode or prefill,decode, not {text!r}")
    return chosen


class DecodeStep(nn.Module):
    """One greedy decode step of `lm` with its static KV cache: forward(token_ids [B, 1],
    position [1]) -> logits [B, 1, vocab]."""

    def __init__(self, lm: nn.Module, cache: Any) -> None:
        super().__init__()
        self.lm = lm
        self.cache = cache
        for i, layer in enumerate(cache.layers):
            self.register_buffer(f"keys_{i}", layer.keys, persistent=False)
            self.register_buffer(f"values_{i}", layer.values, persistent=False)
            self.register_buffer(f"length_{i}", layer.cumulative_length, persistent=False)

    def cache_tensors(self) -> list[torch.Tensor]:
        """Every layer's keys and values."""
        return [b for n, b in self.named_buffers(recurse=False) if not n.startswith("length_")]

    def forward(self, token_ids: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        for i, layer in enumerate(self.cache.layers):
            layer.keys = getattr(self, f"keys_{i}")
            layer.values = getattr(self, f"values_{i}")
            layer.cumulative_length = getattr(self, f"length_{i}")
            layer.cumulative_length.copy_(position[0])  # write slot `position`, attend before it
        logits: torch.Tensor = self.lm(input_ids=token_ids, cache=self.cache, use_cache=True).logits
        return logits


def _static_cache(lm: nn.Module, length: int) -> Any:
    from transformers.cache_utils import StaticCache, StaticLayer

    cache = StaticCache(config=lm.config, max_cache_len=length)  # type: ignore[arg-type]
    for i, layer in enumerate(cache.layers):
        if type(layer) is StaticLayer:
            continue
        if not isinstance(layer, StaticLayer):  # linear attention, KV sharing, ...
            raise DecodeError(f"decode: cache layer {type(layer).__name__} is not supported yet")
        cache.layers[i] = StaticLayer(length)  # sliding window: the mask applies it
    return cache


def greedy_tokens(
    step: Callable[..., Any], first: torch.Tensor, position: int, steps: int = DECODE_TOKENS
) -> list[list[int]]:
    """`steps` greedy tokens per sequence from `first` at `position` onwards (positions
    position .. position+steps-1)."""
    tokens, token = [], first
    for i in range(steps):
        where = torch.tensor([position + i], device=first.device)
        token = step(token, where)[:, -1].argmax(-1, keepdim=True)
        tokens.append(token)
    return torch.cat(tokens, 1).tolist()


def greedy_check(
    step: Callable[..., Any], inputs: tuple[torch.Tensor, ...], built: BuiltStep
) -> dict[str, Any]:
    """A mode's greedy tokens from the example inputs against eager's (`built`): the output
    check's decode fields."""
    tokens = greedy_tokens(step, inputs[0], built.context, len(built.greedy_tokens[0]))
    steps = [
        i
        for i in range(len(tokens[0]))
        if any(s[i] != e[i] for s, e in zip(tokens, built.greedy_tokens, strict=True))
    ]
    check: dict[str, Any] = {"greedy_steps": len(tokens[0]), "greedy_equal": not steps}
    return {**check, "greedy_first_difference": steps[0]} if steps else check


def decode_step(
    lm: nn.Module, prompt: torch.Tensor
) -> tuple[DecodeStep, tuple[torch.Tensor, torch.Tensor], BuiltStep]:
    """`lm` as a decode step at the end of `prompt` (prefilled here), its example inputs (the
    prefill's greedy token, the position P) and what building it found."""
    can_generate = getattr(lm, "can_generate", None)
    if not (hasattr(lm, "config") and callable(can_generate) and can_generate()):
        raise DecodeError(f"{NEEDS}; {type(lm).__name__} is not one")
    if prompt.dtype not in (torch.int32, torch.int64) or prompt.dim() != 2:
        raise DecodeError(
            f"{NEEDS}; its first input is {prompt.dtype} of shape {list(prompt.shape)}"
        )
    context = int(prompt.shape[1])
    positions = getattr(lm.config, "max_position_embeddings", None)
    learned = any(  # a learned position table (GPT-2's) has no row past its size
        isinstance(m, nn.Embedding) and m.num_embeddings == positions for m in lm.modules()
    )
    if learned and positions is not None and context + DECODE_TOKENS > positions:
        raise DecodeError(
            f"decode: a context of {context} tokens + {DECODE_TOKENS} new ones passes the "
            f"model's {positions} learned positions; use --context {positions - DECODE_TOKENS} "
            "or less"
        )
    cache = _static_cache(lm, context + DECODE_TOKENS)
    try:
        with torch.no_grad():
            out = lm(input_ids=prompt, cache=cache, use_cache=True)
            first = out.logits[:, -1].argmax(-1, keepdim=True)
            step = DecodeStep(lm, cache)
            inputs = (first, torch.tensor([context], device=prompt.device))
            tokens = greedy_tokens(step, first, context)
    except DecodeError:
        raise
    except Exception as exc:  # a model whose forward takes no static cache
        raise _failed_with_cache(lm, exc) from exc
    kv = sum(t.numel() * t.element_size() for t in step.cache_tensors())
    built = BuiltStep(context, context + DECODE_TOKENS, kv, tuple(tuple(s) for s in tokens))
    return step, inputs, built


def _failed_with_cache(lm: nn.Module, exc: Exception) -> DecodeError:
    from profreport.text import error_line

    return DecodeError(
        f"decode: {type(lm).__name__} failed with a static KV cache: {error_line(exc)}"
    )


def _ranges(tensors: Sequence[torch.Tensor]) -> list[tuple[int, int]]:
    """The storage address ranges `tensors` live in."""
    storages = [t.untyped_storage() for t in tensors]
    return [(s.data_ptr(), s.data_ptr() + s.nbytes()) for s in storages]


def traffic_split(
    step: DecodeStep, inputs: tuple[torch.Tensor, ...], sync: Callable[[], None]
) -> tuple[int, int, int, int]:
    """Eager's modeled bytes of one step (the dispatcher log under analysis/bytes_model) split
    by the tensor each operation touched: (weights read, KV cache read, cache update written,
    total); activations are the rest of the total. The step writes the slot its position names
    with the same values as every profiled call, so the split is that of every step. DecodeError
    when the step cannot be recorded, as when it cannot be built."""
    from profreport.analysis.bytes_model import op_traffic
    from profreport.analysis.kernels import BOOKKEEPING_OPS
    from profreport.capture.opio import record_tensor_io

    weights = _ranges(list(step.lm.parameters()))
    cache = _ranges(step.cache_tensors())

    def inside(ref: Any, ranges: list[tuple[int, int]]) -> bool:
        ptr = ref.key[0]
        return isinstance(ptr, int) and any(lo <= ptr < hi for lo, hi in ranges)

    def part(op: Any, ranges: list[tuple[int, int]]) -> tuple[int, int]:
        indirect = op.indirect if op.indirect and inside(op.indirect.target, ranges) else None

        def keep(refs: Sequence[Any]) -> tuple[Any, ...]:
            return tuple(r for r in refs if inside(r, ranges))

        only = dataclasses.replace(
            op,
            inputs=keep(op.inputs),
            outputs=keep(op.outputs),
            mutated=keep(op.mutated),
            indirect=indirect,
        )
        return op_traffic(only, BOOKKEEPING_OPS)

    weight = kv_read = kv_written = total = 0
    try:
        with torch.no_grad():
            ops = record_tensor_io(step, inputs, sync)
    except Exception as exc:
        raise _failed_with_cache(step.lm, exc) from exc
    for op in ops:
        total += sum(op_traffic(op, BOOKKEEPING_OPS))
        weight += part(op, weights)[0]
        read, written = part(op, cache)
        kv_read, kv_written = kv_read + read, kv_written + written
    return weight, kv_read, kv_written, total
