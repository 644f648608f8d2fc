"""The columnar form of a trace: a handful of numpy columns plus interned string tables.

Times are integer nanoseconds so that nesting tests are exact even for microsecond timestamps
around 1e15. `assemble` joins the row columns of one or more parsed chunks into one `Trace`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from profreport.traceio.errors import NotATraceError
from profreport.traceio.rows import COLUMNS, MISSING, ChunkResult, Event, Lane, Metadata, TableDelta


@dataclass(eq=False)
class Trace:
    """Columnar view of one trace file: row ``i`` of every column is event ``i``.

    ``name`` and ``cat`` index into ``strings``; ``lane`` indexes into ``lanes``, the distinct
    ``(pid, tid)`` pairs (raw values: ints or strings). Missing integers are ``-1``.
    """

    path: str
    metadata: Metadata
    strings: list[str]
    lanes: list[Lane]
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
    extra_args: dict[int, Event] = field(default_factory=dict)  # row -> args, for rare records

    def __len__(self) -> int:
        return int(self.ph.shape[0])

    def string_id(self, text: str) -> int:
        """Index of ``text`` in the string table, or -1 when no event uses it."""
        try:
            return self.strings.index(text)
        except ValueError:
            return -1

    def string_table_mask(self, predicate: Callable[[str], object]) -> np.ndarray:
        """Boolean lookup table over ``strings``: ``table[trace.cat]`` gives a per-event mask."""
        return np.fromiter((bool(predicate(s)) for s in self.strings), bool, len(self.strings))


def assemble(
    path: str,
    metadata: Metadata,
    results: list[tuple[int, ChunkResult]],
    tables: list[TableDelta],
) -> Trace:
    """Join per-chunk columns, in chunk order, into one :class:`Trace`; an event list with items
    but no event object among them is :class:`NotATraceError` (an empty one is an empty trace).

    Signatures are renumbered into one table, registered in order of first appearance in the
    document, so the string and lane tables come out exactly as a one-pass scan builds them.
    """
    events = sum(result["events"] for _, result in results)
    if events and sum(result["non_objects"] for _, result in results) == events:
        values = f"{events:,} value{'s' if events > 1 else ''}"
        raise NotATraceError(
            f"{path}: not a profiler trace: its event list holds {values} and no event object"
        )
    strings: dict[str, int] = {"": 0}
    lanes: dict[Lane, int] = {}
    fields: list[tuple[int, int, int, int]] = []
    maps = [np.full(len(t[2]), -1, dtype=np.int64) for t in tables]
    pieces: dict[str, list[np.ndarray]] = {k: [] for k in COLUMNS}
    extra: dict[int, Event] = {}
    rows = 0
    for party, result in results:
        p_strings, p_lanes, p_fields = tables[party]
        gmap = maps[party]
        sig = np.frombuffer(result["sig"], dtype=np.int32)
        global_sig = gmap[sig]
        new = global_sig < 0
        if new.any():
            local, first = np.unique(sig[new], return_index=True)
            for s in local[np.argsort(first)].tolist():
                code, cat, name, lane = p_fields[s]
                cat_id = strings.setdefault(p_strings[cat], len(strings))
                name_id = strings.setdefault(p_strings[name], len(strings))
                lane_id = lanes.setdefault(p_lanes[lane], len(lanes))
                gmap[s] = len(fields)
                fields.append((code, cat_id, name_id, lane_id))
            global_sig = gmap[sig]
        pieces["sig"].append(global_sig)
        for key, code in COLUMNS.items():
            if key != "sig":
                pieces[key].append(np.frombuffer(result[key], dtype=_DTYPES[code]))
        for row, args in result["extra"].items():
            extra[rows + row] = args
        rows += int(sig.shape[0])

    def col(key: str) -> np.ndarray:
        parts = pieces[key]
        dtype = np.int64 if key == "sig" else _DTYPES[COLUMNS[key]]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    sig = col("sig")
    codes, cats, names, lane_ids = (
        (list(f) for f in zip(*fields, strict=True)) if fields else ([],) * 4
    )
    dur_ns = _to_ns(col("dur"))
    dur_ns[dur_ns < 0] = MISSING
    return Trace(
        path=path,
        metadata=metadata,
        strings=list(strings),
        lanes=list(lanes),
        ph=np.array(codes, dtype=np.uint8)[sig],
        cat=np.array(cats, dtype=np.int32)[sig],
        name=np.array(names, dtype=np.int32)[sig],
        lane=np.array(lane_ids, dtype=np.int32)[sig],
        ts_ns=_to_ns(col("ts")),
        dur_ns=dur_ns,
        correlation=col("corr"),
        external_id=col("ext"),
        flow_id=col("flow"),
        nbytes=col("nbytes"),
        extra_args=extra,
    )


_DTYPES: dict[str, np.dtype] = {code: np.dtype(code) for code in ("i", "d", "q")}


_MAX_US = 9.2e15  # 9.2e18 ns < 2**63


def _to_ns(us: np.ndarray) -> np.ndarray:
    """Microseconds (float, NaN = missing) to exact integer nanoseconds (-1 = missing).

    The whole and fractional parts are scaled separately: 1.7e15 us * 1000 exceeds 2**53.
    Times whose nanoseconds do not fit in int64 (beyond ~292 years) count as missing.
    ``us`` is used as scratch space.
    """
    missing = us < _MAX_US  # NaN compares False: missing either way
    missing &= us > -_MAX_US
    np.logical_not(missing, out=missing)
    if missing.any():
        us[missing] = 0.0
    if (us < 0).any():  # rare: floor and truncation differ
        whole = np.floor(us)
        ns = whole.astype(np.int64)
        us -= whole
    else:  # one fresh array less (each costs page faults at this size)
        ns = us.astype(np.int64)
        us -= ns
    ns *= 1000
    if us.any():  # fractions of a microsecond
        us *= 1000.0
        ns += np.rint(us, out=us).astype(np.int64)
    ns[missing] = MISSING
    result: np.ndarray = ns
    return result
