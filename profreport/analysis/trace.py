"""Load a Kineto / Chrome trace (``.json`` or ``.json.gz``) into a compact columnar form.

A trace is read once and kept as a handful of numpy columns plus interned string tables, never
as a list of event dicts: only the fields the analyses need survive (phase, category, name, time,
thread, correlation / External id, flow id, bytes). Times are integer nanoseconds so that nesting
tests are exact even for microsecond timestamps around 1e15.

Events that no analysis reads are dropped while loading: metadata (``ph == "M"``), Python stack
samples (``python_function``), ``fwdbwd`` flows and CUDA sync records. Everything else is kept,
including unknown categories.
"""

from __future__ import annotations

import gc
import gzip
import os
import sys
import zlib
from dataclasses import dataclass, field
from itertools import repeat
from operator import is_, itemgetter

import numpy as np
import orjson

from profreport.analysis._scan import (
    CHUNK_SLICE_BYTES,
    Chunk,
    ChunkWorker,
    ScanFallback,
    Source,
    locate_events,
    metadata_around,
    plan_chunks,
    run_chunks,
    scan_events,
    scan_sliced,
    scan_whole,
)

__all__ = ["NotATraceError", "Trace", "TraceError", "load_trace", "parse_trace"]

GZIP_MAGIC = b"\x1f\x8b"
MISSING = -1
# Categories whose events no analysis reads; dropping them while loading saves most of the
# memory on traces recorded with ``with_stack=True``.
_DROPPED_CATS = frozenset({"python_function", "fwdbwd", "cuda_sync"})
# Categories whose whole ``args`` are kept (rare events, read by the kernel-record extraction).
_ARGS_KEPT_CATS = frozenset({"cuda_profiler_range"})
_RECORD_CATS = frozenset({"cpu_op", "Operator"})
_RUNTIME_SIZE_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "hip_runtime"})


class TraceError(Exception):
    """The input cannot be read as a profiler trace; the message is one line."""


class NotATraceError(TraceError):
    """Valid JSON, but not a trace (no ``traceEvents`` list): e.g. a run record next to traces."""


@dataclass(eq=False)
class Trace:
    """Columnar view of one trace file: row ``i`` of every column is event ``i``.

    ``name`` and ``cat`` index into ``strings``; ``lane`` indexes into ``lanes``, the distinct
    ``(pid, tid)`` pairs (raw values: ints or strings). Missing integers are ``-1``.
    """

    path: str
    metadata: dict
    strings: list[str]
    lanes: list[tuple]
    ph: np.ndarray  # uint8, ord of the phase letter (0 when missing)
    cat: np.ndarray  # int32 into strings
    name: np.ndarray  # int32 into strings
    lane: np.ndarray  # int32 into lanes: the (pid, tid) the event was recorded on
    ts_ns: np.ndarray  # int64
    dur_ns: np.ndarray  # int64, -1 when the event has no duration
    correlation: np.ndarray  # int64
    external_id: np.ndarray  # int64
    flow_id: np.ndarray  # int64, the ``id`` of flow events (ph s/f/t)
    nbytes: np.ndarray  # int64, ``args.bytes`` (or ``args.size`` on runtime memcpy/memset calls)
    extra_args: dict[int, dict] = field(default_factory=dict)  # row -> args, for rare records

    def __len__(self) -> int:
        return int(self.ph.shape[0])

    def pid_of(self, row: int):
        return self.lanes[self.lane[row]][0]

    def string_id(self, text: str) -> int:
        """Index of ``text`` in the string table, or -1 when no event uses it."""
        try:
            return self.strings.index(text)
        except ValueError:
            return -1

    def string_table_mask(self, predicate) -> np.ndarray:
        """Boolean lookup table over ``strings``: ``table[trace.cat]`` gives a per-event mask."""
        return np.fromiter((bool(predicate(s)) for s in self.strings), bool, len(self.strings))


def load_trace(path: str | os.PathLike, workers: int | None = None) -> Trace:
    """Read a trace file (plain or gzip, detected by magic bytes) into a :class:`Trace`.

    Large files are parsed by this process and ``workers`` helper processes together (default:
    one per spare CPU; 0 parses here only). The result does not depend on ``workers``.
    """
    path_str = os.fspath(path)
    try:
        with open(path_str, "rb") as fh:
            magic = fh.read(2)
            size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise _read_error(path_str, exc) from None
    if magic != GZIP_MAGIC:
        n = _worker_count(size, workers)
        if n:
            try:
                source = Source(path=path_str)
            except OSError as exc:
                raise _read_error(path_str, exc) from None
            try:
                return _parse_parallel(source, n, path_str)
            except _ParallelFailed:
                pass  # parsed again below, one slice at a time, for the exact error
            finally:
                source.close()
    raw = _read_bytes(path_str)
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceError(f"{path_str}: corrupt gzip data ({exc})") from None
    return parse_trace(raw, path_str, workers=workers)


def parse_trace(raw: bytes, path: str = "<memory>", workers: int | None = None) -> Trace:
    """Parse trace JSON bytes into a :class:`Trace`; :class:`TraceError` if it is not one."""
    n = _worker_count(len(raw), workers)
    if n:
        try:
            return _parse_parallel(Source(data=raw), n, path)
        except _ParallelFailed:
            pass
    with _gc_paused():
        builder = _ColumnBuilder()
        try:
            try:
                metadata = scan_sliced(raw, builder.add_batch)
            except ScanFallback:
                builder = _ColumnBuilder()
                metadata = scan_whole(raw, builder.add_batch)
        except orjson.JSONDecodeError as exc:
            raise TraceError(f"{path}: not valid JSON ({_one_line(exc)})") from None
        except ValueError as exc:
            raise NotATraceError(f"{path}: {_one_line(exc)}") from None
        return _assemble(path, metadata, [(0, builder.result())], [builder.table_delta()])


def _parse_reference(raw: bytes, path: str = "<memory>") -> Trace:
    """The plain way, for tests: one ``orjson.loads`` of the whole document, then one Python
    loop over the event dicts. Must give the same :class:`Trace` as :func:`parse_trace`."""
    with _gc_paused():
        builder = _ColumnBuilder(vectorised=False)
        try:
            metadata = scan_whole(raw, builder.add_batch)
        except orjson.JSONDecodeError as exc:
            raise TraceError(f"{path}: not valid JSON ({_one_line(exc)})") from None
        except ValueError as exc:
            raise NotATraceError(f"{path}: {_one_line(exc)}") from None
        return _assemble(path, metadata, [(0, builder.result())], [builder.table_delta()])


# --- parsing in parallel -------------------------------------------------------------------------

PARALLEL_MIN_BYTES = 48 << 20  # below this, starting a helper process costs more than it saves
_BYTES_PER_WORKER = 24 << 20
MAX_WORKERS = 7
MIN_CHUNK_BYTES = 1 << 20
MAX_CHUNK_BYTES = 8 << 20
_HEAD_BYTES = 1 << 20
WORKERS_ENV = "PROFREPORT_TRACE_WORKERS"


class _ParallelFailed(Exception):
    """The parallel parse cannot vouch for the document; the sequential scan decides."""


def _worker_count(size: int, requested: int | None) -> int:
    if requested is None:
        env = os.environ.get(WORKERS_ENV, "").strip()
        if env:
            try:
                requested = max(int(env), 0)
            except ValueError:
                requested = None
    if requested is None:
        if size < PARALLEL_MIN_BYTES:
            return 0
        try:
            cpus = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            cpus = os.cpu_count() or 1
        requested = min(cpus - 1, MAX_WORKERS, size // _BYTES_PER_WORKER - 1)
    if not sys.executable:
        return 0
    return max(requested, 0)


def _parse_parallel(source: Source, n_workers: int, path: str) -> Trace:
    """Parse in chunks, here and in ``n_workers`` helper processes (started first: their start-up
    overlaps the planning and this process's first chunk)."""
    workers: list[ChunkWorker] = []
    try:
        for _ in range(n_workers):
            workers.append(ChunkWorker(source, CHUNK_SLICE_BYTES))
    except OSError:
        pass  # no helper process: this one parses alone
    try:
        with _gc_paused():
            return _run_parallel(source, workers, path)
    except (ScanFallback, orjson.JSONDecodeError, ValueError) as exc:
        raise _ParallelFailed(str(exc)) from None
    finally:
        for worker in workers:
            worker.abort()


def _run_parallel(source: Source, workers: list[ChunkWorker], path: str) -> Trace:
    head = source.read(0, _HEAD_BYTES)
    array_open, prefix = locate_events(head)
    if head[array_open + 1 :].lstrip(b" \t\r\n")[:1] in (b"]", b""):
        raise ScanFallback("no events, or a tiny document")
    chunks = plan_chunks(
        source, array_open + 1, len(workers) + 1, MIN_CHUNK_BYTES, MAX_CHUNK_BYTES
    )
    parser = ChunkParser(CHUNK_SLICE_BYTES)
    buffer = [bytearray()]

    def parse_here(chunk: Chunk) -> dict:
        buf, base = source.read_chunk(chunk, buffer[0])
        buffer[0] = buf
        size = (source.size if chunk.end is None else chunk.end + 1) - base
        return parser.parse(buf, size, base, chunk)

    results = run_chunks(chunks, parse_here, workers)
    close = results[-1][1]["close"]
    metadata = metadata_around(prefix, source.read(close + 1, source.size))
    tables: list[list] = [[] for _ in range(len(workers) + 1)]
    for party, result in sorted(results, key=lambda r: r[1]["seq"]):
        tables[party].append(result["table"])
    return _assemble(path, metadata, results, [_joined(t) for t in tables])


def _joined(deltas: list) -> tuple[list, list, list]:
    """One party's table: its deltas, in the order it produced them."""
    strings: list = []
    lanes: list = []
    fields: list = []
    for s, la, f in deltas:
        strings += s
        lanes += la
        fields += f
    return strings, lanes, fields


class ChunkParser:
    """Parses chunks in one process, interning signatures across all the chunks it sees.

    Each result carries the chunk's columns (signatures in this parser's numbering), its rare
    args, and the table entries this parser added since its previous result.
    """

    def __init__(self, slice_bytes: int) -> None:
        self.builder = _ColumnBuilder()
        self.slice_bytes = slice_bytes
        self.seq = 0

    def parse(self, buf: bytearray, size: int, base: int, chunk: Chunk) -> dict:
        end = None if chunk.end is None else chunk.end - base
        close = scan_events(
            buf, chunk.start - base, end, self.builder.add_batch, self.slice_bytes, size
        )
        out = self.builder.result()
        out["close"] = close + base if chunk.end is None else None
        out["table"] = self.builder.table_delta()
        out["seq"] = self.seq = self.seq + 1
        return out


def _assemble(path: str, metadata: dict, results: list[tuple[int, dict]], tables: list) -> Trace:
    """Join per-chunk columns, in chunk order, into one :class:`Trace`.

    Signatures are renumbered into one table, registered in order of first appearance in the
    document, so the string and lane tables come out exactly as a one-pass scan would build them.
    """
    strings: dict[str, int] = {"": 0}
    lanes: dict[tuple, int] = {}
    fields: list[tuple[int, int, int, int]] = []
    maps = [np.full(len(t[2]), -1, dtype=np.int64) for t in tables]
    pieces: dict[str, list[np.ndarray]] = {k: [] for k in _COLUMNS}
    extra: dict[int, dict] = {}
    rows = 0
    for party, result in results:
        p_strings, p_lanes, p_fields = tables[party]
        gmap = maps[party]
        sig = result["sig"]
        new = gmap[sig] < 0
        if new.any():
            local, first = np.unique(sig[new], return_index=True)
            for s in local[np.argsort(first)].tolist():
                code, cat, name, lane = p_fields[s]
                cat_id = strings.setdefault(p_strings[cat], len(strings))
                name_id = strings.setdefault(p_strings[name], len(strings))
                lane_id = lanes.setdefault(p_lanes[lane], len(lanes))
                gmap[s] = len(fields)
                fields.append((code, cat_id, name_id, lane_id))
        pieces["sig"].append(gmap[sig])
        for key in _COLUMNS[1:]:
            pieces[key].append(result[key])
        for row, args in result["extra"].items():
            extra[rows + row] = args
        rows += int(sig.shape[0])

    def col(key: str) -> np.ndarray:
        parts = pieces[key]
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    sig = col("sig")
    table = np.array(fields, dtype=np.int64).reshape(-1, 4)
    return Trace(
        path=path,
        metadata=metadata,
        strings=list(strings),
        lanes=list(lanes),
        ph=table[sig, 0].astype(np.uint8),
        cat=table[sig, 1].astype(np.int32),
        name=table[sig, 2].astype(np.int32),
        lane=table[sig, 3].astype(np.int32),
        ts_ns=col("ts"),
        dur_ns=col("dur"),
        correlation=col("corr"),
        external_id=col("ext"),
        flow_id=col("flow"),
        nbytes=col("nbytes"),
        extra_args=extra,
    )


class _gc_paused:
    """Millions of short-lived dicts would trigger the cyclic GC over and over (it costs more than
    the parse itself); none of them can form a cycle, so collection waits until the end."""

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc) -> None:
        if self.was_enabled:
            gc.enable()


def _read_error(path: str, exc: OSError) -> TraceError:
    if isinstance(exc, FileNotFoundError):
        return TraceError(f"{path}: no such file")
    if isinstance(exc, IsADirectoryError):
        return TraceError(f"{path}: is a directory, not a trace file")
    return TraceError(f"{path}: cannot read ({exc.strerror or exc})")


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise _read_error(path, exc) from None


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def _as_int(value) -> int:
    """Integer ids and sizes as traces write them: ints, floats, decimal or hex strings."""
    if type(value) is int:
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return MISSING
    return MISSING


def _to_ns(us: np.ndarray) -> np.ndarray:
    """Microseconds (float, NaN = missing) to exact integer nanoseconds (-1 = missing).

    The whole and fractional parts are scaled separately: 1.7e15 us * 1000 exceeds 2**53.
    """
    missing = ~np.isfinite(us)
    us = np.where(missing, 0.0, us)
    whole = np.floor(us)
    ns = whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000.0).astype(np.int64)
    ns[missing] = MISSING
    return ns


def _float_column(values) -> np.ndarray:
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([_float_or_nan(v) for v in values], dtype=np.float64)


def _int_column(values) -> np.ndarray:
    """Integer column; anything out of int64 range becomes -1."""
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        return np.array([v if -(2**63) <= v < 2**63 else MISSING for v in values], np.int64)


def _exact_ints(values: list) -> np.ndarray:
    """Raw JSON values as an int64 column with :func:`_as_int` semantics, fast when all are ints."""
    types = set(map(type, values))
    if not types <= {int}:
        values = [v if type(v) is int else _as_int(v) for v in values]
    return _int_column(values)


def _float_or_nan(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


_PHASE_CODES = {p: ord(p[0]) for p in ("X", "B", "E", "i", "I", "C", "s", "t", "f", "b", "e", "n")}


def _normalised(ev: dict) -> dict:
    """Copy of an event whose ph/cat/name/pid/tid are made hashable text where they are not."""
    out = dict(ev)
    for key in ("ph", "cat", "name", "pid", "tid"):
        value = out.get(key)
        if value is not None and not isinstance(value, str | int | float):
            out[key] = orjson.dumps(value).decode()
    if not isinstance(out.get("args"), dict):
        out.pop("args", None)
    return out


_COLUMNS = ("sig", "ts", "dur", "corr", "ext", "flow", "nbytes")
_DROPPED = -1
_UNSEEN = -2
_SIZE_FALLBACK = 1  # flag: take args.size when args.bytes is missing (HIP memcpy API calls)
_KEEP_ARGS = 2  # flag: keep the whole args dict (rare records)
_MAY_RECORD = 4  # flag: a cpu_op, which may be an Inductor kernel record (args.kernel_backend)
_FLOW = 8  # flag: a flow event (ph s/t/f), whose "id" is kept
_FLOW_PHASES = frozenset({"s", "t", "f"})
_NAN = float("nan")
_NO_ARGS: dict = {}
_EXACT_IN_FLOAT = float(2**53)


def _text(value) -> str:
    if value is None:
        return ""
    return value if type(value) is str else str(value)


def _pick(items: list, rows: np.ndarray) -> list:
    """``[items[i] for i in rows]``, with the loop in C."""
    if rows.size == 1:
        return [items[int(rows[0])]]
    return list(itemgetter(*rows.tolist())(items)) if rows.size else []


class _ColumnBuilder:
    """Turns batches of event dicts into numpy column pieces, keeping only the needed fields.

    Events are keyed by their signature ``(ph, cat, name, pid, tid)``: one dict lookup per event
    instead of four, and one int32 column that expands into phase/category/name/lane at the end.

    A batch is read field by field with the loops in C (``map(dict.get, ...)`` straight into
    numpy); a batch with anything odd in it (an event that is not a dict, unhashable or null
    fields, non-dict args) is read again by :meth:`_collect`, one event at a time.
    """

    def __init__(self, vectorised: bool = True) -> None:
        self.vectorised = vectorised
        self.strings: dict[str, int] = {"": 0}
        self.lanes: dict[tuple, int] = {}
        self.sigs: dict[tuple, int] = {}
        self.sig_fields: list[tuple[int, int, int, int]] = []  # ph code, cat, name, lane
        self.sig_flags: list[int] = []
        self._flag_table = np.zeros(0, dtype=np.int64)
        self._sent = (0, 0, 0)  # table entries already reported by table_delta (strings, ...)
        self._string_list: list[str] = [""]
        self._lane_list: list[tuple] = []
        self.pieces: dict[str, list[np.ndarray]] = {k: [] for k in _COLUMNS}
        self.extra_args: dict[int, dict] = {}
        self.rows = 0

    def add_batch(self, events: list) -> None:
        if self.vectorised:
            try:
                columns = self._read_columns(events)
            except (TypeError, ValueError, OverflowError, AttributeError):
                columns = None  # something odd: the event-by-event loop copes with it
            if columns is not None:
                self._store_columns(events, *columns)
                return
        rows: list[tuple] = []
        self._collect(events, rows)
        self._store(rows)

    def result(self) -> dict:
        """The columns gathered since the last call (ts/dur in integer ns), and the rare args."""
        out: dict = {}
        for key in _COLUMNS:
            parts = self.pieces[key]
            dtype = np.int32 if key == "sig" else np.float64 if key in ("ts", "dur") else np.int64
            out[key] = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
            parts.clear()
        out["ts"] = _to_ns(out["ts"])
        dur_ns = _to_ns(out["dur"])
        dur_ns[dur_ns < 0] = MISSING
        out["dur"] = dur_ns
        out["extra"], self.extra_args = self.extra_args, {}
        self.rows = 0
        return out

    def table_delta(self) -> tuple[list, list, list]:
        """Strings, lanes and signature fields added since the previous call."""
        s0, l0, f0 = self._sent
        self._sent = (len(self._string_list), len(self._lane_list), len(self.sig_fields))
        return (
            self._string_list[s0:],
            self._lane_list[l0:],
            self.sig_fields[f0:],
        )

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

    def _read_columns(self, events: list) -> tuple:
        """Every field of every event of the batch; raises on anything odd, changing nothing."""
        n = len(events)
        get = dict.get
        keys = zip(
            map(get, events, repeat("ph")),
            map(get, events, repeat("cat")),
            map(get, events, repeat("name")),
            map(get, events, repeat("pid")),
            map(get, events, repeat("tid")),
            strict=True,
        )
        sig = np.fromiter(map(self.sigs.get, keys, repeat(_UNSEEN)), np.int32, n)
        ts = np.fromiter(map(get, events, repeat("ts"), repeat(_NAN)), np.float64, n)
        dur = np.fromiter(map(get, events, repeat("dur"), repeat(_NAN)), np.float64, n)
        args = list(map(get, events, repeat("args"), repeat(_NO_ARGS)))
        corr = list(map(get, args, repeat("correlation"), repeat(-1)))
        ext = list(map(get, args, repeat("External id"), repeat(-1)))
        nbytes = list(map(get, args, repeat("bytes")))
        flow = list(map(get, events, repeat("id"), repeat(-1)))
        return sig, ts, dur, args, corr, ext, nbytes, flow

    def _store_columns(self, events, sig, ts, dur, args, corr, ext, nbytes, flow) -> None:
        for i in np.flatnonzero(sig == _UNSEEN).tolist():
            ev = events[i]
            key = (ev.get("ph"), ev.get("cat"), ev.get("name"), ev.get("pid"), ev.get("tid"))
            found = self.sigs.get(key)
            sig[i] = self._new_sig(key) if found is None else found
        if self._flag_table.shape[0] != len(self.sig_flags):
            self._flag_table = np.array(self.sig_flags, dtype=np.int64)
        keep = sig >= 0
        flags = np.where(keep, self._flag_table[np.maximum(sig, 0)], 0)
        corr_col = _exact_ints(corr)
        ext_col = _exact_ints(ext)
        flow_col = np.where(flags & _FLOW != 0, _exact_ints(flow), MISSING)
        nbytes_col, no_bytes = _bytes_column(nbytes)
        size_rows = np.flatnonzero(no_bytes & (flags & _SIZE_FALLBACK != 0))
        if size_rows.size:
            sizes = list(map(dict.get, _pick(args, size_rows), repeat("size"), repeat(-1)))
            nbytes_col[size_rows] = _exact_ints(sizes)
        self._keep_rare_args(args, flags, keep)
        all_kept = bool(keep.all())
        columns = (sig, ts, dur, corr_col, ext_col, flow_col, nbytes_col)
        for key, values in zip(_COLUMNS, columns, strict=True):
            self.pieces[key].append(values if all_kept else values[keep])
        self.rows += int(np.count_nonzero(keep))

    def _keep_rare_args(self, args: list, flags: np.ndarray, keep: np.ndarray) -> None:
        """Rows whose whole args are kept: rare categories, and Inductor kernel records."""
        wanted = np.flatnonzero(flags & _KEEP_ARGS)
        maybe = np.flatnonzero(flags & _MAY_RECORD)
        if maybe.size:
            has = np.fromiter(
                map(dict.__contains__, _pick(args, maybe), repeat("kernel_backend")),
                bool,
                maybe.size,
            )
            wanted = np.union1d(wanted, maybe[has]) if has.any() else wanted
        if not wanted.size:
            return
        kept_before = np.cumsum(keep) - 1
        for i in wanted.tolist():
            if args[i]:
                self.extra_args[self.rows + int(kept_before[i])] = args[i]

    def _collect(self, events: list, rows: list[tuple], normalised: bool = False) -> None:
        keep_row = rows.append
        sigs_get, flags_of, new_sig = self.sigs.get, self.sig_flags, self._new_sig
        extra = self.extra_args
        first_row = self.rows
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
                if type(ev) is dict and not normalised:  # retried in place: rows keep event order
                    self._collect([_normalised(ev)], rows, normalised=True)
                continue
            keep_row((sig, get("ts"), get("dur"), corr, ext, fid, nbytes))

    def _store(self, rows: list[tuple]) -> None:
        if not rows:
            return
        columns = list(zip(*rows, strict=True))
        p = self.pieces
        p["sig"].append(np.array(columns[0], dtype=np.int32))
        p["ts"].append(_float_column(columns[1]))
        p["dur"].append(_float_column(columns[2]))
        for key, values in zip(("corr", "ext", "flow", "nbytes"), columns[3:], strict=True):
            p[key].append(_int_column(values))
        self.rows += len(rows)


def _bytes_column(values: list) -> tuple[np.ndarray, np.ndarray]:
    """``args.bytes`` as int64 (-1 when absent) and where it was absent (None)."""
    n = len(values)
    types = set(map(type, values))
    if types <= {type(None)}:
        return np.full(n, MISSING, dtype=np.int64), np.ones(n, dtype=bool)
    if types == {int}:
        return _int_column(values), np.zeros(n, dtype=bool)
    if types == {int, type(None)}:
        as_float = np.array(values, dtype=np.float64)  # None -> NaN
        absent = np.isnan(as_float)
        if not (np.abs(as_float[~absent]) >= _EXACT_IN_FLOAT).any():
            return np.where(absent, MISSING, as_float).astype(np.int64), absent
    absent = np.fromiter(map(is_, values, repeat(None)), bool, n)
    return _exact_ints([MISSING if v is None else v for v in values]), absent
