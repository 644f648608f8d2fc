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
import zlib
from dataclasses import dataclass, field

import numpy as np
import orjson

from profreport.analysis._scan import ScanFallback, scan_sliced, scan_whole

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


def load_trace(path: str | os.PathLike) -> Trace:
    """Read a trace file (plain or gzip, detected by magic bytes) into a :class:`Trace`."""
    path_str = os.fspath(path)
    raw = _read_bytes(path_str)
    if raw[:2] == GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceError(f"{path_str}: corrupt gzip data ({exc})") from None
    return parse_trace(raw, path_str)


def parse_trace(raw: bytes, path: str = "<memory>") -> Trace:
    """Parse trace JSON bytes into a :class:`Trace`; :class:`TraceError` if it is not one."""
    # Millions of short-lived dicts would trigger the cyclic GC over and over (it costs more than
    # the parse itself); none of them can form a cycle, so collection waits until the end.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        builder = _ColumnBuilder()
        try:
            metadata = scan_sliced(raw, builder.add_batch)
        except ScanFallback:
            builder = _ColumnBuilder()
            metadata = scan_whole(raw, builder.add_batch)
    except orjson.JSONDecodeError as exc:
        raise TraceError(f"{path}: not valid JSON ({_one_line(exc)})") from None
    except ValueError as exc:
        raise NotATraceError(f"{path}: {_one_line(exc)}") from None
    finally:
        if gc_was_enabled:
            gc.enable()
    return builder.finish(path, metadata)


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory, not a trace file") from None
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None


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
_ROW_DTYPE = np.dtype(
    [("sig", "i4"), ("ts", "f8"), ("dur", "f8")]
    + [(k, "i8") for k in ("corr", "ext", "flow", "nbytes")]
)
_DROPPED = -1
_SIZE_FALLBACK = 1  # flag: take args.size when args.bytes is missing (HIP memcpy API calls)
_KEEP_ARGS = 2  # flag: keep the whole args dict (rare records)
_MAY_RECORD = 4  # flag: a cpu_op, which may be an Inductor kernel record (args.kernel_backend)
_FLOW = 8  # flag: a flow event (ph s/t/f), whose "id" is kept
_FLOW_PHASES = frozenset({"s", "t", "f"})


def _text(value) -> str:
    if value is None:
        return ""
    return value if type(value) is str else str(value)


class _ColumnBuilder:
    """Turns batches of event dicts into numpy column pieces, keeping only the needed fields.

    Events are keyed by their signature ``(ph, cat, name, pid, tid)``: one dict lookup per event
    instead of four, and one int32 column that expands into phase/category/name/lane at the end.
    """

    def __init__(self) -> None:
        self.strings: dict[str, int] = {"": 0}
        self.lanes: dict[tuple, int] = {}
        self.sigs: dict[tuple, int] = {}
        self.sig_fields: list[tuple[int, int, int, int]] = []  # ph code, cat, name, lane
        self.sig_flags: list[int] = []
        self.pieces: dict[str, list[np.ndarray]] = {k: [] for k in _COLUMNS}
        self.extra_args: dict[int, dict] = {}
        self.rows = 0

    def add_batch(self, events: list) -> None:
        rows: list[tuple] = []
        odd: list[dict] = []
        self._collect(events, rows, odd)
        if odd:  # events with unhashable fields, retried once with those fields as text
            self._collect([_normalised(ev) for ev in odd], rows, [])
        self.rows += len(rows)
        self._store(rows)

    def _new_sig(self, key: tuple) -> int:
        ph, cat, name, pid, tid = key
        if ph == "M" or cat in _DROPPED_CATS:
            self.sigs[key] = _DROPPED
            return _DROPPED
        cat, name = _text(cat), _text(name)
        strings, lanes = self.strings, self.lanes
        cat_id = strings.setdefault(cat, len(strings))
        name_id = strings.setdefault(name, len(strings))
        lane = lanes.setdefault((pid, tid), len(lanes))
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

    def _collect(self, events: list, rows: list[tuple], odd: list[dict]) -> None:
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
                if type(ev) is dict:
                    odd.append(ev)
                continue
            keep_row((sig, get("ts"), get("dur"), corr, ext, fid, nbytes))

    def _store(self, rows: list[tuple]) -> None:
        if not rows:
            return
        try:  # one C-level conversion; None in ts/dur becomes NaN
            packed = np.array(rows, dtype=_ROW_DTYPE)
            sig, ts, dur = packed["sig"], packed["ts"], packed["dur"]
            ints = [packed[k] for k in ("corr", "ext", "flow", "nbytes")]
        except (TypeError, ValueError, OverflowError):  # odd values: column by column
            columns = list(zip(*rows, strict=True))
            sig = np.array(columns[0], dtype=np.int32)
            ts, dur = _float_column(columns[1]), _float_column(columns[2])
            ints = [_int_column(values) for values in columns[3:]]
        p = self.pieces
        p["sig"].append(np.ascontiguousarray(sig))
        p["ts"].append(_to_ns(ts))
        dur_ns = _to_ns(dur)
        dur_ns[dur_ns < 0] = MISSING
        p["dur"].append(dur_ns)
        for key, values in zip(("corr", "ext", "flow", "nbytes"), ints, strict=True):
            p[key].append(np.ascontiguousarray(values))

    def finish(self, path: str, metadata: dict) -> Trace:
        def col(key: str, dtype) -> np.ndarray:
            parts = self.pieces[key]
            return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

        sig = col("sig", np.int32)
        table = np.array(self.sig_fields, dtype=np.int64).reshape(-1, 4)
        return Trace(
            path=path,
            metadata=metadata,
            strings=list(self.strings),
            lanes=list(self.lanes),
            ph=table[sig, 0].astype(np.uint8),
            cat=table[sig, 1].astype(np.int32),
            name=table[sig, 2].astype(np.int32),
            lane=table[sig, 3].astype(np.int32),
            ts_ns=col("ts", np.int64),
            dur_ns=col("dur", np.int64),
            correlation=col("corr", np.int64),
            external_id=col("ext", np.int64),
            flow_id=col("flow", np.int64),
            nbytes=col("nbytes", np.int64),
            extra_args=self.extra_args,
        )
