"""Models torch.export cannot capture, one per common failure, each failing on the line marked
`# FAILS`: `profreport generate --model tests/data/models/export_failures.py:build_item_branch
--modes eager,export`. scripts/record-export-failures records what torch says for each
(tests/data/export_failures.json), read by tests/test_capture_errors.py."""

import numpy as np
import torch
from torch import nn


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)


class ItemBranch(_Block):
    """A branch on a tensor's value, read with .item() (issue 46's model)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        if h.mean().item() > 0:  # FAILS
            return h.relu()
        return h.sigmoid()


class TensorBranch(_Block):
    """A branch on a tensor's truth value."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        if h.sum() > 0:  # FAILS
            return h.relu()
        return h


class ItemSize(_Block):
    """A count read with .item() and made a Python int for a size."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        n = int((h > 0).sum().item())  # FAILS
        return torch.zeros(n) + 1


class TolistBranch(_Block):
    """A branch on a value read with .tolist()."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        if h.sum(0).tolist()[0] > 0:  # FAILS
            return h.relu()
        return h


class NonzeroLength(_Block):
    """len() of a tensor whose size depends on the data."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        found = h.flatten().nonzero()
        if len(found) > 3:  # FAILS
            return h.relu()
        return h


class NumpyCall(_Block):
    """NumPy on a tensor's data inside forward."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        return torch.from_numpy(np.tanh(h.detach().numpy()))  # FAILS


class GraphBreak(_Block):
    """An explicit graph break: fine for non-strict export, fatal under fullgraph capture."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        torch._dynamo.graph_break()  # FAILS
        return h.relu()


MODELS = {
    "item_branch": ItemBranch,
    "tensor_branch": TensorBranch,
    "item_size": ItemSize,
    "tolist_branch": TolistBranch,
    "nonzero_length": NonzeroLength,
    "numpy_call": NumpyCall,
    "graph_break": GraphBreak,
}


def _build(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return MODELS[name]().eval(), (torch.randn(4, 8),)


def build_item_branch() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _build("item_branch")


def build_graph_break() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _build("graph_break")
