"""What gets profiled: the built-in models and loading a user's `module:function` or `file.py:function`.

A model factory takes no arguments and returns `(torch.nn.Module, tuple_of_example_inputs)`.
Built-in factories take the batch size, the device and the dtype, because their defaults differ
by device (the `simple` reference case uses N = 64 on CUDA and 8 on CPU).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import torch
from torch import nn

from profreport.text import error_line
from profreport.zoo import (
    ZooError,
    build_zoo_model,
    is_zoo_spec,
    parse_zoo_spec,
    with_running_stats,
    zoo_size,
    zoo_spec,
)

if TYPE_CHECKING:
    from profreport.decode import BuiltStep

DECODE_SUFFIX = "-decode"  # the decode workload's model is named for its step


class ModelError(Exception):
    """A model could not be found, loaded or built; the message is one line for the user."""


@dataclass(frozen=True)
class LoadedModel:
    name: str
    description: str
    module: nn.Module
    example_inputs: tuple[torch.Tensor, ...]
    batch_size: int | None
    memory_format: str = "contiguous"
    spec: str | None = None  # how to load it again (in a child process); None for objects
    # decode: the module is a causal LM and its example input the prompt's token ids, until the
    # capture builds the greedy decode step from them (`decode_loaded`)
    workload: Literal["prefill", "decode"] = "prefill"
    decode: BuiltStep | None = None  # the decode step, once built (module is a DecodeStep)

    def error(self, message: str) -> ModelError:
        """`message` about this model as a ModelError, the model named as it was given (its
        spec, or the name it was given before `for_decode` named it for its step)."""
        name = self.name.removesuffix(DECODE_SUFFIX) if self.workload == "decode" else self.name
        return ModelError(f"{self.spec or name}: {message}")


@dataclass(frozen=True)
class BuiltinModel:
    name: str
    description: str
    module: Callable[[], nn.Module]
    input_shapes: tuple[tuple[int, ...], ...]  # each example input's shape after the batch
    # device type -> batch size (the same for every built-in model)
    default_batch: Mapping[str, int] = field(default_factory=lambda: {"cuda": 64, "cpu": 8})


class ConvBnRelu(nn.Module):
    """Two Conv-BN-ReLU stages: BatchNorm folds into the conv when frozen, ReLU fuses into it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(32, 64, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.conv2 = nn.Conv2d(64, 64, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(x)))


class MlpBlock(nn.Module):
    """Pre-norm transformer MLP block: LayerNorm -> Linear -> GELU -> Linear -> dropout -> residual."""

    def __init__(self, dim: int = 256, hidden: int = 1024) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = x + self.drop(self.fc2(self.act(self.fc1(self.norm(x)))))
        return out


class GatedResidual(nn.Module):
    """Two inputs, a chain of pointwise ops: the case NNC (CUDA) and Inductor fuse into one kernel."""

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(gate) * torch.tanh(x)
        return x + y * 0.5 - torch.relu(y)


BUILTIN_MODELS: dict[str, BuiltinModel] = {
    m.name: m
    for m in (
        BuiltinModel(
            "simple",
            "Conv2d(32->64, 3x3) -> ReLU -> MaxPool2d(2) on N x 32 x 56 x 56: the tutorial's "
            "Conv+ReLU case",
            lambda: nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2)),
            ((32, 56, 56),),
        ),
        BuiltinModel(
            "conv-bn-relu",
            "2 x (Conv2d -> BatchNorm2d -> ReLU) on N x 32 x 28 x 28: BatchNorm folding and "
            "conv+ReLU fusion (optimize_for_inference, Inductor)",
            lambda: with_running_stats(ConvBnRelu()),
            ((32, 28, 28),),
        ),
        BuiltinModel(
            "mlp-block",
            "LayerNorm -> Linear(256->1024) -> GELU -> Linear -> Dropout -> residual on N x 128 x 256: "
            "pointwise fusion around GEMMs",
            MlpBlock,
            ((128, 256),),
        ),
        BuiltinModel(
            "gated-residual",
            "sigmoid(g) * tanh(x), residual and ReLU on two N x 256 x 1024 inputs: a pure pointwise "
            "chain (NNC on CUDA, Inductor everywhere)",
            GatedResidual,
            ((256, 1024), (256, 1024)),
        ),
    )
}


def _shown(path: str, limit: int = 200) -> str:
    """A path short enough for a one-line message: its start and its end."""
    return path if len(path) <= limit else f"{path[: limit - 61]}…{path[-60:]}"


def _file_module_name(path: Path) -> str:
    """`<package>.<stem>` for a model file, the package standing for its folder (named by a hash
    of the folder's path, its __path__ that folder): relative imports inside the file work, and
    two files of the same name in two folders (base and head in `ab`) never share a module."""
    folder = path.resolve().parent
    digest = hashlib.sha256(str(folder).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    package = f"profreport_user_models_{digest}"
    if package not in sys.modules:
        pkg = types.ModuleType(package)
        pkg.__path__ = [str(folder)]
        pkg.__package__ = package
        sys.modules[package] = pkg
    return f"{package}.{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}"


def _import_factory(spec: str) -> tuple[str, Callable[[], object]]:
    target, sep, func_name = spec.rpartition(":")
    if not sep or not target or not func_name:
        known = ", ".join(BUILTIN_MODELS)
        raise ModelError(
            f"unknown model {spec!r}: use a built-in name ({known}), hf:<zoo model>, "
            "module:function or path/to/file.py:function"
        )
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target)
        try:
            found = path.is_file()
        except OSError as exc:  # a name or path longer than the file system allows, say
            raise ModelError(f"model file not found: {_shown(target)} ({exc.strerror})") from None
        if not found:
            raise ModelError(f"model file not found: {_shown(target)}")
        mod_name = _file_module_name(path)
        file_spec = importlib.util.spec_from_file_location(mod_name, path)
        if file_spec is None or file_spec.loader is None:
            raise ModelError(f"cannot import {target} as a Python file")
        module = importlib.util.module_from_spec(file_spec)
        sys.modules[mod_name] = module
        try:
            file_spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:  # a script that calls sys.exit() at import
            raise ModelError(f"importing {target} failed: {error_line(exc)}") from exc
    else:
        try:
            module = importlib.import_module(target)
        except (Exception, SystemExit) as exc:
            raise ModelError(f"cannot import module {target!r}: {error_line(exc)}") from exc
    factory = getattr(module, func_name, None)
    if not callable(factory):
        raise ModelError(f"{target} has no callable {func_name!r}")
    return f"{Path(target).stem if target.endswith('.py') else target}:{func_name}", factory


def _cast(
    inputs: tuple[torch.Tensor, ...], device: torch.device, dtype: torch.dtype, channels_last: bool
) -> tuple[torch.Tensor, ...]:
    # Only floating inputs take the requested dtype: token ids and masks keep theirs.
    out = []
    for t in inputs:
        t = t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device)
        if channels_last and t.dim() == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        out.append(t)
    return tuple(out)


def load_model(
    spec: str,
    device: torch.device,
    dtype: torch.dtype,
    batch_size: int | None = None,
    channels_last: bool = False,
    layers: int | None = None,
    seq_len: int | None = None,
    workload: str = "prefill",
) -> LoadedModel:
    """Build the model named by `spec` on `device` in `dtype`, in eval mode.

    `channels_last` puts 4-D inputs and the module's 4-D weights in NHWC memory format, the
    layout oneDNN and cuDNN convolutions prefer (Inductor otherwise converts to it itself).
    `layers` and `seq_len` size a zoo model (`hf:<name>`); they override the spec's own.
    `workload` "decode": the causal LM (a zoo model with its language-model head) and its
    prompt, named for the greedy decode step that the capture builds from them
    (`decode_loaded`), the prompt (a zoo model's `seq_len` tokens) then prefilled.
    """
    decode = workload == "decode"
    torch.manual_seed(0)
    builtin = BUILTIN_MODELS.get(spec)
    if (layers is not None or seq_len is not None) and not is_zoo_spec(spec):
        raise ModelError("--layers and --seq-len apply to hf: zoo models only")
    if builtin is not None:
        batch = batch_size or builtin.default_batch.get(device.type, builtin.default_batch["cpu"])
        module = builtin.module()
        inputs = tuple(torch.randn(batch, *shape) for shape in builtin.input_shapes)
        name, description = builtin.name, builtin.description
    elif is_zoo_spec(spec):
        try:
            zoo, given = parse_zoo_spec(spec)
            size = zoo_size(
                zoo, batch_size, layers or given.get("layers"), seq_len or given.get("seq_len")
            )
            module, inputs = build_zoo_model(zoo, size, causal_lm=decode)
        except ZooError as exc:
            raise ModelError(str(exc)) from None
        name, description, batch = f"hf-{zoo.name}", zoo.describe(size), size.batch
        spec = zoo_spec(zoo.name, size)
    else:
        if batch_size is not None:
            raise ModelError("--batch-size applies to built-in and hf: zoo models only")
        name, factory = _import_factory(spec)
        try:
            result = factory()
        except (Exception, SystemExit) as exc:
            raise ModelError(f"{spec} raised {error_line(exc)}") from exc
        if not (
            isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], nn.Module)
        ):
            raise ModelError(f"{spec} must return (torch.nn.Module, tuple_of_example_inputs)")
        module, inputs = result
        if isinstance(inputs, torch.Tensor):
            inputs = (inputs,)
        if (
            not isinstance(inputs, tuple)
            or not inputs
            or not all(isinstance(t, torch.Tensor) for t in inputs)
        ):
            raise ModelError(f"{spec}: example inputs must be a non-empty tuple of tensors")
        description = (module.__doc__ or type(module).__name__).strip().splitlines()[0]
        batch = None
    try:
        module = module.to(device=device, dtype=dtype).eval()
        if channels_last:
            module = module.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        cast = _cast(inputs, device, dtype, channels_last)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ModelError(
            f"{spec}: cannot move the model to {device} in {dtype}: {error_line(exc)}"
        ) from exc
    loaded = LoadedModel(
        name,
        description,
        module,
        cast,
        batch,
        "channels_last" if channels_last else "contiguous",
        spec,
    )
    return for_decode(loaded) if decode else loaded


def for_decode(model: LoadedModel) -> LoadedModel:
    """`model` (a causal LM and its prompt's token ids) as the decode workload's: named for the
    greedy decode step that the capture builds from it (`decode_loaded`), so that its run folder
    is named before the step is built."""
    return replace(
        model,
        name=f"{model.name}{DECODE_SUFFIX}",
        description=f"decode step of {model.description}",
        workload="decode",
    )


def decode_loaded(model: LoadedModel) -> LoadedModel:
    """The decode workload's model as its greedy decode step, the prompt prefilled into the
    step's static KV cache (profreport/decode.py; ModelError: it cannot be); any other model, or
    a step already built, as it is. The capture calls it (pipeline.RunCollector), and a timing
    worker that builds the model again."""
    if model.workload != "decode" or model.decode is not None:
        return model
    from profreport.decode import DecodeError, decode_step

    try:
        step, inputs, built = decode_step(model.module, model.example_inputs[0])
    except DecodeError as exc:
        raise model.error(str(exc)) from None
    return replace(model, module=step, example_inputs=inputs, decode=built)
