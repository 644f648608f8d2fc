"""The ``traceEvents`` array of a trace JSON, parsed a slice at a time; numpy-free, so a helper
process starts in a few tens of milliseconds.

**Slices.** The ``traceEvents`` array is parsed a slice at a time, so that only one slice of event
dicts is alive at once (peak memory ~ one slice + the columns, not file size x 8). The array is
cut at ``}`` ``,`` ``{`` sequences; a cut that falls inside an event (or inside a string) leaves
an unbalanced slice, which orjson rejects, and the next candidate is tried, so every accepted
slice is a run of whole events. Anything unexpected raises :class:`ScanFallback` and the caller
parses the document whole instead.
"""

from __future__ import annotations

import re

import orjson

from profreport.traceio.rows import Batch, Event, Metadata

SLICE_BYTES = 1 << 20  # small slices reuse freed memory: measured faster than 8-64 MiB
_MAX_BAD_CUTS = 64
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")
_LAST_EVENT_END = re.compile(rb"\}\s*\]")
_WHITESPACE = b" \t\r\n"
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


def scan_whole(raw: bytes | bytearray, on_batch: Batch) -> Metadata:
    """Parse the whole document at once; returns the top-level metadata (all but traceEvents)."""
    doc = orjson.loads(raw)
    if isinstance(doc, list):  # Chrome "JSON array format": just the events
        on_batch(doc)
        return {}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError(f"not a profiler trace: {EXPECTED}, found {_shape(doc)}")
    on_batch(doc.pop("traceEvents"))
    metadata: Metadata = doc
    return metadata


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


def metadata_around(prefix: bytes | bytearray | None, suffix: bytes | bytearray) -> Metadata:
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
    metadata: Metadata = doc
    return metadata


def scan_sliced(
    raw: bytes | bytearray, on_batch: Batch, slice_bytes: int = SLICE_BYTES
) -> Metadata:
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
    on_batch: Batch,
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


def _load_events(buf: bytes | bytearray, start: int, stop: int) -> list[Event]:
    """Parse ``buf[start:stop]`` (a run of comma-separated values) as a JSON array.

    In a bytearray with a byte to spare on each side, the neighbours are swapped for brackets
    for the duration of the parse: no copy of the slice is made.
    """
    if isinstance(buf, bytearray) and start > 0 and stop < len(buf):
        before, after = buf[start - 1], buf[stop]
        buf[start - 1], buf[stop] = 0x5B, 0x5D  # "[", "]"
        try:
            with memoryview(buf) as view:
                events: list[Event] = orjson.loads(view[start - 1 : stop + 1])
                return events
        finally:
            buf[start - 1], buf[stop] = before, after
    whole: list[Event] = orjson.loads(b"[" + buf[start:stop] + b"]")
    return whole


def _feed_last_slice(buf: bytes | bytearray, pos: int, size: int, on_batch: Batch) -> int:
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
