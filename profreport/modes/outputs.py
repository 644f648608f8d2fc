"""A model's output as the tensors it holds: what each mode's output is compared by, and what
torch.jit.trace and torch.export are given when the model returns more than tensors."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import nn


@dataclass(frozen=True)
class FlatOutput:
    """A model output as the tensors it holds, in torch.utils._pytree order."""

    tensors: tuple[torch.Tensor, ...]
    container: str  # what held them: "tensor", "tuple", "dict", "ModelOutput (...)", ...
    dropped: tuple[str, ...]  # type names of the leaves that are not tensors
    plain: bool  # a tensor or (nested) tuples of tensors: what strict torch.jit.trace accepts

    def describe(self) -> str:
        n = len(self.tensors)
        text = f"flattened {self.container} to a tuple of {n} tensor{'s' if n != 1 else ''}"
        if self.dropped:
            counts = Counter(self.dropped)
            text += "; dropped " + ", ".join(f"{k} x{v}" if v > 1 else k for k, v in counts.items())
            several = len(self.dropped) > 1
            text += (
                " (not tensors, and torch.utils._pytree cannot look inside them)"
                if several
                else " (not a tensor, and torch.utils._pytree cannot look inside it)"
            )
        return text


def _container_name(out: Any) -> str:
    kind = type(out)
    if isinstance(out, torch.Tensor):
        return "tensor"
    if any(c.__name__ == "ModelOutput" for c in kind.__mro__[1:]):
        return f"ModelOutput ({kind.__name__})"
    if kind in (tuple, list, dict):
        return kind.__name__
    if isinstance(out, tuple) and hasattr(out, "_fields"):
        return f"namedtuple {kind.__name__}"
    if dataclasses.is_dataclass(out):
        return f"dataclass {kind.__name__}"
    return kind.__name__


def _is_plain(out: Any) -> bool:
    return isinstance(out, torch.Tensor) or (type(out) is tuple and all(map(_is_plain, out)))


def _leaves(out: Any, tensors: list[torch.Tensor], dropped: list[str]) -> None:
    for leaf in pytree.tree_leaves(out):
        if isinstance(leaf, torch.Tensor):
            tensors.append(leaf)
        elif dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
            # a dataclass pytree does not know: its fields, in declaration order
            fields = [getattr(leaf, f.name) for f in dataclasses.fields(leaf)]
            _leaves(fields, tensors, dropped)
        else:
            dropped.append("None" if leaf is None else type(leaf).__name__)


def flatten_output(out: Any) -> FlatOutput:
    """The tensors of a model output (a tensor, tuples, lists, dicts, dataclasses, a transformers
    ModelOutput, which registers itself as a pytree node). Leaves that are not tensors are
    dropped: a transformers DynamicCache is one (pytree cannot open it), so its key/value tensors
    are not outputs; a cache class registered with pytree would have its tensors kept."""
    tensors: list[torch.Tensor] = []
    dropped: list[str] = []
    _leaves(out, tensors, dropped)
    return FlatOutput(tuple(tensors), _container_name(out), tuple(dropped), _is_plain(out))


class TensorOutputs(nn.Module):
    """Runs the model and returns its output's tensors as a tuple: what torch.jit.trace types."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *inputs: Any) -> tuple[torch.Tensor, ...]:
        return flatten_output(self.model(*inputs)).tensors


def with_tensor_outputs(module: nn.Module, output: Any, tool: str) -> tuple[nn.Module, str | None]:
    """The module `tool` should capture, given one eager `output` of it, and what was flattened.

    A tensor or tuples of tensors are captured as they are; anything else (a ModelOutput holding
    a DynamicCache, a dict, a dataclass) is wrapped in TensorOutputs, and the returned sentence
    says what was flattened and dropped (the record's `compiler.outputs`)."""
    from profreport.modes.base import ModeError

    flat = flatten_output(output)
    if flat.plain:
        return module, None
    if not flat.tensors:
        raise ModeError(
            f"{tool} needs tensor outputs, and {type(module).__name__}'s output "
            f"({flat.container}) holds none"
        )
    return TensorOutputs(module).eval(), flat.describe()
