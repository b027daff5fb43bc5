"""Kafka RecordBatch v2 (magic 2): encode, decode, control records.

Layout (all big-endian), as documented in Kafka's "Record Batch" protocol page::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (=2) | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
    producerId int64 | producerEpoch int16 | baseSequence int32 | recordCount int32 | records...

``batchLength`` counts the bytes after itself; the CRC32C covers ``attributes`` to the end. Each record
is a varint-length-prefixed structure of zig-zag varints (see :func:`_encode_record`).

Only uncompressed batches are supported. KRaft may compress metadata batches
(``metadata.log.compression``-style settings are off by default); a compressed batch is refused with a
DecodeError naming the codec rather than misread.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import crc32c as _crc32c
from kraft_tck.spec.codegen import compiled_maker
from kraft_tck.spec.errors import CorruptRecordError, DecodeError
from kraft_tck.spec.primitives import Buffer, read_varint, read_varlong, write_varint, write_varlong

MAGIC = 2
# baseOffset(8) + batchLength(4): the part of the header not counted by batchLength.
LOG_OVERHEAD = 12
HEADER_SIZE = 61
# Smallest record: length, attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount.
MIN_RECORD_SIZE = 7

_PREFIX = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc
_BODY = struct.Struct(">hiqqqhii")  # attributes .. recordCount (the CRC'd fixed part)
_CRC_AT = 17  # byte offset of the crc field within a batch
_ATTR_AT = 21  # start of the CRC'd region

ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

_COMPRESSION_NAMES = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


class ControlType(IntEnum):
    """Control record types (the int16 ``type`` in a control record's key)."""

    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


# The data-message schema (spec/messages/<name>.json) that holds each control record's value.
CONTROL_SCHEMAS: dict[ControlType, str] = {
    ControlType.LEADER_CHANGE: "LeaderChangeMessage",
    ControlType.SNAPSHOT_HEADER: "SnapshotHeaderRecord",
    ControlType.SNAPSHOT_FOOTER: "SnapshotFooterRecord",
    ControlType.KRAFT_VERSION: "KRaftVersionRecord",
    ControlType.KRAFT_VOTERS: "VotersRecord",
}

_CONTROL_KEY = struct.Struct(">hh")


#: CRC-32C of a batch's CRC'd part: the library's function itself, with no Python call around it (the
#: leader computes one per append, a follower checks one per Fetch).
crc32c: Callable[[Buffer], int] = _crc32c.crc32c


# Record and RecordBatch are values: treat them as immutable. They are not ``frozen`` dataclasses only
# because a frozen __init__ sets each field through object.__setattr__, which made building them most of
# the cost of decoding a one-record batch (a follower does that for every Fetch); equality and hashing
# are the same as frozen ones'.
@dataclass(slots=True, unsafe_hash=True)
class Record:
    offset_delta: int
    value: bytes | None
    key: bytes | None = None
    timestamp_delta: int = 0
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(slots=True, unsafe_hash=True)
class RecordBatch:
    base_offset: int
    partition_leader_epoch: int
    records: tuple[Record, ...]
    is_control: bool = False
    base_timestamp: int = 0
    max_timestamp: int = 0
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    # Attribute bits KRaft does not set but a real log may carry; kept so a decoded batch re-encodes
    # to the same bytes.
    is_transactional: bool = False
    log_append_time: bool = False

    @property
    def last_offset(self) -> int:
        if not self.records:
            raise ValueError("an empty record batch has no last offset")
        return self.base_offset + self.records[-1].offset_delta

    @property
    def last_offset_delta(self) -> int:
        if not self.records:
            raise ValueError("an empty record batch has no last offset delta")
        return self.records[-1].offset_delta

    @property
    def attributes(self) -> int:
        attrs = 0
        if self.is_control:
            attrs |= ATTR_CONTROL
        if self.is_transactional:
            attrs |= ATTR_TRANSACTIONAL
        if self.log_append_time:
            attrs |= ATTR_LOG_APPEND_TIME
        return attrs


# ---------------------------------------------------------------------------------------------- encode


def _encode_record(rec: Record) -> bytes:
    value = rec.value
    if rec.key is None and not rec.headers and value is not None:
        ts, off, n = rec.timestamp_delta, rec.offset_delta, len(value)
        if 0 <= ts < 64 and 0 <= off < 64 and n < 4096:
            # A leader encodes every client record it appends, and nearly all have this shape (no key,
            # no headers, small deltas): written here without the varint writers' calls, the same bytes
            # as _encode_record_generic (tests/spec/test_records.py checks). Zig-zag of a small n >= 0 is
            # 2n: one byte below 64, two below 8192 (n < 4096 keeps the record's length under that too).
            zn = n << 1
            head = bytes((0, ts << 1, off << 1, 1, zn)) if zn < 0x80 else bytes(
                (0, ts << 1, off << 1, 1, (zn & 0x7F) | 0x80, zn >> 7))
            size = len(head) + n + 1  # + the header count, 0
            zs = size << 1
            length = bytes((zs,)) if zs < 0x80 else bytes(((zs & 0x7F) | 0x80, zs >> 7))
            return b"".join((length, head, value, b"\x00"))
    return _encode_record_generic(rec)


def _encode_record_generic(rec: Record) -> bytes:
    body = bytearray(b"\x00")  # record attributes: unused, always 0
    write_varlong(body, rec.timestamp_delta)
    write_varint(body, rec.offset_delta)
    if rec.key is None:
        body.append(1)  # zig-zag(-1)
    else:
        write_varint(body, len(rec.key))
        body += rec.key
    if rec.value is None:
        body.append(1)
    else:
        write_varint(body, len(rec.value))
        body += rec.value
    write_varint(body, len(rec.headers))
    for hkey, hval in rec.headers:
        kb = hkey.encode("utf-8")
        write_varint(body, len(kb))
        body += kb
        if hval is None:
            body.append(1)
        else:
            write_varint(body, len(hval))
            body += hval
    out = bytearray()
    write_varint(out, len(body))
    out += body
    return bytes(out)


def _encode_records_section(records: Sequence[Record]) -> bytes:
    return b"".join([_encode_record(r) for r in records])


@functools.lru_cache(maxsize=256)
def _plain_record_head(timestamp_delta: int, offset_delta: int, size: int) -> bytes:
    """The bytes of a plain record (no key, no headers, a value of ``size`` bytes) before its value: a leader's
    one-record batches repeat a few shapes, so ``encode_batch`` writes their record from this (only the value is
    new) instead of encoding its fields again. The generic encoding of such a record without its value and its
    header count (0, one byte)."""
    whole = _encode_record_generic(Record(offset_delta, bytes(size), None, timestamp_delta))
    return whole[: len(whole) - size - 1]


def encode_batch(batch: RecordBatch) -> bytes:
    """Encode one batch. An empty batch is refused: Kafka never writes one with magic 2 in KRaft."""
    records = batch.records
    if not records:
        raise ValueError("refusing to encode an empty record batch")
    rec = records[-1]
    head = _BODY.pack(
        batch.attributes if batch.is_control or batch.is_transactional or batch.log_append_time else 0,
        rec.offset_delta,
        batch.base_timestamp,
        batch.max_timestamp,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        len(records),
    )
    value = rec.value
    if len(records) == 1 and rec.key is None and not rec.headers and value is not None:
        # A leader's client write (one plain record): its record's bytes from the template of its shape.
        shape = (rec.timestamp_delta, rec.offset_delta, len(value))
        body = b"".join((head, _plain_record_head(*shape), value, b"\x00"))
    else:
        body = head + (_encode_record(records[0]) if len(records) == 1 else _encode_records_section(records))
    crc = crc32c(body)
    batch_length = 4 + 1 + 4 + len(body)  # partitionLeaderEpoch + magic + crc + CRC'd part
    return _PREFIX.pack(batch.base_offset, batch_length, batch.partition_leader_epoch, MAGIC, crc) + body


def encode_batches(batches: Iterable[RecordBatch]) -> bytes:
    return b"".join([encode_batch(b) for b in batches])


# ---------------------------------------------------------------------------------------------- decode


# Decoding runs once per record on every follower, so the common case is kept cheap: varints of one or
# two bytes are read in ``_varint`` itself, and the ``records[3].key length``-style names errors need
# are only formatted when something is wrong. Any other varint, and every error, goes through the generic
# ``spec.primitives`` readers, so a bad record fails exactly as it would there.


def _field(index: int, name: str) -> str:
    return f"records[{index}]{name}"


def _varint(buf: Buffer, pos: int, index: int, name: str) -> tuple[int, int]:
    """A zig-zag varint (int32) of record ``index``; ``name`` is the field, for the error message."""
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        b2 = buf[pos + 1]
        if b2 < 0x80:
            raw = (b & 0x7F) | (b2 << 7)
            return (raw >> 1) ^ -(raw & 1), pos + 2
    except IndexError:
        pass
    return read_varint(buf, pos, _field(index, name))


def _varlong(buf: Buffer, pos: int, index: int, name: str) -> tuple[int, int]:
    """A zig-zag varlong (int64) of record ``index``: its one-byte form here, others generically."""
    if pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    return read_varlong(buf, pos, _field(index, name))


def _read_bytes(buf: Buffer, pos: int, end: int, index: int, name: str) -> tuple[bytes | None, int]:
    length, pos = _varint(buf, pos, index, name + " length")
    if length == -1:
        return None, pos
    if length < -1:
        raise DecodeError(_field(index, name + " length"), pos, f"negative length {length}")
    if pos + length > end:
        raise DecodeError(
            _field(index, name), pos, f"length {length} exceeds the {end - pos} bytes left in the record"
        )
    return bytes(buf[pos : pos + length]), pos + length


def _inline_bytes(buf: Buffer, p: int, rec_end: int) -> tuple[bytes | None, int] | None:
    """A record's key or value in the common shape, and where it ends: a one-byte length (null: 1, zig-zag -1) or a
    two-byte one. None: another shape, or a wrong one (``_decode_record_checked`` reads it and names what)."""
    b = buf[p]
    if b == 1:
        return None, p + 1
    if b < 0x80:
        n, p = (b >> 1) ^ -(b & 1), p + 1
    else:
        b2 = buf[p + 1]
        if b2 >= 0x80:
            return None
        raw = (b & 0x7F) | (b2 << 7)
        n, p = (raw >> 1) ^ -(raw & 1), p + 2
    if n < 0 or p + n > rec_end:
        return None
    return bytes(buf[p : p + n]), p + n


def _decode_record(buf: Buffer, pos: int, end: int, index: int) -> tuple[Record, int]:
    """One record. The common shape (short varints, no headers) is read inline here; anything else, and
    anything wrong, is read by :func:`_decode_record_checked` from the record's start, so the result and
    every error are exactly that function's."""
    try:
        b = buf[pos]
        if b < 0x80:
            length, p = (b >> 1) ^ -(b & 1), pos + 1
        else:
            b2 = buf[pos + 1]
            if b2 >= 0x80:
                return _decode_record_checked(buf, pos, end, index)
            raw = (b & 0x7F) | (b2 << 7)
            length, p = (raw >> 1) ^ -(raw & 1), pos + 2
        rec_end = p + length
        if length < MIN_RECORD_SIZE - 1 or rec_end > end:
            return _decode_record_checked(buf, pos, end, index)
        ts = buf[p + 1]  # after the attributes byte
        off = buf[p + 2]
        if ts >= 0x80:
            return _decode_record_checked(buf, pos, end, index)
        p += 3
        if off >= 0x80:  # an offset delta of 64 or more: two bytes up to 8191 (a batch's 65th record on)
            b2 = buf[p]
            if b2 >= 0x80:
                return _decode_record_checked(buf, pos, end, index)
            off = (off & 0x7F) | (b2 << 7)
            p += 1
        got = _inline_bytes(buf, p, rec_end)
        if got is None:
            return _decode_record_checked(buf, pos, end, index)
        key, p = got
        got = _inline_bytes(buf, p, rec_end)
        if got is None:
            return _decode_record_checked(buf, pos, end, index)
        value, p = got
        if p + 1 != rec_end or buf[p] != 0:  # exactly one byte left: a header count of 0
            return _decode_record_checked(buf, pos, end, index)
    except IndexError:
        return _decode_record_checked(buf, pos, end, index)
    return Record((off >> 1) ^ -(off & 1), value, key, (ts >> 1) ^ -(ts & 1)), rec_end


def _decode_record_checked(buf: Buffer, pos: int, end: int, index: int) -> tuple[Record, int]:
    start = pos
    length, pos = _varint(buf, pos, index, ".length")
    if length < MIN_RECORD_SIZE - 1 or pos + length > end:
        raise DecodeError(
            _field(index, ".length"), start, f"record length {length} does not fit the {end - pos} bytes left"
        )
    rec_end = pos + length
    pos += 1  # attributes (unused)
    ts_delta, pos = _varlong(buf, pos, index, ".timestampDelta")
    off_delta, pos = _varint(buf, pos, index, ".offsetDelta")
    key, pos = _read_bytes(buf, pos, rec_end, index, ".key")
    value, pos = _read_bytes(buf, pos, rec_end, index, ".value")
    n_headers, pos = _varint(buf, pos, index, ".headerCount")
    # Each header needs at least two bytes (key length, value length): check before allocating.
    if n_headers < 0 or n_headers * 2 > rec_end - pos:
        raise DecodeError(
            _field(index, ".headerCount"), pos, f"{n_headers} headers cannot fit in {rec_end - pos} bytes"
        )
    headers: tuple[tuple[str, bytes | None], ...] = ()
    if n_headers:
        headers, pos = _decode_headers(buf, pos, rec_end, index, n_headers)
    if pos != rec_end:
        raise DecodeError(
            _field(index, ""), pos, f"record length says {length} bytes but its fields use {pos - start}"
        )
    return Record(off_delta, value, key, ts_delta, headers), pos


def _decode_headers(
    buf: Buffer, pos: int, rec_end: int, index: int, n_headers: int
) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    headers: list[tuple[str, bytes | None]] = []
    for h in range(n_headers):
        hkey, pos = _read_bytes(buf, pos, rec_end, index, f".headers[{h}].key")
        if hkey is None:
            raise DecodeError(_field(index, f".headers[{h}].key"), pos, "null header key")
        try:
            hname = hkey.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(_field(index, f".headers[{h}].key"), pos, f"invalid UTF-8: {exc.reason}") from None
        hval, pos = _read_bytes(buf, pos, rec_end, index, f".headers[{h}].value")
        headers.append((hname, hval))
    return tuple(headers), pos


def decode_batch(buf: Buffer, pos: int = 0) -> tuple[RecordBatch, int]:
    """Decode the batch starting at ``pos``; return it and the position just after it."""
    avail = len(buf) - pos
    if avail < HEADER_SIZE:
        raise DecodeError("RecordBatch", pos, f"truncated batch header: {avail} of {HEADER_SIZE} bytes")
    base_offset, batch_length, leader_epoch, magic, crc = _PREFIX.unpack_from(buf, pos)
    if magic != MAGIC:
        raise DecodeError("RecordBatch.magic", pos + 16, f"unsupported magic {magic} (only 2)")
    if batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise DecodeError(
            "RecordBatch.batchLength", pos + 8, f"batch length {batch_length} is below the minimum"
        )
    end = pos + LOG_OVERHEAD + batch_length
    if end > len(buf):
        raise DecodeError(
            "RecordBatch.batchLength",
            pos + 8,
            f"batch length {batch_length} exceeds the {avail - LOG_OVERHEAD} bytes available",
        )
    actual = crc32c(memoryview(buf)[pos + _ATTR_AT : end])
    if actual != crc:
        raise CorruptRecordError("RecordBatch.crc", pos + _CRC_AT, expected_crc=crc, actual_crc=actual)
    (attrs, last_delta, base_ts, max_ts, producer_id, producer_epoch, base_seq, count) = _BODY.unpack_from(
        buf, pos + _ATTR_AT
    )
    compression = attrs & ATTR_COMPRESSION_MASK
    if compression:
        name = _COMPRESSION_NAMES.get(compression, f"unknown codec {compression}")
        raise DecodeError(
            "RecordBatch.attributes",
            pos + _ATTR_AT,
            f"compressed batch ({name}) is not supported: this codec reads uncompressed batches only",
        )
    if attrs & ~(ATTR_LOG_APPEND_TIME | ATTR_TRANSACTIONAL | ATTR_CONTROL):
        raise DecodeError(
            "RecordBatch.attributes", pos + _ATTR_AT, f"unsupported attribute bits {attrs:#06x}"
        )
    rpos = pos + HEADER_SIZE
    if count <= 0 or count * MIN_RECORD_SIZE > end - rpos:
        raise DecodeError(
            "RecordBatch.recordCount", rpos - 4, f"record count {count} cannot fit in {end - rpos} bytes"
        )
    if count == 1:  # one record (a follower's usual Fetch): no list to build
        rec, rpos = _decode_record(buf, rpos, end, 0)
        records: tuple[Record, ...] = (rec,)
    else:
        recs = []
        for i in range(count):
            rec, rpos = _decode_record(buf, rpos, end, i)
            recs.append(rec)
        records = tuple(recs)
    if rpos != end:
        raise DecodeError("RecordBatch", rpos, f"{end - rpos} bytes left over after {count} records")
    if rec.offset_delta != last_delta:  # rec: the last record
        raise DecodeError(
            "RecordBatch.lastOffsetDelta",
            pos + _ATTR_AT + 2,
            f"says {last_delta} but the last record has offset delta {rec.offset_delta}",
        )
    # Positional, in field order: base_offset, partition_leader_epoch, records, is_control, base_timestamp,
    # max_timestamp, producer_id, producer_epoch, base_sequence, is_transactional, log_append_time.
    batch = RecordBatch(base_offset, leader_epoch, records, attrs & ATTR_CONTROL != 0, base_ts, max_ts, producer_id,
                        producer_epoch, base_seq, attrs & ATTR_TRANSACTIONAL != 0, attrs & ATTR_LOG_APPEND_TIME != 0)
    return batch, end


_BATCH_LENGTH = struct.Struct(">i").unpack_from

#: What differs between two batches of one shape (BatchTemplates), at their places in the header: baseOffset,
#: partitionLeaderEpoch, crc, baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence.
_VARIABLE_HEADER = struct.Struct(">q4xi1xI6xqqqhi")


class BatchTemplates:
    """:func:`decode_batch` with memory of the last few batches' shapes. A follower's next batch is usually its
    last one's shape: the same length, attributes, record count, record lengths and deltas, key bytes; only
    the offsets, epoch, CRC, timestamps, producer fields and record values differ. A batch equal to a
    remembered one in every byte but those reads as that one did, with those read again: its CRC is checked
    as ever (a corrupt batch raises the same :class:`CorruptRecordError`), and every other check
    ``decode_batch`` makes reads only bytes the two share, so it passes again. Any other batch is decoded
    by ``decode_batch`` and, if small and header-free, becomes a template. ``tests/spec/test_records.py``
    checks templates == ``decode_batch`` on random batches and mutations of them.
    """

    #: Templates kept per batch size, and sizes kept (then all are dropped); larger batches or ones with more
    #: records are never templates (each one would cost a walk over it and a mask as large).
    PER_LENGTH = 4
    LENGTHS = 16
    MAX_BYTES = 16384
    MAX_RECORDS = 64
    SEEN = 64

    def __init__(self) -> None:
        # size -> [hit(data, x, pos) of each template (see _batch_hit)], the last remembered first
        self._by_length: dict[int, list[Callable[[Buffer, int, int], RecordBatch | None]]] = {}
        self._seen: set[int] = set()  # sizes of batches only decoded (the next one of each is remembered)
        #: Batches read from a template, and by decode_batch.
        self.hits = 0
        self.misses = 0

    def one(self, buf: Buffer) -> RecordBatch | None:
        """``decode_batch(buf)[0]`` if ``buf`` is one batch of a remembered shape (a follower's usual Fetch
        answer: the same size as its last one, so the same batch length), else None: nothing is read then,
        the caller decodes ``buf`` (``decode``) as it would have."""
        templates = self._by_length.get(len(buf))
        if templates is not None:
            x = int.from_bytes(buf, "big")
            for hit in templates:
                batch = hit(buf, x, 0)
                if batch is not None:
                    self.hits += 1
                    return batch
        return None

    def decode(self, buf: Buffer, pos: int = 0) -> tuple[RecordBatch, int]:
        """``decode_batch(buf, pos)``."""
        templates = None
        if len(buf) - pos >= LOG_OVERHEAD:
            size = LOG_OVERHEAD + _BATCH_LENGTH(buf, pos + 8)[0]
            templates = self._by_length.get(size)
            if templates is not None and pos + size <= len(buf):
                data = buf if pos == 0 and size == len(buf) else buf[pos : pos + size]
                x = int.from_bytes(data, "big")
                for hit in templates:
                    batch = hit(data, x, pos)
                    if batch is not None:
                        self.hits += 1
                        return batch, pos + size
        batch, end = decode_batch(buf, pos)
        self.misses += 1
        size = end - pos
        if templates is None and size not in self._seen:
            # The first batch of its size is only decoded: most sizes seen once never come again (values of
            # other lengths), and remembering a batch costs more than decoding it.
            if len(self._seen) >= self.SEEN:
                self._seen.clear()
            self._seen.add(size)
        else:
            self._remember(buf, pos, end, batch)
        return batch, end

    def _remember(self, buf: Buffer, pos: int, end: int, batch: RecordBatch) -> None:
        size = end - pos
        if size > self.MAX_BYTES or len(batch.records) > self.MAX_RECORDS:
            return
        data = bytes(buf[pos:end])

        def bits(start: int, stop: int) -> int:  # the bits of bytes [start, stop) in the batch's int
            return ((1 << (8 * (stop - start))) - 1) << (8 * (size - stop))

        # Variable bytes: baseOffset, partitionLeaderEpoch, crc, and baseTimestamp to baseSequence (fixed-width
        # numbers any bytes of which decode) and each record's value (any content); the rest is the shape.
        variable = [(0, 8), (12, 16), (_CRC_AT, _ATTR_AT), (_ATTR_AT + 6, HEADER_SIZE - 4)]
        values = []
        p = HEADER_SIZE
        for i, rec in enumerate(batch.records):
            length, p = _varint(data, p, i, ".length")
            rec_end = p + length
            if rec.headers:
                return  # header bytes follow the value: not a shape this reads again
            if rec.value:
                start = rec_end - 1 - len(rec.value)  # the value, then the header count (0)
                values.append((i, start, rec_end - 1, bits(start, rec_end - 1)))
                variable.append((start, rec_end - 1))
            p = rec_end
        mask = (1 << (8 * size)) - 1
        for start, stop in variable:
            mask ^= bits(start, stop)
        templates = self._by_length.get(size)
        if templates is None:
            if len(self._by_length) >= self.LENGTHS:
                self._by_length.clear()
            templates = self._by_length[size] = []
        templates.insert(0, _batch_hit(int.from_bytes(data, "big"), mask, batch, values))
        del templates[self.PER_LENGTH :]


def _batch_hit(value: int, mask: int, batch: RecordBatch,
               values: list[tuple[int, int, int, int]]) -> Callable[[Buffer, int, int], RecordBatch | None]:
    """``hit(data, x, pos)`` (``data`` the batch's bytes, ``x`` their int, ``pos`` its place, for errors): None if
    ``data`` is not of the remembered ``batch``'s shape (``mask``: its shape bits; ``values``: (record, value
    start, end, the value's bits)), else ``decode_batch``'s batch, in straight generated code: the header's
    numbers unpacked by one call, the CRC checked as ever, a record whose value changed made again (the others
    are the template's, as their bytes are)."""
    records = []
    consts: dict[str, Any] = {"V": value, "M": mask, "header": _VARIABLE_HEADER.unpack_from, "crc32c": crc32c,
                              "Corrupt": CorruptRecordError, "RecordBatch": RecordBatch, "Record": Record,
                              "batch": batch}
    changed = {i: (start, end, m) for i, start, end, m in values}
    for i, rec in enumerate(batch.records):
        if i in changed:
            start, end, m = changed[i]
            # (Offsets are closure cells, not literals: batches of other sizes share one compiled source.)
            consts[f"m{i}"], consts[f"r{i}"], consts[f"s{i}"], consts[f"e{i}"] = m, rec, start, end
            records.append(f"r{i} if not c & m{i} else Record(r{i}.offset_delta, bytes(data[s{i}:e{i}]), "
                           f"r{i}.key, r{i}.timestamp_delta)")
        else:
            consts[f"r{i}"] = rec
            records.append(f"r{i}")
    text = "\n".join([
        f"def make({', '.join(consts)}):",
        "    control, transactional, append_time = batch.is_control, batch.is_transactional, batch.log_append_time",
        "    def hit(data, x, pos):",
        "        c = x ^ V",
        "        if c & M:",
        "            return None",
        "        (base_offset, leader_epoch, crc, base_ts, max_ts, producer_id, producer_epoch,"
        " base_seq) = header(data, 0)",
        f"        actual = crc32c(memoryview(data)[{_ATTR_AT}:])",
        "        if actual != crc:",
        f"            raise Corrupt('RecordBatch.crc', pos + {_CRC_AT}, expected_crc=crc, actual_crc=actual)",
        f"        return RecordBatch(base_offset, leader_epoch, ({''.join(r + ', ' for r in records)}), control,"
        " base_ts, max_ts, producer_id, producer_epoch, base_seq, transactional, append_time)",
        "    return hit", ""])
    return compiled_maker(text, "batch template")(*consts.values())


def decode_batches(buf: Buffer, allow_partial_tail: bool = False) -> list[RecordBatch]:
    """Decode consecutive batches filling ``buf``.

    With ``allow_partial_tail`` a truncated last batch is dropped instead of raising, as Kafka's
    consumers do with a fetch response cut at its size limit; the default is strict.
    """
    out: list[RecordBatch] = []
    pos = 0
    n = len(buf)
    while pos < n:
        if allow_partial_tail:
            if n - pos < LOG_OVERHEAD:
                break
            (length,) = struct.unpack_from(">i", buf, pos + 8)
            if length >= 0 and pos + LOG_OVERHEAD + length > n:
                break
        batch, pos = decode_batch(buf, pos)
        out.append(batch)
    return out


def batch_digest(batch: RecordBatch) -> str:
    """CRC32C (8 hex digits) of the batch's encoded records, independent of base offset and epoch.

    Two logs hold the same entries exactly when their batches at the same offsets have the same epoch
    and the same digest (KIP-595's Log Matching property, checked on traces).
    """
    return f"{crc32c(_encode_records_section(batch.records)):08x}"


# ---------------------------------------------------------------------------------------------- builders


def control_batch(
    base_offset: int,
    epoch: int,
    control_type: ControlType,
    body: dict[str, Any],
    timestamp: int = 0,
    version: int = 0,
) -> RecordBatch:
    """A one-record control batch. Key: int16 version (0) + int16 type; value: the typed record."""
    from kraft_tck.spec.codec import encode_data  # the message codec imports this module's types

    ctype = ControlType(control_type)
    key = _CONTROL_KEY.pack(0, int(ctype))
    value = encode_data(CONTROL_SCHEMAS[ctype], version, body)
    return RecordBatch(
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        records=(Record(0, value, key),),
        is_control=True,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
    )


def control_version(record: Record) -> int:
    """The schema version of a control record's value (the first int16 of its value)."""
    if record.value is None or len(record.value) < 2:
        raise DecodeError("control record value", 0, "missing version")
    return int(struct.unpack_from(">h", record.value, 0)[0])


def decode_control(record: Record) -> tuple[ControlType, dict[str, Any]]:
    """Decode a control record's key and value into its type and body."""
    from kraft_tck.spec.codec import decode_data

    key = record.key
    if key is None or len(key) != _CONTROL_KEY.size:
        raise DecodeError(
            "control record key", 0, f"expected 4 bytes, got {None if key is None else len(key)}"
        )
    key_version, raw_type = _CONTROL_KEY.unpack(key)
    if key_version != 0:
        raise DecodeError("control record key.version", 0, f"unsupported control key version {key_version}")
    try:
        ctype = ControlType(raw_type)
    except ValueError:
        raise DecodeError("control record key.type", 2, f"unknown control type {raw_type}") from None
    if record.value is None:
        raise DecodeError("control record value", 0, "null value")
    version = control_version(record)
    return ctype, decode_data(CONTROL_SCHEMAS[ctype], version, record.value)


def data_batch(base_offset: int, epoch: int, values: Sequence[bytes], timestamp: int = 0) -> RecordBatch:
    """A batch of plain data records with consecutive offsets."""
    if not values:
        raise ValueError("a data batch needs at least one value")
    return RecordBatch(
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        # A list: cheaper than a generator; one value (a leader's client write, nearly always) without either.
        records=(Record(0, bytes(values[0])),) if len(values) == 1 else tuple(
            [Record(i, bytes(v)) for i, v in enumerate(values)]),
        base_timestamp=timestamp,
        max_timestamp=timestamp,
    )
