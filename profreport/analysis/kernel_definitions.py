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
    "TorchScript NNC fused CPU kernel (fused_*), or an AOTInductor shim call that runs an "
    "operator's kernel directly (export's aoti_torch_cpu_mm_out, recorded with no operator "
    "beneath it: counted as that operator, aten::mm, with the shim as what launched it), and that "
    "runs inside no other such operator. "
    "What runs inside it is its work (addmm copying its bias, index_select under embedding, "
    "clamp_min under relu, sum and div_ under mean, the clone a layer norm makes of its input), "
    "so the kernel table and the bytes table name the same operator. "
    "Containers (forward, compiled regions, autograd nodes, ProfilerStep) and AOTInductor "
    "runtime helpers that stand for no operator are never kernels. "
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


# AOTInductor's C++ wrapper runs each library (extern) op through a C shim and, built with
# `cpp.enable_kernel_profile`, records the call under the shim's name:
# aoti_torch_<device>_<op>[_<overload>][_v<N>] (torchgen's unambiguous name of the op's overload).
# The shim calls the op's kernel directly, so nothing of the op is recorded beneath it.
# A few shims carry no device (ir.py); every other aoti_torch_* name (aoti_torch_empty_strided,
# aoti_torch_proxy_executor_call_function, ...) is a runtime helper, standing for no op.
AOTI_SHIM_RE = re.compile(
    r"^aoti_torch_(?:(?:cpu|cuda|xpu|mps)_(?P<op>\w+?)|(?P<bare>copy_|index_put_out|_mm_plus_mm_out))"
    r"(?:_v\d+)?$"
)
# The overload names AOTInductor's shims carry (torchgen/aoti/fallback_ops.py, mkldnn_ir.py).
_SHIM_OVERLOAD_NAMES = """
out Tensor Scalar Tensor_Scalar Tensor_Tensor Scalar_Tensor bin_ct default dim dtype dtype_out float
generator int low low_dtype low_out quantized self source_Tensor src_out stable two_out value_out
tensor binary binary_tensor
"""
_SHIM_OVERLOADS = sorted(_SHIM_OVERLOAD_NAMES.split(), key=len, reverse=True)  # longest first
# Shims of ops outside aten (Inductor's mkldnn_ir), by the op name the shim carries.
_SHIM_NAMESPACES = {
    "_linear_pointwise": "mkldnn::_linear_pointwise",
    "_qconv_pointwise": "onednn::qconv_pointwise",
    "_qconv2d_pointwise": "onednn::qconv2d_pointwise",
    "_qlinear_pointwise": "onednn::qlinear_pointwise",
    "_weight_int4pack_mm_cpu": "quantized::int4mm_packed_weight_cpu",
    "_c10d_functional_all_reduce": "_c10d_functional::all_reduce",
    "_c10d_functional_all_reduce_": "_c10d_functional::all_reduce_",
    "_c10d_functional_wait_tensor": "_c10d_functional::wait_tensor",
}


def aoti_shim_op(name: str) -> str | None:
    """The operator an AOTInductor shim call stands for (aoti_torch_cpu_mm_out -> aten::mm,
    aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu -> aten::_scaled_dot_product_
    flash_attention_for_cpu, aoti_torch_cpu_mkldnn__convolution_pointwise -> mkldnn::_convolution_
    pointwise); None for any other name. The overload suffix is removed where it is one a shim
    carries (an op whose own name ends in one, such as unique_dim, loses it too)."""
    found = AOTI_SHIM_RE.match(name)
    if found is None:
        return None
    op = found["op"] or found["bare"]
    for overload in _SHIM_OVERLOADS:
        if op.endswith("_" + overload) and len(op) > len(overload) + 1:
            op = op[: -len(overload) - 1]
            break
    if op in _SHIM_NAMESPACES:
        return _SHIM_NAMESPACES[op]
    if op.startswith("mkldnn_"):
        return "mkldnn::" + op.removeprefix("mkldnn_")
    return "aten::" + op


# TorchScript's NNC fuser names its CPU kernels "fused_" + the fused node kinds.
NNC_CPU_KERNEL_RE = re.compile(r"^fused_\w+$")
NOT_DISPATCHER_NAMESPACES = frozenset({"autograd", "torch", "c10", "profiler"})
