"""A TorchScript module that fails at run time is named by the error the interpreter caught and
the operation it ran, not by the interpreter's generic first line; an operation that raises while
the bytes model records tensor I/O is named with its own message. The TorchScript texts are
real: each test provokes the failure and reads its message."""

import inspect
import warnings

import pytest
import torch
from torch import nn

from profreport.capture import opio
from profreport.modes import prepare_mode
from profreport.pipeline import mode_error_line
from profreport.script_errors import interpreter_failure_line

HERE = __file__


class ViewThreeBySeven(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.view(3, 7)
        return y


class ViewByBatch(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0] * 2, -1, 3)


class RaisesItself(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != 3:
            raise ValueError("expected 3 rows")
        return x


def _line_of(cls: type, text: str) -> int:
    lines, start = inspect.getsourcelines(cls)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


def _raised(fn, *args) -> BaseException:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(*args)
        except Exception as exc:
            return exc
    raise AssertionError("expected an exception")


def test_a_scripted_operation_is_named_with_the_error_it_raised():
    exc = _raised(torch.jit.script(ViewThreeBySeven()), torch.randn(4, 4))
    assert str(exc).startswith("The following operation failed in the TorchScript interpreter")
    line = _line_of(ViewThreeBySeven, "x.view(3, 7)")
    assert mode_error_line(exc) == (
        "RuntimeError: shape '[3, 7]' is invalid for input of size 16 "
        f"(in the TorchScript interpreter: x.view at {HERE}:{line} in forward)"
    )


def test_a_traced_operation_is_named_by_its_source_line():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(ViewByBatch(), (torch.randn(4, 6),))
    exc = _raised(traced, torch.randn(5, 7))
    line = _line_of(ViewByBatch, "x.view(x.shape[0] * 2")
    assert mode_error_line(exc) == (
        "RuntimeError: shape '[10, -1, 3]' is invalid for input of size 35 (in the TorchScript "
        f"interpreter: return x.view(x.shape[0] * 2, -1, 3) at {HERE}:{line} in forward)"
    )


def test_the_models_own_exception_keeps_its_type_and_gets_its_place():
    exc = _raised(torch.jit.script(RaisesItself()), torch.randn(2, 2))
    line = _line_of(RaisesItself, "raise ValueError")
    assert mode_error_line(exc) == (
        f"ValueError: expected 3 rows (in the TorchScript interpreter: {HERE}:{line} in forward)"
    )


def test_a_dropped_message_is_said_to_be_missing():
    text = (
        "The following operation failed in the TorchScript interpreter.\n"
        "Traceback of TorchScript (most recent call last):\n"
        "/site-packages/transformers/models/swin/modeling_swin.py(611): maybe_pad\n"
        "/site-packages/torch/nn/modules/module.py(1768): _slow_forward\n"
        "RuntimeError: \n"
    )
    assert interpreter_failure_line(text) == (
        "RuntimeError (with no message) (in the TorchScript interpreter: "
        "transformers/models/swin/modeling_swin.py:611 in maybe_pad)"
    )


def test_other_messages_are_left_alone():
    assert interpreter_failure_line("RuntimeError: shape mismatch") is None
    assert mode_error_line(RuntimeError("shape mismatch\nmore")) == "RuntimeError: shape mismatch"


def test_a_long_message_is_cut_before_the_place():
    exc = _raised(torch.jit.script(ViewThreeBySeven()), torch.randn(4, 4))
    text = str(exc).replace("is invalid for input of size 16", "x" * 400)
    line = interpreter_failure_line(text)
    assert line is not None and len(line) <= 300
    assert line.endswith("in forward)") and "x.view at" in line


def test_a_number_where_the_schema_says_tensor_takes_the_scalar_overload():
    remainder = torch.ops.aten.remainder
    t = torch.tensor(10)
    assert opio._overload_taking_numbers(remainder.Tensor, (t, 7)) is remainder.Scalar
    assert opio._overload_taking_numbers(remainder.Tensor, (t, t)) is remainder.Tensor
    # no overload takes a number there: the call is left as it is, to fail on its own
    assert opio._overload_taking_numbers(torch.ops.aten.mm.default, (t, 7)) is (
        torch.ops.aten.mm.default
    )


def test_an_operation_that_raises_while_recording_is_named():
    def mismatched(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(a) @ b

    with pytest.raises(opio.TensorIOFailed) as failed:
        opio.record_tensor_io(mismatched, (torch.randn(2, 3), torch.randn(4, 5)), lambda: None)
    assert str(failed.value).startswith("aten.mm.default raised RuntimeError: mat1 and mat2")
    assert str(failed.value).endswith("(while recording tensor I/O for the bytes model)")


@pytest.mark.slow  # builds a small Swin from its config and optimizes it
def test_swin_under_optimize_records_its_bytes(monkeypatch):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.SwinConfig(
        image_size=56, embed_dim=16, depths=[1, 1], num_heads=[1, 2], window_size=7
    )
    model, image = transformers.SwinModel(cfg).eval(), torch.randn(1, 3, 56, 56)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prepared = prepare_mode("optimize", model, (image,), lambda: None)
        ops = opio.record_tensor_io(prepared.fn, (image,), lambda: None)
        assert "aten::remainder" in {o.op for o in ops}
        # without the overload rule the frozen graph's remainder(Tensor, int 7) fails here
        monkeypatch.setattr(opio, "_overload_taking_numbers", lambda func, args: func)
        with pytest.raises(opio.TensorIOFailed) as failed:
            opio.record_tensor_io(prepared.fn, (image,), lambda: None)
    assert mode_error_line(failed.value).startswith(
        "TensorIOFailed: aten.remainder.Tensor raised RuntimeError: aten::remainder() Expected a "
        "value of type 'Tensor' for argument 'other' but instead found type 'int'."
    )
