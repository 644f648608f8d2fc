"""Fuzz the trace parser for a long run: the strategies and the property of
tests/test_fuzz_parser.py (tests/trace_strategies.py), for ``--cases`` cases split evenly over the
four strategies. Every case must parse to a Trace or raise TraceError, agree with the reference
parse, and be countable; one case in ``--helper-every`` is also parsed with a helper process.

Prints one row per strategy: cases, parsed OK, documented errors (TraceError), mismatches with the
reference, other exceptions (both must be 0), wall time and the slowest case. Exits 1 if any case
failed, after printing the first failing input of each strategy (truncated; the whole input is
written to a file whose path is printed) so that it can be replayed with
``check_document(open(path, "rb").read())`` or ``check_file(...)``.

    python bench/fuzz_parser.py [--cases 10000] [--seed 0] [--helper-every 50] [--case-timeout 60]
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.trace_strategies import STRATEGIES, check_document, check_file

SHOWN_BYTES = 600


class CaseTimeout(Exception):
    """A case ran past --case-timeout: the parser hangs, or nearly."""


@dataclass
class Tally:
    outcomes: Counter = field(default_factory=Counter)
    first_failure: tuple[bytes, str] | None = None
    slowest_s: float = 0.0
    wall_s: float = 0.0


def run_strategy(name: str, cases: int, seed_value: int, args, folder: str) -> Tally:
    """Run ``cases`` cases of one strategy (generation only: no shrinking, no database)."""
    tally = Tally()
    strategy = STRATEGIES[name]
    on_file = name.startswith("files")
    count = 0

    @seed(seed_value)
    @settings(
        max_examples=cases,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def one_case(data: bytes) -> None:
        nonlocal count
        count += 1
        helpers = args.helper_every > 0 and count % args.helper_every == 0
        started = time.perf_counter()
        signal.alarm(args.case_timeout)
        try:
            result = check_file(data, folder, helpers) if on_file else check_document(data, helpers)
        except Exception as exc:  # the bugs this run looks for: recorded, and the run goes on
            result = "mismatch" if isinstance(exc, AssertionError) else "other"
            if tally.first_failure is None:
                tally.first_failure = (data, traceback.format_exc())
        finally:
            signal.alarm(0)
        tally.slowest_s = max(tally.slowest_s, time.perf_counter() - started)
        tally.outcomes[result] += 1

    started = time.perf_counter()
    one_case()
    tally.wall_s = time.perf_counter() - started
    return tally


def _on_alarm(signum, frame):
    raise CaseTimeout("case ran past --case-timeout")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="in all (default 10000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--helper-every", type=int, default=50, help="one case in N also with a helper process"
    )
    parser.add_argument("--case-timeout", type=int, default=60, help="seconds; 0: none")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGALRM, _on_alarm)

    per_strategy = -(-args.cases // len(STRATEGIES))
    print(f"fuzzing the trace parser: {per_strategy:,} cases per strategy, seed {args.seed}")
    tallies: dict[str, Tally] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in STRATEGIES:
            tallies[name] = run_strategy(name, per_strategy, args.seed, args, folder)
    print_table(tallies)
    failed = False
    for name, tally in tallies.items():
        if tally.first_failure is None:
            continue
        failed = True
        data, trace = tally.first_failure
        with tempfile.NamedTemporaryFile(prefix="fuzz-failure-", suffix=".bin", delete=False) as fh:
            fh.write(data)
        shown = repr(data[:SHOWN_BYTES]) + (" ..." if len(data) > SHOWN_BYTES else "")
        print(f"\nfirst failure, {name} ({len(data)} bytes, whole input in {fh.name}):\n{shown}")
        print(trace.rstrip())
    return 1 if failed else 0


def print_table(tallies: dict[str, Tally]) -> None:
    header = (
        f"{'strategy':<22} {'cases':>7} {'parsed OK':>10} {'TraceError':>11} {'mismatch':>9} "
        f"{'other exc':>10} {'wall s':>8} {'slowest s':>10}"
    )
    print(header)
    print("-" * len(header))
    total = Tally()
    for name, tally in [*tallies.items(), ("total", total)]:
        if name != "total":
            total.outcomes.update(tally.outcomes)
            total.wall_s += tally.wall_s
            total.slowest_s = max(total.slowest_s, tally.slowest_s)
        o = tally.outcomes
        print(
            f"{name:<22} {sum(o.values()):>7} {o['ok']:>10} {o['error']:>11} {o['mismatch']:>9} "
            f"{o['other']:>10} {tally.wall_s:>8.1f} {tally.slowest_s:>10.2f}"
        )
    print(
        "parsed OK: a Trace, equal to the reference parse and counted; TraceError: the documented "
        "refusal; mismatch: a parse path disagreed with the reference; other exc: anything else."
    )


if __name__ == "__main__":
    raise SystemExit(main())
