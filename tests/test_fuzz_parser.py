"""Property-based tests of the trace parser, then one concrete regression test per bug they found.

The property (tests/trace_strategies.py): on any input, every parse path returns a Trace or raises
TraceError, agrees with the plain reference parse, and count_kernels accepts what it returns. The
runs here are short and derandomized (no example database), so CI sees the same cases each time;
bench/fuzz_parser.py runs the same strategies for tens of thousands of cases.
"""

from __future__ import annotations

import gzip
import warnings

import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from profreport.analysis.kernels import count_kernels
from profreport.traceio.load import TraceError, _parse_reference, load_trace, parse_trace
from tests.trace_strategies import (
    check_document,
    check_file,
    fixture_json,
    fixture_mutations,
    synthetic_traces,
    trace_files,
    wrong_shapes,
)


def fuzz(examples: int):
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@fuzz(150)
@given(synthetic_traces())
def test_synthetic_traces(raw):
    check_document(raw)


@fuzz(150)
@given(fixture_mutations())
def test_mutated_real_traces(raw):
    check_document(raw)


@fuzz(150)
@given(wrong_shapes())
def test_wrong_shapes(raw):
    check_document(raw)


@fuzz(150)
@given(data=trace_files())
def test_files_plain_and_gzip(data, folder):
    check_file(data, folder)


@fuzz(8)
@given(synthetic_traces())
def test_with_a_helper_process(raw):
    check_document(raw, helpers=True)


@fuzz(4)
@given(data=trace_files())
def test_files_with_a_helper_process(data, folder):
    check_file(data, folder, helpers=True)


# --- regressions: inputs the fuzzing found ----------------------------------------------------


def kernel(name: str, ts: int = 1) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": 2}


def names(trace) -> list[str]:
    return [trace.strings[i] for i in trace.name]


def test_second_trace_events_key_wins_as_in_a_whole_parse():
    # The sliced scan used the first array; orjson (and json) keep the last value of a key.
    first, last = orjson.dumps([kernel("first")]), orjson.dumps([kernel("last")])
    raw = b'{"traceEvents": ' + first + b', "traceEvents": ' + last + b"}"
    assert names(parse_trace(raw)) == ["last"]
    assert check_document(raw) == "ok"


@pytest.mark.parametrize(
    "before",
    [
        b'"meta": {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "nested"}]}',
        b'"x \\"traceEvents": [{"ph": "X", "cat": "kernel", "name": "in a key"}]',
    ],
    ids=["nested value", "inside a key"],
)
def test_events_key_found_elsewhere_is_not_the_event_array(before):
    # "traceEvents": [ also matches inside an earlier value or key; its array used to be read
    # as the events and the real ones dropped.
    raw = b"{" + before + b', "traceEvents": ' + orjson.dumps([kernel("real")]) + b"}"
    trace = parse_trace(raw)
    assert names(trace) == ["real"]
    assert trace.metadata == {k: v for k, v in orjson.loads(raw).items() if k != "traceEvents"}
    assert count_kernels(trace).kernels == 1
    assert check_document(raw) == "ok"


@pytest.mark.parametrize("field", ["ph", "cat", "name", "pid", "tid"])
def test_field_nested_deeper_than_json_text_can_hold_is_dropped(field):
    # Unhashable fields are turned into JSON text, and orjson writes 254 levels at most: the
    # event used to raise orjson's TypeError out of parse_trace.
    deep = "[" * 300 + "]" * 300
    event = '{"ph": "X", "cat": "kernel", "name": "k", "' + field + '": ' + deep + "}"
    raw = '{"traceEvents": [' + event + ", " + orjson.dumps(kernel("kept")).decode() + "]}"
    trace = parse_trace(raw.encode())
    assert names(trace) == ["kept"]
    assert check_document(raw.encode()) == "ok"


def test_times_beyond_int64_nanoseconds_are_missing_without_warnings():
    # 1e300 us used to be cast to int64 (numpy: "invalid value encountered in cast") and
    # multiplied into garbage; now it is missing (-1), like a time that is not a number.
    events = [
        {**kernel("huge"), "ts": 1e300, "dur": -1e300},
        {**kernel("edge"), "ts": 9.3e15, "dur": 1.5},
        {**kernel("real"), "ts": 1_700_000_000_123_456.5, "dur": 3},
    ]
    raw = orjson.dumps({"traceEvents": events})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace = parse_trace(raw)
        count_kernels(trace)
    assert trace.ts_ns.tolist() == [-1, -1, 1_700_000_000_123_456_500]
    assert trace.dur_ns.tolist() == [-1, 1500, 3000]


# --- gzip: the bounded inflater that replaced gzip.decompress ---------------------------------


def test_gzip_members_and_padding_load_like_gzip_decompress(tmp_path):
    raw = orjson.dumps({"traceEvents": [kernel(f"k{i}", ts=i) for i in range(50)]})
    cut = len(raw) // 3
    data = gzip.compress(raw[:cut], mtime=0) + b"\0\0" + gzip.compress(raw[cut:], mtime=0)
    assert gzip.decompress(data) == raw
    path = tmp_path / "t.json.gz"
    path.write_bytes(data)
    for workers in (0, 1):
        trace = load_trace(path, workers=workers)
        assert names(trace) == [f"k{i}" for i in range(50)]
    assert check_file(data, tmp_path) == "ok"


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: d[:-3], "ended before the end of a gzip member"),
        (lambda d: d + b"garbage", "incorrect header check"),
        (lambda d: d[:-4] + (12345).to_bytes(4, "little"), "incorrect length check"),
    ],
    ids=["cut short", "garbage after", "wrong length"],
)
def test_damaged_gzip_is_a_trace_error(tmp_path, damage, message):
    data = damage(gzip.compress(orjson.dumps({"traceEvents": [kernel("k")]}), mtime=0))
    path = tmp_path / "t.json.gz"
    path.write_bytes(data)
    for workers in (0, 1):
        with pytest.raises(TraceError, match=f"corrupt gzip data .*{message}"):
            load_trace(path, workers=workers)
    assert check_file(data, tmp_path) == "error"


def test_reference_agrees_on_a_real_trace():
    # The property's oracle itself: on a real trace both sides see every kernel.
    raw = fixture_json("a100_alexnet_inference.json.gz")
    assert count_kernels(_parse_reference(raw)).kernels == 79
    assert check_document(raw) == "ok"
