"""Measured DRAM bytes via Nsight Compute: CSV parsing, availability, and the ncu -> child plumbing.

The fixtures under tests/data/ncu are hand-written in the layout of `ncu --csv` (details page):
one row per (launch, metric), the documented column names, quoted fields, thousands separators,
==PROF==/==WARNING== lines around the table. No GPU or ncu is needed: the plumbing tests put a
fake `ncu` on PATH that checks its options, really runs the child command on CPU, and then
writes a fixture as ncu's log file.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from profreport import ncu_child
from profreport.capture.ncu import (
    ChildModel,
    measure_mode,
    ncu_command,
    ncu_unavailable_reason,
)
from profreport.capture.ncu_results import (
    METRICS,
    SOURCE,
    WRITES_NOTE,
    NcuKernel,
    NcuParseError,
    bytes_from,
    measured_bytes,
    nanoseconds_from,
    parse_ncu_csv,
)

DATA = Path(__file__).parent / "data" / "ncu"
ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "std::array<char *, 3>>(int, T2, T3)"
)
TRITON = "triton_poi_fused_add_mul_relu_sigmoid_sub_tanh_0"


def fixture_text(name: str) -> str:
    return (DATA / name).read_text()


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------


def test_parse_base_units_reads_every_launch_exactly():
    kernels = parse_ncu_csv(fixture_text("eager_base_units.csv"))

    assert [k.launch_id for k in kernels] == [0, 1, 2, 3, 4, 5, 6]
    assert [k.dram_read_bytes for k in kernels] == [
        1_048_576,
        1_048_704,
        2_097_280,
        1_048_576,
        2_097_152,
        1_048_576,
        2_097_152,
    ]
    assert [k.dram_write_bytes for k in kernels][5] == 1_048_608
    assert [k.duration_ns for k in kernels] == [3712, 3648, 5056, 3520, 5120, 3488, 5088]
    # Names with commas, parentheses and templates survive the CSV quoting intact.
    assert kernels[4].name == ADD and kernels[6].name == ADD
    assert kernels[0].name.startswith("void at::native::vectorized_elementwise_kernel<4, ")
    assert kernels[0].name.endswith("std::array<char *, 2>>(int, T2, T3)")


def test_parse_scaled_units_are_powers_of_1000_and_na_is_unknown():
    kernels = parse_ncu_csv(fixture_text("compile_auto_units.csv"))

    by_key = {(k.name, k.launch_id): k for k in kernels}
    assert len(kernels) == 4  # launch 0 of the second process is not merged with launch 0
    first = by_key[(TRITON, 0)]
    assert (first.dram_read_bytes, first.dram_write_bytes) == (2_100_000, 1_050_000)
    assert first.duration_ns == 7420.0
    gemm = kernels[1]
    assert gemm.dram_read_bytes == 1_210_000_000  # Gbyte
    assert gemm.dram_write_bytes == 524_290  # Kbyte, 1000-based
    assert gemm.duration_ns == 1_030_000.0  # msecond
    second = by_key[(TRITON, 2)]
    assert second.dram_write_bytes is None  # "n/a", never a silent zero
    assert second.duration_ns == 7390.0
    fill = kernels[3]
    assert (fill.dram_read_bytes, fill.dram_write_bytes, fill.duration_ns) == (0, 4100, 1500.0)


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        ("1,234,567", "byte", 1_234_567),
        ("12.29", "Kbyte", 12_290),
        ("1.05", "Mbyte", 1_050_000),
        ("2", "Gbyte", 2_000_000_000),
        ("n/a", "byte", None),
        ("", "byte", None),
    ],
)
def test_bytes_from_units(value, unit, expected):
    assert bytes_from(value, unit) == expected


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        ("2,304", "nsecond", 2304.0),
        ("4.86", "usecond", 4860.0),
        ("1.5", "msecond", 1_500_000.0),
        ("0.002", "second", 2_000_000.0),
    ],
)
def test_nanoseconds_from_units(value, unit, expected):
    assert nanoseconds_from(value, unit) == expected


def test_unknown_unit_is_an_error_not_a_guess():
    with pytest.raises(NcuParseError, match="KiB"):
        bytes_from("3", "KiB")
    with pytest.raises(NcuParseError, match="cycle"):
        nanoseconds_from("3", "cycle")


def test_parse_tolerates_extra_columns_and_application_output():
    text = textwrap.dedent(
        """\
        "an unterminated quote the application printed
        "ID","Process ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value","Rule Name","Rule Type"
        "3","7","k(float *, int)","Command line profiler metrics","dram__bytes_read.sum","byte","2,816","",""
        another application line, with a comma
        "3","7","k(float *, int)","Command line profiler metrics","dram__bytes_write.sum","byte","0","",""
        "3","7","k(float *, int)","","","","","SomeRule","OPT"
        """
    )
    (kernel,) = parse_ncu_csv(text)
    assert kernel == NcuKernel("k(float *, int)", 2816, 0, None, 3)


def test_parse_without_a_table_returns_no_kernels():
    assert parse_ncu_csv("==PROF== Connected\n==WARNING== No kernels were profiled.\n") == []


# ---------------------------------------------------------------------------------------------
# Aggregation
# ---------------------------------------------------------------------------------------------


def test_measured_bytes_totals_and_rows_by_name():
    measured = measured_bytes(parse_ncu_csv(fixture_text("eager_base_units.csv")))
    record = measured.to_json()

    assert measured.available and measured.reason is None
    assert record["source"] == SOURCE == "measured (Nsight Compute)"
    assert (record["read"], record["written"]) == (10_486_016, 7_340_064)
    assert record["total"] == 10_486_016 + 7_340_064
    assert record["duration_ns"] == 29632.0
    assert record["launches"] == 7 and record["launches_missing_values"] == 0
    assert len(record["kernels"]) == 6  # add ran twice under one name
    add = next(row for row in record["kernels"] if row["name"] == ADD)
    assert add == {
        "name": ADD,
        "calls": 2,
        "read": 4_194_304,
        "written": 2_097_152,
        "duration_ns": 10208.0,
    }
    json.dumps(record)  # JSON-ready


def test_measured_bytes_counts_missing_values_instead_of_hiding_them():
    record = measured_bytes(parse_ncu_csv(fixture_text("compile_auto_units.csv"))).to_json()

    assert record["read"] == 2_100_000 + 1_210_000_000 + 2_100_000 + 0
    assert record["written"] == 1_050_000 + 524_290 + 4_100
    assert record["launches_missing_values"] == 1
    triton = next(row for row in record["kernels"] if row["name"] == TRITON)
    assert (triton["calls"], triton["read"], triton["written"]) == (2, 4_200_000, 1_050_000)


def test_no_kernels_is_unavailable_not_zero():
    measured = measured_bytes([])
    assert not measured.available
    assert measured.read is None and measured.reason == "ncu profiled no kernels"
    assert measured.to_json()["total"] is None


# ---------------------------------------------------------------------------------------------
# Availability
# ---------------------------------------------------------------------------------------------


def write_executable(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def test_unavailable_on_cpu():
    assert ncu_unavailable_reason("cpu") == (
        "device is cpu: Nsight Compute measures NVIDIA GPUs only"
    )


def test_unavailable_without_ncu(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert ncu_unavailable_reason("cuda") == "ncu not found on PATH (install Nsight Compute)"


def test_unavailable_on_rocm(monkeypatch):
    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    reason = ncu_unavailable_reason("cuda")
    assert reason is not None and "ROCm" in reason and "NVIDIA GPUs only" in reason


def test_available_needs_ncu_and_cuda(tmp_path, monkeypatch):
    write_executable(tmp_path / "ncu", "raise SystemExit(0)\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "CUDA is not available" in str(ncu_unavailable_reason("cuda"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert ncu_unavailable_reason("cuda") is None


def test_ncu_command_leaves_clocks_alone_and_flushes_caches():
    cmd = ncu_command("/opt/ncu", "/tmp/log.csv", ["python", "-m", "child"])

    def value(option: str) -> str:
        assert cmd.count(option) == 1, cmd
        return cmd[cmd.index(option) + 1]

    assert cmd[0] == "/opt/ncu" and cmd[-3:] == ["python", "-m", "child"]
    # ncu's default locks the clocks to base: not allowed on a shared machine, and unlike
    # the timed run
    assert value("--clock-control") == "none"
    assert value("--cache-control") == "all"
    assert value("--profile-from-start") == "off"
    assert value("--print-units") == "base"
    assert value("--log-file") == "/tmp/log.csv"
    assert value("--metrics").split(",") == list(METRICS)
    # every ncu option comes before the child's command
    assert cmd.index("--clock-control") < cmd.index("python")


def test_report_shows_measured_writes_with_the_l2_caveat(gated_run):
    from profreport.record import Run, load
    from profreport.render import html
    from profreport.render.viewmodel import build_view

    record = load(gated_run / "run.json")
    measured = measured_bytes(parse_ncu_csv(fixture_text("eager_base_units.csv")))
    record["modes"]["eager"]["bytes"]["measured"] = measured.to_json()

    view = build_view(Run.from_json(record))
    (eager,) = [d for d in view["details"] if d["mode"] == "eager"]
    assert eager["measured"]["available"] and eager["measured"]["writes_note"] == WRITES_NOTE
    assert "up to the L2 size per kernel" in WRITES_NOTE
    page = html.render(Run.from_json(record))
    assert "compare them with modeled writes loosely" in page


# ---------------------------------------------------------------------------------------------
# The child process and the ncu plumbing (fake ncu, real child on CPU)
# ---------------------------------------------------------------------------------------------

FAKE_NCU = """\
import json, os, subprocess, sys

args = sys.argv[1:]

def value(option):
    return args[args.index(option) + 1]

assert set(value("--metrics").split(",")) == {metrics!r}, args
assert "--csv" in args and value("--profile-from-start") == "off", args
assert value("--target-processes") == "all", args
assert value("--clock-control") == "none", args
start = args.index("-m") - 1  # ncu's options end where the child's python command starts
child = args[start:]
with open(os.environ["FAKE_NCU_RECORD"], "w") as f:
    json.dump({{"args": args, "child": child,
               "compile_threads": os.environ.get("TORCHINDUCTOR_COMPILE_THREADS")}}, f)
result = subprocess.run(child, capture_output=True, text=True)
sys.stdout.write(result.stdout)
sys.stderr.write(result.stderr)
if result.returncode != 0 or {marker!r} not in result.stdout:
    with open(value("--log-file"), "w") as log:
        log.write("==ERROR== The application returned an error code (%d).\\n" % result.returncode)
    sys.exit(result.returncode or 1)
with open({fixture!r}) as src, open(value("--log-file"), "w") as log:
    log.write(src.read())
"""


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    """Put an `ncu` on PATH; returns a function that installs a given script body."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_NCU_RECORD", str(tmp_path / "record.json"))

    def install(body: str) -> Path:
        return write_executable(bin_dir / "ncu", body)

    return install


def test_child_runs_one_step_on_cpu(capsys):
    argv = ["--model", "gated-residual", "--mode", "eager", "--device", "cpu", "--batch-size", "1"]
    assert ncu_child.main(argv) == 0
    assert f"{ncu_child.DONE_MARKER} of eager on cpu" in capsys.readouterr().out


def test_child_reports_a_bad_mode_in_one_line(capsys):
    argv = ["--model", "gated-residual", "--mode", "nope", "--device", "cpu", "--batch-size", "1"]
    assert ncu_child.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown mode 'nope'" in err


@pytest.mark.slow
def test_measure_mode_runs_the_child_under_ncu(fake_ncu, tmp_path):
    fixture = str(DATA / "eager_base_units.csv")
    fake_ncu(FAKE_NCU.format(metrics=set(METRICS), marker=ncu_child.DONE_MARKER, fixture=fixture))

    measured = measure_mode(
        ChildModel("gated-residual", "cpu", "float32", 1), "trace", timeout_s=300
    )

    assert measured.available, measured.reason
    assert (measured.read, measured.written) == (10_486_016, 7_340_064)
    assert measured.launches == 7 and len(measured.kernels) == 6  # rows by kernel name
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["child"][1:] == [
        "-m",
        "profreport.ncu_child",
        "--model",
        "gated-residual",
        "--mode",
        "trace",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--batch-size",
        "1",
    ]
    assert record["compile_threads"] == "1"
    assert measured.command is not None and list(measured.command[1:]) == record["args"]


def test_measure_mode_reports_a_failing_child(fake_ncu):
    fixture = str(DATA / "eager_base_units.csv")
    fake_ncu(FAKE_NCU.format(metrics=set(METRICS), marker=ncu_child.DONE_MARKER, fixture=fixture))

    measured = measure_mode(ChildModel("no-such-model", "cpu", "float32", None), "eager")

    assert not measured.available and measured.read is None
    assert measured.reason is not None
    assert measured.reason.startswith("ncu exited with code 2: ==ERROR== The application")
    assert "unknown model 'no-such-model'" in measured.reason


def test_measure_mode_reports_ncu_failure(fake_ncu):
    fake_ncu(
        textwrap.dedent(
            """\
            import sys
            args = sys.argv[1:]
            with open(args[args.index("--log-file") + 1], "w") as log:
                log.write("==PROF== Connected to process 1\\n")
                log.write("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to "
                          "access NVIDIA GPU Performance Counters on the target device 0.\\n")
            sys.exit(1)
            """
        )
    )
    measured = measure_mode(ChildModel("gated-residual", "cpu", "float32", 1), "eager")

    assert not measured.available
    assert measured.reason is not None
    assert measured.reason.startswith("ncu exited with code 1: ==ERROR== ERR_NVGPUCTRPERM")
    assert "\n" not in measured.reason
    assert measured.command is not None and "--csv" in measured.command


def test_measure_mode_without_kernels(fake_ncu):
    fake_ncu(
        textwrap.dedent(
            """\
            import sys
            args = sys.argv[1:]
            with open(args[args.index("--log-file") + 1], "w") as log:
                log.write("==PROF== Connected to process 1\\n")
                log.write("==WARNING== No kernels were profiled.\\n")
            """
        )
    )
    measured = measure_mode(ChildModel("gated-residual", "cpu", "float32", 1), "eager")
    assert not measured.available
    assert measured.reason == "ncu profiled no kernels: ==WARNING== No kernels were profiled."


def test_measure_mode_times_out(fake_ncu):
    fake_ncu("import time\ntime.sleep(60)\n")
    measured = measure_mode(ChildModel("gated-residual", "cpu", "float32", 1), "eager", timeout_s=1)
    assert not measured.available
    assert measured.reason is not None and measured.reason.startswith("ncu timed out after 1 s")


def test_measure_mode_without_ncu(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    measured = measure_mode(ChildModel("gated-residual", "cpu", "float32", 1), "eager")
    assert not measured.available
    assert measured.reason == "ncu not found: 'ncu' (install Nsight Compute)"
