"""Inflate gzip data a piece at a time, and never past a limit.

A gzip trailer gives the inflated size only modulo 4 GiB, and a damaged or hostile file can
claim anything, so the only safe bound is the one counted while inflating: a small file that
expands to more than the memory left (a "gzip bomb") is stopped once the limit is passed, not
after the machine has run out of memory.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator

PIECE_BYTES = 8 << 20  # the most one zlib call may produce (~1 MiB of compressed trace JSON)
_GZIP_WBITS = 31  # zlib: gzip header and trailer (CRC and length are checked)


class CorruptGzip(Exception):
    """The data is not one or more complete gzip members; the message says why, in one line."""


class InflatesTooFar(Exception):
    """The data inflates to more than the limit; ``produced`` bytes had come out when it stopped."""

    def __init__(self, produced: int) -> None:
        super().__init__(f"inflates to more than {produced} bytes")
        self.produced = produced


def inflate(read: Callable[[], bytes], limit: int | None = None) -> Iterator[bytes]:
    """Yield the inflated bytes of gzip data that ``read`` returns a block at a time (``b""`` at
    the end). Members may follow one another, with zero bytes between them, as
    :func:`gzip.decompress` allows. :class:`InflatesTooFar` as soon as more than ``limit``
    bytes would have been produced; :class:`CorruptGzip` for anything else that is wrong.
    """
    member = zlib.decompressobj(wbits=_GZIP_WBITS)
    pending = b""
    produced = 0
    while True:
        if not pending:
            pending = read()
            if not pending:
                if not member.eof:
                    raise CorruptGzip("compressed data ended before the end of a gzip member")
                return
        if member.eof:  # between members: padding, then the next one
            pending = pending.lstrip(b"\0")
            if not pending:
                continue
            member = zlib.decompressobj(wbits=_GZIP_WBITS)
        try:
            piece = member.decompress(pending, PIECE_BYTES)
        except zlib.error as exc:
            raise CorruptGzip(str(exc)) from None
        pending = member.unused_data if member.eof else member.unconsumed_tail
        produced += len(piece)
        if limit is not None and produced > limit:
            raise InflatesTooFar(produced)
        if piece:
            yield piece
