"""Attach modeled bytes to the rows of a mode's kernel table.

The bytes model works per operation (what the dispatcher, the TorchScript graph or Inductor's
scheduler sees); the kernel table lists what the profiler recorded. A kernel row takes the bytes of
the operation it ran under: its own name, else the op that launched it, else the outermost op
around it (with the composite names the dispatcher never sees mapped to the op it does see:
conv2d -> convolution, linear -> addmm, ...; an AOTInductor shim call, aoti_torch_cuda_mm_out, to
the op it stands for, aten::mm). When several kernels run under one operation (a
cuDNN convolution launching two kernels), each row carries the operation's bytes and says how many
kernels share them. Inductor's generated kernels take the bytes of the scheduler nodes that code
generation put into them, matched by the kernel's exact name (see the fusion map's `per_kernel`).
TorchScript's NNC kernels take the bytes of their fusion group (the tensors crossing its boundary,
from the graph's types): NNC names a group's kernel `fused_` + its aten ops joined by `_`, cut and
ended with a hash when long, so a kernel matches the group whose name it is or begins.
"""

from __future__ import annotations

from collections import Counter

from profreport.analysis.kernel_definitions import aoti_shim_op
from profreport.record.model import KernelRow, KernelTraffic, OkMode

# Composite ops recorded by the profiler -> the op the dispatcher-level bytes model records.
_DISPATCH_NAME = {
    "aten::conv1d": "aten::convolution",
    "aten::conv2d": "aten::convolution",
    "aten::conv3d": "aten::convolution",
    "aten::_convolution": "aten::convolution",
    "aten::linear": "aten::addmm",
    "aten::matmul": "aten::mm",
    "aten::layer_norm": "aten::native_layer_norm",
    "aten::batch_norm": "aten::native_batch_norm",
    "aten::max_pool2d": "aten::max_pool2d_with_indices",
    "aten::to_dense": "aten::_to_dense",
}


def _candidates(row: KernelRow) -> list[str]:
    names = []
    for name in (row.name, row.launched_by, row.launched_by_top):
        if name:
            # an AOTInductor shim call stands for its op: the library kernels a CUDA export
            # launches from aoti_torch_cuda_mm_out take the bytes of aten::mm
            names += [name, _DISPATCH_NAME.get(name, name), aoti_shim_op(name) or name]
    return list(dict.fromkeys(names))


def _nnc_traffic(mode: OkMode) -> dict[str, KernelTraffic]:
    """The modeled bytes of each NNC kernel name (groups of one name summed)."""
    groups = (mode.compiler.fusion_groups if mode.compiler is not None else None) or ()
    found: dict[str, KernelTraffic] = {}
    for g in groups:
        if g.read is None or g.written is None:
            continue
        # the name NNC gives the group's kernel before any cut: fused_sigmoid_tanh_mul
        name = "_".join(["fused", *(op.split("::")[1] for op in g.ops if op.startswith("aten::"))])
        was = found.get(name, KernelTraffic(read=0, written=0))
        found[name] = KernelTraffic(
            read=(was.read or 0) + g.read, written=(was.written or 0) + g.written
        )
    return found


def _nnc_match(name: str, traffic: dict[str, KernelTraffic]) -> KernelTraffic | None:
    """A kernel's NNC group: its exact name, or a cut name (a hash after the last `_`) that
    begins exactly one group's name."""
    if name in traffic:
        return traffic[name]
    if not name.startswith("fused_") or "_" not in name[6:]:
        return None
    stem = name.rsplit("_", 1)[0]
    begun = [t for n, t in traffic.items() if n.startswith(stem) and len(n) > len(name)]
    return begun[0] if len(begun) == 1 else None


def kernel_bytes(mode: OkMode) -> tuple[KernelRow, ...]:
    """The kernel rows of `mode` (in table order) with their modeled bytes: `bytes_read`,
    `bytes_written`, `bytes_op` and `bytes_shared_by`, and the operation's FLOPs (`flops`,
    `flops_per_byte`) where torch's flop counter has a formula; rows with no matching operation
    get None, never 0. Inductor's generated kernels take their bytes from the fusion map
    (`per_kernel`)."""
    ops = {r.op: r for r in mode.bytes.table}
    # compile's library calls are recorded as "extern <op>": findable by the op's own name.
    ops.update({r.op.removeprefix("extern "): r for r in mode.bytes.table})
    # Inductor's generated kernels, by their exact name (a kernel called twice sums both calls).
    by_kernel = (mode.fusion.per_kernel if mode.fusion is not None else None) or {}
    nnc = _nnc_traffic(mode)
    matches = {
        r.name: next((c for c in _candidates(r) if c in ops), None) for r in mode.kernels.table
    }
    shared = Counter(op for op in matches.values() if op is not None)
    found: list[KernelRow] = []
    for row in mode.kernels.table:
        op = matches[row.name]
        if op is not None:
            o = ops[op]
            total = o.read + o.written
            found.append(
                row.adding(
                    bytes_read=o.read,
                    bytes_written=o.written,
                    bytes_op=op,
                    bytes_shared_by=shared[op],
                    flops=o.flops,
                    flops_per_byte=None if o.flops is None or total == 0 else o.flops / total,
                )
            )
            continue
        traffic, source = by_kernel.get(row.name), "Inductor scheduler node(s)"
        if traffic is None:
            traffic, source = _nnc_match(row.name, nnc), "TorchScript fusion group (graph types)"
        found.append(
            row.adding(
                bytes_read=None if traffic is None else traffic.read,
                bytes_written=None if traffic is None else traffic.written,
                bytes_op=None if traffic is None else source,
                bytes_shared_by=0 if traffic is None else 1,
            )
        )
    return tuple(found)
