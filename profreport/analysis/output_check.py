"""Does a mode compute what eager computes? Its output tensors against eager's, pairwise.

Both outputs are flattened the same way (`modes/outputs.flatten_output`: pytree order, tensor
leaves only) and compared pair by pair in float64 (complex128 for complex tensors):

- abs error of a pair = max |actual - expected| over its elements; max_abs_err = the largest over
  pairs. A NaN in both at the same place, or the same infinity, counts as equal; a NaN or infinity
  on one side only makes the error infinite.
- rel error of a pair = its abs error / max(max |expected|, tiny), tiny = the smallest normal
  float64: norm-wise (infinity norm), so an element of eager's output near zero does not blow it
  up; max_rel_err = the largest over pairs.
- a pair is within tolerance when abs error <= atol + rtol * max |expected|: torch.allclose's
  rule in the infinity norm. Compilers reorder reductions and fuse pointwise chains, and the
  rounding differences that follow scale with the magnitude of the values summed, not with each
  output element, so an element-wise rule flags noise wherever an output crosses zero.

Tolerances (rtol, atol) per dtype of eager's tensor, from torch.testing: float64 (1e-5, 1e-8),
float32 (1e-4, 1e-5) and float16 (1e-3, 1e-3) are the defaults of `torch.testing.assert_allclose`,
sized for results of whole computations (`assert_close`'s float32 rtol of 1.3e-6 is one op's
rounding, tighter than a compiled model reproduces); bfloat16 (1.6e-2, 1e-5) is `assert_close`'s
(`assert_allclose` has none); complex types take their real type's; other floating types (float8)
rtol = 2 x machine epsilon, atol 1e-5; integers and bool must be equal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from profreport.record.model import OutputCheck

# (rtol, atol) by dtype; see the module docstring for where they come from.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-5, 1e-8),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.complex128: (1e-5, 1e-8),
    torch.complex64: (1e-4, 1e-5),
    torch.complex32: (1e-3, 1e-3),
}
TINY = torch.finfo(torch.float64).tiny


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol) for comparing outputs of `dtype`."""
    if dtype in TOLERANCES:
        return TOLERANCES[dtype]
    if dtype.is_floating_point:
        return 2 * torch.finfo(dtype).eps, 1e-5
    return 0.0, 0.0


@dataclass(frozen=True)
class _Pair:
    abs_err: float
    rel_err: float
    rtol: float
    atol: float
    allowed: float


def _wide(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.complex128 if t.is_complex() else torch.float64)


def _compare_pair(actual: torch.Tensor, expected: torch.Tensor) -> _Pair:
    rtol, atol = tolerance(expected.dtype)
    a, b = _wide(actual.to(expected.device)), _wide(expected)
    if b.numel() == 0:
        return _Pair(0.0, 0.0, rtol, atol, atol)
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    diff = torch.where(same, torch.zeros((), dtype=torch.float64), (a - b).abs())
    diff = torch.nan_to_num(diff, nan=math.inf)
    abs_err = float(diff.max())
    finite = b[torch.isfinite(b)].abs()
    scale = float(finite.max()) if finite.numel() else 0.0
    rel_err = abs_err / max(scale, TINY)
    return _Pair(abs_err, rel_err, rtol, atol, atol + rtol * scale)


def _used_allowance(p: _Pair) -> float:
    if p.allowed > 0:
        return p.abs_err / p.allowed
    return 0.0 if p.abs_err == 0 else math.inf


def _fmt_shape(t: torch.Tensor) -> str:
    return "x".join(str(s) for s in t.shape) or "scalar"


def compare_outputs(
    actual: Sequence[torch.Tensor], expected: Sequence[torch.Tensor]
) -> OutputCheck:
    """Compare a mode's output tensors (`actual`) with eager's (`expected`), pairwise in order."""
    notes: list[str] = []
    if len(actual) != len(expected):
        notes.append(
            f"output structure differs: {len(actual)} tensor(s), eager has {len(expected)}"
        )
    pairs: list[_Pair] = []
    for i, (a, b) in enumerate(zip(actual, expected, strict=False)):
        if a.shape != b.shape:
            notes.append(
                f"tensor {i}: shape {_fmt_shape(a)}, eager's {_fmt_shape(b)} (not compared)"
            )
            continue
        if a.dtype != b.dtype:
            notes.append(
                f"tensor {i}: dtype {str(a.dtype).removeprefix('torch.')}, "
                f"eager's {str(b.dtype).removeprefix('torch.')}"
            )
        pairs.append(_compare_pair(a, b))
    if any(math.isinf(p.abs_err) for p in pairs):
        notes.append("NaN or infinity where eager's output differs")
    if not pairs:
        if not actual and not expected:
            return OutputCheck(None, None, None, None, None, 0, "no tensor outputs to compare")
        return OutputCheck(None, None, None, None, False, 0, "; ".join(notes))
    worst = max(pairs, key=_used_allowance)
    within = not notes and all(p.abs_err <= p.allowed for p in pairs)
    return OutputCheck(
        max_abs_err=max(p.abs_err for p in pairs),
        max_rel_err=max(p.rel_err for p in pairs),
        atol=worst.atol,
        rtol=worst.rtol,
        within_tolerance=within,
        compared_tensors=len(pairs),
        note="; ".join(notes),
    )
