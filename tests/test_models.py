import textwrap

import pytest
import torch

from profreport.models import BUILTIN_MODELS, ModelError, load_model

CPU = torch.device("cpu")


def test_builtins_have_descriptions_and_cpu_batch_defaults():
    assert {"simple", "conv-bn-relu", "mlp-block"} <= set(BUILTIN_MODELS)
    m = load_model("simple", CPU, torch.float32)
    assert m.batch_size == 8
    assert tuple(m.example_inputs[0].shape) == (8, 32, 56, 56)
    assert not m.module.training
    assert BUILTIN_MODELS["simple"].default_batch["cuda"] == 64


def test_batch_size_and_dtype_apply():
    m = load_model("mlp-block", CPU, torch.bfloat16, batch_size=2)
    assert m.example_inputs[0].shape[0] == 2
    assert m.example_inputs[0].dtype == torch.bfloat16
    assert next(m.module.parameters()).dtype == torch.bfloat16


def test_channels_last_applies_to_4d_inputs():
    m = load_model("simple", CPU, torch.float32, batch_size=1, channels_last=True)
    assert m.example_inputs[0].is_contiguous(memory_format=torch.channels_last)
    assert not m.example_inputs[0].is_contiguous()
    assert m.memory_format == "channels_last"


def test_file_function_with_two_inputs(tmp_path):
    f = tmp_path / "mymodel.py"
    f.write_text(
        textwrap.dedent(
            '''
            import torch
            class Add(torch.nn.Module):
                """Adds two tensors."""
                def forward(self, a, b):
                    return a + b
            def build():
                return Add(), (torch.ones(2, 3), torch.arange(6).reshape(2, 3))
            '''
        )
    )
    m = load_model(f"{f}:build", CPU, torch.float32)
    assert m.name == "mymodel:build"
    assert m.description == "Adds two tensors."
    assert m.example_inputs[1].dtype == torch.int64  # integer inputs keep their dtype


def test_module_function(tmp_path, monkeypatch):
    pkg = tmp_path / "userpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "models.py").write_text(
        "import torch\ndef build():\n    return torch.nn.ReLU(), (torch.randn(4),)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    m = load_model("userpkg.models:build", CPU, torch.float32)
    assert m.name == "userpkg.models:build"
    assert isinstance(m.module, torch.nn.ReLU)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nosuchmodel", "unknown model"),
        ("missing/file.py:build", "model file not found"),
        ("json:nosuchfunc", "has no callable"),
        ("no_such_module_xyz:build", "cannot import module"),
    ],
)
def test_bad_specs_raise_one_line_errors(spec, message):
    with pytest.raises(ModelError, match=message) as info:
        load_model(spec, CPU, torch.float32)
    assert "\n" not in str(info.value)


def test_factory_with_wrong_return_type(tmp_path):
    f = tmp_path / "bad.py"
    f.write_text("def build():\n    return 42\n")
    with pytest.raises(ModelError, match="must return"):
        load_model(f"{f}:build", CPU, torch.float32)


def test_batch_size_rejected_for_user_models(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import torch\ndef build():\n    return torch.nn.ReLU(), (torch.randn(4),)\n")
    with pytest.raises(ModelError, match="built-in and hf: zoo models only"):
        load_model(f"{f}:build", CPU, torch.float32, batch_size=4)
