"""Two model files with the same file and module name, in two folders, with relative imports,
load side by side in one process (what `profreport ab` does with base and head)."""

from __future__ import annotations

import sys

import torch

from profreport.models import load_model

HELPER = "SCALE = {scale}\n"
MODEL = """
import torch
from .helper import SCALE


class Block(torch.nn.Module):
    def forward(self, x):
        return x * SCALE


def build():
    return Block(), (torch.ones(2),)
"""


def _tree(root, scale):
    root.mkdir()
    (root / "helper.py").write_text(HELPER.format(scale=scale))
    (root / "block.py").write_text(MODEL)
    return f"{root / 'block.py'}:build"


def test_same_named_files_with_relative_imports_do_not_collide(tmp_path):
    base = load_model(_tree(tmp_path / "base", 2), torch.device("cpu"), torch.float32)
    head = load_model(_tree(tmp_path / "head", 3), torch.device("cpu"), torch.float32)
    assert base.module(*base.example_inputs).tolist() == [2.0, 2.0]
    assert head.module(*head.example_inputs).tolist() == [3.0, 3.0]
    b_mod, h_mod = type(base.module).__module__, type(head.module).__module__
    assert b_mod != h_mod
    assert b_mod.endswith(".block") and h_mod.endswith(".block")
    # Each file's relative import resolved inside its own folder's package.
    assert sys.modules[b_mod.rsplit(".", 1)[0] + ".helper"].SCALE == 2
    assert sys.modules[h_mod.rsplit(".", 1)[0] + ".helper"].SCALE == 3
    assert base.name == head.name == "block:build"
