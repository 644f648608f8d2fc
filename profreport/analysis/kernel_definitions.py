"""What counts as a kernel: the op lists, the definition texts every count quotes, and the name
patterns of launch calls, profiler steps, dispatcher ops and compiler-generated CPU kernels.

BOOKKEEPING_OPS (metadata, allocation and aliasing ops that move no data): ``aten::`` empty,
empty_strided, empty_like, new_empty, new_empty_strided, resize_, as_strided, as_strided_, view,
_unsafe_view, reshape, _reshape_alias, view_as, flatten, unflatten, squeeze, squeeze_, unsqueeze,
unsqueeze_, expand, expand_as, broadcast_to, permute, movedim, transpose, transpose_, swapaxes,
t, numpy_T, select, slice, narrow, unfold, diagonal, split, split_with_sizes, unsafe_split,
tensor_split, chunk, unsafe_chunk, unbind, alias, detach, detach_, lift, lift_fresh, set_, to,
type_as, contiguous, dropout, feature_dropout, item, _local_scalar_dense, size, stride, dim,
numel, sym_size, sym_stride, sym_numel, is_contiguous, result_type, is_nonzero, is_same_size,
resolve_conj, resolve_neg, _conj, conj, _neg_view, view_as_real, view_as_complex,
_has_compatible_shallow_copy_type, record_stream; ``inductor::_reinterpret_tensor``; and the
TorchScript ``prim::`` glue ops ListConstruct, ListUnpack, TupleConstruct, TupleUnpack,
Constant, GetAttr, NumToTensor, device, dtype. (aten::to / contiguous / dropout are leaves only
when they are no-ops; when they copy, their child ``copy_`` is the kernel.)
"""

from __future__ import annotations

import re

_ATEN_BOOKKEEPING = """
empty empty_strided empty_like new_empty new_empty_strided resize_ as_strided as_strided_ view
_unsafe_view reshape _reshape_alias view_as flatten unflatten squeeze squeeze_ unsqueeze unsqueeze_
expand expand_as broadcast_to permute movedim transpose transpose_ swapaxes t numpy_T select slice
narrow unfold diagonal split split_with_sizes unsafe_split tensor_split chunk unsafe_chunk unbind
alias detach detach_ lift lift_fresh set_ to type_as contiguous dropout feature_dropout item
_local_scalar_dense size stride dim numel sym_size sym_stride sym_numel is_contiguous result_type
is_nonzero is_same_size resolve_conj resolve_neg _conj conj _neg_view view_as_real view_as_complex
_has_compatible_shallow_copy_type record_stream
"""
_PRIM_BOOKKEEPING = (
    "ListConstruct ListUnpack TupleConstruct TupleUnpack Constant GetAttr NumToTensor device dtype"
)
# Operators that only forward to other operators (CompositeImplicitAutograd in ATen: the
# dispatcher decomposes them before any kernel runs, so the bytes model never sees them) and
# TorchScript control/grouping nodes. A CPU kernel is never one of these but the operator they
# forward to: conv2d -> convolution, linear -> addmm, layer_norm -> native_layer_norm.
_ATEN_FORWARDING = """
conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d linear bilinear matmul
einsum layer_norm group_norm instance_norm batch_norm _batch_norm_impl_index rms_norm dropout
feature_dropout alpha_dropout scaled_dot_product_attention max_pool1d max_pool2d max_pool3d
avg_pool1d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_max_pool1d softmax log_softmax
cross_entropy_loss nll_loss nll_loss_nd pad diff square multiply divide subtract true_divide
"""
_PRIM_FORWARDING = (
    "If Loop CallFunction CallMethod DifferentiableGraph RequiresGradCheck TypeCheck BailOut "
    "TensorExprGroup TensorExprDynamicGroup FusionGroup CudaFusionGroup"
)
FORWARDING_OPS: frozenset[str] = frozenset(
    [f"aten::{op}" for op in _ATEN_FORWARDING.split()]
    + [f"prim::{op}" for op in _PRIM_FORWARDING.split()]
)
BOOKKEEPING_OPS: frozenset[str] = frozenset(
    [f"aten::{op}" for op in _ATEN_BOOKKEEPING.split()]
    + [f"prim::{op}" for op in _PRIM_BOOKKEEPING.split()]
    + ["inductor::_reinterpret_tensor"]
)

DEVICE_DEFINITION_TEXT = (
    "Device definition: a kernel is a device activity event whose category is `kernel`; copies "
    "and fills are `gpu_memcpy` / `gpu_memset` events (bytes from the event, or from its API call "
    "when only the call records them). A launch is a runtime/driver API call that starts device "
    "work (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch, hipLaunchKernel, "
    "hipExtModuleLaunchKernel and their variants); one graph launch runs many kernels and is also "
    "counted as a graph launch. Each kernel is tied to its launch by correlation id and to the "
    "innermost CPU operator around that launch; kernels with no launch found are counted as "
    "unlinked, never dropped. Counts are per ProfilerStep when the trace has steps. "
    "A trace of CUPTI per-kernel counters (cuda_profiler_range events, no kernel events) counts "
    "each range as one kernel; ranges carry no correlation id, so the i-th range in time is paired "
    "with the i-th launch call when their numbers are equal (as HTA's counter analysis does), and "
    "their synthetic durations are never shown as kernel time."
)
CPU_DEFINITION_TEXT = (
    "CPU definition: a CPU kernel is the operator the model called: a profiled operator "
    "(`cpu_op`) that is a dispatcher operator (aten::, mkldnn::, quantized::, prim:: ...) other "
    "than the documented bookkeeping ops that only allocate, alias or reshape (aten::empty, view, "
    "reshape, as_strided, t, ...) and other than operators that only forward to another "
    "(conv2d -> convolution, linear -> addmm, layer_norm -> native_layer_norm, matmul, "
    "scaled_dot_product_attention, ...), an Inductor-generated C++ kernel (cpp_fused_*) or a "
    "TorchScript NNC fused CPU kernel (fused_*), and that runs inside no other such operator. "
    "What runs inside it is its work (addmm copying its bias, index_select under embedding, "
    "clamp_min under relu, sum and div_ under mean, the clone a layer norm makes of its input), "
    "so the kernel table and the bytes table name the same operator. "
    "Containers (forward, compiled regions, autograd nodes, ProfilerStep) are never kernels. "
    "CPU work has no launch API, so there are no launch calls under this definition."
)

KIND_CODE = {"kernel": 1, "memcpy": 2, "memset": 3}
CODE_KIND = {v: k for k, v in KIND_CODE.items()}
LAUNCH_API_RE = re.compile(
    r"^(?:cudaLaunchKernel|cudaLaunchKernelExC|cuLaunchKernel|cuLaunchKernelEx|"
    r"cudaLaunchCooperativeKernel|cudaGraphLaunch|hipLaunchKernel|hipExtModuleLaunchKernel|"
    r"hipModuleLaunchKernel|hipGraphLaunch)(?:_ptsz|_ptds)?(?:_v\d+)?$"
)
GRAPH_LAUNCH_RE = re.compile(r"^(?:cudaGraphLaunch|hipGraphLaunch)(?:_ptsz|_ptds)?(?:_v\d+)?$")
STEP_RE = re.compile(r"^ProfilerStep#\d+$")
DISPATCHER_OP_RE = re.compile(r"^([A-Za-z_]\w*)::[A-Za-z_][\w.]*$")
INDUCTOR_CPP_KERNEL_RE = re.compile(r"^(?:graph_\d+_)?cpp_fused_\w*$")
# Every kernel Inductor generates: its C++ kernels on CPU, its Triton kernels (pointwise,
# reduction, persistent and template: triton_poi_ / triton_red_ / triton_per_ / triton_tem_) on
# GPU. Library kernels it calls (cuBLAS, cuDNN, oneDNN) are not generated, whatever their names.
INDUCTOR_KERNEL_RE = re.compile(r"^(?:(?:graph_\d+_)?cpp_fused_\w*|triton_\w+)$")


def is_inductor_kernel(name: str) -> bool:
    """Whether a kernel of the profiler's table is one Inductor generated."""
    return INDUCTOR_KERNEL_RE.match(name) is not None


# TorchScript's NNC fuser names its CPU kernels "fused_" + the fused node kinds.
NNC_CPU_KERNEL_RE = re.compile(r"^fused_\w+$")
NOT_DISPATCHER_NAMESPACES = frozenset({"autograd", "torch", "c10", "profiler"})
