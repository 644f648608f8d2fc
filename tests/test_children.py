"""The noise guard counts profreport's own child processes apart from other processes: found
through the process tree (psutil), their CPU read while they live and after they are reaped.

The attribution tests run a real child that burns CPU, the tree test a child with a child.
"""

import subprocess
import sys
import time

import psutil
import pytest

from profreport.analysis import paired
from profreport.capture import noise
from profreport.record.model import MachineLoad, TimingNoise
from profreport.render.noise_view import noise_text

TICK_S = 0.01  # psutil's CPU times come in hundredths of a second
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


def _cpu_s_of(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)


def test_a_live_child_burning_cpu_is_counted_as_ours_not_as_other_processes():
    before = noise.snapshot()
    child = _burner()
    try:
        after = noise.snapshot()  # the child is alive: read through psutil
        burnt = _cpu_s_of(child.pid)
        found = {c.pid: c for c in noise.live_descendants() or []}
    finally:
        child.communicate("")
    assert child.pid in found and found[child.pid].name == "python"
    assert burnt >= BURN_S * 0.9  # it did burn what it was told to
    # the snapshots took the child's CPU time (a tick may land between the two readings)
    assert abs((after.children - before.children) - burnt) <= 2 * TICK_S
    load = noise.machine_load(before, after)
    total = after.total - before.total
    assert load.children_busy_share == pytest.approx(
        (after.children - before.children) / total, abs=1e-4
    )
    other = (after.busy - before.busy) - (after.ours - before.ours)
    other -= after.children - before.children
    assert load.other_busy_share == pytest.approx(max(0.0, other / total), abs=1e-4)


# In a fresh interpreter: the test process's other descendants (Inductor's compile workers from
# earlier tests) may exit between the two readings, unreaped, and take their time with them.
_REAPED = (
    "import subprocess, sys\n"
    "from profreport.capture import noise\n"
    f"child = subprocess.Popen([sys.executable, '-c', {_BURNER!r}], stdin=subprocess.PIPE,\n"
    "                         stdout=subprocess.PIPE, text=True)\n"
    "assert child.stdout.readline() == 'burnt\\n'\n"
    "alive = noise.children_cpu_s()\n"
    "child.communicate('')  # waited for: its time moves into our children_user/system\n"
    "reaped = noise.children_cpu_s()\n"
    "gone = child.pid not in {c.pid for c in noise.live_descendants() or []}\n"
    "print(alive, reaped, gone)\n"
)


def test_a_reaped_child_keeps_its_time_in_our_count():
    done = subprocess.run(
        [sys.executable, "-c", _REAPED], capture_output=True, text=True, timeout=60, check=True
    )
    alive, reaped, gone = done.stdout.split()
    assert float(alive) >= BURN_S * 0.9  # the live child's burn, read through the tree
    # never lost when the child is reaped (the same clock ticks, summed in another order: a
    # float rounding apart, 0.3999999999999999 vs 0.39999999999999997 once)
    assert float(reaped) >= float(alive) - 1e-9
    assert gone == "True"


# Starts a child that sleeps, says its pid, then waits for stdin to close.
_PARENT = (
    "import subprocess, sys\n"
    "kid = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(kid.pid, flush=True)\n"
    "sys.stdin.read()\n"
    "kid.kill()\n"
)


def test_descendants_are_found_through_the_process_tree():
    child = subprocess.Popen(
        [sys.executable, "-c", _PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        ours = {c.pid: c for c in noise.live_descendants() or []}
        below_child = {c.pid for c in noise.live_descendants(child.pid) or []}
    finally:
        child.communicate("")
    assert {child.pid, grandchild} <= set(ours)  # a grandchild is ours too
    assert below_child == {grandchild}
    assert ours[child.pid].name.startswith("python") and ours[child.pid].cpu_s >= 0
    assert child.pid not in {c.pid for c in noise.live_descendants() or []}


def test_a_process_that_is_gone_has_no_reading():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert noise.live_descendants(gone.pid) is None
    assert noise.children_cpu_s() is not None


def _load(children_s: tuple[float, float] | None) -> MachineLoad:
    before_children, after_children = children_s or (None, None)
    before = noise.Snapshot(load1=1.0, busy=1000, total=2000, ours=100, children=before_children)
    after = noise.Snapshot(load1=1.0, busy=1600, total=3000, ours=400, children=after_children)
    return noise.machine_load(before, after)


def test_children_share_is_taken_out_of_other_processes():
    # 1000 CPU seconds: 600 busy, 300 ours, 200 our children's, so 100 other processes'
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
