"""The noise guard counts profreport's own child processes apart from other processes: found by
their parent chain in /proc, their CPU read while they live and after they are reaped.

The attribution tests run a real child that burns CPU; the tree tests read a /proc written here.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profreport.analysis import paired
from profreport.capture import children, noise
from profreport.record.model import MachineLoad, TimingNoise
from profreport.render.noise_view import noise_text

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="Linux /proc only")

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
BURN_S = 0.4  # CPU seconds the child burns before it waits

# Burns BURN_S of CPU, says so on stdout, then waits for stdin to close (so it is alive when read).
_BURNER = (
    "import sys, time\n"
    f"end = time.process_time() + {BURN_S}\n"
    "while time.process_time() < end: pass\n"
    "print('burnt', flush=True)\n"
    "sys.stdin.read()\n"
)


def _burner() -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", _BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "burnt\n"
    return child


def _ticks_of(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14))


def test_a_live_child_burning_cpu_is_counted_as_ours_not_as_other_processes():
    before = noise.snapshot()
    child = _burner()
    try:
        after = noise.snapshot()  # the child is alive: read from its own /proc entry
        burnt = _ticks_of(child.pid)
        found = {c.pid: c for c in children.live_descendants() or []}
    finally:
        child.communicate("")
    assert child.pid in found and found[child.pid].name == "python"
    assert burnt * TICK_S >= BURN_S * 0.9  # it did burn what it was told to
    # the snapshots took the child's ticks (a tick may land between the two readings)
    assert abs((after.children - before.children) - burnt) <= 2
    load = noise.machine_load(before, after)
    total = after.total - before.total
    assert load.children_busy_share == pytest.approx(
        (after.children - before.children) / total, abs=1e-4
    )
    other = (after.busy - before.busy) - (after.ours - before.ours)
    other -= after.children - before.children
    assert load.other_busy_share == pytest.approx(max(0.0, other / total), abs=1e-4)


def test_a_reaped_child_keeps_its_ticks_in_our_count():
    child = _burner()
    alive = children.children_cpu_ticks()
    burnt = _ticks_of(child.pid)
    child.communicate("")  # waited for: its ticks move into our cutime/cstime
    reaped = children.children_cpu_ticks()
    assert alive is not None and reaped is not None
    assert burnt * TICK_S >= BURN_S * 0.9
    assert reaped >= alive  # never lost when the child is reaped
    assert child.pid not in {c.pid for c in children.live_descendants() or []}


def _stat(proc: Path, pid: int, name: str, ppid: int, ticks: tuple[int, int, int, int]) -> None:
    (proc / str(pid)).mkdir(parents=True, exist_ok=True)
    fields = ["S", str(ppid)] + ["0"] * 9 + [str(t) for t in ticks] + ["0"] * 30
    (proc / str(pid) / "stat").write_text(f"{pid} ({name}) " + " ".join(fields))


def test_descendants_are_found_by_their_parent_chain(tmp_path):
    _stat(tmp_path, 100, "python", 1, (500, 50, 7, 3))  # us: 7 + 3 ticks of reaped children
    _stat(tmp_path, 200, "compile worker (sidecar)", 100, (10, 2, 0, 0))
    _stat(tmp_path, 300, "g++) (x", 200, (30, 4, 1, 0))  # a grandchild, odd name
    _stat(tmp_path, 400, "bash", 1, (999, 0, 0, 0))  # not ours
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "stat").write_text((tmp_path / "100" / "stat").read_text())

    found = children.live_descendants(100, tmp_path)
    assert found == [
        children.ChildProcess(200, "compile worker (sidecar)", 12),
        children.ChildProcess(300, "g++) (x", 35),
    ]
    assert children.children_cpu_ticks(tmp_path) == 7 + 3 + 12 + 35


def test_no_proc_means_no_reading(tmp_path):
    assert children.children_cpu_ticks(tmp_path) is None
    assert children.live_descendants(1, tmp_path / "missing") is None


def _load(children_ticks: tuple[int, int] | None) -> MachineLoad:
    before_children, after_children = children_ticks or (None, None)
    before = noise.Snapshot(load1=1.0, busy=1000, total=2000, ours=100, children=before_children)
    after = noise.Snapshot(load1=1.0, busy=1600, total=3000, ours=400, children=after_children)
    return noise.machine_load(before, after)


def test_children_share_is_taken_out_of_other_processes():
    # 1000 jiffies: 600 busy, 300 ours, 200 our children's, so 100 other processes'
    load = _load((50, 250))
    assert load.children_busy_share == 0.2
    assert load.ours_busy_share == 0.3
    assert load.other_busy_share == 0.1
    # unknown children (an old reading): everything not ours is other, as before
    unknown = _load(None)
    assert unknown.children_busy_share is None and unknown.other_busy_share == 0.3


def test_busy_children_trip_the_guard_under_their_own_name():
    reasons = paired.machine_reasons(MachineLoad(other_busy_share=0.01, children_busy_share=0.2))
    assert reasons == [
        "profreport's own child processes (compile workers, compilers) used 20% of the "
        "machine's CPU time while timing (limit 10%)"
    ]
    assert paired.machine_reasons(MachineLoad(other_busy_share=0.01, children_busy_share=0.0)) == []


def test_the_method_text_names_the_children_share():
    text = noise_text(
        TimingNoise.from_json({"load": {"other_busy_share": 0.01, "children_busy_share": 0.03}})
    )
    assert "profreport's own child processes" in text and "used 3%" in text
    assert "child processes" not in noise_text(
        TimingNoise.from_json({"load": {"other_busy_share": 0.01}})
    )


def test_watch_reads_children_over_its_block():
    with noise.watch() as watched:
        child = _burner()
        child.communicate("")
        time.sleep(0.01)
    assert watched.load is not None
    share = watched.load.children_busy_share
    assert share is not None and share > 0
