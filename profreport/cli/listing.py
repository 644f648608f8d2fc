"""`profreport models` and `profreport modes`: what can be profiled, and how."""

from __future__ import annotations

import argparse
from typing import TextIO

from profreport.exits import EXIT_OK
from profreport.modes import default_modes, mode_names, mode_summary


def run_models(_args: argparse.Namespace, out: TextIO, _err: TextIO) -> int:
    from profreport.models import BUILTIN_MODELS
    from profreport.zoo import HF_PREFIX, INSTALL_HINT, ZOO

    width = max(len(n) for n in [*BUILTIN_MODELS, *(HF_PREFIX + z for z in ZOO)])
    for name, m in BUILTIN_MODELS.items():
        batches = ", ".join(f"N={b} on {d}" for d, b in m.default_batch.items())
        print(f"{name:<{width}}  {m.description} ({batches})", file=out)
    print(f"\nzoo (transformers configs, random weights; {INSTALL_HINT}):", file=out)
    for name, z in ZOO.items():
        print(f"{HF_PREFIX + name:<{width}}  {z.describe(z.default)}", file=out)
    return EXIT_OK


def run_modes(_args: argparse.Namespace, out: TextIO, _err: TextIO) -> int:
    from profreport.modes import mode_for

    defaults = default_modes()
    width = max(len(n) for n in mode_names())
    for name in mode_names():
        mode = mode_for(name)
        devices = [d for d in ("cpu", "cuda") if mode.unavailable_reason(d) is None]
        source = mode.bytes_source.name if mode.bytes_source else "dispatcher"
        tags = ("default, " if name in defaults else "") + "/".join(devices)
        print(f"{name:<{width}}  {mode_summary(name)} [{tags}; bytes: {source}]", file=out)
    print(f"\ndefault (no --modes): {','.join(defaults)}", file=out)
    return EXIT_OK
