import os
import sys

from profreport.cli import main
from profreport.exits import EXIT_INTERRUPTED

code = main()
if code == EXIT_INTERRUPTED:
    # Everything is written or cleaned up by now. An interrupt can stop torch's profiler in the
    # middle of a trace, and the interpreter's teardown after that crashed once (SIGSEGV after
    # "interrupted; nothing half-written was kept" was printed, tests/test_generate_failures in
    # CI): the exit code is 130 all the same.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
raise SystemExit(code)
