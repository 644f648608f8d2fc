"""One line that names why torch.jit.script could not compile a model.

TorchScript's messages are long (overload lists, source excerpts with `<--- HERE` markers) and the
useful part is rarely the first line; a model holding an object TorchScript cannot type fails deep
inside type inference with an OSError about `inspect.getsource`. This module maps the common
failure classes to a short cause and the place: missing source, unsupported Python feature
(`NotSupportedError`), `*args`/`**kwargs`, type annotation and type inference problems.
"""

from __future__ import annotations

import re
from types import TracebackType

from profreport.text import cut_before, error_line, exception_chain, one_line, short_path

_NO_SOURCE = re.compile(
    r"(?:Failed to get|Can't get) source for <(?:function|class|bound method|built-in function)?"
    r"\s*([\w.<>]+)"
)
_LOCATION = re.compile(r'File "([^"]+)", line (\d+)')
_DEF = re.compile(r"^\s*def (\w+)\(", re.MULTILINE)
_UNCONVERTIBLE_ATTRIBUTE = re.compile(
    r"Module '(\w+)' has no attribute '(\w+)' \(This attribute exists on the Python module, but "
    r"we failed to convert Python type: '([^']+)'"
)
_SCHEMA = re.compile(r"^\s*([\w]+::\w+)(?:\.\w+)?\(", re.MULTILINE)
_EXPECTED = re.compile(r"^\s*(Expected a value of type .*)$", re.MULTILINE)


def _place(text: str) -> str | None:
    """`function, file:line` of the first source location a TorchScript message points at."""
    loc = _LOCATION.search(text)
    if loc is None:
        return None
    where = f"{short_path(loc[1])}:{loc[2]}"
    func = _DEF.search(text, loc.end())
    return f"{func[1]}, {where}" if func else where


def _attribute_being_typed(tb: TracebackType | None) -> tuple[str, str, str] | None:
    """(attribute, its type, owner class) when the failure happened while TorchScript inferred
    the type of a module attribute (torch.jit._recursive.infer_concrete_type_builder)."""
    found = None
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "infer_concrete_type_builder":
            names = frame.f_locals
            if "name" in names and "value" in names and "nn_module" in names:
                found = (
                    str(names["name"]),
                    type(names["value"]).__name__,
                    type(names["nn_module"]).__name__,
                )
        tb = tb.tb_next
    return found


def _missing_source(exc: BaseException, text: str) -> str | None:
    match = _NO_SOURCE.search(text)
    if match is None:
        return None
    cause = (
        f"TorchScript needs the Python source of {match[1]}, which inspect.getsource cannot find"
    )
    attribute = _attribute_being_typed(exc.__traceback__)
    if attribute is None:
        return cause
    name, kind, owner = attribute
    return f"{cause} (attribute {name!r} of {owner} holds a {kind}, which TorchScript compiles as a class)"


def _type_problem(text: str) -> str | None:
    attr = _UNCONVERTIBLE_ATTRIBUTE.search(text)
    if attr:
        return (
            f"attribute {attr[2]!r} of {attr[1]} holds a Python {attr[3]}, which TorchScript "
            "cannot type (annotate it, or make it a constant)"
        )
    unknown = re.search(r"Unknown type name '([^']+)'", text)
    if unknown:
        return f"type annotation problem: unknown type name {unknown[1]!r}"
    expected = _EXPECTED.search(text)
    if expected:
        schema = _SCHEMA.search(text)
        call = f" in a call to {schema[1]}" if schema and schema.start() < expected.start() else ""
        return f"type error{call}: {expected[1]}"
    return None


def script_failure_line(exc: BaseException, model_name: str) -> str:
    """`torch.jit.script cannot compile <model> (<place>): <cause>`, one line; an exception that
    is not TorchScript's (raised by the model's own code while it was scripted) keeps its own
    `Type: message` line."""
    chain = exception_chain(exc)
    text = "\n".join(str(e) for e in chain)
    cause = next((c for e in chain if (c := _missing_source(e, str(e)))), None)
    place = None if cause else _place(text)
    unsupported = {type(e).__name__ for e in chain} & {"NotSupportedError", "UnsupportedNodeError"}
    first = one_line(text).rstrip(":")
    if cause is None and unsupported and "variable number of arguments" in first:
        cause = f"TorchScript cannot compile a function that takes *args or **kwargs ({first})"
    elif cause is None and unsupported:
        cause = f"unsupported Python feature: {first}"
    elif cause is None:
        cause = _type_problem(text)
    if cause is None:
        if place is None:  # not a TorchScript compile error (the model's own code raised)
            return error_line(exc)
        cause = one_line(text)
    where = f" ({place})" if place else ""
    return one_line(f"torch.jit.script cannot compile {model_name}{where}: {cause}")


# A TorchScript module failing at run time: the interpreter's header, its own traceback (a
# scripted frame `File "...", line N, in f` with the code and a `~~~ <--- HERE` marker under the
# operation, or a traced frame `path(N): f`), then the error it caught, `Type: message` (a
# Python exception re-raised as `builtins.Type`).
INTERPRETER_FAILED = "The following operation failed in the TorchScript interpreter"
_SCRIPTED_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)', re.MULTILINE)
_TRACED_FRAME = re.compile(r"^(\S[^\n]*?)\((\d+)\): (\S+)$", re.MULTILINE)
_HERE = re.compile(r"^([^\n]*)\n([ \t]*)(~+) <--- HERE", re.MULTILINE)
_CAUGHT = re.compile(r"^(?:builtins\.)?([A-Za-z_][\w.]*):(?: (.*))?$", re.MULTILINE)
_TORCH_FILES = re.compile(r"(?:^|/)torch/(?:nn|jit|_jit_internal|_ops)")


def _operation(text: str, start: int) -> str | None:
    """The expression TorchScript marks with `~~~ <--- HERE` after `start`: its operation."""
    here = _HERE.search(text, start)
    if here is None:
        return None
    column = len(here[2])
    return here[1][column : column + len(here[3])].strip() or None


def _traced_source(path: str, line: int) -> str | None:
    """The source line a traced frame names (a traced graph keeps no code of its own)."""
    import linecache

    code = linecache.getline(path, line).strip()
    return one_line(code, limit=100) if code else None


def interpreter_failure_line(text: str) -> str | None:
    """`Type: message (in the TorchScript interpreter: <operation> at <file:line> in <function>)`
    for a TorchScript module that failed at run time, from the interpreter's own traceback: the
    error it caught, and its innermost frame in the model's code; None for any other message."""
    if INTERPRETER_FAILED not in text:
        return None
    body = text[text.index(INTERPRETER_FAILED) :]
    caught = [m for m in _CAUGHT.finditer(body) if m[1].endswith(("Error", "Exception", "Exit"))]
    if not caught:
        return None
    kind, message = caught[-1][1], one_line(caught[-1][2] or "")
    what = f"{kind}: {message}" if message else f"{kind} (with no message)"
    frames = [(m.start(), m[1], int(m[2]), m[3], True) for m in _SCRIPTED_FRAME.finditer(body)] + [
        (m.start(), m[1], int(m[2]), m[3], False) for m in _TRACED_FRAME.finditer(body)
    ]
    frames = [
        f for f in sorted(frames) if not _TORCH_FILES.search(f[1]) and f[0] < caught[-1].start()
    ]
    suffix = " (in the TorchScript interpreter)"
    if frames:
        start, path, line, func, scripted = frames[0]
        if caught[-1][0].startswith("builtins."):
            operation = None  # a Python exception the model raised itself: a place, no operation
        elif scripted:
            operation = _operation(body, start)
        else:
            operation = _traced_source(path, line)
        place = f"{short_path(path)}:{line} in {func}"
        where = f"{operation} at {place}" if operation else place
        suffix = f" (in the TorchScript interpreter: {one_line(where, limit=160)})"
    return cut_before(what, suffix)
