"""The kernel-diff tests' base for a fusion change: GELU, then a graph break, then a multiply,
so that torch.compile runs the two as separate kernels."""

import torch


class GeluMulApart(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.gelu(x)
        torch._dynamo.graph_break()
        return y * 2.0


def build():
    torch.manual_seed(0)
    return GeluMulApart(), (torch.randn(64, 256),)
