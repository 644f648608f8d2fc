"""What an execution mode is: one object that says how to build and warm it, where its bytes come
from, how its fusion evidence becomes a fusion map and a verdict clause (the analysis's
`ModeAnalysis` protocol: modes are handed to the analysis by name, never imported by it), and what
to reset after it fails. Nothing checks a mode's name. How a mode is shown (its colour, its
one-line summary) is presentation: render/palette.py and the registry's summaries.

This module imports no torch: `profreport render` reads the modes' analyses through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from profreport.analysis.mode_analysis import NoAnalysis
from profreport.record.model import CompilerEvidence

if TYPE_CHECKING:
    from profreport.record.model import TensorIO

Sync = Callable[[], None]

# Calls made before profiling and timing, beyond whatever the mode's compiler needs itself.
WARMUP_CALLS = 3


def warm_up(fn: Callable[..., Any], inputs: tuple[Any, ...], sync: Sync, calls: int) -> Any:
    """Call `fn` `calls` times, each call synced; the last call's output."""
    out = None
    for _ in range(calls):
        out = fn(*inputs)
        sync()
    return out


class ModeError(Exception):
    """A mode cannot be built; the message is the one line the report shows."""


@dataclass
class PreparedMode:
    name: str
    fn: Callable[..., Any]
    compile_s: float | None = None
    compiler: CompilerEvidence = field(default_factory=CompilerEvidence)


@dataclass
class BytesWork:
    """The operations a mode's bytes model sums, how they were found, and what was left out."""

    calls: list[TensorIO]
    method: str
    not_modeled: list[str]
    attribution: str | None = None  # how the calls' modules and lines were recorded, or why not


class BytesSource:
    """Where a mode's modeled bytes come from (capture side: may run the model)."""

    name = "abstract"

    def capture(self, prepared: PreparedMode, inputs: Sequence[Any], sync: Sync) -> BytesWork:
        raise NotImplementedError


class Mode(NoAnalysis):
    """An execution mode. Subclass it, set `name`, override `build`, and register an instance
    (`profreport.modes.register`); everything else has a default that suits an eager-like mode.
    It is the analysis's `ModeAnalysis` (analysis/mode_analysis.py) for its own records; by
    default it derives nothing (NoAnalysis).

    - `build(module, inputs, sync)`: build and warm up (under no_grad, module in eval).
    - `bytes_source`: dispatcher log (default), Inductor's scheduler, ...
    - `fusion_map(mode, eager)`: the fusion map from the typed record's evidence (pure), or None.
    - `fusion_evidence(mode, run)`: the verdict's clause about what the compiler fused (pure).
    - `why_not_fused(mode, run)`: why ops stayed apart, with evidence (pure; see
      analysis/why_not_fused), or None when the mode reports nothing.
    - `reset_after_failure()`: global state to clear when this mode failed.
    - `unavailable_reason(device_type)`: why it cannot run on that device, or None.
    """

    name: str = ""
    bytes_source: BytesSource | None = None  # None: the dispatcher log (set at registration)
    timed_build: bool = True  # compile_s = build time (a mode may set its own compile_s)

    def unavailable_reason(self, device_type: str) -> str | None:
        return None

    def build(self, module: Any, inputs: tuple[Any, ...], sync: Sync) -> PreparedMode:
        raise NotImplementedError

    def reset_after_failure(self) -> None:
        return None

    def ahead(self, device_type: str) -> None:
        """Do, in a fresh process, what building this mode will do first whatever the model, such
        as importing its compiler (a timing worker, before the run is captured:
        capture/workers.TimingWorkers). Nothing by default."""
        return None

    def __repr__(self) -> str:
        return f"<mode {self.name}>"


class EagerMode(Mode):
    """eager: the model as written, the baseline every other mode is compared with."""

    name = "eager"
    timed_build = False

    def build(self, module: Any, inputs: tuple[Any, ...], sync: Sync) -> PreparedMode:
        warm_up(module, inputs, sync, WARMUP_CALLS)
        return PreparedMode(self.name, module)


class UnknownMode(Mode):
    """A mode named in a record but not registered here (an old or foreign record): its evidence
    is shown as recorded, and nothing is derived from it."""

    def __init__(self, name: str) -> None:
        self.name = name
