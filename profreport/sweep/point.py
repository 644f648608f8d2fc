"""One sweep point in a process of its own (the local executor's child):

    python -m profreport.sweep.point REQUEST_JSON RESULT_JSON

reads the runner.GenerateRequest in REQUEST_JSON, runs it (runner.run_point) and writes the
runner.GenerateResult to RESULT_JSON; the exit code is the result's. SIGTERM stops it like
Ctrl-C (nothing half-written is kept, the result says interrupted). Its output is for people
only: the sweep reads the result file.
"""

from __future__ import annotations

import sys
from pathlib import Path

from profreport import interrupts
from profreport.files import write_atomic
from profreport.record import dumps
from profreport.runner import GenerateRequest, GenerateResult, run_point


def summary_line(result: GenerateResult) -> str:
    """One line for the point's log: the error, or where the record is."""
    return f"error: {result.error}" if result.error else f"record: {result.record}"


def main(argv: list[str]) -> int:
    request_path, result_path = (Path(arg) for arg in argv)
    with interrupts.signals_as_interrupt():
        request = GenerateRequest.parse_file(request_path, closed=True)
        result = run_point(request, sys.stderr)
        write_atomic(result_path, dumps(result.to_json()))
    print(summary_line(result), file=sys.stderr if result.error else sys.stdout)
    return result.exit_code


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m profreport.sweep.point REQUEST_JSON RESULT_JSON")
    sys.exit(main(sys.argv[1:]))
