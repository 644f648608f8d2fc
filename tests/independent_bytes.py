"""An independent count of eager's modeled reads, to check the bytes model against: written
from the dispatched ops' schemas and tensors alone, sharing no code with profreport's
capture/opio.py or analysis/bytes_model.py (test_gather_bytes.py, test_real_models_gate.py)."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from profreport.analysis.kernels import BOOKKEEPING_OPS


def _key(t: torch.Tensor) -> tuple:
    return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)


class GatherAwareReads(TorchDispatchMode):
    """Independent reference for the eager figure: each dispatched op that is not bookkeeping
    and does not return a view reads its distinct input tensors, except that a lookup reads
    only the rows it returns (capped at the table) of the table it looks up in, and an in-place
    index_put_ without accumulate writes its destination without reading it."""

    # the looked-up tensor is the first argument of each
    LOOKUPS = frozenset({"aten::embedding", "aten::index", "aten::index_select", "aten::gather"})
    # the destination (first argument) is only written, unless `accumulate` is set
    PUTS = frozenset({"aten::index_put_", "aten::_index_put_impl_"})

    def __init__(self):
        super().__init__()
        self.read = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = str(func._schema.name)
        returns_view = any(
            r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns
        )
        if name in BOOKKEEPING_OPS or returns_view:
            return out
        tensors = {}
        for t in tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor):
                tensors[_key(t)] = t.numel() * t.element_size()
        if name in self.LOOKUPS:
            key = _key(args[0])
            tensors[key] = min(tensors[key], out.numel() * out.element_size())
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        if name in self.PUTS and not accumulate:
            tensors.pop(_key(args[0]))
        self.read += sum(tensors.values())
        return out
