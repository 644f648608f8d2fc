"""The kernel-diff tests' head: Linear, GELU, Linear, then LayerNorm (a different file, a
different activation and one more op)."""

import torch


class GeluNormBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(64, 128)
        self.down = torch.nn.Linear(128, 64)
        self.norm = torch.nn.LayerNorm(64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.down(torch.nn.functional.gelu(self.up(x))))


def build():
    torch.manual_seed(0)
    return GeluNormBlock(), (torch.randn(32, 64),)
