import atexit
import copy
import dataclasses
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytest

# scripts/gpu_check (the GPU acceptance check) is run from scripts/, not installed: its tests
# import it from there.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

# Keep the suite's torch runs small and deterministic in thread count.
os.environ.setdefault("OMP_NUM_THREADS", "2")
# Latency is timed in this process unless a test asks for workers (tests/test_workers.py does):
# three fresh processes per run would triple the suite's timing.
os.environ.setdefault("PROFREPORT_WORKERS", "0")
# The measured ceilings (capture/ceilings.py) are cached per machine: the suite uses a cache of
# its own, so it measures once per session and never touches the user's ~/.cache.
_CEILINGS_CACHE = tempfile.mkdtemp(prefix="profreport-test-ceilings-")
os.environ["PROFREPORT_CACHE_DIR"] = _CEILINGS_CACHE
atexit.register(shutil.rmtree, _CEILINGS_CACHE, True)

# A run folder of the same run as `gated_run` (generate --model gated-residual --batch-size 1 with
# FAST, all five default modes, on this project's 2-core CPU machine), checked in: its run.json,
# traces and timeline. Tests that read a run rather than make one use it, so they stay fast.
RECORDED_GATED_RUN = Path(__file__).parent / "data" / "runs" / "gated-residual-cpu"
# The hostile-strings model's run (tests/test_hostile_strings.py: eager, trace, script): its
# run.json and traces.
RECORDED_HOSTILE_RUN = Path(__file__).parent / "data" / "runs" / "hostile-cpu"

FAST = ["--device", "cpu", "--min-time", "0.05", "--max-time", "60", "--quiet"]


def run_dir_in(out: Path) -> Path:
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run


def generate_run(out: Path, *args: str) -> Path:
    """Run `profreport generate` in-process with fast timing settings; return the run folder."""
    from profreport.cli import main

    assert main(["generate", *args, "--out", str(out), *FAST]) == 0
    return run_dir_in(out)


@pytest.fixture(scope="session")
def gated_run(tmp_path_factory):
    """One full five-mode run of a small pointwise model, shared by the tests that read it."""
    return generate_run(
        tmp_path_factory.mktemp("reports"), "--model", "gated-residual", "--batch-size", "1"
    )


@pytest.fixture
def recorded_gated_run(tmp_path_factory) -> Path:
    """A copy of the checked-in gated-residual run folder (RECORDED_GATED_RUN), to read or edit;
    its record must still load (regenerate the folder if the record's schema moved on)."""
    from profreport.record import load

    folder = tmp_path_factory.mktemp("recorded") / RECORDED_GATED_RUN.name
    run = Path(shutil.copytree(RECORDED_GATED_RUN, folder))
    load(run)
    return run


def resaved(recorded: Path, parent: Path) -> Path:
    """A copy of a checked-in run folder (record and traces) under `parent`, with every output
    (report, summary, tables, TensorBoard summary, timeline) written again by today's code."""
    from profreport.api import RunResult
    from profreport.record import load

    run = Path(shutil.copytree(recorded, parent / recorded.name))
    RunResult.of_record(load(run), run).save()
    return run


@pytest.fixture(scope="session")
def builtin_runs(tmp_path_factory):
    """`builtin_runs(name)`: a five-mode run of the built-in model `name` (batch 1), made on
    first use and shared by every test that reads it, whatever order the tests run in."""
    made: dict[str, Path] = {}

    def run(name: str) -> Path:
        if name not in made:
            out = tmp_path_factory.mktemp(f"builtin-{name}")
            made[name] = generate_run(out, "--model", name, "--batch-size", "1")
        return made[name]

    return run


@pytest.fixture(scope="session", params=["simple", "conv-bn-relu", "mlp-block"])
def builtin_run(request, builtin_runs):
    """A five-mode run of each other built-in model (batch 1), shared by the tests that read it."""
    return builtin_runs(request.param)


@pytest.fixture(scope="session")
def gpt2_run(tmp_path_factory):
    """A 2-layer GPT-2 built from its transformers config (16 tokens), in eager, compile and
    trace: one run for the tests that read a zoo language model's run (attribution, browser)."""
    pytest.importorskip("transformers")
    return generate_run(
        tmp_path_factory.mktemp("gpt2"), "--model", "hf:gpt2", "--layers", "2",
        "--seq-len", "16", "--modes", "eager,compile,trace",
    )  # fmt: skip


@pytest.fixture
def mode_registry(monkeypatch):
    """profreport.modes' registry, put back as it was after the test: a mode the test registers
    is gone, a built-in it replaced is back."""
    from profreport.modes import registry

    registry.mode_names()  # the built-ins first, so that they are in what is put back
    for table in ("_REGISTRY", "_DEFAULT", "_SUMMARY"):
        monkeypatch.setattr(registry, table, copy.copy(getattr(registry, table)))
    return registry


@pytest.fixture(scope="session", autouse=True)
def _temp_folders_under_basetemp(tmp_path_factory):
    """profile() without a run_dir keeps its traces in a temp folder until the result is saved
    (an unsaved result loses nothing): the suite's hundreds of such folders go under pytest's own
    basetemp, which pytest prunes, instead of piling up in the machine's /tmp. Child processes
    keep their TMPDIR."""
    old = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("tempfile"))
    yield
    tempfile.tempdir = old


@pytest.fixture(autouse=True)
def _no_torch_deprecation_noise():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\..*")
        yield


def setup(
    options: Any = None, inputs: tuple[Any, ...] = (), device: str = "cpu", folder: Any = None
) -> Any:
    """A run setup for stages built by hand (their prepared modes are what runs): a model that
    is only its `inputs`, its folder a temporary one unless given."""
    import torch

    from profreport.files import RunFolder
    from profreport.models import LoadedModel
    from profreport.pipeline import RunOptions, RunSetup

    model = LoadedModel("hand-built", "", torch.nn.Identity(), tuple(inputs), None)
    return RunSetup(
        model,
        torch.device(device),
        "float32",
        folder or RunFolder.temporary(),
        options or RunOptions(),
    )


def replay_collection(monkeypatch: pytest.MonkeyPatch, evidence_for: Any) -> None:
    """Collection replaced by recorded runs: the one driver (runner.profile_runs) gets, for
    each run setup, the evidence `evidence_for(setup)` hands back (checkpointed in the run's
    folder, as collection does), with nothing left to time; the findings are derived, saved
    and published as for a real run."""
    from profreport import pipeline
    from profreport.pipeline import PhaseClock, TimingStage

    class Replayed:
        def __init__(self, setup: Any) -> None:
            self.setup, self.phases = setup, PhaseClock()

        def prepare(self, fresh_compilers: bool = True) -> Any:
            self.evidence = evidence_for(self.setup)
            self.setup.folder.checkpoint(self.evidence)
            return TimingStage(dict(self.evidence.modes), {}, lambda: None, self.setup)

        def finish(self, ab: Any = None) -> Any:
            return self.evidence

    monkeypatch.setattr(pipeline, "RunCollector", Replayed)


def evidence_of(record: Any) -> Any:
    """The run as collection writes it, before anything is derived: every stored finding
    dropped (a run.json written with findings, read back as evidence)."""
    from profreport.analysis.derive import stripped
    from profreport.record.model import Run

    run = record if isinstance(record, Run) else Run.from_json(record)
    evidence = run.without(*Run.finding_keys())  # the run's own findings (run/2) too
    return dataclasses.replace(evidence, modes={n: stripped(m) for n, m in run.modes.items()})
