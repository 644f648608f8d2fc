"""Kineto event categories: the one place that says what a category holds.

Read by the row builder (which records keep their byte sizes or args) and by the counting code
(analysis/kernels: what is a device activity, a launch API call, a CPU operator, a step).
Runtime categories are matched lower-cased: Kineto wrote "Runtime" before it wrote
"cuda_runtime", and ROCm and PrivateUse1 backends have their own.
"""

from __future__ import annotations

# Device activity categories (old and new Kineto spellings) -> the kind of device work.
DEVICE_KINDS = {
    "kernel": "kernel",
    "Kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
}
# Runtime / driver API calls, lower-cased.
RUNTIME_CATS = frozenset(
    {"cuda_runtime", "cuda_driver", "runtime", "driver", "hip_runtime", "hip_driver"}
    | {"privateuse1_runtime", "privateuse1_driver"}
)
# Profiled operators (old and new spellings).
CPU_OP_CATS = frozenset({"cpu_op", "Operator"})
# Where ProfilerStep#N ranges are recorded.
STEP_CATS = frozenset({"user_annotation", "cpu_op", "Operator", "User annotation"})
