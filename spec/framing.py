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
_read_size = _SIZE.unpack_from  # (bound once: a read's length costs no attribute lookup)


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


#: How much one socket read may take (:meth:`FrameSplitter.get_buffer`), in one buffer a connection
#: reuses. asyncio's own reads ask for 256 KiB as a fresh ``bytes`` each time, which glibc serves with
#: an mmap and munmap: 20-25 µs per read against 5-6 µs for a read into a reused buffer
#: (``bench/bench_codec.py``'s socket read table). 64 KiB: every KRaft message but a catch-up Fetch
#: response fits in one read.
READ_CHUNK = 64 * 1024


class FrameSplitter:
    """Cuts a byte stream into frame payloads as it arrives (for ``asyncio`` protocols, which get data in
    arbitrary pieces). Either :meth:`feed` it bytes (an ``asyncio.Protocol``), or let the transport read
    into :meth:`get_buffer` and report with :meth:`buffer_updated` (an ``asyncio.BufferedProtocol``, which
    reuses one read buffer); then take :meth:`next_frame` until None. A bad length raises when that frame
    is reached, after every whole frame before it has been taken."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._pos = 0  # start of the first frame not yet taken
        self._max = max_bytes
        self._chunk: memoryview | None = None  # the reused read buffer, made on the first read
        # A read that held exactly one whole frame, with nothing buffered before it (a KRaft request or answer
        # in the steady state): its payload, taken straight from the read buffer, never copied into ``_buf``.
        self._whole: bytes | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._whole is not None:
            self._spill()
        if self._pos:
            del self._buf[: self._pos]  # drop what was taken only when more comes: one move per read
            self._pos = 0
        self._buf += data

    def get_buffer(self) -> memoryview:
        """The buffer the next socket read fills (``asyncio.BufferedProtocol.get_buffer``)."""
        if self._chunk is None:
            self._chunk = memoryview(bytearray(READ_CHUNK))
        return self._chunk

    def buffer_updated(self, nbytes: int) -> None:
        """The last read put ``nbytes`` at the start of :meth:`get_buffer`'s buffer."""
        chunk = self._chunk
        assert chunk is not None, "buffer_updated before get_buffer"
        if nbytes >= 4 and not self._buf and self._whole is None:
            (size,) = _SIZE.unpack_from(chunk, 0)
            if size + 4 == nbytes and size <= self._max:  # (a bad length takes the path that reports it)
                self._whole = chunk[4:nbytes].tobytes()  # taken by the next next_frame, before anything read later
                return
        self.feed(chunk[:nbytes])

    def read(self, nbytes: int) -> bytes | None:
        """:meth:`buffer_updated`, except that a read of exactly one whole frame with nothing buffered before it
        (a KRaft request or answer in the steady state) is returned, its payload, instead of being kept for
        :meth:`next_frame`; None: take the read's frames with :meth:`next_frame` as ever. A protocol that hands
        the returned frame on at once saves the round through the splitter. (buffer_updated's test, written out in
        both: the server's reads take buffer_updated, one call each.)"""
        chunk = self._chunk
        assert chunk is not None, "buffer_updated before get_buffer"
        if nbytes >= 4 and not self._buf and self._whole is None:
            (size,) = _read_size(chunk)
            if size + 4 == nbytes and size <= self._max:  # (a bad length takes the path that reports it)
                return chunk[4:nbytes].tobytes()
        self.feed(chunk[:nbytes])
        return None

    def _spill(self) -> None:
        """Put the whole frame held aside back in front of the stream buffer (more bytes came before it was taken)."""
        whole, self._whole = self._whole, None
        assert whole is not None and not self._buf
        self._buf += _SIZE.pack(len(whole))
        self._buf += whole
        self._pos = 0

    def next_frame(self) -> bytes | None:
        """The next whole frame's payload, or None if it has not fully arrived."""
        whole = self._whole
        if whole is not None:
            self._whole = None
            return whole
        buf, pos = self._buf, self._pos
        if len(buf) - pos < 4:
            return None
        (size,) = _SIZE.unpack_from(buf, pos)
        _check_size(size, self._max, 0)
        end = pos + 4 + size
        if end > len(buf):
            return None
        with memoryview(buf) as view:
            payload = view[pos + 4 : end].tobytes()  # one copy (a bytearray slice would be a second)
        if end == len(buf):
            buf.clear()
            self._pos = 0
        else:
            self._pos = end
        return payload

    def buffered(self) -> int:
        """Bytes received and not yet taken as frames."""
        if self._whole is not None:
            return len(self._whole) + 4
        return len(self._buf) - self._pos

    def pending_size(self) -> int | None:
        """The declared payload size of the next frame once its length has arrived (unchecked), else None."""
        if self._whole is not None:
            return len(self._whole)
        if len(self._buf) - self._pos < 4:
            return None
        return int(_SIZE.unpack_from(self._buf, self._pos)[0])

    def end_error(self) -> DecodeError | None:
        """At end of stream: the error for a frame cut short (as :func:`read_frame` reports it), or None."""
        if self._whole is not None:
            self._spill()
        have = len(self._buf) - self._pos
        if have == 0:
            return None
        if have < 4:
            return DecodeError("frame length", 0, f"stream ended after {have} of 4 bytes")
        (size,) = _SIZE.unpack_from(self._buf, self._pos)
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
