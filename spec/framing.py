"""Length-prefixed framing: every Kafka request and response is an int32 size followed by that many bytes.

A size larger than the configured maximum (default 100 MiB, Kafka's ``socket.request.max.bytes``) is
refused with :class:`FrameTooLargeError` before any buffer of that size is allocated.
"""

from __future__ import annotations

import asyncio
import struct

from kraft_tck.spec.errors import DecodeError, FrameTooLargeError

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
_SIZE = struct.Struct(">i")


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix ``payload`` with its int32 length."""
    return _SIZE.pack(len(payload)) + bytes(payload)


def _check_size(size: int, max_bytes: int, offset: int) -> None:
    if size < 0:
        raise DecodeError("frame length", offset, f"negative frame length {size}")
    if size > max_bytes:
        raise FrameTooLargeError(size, max_bytes, offset)


def split_frame(
    buf: bytes | bytearray | memoryview, pos: int = 0, max_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> tuple[bytes, int] | None:
    """Take one frame from ``buf`` at ``pos``: (payload, next position), or None if it is incomplete."""
    if len(buf) - pos < 4:
        return None
    (size,) = _SIZE.unpack_from(buf, pos)
    _check_size(size, max_bytes, pos)
    end = pos + 4 + size
    if end > len(buf):
        return None
    return bytes(buf[pos + 4 : end]), end


def unframe(buf: bytes | bytearray | memoryview, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> bytes:
    """The payload of a buffer holding exactly one whole frame."""
    got = split_frame(buf, 0, max_bytes)
    if got is None:
        have = max(len(buf) - 4, 0)
        raise DecodeError("frame", 0, f"truncated frame: {have} payload bytes available")
    payload, end = got
    if end != len(buf):
        raise DecodeError("frame", end, f"{len(buf) - end} bytes after the frame")
    return payload


class FrameSplitter:
    """Cuts a byte stream into frame payloads as it arrives (for ``asyncio.Protocol`` connections, which
    get data in arbitrary pieces): :meth:`feed` the bytes, then take :meth:`next_frame` until None. A bad
    length raises when that frame is reached, after every whole frame before it has been taken."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_bytes

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data

    def next_frame(self) -> bytes | None:
        """The next whole frame's payload, or None if it has not fully arrived."""
        buf = self._buf
        if len(buf) < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, 0)
        _check_size(size, self._max, 0)
        end = 4 + size
        if end > len(buf):
            return None
        payload = bytes(buf[4:end])
        del buf[:end]
        return payload

    def end_error(self) -> DecodeError | None:
        """At end of stream: the error for a frame cut short (as :func:`read_frame` reports it), or None."""
        have = len(self._buf)
        if have == 0:
            return None
        if have < 4:
            return DecodeError("frame length", 0, f"stream ended after {have} of 4 bytes")
        (size,) = _SIZE.unpack_from(self._buf, 0)
        return DecodeError("frame", 4, f"stream ended after {have - 4} of {size} bytes")


async def read_frame(reader: asyncio.StreamReader, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> bytes | None:
    """Read one frame's payload; None on a clean end of stream before a new frame starts.

    A stream that ends inside a frame raises :class:`DecodeError`; a length over ``max_bytes`` raises
    :class:`FrameTooLargeError` without reading (or allocating) the payload.
    """
    try:
        head = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise DecodeError("frame length", 0, f"stream ended after {len(exc.partial)} of 4 bytes") from None
    (size,) = _SIZE.unpack(head)
    _check_size(size, max_bytes, 0)
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise DecodeError("frame", 4, f"stream ended after {len(exc.partial)} of {size} bytes") from None


async def write_frame(writer: asyncio.StreamWriter, framed: bytes) -> None:
    """Write an already framed message (what ``encode_request``/``encode_response`` return) and drain."""
    writer.write(framed)
    await writer.drain()
