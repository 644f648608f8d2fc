"""eager: the model as written, the baseline every other mode is compared with."""

from __future__ import annotations

from typing import Any

from profreport.modes.base import WARMUP_CALLS, Mode, PreparedMode, Sync, warm_up


class EagerMode(Mode):
    name = "eager"
    timed_build = False

    def build(self, module: Any, inputs: tuple[Any, ...], sync: Sync) -> PreparedMode:
        warm_up(module, inputs, sync, WARMUP_CALLS)
        return PreparedMode(self.name, module)
