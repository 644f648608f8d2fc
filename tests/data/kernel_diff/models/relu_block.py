"""The kernel-diff tests' base: Linear, ReLU, Linear."""

import torch


class ReluBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(64, 128)
        self.down = torch.nn.Linear(128, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


def build():
    torch.manual_seed(0)
    return ReluBlock(), (torch.randn(32, 64),)
