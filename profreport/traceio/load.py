"""Load a Kineto / Chrome trace (``.json`` or ``.json.gz``) into a compact columnar form.

A trace is read once and kept as a handful of numpy columns plus interned string tables
(:mod:`profreport.traceio.columns`), never as a list of event dicts: only the fields the analyses
need survive (phase, category, name, time, thread, correlation / External id, flow id, bytes).

Events that no analysis reads are dropped while loading: metadata (``ph == "M"``), Python stack
samples (``python_function``) and ``fwdbwd`` flows. Everything else is kept, including unknown
categories and CUDA sync records.

Large files are parsed in chunks by this process and helper processes together (see
:mod:`profreport.traceio.chunks`); the result is the same, row for row, as one pass would give.
"""

from __future__ import annotations

import gc
import gzip
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from profreport.traceio import gunzip as _gunzip
from profreport.traceio.chunks import (
    ChunkParser,
    ChunkPlanner,
    ChunkWorker,
    Claims,
    Source,
    anonymous_file,
    run_chunks,
)
from profreport.traceio.columns import Trace, assemble
from profreport.traceio.errors import NotATraceError, TraceError
from profreport.traceio.memory import MemoryBudget
from profreport.traceio.rows import RowBuilder, TableDelta
from profreport.traceio.slices import (
    EXPECTED,
    SLICE_BYTES,
    ScanFallback,
    locate_events,
    metadata_around,
    scan_sliced,
    scan_whole,
)

__all__ = ["NotATraceError", "Trace", "TraceError", "load_trace", "parse_trace"]

GZIP_MAGIC = b"\x1f\x8b"


def load_trace(path: str | os.PathLike[str], workers: int | None = None) -> Trace:
    """Read a trace file (plain or gzip, detected by magic bytes) into a :class:`Trace`.

    Large files are parsed by this process and ``workers`` helper processes together (default:
    one per spare CPU, see :func:`worker_count`; 0: this process only). A large gzip file is
    decompressed here while the helpers parse what is already decompressed. The result does not
    depend on ``workers``. A file that would need more memory than is available is refused
    with :class:`TraceError` before the memory is taken (see :mod:`profreport.traceio.memory`).
    """
    path_str = os.fspath(path)
    try:
        fd = os.open(path_str, os.O_RDONLY)
    except OSError as exc:
        raise _read_error(path_str, exc) from None
    try:
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                raise TraceError(f"{path_str}: empty file: {EXPECTED}")
            gzipped = os.pread(fd, 2, 0) == GZIP_MAGIC
            # The decompressed size a gzip trailer announces (modulo 4 GiB, if it is honest).
            announced = (
                int.from_bytes(os.pread(fd, 4, max(size - 4, 0)), "little") if gzipped else size
            )
        except OSError as exc:
            raise _read_error(path_str, exc) from None
        # A wrapped (or lying) gzip trailer: at least the file size, perhaps 8 times more.
        doc_bytes = max(announced, size)
        budget = MemoryBudget(path_str)
        n = worker_count(announced if announced >= size else size * 8, workers)
        if n:
            budget.check(doc_bytes, doc_in_memory=gzipped)
            try:
                if not gzipped:
                    return _parse_parallel(Source(fd), n, path_str)
                out = anonymous_file()
                try:
                    fill = _gunzip_into(fd, out, budget)
                    return _parse_parallel(Source(out), n, path_str, fill)
                finally:
                    os.close(out)
            except _ParallelFailed:
                pass  # parsed again below, one slice at a time, for the exact outcome
        budget.check(doc_bytes, doc_in_memory=True)
        try:
            raw = _gunzip_whole(fd, budget) if gzipped else _read_whole(fd)
        except OSError as exc:
            raise _read_error(path_str, exc) from None
    finally:
        os.close(fd)
    return parse_trace(raw, path_str)


def parse_trace(raw: bytes | bytearray, path: str = "<memory>") -> Trace:
    """Parse trace JSON bytes into a :class:`Trace` in this process (helper processes read a
    file: :func:`load_trace`); :class:`TraceError` if it is not one.

    A bytearray is parsed in place (its bytes are briefly changed and restored, so no other
    thread may read it meanwhile): that is how a decompressed trace arrives, without a copy.
    """
    with _gc_paused():
        builder = RowBuilder()
        with _as_trace_errors(path):
            try:
                metadata = scan_sliced(raw, builder.add_batch, SLICE_BYTES)
            except ScanFallback:
                # The whole-document parse takes ~9 bytes per byte of JSON: ask first.
                MemoryBudget(path).check(len(raw), doc_in_memory=False, whole=True)
                return _parse_reference(raw, path)
        return assemble(path, metadata, [(0, builder.result())], [builder.table_delta()])


def read_document(path: Path) -> Any:
    """The JSON document of a trace file, plain or gzip (told by its magic bytes), not the
    columnar `Trace`: for the few readers that need every field of every event (the merged
    timeline rewrites events as they are)."""
    raw = path.read_bytes()
    return orjson.loads(gzip.decompress(raw) if raw[:2] == GZIP_MAGIC else raw)


def _parse_reference(raw: bytes | bytearray, path: str = "<memory>") -> Trace:
    """The plain way (the fallback of :func:`parse_trace`, and the tests' reference): one
    ``orjson.loads`` of the whole document and one loop over its events. :func:`parse_trace`
    and :func:`load_trace` must give exactly the same Trace."""
    with _gc_paused():
        builder = RowBuilder()
        with _as_trace_errors(path):
            metadata = scan_whole(raw, builder.add_batch)
        return assemble(path, metadata, [(0, builder.result())], [builder.table_delta()])


# --- parsing in parallel -------------------------------------------------------------------------

PARALLEL_MIN_BYTES = 16 << 20  # below this, a helper process saves next to nothing
BYTES_PER_WORKER = 8 << 20
MAX_WORKERS = 7
MIN_CHUNK_BYTES = 1 << 20
MAX_CHUNK_BYTES = 8 << 20
WORKERS_ENV = "PROFREPORT_TRACE_WORKERS"
_HEAD_BYTES = 1 << 20
_GUNZIP_BLOCK = 1 << 20  # compressed bytes read at a time (~10 MiB of trace JSON)


class _ParallelFailed(Exception):
    """The parallel parse cannot vouch for the document; the sequential scan decides."""


def worker_count(size: int, requested: int | None = None) -> int:
    """Helper processes for a document of ``size`` bytes: ``requested`` if given; else none for
    a small document, and for a large one the ``PROFREPORT_TRACE_WORKERS`` environment variable
    or one per spare CPU (at most one per ``BYTES_PER_WORKER``)."""
    if not sys.executable or os.name != "posix":
        return 0  # helpers inherit file descriptors: POSIX only
    if requested is not None:
        return max(requested, 0)
    if size < PARALLEL_MIN_BYTES:
        return 0
    env = os.environ.get(WORKERS_ENV, "").strip()
    if env.isdigit():
        return int(env)
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(min(cpus - 1, MAX_WORKERS, size // BYTES_PER_WORKER - 1), 0)


def _inflate(fd: int, budget: MemoryBudget) -> Iterator[bytes]:
    """The decompressed bytes of the gzip file ``fd``, a piece at a time, within ``budget``."""
    pos = 0

    def read() -> bytes:
        nonlocal pos
        block = os.pread(fd, _GUNZIP_BLOCK, pos)
        pos += len(block)
        return block

    try:
        yield from _gunzip.inflate(read, budget.inflate_limit())
    except _gunzip.CorruptGzip as exc:
        raise TraceError(f"{budget.path}: corrupt gzip data ({exc})") from None
    except _gunzip.InflatesTooFar as exc:
        raise budget.inflated_too_far(exc.produced) from None


def _gunzip_into(src: int, dst: int, budget: MemoryBudget) -> Iterator[int]:
    """Decompress the gzip file ``src`` into ``dst``, yielding the bytes written so far."""
    written = 0
    for piece in _inflate(src, budget):
        with memoryview(piece) as view:
            done = 0
            while done < len(view):
                done += os.pwrite(dst, view[done : done + (64 << 20)], written + done)
        written += done
        yield written


def _gunzip_whole(fd: int, budget: MemoryBudget) -> bytearray:
    """Decompress the gzip file ``fd`` into memory (a bytearray grows in place: no copy)."""
    raw = bytearray()
    for piece in _inflate(fd, budget):
        raw += piece
    return raw


def _read_whole(fd: int) -> bytes:
    with open(fd, "rb", closefd=False) as fh:
        return fh.read()


def _parse_parallel(
    source: Source, n_workers: int, path: str, fill: Iterator[int] | None = None
) -> Trace:
    """Parse in chunks here and in ``n_workers`` helper processes, started first so that their
    start-up overlaps the planning and this process's first chunks.

    ``fill``, when given, writes the document into ``source`` piece by piece and yields how many
    bytes are there so far: the helpers start on the first chunks while the rest is coming.
    """
    claims_fd = anonymous_file()
    workers: list[ChunkWorker] = []
    try:
        os.pwrite(claims_fd, bytes(8), 0)
        try:
            for _ in range(n_workers):
                workers.append(ChunkWorker(source, claims_fd, SLICE_BYTES))
        except OSError:
            pass  # fewer helpers (or none): this process parses the rest
        with _gc_paused():
            return _run_parallel(source, Claims(claims_fd), workers, path, fill)
    except (ScanFallback, orjson.JSONDecodeError, ValueError, OSError, EOFError) as exc:
        raise _ParallelFailed(str(exc)) from None
    finally:
        for worker in workers:
            worker.close()
        os.close(claims_fd)


def _run_parallel(
    source: Source,
    claims: Claims,
    workers: list[ChunkWorker],
    path: str,
    fill: Iterator[int] | None,
) -> Trace:
    parties = len(workers) + 1
    planner: ChunkPlanner | None = None
    prefix: bytes | bytearray | None = None
    look_from = _HEAD_BYTES  # bytes to have before looking for the event array (again)
    for available in fill or ():
        source.size = available
        if planner is None and available >= look_from:
            found = _planner(source, parties, complete=False)
            if found is None:
                look_from = 2 * available
                continue
            planner, prefix = found
        if planner is not None:
            for worker in workers:
                worker.send(planner.grow(available))
    if planner is None:
        found = _planner(source, parties, complete=True)
        assert found is not None
        planner, prefix = found
    final = planner.finish()
    for worker in workers:
        worker.send(final, last=True)
    results = run_chunks(planner.chunks, ChunkParser(source, SLICE_BYTES), claims, workers)
    close = results[-1][1]["close"]
    metadata = metadata_around(prefix, source.read(close + 1, source.size))
    # Each party's table, from its deltas in the order it produced them (= chunk order).
    tables: list[TableDelta] = [([], [], []) for _ in range(parties)]
    for party, result in results:
        strings, lanes, fields = tables[party]
        new_strings, new_lanes, new_fields = result["table"]
        strings.extend(new_strings)
        lanes.extend(new_lanes)
        fields.extend(new_fields)
    return assemble(path, metadata, results, tables)


def _planner(
    source: Source, parties: int, complete: bool
) -> tuple[ChunkPlanner, bytes | bytearray | None] | None:
    """A planner from the event array's first byte, and the text before the array; ``None``
    while the array is not in sight yet (big metadata first) and more bytes are coming."""
    limit = _HEAD_BYTES
    while True:
        head = source.read(0, limit)
        try:
            array_open, prefix = locate_events(head)
            break
        except ScanFallback:
            if limit >= source.size or head.lstrip(b" \t\r\n")[:1] != b"{":
                if complete:
                    raise
                return None
            limit *= 4
    if head[array_open + 1 :].lstrip(b" \t\r\n")[:1] in (b"]", b""):
        raise ScanFallback("no events, or no room for chunks")
    first = array_open + 1
    return ChunkPlanner(source, first, parties, MIN_CHUNK_BYTES, MAX_CHUNK_BYTES), prefix


@contextmanager
def _as_trace_errors(path: str) -> Iterator[None]:
    """Report a document that is not JSON, or JSON that is not a trace, as one line."""
    try:
        yield
    except orjson.JSONDecodeError as exc:
        raise TraceError(f"{path}: not valid JSON ({_one_line(exc)})") from None
    except ValueError as exc:
        raise NotATraceError(f"{path}: {_one_line(exc)}") from None


class _gc_paused:
    """Millions of short-lived dicts would trigger the cyclic GC over and over (it costs more than
    the parse itself); none of them can form a cycle, so collection waits until the end."""

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was_enabled:
            gc.enable()


def _read_error(path: str, exc: OSError) -> TraceError:
    if isinstance(exc, FileNotFoundError):
        return TraceError(f"{path}: no such file")
    if isinstance(exc, IsADirectoryError):
        return TraceError(f"{path}: is a directory, not a trace file")
    return TraceError(f"{path}: cannot read ({exc.strerror or exc})")


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
