"""The process Nsight Compute profiles: build one mode, warm it up, run exactly one bracketed step.

`ncu --profile-from-start off` collects nothing until the process calls cudaProfilerStart, so
model loading, scripting/tracing, Inductor compilation and warm-up stay out of the measurement;
only the kernels of the one forward between start and stop are profiled. On CPU (for tests of
the plumbing) the bracket is skipped and the step still runs.

Exit codes: 0 done, 2 bad arguments or the model/mode could not be built (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

DONE_MARKER = "profreport-ncu-child: profiled one step"
EXTRA_WARMUP_CALLS = 2  # beyond prepare_mode's own warm-up: allocator and autotuning settled


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m profreport.ncu_child")
    parser.add_argument("--model", required=True)
    parser.add_argument("--mode", required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--channels-last", action="store_true")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    import torch

    from profreport.env import DTYPES, make_sync
    from profreport.models import ModelError, load_model
    from profreport.modes import ModeError, prepare_mode

    if args.dtype not in DTYPES:
        print(f"unknown dtype {args.dtype!r}; choose from {', '.join(DTYPES)}", file=sys.stderr)
        return 2
    try:
        device = torch.device(args.device)
    except RuntimeError as exc:
        print(f"bad device {args.device!r}: {exc}", file=sys.stderr)
        return 2
    on_cuda = device.type == "cuda"
    sync = make_sync(device)
    try:
        model = load_model(
            args.model, device, DTYPES[args.dtype], args.batch_size, args.channels_last
        )
        with torch.no_grad():
            prepared = prepare_mode(args.mode, model.module, model.example_inputs, sync)
            for _ in range(EXTRA_WARMUP_CALLS):
                prepared.fn(*model.example_inputs)
            sync()
            # untyped in torch's stubs: cudaProfilerStart / Stop around the one profiled step
            start: Callable[[], None] = torch.cuda.profiler.start
            stop: Callable[[], None] = torch.cuda.profiler.stop
            if on_cuda:
                start()
            prepared.fn(*model.example_inputs)
            sync()
            if on_cuda:
                stop()
    except (ModelError, ModeError) as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(f"{DONE_MARKER} of {args.mode} on {device}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
