"""Log the tensors each dispatched operation reads and writes, for the bytes model.

A TorchDispatchMode sees every ATen operation that goes through the dispatcher with its real
input and output tensors. It does not see work that bypasses the dispatcher: Inductor's generated
kernels and a few TorchScript `prim::` nodes; those are accounted for elsewhere, and the caller
records the gap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from math import prod
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import flop_registry

from profreport.capture.provenance import CallSites, ModuleStack
from profreport.text import error_line


@dataclass(frozen=True)
class TensorRef:
    key: tuple[Any, ...]  # identifies the same tensor view passed twice
    nbytes: int  # numel x element size, as the operation sees it
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class IndirectAccess:
    """The part of one tensor an indexing operation reaches through its indices."""

    target: TensorRef  # the tensor gathered from (writes=False) or scattered into in place
    touched_bytes: int  # elements reached x element size; a repeated index counts each time
    writes: bool  # True: the touched elements are written in place (scatter, index_put_)
    read_modify_write: bool  # the written elements are read first (add, accumulate, reduce)


@dataclass(frozen=True)
class OpIO:
    op: str  # "aten::relu_" style
    inputs: tuple[TensorRef, ...]
    outputs: tuple[TensorRef, ...]
    mutated: tuple[TensorRef, ...]  # inputs written in place (schema alias info says is_write)
    aliases_input: bool  # the output is a view of an input: no data moves
    flops: int | None = None  # torch.utils.flop_counter's formula, where it has one
    indirect: IndirectAccess | None = None  # indexing ops only (INDIRECT_OPS)
    module: str | None = None  # the running module's named_modules() path; None: not tracked
    lines: tuple[str, ...] = ()  # the user's source lines (capture/provenance.py)


@dataclass(frozen=True)
class IndirectSpec:
    """How an indexing operator reaches its target: schema argument names and the rule that
    counts the elements one call touches (see `_touched_elements`)."""

    target: str  # the argument reached through the indices
    index: str  # the argument holding the indices
    count: str  # "output" | "index" | "index_rows" | "index_slices" | "advanced"
    writes: bool = False
    # True, or the name of the argument whose truth makes the write read-modify-write.
    read_modify_write: bool | str = False


_EMBEDDING_BAG = IndirectSpec("weight", "indices", "index_rows")
# Out-of-place scatter/index_put/index_add are absent on purpose: they copy the whole destination
# into a new tensor, so reading it and writing the result in full is their exact traffic.
INDIRECT_OPS: dict[str, IndirectSpec] = {
    "aten::embedding": IndirectSpec("weight", "indices", "output"),
    "aten::embedding_bag": _EMBEDDING_BAG,
    "aten::_embedding_bag": _EMBEDDING_BAG,
    "aten::_embedding_bag_forward_only": _EMBEDDING_BAG,
    "aten::index_select": IndirectSpec("self", "index", "output"),
    "aten::gather": IndirectSpec("self", "index", "output"),
    "aten::index": IndirectSpec("self", "indices", "output"),
    "aten::take_along_dim": IndirectSpec("self", "indices", "output"),
    "aten::scatter_": IndirectSpec("self", "index", "index", True, "reduce"),
    "aten::scatter_add_": IndirectSpec("self", "index", "index", True, True),
    "aten::scatter_reduce_": IndirectSpec("self", "index", "index", True, "include_self"),
    "aten::index_put_": IndirectSpec("self", "indices", "advanced", True, "accumulate"),
    "aten::_index_put_impl_": IndirectSpec("self", "indices", "advanced", True, "accumulate"),
    "aten::index_add_": IndirectSpec("self", "index", "index_slices", True, True),
    "aten::index_copy_": IndirectSpec("self", "index", "index_slices", True),
}


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


def _bind(schema: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The operator's arguments by schema name (any Python value: tensors, ints, lists...)."""
    bound: dict[str, object] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(args):
            bound[arg.name] = args[i]
        elif arg.name in kwargs:
            bound[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
    return bound


def _advanced_index_numel(shape: tuple[int, ...], indices: list[Any]) -> int:
    """numel of `t[indices]` for a tensor of `shape` (the elements index_put_ writes)."""
    index_shapes: list[tuple[int, ...]] = []
    kept = 1  # dims not consumed by an index tensor are taken whole
    dim = 0
    for ix in indices:
        if ix is None:
            kept *= shape[dim]
            dim += 1
        elif ix.dtype in (torch.bool, torch.uint8):  # a mask selects its nonzero positions
            index_shapes.append((int(ix.count_nonzero()),))
            dim += ix.dim()
        else:
            index_shapes.append(tuple(ix.shape))
            dim += 1
    kept *= prod(shape[dim:])
    if not index_shapes:
        return kept
    broadcast: Callable[..., torch.Size] = torch.broadcast_shapes  # untyped in torch's stubs
    return prod(broadcast(*index_shapes)) * kept


def _touched_elements(spec: IndirectSpec, bound: Mapping[str, Any], out: Any) -> int:
    target: torch.Tensor = bound[spec.target]
    index: torch.Tensor = bound[spec.index]
    if spec.count == "output":  # one gathered element per output element
        first: torch.Tensor = out[0] if isinstance(out, tuple | list) else out
        return first.numel()
    if spec.count == "index":  # scatter: one element per index
        return index.numel()
    row = target.numel() // target.shape[0] if target.dim() and target.shape[0] else 0
    if spec.count == "index_rows":  # embedding_bag: one row per index, before pooling
        return index.numel() * row
    if spec.count == "index_slices":  # index_add_/index_copy_: one slice along dim per index
        dim = bound["dim"] % max(target.dim(), 1)
        size = target.shape[dim] if target.dim() else 1
        return index.numel() * (target.numel() // size if size else 0)
    return _advanced_index_numel(tuple(target.shape), list(index))


def indirect_target(
    name: str, schema: Any, args: Any, kwargs: Mapping[str, Any], out: Any
) -> tuple[torch.Tensor, IndirectAccess] | None:
    """For an operator in INDIRECT_OPS called with these arguments (real or meta tensors), the
    tensor it reaches through its indices and how; None for any other operator."""
    spec = INDIRECT_OPS.get(name)
    if spec is None:
        return None
    bound = _bind(schema, args, kwargs)
    target = bound.get(spec.target)
    if not isinstance(target, torch.Tensor) or bound.get(spec.index) is None:
        return None
    rmw = spec.read_modify_write
    return target, IndirectAccess(
        target=_ref(target),
        touched_bytes=_touched_elements(spec, bound, out) * target.element_size(),
        writes=spec.writes,
        read_modify_write=bool(bound.get(rmw) if isinstance(rmw, str) else rmw),
    )


class TensorIOFailed(RuntimeError):
    """An operation raised while one forward's tensor I/O was recorded; the message names it."""


def _overload_taking_numbers(func: Any, args: tuple[Any, ...]) -> Any:
    """`func`, or the overload of its operator that takes the Python numbers passed where `func`
    says Tensor. A frozen, optimized TorchScript graph calls `aten::remainder.Tensor` with a
    folded constant (an int); its interpreter wraps the number, but the call reaches a Python
    dispatch mode boxed as it is, and replaying it there fails the schema. The Scalar overload
    computes the same thing from the number."""
    params = func._schema.arguments
    numbers = [
        i
        for i, (param, value) in enumerate(zip(params, args, strict=False))
        if isinstance(param.type, torch._C.TensorType) and isinstance(value, int | float | bool)
    ]
    if not numbers:
        return func
    packet = func._overloadpacket
    for name in packet.overloads():
        candidate = getattr(packet, name)
        cparams = candidate._schema.arguments
        if len(cparams) != len(params) or any(c.is_out for c in cparams):
            continue
        if all(
            isinstance(c.type, torch._C.NumberType) if i in numbers else str(c.type) == str(p.type)
            for i, (c, p) in enumerate(zip(cparams, params, strict=True))
        ):
            return candidate
    return func


class _Recorder(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch: untyped
    def __init__(self, modules: ModuleStack | None = None, sites: CallSites | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ops: list[OpIO] = []
        self._modules = modules
        self._sites = sites
        self.failed: tuple[str, BaseException] | None = None  # the op that raised, and why

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        func = _overload_taking_numbers(func, args)
        try:
            out = func(*args, **kwargs)
        except Exception as exc:  # TorchScript's interpreter drops the message: keep it here
            if self.failed is None:
                self.failed = (str(func), exc)
            raise
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
        name = str(schema.name)  # e.g. "aten::max_pool2d_with_indices"
        try:
            found = indirect_target(name, schema, args, kwargs, out)
        except Exception:  # arguments this rule cannot read: the op counts whole, as before
            found = None
        self.ops.append(
            OpIO(
                op=name,
                inputs=tuple(_ref(t) for t in flat_in if isinstance(t, torch.Tensor)),
                outputs=tuple(_ref(t) for t in flat_out if isinstance(t, torch.Tensor)),
                mutated=tuple(mutated),
                aliases_input=aliases,
                flops=flops,
                indirect=found[1] if found else None,
                module=None if self._modules is None else self._modules.current or "",
                lines=() if self._sites is None else self._sites.here(),
            )
        )
        return out


def record_tensor_io(
    fn: Callable[..., Any],
    inputs: tuple[torch.Tensor, ...],
    sync: Callable[[], None],
    root: torch.nn.Module | None = None,
    script_root: torch.nn.Module | None = None,
) -> list[OpIO]:
    """Run one forward call and return the tensor I/O of every dispatched operation, in order;
    with `root` (the module `fn` runs), each op's module path and user source lines too; with
    `script_root` (the TorchScript module `fn` runs), each op's module path from the profiler's
    TorchScript module hierarchy (capture/script_modules.py). An operation that raises is named
    (TensorIOFailed), with its own message."""
    if script_root is not None:
        return _with_script_modules(fn, inputs, sync, script_root)
    modules = None if root is None else ModuleStack(root)
    # the walk stops where _run_recording calls the model: the frames above are profreport's
    # caller's (a test, a notebook), never the model's
    sites = None if root is None else CallSites(boundary=_run_recording.__code__)
    recorder = _Recorder(modules, sites)
    with modules.tracking() if modules is not None else nullcontext():
        _run_recording(recorder, fn, inputs)
    sync()
    return recorder.ops


def _run_recording(
    recorder: _Recorder, fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...]
) -> None:
    """One forward under `recorder`; an operation that raised is named (TensorIOFailed)."""
    try:
        with recorder:
            fn(*inputs)
    except Exception as exc:
        if recorder.failed is None:
            raise
        op, error = recorder.failed
        raise TensorIOFailed(
            f"{op} raised {error_line(error)} (while recording tensor I/O for the bytes model)"
        ) from exc


def _with_script_modules(
    fn: Callable[..., Any],
    inputs: tuple[torch.Tensor, ...],
    sync: Callable[[], None],
    scripted: torch.nn.Module,
) -> list[OpIO]:
    from profreport.capture.script_modules import ModuleResolver, dispatch_hierarchies

    recorder = _Recorder()

    def forward() -> None:
        _run_recording(recorder, fn, inputs)
        sync()

    hierarchies = dispatch_hierarchies(forward)
    if hierarchies is None or len(hierarchies) != len(recorder.ops):
        return recorder.ops  # the events do not line up with the ops: nothing attributed
    resolver = ModuleResolver(scripted)
    return [
        dataclasses.replace(op, module=resolver.path(h))
        for op, h in zip(recorder.ops, hierarchies, strict=True)
    ]
