"""The memory guard: a trace that will not fit in the memory available is refused with one line
(TraceError) before the memory is taken, gzip bombs included; availability is psutil's figure
and the cgroup limit. Availability is faked here: no huge files."""

from __future__ import annotations

import gzip
import re
from types import SimpleNamespace

import orjson
import pytest

from profreport import cli
from profreport.format import fmt_bytes
from profreport.traceio import gunzip as _gunzip
from profreport.traceio import load as trace_module
from profreport.traceio import memory as _memory
from profreport.traceio.load import TraceError, load_trace, parse_trace
from tests.trace_strategies import small_pieces

KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2}
MiB = 1 << 20


def trace_bytes(events: int) -> bytes:
    return orjson.dumps({"traceEvents": [{**KERNEL, "ts": i} for i in range(events)]})


@pytest.fixture
def available(monkeypatch):
    """Set the memory the guard sees as available (bytes)."""

    def set_to(n: int | None) -> None:
        monkeypatch.setattr(_memory, "available_memory_bytes", lambda: n)

    return set_to


def enough_for(doc_bytes: int, **kwargs) -> int:
    return _memory.analysis_bytes(doc_bytes, **kwargs)


# --- the estimate and what is available ---------------------------------------------------------


def test_estimate_grows_with_the_document_and_inverts():
    one = _memory.analysis_bytes(100 * MiB, doc_in_memory=False)
    assert one == _memory.FIXED_BYTES + int(100 * MiB * _memory.COLUMNS_PER_BYTE)
    in_memory = _memory.analysis_bytes(100 * MiB, doc_in_memory=True)
    whole = _memory.analysis_bytes(100 * MiB, doc_in_memory=True, whole=True)
    assert one < in_memory < whole
    assert whole - in_memory == int(100 * MiB * _memory.WHOLE_PER_BYTE)
    # largest_document is the inverse: the largest size that fits, and one byte more does not
    budget = 3 << 30
    largest = _memory.largest_document(budget, doc_in_memory=True)
    assert _memory.analysis_bytes(largest, doc_in_memory=True) <= budget
    assert _memory.analysis_bytes(largest + 2, doc_in_memory=True) > budget
    assert _memory.largest_document(_memory.FIXED_BYTES // 2, doc_in_memory=True) == 0


def write(root, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


SYSTEM = 20_000_000 * 1024  # what psutil says the system has available, in these tests


@pytest.fixture
def system(monkeypatch):
    """psutil's available memory faked to SYSTEM bytes (None: psutil has no figure)."""
    import psutil

    def set_to(n: int | None) -> None:
        def virtual_memory():
            if n is None:
                raise psutil.Error("no figure")
            return SimpleNamespace(available=n)

        monkeypatch.setattr(psutil, "virtual_memory", virtual_memory)

    set_to(SYSTEM)
    return set_to


def test_available_from_the_system_alone(tmp_path, system):
    assert _memory.available_memory_bytes(str(tmp_path)) == SYSTEM  # no cgroup tree
    system(None)
    assert _memory.available_memory_bytes(str(tmp_path)) is None


def test_cgroup_v2_limit_counts_inactive_page_cache_as_free(tmp_path, system):
    write(tmp_path, "sys/fs/cgroup/memory.max", f"{4 << 30}\n")
    write(tmp_path, "sys/fs/cgroup/memory.current", f"{3 << 30}\n")
    write(tmp_path, "sys/fs/cgroup/memory.stat", f"anon 123\ninactive_file {1 << 30}\n")
    assert _memory.available_memory_bytes(str(tmp_path)) == 2 << 30  # 4 - (3 - 1) GiB
    system(None)  # a limit stands without the system's figure
    assert _memory.available_memory_bytes(str(tmp_path)) == 2 << 30
    system(SYSTEM)
    write(tmp_path, "sys/fs/cgroup/memory.max", "max\n")  # no limit: the system's figure
    assert _memory.available_memory_bytes(str(tmp_path)) == SYSTEM


def test_cgroup_v1_limit_and_its_no_limit_value(tmp_path, system):
    write(tmp_path, "sys/fs/cgroup/memory/memory.limit_in_bytes", f"{1 << 30}\n")
    write(tmp_path, "sys/fs/cgroup/memory/memory.usage_in_bytes", f"{768 << 20}\n")
    write(tmp_path, "sys/fs/cgroup/memory/memory.stat", f"total_inactive_file {256 << 20}\n")
    assert _memory.available_memory_bytes(str(tmp_path)) == 512 << 20
    write(tmp_path, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
    assert _memory.available_memory_bytes(str(tmp_path)) == SYSTEM


def test_available_on_this_machine_is_a_real_figure():
    import psutil

    n = _memory.available_memory_bytes()
    assert n is not None and 16 * MiB < n < (1 << 50)
    assert n <= psutil.virtual_memory().total


# --- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 1])
def test_too_large_for_memory_is_refused_before_reading(tmp_path, available, monkeypatch, workers):
    path = tmp_path / "t.json"
    path.write_bytes(trace_bytes(200))
    size = path.stat().st_size
    available(enough_for(size, doc_in_memory=workers == 0) - 1)

    def no_reading(*args):
        raise AssertionError("the document was read before the guard refused it")

    monkeypatch.setattr(trace_module, "_read_whole", no_reading)
    monkeypatch.setattr(trace_module, "_parse_parallel", no_reading)
    with pytest.raises(TraceError) as err:
        load_trace(path, workers=workers)
    message = str(err.value)
    assert message.startswith(f"{path}: needs about ")
    assert " to analyse, only " in message and " available; free some memory" in message
    assert "\n" not in message


def test_just_enough_memory_is_not_refused(tmp_path, available):
    path = tmp_path / "t.json"
    path.write_bytes(trace_bytes(200))
    available(enough_for(path.stat().st_size, doc_in_memory=True))
    assert len(load_trace(path, workers=0)) == 200
    available(None)  # not Linux: nothing known, nothing refused
    assert len(load_trace(path, workers=0)) == 200


def test_whole_document_fallback_asks_first(available):
    # A document the sliced scan cannot vouch for (events that are not objects) is parsed whole,
    # which takes ~9 bytes per byte: refused where the sliced parse alone would fit.
    odd = orjson.dumps({"traceEvents": [KERNEL, *range(500)]})
    available(enough_for(len(odd), doc_in_memory=False, whole=True) - 1)
    with pytest.raises(TraceError, match=r"^doc: needs about .* to analyse, only "):
        parse_trace(odd, "doc")
    assert len(parse_trace(trace_bytes(200), "doc")) == 200  # sliced: no question
    available(enough_for(len(odd), doc_in_memory=False, whole=True))
    assert len(parse_trace(odd, "doc")) == 1


def bomb(tmp_path, inflated: int, lie: bool) -> tuple:
    """A small gzip file of a valid trace that inflates to ``inflated`` bytes; with ``lie`` its
    length trailer claims 100 bytes (the trailer is only the length modulo 4 GiB anyway)."""
    head, tail = b'{"traceEvents": [', b"]}"
    data = gzip.compress(head + b" " * (inflated - len(head) - len(tail)) + tail, mtime=0)
    if lie:
        data = data[:-4] + (100).to_bytes(4, "little")
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(data)
    return path, len(data)


@pytest.mark.parametrize("workers", [0, 1])
def test_gzip_bomb_with_a_lying_trailer_stops_while_inflating(
    tmp_path, available, monkeypatch, workers
):
    path, compressed = bomb(tmp_path, 64 * MiB, lie=True)
    assert compressed < 256 * 1024
    available(enough_for(2 * MiB, doc_in_memory=True))
    limit = _memory.largest_document(enough_for(2 * MiB, doc_in_memory=True), doc_in_memory=True)
    monkeypatch.setattr(_gunzip, "PIECE_BYTES", 256 * 1024)
    produced: list[int] = []
    real_inflate = _gunzip.inflate

    def spy(read, cap):
        for piece in real_inflate(read, cap):
            produced.append(len(piece))
            yield piece

    monkeypatch.setattr(_gunzip, "inflate", spy)
    with small_pieces(), pytest.raises(TraceError) as err:
        load_trace(path, workers=workers)
    assert re.fullmatch(
        re.escape(f"{path}: its gzip data inflates to more than ")
        + r"2\.[0-2]\d MiB"  # the limit, passed by less than one 256 KiB piece
        + re.escape(
            f", more than can be analysed in the "
            f"{fmt_bytes(enough_for(2 * MiB, doc_in_memory=True))} available; free some memory"
            " or analyse it on a machine with more"
        ),
        str(err.value),
    )
    assert sum(produced) <= limit  # stopped at the limit: 2 MiB of 64 came out, no more


def test_gzip_bomb_with_an_honest_trailer_is_refused_before_inflating(
    tmp_path, available, monkeypatch
):
    path, _ = bomb(tmp_path, 16 * MiB, lie=False)
    available(enough_for(16 * MiB, doc_in_memory=True) - 1)
    monkeypatch.setattr(_gunzip, "inflate", None)  # never called
    with pytest.raises(TraceError, match=r"needs about .* to analyse, only .* available"):
        load_trace(path, workers=0)


def test_analyze_command_reports_the_refusal_in_one_line(tmp_path, available, capsys):
    path = tmp_path / "t.json"
    path.write_bytes(trace_bytes(50))
    available(_memory.FIXED_BYTES)
    code = cli.main(["analyze", str(path), "--format", "json", "--out", str(tmp_path / "out")])
    assert code == cli.EXIT_BAD_INPUT
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"error: {path}: needs about ")
    assert not (tmp_path / "out").exists() and captured.out == ""
