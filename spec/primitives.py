"""Primitive wire encodings shared by the message codec and the record batch codec.

Kafka uses big-endian fixed-width integers, protobuf-style unsigned varints (for compact lengths and
tagged fields) and zig-zag signed varints/varlongs (inside records). Readers take ``(buf, pos)`` and
return ``(value, new_pos)``; they raise :class:`DecodeError` naming the field and offset on truncation.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from kraft_tck.spec.errors import DecodeError

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

Buffer = bytes | bytearray | memoryview

#: struct format characters of Kafka's fixed-width field types (big-endian; uuids are 16 raw bytes).
FIXED_FORMAT = {
    "bool": "?",
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
}


def write_uvarint(out: bytearray, value: int) -> None:
    """Append ``value`` (0 <= value < 2**64) as an unsigned varint."""
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uvarint_bytes(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _SMALL_UVARINTS[value]
    out = bytearray()
    write_uvarint(out, value)
    return bytes(out)


_SMALL_UVARINTS = [bytes([i]) for i in range(0x80)]


def read_uvarint(buf: Buffer, pos: int, field: str, max_bytes: int = 5) -> tuple[int, int]:
    """Read an unsigned varint of at most ``max_bytes`` bytes (5 for 32-bit, 10 for 64-bit)."""
    try:
        b = buf[pos]
    except IndexError:
        raise DecodeError(field, pos, "truncated varint") from None
    if b < 0x80:
        return b, pos + 1
    start = pos
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        if pos - start >= max_bytes:
            raise DecodeError(field, start, f"varint longer than {max_bytes} bytes")
        try:
            b = buf[pos]
        except IndexError:
            raise DecodeError(field, start, "truncated varint") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    limit = 1 << (32 if max_bytes == 5 else 64)
    if result >= limit:
        raise DecodeError(
            field, start, f"varint {result} does not fit in {32 if max_bytes == 5 else 64} bits"
        )
    return result, pos


def write_varint(out: bytearray, value: int) -> None:
    """Append a zig-zag signed 32-bit varint."""
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"varint out of int32 range: {value}")
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    """Append a zig-zag signed 64-bit varint."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varlong out of int64 range: {value}")
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def read_varint(buf: Buffer, pos: int, field: str) -> tuple[int, int]:
    raw, pos = read_uvarint(buf, pos, field, 5)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: Buffer, pos: int, field: str) -> tuple[int, int]:
    raw, pos = read_uvarint(buf, pos, field, 10)
    return (raw >> 1) ^ -(raw & 1), pos


_UUIDS: dict[bytes, uuid.UUID] = {}  # the few uuids a connection carries (topic ids, directory ids), decoded once
_UUIDS_MAX = 4096


def new_uuid(raw: bytes, _new: Any = object.__new__, _set: Any = object.__setattr__) -> uuid.UUID:
    """The UUID of 16 bytes read from the wire."""
    # UUIDs are immutable, so one instance per value can be shared by every decoded body.
    u = _UUIDS.get(raw)
    if u is not None:
        return u
    # uuid.UUID(bytes=...) validates its arguments at length; 16 bytes from the wire are always valid.
    u = _new(uuid.UUID)
    _set(u, "int", int.from_bytes(raw, "big"))
    _set(u, "is_safe", uuid.SafeUUID.unknown)
    if len(_UUIDS) >= _UUIDS_MAX:
        _UUIDS.clear()  # random uuids (e.g. fuzzing) must not grow it without bound
    _UUIDS[raw] = u
    return u


def copy_default(v: Any) -> Any:
    """A field's default for one body: a fresh list or dict (a decoded body owns its values), else as is."""
    if isinstance(v, list):
        return []
    if isinstance(v, dict):
        return {k: copy_default(x) for k, x in v.items()}
    return v
