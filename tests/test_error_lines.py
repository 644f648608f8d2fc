"""Error lines: one line, no tensor reprs, a named cause for TorchScript failures. The texts are
real: each test provokes the exception from torch and reads its message."""

import dataclasses
import inspect
import warnings

import pytest
import torch
from torch import nn

from profreport import api
from profreport.script_errors import script_failure_line
from profreport.text import MAX_LINE_CHARS, error_line, full_error, one_line, without_tensor_reprs

HERE = __file__


def _raised(fn) -> BaseException:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn()
        except Exception as exc:
            return exc
    raise AssertionError("expected an exception")


def _line_of(obj, text: str) -> int:
    lines, start = inspect.getsourcelines(obj)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


def _assert_one_clean_line(line: str) -> None:
    assert "\n" not in line and "tensor([" not in line
    assert len(line) <= MAX_LINE_CHARS


@dataclasses.dataclass
class Out:
    x: torch.Tensor
    extra: object


class ReturnsDataclass(nn.Module):
    def forward(self, x):
        return Out(x * 2, "not a tensor")


class ReturnsDict(nn.Module):
    def forward(self, x):
        return {"y": x * 2}


def test_a_tracer_message_with_a_multiline_tensor_repr_becomes_one_short_line():
    exc = _raised(lambda: torch.jit.trace(ReturnsDataclass(), (torch.randn(8, 8),)))
    assert "tensor([[" in str(exc) and str(exc).count("\n") >= 7  # the repr spans 8 rows
    line = error_line(exc)
    _assert_one_clean_line(line)
    assert line == (
        "RuntimeError: Tracer cannot infer type of Out(x=tensor(...), extra='not a tensor')"
    )


def test_a_paragraph_on_one_line_is_cut():
    exc = _raised(lambda: torch.jit.trace(ReturnsDict(), (torch.randn(2, 2),)))
    assert len(str(exc)) > MAX_LINE_CHARS
    line = error_line(exc)
    _assert_one_clean_line(line)
    assert line.startswith("RuntimeError: Encountering a dict at the output of the tracer")
    assert line.endswith("…") and len(line) == MAX_LINE_CHARS


def test_tensor_reprs_scalars_and_truncated_reprs():
    assert (
        without_tensor_reprs("got tensor(3.) want tensor(4.)") == "got tensor(3.) want tensor(4.)"
    )
    assert without_tensor_reprs("a tensor([1., 2.]) b") == "a tensor(...) b"
    assert without_tensor_reprs("cut tensor([[1., 2.],\n        [3.") == "cut tensor(...)"
    assert without_tensor_reprs("torch.tensor([1]) is code") == "torch.tensor([1]) is code"
    assert one_line("\n\n  first   real line\nsecond") == "first real line"


def test_full_error_keeps_the_whole_chain():
    try:
        try:
            raise OSError("could not get source code")
        except OSError as inner:
            raise RuntimeError("outer\nsecond line") from inner
    except RuntimeError as exc:
        text = full_error(exc)
    assert text == (
        "RuntimeError: outer\nsecond line\n\nraised from\n\nOSError: could not get source code"
    )


class TakesKwargs(nn.Module):
    def forward(self, x, **kwargs):
        return x + 1


class UsesTry(nn.Module):
    def forward(self, x):
        try:
            return x + 1
        except Exception:
            return x


class BadAnnotation(nn.Module):
    def forward(self, x: "NoSuchType"):  # noqa: F821
        return x


class DictOfObjects(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = {"a": object()}

    def forward(self, x):
        return x * len(self.table)


class IdOfTensor(nn.Module):
    def forward(self, x):
        return x * len({id(x): 1})


_namespace: dict = {}
exec("class Settings:\n    def __init__(self):\n        self.scale = 2\n", _namespace)
Settings = _namespace["Settings"]  # a class without a source file, like transformers' configs


class HoldsSettings(nn.Module):
    settings: Settings

    def __init__(self):
        super().__init__()
        self.settings = Settings()

    def forward(self, x):
        return x + 1


def _script_line(module: nn.Module) -> str:
    exc = _raised(lambda: torch.jit.script(module))
    line = script_failure_line(exc, type(module).__name__)
    _assert_one_clean_line(line)
    return line


def test_kwargs_names_the_cause_and_the_place():
    where = f"forward, {HERE}:{_line_of(TakesKwargs.forward, 'def forward')}"
    assert _script_line(TakesKwargs()) == (
        f"torch.jit.script cannot compile TakesKwargs ({where}): TorchScript cannot compile a "
        "function that takes *args or **kwargs (Compiled functions can't take variable number "
        "of arguments or use keyword-only arguments with defaults)"
    )


def test_unsupported_python_feature():
    where = f"forward, {HERE}:{_line_of(UsesTry.forward, 'try:')}"
    assert _script_line(UsesTry()) == (
        f"torch.jit.script cannot compile UsesTry ({where}): unsupported Python feature: "
        "try blocks aren't supported"
    )


def test_type_annotation_and_type_inference_problems():
    line = _script_line(BadAnnotation())
    assert line.startswith("torch.jit.script cannot compile BadAnnotation (forward, ")
    assert line.endswith("): type annotation problem: unknown type name 'NoSuchType'")
    where = f"forward, {HERE}:{_line_of(DictOfObjects.forward, 'self.table')}"
    assert _script_line(DictOfObjects()) == (
        f"torch.jit.script cannot compile DictOfObjects ({where}): attribute 'table' of "
        "DictOfObjects holds a Python dict, which TorchScript cannot type (annotate it, or make "
        "it a constant)"
    )
    assert _script_line(IdOfTensor()).endswith(
        "type error in a call to prim::id: Expected a value of type 'Optional[AnyClassType]' "
        "for argument 'x' but instead found type 'Tensor (inferred)'."
    )


def test_missing_source_names_the_function_and_the_attribute():
    # the failure class of every transformers model: `config` holds a class with no source
    assert _script_line(HoldsSettings()) == (
        "torch.jit.script cannot compile HoldsSettings: TorchScript needs the Python source of "
        "Settings.__init__, which inspect.getsource cannot find (attribute 'settings' of "
        "HoldsSettings holds a Settings, which TorchScript compiles as a class)"
    )


@pytest.mark.slow
def test_a_failed_script_mode_records_the_line_and_keeps_the_full_message():
    res = api.profile(
        TakesKwargs(),
        (torch.randn(4, 4),),
        modes=("eager", "script"),
        device="cpu",
        min_time_s=0.02,
        bootstrap_resamples=100,
    )
    script = res.record["modes"]["script"]
    assert script["status"] == "failed"
    assert script["error"].startswith("torch.jit.script cannot compile TakesKwargs (forward, ")
    assert script["error_full"].startswith("ModeError: torch.jit.script cannot compile")
    assert (
        "NotSupportedError: Compiled functions can't take variable number" in (script["error_full"])
    )
    assert "<--- HERE" in script["error_full"] and "Traceback" in script["traceback"]
    assert script["verdict"] == f"script: failed - {script['error']}"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["trace", "optimize"])
def test_trace_and_optimize_run_a_model_that_returns_a_dataclass(mode):
    res = api.profile(
        ReturnsDataclass(),
        (torch.arange(16.0).reshape(4, 4),),
        modes=("eager", mode),
        device="cpu",
        min_time_s=0.02,
        bootstrap_resamples=100,
    )
    entry = res.record["modes"][mode]
    assert entry["status"] == "ok", entry.get("error")
    assert entry["compiler"]["outputs"] == (
        "flattened dataclass Out to a tuple of 1 tensor; dropped str (not a tensor, and "
        "torch.utils._pytree cannot look inside it)"
    )
    assert entry["output_check"]["within_tolerance"] is True
    assert entry["output_check"]["max_abs_err"] == 0.0


class RefusesToBeScripted(nn.Module):
    def forward(self, x):
        return x

    def __prepare_scriptable__(self):
        raise RuntimeError("this model cannot be scripted\nsee the docs")


def test_the_models_own_exception_while_scripting_keeps_its_own_line():
    assert _script_line(RefusesToBeScripted()) == "RuntimeError: this model cannot be scripted"
