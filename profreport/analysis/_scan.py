"""Parse trace JSON in slices of the ``traceEvents`` array, so that only one slice of event dicts
is alive at a time (peak memory ~ file size + one slice + the columns, not file size x 8).

The array is cut at ``}`` ``,`` ``{`` sequences; a cut that falls inside an event (or inside a
string) leaves an unbalanced slice, which orjson rejects, and the next candidate is tried. So
every accepted slice is a run of whole events. Anything unexpected raises :class:`ScanFallback`
and the caller parses the document whole instead.

Large traces are also split into *chunks* parsed side by side: the calling process and helper
processes (fresh interpreters, never forks: the caller may hold CUDA or torch state) each take the
next unparsed chunk until none is left. Chunk boundaries are guessed from the bytes alone; each
guess is proven afterwards: chunk ``i`` is parsed from a known event start, and its last slice
must end exactly where chunk ``i + 1`` begins, so by induction from the array's first event every
boundary is a real one. A failed proof raises :class:`ScanFallback` (and the sequential scan runs).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import struct
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

import orjson

SLICE_BYTES = 1 << 20  # small slices reuse freed memory: measured faster than 8-64 MiB
CHUNK_SLICE_BYTES = 1 << 17  # slices inside parallel chunks: objects stay in the CPU cache
_MAX_BAD_CUTS = 64
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")
# Chunk boundaries are guessed, then proven; a key after the brace makes a wrong guess (a
# ``}, {`` inside a string, as in some demangled C++ names) rarer.
_CHUNK_CUT = re.compile(rb'\}\s*,\s*(\{)\s*"')
_LAST_EVENT_END = re.compile(rb"\}\s*\]")
_WHITESPACE = b" \t\r\n"
_FRAME = struct.Struct("<Q")
_CUT_WINDOW = 1 << 18


class ScanFallback(Exception):
    """The sliced scan cannot vouch for this document; parse it whole."""


def scan_whole(raw: bytes, on_batch: Callable[[list], None]) -> dict:
    """Parse the whole document at once; returns the top-level metadata (all but traceEvents)."""
    doc = orjson.loads(raw)
    if isinstance(doc, list):  # Chrome "JSON array format": just the events
        on_batch(doc)
        return {}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError("not a profiler trace (no traceEvents list)")
    on_batch(doc.pop("traceEvents"))
    return doc


def locate_events(head: bytes) -> tuple[int, bytes | None]:
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


def metadata_around(prefix: bytes | None, suffix: bytes) -> dict:
    """The top-level fields other than the events, from the text before and after the array."""
    if prefix is None:
        if suffix.strip(_WHITESPACE):
            raise ScanFallback("data after the event array")
        return {}
    try:
        doc = orjson.loads(prefix + b'"traceEvents": []' + suffix)
    except orjson.JSONDecodeError as exc:
        raise ScanFallback("document around the events does not parse") from exc
    if not isinstance(doc, dict):
        raise ScanFallback("top level is not an object")
    doc.pop("traceEvents", None)
    return doc


def scan_sliced(raw: bytes, on_batch: Callable[[list], None], slice_bytes: int = SLICE_BYTES):
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


# --- chunks parsed side by side ----------------------------------------------------------------


@dataclass(frozen=True)
class Chunk:
    """Events from ``start`` (an event's first byte, or whitespace before it) to ``end`` (just
    past an event's closing brace); the last chunk has ``end=None`` and runs to the array's end.
    """

    index: int
    start: int
    end: int | None


class Source:
    """The document's bytes, in memory or in a file read piecewise (never whole)."""

    def __init__(self, data: bytes | None = None, path: str | None = None) -> None:
        self.data = data
        self.path = path
        self._fd = -1 if path is None else os.open(path, os.O_RDONLY)
        self.size = len(data) if data is not None else os.fstat(self._fd).st_size

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def read(self, start: int, stop: int) -> bytes:
        stop = min(stop, self.size)
        if self.data is not None:
            return self.data[start:stop]
        return os.pread(self._fd, max(stop - start, 0), start)

    def read_chunk(self, chunk: Chunk, into: bytearray) -> tuple[bytearray, int]:
        """Copy the chunk, with one byte of context on each side, into a reused buffer.

        Returns the buffer and the document offset of its first byte.
        """
        base = chunk.start - 1
        stop = self.size if chunk.end is None else chunk.end + 1
        n = stop - base
        if len(into) < n:
            into = bytearray(n + (n >> 3))
        with memoryview(into) as view:
            if self.data is not None:
                view[:n] = memoryview(self.data)[base:stop]
            else:
                got = os.preadv(self._fd, [view[:n]], base)
                if got != n:
                    raise ScanFallback("file changed while reading")
        return into, base


def plan_chunks(source: Source, first: int, parties: int, min_bytes: int, max_bytes: int):
    """Guess chunk boundaries after ``first`` (the array's first byte after ``[``).

    Chunk sizes shrink towards the end (a fraction of what is left, within the bounds), so that
    the parties finish close together.
    """
    chunks: list[Chunk] = []
    start = first
    while True:
        left = source.size - start
        step = max(min_bytes, min(max_bytes, left // (2 * parties)))
        if left < step + min_bytes:
            break
        target = start + step
        window = source.read(target, target + _CUT_WINDOW)
        m = _CHUNK_CUT.search(window)
        if m is None:
            break
        chunks.append(Chunk(len(chunks), start, target + m.start() + 1))
        start = target + m.start(1)
    chunks.append(Chunk(len(chunks), start, None))
    return chunks


def run_chunks(
    chunks: Sequence[Chunk],
    parse_here: Callable[[Chunk], Any],
    workers: list[ChunkWorker],
) -> list[tuple[int, Any]]:
    """Parse every chunk, here and in ``workers``; returns ``(party, result)`` per chunk, where
    party 0 is this process and ``k`` is ``workers[k - 1]``.

    Each party takes the next chunk nobody has taken. A worker that fails leaves its chunks to
    this process; a chunk that fails to parse raises :class:`ScanFallback`.
    """
    results: list[tuple[int, Any] | None] = [None] * len(chunks)
    lock = threading.Lock()
    taken = [0]

    def take() -> Chunk | None:
        with lock:
            i = taken[0]
            if i >= len(chunks):
                return None
            taken[0] = i + 1
        return chunks[i]

    for party, worker in enumerate(workers, start=1):
        worker.begin(take, results, party)
    try:
        while (chunk := take()) is not None:
            results[chunk.index] = (0, parse_here(chunk))
        for worker in workers:
            worker.finish()
    except BaseException:
        for worker in workers:
            worker.abort()
        raise
    for chunk in chunks:  # what a failed worker left undone
        if results[chunk.index] is None:
            results[chunk.index] = (0, parse_here(chunk))
    for worker in workers:
        if worker.failure is not None:
            raise ScanFallback(worker.failure)
    return [r for r in results if r is not None]


class ChunkWorker:
    """A helper process (``python -m profreport.analysis._scan``) that parses chunks on request.

    Two threads talk to it: one sends requests (keeping one queued ahead, so it never waits for
    the busy main thread), one receives results. Requests and results are length-prefixed
    pickles on its stdin / stdout; in memory mode each request carries the chunk's bytes.
    """

    def __init__(self, source: Source, slice_bytes: int) -> None:
        self.source = source
        self.failure: str | None = None
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "profreport.analysis._scan"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            close_fds=True,
        )
        header = {"path": source.path, "slice_bytes": slice_bytes}
        self._pending: deque[Chunk] = deque()
        self._slots = threading.Semaphore(2)  # requests in flight: one parsing, one queued
        self._stop = threading.Event()
        self._header = pickle.dumps(header)
        self._threads: list[threading.Thread] = []

    def begin(self, take, results: list, party: int) -> None:
        self._threads = [
            threading.Thread(target=self._send, args=(take,), daemon=True),
            threading.Thread(target=self._receive, args=(results, party), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _send(self, take) -> None:
        pipe = self.proc.stdin
        assert pipe is not None
        try:
            _write_frame(pipe, self._header)
            while True:
                self._slots.acquire()
                if self._stop.is_set():
                    break
                chunk = take()
                if chunk is None:
                    break
                self._pending.append(chunk)
                _write_frame(pipe, pickle.dumps((chunk.start, chunk.end)))
                if self.source.data is not None:  # memory mode: the chunk goes along
                    stop = self.source.size if chunk.end is None else chunk.end + 1
                    with memoryview(self.source.data) as view:
                        _write_frame(pipe, view[chunk.start - 1 : stop])
                pipe.flush()
        except (OSError, ValueError):
            pass  # the worker is gone; _receive notices
        finally:
            with contextlib.suppress(OSError):
                pipe.close()

    def _receive(self, results: list, party: int) -> None:
        pipe = self.proc.stdout
        assert pipe is not None
        try:
            while (frame := _read_frame(pipe)) is not None:
                status, result = pickle.loads(frame)
                chunk = self._pending.popleft()
                if status != "ok":
                    self.failure = f"chunk at byte {chunk.start}: {result}"
                    break
                results[chunk.index] = (party, result)
                self._slots.release()
        except (OSError, EOFError, pickle.UnpicklingError, IndexError):
            pass
        finally:
            self._stop.set()
            self._slots.release()

    def finish(self) -> None:
        for t in self._threads:
            t.join()
        self._close()

    def abort(self) -> None:
        self._stop.set()
        self._slots.release()
        self.proc.kill()
        for t in self._threads:
            t.join()
        self._close()

    def _close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _write_frame(pipe: IO[bytes], payload: bytes | bytearray) -> None:
    pipe.write(_FRAME.pack(len(payload)))
    pipe.write(payload)


def _read_frame(pipe: IO[bytes], into: bytearray | None = None):
    head = pipe.read(_FRAME.size)
    if len(head) < _FRAME.size:
        return None
    (n,) = _FRAME.unpack(head)
    if into is None:
        data = pipe.read(n)
        if len(data) < n:
            raise EOFError("truncated frame")
        return data
    if len(into) < n + 2:
        into = bytearray(n + 2 + (n >> 3))
    with memoryview(into) as view:
        got = 0
        while got < n:
            k = pipe.readinto(view[got:n])  # type: ignore[attr-defined]
            if not k:
                raise EOFError("truncated frame")
            got += k
    return into, n


def _worker_main() -> None:
    """Loop of a chunk worker: read a request, parse the chunk, write the result."""
    import gc

    gc.disable()  # event dicts cannot form cycles; collecting them only costs time
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not corrupt the result stream
    inp = sys.stdin.buffer
    header = pickle.loads(_read_frame(inp))
    from profreport.analysis.trace import ChunkParser

    parser = ChunkParser(header["slice_bytes"])
    source = Source(path=header["path"]) if header["path"] else None
    buf = bytearray()
    while (frame := _read_frame(inp)) is not None:
        start, end = pickle.loads(frame)
        chunk = Chunk(0, start, end)
        try:
            if source is not None:
                buf, base = source.read_chunk(chunk, buf)
                size = (source.size if end is None else end + 1) - base
            else:
                got = _read_frame(inp, buf)
                if got is None:
                    break
                buf, size = got
                base = start - 1
            reply = ("ok", parser.parse(buf, size, base, chunk))
        except Exception as exc:  # reported to the parent, which falls back
            reply = ("error", f"{type(exc).__name__}: {exc}")
        _write_frame(out, pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL))
        out.flush()
        if reply[0] != "ok":
            break


if __name__ == "__main__":
    _worker_main()
