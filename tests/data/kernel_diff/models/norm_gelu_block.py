"""The kernel-diff tests' second head: LayerNorm first, then Linear, GELU, Linear: the same
ops as gelu_norm_block in another order, so Inductor numbers its kernels differently."""

import torch


class NormGeluBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(64)
        self.up = torch.nn.Linear(64, 128)
        self.down = torch.nn.Linear(128, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def build():
    torch.manual_seed(0)
    return NormGeluBlock(), (torch.randn(32, 64),)
