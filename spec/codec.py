"""The wire codec: interprets ``spec/messages/*.json`` and encodes/decodes every message at every version.

Each (message, version) is compiled once, on first use, into a pair of closures (a "plan"): runs of
fixed-width fields are fused into one :class:`struct.Struct`, every other field gets a specialised
reader/writer, and tagged fields get a tag table. Nothing about the schema is looked up while bytes
are being read or written.

The interpreter is the reference behaviour and the source of every error message. The public API runs
the straight-line code :mod:`kraft_tck.spec.codegen` generates from the same definitions first (about
twice as fast), and falls back to the interpreter wherever that code gives up: same bytes, same bodies,
same errors (``tests/spec/test_codegen.py`` compares the two on every message and version).

Bodies are plain dicts keyed by the JSON field names. Arrays are lists (of dicts for struct elements),
``uuid`` is :class:`uuid.UUID`, ``records`` and ``bytes`` are :class:`bytes`. Absent fields take their
defaults on encode. Unknown tagged fields met on decode are kept under ``_unknown_tagged_fields``
({tag: raw bytes}) and written back on encode.

Public API (used by the node, the harness and outside checks): :func:`encode_request`,
:func:`encode_response`, :func:`decode_request`, :func:`decode_response`, :func:`encode_data`,
:func:`decode_data`, :func:`api_key_of`, :func:`api_name`, :func:`supported_versions`,
:func:`request_header_version`, :func:`response_header_version`, :func:`unsupported_version_response`,
:func:`message_struct` (what :mod:`kraft_tck.spec.binding` generates from).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kraft_tck.spec import codegen
from kraft_tck.spec.errors import DecodeError, Errors, UnsupportedVersionError
from kraft_tck.spec.primitives import (
    FIXED_FORMAT,
    INT16,
    INT32,
    copy_default,
    read_uvarint,
    uvarint_bytes,
    write_uvarint,
)
from kraft_tck.spec.primitives import new_uuid as _new_uuid
from kraft_tck.spec.schema import INT_RANGES, FieldDef, MessageDef, load_all

UNKNOWN_TAGGED = "_unknown_tagged_fields"
API_VERSIONS_KEY = 18

Body = dict[str, Any]
Encoder = Callable[[bytearray, Any], None]
Decoder = Callable[[bytes, int], tuple[Any, int]]


class EncodeError(ValueError):
    """A body that cannot be encoded (wrong type, out of range, a field missing at this version...)."""


# --------------------------------------------------------------------------------------------- primitives

_FIXED_FORMAT = FIXED_FORMAT
_FIXED_SIZE = {k: struct.calcsize(">" + v) for k, v in _FIXED_FORMAT.items()}
_ZERO_UUID = uuid.UUID(int=0)


def _truncated(field: str, pos: int, need: int, have: int) -> DecodeError:
    return DecodeError(field, pos, f"needs {need} bytes but only {max(have, 0)} are left")


def _string_codec(name: str, compact: bool, nullable: bool) -> tuple[Encoder, Decoder, int]:
    def enc(out: bytearray, v: Any) -> None:
        if v is None:
            if not nullable:
                raise EncodeError(f"{name}: null is not allowed here")
            out += b"\x00" if compact else b"\xff\xff"
            return
        b = v.encode("utf-8")
        n = len(b)
        if compact:
            out += uvarint_bytes(n + 1)
        else:
            if n > 0x7FFF:
                raise EncodeError(f"{name}: string of {n} bytes is longer than int16 allows")
            out += INT16.pack(n)
        out += b

    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        start = pos
        if compact:
            n, pos = read_uvarint(buf, pos, name)
            n -= 1
        else:
            if pos + 2 > len(buf):
                raise _truncated(name, pos, 2, len(buf) - pos)
            n = (buf[pos] << 8 | buf[pos + 1]) - ((buf[pos] & 0x80) << 9)
            pos += 2
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(name, start, "null string where none is allowed" if n == -1 else f"length {n}")
        end = pos + n
        if end > len(buf):
            raise _truncated(name, pos, n, len(buf) - pos)
        try:
            return str(buf[pos:end], "utf-8"), end
        except UnicodeDecodeError as exc:
            raise DecodeError(name, pos, f"invalid UTF-8: {exc.reason}") from None

    return enc, dec, 1 if compact else 2


def _bytes_codec(name: str, compact: bool, nullable: bool) -> tuple[Encoder, Decoder, int]:
    def enc(out: bytearray, v: Any) -> None:
        if v is None:
            if not nullable:
                raise EncodeError(f"{name}: null is not allowed here")
            out += b"\x00" if compact else b"\xff\xff\xff\xff"
            return
        n = len(v)
        out += uvarint_bytes(n + 1) if compact else INT32.pack(n)
        out += v

    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        start = pos
        if compact:
            n, pos = read_uvarint(buf, pos, name)
            n -= 1
        else:
            if pos + 4 > len(buf):
                raise _truncated(name, pos, 4, len(buf) - pos)
            (n,) = INT32.unpack_from(buf, pos)
            pos += 4
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(name, start, "null bytes where none are allowed" if n == -1 else f"length {n}")
        end = pos + n
        if end > len(buf):
            raise _truncated(name, pos, n, len(buf) - pos)
        return bytes(buf[pos:end]), end

    return enc, dec, 1 if compact else 4


def _uuid_codec(name: str) -> tuple[Encoder, Decoder, int]:
    def enc(out: bytearray, v: Any) -> None:
        out += v.bytes

    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        end = pos + 16
        if end > len(buf):
            raise _truncated(name, pos, 16, len(buf) - pos)
        return _new_uuid(buf[pos:end]), end

    return enc, dec, 16


def _fixed_codec(name: str, ftype: str) -> tuple[Encoder, Decoder, int]:
    s = struct.Struct(">" + _FIXED_FORMAT[ftype])
    pack, unpack_from, size = s.pack, s.unpack_from, s.size

    def enc(out: bytearray, v: Any) -> None:
        out += pack(v)

    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        if pos + size > len(buf):
            raise _truncated(name, pos, size, len(buf) - pos)
        return unpack_from(buf, pos)[0], pos + size

    return enc, dec, size


# --------------------------------------------------------------------------------------------- compile


@dataclass(slots=True)
class _Plan:
    enc: Encoder
    dec: Decoder
    min_size: int


def _field_codec(fd: FieldDef, version: int, flexible: bool, path: str) -> tuple[Encoder, Decoder, int]:
    """Reader/writer for one field's value at ``version`` (not including any tag wrapper)."""
    compact = flexible and (fd.flexible_override is None or version in fd.flexible_override)
    nullable = version in fd.nullable
    name = f"{path}.{fd.name}" if path else fd.name
    if fd.is_array:
        elem_type = fd.element_type
        if fd.is_struct:
            assert fd.fields is not None
            sub = _struct_plan(tuple(fd.fields), version, flexible, name + "[]")
            e_enc, e_dec, e_min = sub.enc, sub.dec, sub.min_size
        else:
            e_enc, e_dec, e_min = _primitive_codec(name + "[]", elem_type, compact, False)
        return _array_codec(name, e_enc, e_dec, max(e_min, 1), compact, nullable)
    if fd.is_struct:
        assert fd.fields is not None
        sub = _struct_plan(tuple(fd.fields), version, flexible, name)
        if not nullable:
            return sub.enc, sub.dec, sub.min_size
        return _nullable_struct_codec(name, sub)
    return _primitive_codec(name, fd.type, compact, nullable)


def _primitive_codec(name: str, ftype: str, compact: bool, nullable: bool) -> tuple[Encoder, Decoder, int]:
    if ftype in _FIXED_FORMAT:
        return _fixed_codec(name, ftype)
    if ftype == "uuid":
        return _uuid_codec(name)
    if ftype == "string":
        return _string_codec(name, compact, nullable)
    if ftype in ("bytes", "records"):
        return _bytes_codec(name, compact, nullable)
    raise AssertionError(f"unhandled primitive {ftype}")  # schema.py admits no other type


def _nullable_struct_codec(name: str, sub: _Plan) -> tuple[Encoder, Decoder, int]:
    # Kafka marks a nullable struct with an int8: -1 absent, 1 present.
    def enc(out: bytearray, v: Any) -> None:
        if v is None:
            out.append(0xFF)
        else:
            out.append(1)
            sub.enc(out, v)

    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        if pos >= len(buf):
            raise _truncated(name, pos, 1, 0)
        marker = buf[pos]
        if marker == 0xFF:
            return None, pos + 1
        if marker != 1:
            raise DecodeError(name, pos, f"bad nullable-struct marker {marker}")
        return sub.dec(buf, pos + 1)

    return enc, dec, 1


def _array_codec(
    name: str, e_enc: Encoder, e_dec: Decoder, e_min: int, compact: bool, nullable: bool
) -> tuple[Encoder, Decoder, int]:
    def enc(out: bytearray, v: Any) -> None:
        if v is None:
            if not nullable:
                raise EncodeError(f"{name}: null is not allowed here")
            out += b"\x00" if compact else b"\xff\xff\xff\xff"
            return
        n = len(v)
        out += uvarint_bytes(n + 1) if compact else INT32.pack(n)
        for i, item in enumerate(v):
            try:
                e_enc(out, item)
            except EncodeError as exc:
                raise EncodeError(f"{name}[{i}]: {exc}") from None

    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        start = pos
        if compact:
            n, pos = read_uvarint(buf, pos, name)
            n -= 1
        else:
            if pos + 4 > len(buf):
                raise _truncated(name, pos, 4, len(buf) - pos)
            (n,) = INT32.unpack_from(buf, pos)
            pos += 4
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise DecodeError(name, start, "null array where none is allowed" if n == -1 else f"count {n}")
        # Refuse a count the remaining bytes cannot hold before building anything.
        if n * e_min > len(buf) - pos:
            raise DecodeError(
                name, start, f"count {n} needs at least {n * e_min} bytes, {len(buf) - pos} left"
            )
        items: list[Any] = []
        append = items.append
        for _ in range(n):
            item, pos = e_dec(buf, pos)
            append(item)
        return items, pos

    return enc, dec, 1 if compact else 4


def _check_value(fd: FieldDef, name: str) -> Callable[[Any], None] | None:
    """A cheap type/range guard for primitive values, so bad input fails with the field's name."""
    if fd.is_array or fd.is_struct:
        return None
    t = fd.type
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]

        def check_int(v: Any) -> None:
            if isinstance(v, bool) or not isinstance(v, int):
                raise EncodeError(f"{name}: expected {t}, got {type(v).__name__}")
            if not lo <= v <= hi:
                raise EncodeError(f"{name}: {v} is out of range for {t}")

        return check_int
    return None


def _struct_plan(fields: tuple[FieldDef, ...], version: int, flexible: bool, path: str) -> _Plan:
    present = [f for f in fields if version in f.versions]
    regular = [f for f in present if version not in f.tagged]
    tagged = sorted((f for f in present if version in f.tagged), key=lambda f: f.tag or 0)

    enc_steps: list[Callable[[bytearray, Body], None]] = []
    dec_steps: list[Callable[[bytes, int, Body], int]] = []
    min_size = 0

    # Group consecutive fixed-width fields into one struct.Struct call each way.
    groups: list[list[FieldDef] | FieldDef] = []
    for f in regular:
        if not f.is_array and (f.type in _FIXED_FORMAT or f.type == "uuid"):
            if groups and isinstance(groups[-1], list):
                groups[-1].append(f)
            else:
                groups.append([f])
        else:
            groups.append(f)

    for g in groups:
        if isinstance(g, list):
            enc_s, dec_s, size = _fused_steps(g, version, path)
        else:
            enc_s, dec_s, size = _single_steps(g, version, flexible, path)
        enc_steps.append(enc_s)
        dec_steps.append(dec_s)
        min_size += size

    known_names = frozenset(f.name for f in present)
    all_fields = {f.name: f for f in fields}
    defaults_for_tagged = {f.name: f.default_value(version) for f in tagged}
    mutable_tagged_defaults = [(k, v) for k, v in defaults_for_tagged.items() if isinstance(v, list | dict)]

    if flexible:
        min_size += 1
        tag_enc: list[tuple[int, str, Any, Encoder]] = []
        tag_dec: dict[int, tuple[str, Decoder]] = {}
        for f in tagged:
            fe, fdec, _ = _field_codec(f, version, True, path)
            assert f.tag is not None
            tag_enc.append((f.tag, f.name, defaults_for_tagged[f.name], fe))
            tag_dec[f.tag] = (f.name, fdec)
        tag_name = f"{path}._tagged_fields" if path else "_tagged_fields"

        def enc_tags(out: bytearray, body: Body) -> None:
            if not tag_enc and UNKNOWN_TAGGED not in body:
                out.append(0)  # the common case: no tagged fields at all
                return
            items: list[tuple[int, bytes]] = []
            for tag, fname, default, fe in tag_enc:
                v = body.get(fname, default)
                if v is default or v is None or v == default:
                    continue
                tmp = bytearray()
                try:
                    fe(tmp, v)
                except EncodeError:
                    raise
                except Exception as exc:
                    raise EncodeError(f"{path}.{fname}: cannot encode {v!r}: {exc}") from None
                items.append((tag, bytes(tmp)))
            unknown = body.get(UNKNOWN_TAGGED)
            if unknown:
                for tag, raw in unknown.items():
                    if tag in tag_dec:
                        raise EncodeError(f"{tag_name}: unknown tag {tag} collides with a known field")
                    items.append((int(tag), bytes(raw)))
                items.sort(key=lambda kv: kv[0])
            out += uvarint_bytes(len(items))
            for tag, raw in items:
                write_uvarint(out, tag)
                write_uvarint(out, len(raw))
                out += raw

        def dec_tags(buf: bytes, pos: int, d: Body) -> int:
            if pos < len(buf) and buf[pos] == 0:  # the common case: no tagged field is present
                if mutable_tagged_defaults:
                    for k, v in defaults_for_tagged.items():
                        d[k] = v if not isinstance(v, list | dict) else copy_default(v)
                elif tag_dec:
                    d.update(defaults_for_tagged)
                return pos + 1
            start = pos
            n, pos = read_uvarint(buf, pos, tag_name)
            if n * 2 > len(buf) - pos:
                raise DecodeError(tag_name, start, f"{n} tagged fields cannot fit in {len(buf) - pos} bytes")
            # Every known tagged field gets a key, in tag order; a mutable default still in place after
            # the loop (its tag was absent) is replaced by a copy of its own.
            d.update(defaults_for_tagged)
            last = -1
            for _ in range(n):
                tstart = pos
                # Tags and sizes are nearly always one-byte varints; read_uvarint handles the rest.
                tag = buf[pos] if pos < len(buf) else 0x80
                if tag < 0x80:
                    pos += 1
                else:
                    tag, pos = read_uvarint(buf, pos, tag_name)
                size = buf[pos] if pos < len(buf) else 0x80
                if size < 0x80:
                    pos += 1
                else:
                    size, pos = read_uvarint(buf, pos, f"{tag_name}[{tag}].size")
                end = pos + size
                if end > len(buf):
                    raise _truncated(f"{tag_name}[{tag}]", pos, size, len(buf) - pos)
                if tag <= last:
                    raise DecodeError(tag_name, tstart, f"tag {tag} out of order or repeated (after {last})")
                last = tag
                known = tag_dec.get(tag)
                if known is None:
                    d.setdefault(UNKNOWN_TAGGED, {})[tag] = bytes(buf[pos:end])
                else:
                    fname, fdec = known
                    v, p2 = fdec(buf, pos)
                    if p2 != end:
                        raise DecodeError(
                            f"{path}.{fname}" if path else fname, pos, f"used {p2 - pos} of its {size} bytes"
                        )
                    d[fname] = v
                pos = end
            for k, v in mutable_tagged_defaults:
                if d[k] is v:
                    d[k] = copy_default(v)
            return pos

        enc_steps.append(enc_tags)
        dec_steps.append(dec_tags)

    field_count = len(known_names)

    def check_extra(body: Body) -> None:
        for k, v in body.items():
            if k in known_names or k == UNKNOWN_TAGGED:
                continue
            f = all_fields.get(k)
            where = f"{path}.{k}" if path else k
            if f is None:
                raise EncodeError(f"{where}: no such field in this message")
            if version in f.versions:
                continue
            if f.ignorable or v == f.default_value(version) or v is None:
                continue
            raise EncodeError(f"{where}: field does not exist at version {version} and is not ignorable")

    def enc_struct(out: bytearray, body: Any) -> None:
        if type(body) is not dict:
            raise EncodeError(f"{path or 'body'}: expected a dict, got {type(body).__name__}")
        if len(body) > field_count or not known_names.issuperset(body):
            check_extra(body)
        for step in enc_steps:
            step(out, body)

    n_steps = len(dec_steps)
    if n_steps == 1:
        only = dec_steps[0]

        def dec_struct(buf: bytes, pos: int) -> tuple[Any, int]:
            d: Body = {}
            pos = only(buf, pos, d)
            return d, pos
    else:

        def dec_struct(buf: bytes, pos: int) -> tuple[Any, int]:
            d: Body = {}
            for step in dec_steps:
                pos = step(buf, pos, d)
            return d, pos

    return _Plan(enc_struct, dec_struct, min_size)


def _fused_steps(
    group: list[FieldDef], version: int, path: str
) -> tuple[Callable[[bytearray, Body], None], Callable[[bytes, int, Body], int], int]:
    fmt = ">" + "".join(_FIXED_FORMAT.get(f.type, "16s") for f in group)
    s = struct.Struct(fmt)
    pack, unpack_from, size = s.pack, s.unpack_from, s.size
    names = tuple(f.name for f in group)
    pairs = tuple((f.name, f.default_value(version)) for f in group)
    checks = [(f.name, _check_value(f, f"{path}.{f.name}" if path else f.name)) for f in group]
    first = f"{path}.{names[0]}" if path else names[0]
    uuid_at = tuple(i for i, f in enumerate(group) if f.type == "uuid")

    if uuid_at:
        plain = _fused_steps_plain(group, names, pairs, checks, first, fmt, pack, unpack_from, size, uuid_at)
        return plain[0], plain[1], size

    def enc(out: bytearray, body: Body) -> None:
        get = body.get
        try:
            out += pack(*[get(n, d) for n, d in pairs])
        except struct.error:
            # Find which field is wrong for a precise message (slow path only).
            for n, chk in checks:
                if chk is not None:
                    chk(get(n, dict(pairs)[n]))
            raise EncodeError(f"{first}: values {[get(n, d) for n, d in pairs]!r} do not fit {fmt}") from None

    if len(names) == 1:
        only = names[0]

        def dec1(buf: bytes, pos: int, d: Body) -> int:
            try:
                d[only] = unpack_from(buf, pos)[0]
            except struct.error:
                raise _truncated(first, pos, size, len(buf) - pos) from None
            return pos + size

        return enc, dec1, size

    def dec(buf: bytes, pos: int, d: Body) -> int:
        try:
            vals = unpack_from(buf, pos)
        except struct.error:
            raise _truncated(first, pos, size, len(buf) - pos) from None
        d.update(zip(names, vals, strict=True))
        return pos + size

    return enc, dec, size


def _fused_steps_plain(
    group: list[FieldDef],
    names: tuple[str, ...],
    pairs: tuple[tuple[str, Any], ...],
    checks: list[tuple[str, Callable[[Any], None] | None]],
    first: str,
    fmt: str,
    pack: Any,
    unpack_from: Any,
    size: int,
    uuid_at: tuple[int, ...],
) -> tuple[Callable[[bytearray, Body], None], Callable[[bytes, int, Body], int]]:
    """A fixed-width run that includes uuids (packed as 16s, converted on the way in and out)."""
    uuid_names = frozenset(names[i] for i in uuid_at)
    conv = tuple((n, d, n in uuid_names) for n, d in pairs)

    def enc(out: bytearray, body: Body) -> None:
        get = body.get
        try:
            out += pack(*[get(n, d).bytes if is_uuid else get(n, d) for n, d, is_uuid in conv])
        except (struct.error, AttributeError):
            for n, chk in checks:
                if chk is not None:
                    chk(get(n, dict(pairs)[n]))
            for n in uuid_names:
                if not isinstance(get(n, None) or _ZERO_UUID, uuid.UUID):
                    raise EncodeError(f"{first}: {n} must be a uuid.UUID") from None
            raise EncodeError(f"{first}: values do not fit {fmt}") from None

    def dec(buf: bytes, pos: int, d: Body) -> int:
        try:
            vals = list(unpack_from(buf, pos))
        except struct.error:
            raise _truncated(first, pos, size, len(buf) - pos) from None
        for i in uuid_at:
            vals[i] = _new_uuid(vals[i])
        d.update(zip(names, vals, strict=True))
        return pos + size

    return enc, dec


def _single_steps(
    f: FieldDef, version: int, flexible: bool, path: str
) -> tuple[Callable[[bytearray, Body], None], Callable[[bytes, int, Body], int], int]:
    fe, fdec, size = _field_codec(f, version, flexible, path)
    name = f.name
    where = f"{path}.{name}" if path else name
    default = f.default_value(version)
    mutable_default = isinstance(default, list | dict)

    def enc(out: bytearray, body: Body) -> None:
        v = body.get(name, default)
        if mutable_default and v is default:
            v = copy_default(default)
        try:
            fe(out, v)
        except EncodeError:
            raise
        except Exception as exc:
            raise EncodeError(f"{where}: cannot encode {v!r}: {exc}") from None

    def dec(buf: bytes, pos: int, d: Body) -> int:
        d[name], pos = fdec(buf, pos)
        return pos

    return enc, dec, size


# --------------------------------------------------------------------------------------------- registry


@cache
def _messages() -> dict[str, MessageDef]:
    return load_all()


@cache
def _apis() -> dict[int, tuple[MessageDef, MessageDef]]:
    reqs = {m.api_key: m for m in _messages().values() if m.type == "request"}
    resps = {m.api_key: m for m in _messages().values() if m.type == "response"}
    out = {}
    for key, req in reqs.items():
        if key not in resps:
            raise ValueError(f"{req.name} has no matching response definition")
        assert key is not None
        out[key] = (req, resps[key])
    return out


def _message(name: str) -> MessageDef:
    try:
        return _messages()[name]
    except KeyError:
        raise KeyError(f"no message definition named {name!r}") from None


@cache
def interpreted_plan(name: str, version: int) -> _Plan:
    """The interpreter's encoder/decoder of message ``name`` at ``version``: the reference behaviour,
    and the one that names the field at fault when bytes or a body are wrong."""
    md = _message(name)
    if version not in md.valid:
        raise ValueError(f"{name} has no version {version} (valid: {md.valid})")
    return _struct_plan(tuple(md.fields), version, version in md.flexible, "")


@cache
def generated_plan(name: str, version: int) -> _Plan:
    """The generated encoder/decoder (``codegen``) alone: a fast path that may raise anything where the
    interpreter raises a precise error, or leave a body to it (see ``codegen``)."""
    md = _message(name)
    slow = interpreted_plan(name, version)
    enc, dec = codegen.struct_codec(md.fields, version, version in md.flexible, f"{name} v{version}")
    return _Plan(enc, dec, slow.min_size)


@cache
def plan(name: str, version: int) -> _Plan:
    """The encoder/decoder of message ``name`` at ``version``: generated code, with the interpreter
    taking over (from the start of the struct) wherever the generated code gives up."""
    slow = interpreted_plan(name, version)
    fast = generated_plan(name, version)
    fast_enc, fast_dec, slow_enc, slow_dec = fast.enc, fast.dec, slow.enc, slow.dec

    def enc(out: bytearray, body: Any) -> None:
        start = len(out)
        try:
            fast_enc(out, body)
        except Exception:
            del out[start:]  # whatever the fast path wrote before it gave up
            slow_enc(out, body)

    def dec(buf: bytes, pos: int) -> tuple[Any, int]:
        try:
            return fast_dec(buf, pos)
        except Exception:
            return slow_dec(buf, pos)

    return _Plan(enc, dec, slow.min_size)


def message_names() -> list[str]:
    return sorted(_messages())


def message_def(name: str) -> MessageDef:
    return _message(name)


def api_keys() -> list[int]:
    return sorted(_apis())


def api_name(api_key: int) -> str:
    """``52`` -> ``"Vote"``."""
    try:
        return _apis()[api_key][0].name.removesuffix("Request")
    except KeyError:
        raise KeyError(f"unknown api key {api_key}") from None


@cache
def api_key_of(name: str) -> int:
    """``"Vote"`` (or ``"VoteRequest"``/``"VoteResponse"``) -> ``52``."""
    base = name.removesuffix("Request").removesuffix("Response")
    for key, (req, _) in _apis().items():
        if req.name == base + "Request":
            return key
    raise KeyError(f"unknown api {name!r}")


@cache
def supported_versions(api_key: int) -> tuple[int, int]:
    """The (min, max) versions both the request and response definitions cover."""
    try:
        req, resp = _apis()[api_key]
    except KeyError:
        raise KeyError(f"unknown api key {api_key}") from None
    r = req.valid.intersect(resp.valid)
    return r.lo, r.hi


def _is_flexible(api_key: int, version: int) -> bool:
    return version in _apis()[api_key][0].flexible


def request_header_version(api_key: int, version: int) -> int:
    """2 for flexible request versions, else 1."""
    return 2 if _is_flexible(api_key, version) else 1


def response_header_version(api_key: int, version: int) -> int:
    """1 for flexible response versions, else 0; ApiVersions responses always use v0 so that a client
    that does not know the server's versions can still read the header (KIP-511)."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if version in _apis()[api_key][1].flexible else 0


def _check_api(api_key: int, version: int) -> None:
    if api_key not in _apis():
        raise ValueError(f"unknown api key {api_key}")
    lo, hi = supported_versions(api_key)
    if not lo <= version <= hi:
        raise ValueError(f"{api_name(api_key)} has no version {version} (supported {lo}-{hi})")


# --------------------------------------------------------------------------------------------- public API


# Whole-frame generated functions per supported (api key, version), made at first use. Each is tried
# first; on any exception the interpreter redoes the frame (and raises the precise error, if any).
_REQUEST_ENCODERS: dict[tuple[int, int], Callable[[int, str | None, Body], bytes]] = {}
_RESPONSE_ENCODERS: dict[tuple[int, int], Callable[[int, Body], bytes]] = {}
_REQUEST_DECODERS: dict[tuple[int, int], Callable[[bytes], tuple[Body, Body]]] = {}
_RESPONSE_DECODERS: dict[tuple[int, int], Callable[[bytes], tuple[Body, Body]]] = {}
_API_AND_VERSION = struct.Struct(">hh")


def _supported(api_key: int, version: int) -> bool:
    if api_key not in _apis():
        return False
    lo, hi = supported_versions(api_key)
    return lo <= version <= hi


def message_struct(name: str, version: int) -> tuple[list[FieldDef], int, bool]:
    """(fields, version, flexible) of message ``name`` at ``version``: what ``codegen`` and ``binding``
    generate code from."""
    md = _message(name)
    return md.fields, version, version in md.flexible


def _generated(cache: dict[tuple[int, int], Any], api_key: int, version: int, which: str) -> Any:
    """The generated frame function ``which`` for (api_key, version), or None if that pair is not served."""
    if not _supported(api_key, version):
        return None
    req, resp = _apis()[api_key]
    label = f"{api_name(api_key)} v{version} {which}"
    req_header = message_struct("RequestHeader", request_header_version(api_key, version))
    resp_header = message_struct("ResponseHeader", response_header_version(api_key, version))
    if which == "request encoder":
        fn: Any = codegen.request_encoder(req_header, message_struct(req.name, version), api_key, label)
    elif which == "response encoder":
        fn = codegen.response_encoder(resp_header, message_struct(resp.name, version), label)
    elif which == "request decoder":
        fn = codegen.frame_decoder(req_header, message_struct(req.name, version), label)
    else:
        fn = codegen.frame_decoder(resp_header, message_struct(resp.name, version), label)
    cache[(api_key, version)] = fn
    return fn


def precompile(api_keys: Iterable[int] | None = None, all_versions: bool = False) -> None:
    """Generate now what the first frame of each API version would otherwise generate (``api_keys``,
    default every API served; the newest version of each, which peers of the same software negotiate,
    or ``all_versions``). A server calls this before it listens, so no request in a steady load pays for
    it: one API version's frame functions take milliseconds to generate, a stall that the writes behind
    it queued for (the p99.9 of bench_cluster's paced run)."""
    for api_key in sorted(_apis()) if api_keys is None else api_keys:
        lo, hi = supported_versions(api_key)
        req, resp = _apis()[api_key]
        for version in range(lo if all_versions else hi, hi + 1):
            plan(req.name, version)
            plan(resp.name, version)
            for frames, which in ((_REQUEST_ENCODERS, "request encoder"), (_RESPONSE_ENCODERS, "response encoder"),
                                  (_REQUEST_DECODERS, "request decoder"), (_RESPONSE_DECODERS, "response decoder")):
                if (api_key, version) not in frames:
                    _generated(frames, api_key, version, which)


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: Body
) -> bytes:
    """A whole request frame: 4-byte length, request header, body."""
    fast = _REQUEST_ENCODERS.get((api_key, version)) or _generated(
        _REQUEST_ENCODERS, api_key, version, "request encoder")
    if fast is not None:
        try:
            return fast(correlation_id, client_id, body)
        except Exception:
            pass
    return _encode_request_interpreted(api_key, version, correlation_id, client_id, body)


def _encode_request_interpreted(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: Body
) -> bytes:
    _check_api(api_key, version)
    out = bytearray(b"\x00\x00\x00\x00")
    hv = request_header_version(api_key, version)
    interpreted_plan("RequestHeader", hv).enc(
        out,
        {
            "RequestApiKey": api_key,
            "RequestApiVersion": version,
            "CorrelationId": correlation_id,
            "ClientId": client_id,
        },
    )
    interpreted_plan(_apis()[api_key][0].name, version).enc(out, body)
    out[0:4] = INT32.pack(len(out) - 4)
    return bytes(out)


def encode_response(api_key: int, version: int, correlation_id: int, body: Body) -> bytes:
    """A whole response frame: 4-byte length, response header, body."""
    fast = _RESPONSE_ENCODERS.get((api_key, version)) or _generated(
        _RESPONSE_ENCODERS, api_key, version, "response encoder")
    if fast is not None:
        try:
            return fast(correlation_id, body)
        except Exception:
            pass
    return _encode_response_interpreted(api_key, version, correlation_id, body)


def encode_response_body(api_key: int, version: int, body: Body) -> bytes:
    """The body part of :func:`encode_response`'s frame, to frame for several requests with
    :func:`frame_response` (a leader answering every follower's Fetch with the same data)."""
    _check_api(api_key, version)
    out = bytearray()
    plan(_apis()[api_key][1].name, version).enc(out, body)
    return bytes(out)


_HEADER_SUFFIXES: dict[tuple[int, int], bytes] = {}
_LENGTH_AND_CORRELATION = struct.Struct(">ii")


def _header_suffix(api_key: int, version: int) -> bytes:
    """What the response header holds after its CorrelationId (the same for every id: no tagged fields)."""
    suffix = _HEADER_SUFFIXES.get((api_key, version))
    if suffix is None:
        _check_api(api_key, version)
        hp = plan("ResponseHeader", response_header_version(api_key, version))
        headers = []
        for corr in (0, -1):
            out = bytearray()
            hp.enc(out, {"CorrelationId": corr})
            headers.append(bytes(out))
        # The schema's header must be CorrelationId first and nothing else that depends on it.
        assert headers[0][:4] == INT32.pack(0) and headers[1][:4] == INT32.pack(-1)
        assert headers[0][4:] == headers[1][4:]
        suffix = _HEADER_SUFFIXES[(api_key, version)] = headers[0][4:]
    return suffix


def frame_response(api_key: int, version: int, correlation_id: int, encoded_body: bytes) -> bytes:
    """``encode_response(api_key, version, correlation_id, body)`` from ``encode_response_body(...)`` of
    that body: length prefix and header written here, the body's bytes reused."""
    suffix = _HEADER_SUFFIXES.get((api_key, version))
    if suffix is None:
        suffix = _header_suffix(api_key, version)
    size = 4 + len(suffix) + len(encoded_body)
    try:
        head = _LENGTH_AND_CORRELATION.pack(size, correlation_id)
    except struct.error:
        raise EncodeError(f"CorrelationId: {correlation_id!r} does not fit int32") from None
    return b"".join((head, suffix, encoded_body))


def _encode_response_interpreted(api_key: int, version: int, correlation_id: int, body: Body) -> bytes:
    _check_api(api_key, version)
    out = bytearray(b"\x00\x00\x00\x00")
    interpreted_plan("ResponseHeader", response_header_version(api_key, version)).enc(
        out, {"CorrelationId": correlation_id}
    )
    interpreted_plan(_apis()[api_key][1].name, version).enc(out, body)
    out[0:4] = INT32.pack(len(out) - 4)
    return bytes(out)


def _as_bytes(payload: bytes | bytearray | memoryview) -> bytes:
    # Decoders index, slice and unpack_from; all three work on bytes, bytearray and byte memoryviews
    # alike, so a memoryview is read in place (bytes fields copy their own slice out).
    if type(payload) is memoryview and payload.format == "B" and payload.ndim == 1:
        return payload  # type: ignore[return-value]
    return payload if type(payload) is bytes else bytes(payload)


def _finish(name: str, buf: bytes, pos: int) -> None:
    if pos != len(buf):
        raise DecodeError(name, pos, f"{len(buf) - pos} unexpected trailing bytes")


def decode_request(payload: bytes | bytearray | memoryview) -> tuple[Body, Body]:
    """Decode a request (the bytes after the length prefix) into (header, body).

    An unknown api key or unsupported version raises :class:`UnsupportedVersionError` carrying the api
    key, version and correlation id so that the caller can still answer UNSUPPORTED_VERSION.
    """
    buf = _as_bytes(payload)
    if len(buf) >= 8:
        key = _API_AND_VERSION.unpack_from(buf, 0)
        fast = _REQUEST_DECODERS.get(key) or _generated(_REQUEST_DECODERS, key[0], key[1], "request decoder")
        if fast is not None:
            try:
                return fast(buf)
            except Exception:
                pass
    return _decode_request_interpreted(buf)


def _decode_request_interpreted(buf: bytes) -> tuple[Body, Body]:
    if len(buf) < 8:
        raise DecodeError("RequestHeader", 0, f"needs at least 8 bytes, got {len(buf)}")
    api_key, version, correlation_id = struct.unpack_from(">hhi", buf, 0)
    apis = _apis()
    if api_key not in apis:
        raise UnsupportedVersionError(api_key, version, correlation_id, f"unknown api key {api_key}")
    lo, hi = supported_versions(api_key)
    if not lo <= version <= hi:
        raise UnsupportedVersionError(
            api_key,
            version,
            correlation_id,
            f"{api_name(api_key)} version {version} is not supported ({lo}-{hi})",
        )
    header, pos = interpreted_plan("RequestHeader", request_header_version(api_key, version)).dec(buf, 0)
    req_name = apis[api_key][0].name
    body, pos = interpreted_plan(req_name, version).dec(buf, pos)
    _finish(req_name, buf, pos)
    return header, body


def decode_response(api_key: int, version: int, payload: bytes | bytearray | memoryview) -> tuple[int, Body]:
    """Decode a response (the bytes after the length prefix) to a request we sent at ``version``."""
    buf = _as_bytes(payload)
    fast = _RESPONSE_DECODERS.get((api_key, version)) or _generated(
        _RESPONSE_DECODERS, api_key, version, "response decoder")
    if fast is not None:
        try:
            header, body = fast(buf)
            return int(header["CorrelationId"]), body
        except Exception:
            pass
    _check_api(api_key, version)
    try:
        return _decode_response(api_key, version, buf)
    except DecodeError:
        # A server that does not know our ApiVersions version answers at v0 with UNSUPPORTED_VERSION
        # (KIP-511); like Kafka's clients, fall back to reading v0 when the requested version fails.
        if api_key != API_VERSIONS_KEY or version == 0:
            raise
        try:
            return _decode_response(api_key, 0, buf)
        except DecodeError:
            pass
        raise


def _decode_response(api_key: int, version: int, buf: bytes) -> tuple[int, Body]:
    header, pos = interpreted_plan("ResponseHeader", response_header_version(api_key, version)).dec(buf, 0)
    resp_name = _apis()[api_key][1].name
    body, pos = interpreted_plan(resp_name, version).dec(buf, pos)
    _finish(resp_name, buf, pos)
    return int(header["CorrelationId"]), body


def encode_data(name: str, version: int, body: Body) -> bytes:
    """Encode a data-type message (control record value, QuorumStateData, metadata record body)."""
    out = bytearray()
    plan(name, version).enc(out, body)
    return bytes(out)


def decode_data(name: str, version: int, data: bytes | bytearray | memoryview) -> Body:
    buf = _as_bytes(data)
    try:
        p = plan(name, version)
    except (KeyError, ValueError) as exc:
        raise DecodeError(name, 0, str(exc)) from None
    body, pos = p.dec(buf, 0)
    _finish(name, buf, pos)
    return body


# Metadata records are framed in the log as: frame version (uvarint, 1), api key (uvarint),
# record version (uvarint), then the record body (Kafka's MetadataRecordSerde layout).
_METADATA_FRAME_VERSION = 1


@cache
def _metadata_by_key() -> dict[int, MessageDef]:
    return {m.api_key: m for m in _messages().values() if m.type == "metadata" and m.api_key is not None}


def encode_metadata_record(name: str, version: int, body: Body) -> bytes:
    md = _message(name)
    if md.type != "metadata" or md.api_key is None:
        raise ValueError(f"{name} is not a metadata record")
    out = bytearray()
    write_uvarint(out, _METADATA_FRAME_VERSION)
    write_uvarint(out, md.api_key)
    write_uvarint(out, version)
    plan(name, version).enc(out, body)
    return bytes(out)


def decode_metadata_record(data: bytes | bytearray | memoryview) -> tuple[str, int, Body]:
    """Decode a framed metadata record value into (record name, version, body)."""
    buf = _as_bytes(data)
    frame, pos = read_uvarint(buf, 0, "metadata frame version")
    if frame != _METADATA_FRAME_VERSION:
        raise DecodeError("metadata frame version", 0, f"unsupported frame version {frame}")
    key, pos = read_uvarint(buf, pos, "metadata record api key")
    version, vpos = read_uvarint(buf, pos, "metadata record version")
    md = _metadata_by_key().get(key)
    if md is None:
        raise DecodeError("metadata record api key", pos, f"unknown metadata record type {key}")
    if version not in md.valid:
        raise DecodeError("metadata record version", pos, f"{md.name} has no version {version}")
    body, end = plan(md.name, version).dec(buf, vpos)
    _finish(md.name, buf, end)
    return md.name, version, body


def api_versions_body(error_code: int = 0) -> Body:
    """An ApiVersions response body listing every api this codec speaks."""
    return {
        "ErrorCode": int(error_code),
        "ApiKeys": [
            {"ApiKey": k, "MinVersion": supported_versions(k)[0], "MaxVersion": supported_versions(k)[1]}
            for k in api_keys()
        ],
        "ThrottleTimeMs": 0,
    }


def unsupported_version_response(api_key: int, version: int, correlation_id: int) -> bytes:
    """The frame a server sends for a request at an unsupported version.

    For ApiVersions, Kafka answers at version 0 with UNSUPPORTED_VERSION and its supported ranges so the
    client can retry at a version both sides know (KIP-511). Other apis have no version-neutral response
    format; the caller should close the connection (what Kafka does), so this raises for them.
    """
    if api_key != API_VERSIONS_KEY:
        raise ValueError(
            f"api key {api_key} v{version}: only ApiVersions has a version-independent error response; "
            "close the connection instead"
        )
    return encode_response(API_VERSIONS_KEY, 0, correlation_id, api_versions_body(Errors.UNSUPPORTED_VERSION))


__all__ = [
    "UNKNOWN_TAGGED",
    "EncodeError",
    "api_key_of",
    "api_keys",
    "api_name",
    "api_versions_body",
    "decode_data",
    "decode_metadata_record",
    "decode_request",
    "decode_response",
    "encode_data",
    "encode_metadata_record",
    "encode_request",
    "encode_response",
    "encode_response_body",
    "frame_response",
    "generated_plan",
    "interpreted_plan",
    "message_def",
    "message_names",
    "plan",
    "request_header_version",
    "response_header_version",
    "supported_versions",
    "unsupported_version_response",
]
