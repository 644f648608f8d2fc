"""Large traces parsed in chunks, side by side, by this process and helper processes.

Helper processes are fresh interpreters, never forks (the caller may hold CUDA or torch state),
each claiming the next unparsed chunk until none is left. Chunk boundaries are guessed from the
bytes alone and proven afterwards: chunk ``i`` is parsed from a known event start and its last
slice must end exactly where chunk ``i + 1`` begins, so by induction from the array's first event
every boundary is a real one. A failed proof raises :class:`ScanFallback`. numpy-free.
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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

try:
    import fcntl
except ImportError:  # not POSIX: no helper processes (see load.worker_count)
    fcntl = None  # type: ignore[assignment]

from profreport.traceio.rows import COLUMNS, ChunkResult, RowBuilder
from profreport.traceio.slices import SLICE_BYTES, ScanFallback, scan_events

# Chunk boundaries are guessed, then proven. Asking for an event's usual first key after the
# brace makes wrong guesses (between objects nested in args, or in a string ending "}, {") rare.
_CHUNK_CUT = re.compile(rb'\}\s*,\s*(\{)\s*"(?:ph|cat|name|pid|tid|ts|dur|id|args)"')
_CUT_WINDOW = 1 << 18
_FRAME = struct.Struct("<Q")


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

    def parse(self, chunk: Chunk) -> ChunkResult:
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
            return int(i)
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
    """A helper process, ``python -c "...profreport.traceio.chunks._worker_main..."``, that claims and parses chunks.

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
            "from profreport.traceio.chunks import _worker_main; _worker_main(sys.argv[1:])"
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
) -> list[tuple[int, ChunkResult]]:
    """Parse every chunk of a complete plan (already sent to ``workers``), here and there;
    returns ``(party, result)`` in chunk order, where party 0 is this process and ``k`` is
    ``workers[k - 1]``.

    A chunk that fails to parse raises :class:`ScanFallback`; chunks a worker claimed but did
    not finish (it died) are parsed here.
    """
    results: list[tuple[int, ChunkResult] | None] = [None] * len(chunks)
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
            reply: tuple[int, str, ChunkResult | str] = (i, "ok", result)
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
