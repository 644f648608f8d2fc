"""The machine reference: a short fixed workload timed inside the latency rounds.

Two parts, the same work in every run on a device type: `matmul`, compute-bound (`torch.mm` of
two square float32 matrices), and `copy`, memory-bound (`Tensor.copy_` of a float32 tensor a few
times the size of a CPU's last-level cache, or far beyond a GPU's L2). capture/timing.py times
them one call per block in the same rounds as the modes, within REFERENCE_SHARE of the rounds'
time, so they saw the machine as the modes did. Across runs, `compare` reads each mode's latency
against them (analysis/machine_reference.py): a latency that moved as much as the reference did
is the machine, not the code. The ceilings (capture/ceilings.py) stay what the roofline uses:
they are cached per machine, so they cannot say which state one run met.
"""

from __future__ import annotations

import torch

from profreport.capture.timing import Reference

MiB = 2**20
# The reference's blocks take at most this share of the rounds' time (issue 40: "a few percent
# of the timing budget"; bench/machine_reference.py measures what it costs).
REFERENCE_SHARE = 0.04
# Sizes per device type, fixed so that two runs on one machine time the same work. CPU: a
# matmul of about 0.1 GFLOP and a 32 MiB copy (64 MiB moved, twice the 32 MiB last-level cache of
# the 2-vCPU development machine): a few ms each. CUDA: 4096^2 (137 GFLOP) and 256 MiB, far
# beyond any GPU's L2 (H200: 50 MB).
MATMUL_N = {"cpu": 384, "cuda": 4096}
COPY_BYTES = {"cpu": 32 * MiB, "cuda": 256 * MiB}
METHOD = (
    "timed in the latency rounds beside the modes, one call per block, in at most "
    f"{REFERENCE_SHARE:.0%} of the rounds' time; per part the median per-call time and the 95% "
    "percentile-bootstrap interval of that median"
)


def reference_workload(device: torch.device) -> tuple[Reference, dict[str, str]]:
    """The reference's parts on `device` (its tensors allocated), and the work each does."""
    kind = "cuda" if device.type == "cuda" else "cpu"
    n, copy_bytes = MATMUL_N[kind], COPY_BYTES[kind]
    gen = torch.Generator(device="cpu").manual_seed(0)
    a = torch.rand(n, n, generator=gen).to(device)
    b = torch.rand(n, n, generator=gen).to(device)
    product = torch.empty(n, n, device=device)
    src = torch.ones(copy_bytes // 4, device=device)
    dst = torch.empty_like(src)

    def matmul() -> None:
        torch.mm(a, b, out=product)

    def copy() -> None:
        dst.copy_(src)

    work = {
        "matmul": f"torch.mm of two {n}x{n} float32 matrices ({2 * n**3 / 1e9:.3g} GFLOP)",
        "copy": f"Tensor.copy_ of {copy_bytes // MiB} MiB float32 ({2 * copy_bytes // MiB} MiB "
        "read + written)",
    }
    return Reference({"matmul": matmul, "copy": copy}, REFERENCE_SHARE), work
