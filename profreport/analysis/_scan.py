"""Trace JSON to compact row columns, in slices and chunks; numpy-free, so a helper process
starts in a few tens of milliseconds.

**Slices.** The ``traceEvents`` array is parsed a slice at a time, so that only one slice of event
dicts is alive at once (peak memory ~ one slice + the columns, not file size x 8). The array is
cut at ``}`` ``,`` ``{`` sequences; a cut that falls inside an event (or inside a string) leaves
an unbalanced slice, which orjson rejects, and the next candidate is tried, so every accepted
slice is a run of whole events. Anything unexpected raises :class:`ScanFallback` and the caller
parses the document whole instead.

**Chunks.** Large traces are also split into chunks that several processes parse side by side:
the calling process and helper processes (fresh interpreters, never forks: the caller may hold
CUDA or torch state), each claiming the next unparsed chunk until none is left. Chunk boundaries
are guessed from the bytes alone and proven afterwards: chunk ``i`` is parsed from a known event
start and its last slice must end exactly where chunk ``i + 1`` begins, so by induction from the
array's first event every boundary is a real one. A failed proof raises :class:`ScanFallback`.

**Rows.** :class:`RowBuilder` turns event dicts into typed ``array`` columns, keeping only the
fields the analyses read, and drops events no analysis reads: metadata (``ph == "M"``), Python
stack samples (``python_function``), ``fwdbwd`` flows and CUDA sync records.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import re
import struct
import subprocess
import sys
import tempfile
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

try:
    import fcntl
except ImportError:  # not POSIX: no helper processes (see trace.worker_count)
    fcntl = None  # type: ignore[assignment]

SLICE_BYTES = 1 << 20  # small slices reuse freed memory: measured faster than 8-64 MiB
_MAX_BAD_CUTS = 64
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")
# Chunk boundaries are guessed, then proven. Asking for an event's usual first key after the
# brace makes wrong guesses (between objects nested in args, or in a string ending "}, {") rare.
_CHUNK_CUT = re.compile(rb'\}\s*,\s*(\{)\s*"(?:ph|cat|name|pid|tid|ts|dur|id|args)"')
_LAST_EVENT_END = re.compile(rb"\}\s*\]")
_WHITESPACE = b" \t\r\n"
_CUT_WINDOW = 1 << 18
_FRAME = struct.Struct("<Q")
MISSING = -1
# Stands in for the event array when the text around it is parsed (see metadata_around).
_PLACEHOLDER = "\u0000profreport: the traceEvents array scanned\u0000"
_PLACEHOLDER_JSON = orjson.dumps(_PLACEHOLDER)


EXPECTED = (
    'expected a JSON object with a "traceEvents" list (the Chrome trace format torch.profiler '
    "writes) or a JSON array of events"
)
_JSON_TYPES = {str: "a string", bool: "true or false", int: "a number", float: "a number"}


def _shape(doc: object) -> str:
    """What a JSON document is, in a few words, for an error line."""
    if doc is None:
        return "null"
    if not isinstance(doc, dict):
        return _JSON_TYPES.get(type(doc), type(doc).__name__)
    if "traceEvents" in doc:
        return f"traceEvents holding {_shape(doc['traceEvents'])}"
    keys = [repr(k[:30]) for k in list(doc)[:4]]
    more = ", ..." if len(doc) > 4 else ""
    return f"an object with keys {', '.join(keys)}{more}" if keys else "an empty object"


class ScanFallback(Exception):
    """The sliced scan cannot vouch for this document; parse it whole."""


def scan_whole(raw: bytes | bytearray, on_batch: Callable[[list], None]) -> dict:
    """Parse the whole document at once; returns the top-level metadata (all but traceEvents)."""
    doc = orjson.loads(raw)
    if isinstance(doc, list):  # Chrome "JSON array format": just the events
        on_batch(doc)
        return {}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError(f"not a profiler trace: {EXPECTED}, found {_shape(doc)}")
    on_batch(doc.pop("traceEvents"))
    return doc


def locate_events(head: bytes | bytearray) -> tuple[int, bytes | bytearray | None]:
    """Where the event array opens in a document starting with ``head``, and the text before the
    ``traceEvents`` key (``None`` for a bare JSON array). :class:`ScanFallback` if not found."""
    first = head.lstrip(_WHITESPACE)[:1]
    if first == b"[":
        return head.index(b"["), None
    if first == b"{":
        m = _EVENTS_KEY.search(head)
        if m is None:
            raise ScanFallback("no traceEvents array")
        return m.end() - 1, head[: m.start()]
    raise ScanFallback("not a JSON object or array")


def metadata_around(prefix: bytes | bytearray | None, suffix: bytes | bytearray) -> dict:
    """The top-level fields other than the events, from the text before and after the array.

    The array scanned must be the top-level ``traceEvents`` value that a whole parse keeps: not
    one nested in another value, inside a key, or followed by another ``traceEvents`` key (the
    last one wins). A placeholder stands in for it, and must come back as that value.
    """
    if prefix is None:
        if suffix.strip(_WHITESPACE):
            raise ScanFallback("data after the event array")
        return {}
    try:
        doc = orjson.loads(prefix + b'"traceEvents": ' + _PLACEHOLDER_JSON + suffix)
    except orjson.JSONDecodeError as exc:
        raise ScanFallback("document around the events does not parse") from exc
    if not isinstance(doc, dict) or doc.pop("traceEvents", None) != _PLACEHOLDER:
        raise ScanFallback("the array scanned is not the top-level traceEvents")
    return doc


def scan_sliced(
    raw: bytes | bytearray, on_batch: Callable[[list], None], slice_bytes: int = SLICE_BYTES
):
    """Feed the events to ``on_batch`` slice by slice; returns the top-level metadata."""
    array_open, prefix = locate_events(raw)
    pos = array_open + 1
    rest = raw[pos : pos + 64].lstrip(_WHITESPACE)
    if rest[:1] == b"]":
        array_close = raw.index(b"]", pos)
    else:
        array_close = scan_events(raw, pos, None, on_batch, slice_bytes)
    return metadata_around(prefix, raw[array_close + 1 :])


def scan_events(
    buf: bytes | bytearray,
    pos: int,
    end: int | None,
    on_batch: Callable[[list], None],
    slice_bytes: int = SLICE_BYTES,
    size: int | None = None,
) -> int:
    """Feed the events of ``buf[pos:end]`` slice by slice; ``pos`` must be where an event (or the
    whitespace before it) starts. Only ``buf[:size]`` holds data (a reused buffer may be longer).

    With ``end`` given, it must be just past an event's closing brace, and the last slice must end
    there exactly (which proves ``end`` is a real boundary); returns ``end``. With ``end=None``
    the events run to the bracket that closes the array, whose position is returned.
    """
    size = len(buf) if size is None else size
    limit = size if end is None else end
    while True:
        target = pos + slice_bytes
        if target >= limit:
            break
        cut = _BETWEEN_EVENTS.search(buf, target, limit)
        bad = 0
        while cut is not None:
            try:
                batch = _load_events(buf, pos, cut.start() + 1)
            except orjson.JSONDecodeError:
                bad += 1
                if bad > _MAX_BAD_CUTS:
                    raise ScanFallback("no clean cut between events") from None
                cut = _BETWEEN_EVENTS.search(buf, cut.start() + 1, limit)
                continue
            on_batch(batch)
            pos = cut.end() - 1  # the "{" of the next event
            break
        else:
            break
    if end is not None:
        try:
            batch = _load_events(buf, pos, end)
        except orjson.JSONDecodeError:
            raise ScanFallback("chunk does not end on an event boundary") from None
        on_batch(batch)
        return end
    return _feed_last_slice(buf, pos, size, on_batch)


def _load_events(buf: bytes | bytearray, start: int, stop: int) -> list:
    """Parse ``buf[start:stop]`` (a run of comma-separated values) as a JSON array.

    In a bytearray with a byte to spare on each side, the neighbours are swapped for brackets
    for the duration of the parse: no copy of the slice is made.
    """
    if isinstance(buf, bytearray) and start > 0 and stop < len(buf):
        before, after = buf[start - 1], buf[stop]
        buf[start - 1], buf[stop] = 0x5B, 0x5D  # "[", "]"
        try:
            with memoryview(buf) as view:
                return orjson.loads(view[start - 1 : stop + 1])
        finally:
            buf[start - 1], buf[stop] = before, after
    return orjson.loads(b"[" + buf[start:stop] + b"]")


def _feed_last_slice(buf: bytes | bytearray, pos: int, size: int, on_batch) -> int:
    """Parse the final slice, up to the ``]`` that closes the array; returns that position."""
    bad = 0
    for end in _LAST_EVENT_END.finditer(buf, pos, size):
        try:
            batch = _load_events(buf, pos, end.start() + 1)
        except orjson.JSONDecodeError:
            bad += 1
            if bad > _MAX_BAD_CUTS:
                break
            continue
        on_batch(batch)
        return end.end() - 1
    raise ScanFallback("cannot find the end of the event array")


# --- rows ----------------------------------------------------------------------------------------

# Categories whose events no analysis reads; dropping them while loading saves most of the
# memory on traces recorded with ``with_stack=True``.
_DROPPED_CATS = frozenset({"python_function", "fwdbwd", "cuda_sync"})
# Categories whose whole ``args`` are kept (rare events, read by the kernel-record extraction).
_ARGS_KEPT_CATS = frozenset({"cuda_profiler_range"})
_RECORD_CATS = frozenset({"cpu_op", "Operator"})
_RUNTIME_SIZE_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "hip_runtime"})
_PHASE_CODES = {p: ord(p[0]) for p in ("X", "B", "E", "i", "I", "C", "s", "t", "f", "b", "e", "n")}
_FLOW_PHASES = frozenset({"s", "t", "f"})
_DROPPED = -1
_SIZE_FALLBACK = 1  # flag: take args.size when args.bytes is missing (HIP memcpy API calls)
_KEEP_ARGS = 2  # flag: keep the whole args dict (rare records)
_MAY_RECORD = 4  # flag: a cpu_op, which may be an Inductor kernel record (args.kernel_backend)
_FLOW = 8  # flag: a flow event (ph s/t/f), whose "id" is kept
_NAN = float("nan")
# Column name -> array typecode. ts/dur are float microseconds here (NaN = missing).
COLUMNS = {
    "sig": "i",
    "ts": "d",
    "dur": "d",
    "corr": "q",
    "ext": "q",
    "flow": "q",
    "nbytes": "q",
}


def _as_int(value) -> int:
    """Integer ids and sizes as traces write them: ints, floats, decimal or hex strings."""
    if type(value) is int:
        return value
    try:
        if isinstance(value, float):
            return int(value)
        if isinstance(value, str):
            return int(value, 0)
    except (ValueError, OverflowError):  # not a number, or an infinite float
        pass
    return MISSING


def _float_or_nan(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return _NAN


def _text(value) -> str:
    if value is None:
        return ""
    return value if type(value) is str else str(value)


def _normalised(ev: dict) -> dict | None:
    """Copy of an event whose ph/cat/name/pid/tid are made hashable text where they are not;
    ``None`` when one is nested too deeply to write as text (orjson writes 254 levels at most,
    reads 1024): no analysis could use such an event."""
    out = dict(ev)
    for key in ("ph", "cat", "name", "pid", "tid"):
        value = out.get(key)
        if value is not None and not isinstance(value, str | int | float):
            try:
                out[key] = orjson.dumps(value).decode()
            except orjson.JSONEncodeError:
                return None
    if not isinstance(out.get("args"), dict):
        out.pop("args", None)
    return out


class RowBuilder:
    """Turns batches of event dicts into typed columns, keeping only the needed fields.

    Events are keyed by their signature ``(ph, cat, name, pid, tid)``: one dict lookup per event
    instead of four, and one int column that expands into phase/category/name/lane later.
    Signatures, strings and lanes are numbered in order of first appearance.
    """

    def __init__(self) -> None:
        self.strings: dict[str, int] = {"": 0}
        self.lanes: dict[tuple, int] = {}
        self.sigs: dict[tuple, int] = {}
        self.sig_fields: list[tuple[int, int, int, int]] = []  # ph code, cat, name, lane
        self.sig_flags: list[int] = []
        self._string_list: list[str] = [""]
        self._lane_list: list[tuple] = []
        self._sent = (0, 0, 0)  # table entries already reported by table_delta
        self.columns: dict[str, array[Any]] = {key: array(code) for key, code in COLUMNS.items()}
        self.extra_args: dict[int, dict] = {}  # row -> args, for rare records
        self.rows = 0
        self.events = 0  # items of the event list seen, objects or not
        self.non_objects = 0  # items that are no JSON object (a number, a string, null, a list)

    def add_batch(self, events: list) -> None:
        self.events += len(events)
        rows: list[tuple] = []
        self._collect(events, rows)
        self._store(rows)

    def result(self) -> dict:
        """The columns and rare args gathered since the previous call (rows count from 0)."""
        out: dict[str, Any] = dict(self.columns)
        out["extra"] = self.extra_args
        out["events"], out["non_objects"] = self.events, self.non_objects
        self.columns = {key: array(code) for key, code in COLUMNS.items()}
        self.extra_args = {}
        self.rows = self.events = self.non_objects = 0
        return out

    def table_delta(self) -> tuple[list, list, list]:
        """Strings, lanes and signature fields added since the previous call."""
        s0, l0, f0 = self._sent
        self._sent = (len(self._string_list), len(self._lane_list), len(self.sig_fields))
        return self._string_list[s0:], self._lane_list[l0:], self.sig_fields[f0:]

    def _new_sig(self, key: tuple) -> int:
        ph, cat, name, pid, tid = key
        if ph == "M" or cat in _DROPPED_CATS:
            self.sigs[key] = _DROPPED
            return _DROPPED
        cat, name = _text(cat), _text(name)
        cat_id = self._intern(cat)
        name_id = self._intern(name)
        lane = self.lanes.get((pid, tid))
        if lane is None:
            lane = self.lanes[(pid, tid)] = len(self.lanes)
            self._lane_list.append((pid, tid))
        code = _PHASE_CODES.get(ph, 0) if type(ph) is str else 0
        flags = (
            (_SIZE_FALLBACK if cat in _RUNTIME_SIZE_CATS else 0)
            | (_KEEP_ARGS if cat in _ARGS_KEPT_CATS else 0)
            | (_MAY_RECORD if cat in _RECORD_CATS else 0)
            | (_FLOW if ph in _FLOW_PHASES else 0)
        )
        sig = self.sigs[key] = len(self.sig_fields)
        self.sig_fields.append((code, cat_id, name_id, lane))
        self.sig_flags.append(flags)
        return sig

    def _intern(self, text: str) -> int:
        found = self.strings.get(text)
        if found is None:
            found = self.strings[text] = len(self.strings)
            self._string_list.append(text)
        return found

    def _collect(self, events: list, rows: list[tuple], normalised: bool = False) -> None:
        keep_row = rows.append
        sigs_get, flags_of, new_sig = self.sigs.get, self.sig_flags, self._new_sig
        extra = self.extra_args
        first_row = self.rows
        nan = _NAN
        for ev in events:
            try:
                get = ev.get
                key = (get("ph"), get("cat"), get("name"), get("pid"), get("tid"))
                sig = sigs_get(key)
                if sig is None:
                    sig = new_sig(key)
                if sig < 0:
                    continue
                flags = flags_of[sig]
                if flags & _FLOW:
                    fid = get("id", -1)
                    if type(fid) is not int:
                        fid = _as_int(fid)
                else:
                    fid = -1
                args = get("args")
                if args:
                    aget = args.get
                    corr = aget("correlation", -1)
                    if type(corr) is not int:
                        corr = _as_int(corr)
                    ext = aget("External id", -1)
                    if type(ext) is not int:
                        ext = _as_int(ext)
                    nbytes = aget("bytes")
                    if nbytes is None:
                        nbytes = aget("size", -1) if flags & _SIZE_FALLBACK else -1
                    if type(nbytes) is not int:
                        nbytes = _as_int(nbytes)
                    if flags & _KEEP_ARGS or (flags & _MAY_RECORD and "kernel_backend" in args):
                        extra[first_row + len(rows)] = args
                else:
                    corr = ext = nbytes = -1
            except (TypeError, AttributeError):  # not a dict, or unhashable field values
                if type(ev) is not dict:
                    self.non_objects += 1
                elif not normalised:  # retried in place: rows keep event order
                    fixed = _normalised(ev)
                    if fixed is not None:
                        self._collect([fixed], rows, normalised=True)
                continue
            keep_row((sig, get("ts", nan), get("dur", nan), corr, ext, fid, nbytes))

    def _store(self, rows: list[tuple]) -> None:
        if not rows:
            return
        for column, values in zip(self.columns.values(), zip(*rows, strict=True), strict=True):
            try:
                column.extend(array(column.typecode, values))
            except (TypeError, ValueError, OverflowError):  # odd values: one by one
                if column.typecode == "d":
                    column.extend(array("d", [_float_or_nan(v) for v in values]))
                else:
                    column.extend(array("q", [v if -(2**63) <= v < 2**63 else -1 for v in values]))
        self.rows += len(rows)


# --- chunks parsed side by side ------------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """Events from ``start`` (an event's first byte, or whitespace before it) to ``end`` (just
    past an event's closing brace); the last chunk has ``end=None`` and runs to the array's end.
    """

    index: int
    start: int
    end: int | None


class Source:
    """The document's bytes, read piecewise from an open file descriptor (never whole).

    ``size`` is the number of bytes available; whoever is still writing the file raises it.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.size = os.fstat(fd).st_size

    def read(self, start: int, stop: int) -> bytes:
        stop = min(stop, self.size)
        return os.pread(self.fd, max(stop - start, 0), start)

    def read_chunk(self, chunk: Chunk, into: bytearray) -> tuple[bytearray, int, int]:
        """Copy the chunk, with one byte of context on each side, into a reused buffer.

        Returns the buffer, the document offset of its first byte and the length copied.
        """
        base = chunk.start - 1
        if chunk.end is None:  # planned once the file was complete: it is, by now
            self.size = os.fstat(self.fd).st_size
        stop = self.size if chunk.end is None else chunk.end + 1
        n = stop - base
        if len(into) < n:
            into = bytearray(n + (n >> 3))
        with memoryview(into) as view:
            got = 0
            while got < n:
                if hasattr(os, "preadv"):
                    k = os.preadv(self.fd, [view[got:n]], base + got)
                else:
                    part = os.pread(self.fd, n - got, base + got)
                    k = len(part)
                    view[got : got + k] = part
                if k <= 0:
                    raise ScanFallback("file changed while reading")
                got += k
        return into, base, n


class ChunkPlanner:
    """Guesses chunk boundaries after ``first`` (the array's first byte after ``[``), as far as
    the bytes available allow: full-size chunks while the document is still being written
    (:meth:`grow`), then chunks that shrink towards the end (:meth:`finish`: a fraction of what
    is left, within the bounds), so that the parties finish close together.
    """

    def __init__(self, source: Source, first: int, parties: int, min_bytes: int, max_bytes: int):
        self.source = source
        self.parties = parties
        self.min_bytes, self.max_bytes = min_bytes, max_bytes
        self.chunks: list[Chunk] = []
        self._start = first
        self._stuck = False  # no boundary found where one was looked for: wait for the end

    def grow(self, available: int) -> list[Chunk]:
        """Chunks of ``max_bytes`` that the first ``available`` bytes allow; the new ones."""
        old = len(self.chunks)
        while not self._stuck:
            target = self._start + self.max_bytes
            if target + _CUT_WINDOW > available:
                break
            self._stuck = not self._cut(target)
        return self.chunks[old:]

    def finish(self) -> list[Chunk]:
        """The remaining chunks of a complete document (the last one runs to the array's end)."""
        old = len(self.chunks)
        while True:
            left = self.source.size - self._start
            step = max(self.min_bytes, min(self.max_bytes, left // (2 * self.parties)))
            if left < step + self.min_bytes or not self._cut(self._start + step):
                break
        self.chunks.append(Chunk(len(self.chunks), self._start, None))
        return self.chunks[old:]

    def _cut(self, target: int) -> bool:
        m = _CHUNK_CUT.search(self.source.read(target, target + _CUT_WINDOW))
        if m is None:
            return False
        self.chunks.append(Chunk(len(self.chunks), self._start, target + m.start() + 1))
        self._start = target + m.start(1)
        return True


class ChunkParser:
    """Parses chunks in one process, numbering signatures across all the chunks it sees.

    Each result carries the chunk's columns (signatures in this parser's numbering), its rare
    args, the table entries this parser added since its previous result, and for the last chunk
    the position of the bracket that closes the array.
    """

    def __init__(self, source: Source, slice_bytes: int = SLICE_BYTES) -> None:
        self.source = source
        self.builder = RowBuilder()
        self.slice_bytes = slice_bytes
        self.buffer = bytearray()

    def parse(self, chunk: Chunk) -> dict:
        buf, base, size = self.source.read_chunk(chunk, self.buffer)
        self.buffer = buf
        end = None if chunk.end is None else chunk.end - base
        close = scan_events(
            buf, chunk.start - base, end, self.builder.add_batch, self.slice_bytes, size
        )
        out = self.builder.result()
        out["close"] = close + base if chunk.end is None else None
        out["table"] = self.builder.table_delta()
        return out


class Claims:
    """A chunk counter shared between processes (a small file, locked while it is bumped)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def next(self) -> int:
        """The next unclaimed chunk index (which may be past the last chunk)."""
        assert fcntl is not None
        fcntl.lockf(self.fd, fcntl.LOCK_EX)
        try:
            (i,) = _FRAME.unpack(os.pread(self.fd, _FRAME.size, 0))
            os.pwrite(self.fd, _FRAME.pack(i + 1), 0)
            return i
        finally:
            fcntl.lockf(self.fd, fcntl.LOCK_UN)


def anonymous_file() -> int:
    """An unnamed file (memory-backed where the platform allows) that children can inherit."""
    try:
        return os.memfd_create("profreport-trace", 0)
    except (AttributeError, OSError):
        with tempfile.TemporaryFile() as fh:  # already unlinked; the duplicate keeps it open
            return os.dup(fh.fileno())


class ChunkWorker:
    """A helper process, ``python -m profreport.analysis._scan``, that claims and parses chunks.

    It inherits three descriptors: the document, the shared claim counter and its own results
    file, where it appends one length-prefixed pickle per chunk; the chunk plan arrives on its
    stdin. Nothing flows back while it works, so this process is never interrupted; the results
    are read once it has exited.
    """

    def __init__(self, source: Source, claims_fd: int, slice_bytes: int) -> None:
        self.results_fd = anonymous_file()
        fds = (source.fd, claims_fd, self.results_fd)
        # This checkout's package first on the path (not whatever the working folder holds).
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        boot = (
            f"import sys; sys.path[0] = {root!r}; "
            "from profreport.analysis._scan import _worker_main; _worker_main(sys.argv[1:])"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", boot, *map(str, fds), str(slice_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=fds,
        )

    def send(self, chunks: Sequence[Chunk], last: bool = False) -> None:
        """Add chunks to the worker's plan (``last``: the plan is complete)."""
        pipe = self.proc.stdin
        assert pipe is not None
        try:
            for c in chunks:
                frame = pickle.dumps((c.start, c.end))
                pipe.write(_FRAME.pack(len(frame)) + frame)
            if last:
                pipe.close()
            else:
                pipe.flush()
        except OSError:
            pass  # it died: its chunks stay unclaimed or are redone by the caller

    def results(self) -> list[tuple[int, str, Any]]:
        """Wait for the worker; ``(chunk index, "ok" | "error", result)`` for each chunk it did.

        Columns come back as memoryviews of the mapped results file, not copies.
        """
        self.proc.wait()
        size = os.fstat(self.results_fd).st_size
        if not size:
            return []
        # Unmapped once the last view of it is gone (after the columns are joined).
        data = memoryview(mmap.mmap(self.results_fd, size, access=mmap.ACCESS_READ))
        out: list[tuple[int, str, Any]] = []
        pos = 0
        while pos + _FRAME.size <= size:
            (n,) = _FRAME.unpack(data[pos : pos + _FRAME.size])
            pos += _FRAME.size
            if pos + n > size:
                break  # cut short: the worker died while writing it
            index, status, result = pickle.loads(data[pos : pos + n])
            pos += n
            if status == "ok":
                for key, length in result.pop("lengths").items():
                    if pos + length > size:
                        return out
                    result[key] = data[pos : pos + length]
                    pos += length
            out.append((index, status, result))
        return out

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        if self.results_fd >= 0:
            os.close(self.results_fd)
            self.results_fd = -1


def run_chunks(
    chunks: Sequence[Chunk], parser: ChunkParser, claims: Claims, workers: list[ChunkWorker]
) -> list[tuple[int, dict]]:
    """Parse every chunk of a complete plan (already sent to ``workers``), here and there;
    returns ``(party, result)`` in chunk order, where party 0 is this process and ``k`` is
    ``workers[k - 1]``.

    A chunk that fails to parse raises :class:`ScanFallback`; chunks a worker claimed but did
    not finish (it died) are parsed here.
    """
    results: list[tuple[int, dict] | None] = [None] * len(chunks)
    while (i := claims.next()) < len(chunks):
        results[i] = (0, parser.parse(chunks[i]))
    for party, worker in enumerate(workers, start=1):
        for i, status, result in worker.results():
            if status != "ok":
                raise ScanFallback(f"chunk at byte {chunks[i].start}: {result}")
            results[i] = (party, result)
    for chunk in chunks:
        if results[chunk.index] is None:
            results[chunk.index] = (0, parser.parse(chunk))
    return [r for r in results if r is not None]


def _worker_main(argv: list[str]) -> None:
    """A chunk worker: claim a chunk, parse it, append the result; until none is left.

    The plan arrives on stdin a chunk at a time (the document may still be being written);
    end of input means it is complete.
    """
    import gc

    gc.disable()  # event dicts cannot form cycles; collecting them only costs time
    data_fd, claims_fd, results_fd, slice_bytes = map(int, argv)
    source = Source(data_fd)
    parser = ChunkParser(source, slice_bytes)
    claims = Claims(claims_fd)
    plan: list[Chunk] = []
    inp = sys.stdin.buffer
    complete = False
    while True:
        i = claims.next()
        while i >= len(plan) and not complete:
            frame = inp.read(_FRAME.size)
            if len(frame) < _FRAME.size:
                complete = True
                break
            start, end = pickle.loads(inp.read(_FRAME.unpack(frame)[0]))
            plan.append(Chunk(len(plan), start, end))
        if i >= len(plan):
            break
        columns: list[array[Any]] = []
        try:
            result = parser.parse(plan[i])
            columns = [result.pop(key) for key in COLUMNS]
            result["lengths"] = {
                key: len(c) * c.itemsize for key, c in zip(COLUMNS, columns, strict=True)
            }
            reply: tuple = (i, "ok", result)
        except Exception as exc:  # reported to the parent, which falls back
            reply = (i, "error", f"{type(exc).__name__}: {exc}")
        head = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        parts: list[bytes | array[Any]] = [_FRAME.pack(len(head)), head, *columns]
        for part in parts:
            left = memoryview(part).cast("B")
            while left:
                left = left[os.write(results_fd, left) :]
        if reply[1] != "ok":
            break


if __name__ == "__main__":
    _worker_main(sys.argv[1:])
