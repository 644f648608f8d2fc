"""bench/ab_gate.py's base: an MLP block (LayerNorm, Linear, GELU, Linear, residual)."""

import torch

from .config import REPEATS


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(256)
        self.up = torch.nn.Linear(256, 1024)
        self.down = torch.nn.Linear(1024, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(REPEATS):  # the head in ../double/ runs the block twice: twice the work
            x = x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))
        return x


def build():
    torch.manual_seed(0)
    return Block(), (torch.randn(64, 256),)
