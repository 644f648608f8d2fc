"""The kernel-diff tests' head for a fusion change: GELU then a multiply, with no graph break,
so that torch.compile fuses the two into one kernel."""

import torch


class GeluMulFused(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x) * 2.0


def build():
    torch.manual_seed(0)
    return GeluMulFused(), (torch.randn(64, 256),)
