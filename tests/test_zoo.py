"""The hf: zoo: real transformers architectures built offline, sized by options, one-line errors."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from profreport.cli import main
from profreport.models import ModelError, load_model
from profreport.zoo import ZOO, ZooError, parse_zoo_spec, zoo_size

transformers = pytest.importorskip("transformers")

CPU = torch.device("cpu")


@pytest.fixture
def no_network(monkeypatch):
    """Any socket connection fails loudly: a zoo build must never reach a hub."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("network use while building a zoo model")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ZOO))
def test_every_zoo_model_builds_offline_and_runs(name, no_network):
    model = load_model(f"hf:{name}", CPU, torch.float32, layers=1)
    assert model.name == f"hf-{name}"
    assert model.spec is not None and model.spec.startswith(f"hf:{name},layers=1")
    assert not model.module.training
    with torch.no_grad():
        out = model.module(*model.example_inputs)
    hidden = out[0] if isinstance(out, tuple) else out.last_hidden_state
    assert hidden.shape[0] == ZOO[name].default.batch
    assert torch.isfinite(hidden).all()


@pytest.mark.slow
def test_sizes_scale_the_real_architecture():
    small = load_model("hf:gpt2", CPU, torch.float32, batch_size=2, layers=3, seq_len=16)
    assert len(small.module.h) == 3
    assert small.example_inputs[0].shape == (2, 16)
    assert small.example_inputs[0].dtype == torch.int64  # token ids keep their dtype
    assert small.spec == "hf:gpt2,layers=3,seq_len=16"
    assert "3 of 12 layers" in small.description
    # The spec alone rebuilds the same model (what a child process under Nsight Compute gets).
    again = load_model(small.spec, CPU, torch.float32, batch_size=2)
    assert len(again.module.h) == 3 and again.example_inputs[0].shape == (2, 16)
    assert torch.equal(again.example_inputs[0], small.example_inputs[0])  # seeded


def test_full_depth_reachable_without_building():
    # All 12 GPT-2 blocks and all 16 ResNet-50 bottlenecks are valid sizes (built in bench/).
    assert zoo_size(ZOO["gpt2"], layers=12).layers == 12
    assert zoo_size(ZOO["resnet"], layers=16).layers == 16


@pytest.mark.slow
def test_resnet_layers_are_resnet50_bottlenecks_in_order():
    model = load_model("hf:resnet", CPU, torch.float32, layers=5)
    stages = model.module.encoder.stages
    assert [len(s.layers) for s in stages] == [3, 2]  # the first stage whole, then 2 of 4


@pytest.mark.parametrize(
    ("spec", "kwargs", "message"),
    [
        ("hf:nope", {}, "unknown zoo model 'hf:nope'; choose from hf:gpt2"),
        ("hf:gpt2", {"layers": 13}, "hf:gpt2 has 12 layers; --layers 13 is more"),
        ("hf:vit", {"seq_len": 8}, "hf:vit takes an image, not a sequence"),
        ("hf:gpt2,layers=x", {}, "bad option 'layers=x'"),
        ("hf:gpt2,depth=2", {}, "bad option 'depth=2'"),
        ("simple", {"layers": 2}, "--layers and --seq-len apply to hf: zoo models only"),
    ],
)
def test_bad_zoo_input_is_one_line(spec, kwargs, message):
    with pytest.raises(ModelError) as info:
        load_model(spec, CPU, torch.float32, **kwargs)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_without_transformers_one_line_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # import now raises ImportError
    with pytest.raises(ModelError, match=r"need the transformers package: pip install"):
        load_model("hf:bert", CPU, torch.float32)


def test_spec_parsing_keeps_overrides():
    zoo, given = parse_zoo_spec("hf:llama,layers=4,seq_len=64")
    assert zoo.name == "llama" and given == {"layers": 4, "seq_len": 64}
    with pytest.raises(ZooError):
        parse_zoo_spec("hf:llama,seq_len=0")


def test_models_command_lists_the_zoo(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in ZOO:
        assert f"hf:{name} " in out
    assert "GPT2Model (2 of 12 layers, batch 1, seq 128" in out


CHATTY_MODEL = """
import os, sys, torch

class Chatty(torch.nn.Module):
    def forward(self, x):
        print("model says hello on stdout")
        os.write(2, b"native code writes to fd 2\\n")
        return torch.relu(x)

def build():
    return Chatty(), (torch.randn(4, 8),)
"""


@pytest.mark.slow
def test_library_output_goes_to_run_log_not_the_terminal(tmp_path):
    model_file = tmp_path / "chatty.py"
    model_file.write_text(CHATTY_MODEL)
    out = tmp_path / "reports"
    proc = subprocess.run(
        [sys.executable, "-m", "profreport", "generate", "--model", f"{model_file}:build",
         "--device", "cpu", "--modes", "eager", "--min-time", "0.05", "--out", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    terminal = proc.stdout + proc.stderr
    assert "hello" not in terminal and "native code" not in terminal
    assert "profiler_start" not in terminal  # Kineto's own line
    assert "profreport: eager: profiling" in proc.stderr  # our progress still shows
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    log = (run / "run.log").read_text()
    assert "model says hello on stdout" in log and "native code writes to fd 2" in log


@pytest.mark.slow
def test_debug_keeps_library_output_on_the_terminal(tmp_path, capfd):
    model_file = Path(tmp_path / "chatty.py")
    model_file.write_text(CHATTY_MODEL)
    code = main(
        ["generate", "--model", f"{model_file}:build", "--device", "cpu", "--modes", "eager",
         "--min-time", "0.05", "--quiet", "--debug", "--out", str(tmp_path / "r")]
    )  # fmt: skip
    assert code == 0
    captured = capfd.readouterr()
    assert "native code writes to fd 2" in captured.err
    (run,) = [p for p in (tmp_path / "r").iterdir() if p.is_dir()]
    assert not (run / "run.log").exists()
