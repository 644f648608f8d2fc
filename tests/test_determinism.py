"""Two runs of the same model give the same kernel counts and modeled bytes in every mode.

Only latency and kernel times may differ between runs: they are measurements of the moment.
The second run starts with Inductor's and TorchScript's in-process caches warm, the first cold,
so this also checks that a cache hit does not change what is counted.
"""

import json
import re

import pytest

from tests.conftest import generate_run

pytestmark = pytest.mark.slow  # two full five-mode generate runs

# the roofline fields of a row are computed from its time and the machine's measured ceilings
TIMED_KEYS = {"time_us", "time_us_per_step", "achieved_bytes_per_s", "achieved_flops_per_s"}
TIMED_KEYS |= {"ceiling_pct", "roofline_note"}
# With kernel profiling on, Inductor prefixes C++ kernels with a graph number that counts the
# graphs compiled so far in the process (graph_0_cpp_fused_..., then graph_1_ in the next run).
INDUCTOR_GRAPH_NUMBER = re.compile(r"\bgraph_\d+_")


def _counted(record: dict) -> dict:
    out = {}
    for name, mode in record["modes"].items():
        kernels = mode["kernels"]
        out[name] = {
            "status": mode["status"],
            "kernels": {k: v for k, v in kernels.items() if k not in {"table", "whole_trace"}},
            # Rows are listed by kernel time, which is measured: compare them by name.
            "kernel_rows": sorted(
                ({k: v for k, v in row.items() if k not in TIMED_KEYS} for row in kernels["table"]),
                key=lambda row: (row["name"], row["kind"]),
            ),
            "whole_trace_kernels": kernels["whole_trace"]["kernels"],
            "bytes": {k: v for k, v in mode["bytes"].items() if k != "measured"},
            "fusion": mode["fusion"],
        }
    return json.loads(INDUCTOR_GRAPH_NUMBER.sub("graph_N_", json.dumps(out)))


def test_two_runs_count_the_same(gated_run, tmp_path):
    again = generate_run(tmp_path, "--model", "gated-residual", "--batch-size", "1")
    first = json.loads((gated_run / "run.json").read_text())
    second = json.loads((again / "run.json").read_text())
    a, b = _counted(first), _counted(second)
    assert list(a) == ["eager", "script", "trace", "optimize", "compile"]
    assert a["compile"]["kernels"]["per_step"] < a["eager"]["kernels"]["per_step"]  # non-trivial
    for mode in a:
        assert a[mode] == b[mode], mode
    assert "graph_N_cpp_fused_" in json.dumps(a["compile"]["kernel_rows"])
    # ...while the timings really are two measurements, not a copy of one.
    assert first["modes"]["eager"]["latency_ms"] != second["modes"]["eager"]["latency_ms"]
