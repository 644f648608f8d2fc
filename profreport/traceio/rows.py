"""Trace event dicts to typed row columns, keeping only the fields the analyses read.

:class:`RowBuilder` turns batches of event dicts into ``array`` columns and drops events no
analysis reads: metadata (``ph == "M"``), Python stack samples (``python_function``) and
``fwdbwd`` flows. CUDA sync records (``cuda_sync``) are kept: the time breakdown counts a stream's
sync records as HTA does. numpy-free, so a helper process (traceio.chunks) starts fast.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

import orjson

from profreport.traceio.categories import CPU_OP_CATS, RUNTIME_CATS

MISSING = -1

# A trace event as the JSON document has it (any value at all, for an item that is no object).
Event = Any
# (ph, cat, name, pid, tid) of an event, as found; (pid, tid) of its lane
Signature = tuple[object, object, object, object, object]
Lane = tuple[object, object]
# sig, ts, dur, correlation, external id, flow id, bytes: one event's row
Row = tuple[int, float, float, int, int, int, int]
# A batch's columns, rare args, counts and new table entries, as a helper process sends them
ChunkResult = dict[str, Any]
# The trace document's top-level fields other than its events, kept as the JSON they are
Metadata = dict[str, Any]
Batch = Callable[[list[Event]], None]  # what is handed each parsed slice of events
TableDelta = tuple[list[str], list[Lane], list[tuple[int, int, int, int]]]

# Categories whose events no analysis reads; dropping them while loading saves most of the
# memory on traces recorded with ``with_stack=True``.
_DROPPED_CATS = frozenset({"python_function", "fwdbwd"})
# Categories whose whole ``args`` are kept (rare events, read by the kernel-record extraction).
_ARGS_KEPT_CATS = frozenset({"cuda_profiler_range"})
_PHASE_CODES = {p: ord(p[0]) for p in ("X", "B", "E", "i", "I", "C", "s", "t", "f", "b", "e", "n")}
_FLOW_PHASES = frozenset({"s", "t", "f"})
_DROPPED = -1
_SIZE_FALLBACK = 1  # flag: take args.size when args.bytes is missing (HIP memcpy API calls)
_KEEP_ARGS = 2  # flag: keep the whole args dict (rare records)
_MAY_RECORD = 4  # flag: a cpu_op, which may be an Inductor kernel record (args.kernel_backend)
_FLOW = 8  # flag: a flow event (ph s/t/f), whose "id" is kept
_NAN = float("nan")
# Column name -> array typecode. ts/dur are float microseconds here (NaN = missing).
COLUMNS = dict(sig="i", ts="d", dur="d", corr="q", ext="q", flow="q", nbytes="q")


def _as_int(value: object) -> int:
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


def _float_or_nan(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return _NAN


def _text(value: object) -> str:
    if value is None:
        return ""
    return value if type(value) is str else str(value)


def _normalised(ev: dict[str, object]) -> dict[str, object] | None:
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
        self.lanes: dict[Lane, int] = {}
        self.sigs: dict[Signature, int] = {}
        self.sig_fields: list[tuple[int, int, int, int]] = []  # ph code, cat, name, lane
        self.sig_flags: list[int] = []
        self._string_list: list[str] = [""]
        self._lane_list: list[Lane] = []
        self._sent = (0, 0, 0)  # table entries already reported by table_delta
        self.columns: dict[str, array[Any]] = {key: array(code) for key, code in COLUMNS.items()}
        self.extra_args: dict[int, Event] = {}  # row -> args, for rare records
        self.rows = 0
        self.events = 0  # items of the event list seen, objects or not
        self.non_objects = 0  # items that are no JSON object (a number, a string, null, a list)

    def add_batch(self, events: list[Event]) -> None:
        self.events += len(events)
        rows: list[Row] = []
        self._collect(events, rows)
        self._store(rows)

    def result(self) -> ChunkResult:
        """The columns and rare args gathered since the previous call (rows count from 0)."""
        out: dict[str, Any] = dict(self.columns)
        out["extra"] = self.extra_args
        out["events"], out["non_objects"] = self.events, self.non_objects
        self.columns = {key: array(code) for key, code in COLUMNS.items()}
        self.extra_args = {}
        self.rows = self.events = self.non_objects = 0
        return out

    def table_delta(self) -> TableDelta:
        """Strings, lanes and signature fields added since the previous call."""
        s0, l0, f0 = self._sent
        self._sent = (len(self._string_list), len(self._lane_list), len(self.sig_fields))
        return self._string_list[s0:], self._lane_list[l0:], self.sig_fields[f0:]

    def _new_sig(self, key: Signature) -> int:
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
            (_SIZE_FALLBACK if cat.lower() in RUNTIME_CATS else 0)
            | (_KEEP_ARGS if cat in _ARGS_KEPT_CATS else 0)
            | (_MAY_RECORD if cat in CPU_OP_CATS else 0)
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

    def _collect(self, events: list[Event], rows: list[Row], normalised: bool = False) -> None:
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

    def _store(self, rows: list[Row]) -> None:
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
