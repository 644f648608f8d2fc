"""Where in the model an operation ran: its module's qualified path (as `named_modules()` names it)
and the user's source lines, taken from evidence: module forward hooks and the Python stack while
the dispatcher runs an op (eager), or the FX node meta Dynamo recorded (`nn_module_stack`,
`stack_trace`) for compiled code.

A source location is at most two `file:line` strings, innermost first: the first frame outside
torch and profreport (the line that ran the op: the user's file, or a model library such as
transformers), then the nearest caller in another file (the line that called that code: GPT-2's
`self.act(hidden_states)` around transformers' activation function). Files are shortened to their
path below site-packages, else to their name.

`PROFREPORT_ATTRIBUTION=0` turns capture off (bench/attribution_cost.py measures what it costs).
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

import torch

ATTRIBUTION_ENV = "PROFREPORT_ATTRIBUTION"
# The frames that are never the user's: torch's own code and profreport's.
_OWN_ROOTS = tuple(
    str(Path(p).resolve().parent) + os.sep
    for p in (torch.__file__, str(Path(__file__).resolve().parent.parent / "__init__.py"))
)
_PROFREPORT_ROOT = _OWN_ROOTS[1]
# The built-in models are model code, though profreport ships them: their lines are the model's.
_BUILTIN_MODELS = _PROFREPORT_ROOT + "models.py"
_STACK_TRACE_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_INDEX = re.compile(r"\[(?:'([^']*)'|(\d+))\]")
_DYNAMO_ROOTS = ("L['self']", "L['fn']", "L['args'][0]", "L['mod']", "self")


def attribution_enabled() -> bool:
    """False when the user (or the cost benchmark) switched attribution off."""
    return os.environ.get(ATTRIBUTION_ENV, "1") != "0"


def short_file(path: str) -> str:
    """A source file as a report shows it: below site-packages, else its name."""
    marker = f"site-packages{os.sep}"
    at = path.rfind(marker)
    return path[at + len(marker) :] if at >= 0 else os.path.basename(path)


def _is_own(path: str) -> bool:
    return path != _BUILTIN_MODELS and path.startswith((*_OWN_ROOTS, "<"))


def user_lines(frames: Sequence[tuple[str, int]]) -> tuple[str, ...]:
    """`file:line` of the innermost user frame and of its nearest caller in another file, from
    frames ordered innermost first (torch's and profreport's frames skipped)."""
    picked: list[tuple[str, int]] = []
    for path, line in frames:
        if not _is_own(path) and (not picked or path != picked[0][0]):
            picked.append((path, line))
            if len(picked) == 2:
                break
    return tuple(f"{short_file(p)}:{n}" for p, n in picked)


def stack_trace_lines(stack_trace: str | None) -> tuple[str, ...]:
    """The user lines of an FX node's `stack_trace` meta (frames listed outermost first)."""
    if not stack_trace:
        return ()
    frames = [(m[1], int(m[2])) for m in _STACK_TRACE_FRAME.finditer(stack_trace)]
    return user_lines(frames[::-1])


def module_path(dynamo_path: str) -> str:
    """A path of Dynamo's `nn_module_stack` ("L['self'].h[1].mlp", "L['self']._modules['h']")
    as `named_modules()` spells it ("h.1.mlp"); "" for the root module."""
    path = dynamo_path
    for root in _DYNAMO_ROOTS:
        if path == root:
            return ""
        if path.startswith(root + ".") or path.startswith(root + "["):
            path = path[len(root) :]
            break
    path = path.replace("._modules[", "[")
    path = _INDEX.sub(lambda m: "." + (m[1] if m[1] is not None else m[2]), path)
    return path.lstrip(".")


def node_module(meta: dict[str, Any]) -> str:
    """The innermost module of an FX node's `nn_module_stack` meta ("" when it has none)."""
    stack = meta.get("nn_module_stack") or {}
    return module_path(str(list(stack.values())[-1][0])) if stack else ""


class ModuleStack:
    """The qualified path of the module whose forward is running, kept by global forward hooks
    on the modules of one root (`named_modules()` paths), while `tracking()` is active."""

    def __init__(self, root: torch.nn.Module) -> None:
        self._names = {id(m): name for name, m in root.named_modules()}
        self._stack: list[str] = []
        self._thread = threading.get_ident()

    @property
    def current(self) -> str | None:
        """The innermost running module's path; None outside the root's forward."""
        return self._stack[-1] if self._stack else None

    def _enter(self, module: torch.nn.Module, _args: Any) -> None:
        name = self._names.get(id(module))
        if name is not None and threading.get_ident() == self._thread:
            self._stack.append(name)

    def _leave(self, module: torch.nn.Module, _args: Any, _out: Any) -> None:
        name = self._names.get(id(module))
        if name is not None and threading.get_ident() == self._thread and self._stack:
            self._stack.pop()

    @contextmanager
    def tracking(self) -> Iterator[ModuleStack]:
        from torch.nn.modules import module as nn_module

        pre = nn_module.register_module_forward_pre_hook(self._enter)
        post = nn_module.register_module_forward_hook(self._leave, always_call=True)
        try:
            yield self
        finally:
            pre.remove()
            post.remove()


class CallSites:
    """The user lines of the Python stack that dispatched an op: frames walked from the innermost
    up to the first profreport frame above the user's code, or to `boundary` (the code that
    called the model), whichever comes first, torch's frames skipped; each code object is
    classified once. Frames above the call into the model (a test, a notebook, the CLI) are
    never the model's."""

    def __init__(self, boundary: CodeType | None = None) -> None:
        self._kind: dict[CodeType, str] = {}  # "torch" | "profreport" | "user"
        self._boundary = boundary

    def _kind_of(self, code: CodeType) -> str:
        kind = self._kind.get(code)
        if kind is None:
            path = code.co_filename
            kind = "profreport" if path.startswith(_PROFREPORT_ROOT) else "torch"
            if not _is_own(path):
                kind = "user"
            self._kind[code] = kind
        return kind

    def here(self) -> tuple[str, ...]:
        frames: list[tuple[str, int]] = []
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and frame.f_code is not self._boundary:
            kind = self._kind_of(frame.f_code)
            if kind == "user":
                frames.append((frame.f_code.co_filename, frame.f_lineno))
            elif kind == "profreport" and frames:
                break  # profreport called the model here: the frames above are not the model's
            frame = frame.f_back
        return user_lines(frames)
