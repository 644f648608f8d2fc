"""A heavy run says early how long it will take: the estimate from eager's first call, and the
line that stays on the terminal while the other progress messages replace one another."""

import io

from profreport.capture.profiling import ProfileSchedule
from profreport.capture.timing import TimingConfig
from profreport.cli.common import progress_display
from profreport.run_estimate import duration_notice
from profreport.text import Notice

SCHEDULE = ProfileSchedule(wait=1, warmup=1, active=3)
TIMING = TimingConfig(min_time_s=0.3, max_time_s=60.0)


def test_a_run_heavier_than_its_budget_says_so():
    notice = duration_notice(45.0, 5, SCHEDULE, TIMING)
    # ALBERT xxlarge on a busy 2-core machine: 5 x 14 x 45 s (the light pass of a heavy model:
    # 3 rounds, nothing more); a warm-up call and one round each
    assert notice == (
        "eager's first call took 45.00 s: expect about 52.5 min of warm-up, profiling and checks "
        "for 5 modes (plus compile time), then about 7.5 min of latency timing (more than "
        "--max-time 60 s: each mode is warmed up and timed at least once)"
    )


def test_a_light_run_says_nothing():
    assert duration_notice(0.01, 5, SCHEDULE, TIMING) is None


def test_a_heavy_run_names_its_phases_and_the_budget():
    # ALBERT xxlarge-like: 2.5 s a call, 6 modes; 3 warm-up + 5 profiled + 3 in the light pass
    # + 3 checks = 14 calls
    notice = duration_notice(2.5, 6, SCHEDULE, TIMING)
    assert isinstance(notice, Notice)
    assert notice == (
        "eager's first call took 2.50 s: expect about 3.5 min of warm-up, profiling and checks "
        "for 6 modes (plus compile time), then about 60 s of latency timing (the --max-time "
        "budget)"
    )


def test_a_run_heavy_enough_but_within_its_budget_does_not_claim_the_budget():
    notice = duration_notice(0.6, 2, SCHEDULE, TimingConfig(min_time_s=0.3, max_time_s=600))
    # 2 x 17 x 0.6 s = 20.4 s (the light pass: a warm-up round and 5 rounds); timing: six
    # warm-up calls each until the call time is steady (3.6 s, within a tenth of the budget),
    # then 15 rounds of 1.2 s: 25.2 s
    assert notice == (
        "eager's first call took 0.60 s: expect about 20 s of warm-up, profiling and checks for "
        "2 modes (plus compile time), then about 25 s of latency timing"
    )


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_notice_stays_above_the_status_line():
    terminal = _Terminal()
    with progress_display(False, terminal) as progress:
        progress("eager: building and warming up")
        progress(Notice("eager's first call took 2.50 s: expect about 3 min"))
        progress("eager: profiling 3 steps")
    shown = terminal.getvalue()
    assert "eager's first call took 2.50 s: expect about 3 min\n" in shown  # a line of its own
    assert shown.rstrip().endswith("\x1b[2K")  # while the status line is cleared at the end


def test_without_a_terminal_every_message_is_a_line():
    stream = io.StringIO()
    with progress_display(False, stream) as progress:
        progress(Notice("eager's first call took 2.50 s"))
    assert stream.getvalue() == "profreport: eager's first call took 2.50 s\n"
