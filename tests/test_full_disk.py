"""A disk that takes no more bytes is bad input, never a bug (issue 46): every file a library
writes for profreport is read back whole, and one missing or cut short where the disk takes no
more is the disk's OSError, naming the folder; `generate` then exits 2 with one line naming the
path, keeping a complete record named as partial (or nothing).

The fast tests cut each writer's file as a full disk does (torch.profiler's exporter writes short
without raising) and make the folder refuse the probe `files.library_writes` makes; the slow test
runs `generate` on a real 48 KiB tmpfs where the machine lets the tests mount one.
"""

from __future__ import annotations

import errno
import io
import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import torch

from profreport import cli, files, pipeline
from profreport.capture import profiling
from profreport.capture.ncu import ChildModel, measure_mode
from profreport.exits import EXIT_BAD_INPUT, disk_error, error_of, exit_code_of
from profreport.record import load
from profreport.record.model import ProfileSchedule
from tests.conftest import FAST
from tests.test_generate_failures import MODEL_FILE
from tests.test_ncu import fake_ncu  # noqa: F401 - a fixture

CPU = torch.device("cpu")
NO_SPACE = "No space left on device"


@pytest.fixture
def full_disk(monkeypatch):
    """Every folder refuses the bytes `library_writes` tries to add after a file came out short."""
    monkeypatch.setattr(files, "_refusal", lambda _folder: OSError(errno.ENOSPC, NO_SPACE))


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.fixture
def short_trace_exporter(monkeypatch):
    """torch.profiler's trace handler writing half the trace, as it does on a full disk."""
    real = profiling.tensorboard_trace_handler

    def handler(dir_name, worker_name):
        write = real(dir_name, worker_name=worker_name)

        def short(prof):
            write(prof)
            for trace in Path(dir_name).glob("*.pt.trace.json"):
                _cut(trace)

        return short

    monkeypatch.setattr(profiling, "tensorboard_trace_handler", handler)


def _profile(trace_dir: Path) -> Path:
    schedule = ProfileSchedule(wait=0, warmup=1, active=3)
    return profiling.profile_mode(
        lambda x: x + 1, (torch.ones(4),), CPU, trace_dir, "eager", lambda: None, schedule
    )


def test_a_mode_trace_cut_short_on_a_full_disk_is_the_disks_error(
    tmp_path, short_trace_exporter, full_disk
):
    with pytest.raises(OSError) as refused:
        _profile(tmp_path / "eager")
    assert (refused.value.errno, refused.value.filename) == (errno.ENOSPC, str(tmp_path / "eager"))


def test_a_write_the_disk_refuses_inside_a_library_block_names_the_folder(tmp_path):
    with pytest.raises(OSError) as refused, files.library_writes(tmp_path):
        raise OSError(errno.ENOSPC, NO_SPACE)  # a plain write's error names no file
    assert (refused.value.errno, refused.value.filename) == (errno.ENOSPC, str(tmp_path))


def test_a_trace_cut_short_on_a_disk_with_room_is_no_disk_error(tmp_path, short_trace_exporter):
    with pytest.raises(ValueError) as cut:  # the trace's JSON, read back, ends early
        _profile(tmp_path / "eager")
    assert disk_error(cut.value) is None
    assert files._refusal(tmp_path) is None  # a real folder with room takes the probe


def test_the_light_pass_trace_missing_on_a_full_disk(tmp_path, monkeypatch, full_disk):
    """Issue 46's case: the exporter left no file, and the gzip step found none."""
    monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", lambda _self, _path: None)
    trace = tmp_path / "time" / "light.pt.trace.json.gz"
    with pytest.raises(OSError) as refused:
        profiling.profile_interleaved(
            {"eager": lambda: None}, CPU, lambda: None, trace, profiling.LightSchedule(rounds=1)
        )
    assert (refused.value.errno, refused.value.filename) == (errno.ENOSPC, str(trace.parent))


def test_a_trace_read_for_its_events_cut_short_on_a_full_disk(monkeypatch, full_disk):
    real = torch.profiler.profile.export_chrome_trace

    def short(self, path):
        real(self, path)
        _cut(Path(path))

    monkeypatch.setattr(torch.profiler.profile, "export_chrome_trace", short)
    with pytest.raises(OSError) as refused:
        profiling.cpu_trace_events(lambda: torch.ones(2) + 1)
    assert refused.value.errno == errno.ENOSPC


def test_a_tensorboard_summary_cut_short_on_a_full_disk(tmp_path, monkeypatch, full_disk):
    from torch.utils.tensorboard import SummaryWriter

    whole = files.write_tensorboard_summary(tmp_path / "whole", {"a": 1.0}, "t", "text", None)
    assert files._tfrecords_whole(whole)
    real = SummaryWriter.close

    def close(self):
        real(self)
        for event_file in Path(self.log_dir).glob(files.TENSORBOARD_EVENTS):
            event_file.write_bytes(event_file.read_bytes()[:-3])  # the last record cut short

    monkeypatch.setattr(SummaryWriter, "close", close)
    with pytest.raises(OSError) as refused:
        files.write_tensorboard_summary(tmp_path / "cut", {"a": 1.0}, "t", "text", None)
    assert (refused.value.errno, refused.value.filename) == (errno.ENOSPC, str(tmp_path / "cut"))


def test_an_aoti_package_cut_short_on_a_full_disk(monkeypatch, full_disk):
    from profreport.modes import prepare_mode

    def package(_program, package_path, inductor_configs):
        Path(package_path).write_bytes(b"PK\x03\x04 cut short")  # a zip's first bytes only
        return package_path

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", package)
    with torch.no_grad(), pytest.raises(Exception) as failed:
        prepare_mode("export", torch.nn.ReLU().eval(), (torch.randn(2, 3),), lambda: None)
    refused = disk_error(failed.value)
    assert refused is not None and refused.errno == errno.ENOSPC


def test_an_ncu_table_cut_short_on_a_full_disk(fake_ncu, full_disk):  # noqa: F811
    fake_ncu(
        textwrap.dedent(
            """\
            import sys
            args = sys.argv[1:]
            with open(args[args.index("--log-file") + 1], "w") as log:
                log.write('"ID","Kernel Name","Metric Name"\\n"0","k","dram__by')  # cut
            """
        )
    )
    with pytest.raises(OSError) as refused:
        measure_mode(ChildModel("gated-residual", "cpu", "float32", 1), "eager")
    assert refused.value.errno == errno.ENOSPC


def test_an_atomic_write_that_fails_names_its_file(tmp_path, monkeypatch):
    def full(*_args):
        raise OSError(errno.ENOSPC, NO_SPACE)  # as a write's error: no file named

    monkeypatch.setattr(files.os, "replace", full)
    with pytest.raises(OSError) as refused:
        files.write_atomic(tmp_path / "kernels_eager.csv", "a,b\n")
    assert refused.value.filename == str(tmp_path / "kernels_eager.csv")
    assert list(tmp_path.iterdir()) == []  # no temporary file left
    assert exit_code_of(refused.value) == EXIT_BAD_INPUT
    assert error_of(refused.value) == f"cannot write {tmp_path / 'kernels_eager.csv'}: {NO_SPACE}"


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES])
def test_every_refusal_of_a_disk_is_bad_input_however_deep(code):
    try:
        try:
            raise OSError(code, "refused", "/x/run.json")
        except OSError as exc:
            raise RuntimeError("a library wrapped it") from exc
    except RuntimeError as wrapped:
        assert exit_code_of(wrapped) == EXIT_BAD_INPUT
        assert error_of(wrapped) == "cannot write /x/run.json: refused"
    assert exit_code_of(OSError(errno.ENOENT, "gone")) == 3  # a missing file of ours: a bug


def test_a_mode_the_disk_refuses_is_no_failure_of_that_mode(tmp_path, monkeypatch, capsys):
    """Before: recorded as eager failing (exit 1, "the model does not run in eager mode")."""

    def refused(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, NO_SPACE, str(tmp_path / "trace"))

    monkeypatch.setattr(pipeline, "profile_mode", refused)
    out = tmp_path / "out"
    argv = ["generate", "--model", "gated-residual", "--batch-size", "1", "--modes", "eager"]
    rc = cli.main([*argv, "--out", str(out), *FAST])
    assert rc == EXIT_BAD_INPUT
    assert capsys.readouterr().err == (
        f"error: cannot write {tmp_path / 'trace'}: {NO_SPACE}; nothing was kept\n"
    )
    assert list(out.iterdir()) == []


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 48 KiB tmpfs (where the machine lets the tests mount one)."""
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if made.returncode != 0 or shutil.disk_usage(mount).total > 64 * 1024:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:  # lazily, should a file on it still be open
        subprocess.run(["umount", "--lazy", str(mount)], check=True)


@pytest.mark.slow
def test_generate_on_a_full_tmpfs_exits_2_and_keeps_a_partial_record(tmp_path, small_tmpfs):
    """Issue 46's run: before, exit 3 ("internal error: FileNotFoundError: ...
    .partial-*/time/light.pt.trace.json") and a visible run folder published on a full disk."""
    (tmp_path / "m.py").write_text(MODEL_FILE)
    out = small_tmpfs / "out"
    err = io.StringIO()
    argv = ["generate", "--modes", "eager", "--model", f"{tmp_path / 'm.py'}:tiny"]
    rc = cli.main([*argv, "--out", str(out), *FAST], out=io.StringIO(), err=err)
    line = err.getvalue()
    assert rc == EXIT_BAD_INPUT, line
    assert len(line.splitlines()) == 1 and f"{NO_SPACE};" in line
    assert line.startswith(f"error: cannot write {out}/m-tiny-cpu-")
    kept = list(out.iterdir())
    assert all(p.name.endswith("-partial") for p in kept)  # nothing visible is not partial
    for folder in kept:
        record = load(folder)  # a complete record that validates
        traces = [m["trace"] for m in record["modes"].values() if m.get("trace")]
        for trace in traces:  # every trace it names is whole
            json.loads((folder / trace).read_text())
        assert "kept in" in line and str(folder) in line
