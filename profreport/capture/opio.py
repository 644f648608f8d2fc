"""Log the tensors each dispatched operation reads and writes, for the bytes model.

A TorchDispatchMode sees every ATen operation that goes through the dispatcher with its real
input and output tensors. It does not see work that bypasses the dispatcher: Inductor's generated
kernels and a few TorchScript `prim::` nodes; those are accounted for elsewhere, and the caller
records the gap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry


@dataclass(frozen=True)
class TensorRef:
    key: tuple[Any, ...]  # identifies the same tensor view passed twice
    nbytes: int  # numel x element size, as the operation sees it
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class OpIO:
    op: str  # "aten::relu_" style
    inputs: tuple[TensorRef, ...]
    outputs: tuple[TensorRef, ...]
    mutated: tuple[TensorRef, ...]  # inputs written in place (schema alias info says is_write)
    aliases_input: bool  # the output is a view of an input: no data moves
    flops: int | None = None  # torch.utils.flop_counter's formula, where it has one


def _ref(t: torch.Tensor) -> TensorRef:
    try:
        ptr: Any = t.data_ptr()
    except RuntimeError:  # mkldnn / opaque tensors have no data pointer
        ptr = ("id", id(t))
    shape = tuple(int(s) for s in t.shape)
    stride: tuple[int, ...] = ()
    if t.layout == torch.strided:
        stride = tuple(int(s) for s in t.stride())
    return TensorRef(
        key=(ptr, shape, stride, str(t.dtype)),
        nbytes=t.numel() * t.element_size(),
        shape=shape,
        dtype=str(t.dtype).removeprefix("torch."),
    )


def _op_name(func: Any) -> str:
    name = func._schema.name  # e.g. "aten::max_pool2d_with_indices"
    return str(name)


class _Recorder(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[OpIO] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        schema = func._schema
        mutated = []
        for arg_schema, value in zip(schema.arguments, args, strict=False):
            info = arg_schema.alias_info
            if info is not None and info.is_write and isinstance(value, torch.Tensor):
                mutated.append(_ref(value))
        aliases = any(
            r.alias_info is not None and not r.alias_info.is_write for r in schema.returns
        )
        flops = None
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            try:
                flops = int(formula(*args, **kwargs, out_val=out))
            except Exception:  # a formula that cannot handle these arguments: unknown, not 0
                flops = None
        flat_in, _ = tree_flatten((args, kwargs))
        flat_out, _ = tree_flatten(out)
        self.ops.append(
            OpIO(
                op=_op_name(func),
                inputs=tuple(_ref(t) for t in flat_in if isinstance(t, torch.Tensor)),
                outputs=tuple(_ref(t) for t in flat_out if isinstance(t, torch.Tensor)),
                mutated=tuple(mutated),
                aliases_input=aliases,
                flops=flops,
            )
        )
        return out


def record_tensor_io(
    fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], sync: Callable[[], None]
) -> list[OpIO]:
    """Run one forward call and return the tensor I/O of every dispatched operation, in order."""
    recorder = _Recorder()
    with recorder:
        fn(*inputs)
    sync()
    return recorder.ops
