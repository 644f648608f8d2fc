"""A held-out model for the attribution tests: three identical blocks in a ModuleList, each a
Linear, GELU x sigmoid (one line, fused by Inductor) and a `down` Linear."""

import torch
from torch import nn


class Mixer(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, width)
        self.down = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        h = torch.nn.functional.gelu(h) * torch.sigmoid(h)  # GATE_LINE
        return self.down(h)


class MixerBlocks(nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.mixers = nn.ModuleList(Mixer(width) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for mixer in self.mixers:
            x = mixer(x)
        return x


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return MixerBlocks().eval(), (torch.randn(4, 32),)
