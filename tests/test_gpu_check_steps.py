"""scripts/gpu-check's driver on CPU: steps bounded by their limits and the budget, a summary
always written (three files within the device tool's limits), the real analyze / compare /
render commands on a real run folder; the preflight readings (a fake ncu on PATH, run with
profreport's own options); the carried wheels, built and installed the way the GPU machine
installs them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest
from gpu_check import preflight, report, steps, wheels
from gpu_check.__main__ import main
from gpu_check.checks_preflight import preflight_ncu
from gpu_check.evidence import Evidence
from gpu_check.spec import DECODER, DEFAULT_MODES, GATED, MLP, RUN_SPECS, SIMPLE
from gpu_check.steps import Step, Workspace, run_plan, step_env

from tests.gpu_evidence import preflight_from_lines

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable


def _python(code: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(code)]


def _workspace(tmp_path: Path) -> Workspace:
    work = tmp_path / "work"
    work.mkdir()
    return Workspace(work, step_env(dict(os.environ), work, None))


def _ended(pid: int, wait_s: float = 5.0) -> bool:
    """Whether process `pid` is gone or a zombie (ended, not yet reaped by its new parent)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.1)
    return False


def test_steps_are_bounded_and_every_ending_is_recorded(tmp_path):
    ws = _workspace(tmp_path)
    pid_file = tmp_path / "slow.pid"
    plan = [
        Step("quick", 30, lambda _ws: _python("print('hello')")),
        Step(
            "slow",
            1,
            lambda _ws: _python(
                f"""
                import os, subprocess, sys, time
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
                open({str(pid_file)!r}, "w").write(str(child.pid))
                time.sleep(60)
                """
            ),
        ),
        Step(
            "fails", 30, lambda _ws: _python("import sys; print('CUDA error: boom'); sys.exit(3)")
        ),
        Step("needs a run", 30, lambda _ws: "no gated-residual run folder"),
    ]
    started = time.monotonic()
    evidence = run_plan(plan, ws, budget_s=200)
    assert time.monotonic() - started < 25  # the slow step was ended at its 1 s limit

    quick, slow, fails, needs = (evidence.steps[s.name] for s in plan)
    assert quick.status == "ok" and quick.returncode == 0
    assert "hello" in (ws.work / quick.log).read_text()
    assert (slow.status, slow.timeout_s) == ("timeout", 1)
    # its whole process group went with it: the grandchild too
    assert _ended(int(pid_file.read_text()))
    assert (fails.status, fails.returncode, fails.reason) == ("failed", 3, "CUDA error: boom")
    assert (needs.status, needs.reason) == ("not run", "no gated-residual run folder")
    assert fails.describe() == f"fails: exit 3 after {fails.seconds:.0f} s (CUDA error: boom)"


def test_steps_past_the_budget_are_not_started(tmp_path):
    ws = _workspace(tmp_path)
    budget = steps.TAIL_RESERVE_S + steps.MIN_STEP_S + 1
    plan = [
        Step("first", 30, lambda _ws: _python("import time; time.sleep(2)")),
        Step("second", 30, lambda _ws: _python("print('never')")),
    ]
    evidence = run_plan(plan, ws, budget_s=budget)
    assert evidence.steps["first"].status == "ok"
    second = evidence.steps["second"]
    assert second.status == "not run" and second.reason.startswith("out of time")
    assert not (ws.work / "logs" / "second.log").exists()


def test_step_environment_puts_the_installed_wheels_first(tmp_path):
    site = tmp_path / "site"
    env = step_env({"PYTHONPATH": "/elsewhere", "PATH": "/usr/bin"}, tmp_path, site)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(site), str(steps.SCRIPTS), "/elsewhere"]
    assert env["PATH"].startswith(str(site / "bin"))
    assert env["PROFREPORT_CACHE_DIR"].startswith(str(tmp_path))
    assert env["TORCHINDUCTOR_CACHE_DIR"].startswith(str(tmp_path))


def test_install_is_offline_into_its_own_folder(tmp_path):
    ws = _workspace(tmp_path)
    wheel_dir, site = tmp_path / "wheels", tmp_path / "site"
    wheel_dir.mkdir()
    command = steps.install_command(wheel_dir, site)
    assert "no wheels in" in str(command(ws))
    (wheel_dir / "orjson-3.13.0-cp312-cp312-manylinux_2_17_x86_64.whl").write_bytes(b"")
    argv = command(ws)
    assert isinstance(argv, list)
    for option in ("--no-index", "--no-deps", "--no-cache-dir"):
        assert option in argv
    assert argv[argv.index("--target") + 1] == str(site) and argv[-1].endswith(".whl")


def _copy_run(label: str, source: Path) -> Step:
    """The generate step of `label`, replaced by a copy of a recorded run folder."""
    real = next(s for s in steps.plan() if s.name == f"generate {label}")

    def command(ws: Workspace) -> list[str]:
        target = ws.work / "runs" / label / source.name
        return _python(f"import shutil; shutil.copytree({str(source)!r}, {str(target)!r})")

    return Step(real.name, 60, command, real.collect, real.salvage)


def test_gpu_check_writes_its_summary_when_steps_fail(tmp_path, capsys):
    """The plan's own analyze, compare and render steps on copies of the H200 runs (their
    generate steps replaced by the copy), and a generate that outlives its limit."""
    from tests.gpu_evidence import recorded_summary, unpacked_runs

    preflight_json = tmp_path / "preflight-fixture.json"
    preflight_json.write_text(json.dumps(preflight_from_lines(recorded_summary())))
    recorded = unpacked_runs(tmp_path / "recorded")
    real = {s.name: s for s in steps.plan()}
    plan = [
        Step(
            "preflight",
            30,
            lambda ws: _python(
                f"import shutil; shutil.copy({str(preflight_json)!r}, {str(ws.work / 'preflight.json')!r})"
            ),
            real["preflight"].collect,
        ),
        _copy_run(SIMPLE, recorded[SIMPLE]),
        real[f"analyze {SIMPLE}"],
        real["render"],
        _copy_run(DECODER, recorded[DECODER]),
        real[f"analyze {DECODER}"],
        real["compare"],
        Step(f"generate {MLP}", 1, lambda _ws: _python("import time; time.sleep(30)")),
    ]
    out, work = tmp_path / "out", tmp_path / "work"

    rc = main([str(out), "--work", str(work), "--budget", "300"], steps=plan)

    printed = capsys.readouterr().out
    assert rc == 1
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [report.TEXT_NAME, report.JSON_NAME, report.ARCHIVE_NAME]
    )
    text = (out / report.TEXT_NAME).read_text()
    assert text in printed
    # real analyze, compare and render on real CUDA run folders: their checks hold
    for name in (f"{SIMPLE}.analyze", f"{DECODER}.analyze", "compare", f"{SIMPLE}.render",
                 f"{SIMPLE}.counts", f"{SIMPLE}.ncu_kernels"):  # fmt: skip
        assert f"ok    {name}" in text, text
    assert f"generate {MLP}: timed out after" in text
    assert f"FAIL  {MLP}.modes" in text
    assert re.search(r"simple\s+compile\s+ok\s+5\s+5\s+0\s+282\.0\s+193\.8.*inconclusive", text)

    summary = report.read_summary(out)
    assert summary["counts"]["FAIL"] > 0 and summary["counts"]["ok"] >= 10
    assert {s["name"]: s["status"] for s in summary["steps"]}[f"generate {MLP}"] == "timeout"
    assert [r["mode"] for r in summary["table"] if r["run"] == SIMPLE] == list(DEFAULT_MODES)
    assert summary["preflight"]["cuda"]["device"] == "NVIDIA H200"  # the readings are kept

    with tarfile.open(out / report.ARCHIVE_NAME) as tar:
        names = tar.getnames()
    assert "gpu-check-work/logs/generate-mlp-block.log" in names
    assert "gpu-check-work/analyze/simple/analysis.json" in names
    assert any(n.endswith("/run.json") and "/runs/simple/" in n for n in names)
    assert any("/tensorboard/" in n for n in names)
    assert (out / report.ARCHIVE_NAME).stat().st_size < report.ARCHIVE_MAX_BYTES


def _staging_generate(spec_label: str, then: str) -> Step:
    """A generate step that stages a run folder as profreport does (`.<name>.partial-*` with
    the checkpointed run.json of one finished mode), then `then` (sleeps, or dies of SIGSEGV)."""
    real = next(s for s in steps.plan() if s.name == f"generate {spec_label}")
    record = {"modes": {"eager": {"status": "ok", "trace": "tensorboard/eager/e.pt.trace.json"}}}

    def command(ws: Workspace) -> list[str]:
        staged = ws.work / "runs" / spec_label / ".simple-cuda-x.partial-abc123"
        return _python(
            f"""
            import json, os, pathlib, time
            folder = pathlib.Path({str(staged)!r})
            (folder / "tensorboard" / "eager").mkdir(parents=True)
            (folder / "run.json").write_text(json.dumps({record!r}))
            {then}
            """
        )

    return Step(real.name, 2, command, real.collect, real.salvage)


@pytest.mark.parametrize(
    "then",
    ["time.sleep(60)", "import ctypes; ctypes.string_at(0)"],
    ids=["outlives its limit", "dies of SIGSEGV"],
)
def test_a_run_that_does_not_finish_keeps_the_modes_that_did(tmp_path, then):
    """A generate ended at its time limit (profreport deletes its staged folder when stopped:
    gpu-check copies it first) or killed by a signal (the staged folder stays): the modes it
    checkpointed are the run's evidence, marked as a run that did not finish."""
    ws = _workspace(tmp_path)
    evidence = run_plan([_staging_generate(SIMPLE, then)], ws, budget_s=200)
    outcome = evidence.steps[f"generate {SIMPLE}"]
    assert outcome.status == ("timeout" if "sleep" in then else "failed")
    assert list(evidence.runs[SIMPLE]["modes"]) == ["eager"]
    assert evidence.partial[SIMPLE].startswith("the run did not finish")
    if "sleep" in then:
        assert evidence.run_dirs[SIMPLE].name.startswith("salvaged-simple-cuda-x.partial-")


def test_the_plan_puts_the_most_valuable_evidence_first():
    """Each run is followed by analyze of its traces; render comes right after the run it
    renders, compare right after the second run it compares; export and the opt-in compile
    variants, which have crashed or hung on a GPU, each in a run of its own after those."""
    names = [s.name for s in steps.plan(wheels=Path("w"), site=Path("s"))]
    assert names == [
        "install", "preflight",
        "generate simple", "analyze simple", "render",
        "generate gated-residual", "analyze gated-residual",
        "generate decoder-lm", "analyze decoder-lm", "compare",
        "generate export", "analyze export",
        "generate decoder-lm-bytes", "analyze decoder-lm-bytes",
        "generate decode", "analyze decode",
        "generate decode-cudagraphs", "analyze decode-cudagraphs",
        "generate cudagraphs", "analyze cudagraphs",
        "generate max-autotune", "analyze max-autotune",
        "generate conv-bn-relu", "analyze conv-bn-relu",
        "generate mlp-block", "analyze mlp-block",
    ]  # fmt: skip
    for spec in RUN_SPECS.values():  # a mode known to crash never shares a process
        risky = {"export", "compile-max-autotune", "compile-cudagraphs"} & set(spec.modes)
        assert len(risky) <= 1 and (not risky or set(spec.modes) - risky == {"eager"}), spec


def test_archive_leaves_traces_out_when_too_large(tmp_path, monkeypatch):
    from tests.gpu_evidence import unpacked_runs

    work = tmp_path / "work"
    recorded = unpacked_runs(tmp_path / "recorded")[GATED]
    shutil.copytree(recorded, work / "runs" / GATED / recorded.name)
    (work / "cache").mkdir()
    (work / "cache" / "big.bin").write_bytes(b"x" * 1000)
    monkeypatch.setattr(report, "ARCHIVE_MAX_BYTES", 1000)
    text = report.write_outputs(tmp_path / "out", work, Evidence(), [])
    with tarfile.open(tmp_path / "out" / report.ARCHIVE_NAME) as tar:
        names = tar.getnames()
    assert not any("/tensorboard/" in n or "/cache" in n for n in names)
    assert any(n.endswith("run.json") for n in names)
    assert "traces left out" in text


# ---------------------------------------------------------------------------------------------
# preflight
# ---------------------------------------------------------------------------------------------

PROBE_CSV = """\
==PROF== Connected to process 77 (/usr/bin/python3.12)
==PROF== Profiling "vectorized_elementwise_kernel" - 0: 0%....50%....100% - 1 pass
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name","Metric Name","Metric Unit","Metric Value"
"0","77","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4>(int)","1","7","Command line profiler metrics","dram__bytes_read.sum","byte","16,908,288"
"0","77","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4>(int)","1","7","Command line profiler metrics","dram__bytes_write.sum","byte","0"
"0","77","python3.12","127.0.0.1","void at::native::vectorized_elementwise_kernel<4>(int)","1","7","Command line profiler metrics","gpu__time_duration.sum","nsecond","9,856"
"""

FAKE_NCU = """\
import json, sys
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\\nVersion 2025.3.1.0 (build 1)")
    sys.exit(0)
def value(option):
    return args[args.index(option) + 1]
assert value("--clock-control") == "none" and value("--profile-from-start") == "off", args
open({record!r}, "w").write(json.dumps(args))
open(value("--log-file"), "w").write(open({csv!r}).read())
"""


def test_preflight_on_a_machine_without_cuda_or_ncu(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no ncu, no nvidia-smi
    found = preflight.readings(None, ncu_timeout_s=5)
    assert found["cuda"] == {"available": False, "reason": "torch.cuda.is_available() is False"}
    assert found["ncu"] == {"available": False, "reason": "ncu not found on PATH"}
    assert found["fusers"]["nnc_can_fuse_on_gpu"] is False
    deps = found["dependencies"]
    assert deps["location"] == str(REPO / "profreport")  # this checkout's profreport
    required = {r["requirement"].split(">")[0]: r for r in deps["requirements"]}
    assert {"torch", "orjson", "torch-tb-profiler", "jinja2"} <= set(required)
    assert all(r["satisfied"] for r in required.values()), required
    assert not any("transformers" in r for r in required)  # extras are not requirements


def test_preflight_ncu_probe_uses_profreports_options(monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "probe.csv").write_text(PROBE_CSV)
    ncu = bin_dir / "ncu"
    record = tmp_path / "args.json"
    ncu.write_text(
        f"#!{PY}\n" + FAKE_NCU.format(record=str(record), csv=str(tmp_path / "probe.csv"))
    )
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    found = preflight.ncu_reading(timeout_s=60)

    assert found["available"] is True, found
    assert (found["kernels"], found["read"], found["written"]) == (1, 16_908_288, 0)
    assert found["expected_read"] == preflight.PROBE_ELEMENTS * 4
    assert found["version"] == "Version 2025.3.1.0 (build 1)"
    args = json.loads(record.read_text())
    assert args[args.index("--metrics") + 1].split(",")[0] == "dram__bytes_read.sum"
    assert args[-2] == "-c" and "torch.cuda.profiler.start()" in args[-1]
    (result,) = preflight_ncu(Evidence(preflight={"ncu": found}))
    assert result.status == "ok" and "x1.01" in result.detail


def test_preflight_records_ncu_failing_on_the_device(monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ncu = bin_dir / "ncu"
    ncu.write_text(
        f"#!{PY}\nimport sys\nif sys.argv[1:] == ['--version']: sys.exit(0)\n"
        "print('==ERROR== Failed to initialize the profiler: LibraryNotLoaded')\nsys.exit(1)\n"
    )
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    found = preflight.ncu_reading(timeout_s=60)
    assert found["available"] is False
    assert (
        found["reason"]
        == "ncu exited 1: ==ERROR== Failed to initialize the profiler: LibraryNotLoaded"
    )


def test_preflight_main_writes_json(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    out = tmp_path / "preflight.json"
    assert preflight.main(["--out", str(out), "--ncu-timeout", "5"]) == 0
    assert json.loads(out.read_text())["cuda"]["available"] is False


# ---------------------------------------------------------------------------------------------
# the carried wheels
# ---------------------------------------------------------------------------------------------

GOOD_WHEELS = (
    "profreport-0.1.0-py3-none-any.whl",
    "orjson-3.13.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
    "torch_tb_profiler-0.4.3-py3-none-any.whl",
)


@pytest.mark.parametrize(
    ("extra", "drop", "problem"),
    [
        ((), None, None),
        ((), "torch_tb_profiler-0.4.3-py3-none-any.whl", "torch_tb_profiler: 0 wheels"),
        (("orjson-3.12.0-cp312-cp312-manylinux_2_17_x86_64.whl",), None, "orjson: 2 wheels"),
        (
            ("rich-15.0.0-cp311-cp311-manylinux_2_17_x86_64.whl",),
            None,
            "not for CPython 3.12 on x86-64 Linux",
        ),
        (("numpy-2.4.6-cp312-cp312-macosx_14_0_arm64.whl",), None, "not for CPython 3.12"),
        (("torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl",), None, "has its own torch"),
        (("nvidia_cublas-13.0-py3-none-manylinux_2_27_x86_64.whl",), None, "has its own nvidia"),
    ],
)
def test_wheel_folder_problems(tmp_path, extra, drop, problem):
    for name in (*GOOD_WHEELS, *extra):
        if name != drop:
            (tmp_path / name).write_bytes(b"")
    found = wheels.problems(tmp_path, "3.12")
    if problem is None:
        assert found == []
    else:
        assert any(problem in p for p in found), found


def test_wheel_folder_too_large(tmp_path):
    for name in GOOD_WHEELS:
        with (tmp_path / name).open("wb") as f:
            f.truncate(wheels.MAX_BYTES // 2)
    assert wheels.problems(tmp_path) == [
        f"{3 * (wheels.MAX_BYTES // 2)} bytes in all, over {wheels.MAX_BYTES}"
    ]


def test_abi3_wheels_run_on_later_pythons():
    assert wheels._runs_on("cp38", "abi3", "manylinux_2_17_x86_64", "3.12")
    assert not wheels._runs_on("cp313", "cp313", "manylinux_2_17_x86_64", "3.12")


@pytest.mark.slow
def test_built_wheels_install_offline_and_run_from_their_site(tmp_path):
    """scripts/build-gpu-wheels for this Python (the GPU machine's is 3.12), then gpu-check's
    install step: offline, --no-deps, into its own folder; the profreport it installed renders
    from its own templates, run from outside the source tree."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    wheel_dir = tmp_path / "wheels"
    env = {**os.environ, "PYTHON_VERSION": version, "PYTHON": PY}
    built = subprocess.run(
        [str(REPO / "scripts" / "build-gpu-wheels"), str(wheel_dir)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    assert wheels.problems(wheel_dir, version) == []
    assert sum(p.stat().st_size for p in wheel_dir.iterdir()) < 4 * 2**20

    site = tmp_path / "site"
    ws = _workspace(tmp_path)
    ws.env = step_env(dict(os.environ), ws.work, site)
    outcome = steps.run_step(
        Step("install", 120, steps.install_command(wheel_dir, site)), ws, 120, time.monotonic
    )
    assert outcome.status == "ok", (ws.work / outcome.log).read_text()
    code = (
        "import profreport, orjson, torch_tb_profiler, pathlib;"
        "p = pathlib.Path(profreport.__file__).parent;"
        "print(p); print((p / 'templates' / 'report.html.j2').is_file())"
    )
    shown = subprocess.run(
        [PY, "-c", code], env=ws.env, cwd=ws.work, capture_output=True, text=True, timeout=120
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    location, templates = shown.stdout.split()
    assert location == str(site / "profreport") and templates == "True"


def test_gpu_check_command_line_rejects_an_unknown_run(tmp_path):
    done = subprocess.run(
        [str(REPO / "scripts" / "gpu-check"), str(tmp_path / "out"), "--runs", "nope"],
        env={**os.environ, "PYTHON": PY}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "gpu-check: error: --runs: unknown nope"
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_gpu_check_runs_its_real_plan_on_cpu(tmp_path):
    """The real plan, one run, on CPU (the device tool's machine runs the same on CUDA): the
    preflight, a real generate, analyze on its traces; CUDA's checks FAIL here, as they must
    (a CPU trace has no device events for the raw counts). The step limits are stretched: this
    shared 2-core machine is far slower than the GPU's."""
    out, work = tmp_path / "out", tmp_path / "work"
    done = subprocess.run(
        [str(REPO / "scripts" / "gpu-check"), str(out), "--runs", "conv-bn-relu",
         "--device", "cpu", "--work", str(work), "--budget", "560", "--cap-scale", "5"],
        env={**os.environ, "PYTHON": PY}, capture_output=True, text=True, timeout=700,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    summary = report.read_summary(out)
    statuses = {s["name"]: s["status"] for s in summary["steps"]}
    assert statuses == {
        "preflight": "ok",
        "generate conv-bn-relu": "ok",
        "analyze conv-bn-relu": "ok",
    }, summary["steps"]
    checks = {c["name"]: c for c in summary["checks"]}
    assert checks["preflight.cuda"]["status"] == "FAIL"
    assert "ran on cpu, not cuda" in checks["conv-bn-relu.modes"]["detail"]
    assert "0 in the trace" in checks["conv-bn-relu.counts"]["detail"]  # no device events
    assert checks[f"{GATED}.ncu_bytes"]["status"] == "skip"  # not among this check's runs
    assert [r["mode"] for r in summary["table"]] == list(DEFAULT_MODES)


def test_cap_scale_stretches_every_step_limit():
    base = {s.name: s.cap_s for s in steps.plan()}
    scaled = {s.name: s.cap_s for s in steps.plan(cap_scale=2.5)}
    assert scaled == {name: cap * 2.5 for name, cap in base.items()}
    assert base[f"generate {GATED}"] == 120


def test_a_step_killed_by_a_signal_leaves_its_python_stack_in_the_log(tmp_path):
    # export ended generate with SIGSEGV on the H200 and its log held only the command line
    ws = _workspace(tmp_path)
    crash = Step("crash", 30, lambda _ws: _python("import ctypes; ctypes.string_at(0)"))
    outcome = steps.run_step(crash, ws, 30, time.monotonic)
    assert outcome.status == "failed" and outcome.returncode == -signal.SIGSEGV
    log = (ws.work / outcome.log).read_text()
    assert "Fatal Python error: Segmentation fault" in log
    assert 'File "<string>", line 1' in log


def test_an_unreadable_output_fails_its_step_not_the_check(tmp_path):
    real = next(s for s in steps.plan() if s.name == f"generate {SIMPLE}")

    def command(ws: Workspace) -> list[str]:
        folder = ws.work / "runs" / SIMPLE / "simple-cuda-x"
        return _python(
            f"import pathlib; p = pathlib.Path({str(folder)!r}); p.mkdir(parents=True); "
            "(p / 'run.json').write_text('{\"modes\": ')"
        )

    ws = _workspace(tmp_path)
    evidence = run_plan([Step(real.name, 30, command, real.collect)], ws, budget_s=200)
    outcome = evidence.steps[real.name]
    assert outcome.status == "failed"
    assert outcome.reason.startswith("its output could not be read: ")
    assert SIMPLE not in evidence.runs
