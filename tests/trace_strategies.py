"""Generated and damaged trace documents, and the property every one of them must satisfy.

Shared by tests/test_fuzz_parser.py (a short, deterministic run) and bench/fuzz_parser.py (a long
one), so both check the same thing. Four strategies, each drawing ``bytes``:

* :func:`synthetic_traces`: structurally valid traces of random events (odd phases, hostile
  strings, times as ints, floats, strings, huge or missing, ids of every type);
* :func:`fixture_mutations`: a real trace from tests/data, truncated, bit-flipped, cut, padded;
* :func:`wrong_shapes`: JSON that is not a trace, or a trace whose parts have the wrong type;
* :func:`trace_files`: any of those as a file on disk, plain or gzipped, the gzip data
  sometimes cut short, damaged, in several members or with a lying length trailer.

The property (:func:`check_document`, :func:`check_file`): every way of parsing either returns a
:class:`Trace` or raises :class:`TraceError`, all ways agree with the plain reference parse (same
outcome, same columns), and ``count_kernels`` accepts every Trace returned. A disagreement is an
``AssertionError``; any other exception is a bug in the parser.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from unittest import mock

import numpy as np
import orjson
from hypothesis import strategies as st

from profreport.analysis.kernels import count_kernels, per_step
from profreport.traceio import chunks as _chunks
from profreport.traceio import load as trace_module
from profreport.traceio.load import (
    NotATraceError,
    Trace,
    TraceError,
    _parse_reference,
    load_trace,
    parse_trace,
)

DATA = Path(__file__).parent / "data"
FIXTURES = (
    "a100_alexnet_inference.json.gz",
    "a100_torch_compile_triton.json.gz",
    "cpu_only_rank34.json.gz",
    "mi250_rocm_train.json.gz",
)
PATH = "<fuzz>"
DEFINITIONS = ("auto", "device", "cpu")

# --- values ------------------------------------------------------------------------------------

PHASES = ["X", "B", "E", "i", "I", "C", "s", "t", "f", "b", "e", "n", "M", "", "XX", "x", "ph"]
CATEGORIES = [
    "kernel",
    "Kernel",
    "gpu_memcpy",
    "Memcpy",
    "gpu_memset",
    "Memset",
    "cuda_runtime",
    "cuda_driver",
    "hip_runtime",
    "Runtime",
    "cpu_op",
    "Operator",
    "user_annotation",
    "gpu_user_annotation",
    "python_function",
    "fwdbwd",
    "ac2g",
    "cuda_sync",
    "cuda_profiler_range",
    "Trace",
]
NAMES = [
    "cudaLaunchKernel",
    "cuLaunchKernel",
    "cudaGraphLaunch",
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel_v2",
    "cudaMemcpyAsync",
    "ProfilerStep#1",
    "ProfilerStep#2",
    "ProfilerStep#x",
    "aten::mm",
    "aten::empty",
    "aten::copy_",
    "prim::Constant",
    "cpp_fused_add_0",
    "fused_mul_add",
    "forward",
    "triton_poi_fused_0",
    "Memcpy HtoD (Pageable -> Device)",
    "ac2g",
]
# Text that has broken parsers before: markup, JSON punctuation that looks like an event
# boundary or the events key, escapes, control and direction characters, astral planes.
HOSTILE = [
    "<script>alert(1)</script>",
    '}, {"ph": "X", "name": "',
    "}, {",
    "}]",
    '"traceEvents": [',
    '\\"traceEvents\\": [',
    "\x00",
    "\\",
    '"',
    "\u2028",
    "\u202e",
    "\ufeff",
    "💥",
    "𝕜ernel",
    " ",
]
ARG_KEYS = [
    "correlation",
    "External id",
    "bytes",
    "size",
    "device",
    "stream",
    "kernel_backend",
    "kernel_file",
    "kernel_hash",
    "Ev Idx",
]

texts = st.one_of(
    st.sampled_from(CATEGORIES + NAMES + HOSTILE), st.text(max_size=12), st.text('}{[]",:\\ ')
)
big_ints = st.one_of(
    st.integers(-5, 50),  # small ids collide: correlation and flow links get made
    st.integers(-(2**63), 2**64 - 1),
    st.integers(-(10**30), 10**30),  # beyond 64 bits: orjson reads these as floats
    st.sampled_from([2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 1_700_000_000_000_000]),
)
numbers = st.one_of(
    big_ints,
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["12", "0x1f", "1e3", "-7", "abc", "", " 5", "1_000"]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
# Mostly the expected type, sometimes anything at all.
ids = st.one_of(big_ints, big_ints, numbers, json_values)
times = st.one_of(st.integers(0, 200), st.integers(0, 200), numbers, json_values)
lanes = st.one_of(st.integers(-1, 3), st.integers(-1, 3), texts, json_values)
args = st.one_of(
    st.dictionaries(st.one_of(st.sampled_from(ARG_KEYS), texts), ids, max_size=5),
    json_values,
)


_FIELD_VALUES = {
    "ph": st.one_of(st.sampled_from(PHASES), st.sampled_from(PHASES), json_values),
    "cat": st.one_of(st.sampled_from(CATEGORIES), texts, json_values),
    "name": st.one_of(st.sampled_from(NAMES), texts, json_values),
    "pid": lanes,
    "tid": lanes,
    "ts": times,
    "dur": times,
    "id": ids,
    "args": args,
    "bp": st.sampled_from(["e", "s"]),
    "s": json_values,
}


@st.composite
def events(draw) -> dict:
    """One event: any subset of the usual fields, in any order, plus stray fields."""
    fields = draw(st.fixed_dictionaries({}, optional=_FIELD_VALUES))
    order = draw(st.permutations(list(fields)))
    return {key: fields[key] for key in order}


def _dumps(value, draw) -> str:
    """JSON text (stdlib json: ints of any size), formatted one of several ways."""
    style = draw(st.sampled_from(["compact", "spaced", "indent", "ascii"]))
    if style == "compact":
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if style == "indent":
        return json.dumps(value, indent=2, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=style == "ascii")


@st.composite
def synthetic_traces(draw) -> bytes:
    """A structurally valid trace document of random events and top-level fields.

    The top level is written member by member, so it may hold ``traceEvents`` twice, or a
    nested ``traceEvents`` before the real one (a whole-document parse keeps the last).
    """
    event_list = draw(st.lists(events(), max_size=40))
    separator = draw(st.sampled_from([",", ", ", ",\n", "\n ,\n  "]))
    array = "[" + separator.join(_dumps(e, draw) for e in event_list) + "]"
    if draw(st.integers(0, 9)) == 0:  # Chrome's JSON array format: the events alone
        return array.encode()
    members = [("traceEvents", array)]
    extra = draw(
        st.lists(
            st.tuples(
                st.one_of(
                    st.sampled_from(["schemaVersion", "deviceProperties", "traceEvents", "meta"]),
                    texts,
                ),
                st.one_of(
                    json_values,
                    st.just({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "nested"}]}),
                    st.lists(st.dictionaries(st.sampled_from(["id", "name"]), ids), max_size=2),
                ),
            ),
            max_size=4,
        )
    )
    for key, value in extra:
        members.insert(draw(st.integers(0, len(members))), (key, _dumps(value, draw)))
    body = ", ".join(f"{json.dumps(k)}: {v}" for k, v in members)
    return ("{" + body + "}").encode()


# --- real traces, damaged ----------------------------------------------------------------------


@cache
def fixture_json(name: str) -> bytes:
    return gzip.decompress((DATA / name).read_bytes())


INSERTS = [b"}", b"{", b",", b"]", b"[", b'"', b"\\", b"\x00", b"\xff", b"}, {", b'"traceEvents":[']


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """``data`` after one to four random edits: truncation, byte flips, deletions, insertions
    and duplicated slices, at random offsets."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(out)))
        edit = draw(st.sampled_from(["truncate", "flip", "delete", "insert", "duplicate"]))
        if edit == "truncate":
            del out[at:]
        elif edit == "flip" and at < len(out):
            out[at] ^= draw(st.integers(1, 255))
        elif edit == "delete":
            del out[at : at + draw(st.integers(1, 64))]
        elif edit == "insert":
            out[at:at] = draw(
                st.one_of(st.sampled_from(INSERTS), st.binary(min_size=1, max_size=8))
            )
        elif edit == "duplicate":
            start = draw(st.integers(0, len(out)))
            out[at:at] = out[start : start + draw(st.integers(1, 4096))]
    return bytes(out)


@cache
def fixture_doc(name: str) -> dict:
    return orjson.loads(fixture_json(name))


@st.composite
def edited(draw, name: str) -> bytes:
    """A real trace with one to four events changed: a field set to a random value or removed,
    an event removed, repeated or replaced by any JSON value. Still JSON, mostly still a trace."""
    doc = fixture_doc(name)
    evs = list(doc["traceEvents"])  # the cached document itself is never changed
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(evs) - 1))
        edit = draw(st.sampled_from(["set", "set", "remove field", "remove", "repeat", "replace"]))
        ev = evs[at]
        if edit == "set" and isinstance(ev, dict):
            key = draw(
                st.one_of(st.sampled_from(list(ev) or ["ph"]), st.sampled_from(["ts", "id"]))
            )
            evs[at] = {**ev, key: draw(_FIELD_VALUES.get(key, json_values))}
        elif edit == "remove field" and isinstance(ev, dict) and ev:
            key = draw(st.sampled_from(list(ev)))
            evs[at] = {k: v for k, v in ev.items() if k != key}
        elif edit == "remove":
            del evs[at]
        elif edit == "repeat":
            evs.insert(draw(st.integers(0, len(evs))), ev)
        elif edit == "replace":
            evs[at] = draw(json_values)
        if not evs:
            break
    out = {**doc, "traceEvents": evs}
    try:
        return orjson.dumps(out)
    except orjson.JSONEncodeError:  # an int beyond 64 bits: the stdlib writes any size
        return json.dumps(out).encode()


@st.composite
def fixture_mutations(draw) -> bytes:
    """A real GPU / CPU trace from tests/data, its events edited (:func:`edited`), its bytes
    damaged (:func:`mutated`), or both."""
    name = draw(st.sampled_from(FIXTURES))
    how = draw(st.sampled_from(["events", "bytes", "both"]))
    data = draw(edited(name)) if how != "bytes" else fixture_json(name)
    return draw(mutated(data)) if how != "events" else data


# --- JSON of the wrong shape -------------------------------------------------------------------


def _deep(depth: int, inner: str = "") -> str:
    return "[" * depth + inner + "]" * depth


@st.composite
def wrong_shapes(draw) -> bytes:
    """Valid or nearly valid JSON that is not a trace, or a trace whose parts are the wrong type."""
    kind = draw(
        st.sampled_from(
            [
                "any value",
                "events not a list",
                "events not dicts",
                "deep array",
                "deep field",
                "bytes",
                "around a trace",
            ]
        )
    )
    if kind == "any value":
        return json.dumps(draw(json_values)).encode()
    if kind == "events not a list":
        value = draw(st.one_of(scalars, st.dictionaries(texts, json_values, max_size=3)))
        return json.dumps({"traceEvents": value}).encode()
    if kind == "events not dicts":
        items = draw(st.lists(st.one_of(json_values, events()), max_size=12))
        return json.dumps({"traceEvents": items}).encode()
    if kind == "deep array":  # orjson reads 1024 levels at most
        depth = draw(st.one_of(st.integers(1, 300), st.integers(1000, 1100), st.integers(1, 3000)))
        return ('{"traceEvents": ' + _deep(depth) + "}").encode()
    if kind == "deep field":  # an unhashable field deeper than orjson writes (254)
        depth = draw(st.integers(1, 1020))
        key = draw(st.sampled_from(["ph", "cat", "name", "pid", "tid", "args", "ts", "id"]))
        event = '{"cat": "kernel", "' + key + '": ' + _deep(depth, "1") + "}"
        return ('{"traceEvents": [' + event + ', {"ph": "X", "cat": "kernel"}]}').encode()
    if kind == "bytes":
        return draw(
            st.one_of(st.binary(max_size=64), st.sampled_from([b"", b" ", b"\xef\xbb\xbf"]))
        )
    trace = draw(synthetic_traces())
    prefix, suffix = draw(st.sampled_from([(b"\xef\xbb\xbf", b""), (b"", b" x"), (b"", b"{}")]))
    return prefix + trace + suffix


# --- files -------------------------------------------------------------------------------------

documents = st.one_of(
    synthetic_traces(), wrong_shapes(), st.sampled_from(FIXTURES).map(fixture_json)
)


@st.composite
def trace_files(draw) -> bytes:
    """File contents: a document as is, or gzipped, the gzip data perhaps damaged."""
    doc = draw(documents)
    wrap = draw(
        st.sampled_from(
            [
                *("plain", "gzip", "gzip", "two members", "padded", "garbage after"),
                *("length lies", "damaged", "gzip of gzip"),
            ]
        )
    )
    if wrap == "plain":
        return doc
    level = draw(st.integers(1, 9))
    data = gzip.compress(doc, compresslevel=level, mtime=0)
    if wrap == "two members":
        cut = draw(st.integers(0, len(doc)))
        data = gzip.compress(doc[:cut], mtime=0) + gzip.compress(doc[cut:], mtime=0)
    elif wrap == "padded":
        data += b"\0" * draw(st.integers(1, 16))
    elif wrap == "garbage after":
        data += draw(st.binary(min_size=1, max_size=16))
    elif wrap == "length lies":
        data = data[:-4] + draw(st.integers(0, 2**32 - 1)).to_bytes(4, "little")
    elif wrap == "damaged":
        data = draw(mutated(data))
    elif wrap == "gzip of gzip":
        data = gzip.compress(data, mtime=0)
    return data


STRATEGIES: dict[str, st.SearchStrategy[bytes]] = {
    "synthetic traces": synthetic_traces(),
    "fixture mutations": fixture_mutations(),
    "wrong shapes": wrong_shapes(),
    "files (plain, gzip)": trace_files(),
}


# --- the property ------------------------------------------------------------------------------

Outcome = Trace | TraceError


def outcome(parse: Callable[[], Trace]) -> Outcome:
    """What a parse gives: its Trace or its documented error (anything else propagates)."""
    try:
        return parse()
    except TraceError as exc:
        return exc


@contextmanager
def small_pieces(helpers: bool = False) -> Iterator[None]:
    """Parse in pieces small enough that a fuzzed document of a few KiB spans many slices and
    chunks. Without ``helpers`` no helper process starts (this process parses every chunk: the
    chunk planning and proof still run), which keeps a case to a few milliseconds."""
    patches = {
        "MIN_CHUNK_BYTES": 256,
        "MAX_CHUNK_BYTES": 1024,
        "SLICE_BYTES": 128,
        "_HEAD_BYTES": 512,
        "_GUNZIP_BLOCK": 64,
    }
    if not helpers:
        patches["ChunkWorker"] = _no_helper
    with (
        mock.patch.multiple(trace_module, **patches),
        mock.patch.object(_chunks, "_CUT_WINDOW", 512),
    ):
        yield


def _no_helper(*args, **kwargs):
    raise OSError("no helper process in this run")


def check_document(raw: bytes, helpers: bool = False) -> str:
    """Parse ``raw`` every way and check the property; ``"ok"`` or ``"error"`` (documented)."""
    expected = outcome(lambda: _parse_reference(raw, PATH))
    assert_same(outcome(lambda: parse_trace(raw, PATH)), expected, "one pass")
    with small_pieces(helpers), tempfile.TemporaryDirectory(prefix="profreport-fuzz-") as folder:
        assert_same(outcome(lambda: parse_trace(raw, PATH)), expected, "small slices")
        path = Path(folder) / "doc.json"
        path.write_bytes(raw)  # helper processes read a file
        assert_same(outcome(lambda: load_trace(path, workers=1)), expected, "chunks")
    return _counted(expected)


def check_file(data: bytes, folder: str | os.PathLike, helpers: bool = False) -> str:
    """Write ``data`` to a file and load it every way; the reference is the stdlib's gunzip
    (for gzip data) then the plain reference parse."""
    path = Path(folder) / "fuzz.pt.trace.json"
    path.write_bytes(data)
    if data[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            expected: Outcome = TraceError(f"corrupt gzip data ({exc})")
        else:
            expected = outcome(lambda: _parse_reference(raw, PATH))
    else:
        expected = outcome(lambda: _parse_reference(data, PATH))
    got = outcome(lambda: load_trace(path, workers=0))
    assert_same(got, expected, "file, one pass")
    with small_pieces(helpers):
        assert_same(outcome(lambda: load_trace(path, workers=1)), expected, "file, chunks")
    return _counted(expected)


def _counted(result: Outcome) -> str:
    if isinstance(result, TraceError):
        return "error"
    for definition in DEFINITIONS:
        counts = count_kernels(result, definition)
        per_step(counts)
        assert counts.kernels >= 0 and counts.launches >= 0, definition
    return "ok"


COLUMN_NAMES = ("ph", "cat", "name", "lane", "ts_ns", "dur_ns")
ID_COLUMNS = ("correlation", "external_id", "flow_id", "nbytes")


def assert_same(got: Outcome, expected: Outcome, how: str) -> None:
    """Same outcome: both documented errors of the same kind, or Traces equal column by column."""
    if isinstance(expected, TraceError) or isinstance(got, TraceError):
        kinds = [
            "not a trace" if isinstance(x, NotATraceError) else type(x).__name__
            for x in (got, expected)
        ]
        assert kinds[0] == kinds[1], (
            f"{how}: {kinds[0]} ({got}), reference: {kinds[1]} ({expected})"
        )
        return
    got.path = expected.path
    for table in ("strings", "lanes", "metadata", "extra_args"):
        assert getattr(got, table) == getattr(expected, table), f"{how}: {table} differ"
    for column in COLUMN_NAMES + ID_COLUMNS:
        a, b = getattr(got, column), getattr(expected, column)
        assert a.dtype == b.dtype and np.array_equal(a, b), f"{how}: column {column} differs"
