"""One line naming why a whole-graph capture (torch.export, torch.compile(fullgraph=True)) failed,
the model's own source line it failed on, and the usual fix.

torch 2.13's messages rarely say where: a data-dependent guard reads "Could not guard on
data-dependent expression zuf0 > 0.0" with a "Caused by:" location cut to its last 30 characters.
The place comes from what the exception itself carries, in this order: Dynamo's user stack
(`real_stack`, strict export and fullgraph compile), the frames its message quotes ("The
following call raised this error:", "from user code:"), and its traceback (non-strict export
runs forward as Python, so the model's own frame is on it). Frames in torch, profreport or the
standard library are never the place; a frame in a file that defines one of the model's modules
is preferred to any other.
"""

from __future__ import annotations

import linecache
import os
import re
import sysconfig
import traceback
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from profreport.analysis.why_not_fused import VALUE_BRANCH_FIX, branches_on_a_value
from profreport.modes.compile_logs import break_summary
from profreport.text import cut_before, exception_chain, one_line, short_path


@dataclass(frozen=True)
class SourceFrame:
    """One frame of a stack: its file, line, function and the line's code."""

    file: str
    line: int
    func: str = ""
    code: str = ""


@dataclass(frozen=True)
class Cause:
    """A failure class: what the message says (`pattern`), in the user's words, and its fix."""

    pattern: re.Pattern[str]
    cause: str
    fix: str


VALUE_BRANCH = "control flow on a value computed from tensor data"

# torch 2.13's messages for the failures a model's own code causes, checked on CPU with
# torch.export (non-strict and strict) and torch.compile(fullgraph=True).
CAUSES = (
    Cause(
        # `if h.mean().item() > 0:`, `if x.sum() > 0:`, `range(int(x.sum()))`, a branch on
        # nonzero's length
        re.compile(r"Could not guard on data-dependent expression"),
        VALUE_BRANCH,
        VALUE_BRANCH_FIX,
    ),
    Cause(
        # `torch.zeros(int(n.item()))`, `len(x.nonzero())`
        re.compile(r"Could not extract specialized integer from data-dependent expression"),
        "a value computed from tensor data made a Python int",
        "leave it symbolic (no int(), len() or range() on it), or compute it outside forward "
        "and pass it in",
    ),
    Cause(
        # `x.numpy()`, `np.asarray(x)`, `x.data_ptr()`: export runs forward on fake tensors
        re.compile(
            r"\.numpy\(\) is not supported for tensor subclasses"
            r"|Cannot access data pointer of Tensor"
        ),
        "tensor data read outside torch ops (export traces fake tensors)",
        "use torch ops, or make that code a custom op (torch.library.custom_op)",
    ),
)
GRAPH_BREAK = "a graph break"  # what a whole-graph capture cannot take

# Dynamo's own user stack, and the frames a message quotes (traceback's format).
_QUOTED_FRAME = re.compile(
    r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>[^\n]+))?\n(?P<code>[^\n]*)',
    re.MULTILINE,
)


def library_roots() -> tuple[str, ...]:
    """Folders whose frames are never the model's: torch, profreport and the standard library."""
    import torch

    import profreport

    paths = sysconfig.get_paths()
    folders = [os.path.dirname(m.__file__ or "") for m in (torch, profreport)]
    folders += [paths["stdlib"], paths["platstdlib"]]
    return tuple(os.path.join(os.path.realpath(f), "") for f in folders if f)


def model_files(module: Any) -> frozenset[str]:
    """The source files that define the model's modules (its own classes and their parts),
    torch's own (nn.Linear's) left out: a built-in model's profreport/models.py stays in."""
    import inspect

    import torch

    torch_root = os.path.join(os.path.realpath(os.path.dirname(torch.__file__)), "")
    files = set()
    for part in getattr(module, "modules", lambda: [module])():
        try:
            found = inspect.getsourcefile(type(part))
        except TypeError:  # a built-in class
            continue
        if found and not os.path.realpath(found).startswith(torch_root):
            files.add(os.path.realpath(found))
    return frozenset(files)


def quoted_frames(text: str) -> list[SourceFrame]:
    """The frames a message quotes, outermost first."""
    return [
        SourceFrame(m["file"], int(m["line"]), (m["func"] or "").strip(), m["code"].strip())
        for m in _QUOTED_FRAME.finditer(text)
    ]


def _frames(summary: Iterable[traceback.FrameSummary]) -> list[SourceFrame]:
    return [SourceFrame(f.filename, f.lineno or 0, f.name, (f.line or "").strip()) for f in summary]


def frame_sources(exc: BaseException) -> list[list[SourceFrame]]:
    """Each stack the exception (and those it was raised from) carries, most telling first:
    Dynamo's user stacks, the frames its messages quote, its tracebacks."""
    chain = exception_chain(exc)
    dynamo = [_frames(stack) for e in chain if (stack := getattr(e, "real_stack", None))]
    quoted = [quoted_frames(str(e)) for e in chain]
    tracebacks = [_frames(traceback.extract_tb(e.__traceback__)) for e in chain]
    return [frames for frames in dynamo + quoted + tracebacks if frames]


def user_frame(
    sources: Sequence[Sequence[SourceFrame]],
    files: Collection[str],
    library: Sequence[str],
) -> SourceFrame | None:
    """The innermost frame in one of the model's `files` (wherever they are: a built-in model's
    are profreport's), from the first source that has one; else the innermost frame outside the
    `library` folders; None when every frame is in them."""

    def model(frame: SourceFrame) -> bool:
        return os.path.realpath(frame.file) in files

    def own(frame: SourceFrame) -> bool:
        path = os.path.realpath(frame.file)
        return not frame.file.startswith("<") and not path.startswith(tuple(library))

    for wanted in (model, own):
        for frames in sources:
            found = [f for f in frames if wanted(f)]
            if found:
                return found[-1]
    return None


def cause_of(chain: Sequence[tuple[str, str]], source_text: str = "") -> tuple[str, str] | None:
    """(what the model did, what to do: "fix: ..." or Dynamo's own hint) for a failure class the
    messages of `chain` (type name, message: the exception, then those it was raised from)
    name (`source_text`: the model's line it failed on); None for any other."""
    whole = "\n".join(text for _, text in chain)
    for known in CAUSES:
        if known.pattern.search(whole):
            return known.cause, f"fix: {known.fix}"
    for type_name, text in chain:
        if type_name == "Unsupported":  # Dynamo met code it cannot put in one graph
            head, hint = break_summary(text)
            if branches_on_a_value(head, source_text):
                return f"{GRAPH_BREAK}: {VALUE_BRANCH}", f"fix: {VALUE_BRANCH_FIX}"
            return GRAPH_BREAK, f"Dynamo's hint: {one_line(hint, limit=90)}" if hint else ""
    return None


def capture_failure_line(
    what: str, chain: Sequence[tuple[str, str]], frame: SourceFrame | None
) -> str:
    """`<what> failed: Type: message (at file:line: code); <cause>; fix: <fix>`, one line, from
    the exception `chain` (type name, message; outermost first) and the model's frame: the
    message is cut first, so that the place and the fix survive."""
    type_name, text = chain[0]
    first = one_line(text)
    reason = f"{what} failed: {type_name}" + (f": {first}" if first else "")
    tail, code = "", ""
    if frame is not None:
        code = frame.code or linecache.getline(frame.file, frame.line).strip()
        shown = one_line(code, limit=60)
        tail = f" (at {short_path(frame.file)}:{frame.line}" + (f": {shown})" if shown else ")")
    found = cause_of(chain, code)
    if found is not None:
        cause, advice = found
        tail += f"; {cause}" + (f"; {advice}" if advice else "")
    return cut_before(reason, tail)


def _chain(exc: BaseException) -> list[tuple[str, str]]:
    return [(type(e).__name__, str(e)) for e in exception_chain(exc)]


def known_failure(exc: BaseException) -> bool:
    """`exc` is one of the failure classes a model's own code causes (CAUSES, a graph break)."""
    return cause_of(_chain(exc)) is not None


def failure_line(what: str, exc: BaseException, files: Collection[str] = ()) -> str:
    """The one line for a live exception `exc` of a capture of a model defined in `files`."""
    frame = user_frame(frame_sources(exc), files, library_roots())
    return capture_failure_line(what, _chain(exc), frame)
