"""Parse trace JSON in slices of the ``traceEvents`` array, so that only one slice of event dicts
is alive at a time (peak memory ~ file size + one slice + the columns, not file size x 8).

The array is cut at ``}`` ``,`` ``{`` sequences; a cut that falls inside an event (or inside a
string) leaves an unbalanced slice, which orjson rejects, and the next candidate is tried. So
every accepted slice is a run of whole events. Anything unexpected raises :class:`ScanFallback`
and the caller parses the document whole instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import orjson

SLICE_BYTES = 1 << 20  # small slices reuse freed memory: measured faster than 8-64 MiB
_MAX_BAD_CUTS = 64
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_BETWEEN_EVENTS = re.compile(rb"\}\s*,\s*\{")
_LAST_EVENT_END = re.compile(rb"\}\s*\]")
_WHITESPACE = b" \t\r\n"


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


def scan_sliced(raw: bytes, on_batch: Callable[[list], None], slice_bytes: int = SLICE_BYTES):
    """Feed the events to ``on_batch`` slice by slice; returns the top-level metadata."""
    head = raw.lstrip(_WHITESPACE)[:1]
    if head == b"[":
        array_open = raw.index(b"[")
        prefix = None
    elif head == b"{":
        m = _EVENTS_KEY.search(raw)
        if m is None:
            raise ScanFallback("no traceEvents array")
        array_open = m.end() - 1
        prefix = raw[: m.start()]
    else:
        raise ScanFallback("not a JSON object or array")
    pos = array_open + 1
    rest = raw[pos : pos + 64].lstrip(_WHITESPACE)
    if rest[:1] == b"]":
        array_close = raw.index(b"]", pos)
    else:
        pos = _feed_full_slices(raw, pos, on_batch, slice_bytes)
        array_close = _feed_last_slice(raw, pos, on_batch)
    suffix = raw[array_close + 1 :]
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


def _feed_full_slices(raw: bytes, pos: int, on_batch, slice_bytes: int) -> int:
    """Parse slices of about ``slice_bytes`` while a cut between events exists past the target."""
    while True:
        target = pos + slice_bytes
        if target >= len(raw):
            return pos
        cut = _BETWEEN_EVENTS.search(raw, target)
        bad = 0
        while cut is not None:
            try:
                batch = orjson.loads(b"[" + raw[pos : cut.start() + 1] + b"]")
            except orjson.JSONDecodeError:
                bad += 1
                if bad > _MAX_BAD_CUTS:
                    raise ScanFallback("no clean cut between events") from None
                cut = _BETWEEN_EVENTS.search(raw, cut.start() + 1)
                continue
            on_batch(batch)
            pos = cut.end() - 1  # the "{" of the next event
            break
        else:
            return pos


def _feed_last_slice(raw: bytes, pos: int, on_batch) -> int:
    """Parse the final slice, up to the ``]`` that closes the array; returns that position."""
    bad = 0
    for end in _LAST_EVENT_END.finditer(raw, pos):
        try:
            batch = orjson.loads(b"[" + raw[pos : end.start() + 1] + b"]")
        except orjson.JSONDecodeError:
            bad += 1
            if bad > _MAX_BAD_CUTS:
                break
            continue
        on_batch(batch)
        return end.end() - 1
    raise ScanFallback("cannot find the end of the event array")
