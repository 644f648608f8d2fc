"""The `profreport_expect` pytest fixture: a kernel budget as a snapshot test.

    def test_block_fuses(profreport_expect):
        profreport_expect(Block(), (torch.randn(32, 64),), modes=("eager", "compile"))

profiles the model in those modes and compares the run with the budget kept at
`__profreport__/<test name>.json` beside the test file (or `path=`, relative to it): a breach
fails the test with one line per breach as its message. `pytest --profreport-update` writes or
refreshes the snapshots (keeping tolerances, `min_speedup` and notes set in them). Only what the
budget needs runs: no latency timing unless a `min_speedup` is set for a mode checked.

Registered through the `pytest11` entry point when profreport is installed; this module imports
nothing heavy until a test asks for the fixture.
"""

from __future__ import annotations

import shutil
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import torch

    from profreport.analysis.budget import BudgetCheck
    from profreport.record.expectation import Expectation

UPDATE_OPTION = "--profreport-update"
SNAPSHOT_DIR = "__profreport__"
ACCEPT = f"to accept an intended change, run pytest {UPDATE_OPTION} and commit {{source}}"
_WRITTEN = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("profreport")
    group.addoption(
        UPDATE_OPTION,
        action="store_true",
        default=False,
        help="write or refresh the kernel budgets the profreport_expect fixture checks "
        f"({SNAPSHOT_DIR}/<test name>.json beside each test file)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_WRITTEN] = []


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    written = config.stash.get(_WRITTEN, [])
    if written:
        terminalreporter.write_line(f"profreport: wrote {len(written)} kernel budget(s):")
        for path in written:
            terminalreporter.write_line(f"  {path}")


def snapshot_path(test_file: Path, test_name: str, path: str | Path | None = None) -> Path:
    """Where a test's budget is kept: `path` (relative to the test file's folder), else
    `__profreport__/<test name>.json` there (a parametrized name's brackets and other
    characters a file name should not hold become `_`)."""
    from profreport.files import slug

    folder = test_file.parent
    if path is not None:
        return folder / path
    name = slug(test_name, fill="_", strip="_") or "test"
    return folder / SNAPSHOT_DIR / f"{name}.json"


def _load(path: Path) -> Expectation:
    from profreport.record.expectation import ExpectationError, load

    try:
        return load(path).expectation
    except ExpectationError as exc:
        pytest.fail(str(exc), pytrace=False)


ExpectFn = Callable[..., "BudgetCheck | None"]


@pytest.fixture
def profreport_expect(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> ExpectFn:
    """`profreport_expect(model, inputs, modes=("eager", "compile"), path=None, *, device=None,
    dtype=None, **options)`: profile `model(*inputs)` in `modes` and assert the run is within
    the test's kernel budget (returns the check); with `--profreport-update`, write the budget
    from the run instead (returns None). `options` go to `profreport.profile`."""
    update: bool = request.config.getoption(UPDATE_OPTION.lstrip("-").replace("-", "_"))

    def expect(
        model: torch.nn.Module,
        inputs: torch.Tensor | Sequence[torch.Tensor],
        modes: Sequence[str] = ("eager", "compile"),
        path: str | Path | None = None,
        *,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        **options: Any,
    ) -> BudgetCheck | None:
        __tracebackhide__ = True
        import torch

        import profreport
        from profreport.analysis.budget import check_budget
        from profreport.analysis.budget_file import expectation_of, needs_timing
        from profreport.env import resolve_device
        from profreport.files import write_atomic
        from profreport.record.expectation import dumps
        from profreport.render.budget import budget_text, budget_view

        target = snapshot_path(Path(request.node.path), request.node.name, path)
        tensors = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
        previous = _load(target) if target.exists() else None
        if previous is None and not update:
            pytest.fail(
                f"no kernel budget at {target}: run pytest {UPDATE_OPTION} to write it, "
                "then commit it",
                pytrace=False,
            )
        kind = tensors[0].device.type if device is None else resolve_device(str(device)).type
        timed = not update and previous is not None and needs_timing(previous, kind, modes)
        if timed and "eager" not in modes:
            modes = ("eager", *modes)  # a speedup is against eager, timed in the same run
        result = profreport.profile(
            model, tensors, modes, device, dtype, time_latency=timed, **options
        )
        try:
            if update or previous is None:  # (no budget and no update failed above)
                eager = result.run.modes.get("eager")
                if eager is not None and eager.status != "ok":
                    pytest.fail(
                        f"eager failed ({eager.error}): {target} not written", pytrace=False
                    )
                write_atomic(target, dumps(expectation_of(result.run, previous)))
                request.config.stash[_WRITTEN].append(str(target))
                return None
            check = check_budget(previous, result.run, str(target))
            if not check.passed:
                report = tmp_path_factory.mktemp("profreport") / "run"
                result.save(report, budget=check)
                lines = budget_text(budget_view(check, ACCEPT))
                raise AssertionError("\n".join([*lines, f"  report: {report / 'report.html'}"]))
            unchecked = [m.mode for m in check.modes if m.outcome == "not in file"]
            if unchecked:
                warnings.warn(
                    f"profreport: {target} has no {check.device} entry for "
                    f"{', '.join(unchecked)}: not checked (pytest {UPDATE_OPTION} adds it)",
                    stacklevel=2,
                )
            return check
        finally:
            if result.owns_run_dir:
                shutil.rmtree(result.run_dir, ignore_errors=True)

    return expect
