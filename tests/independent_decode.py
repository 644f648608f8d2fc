"""An independent count of one eager decode step: its dispatched kernels and its bytes, from
the dispatched ops' schemas and tensors alone (no code shared with profreport's capture), to
check a decode run's eager kernels and modeled bytes per token against (test_decode_e2e.py)."""

import torch
from torch.utils._pytree import tree_leaves

from profreport.analysis.kernels import BOOKKEEPING_OPS
from tests.independent_bytes import GatherAwareReads


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class StepCount(GatherAwareReads):
    """GatherAwareReads' reads, plus the kernels (dispatched ops that are not bookkeeping) and
    what they write: each distinct output, an in-place op's destination; index_copy_ (the cache
    update) writes only the slices its source holds and reads none of its destination.

    One known difference from the profiler's CPU kernels: `where` with a Python scalar is one
    recorded operator (aten::where) that the dispatcher sees decomposed into scalar_tensor +
    where.self; `scalar_wheres` counts those pairs, and `profiled_kernels` takes them out."""

    def __init__(self):
        super().__init__()
        self.kernels = 0
        self.written = 0
        self.scalar_wheres = 0
        self._last = ""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func._schema.name)
        out = super().__torch_dispatch__(func, types, args, kwargs)
        returns_view = any(
            r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns
        )
        if name in BOOKKEEPING_OPS or returns_view:
            return out
        self.kernels += 1
        last, self._last = self._last, name
        if name == "aten::where" and last == "aten::scalar_tensor":
            self.scalar_wheres += 1
        if name == "aten::index_copy_":
            self.read -= _nbytes(args[0])
            self.written += _nbytes(args[3] if len(args) > 3 else kwargs["source"])
            return out
        outs = {}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                outs[(t.data_ptr(), tuple(t.shape), t.dtype)] = _nbytes(t)
        self.written += sum(outs.values())
        return out

    @property
    def profiled_kernels(self) -> int:
        return self.kernels - self.scalar_wheres


def count_step(step, inputs) -> StepCount:
    counter = StepCount()
    with torch.no_grad(), counter:
        step(*inputs)
    return counter
