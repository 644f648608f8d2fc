"""Command-line options of the roofline and peak-memory features, kept apart from cli.py:
`generate --remeasure-ceilings`, and the peak-memory gate of `compare` and `ab`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def add_generate_arguments(gen: argparse.ArgumentParser) -> None:
    gen.add_argument(
        "--remeasure-ceilings",
        action="store_true",
        help="measure memory bandwidth and matmul rate again instead of using the per-machine "
        "cache (PROFREPORT_CACHE_DIR, default ~/.cache/profreport)",
    )


def add_gate_arguments(parser: argparse.ArgumentParser, pct: Callable[[str], Any]) -> None:
    parser.add_argument(
        "--max-peak-memory-increase",
        type=pct,
        default=None,
        metavar="PCT",
        help="gate: peak memory of one call may grow by at most PCT percent in any mode",
    )
