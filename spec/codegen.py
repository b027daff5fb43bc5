"""Straight-line Python encoders/decoders generated from ``spec/messages/*.json``, as Kafka generates
its Java message classes.

:mod:`kraft_tck.spec.codec` interprets the definitions: each field is a closure and each struct a loop
over them, which costs one or more Python calls per field. Here each (message, version) becomes the
source of one encoder and one decoder function, nested structs and arrays inlined, fixed-width runs
packed/unpacked by one :class:`struct.Struct` call, no per-field calls. The source is built at first use
from the same definitions (nothing generated is checked in) and compiled with :func:`exec`.

The generated code is a fast path only. It produces the same bytes and the same dicts (same keys in
the same order) as the interpreter, and it fails wherever the interpreter fails, but not with the same
error: any exception it raises means "not here", and the caller (``codec``) runs the interpreter, which
either raises the precise :class:`DecodeError`/``EncodeError`` naming the field or handles the rare
body the fast path leaves to it (keys the version does not have, unknown tagged fields to write back).
``tests/spec/test_codegen.py`` checks both claims on every message and version.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from typing import Any

from kraft_tck.spec.primitives import (
    FIXED_FORMAT,
    INT16,
    INT32,
    copy_default,
    new_uuid,
    read_uvarint,
    uvarint_bytes,
    write_uvarint,
)
from kraft_tck.spec.schema import FieldDef

#: (out, body) -> None, appending the encoded body to ``out``.
StructEncoder = Callable[[bytearray, Any], None]
#: (buf, pos) -> (body, new pos).
StructDecoder = Callable[[Any, int], tuple[Any, int]]


class Fallback(Exception):
    """Raised by generated code where the interpreter must decide (and raise the precise error)."""


_BASE_NAMESPACE: dict[str, Any] = {
    "Fallback": Fallback,
    "read_uvarint": read_uvarint,
    "uvarint_bytes": uvarint_bytes,
    "write_uvarint": write_uvarint,
    "new_uuid": new_uuid,
    "copy_default": copy_default,
    "i16_pack": INT16.pack,
    "i32_pack": INT32.pack,
    "i16_unpack_from": INT16.unpack_from,
    "i32_unpack_from": INT32.unpack_from,
}


def _is_fixed(f: FieldDef) -> bool:
    return not f.is_array and (f.type in FIXED_FORMAT or f.type == "uuid")


def _split(fields: list[FieldDef], version: int) -> tuple[list[FieldDef], list[FieldDef]]:
    """(regular fields in definition order, tagged fields in tag order) present at ``version``."""
    present = [f for f in fields if version in f.versions]
    regular = [f for f in present if version not in f.tagged]
    tagged = sorted((f for f in present if version in f.tagged), key=lambda f: f.tag or 0)
    return regular, tagged


def _runs(regular: list[FieldDef]) -> list[list[FieldDef] | FieldDef]:
    """Consecutive fixed-width fields grouped into runs, as the interpreter groups them."""
    groups: list[list[FieldDef] | FieldDef] = []
    for f in regular:
        if _is_fixed(f):
            if groups and isinstance(groups[-1], list):
                groups[-1].append(f)
            else:
                groups.append([f])
        else:
            groups.append(f)
    return groups


class _Source:
    """One generated function: lines, fresh local names and the constants it refers to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = dict(_BASE_NAMESPACE)
        self._n = 0
        self._consts: dict[tuple[str, Any], str] = {}
        self._last_bytes: tuple[int, int, str, bytes] | None = None  # emit_bytes: (lines then, indent, out, raw)

    def var(self, prefix: str = "v") -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def const(self, value: Any, prefix: str = "k") -> str:
        """A name bound to ``value`` in the function's globals (shared for equal hashable values)."""
        try:
            # repr for floats: 0.0 == -0.0 but they encode differently.
            key: tuple[str, Any] = (type(value).__name__, repr(value) if type(value) is float else value)
            hash(key)
        except TypeError:
            key = ("id", id(value))
        name = self._consts.get(key)
        if name is None:
            name = self._consts[key] = self.var(prefix)
            self.namespace[name] = value
        return name

    def literal(self, value: Any) -> str:
        """Source for ``value``: inline for None/bool/int/str, a constant otherwise."""
        if value is None or type(value) in (bool, int, str):
            return repr(value)
        return self.const(value, "dflt")

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def emit_bytes(self, indent: int, out: str, raw: bytes) -> None:
        """``out += raw``, merged with the line before when that one appended constant bytes to ``out`` in
        the same block too: one append per run of constant fields, however many fields it holds."""
        prev = self._last_bytes
        if prev is not None and prev[0] == len(self.lines) and prev[1:3] == (indent, out):
            self.lines.pop()
            raw = prev[3] + raw
        self.emit(indent, f"{out} += {repr(raw) if len(raw) <= 16 else self.const(raw, 'raw')}")
        self._last_bytes = (len(self.lines), indent, out, raw)

    def compile(self, name: str, label: str) -> Any:
        code = "\n".join(self.lines) + "\n"
        exec(compile(code, f"<codegen {label}: {name}>", "exec"), self.namespace)
        fn = self.namespace[name]
        fn.__source__ = code  # for reading and debugging
        return fn


@functools.lru_cache(maxsize=256)
def compiled_maker(text: str, label: str) -> Callable[..., Any]:
    """The ``make`` function that generated source ``text`` defines, compiled once per text (bounded): template
    readers and writers (``binding``, ``records``) name their offsets and constants as ``make``'s arguments, so the
    templates of one structure share one compiled source whatever their lengths."""
    namespace: dict[str, Any] = {}
    exec(compile(text, f"<{label}>", "exec"), namespace)  # (our own generated source)
    return namespace["make"]


def _compact(fd: FieldDef, version: int, flexible: bool) -> bool:
    return flexible and (fd.flexible_override is None or version in fd.flexible_override)


def _min_size(fields: list[FieldDef], version: int, flexible: bool) -> int:
    """The fewest bytes a struct can take (the interpreter's bound for array counts)."""
    regular, _ = _split(fields, version)
    total = 1 if flexible else 0
    for f in regular:
        total += _field_min(f, version, flexible)
    return total


def _field_min(f: FieldDef, version: int, flexible: bool) -> int:
    compact = _compact(f, version, flexible)
    if f.is_array:
        return 1 if compact else 4
    if f.is_struct:
        assert f.fields is not None
        return 1 if version in f.nullable else _min_size(f.fields, version, flexible)
    if f.type in FIXED_FORMAT:
        return struct.calcsize(">" + FIXED_FORMAT[f.type])
    if f.type == "uuid":
        return 16
    if f.type == "string":
        return 1 if compact else 2
    return 1 if compact else 4  # bytes, records


# ============================================================================================== encode


class _Encoder:
    def __init__(self, src: _Source) -> None:
        self.s = src

    def struct(self, fields: list[FieldDef], version: int, flexible: bool, b: str, o: str, ind: int,
               values: dict[str, str] | None = None) -> None:
        """Append struct ``b`` to bytearray ``o``. With ``values`` (field name -> source expression) the
        fields come from those expressions instead of a body dict (headers built by the codec itself)."""
        s = self.s
        regular, tagged = _split(fields, version)
        g = ""
        if values is None:
            known = frozenset(f.name for f in regular + tagged)
            # A key this version lacks (maybe ignorable) or unknown tagged fields: the interpreter decides.
            s.emit(ind, f"if type({b}) is not dict or not {s.const(known, 'known')}.issuperset({b}):")
            s.emit(ind + 1, "raise Fallback")
            g = s.var("get")
            s.emit(ind, f"{g} = {b}.get")

        def value_of(f: FieldDef, default: str | None = None) -> str:
            default = default or s.literal(f.default_value(version))
            if values is not None:
                return values.get(f.name) or default
            return f"{g}({f.name!r}, {default})"

        for grp in _runs(regular):
            if isinstance(grp, list):
                fmt = ">" + "".join(FIXED_FORMAT.get(f.type, "16s") for f in grp)
                pack = s.const(struct.Struct(fmt).pack, "pack")
                args = ", ".join(value_of(f) + (".bytes" if f.type == "uuid" else "") for f in grp)
                s.emit(ind, f"{o} += {pack}({args})")
            else:
                v = value_of(grp)
                if not v.isidentifier():  # a lookup or a literal: evaluated once, into a local
                    v = s.var()
                    s.emit(ind, f"{v} = {value_of(grp)}")
                self.value(grp, version, flexible, v, o, ind)
        if flexible:
            self.tags(tagged, version, value_of, o, ind)

    def tags(self, tagged: list[FieldDef], version: int, value_of: Callable[[FieldDef, str], str], o: str,
             ind: int) -> None:
        s = self.s
        if not tagged:
            s.emit_bytes(ind, o, b"\x00")
            return
        # Known tags only (unknown ones send the body to the interpreter), so the fields' order is the
        # tag order, their count fits one byte and each tag's varint is a constant.
        assert len(tagged) < 128
        tmps = []
        for f in tagged:
            v, tmp = s.var(), s.var("tmp")
            tmps.append(tmp)
            # One default object for the lookup and the test, as the interpreter has (``is`` matters
            # for a NaN default).
            default = s.const(f.default_value(version), "dflt")
            s.emit(ind, f"{v} = {value_of(f, default)}")
            # The interpreter's rule: a tagged field is written unless it holds its default or null.
            s.emit(ind, f"if {v} is {default} or {v} is None or {v} == {default}:")
            s.emit(ind + 1, f"{tmp} = None")
            s.emit(ind, "else:")
            s.emit(ind + 1, f"{tmp} = bytearray()")
            self.value(f, version, True, v, tmp, ind + 1)
        self.write_tags(tagged, tmps, o, ind)

    def write_tags(self, tagged: list[FieldDef], tmps: list[str], o: str, ind: int,
                   direct: dict[str, tuple[int, Callable[[int], None]]] | None = None) -> None:
        """The tagged-field section from each field's encoded value (``tmps``: locals holding a bytearray,
        or None for a field not written): the count, then tag, size and value of each, in tag order.
        A tmp named in ``direct`` holds instead whether its field is written, and the field's value, always
        ``size`` bytes, is written straight to ``o`` by ``emit(indent)``: no buffer to measure."""
        s = self.s
        direct = direct or {}
        s.emit(ind, f"{o}.append({' + '.join(t if t in direct else f'({t} is not None)' for t in tmps)})")
        for f, tmp in zip(tagged, tmps, strict=True):
            assert f.tag is not None
            if tmp in direct:
                size, emit = direct[tmp]
                s.emit(ind, f"if {tmp}:")
                s.emit_bytes(ind + 1, o, uvarint_bytes(f.tag) + uvarint_bytes(size))
                emit(ind + 1)
                continue
            s.emit(ind, f"if {tmp} is not None:")
            s.emit(ind + 1, f"{o} += {uvarint_bytes(f.tag)!r}")
            self.length(f"len({tmp})", False, o, ind + 1, varint=True)
            s.emit(ind + 1, f"{o} += {tmp}")

    def length(self, n_expr: str, compact: bool, o: str, ind: int, int16: bool = False,
               varint: bool = False) -> None:
        """A length/count prefix: uvarint of n+1 when compact (of n with ``varint``), else int16/int32 of n."""
        s = self.s
        if compact or varint:
            n = s.var("n")
            s.emit(ind, f"{n} = {n_expr}{'' if varint else ' + 1'}")
            s.emit(ind, f"if {n} < 128:")
            s.emit(ind + 1, f"{o}.append({n})")
            # Two bytes inline too (a Fetch answer's records, on every commit), longer ones by the writer.
            s.emit(ind, f"elif {n} < 16384:")
            s.emit(ind + 1, f"{o} += bytes((({n} & 127) | 128, {n} >> 7))")
            s.emit(ind, "else:")
            s.emit(ind + 1, f"{o} += uvarint_bytes({n})")
        else:
            s.emit(ind, f"{o} += {'i16_pack' if int16 else 'i32_pack'}({n_expr})")

    def value(self, f: FieldDef, version: int, flexible: bool, v: str, o: str, ind: int) -> None:
        """Append field value ``v`` (not its tag wrapper)."""
        s = self.s
        compact = _compact(f, version, flexible)
        nullable = version in f.nullable
        if f.is_array:
            self.null_or(v, nullable, b"\x00" if compact else b"\xff\xff\xff\xff", o, ind)
            self.length(f"len({v})", compact, o, ind + 1)
            item = s.var("item")
            s.emit(ind + 1, f"for {item} in {v}:")
            if f.is_struct:
                assert f.fields is not None
                self.struct(f.fields, version, flexible, item, o, ind + 2)
            else:
                self.primitive(f.element_type, compact, False, item, o, ind + 2)
            return
        if f.is_struct:
            assert f.fields is not None
            if nullable:
                s.emit(ind, f"if {v} is None:")
                s.emit_bytes(ind + 1, o, b"\xff")
                s.emit(ind, "else:")
                s.emit_bytes(ind + 1, o, b"\x01")
                self.struct(f.fields, version, flexible, v, o, ind + 1)
            else:
                self.struct(f.fields, version, flexible, v, o, ind)
            return
        self.primitive(f.type, compact, nullable, v, o, ind)

    def null_or(self, v: str, nullable: bool, null: bytes, o: str, ind: int) -> None:
        """Opens ``if v is None: <null marker> else:`` (the caller emits the else body at ind + 1)."""
        s = self.s
        s.emit(ind, f"if {v} is None:")
        if nullable:
            s.emit_bytes(ind + 1, o, null)
        else:
            s.emit(ind + 1, "raise Fallback")
        s.emit(ind, "else:")

    def primitive(self, ftype: str, compact: bool, nullable: bool, v: str, o: str, ind: int) -> None:
        s = self.s
        if ftype in FIXED_FORMAT:
            pack = s.const(struct.Struct(">" + FIXED_FORMAT[ftype]).pack, "pack")
            s.emit(ind, f"{o} += {pack}({v})")
        elif ftype == "uuid":
            s.emit(ind, f"{o} += {v}.bytes")
        elif ftype == "string":
            self.null_or(v, nullable, b"\x00" if compact else b"\xff\xff", o, ind)
            e = s.var("utf8")
            s.emit(ind + 1, f"{e} = {v}.encode('utf-8')")
            if not compact:
                s.emit(ind + 1, f"if len({e}) > 32767:")
                s.emit(ind + 2, "raise Fallback")
            self.length(f"len({e})", compact, o, ind + 1, int16=True)
            s.emit(ind + 1, f"{o} += {e}")
        else:  # bytes, records
            self.null_or(v, nullable, b"\x00" if compact else b"\xff\xff\xff\xff", o, ind)
            self.length(f"len({v})", compact, o, ind + 1)
            self.note_blob(v, o, ind + 1)
            s.emit(ind + 1, f"{o} += {v}")

    def note_blob(self, v: str, o: str, ind: int) -> None:
        """Hook: bytes ``v`` are about to be appended to ``o`` (``binding`` notes where)."""


# ============================================================================================== decode


class _Decoder:
    """Emits code reading from ``buf`` (length ``L``) at ``pos``; every helper returns the local name
    holding the value it decoded."""

    def __init__(self, src: _Source) -> None:
        self.s = src

    def struct(self, fields: list[FieldDef], version: int, flexible: bool, ind: int) -> str:
        s = self.s
        regular, tagged = _split(fields, version)
        entries: list[tuple[str, str]] = []  # (field name, local) in the interpreter's key order
        for grp in _runs(regular):
            if isinstance(grp, list):
                fmt = ">" + "".join(FIXED_FORMAT.get(f.type, "16s") for f in grp)
                st = struct.Struct(fmt)
                names = [s.var() for _ in grp]
                unpack = s.const(st.unpack_from, "unpack")
                target = names[0] if len(names) == 1 else ", ".join(names)
                s.emit(ind, f"{target}{',' if len(names) == 1 else ''} = {unpack}(buf, pos)")
                s.emit(ind, f"pos += {st.size}")
                for f, n in zip(grp, names, strict=True):
                    if f.type == "uuid":
                        s.emit(ind, f"{n} = new_uuid({n})")
                    entries.append((f.name, n))
            else:
                entries.append((grp.name, self.value(grp, version, flexible, ind)))
        unknown = None
        if flexible:
            tag_entries, unknown = self.tags(tagged, version, ind)
            entries += tag_entries
        d = s.var("d")
        s.emit(ind, f"{d} = {{{', '.join(f'{name!r}: {local}' for name, local in entries)}}}")
        if unknown is not None:
            s.emit(ind, f"if {unknown} is not None:")
            s.emit(ind + 1, f"{d}['_unknown_tagged_fields'] = {unknown}")
        return d

    def fresh(self, default: Any) -> str:
        """Source building a default value: new lists and dicts each time (bodies are the caller's to
        mutate), shared immutable leaves, as the interpreter's copy."""
        if isinstance(default, list):
            return "[]"
        if isinstance(default, dict):
            return "{" + ", ".join(f"{k!r}: {self.fresh(v)}" for k, v in default.items()) + "}"
        return self.s.literal(default)

    def note_bytes(self, into: str | None, ftype: str, end: str, ind: int) -> None:
        """Hook: a bytes value is about to be read from ``[pos, end)`` into ``into`` (``binding`` notes where)."""

    def uvarint(self, ind: int) -> str:
        s = self.s
        n = s.var("n")
        s.emit(ind, f"{n} = buf[pos]")
        s.emit(ind, f"if {n} < 128:")
        s.emit(ind + 1, "pos += 1")
        # Two bytes inline (up to 16383: a Fetch answer's records length, on every commit); longer ones, and a
        # truncated one, by the interpreter's reader (an IndexError here: the caller's slow path names it).
        s.emit(ind, "elif buf[pos + 1] < 128:")
        s.emit(ind + 1, f"{n} = ({n} & 127) | (buf[pos + 1] << 7)")
        s.emit(ind + 1, "pos += 2")
        s.emit(ind, "else:")
        s.emit(ind + 1, f"{n}, pos = read_uvarint(buf, pos, '')")
        return n

    def tags(self, tagged: list[FieldDef], version: int, ind: int) -> tuple[list[tuple[str, str]], str]:
        s = self.s
        locals_: list[tuple[str, str]] = []
        for f in tagged:
            v = s.var()
            default = f.default_value(version)
            s.emit(ind, f"{v} = {self.fresh(default)}")
            locals_.append((f.name, v))
        unknown = s.var("unknown")
        s.emit(ind, f"{unknown} = None")
        tag, end = self.tag_loop(ind)
        kw = "if"
        for f, (_, local) in zip(tagged, locals_, strict=True):
            s.emit(ind + 2, f"{kw} {tag} == {f.tag}:")
            got = self.value(f, version, True, ind + 3)
            s.emit(ind + 3, f"if pos != {end}:")
            s.emit(ind + 4, "raise Fallback")
            s.emit(ind + 3, f"{local} = {got}")
            kw = "elif"
        body_ind = ind + 2
        if tagged:
            s.emit(ind + 2, "else:")
            body_ind += 1
        s.emit(body_ind, f"if {unknown} is None:")
        s.emit(body_ind + 1, f"{unknown} = {{}}")
        s.emit(body_ind, f"{unknown}[{tag}] = bytes(buf[pos:{end}])")
        s.emit(ind + 2, f"pos = {end}")
        return locals_, unknown

    def tag_loop(self, ind: int) -> tuple[str, str]:
        """Opens a tagged-field section: unless its count is 0, a loop over its (tag, size) pairs, each
        checked (inside the buffer, tags ascending). Returns the locals holding the tag and the end of its
        value; the caller emits the loop's body at ``ind + 2`` and leaves ``pos`` at that end."""
        s = self.s
        s.emit(ind, "if buf[pos] == 0:")
        s.emit(ind + 1, "pos += 1")
        s.emit(ind, "else:")
        n = self.uvarint(ind + 1)
        s.emit(ind + 1, f"if {n} * 2 > L - pos:")
        s.emit(ind + 2, "raise Fallback")
        last = s.var("last")
        s.emit(ind + 1, f"{last} = -1")
        s.emit(ind + 1, f"for _ in range({n}):")
        tag = self.uvarint(ind + 2)
        size = self.uvarint(ind + 2)
        end = s.var("end")
        s.emit(ind + 2, f"{end} = pos + {size}")
        s.emit(ind + 2, f"if {end} > L or {tag} <= {last}:")
        s.emit(ind + 3, "raise Fallback")
        s.emit(ind + 2, f"{last} = {tag}")
        return tag, end

    def count(self, compact: bool, ind: int) -> str:
        """A length/count prefix as the signed value (-1 = null)."""
        s = self.s
        if compact:
            n = self.uvarint(ind)
            s.emit(ind, f"{n} -= 1")
            return n
        n = s.var("n")
        s.emit(ind, f"{n}, = i32_unpack_from(buf, pos)")
        s.emit(ind, "pos += 4")
        return n

    def null_check(self, n: str, nullable: bool, v: str, ind: int) -> None:
        """Opens ``if n < 0: v = None (or fail) else:``; the caller emits the else body at ind + 1."""
        s = self.s
        s.emit(ind, f"if {n} < 0:")
        if nullable:
            s.emit(ind + 1, f"if {n} != -1:")
            s.emit(ind + 2, "raise Fallback")
            s.emit(ind + 1, f"{v} = None")
        else:
            s.emit(ind + 1, "raise Fallback")
        s.emit(ind, "else:")

    def value(self, f: FieldDef, version: int, flexible: bool, ind: int, into: str | None = None) -> str:
        """Reads field ``f``'s value into a fresh local, or into local ``into`` (no copy in between)."""
        s = self.s
        compact = _compact(f, version, flexible)
        nullable = version in f.nullable
        if f.is_array:
            v = into or s.var("arr")
            n = self.count(compact, ind)
            self.null_check(n, nullable, v, ind)
            if f.is_struct:
                assert f.fields is not None
                e_min = max(_min_size(f.fields, version, flexible), 1)
            else:
                e_min = max(_field_min_primitive(f.element_type, compact), 1)
            s.emit(ind + 1, f"if {n} * {e_min} > L - pos:")
            s.emit(ind + 2, "raise Fallback")
            s.emit(ind + 1, f"{v} = []")
            s.emit(ind + 1, f"for _ in range({n}):")
            if f.is_struct:
                assert f.fields is not None
                item = self.struct(f.fields, version, flexible, ind + 2)
            else:
                item = self.primitive(f.element_type, compact, False, ind + 2)
            s.emit(ind + 2, f"{v}.append({item})")
            return v
        if f.is_struct:
            assert f.fields is not None
            if not nullable:
                sub = self.struct(f.fields, version, flexible, ind)
                if into is not None:
                    s.emit(ind, f"{into} = {sub}")
                    return into
                return sub
            v = into or s.var()
            s.emit(ind, "if buf[pos] == 255:")
            s.emit(ind + 1, "pos += 1")
            s.emit(ind + 1, f"{v} = None")
            s.emit(ind, "elif buf[pos] == 1:")
            s.emit(ind + 1, "pos += 1")
            sub = self.struct(f.fields, version, flexible, ind + 1)
            s.emit(ind + 1, f"{v} = {sub}")
            s.emit(ind, "else:")
            s.emit(ind + 1, "raise Fallback")
            return v
        return self.primitive(f.type, compact, nullable, ind, into)

    def primitive(self, ftype: str, compact: bool, nullable: bool, ind: int, into: str | None = None) -> str:
        s = self.s
        v = into or s.var()
        if ftype in FIXED_FORMAT:
            st = struct.Struct(">" + FIXED_FORMAT[ftype])
            s.emit(ind, f"{v}, = {s.const(st.unpack_from, 'unpack')}(buf, pos)")
            s.emit(ind, f"pos += {st.size}")
            return v
        if ftype == "uuid":
            s.emit(ind, "if pos + 16 > L:")
            s.emit(ind + 1, "raise Fallback")
            s.emit(ind, f"{v} = new_uuid(buf[pos:pos + 16])")
            s.emit(ind, "pos += 16")
            return v
        if compact:
            n = self.count(True, ind)
        elif ftype == "string":
            n = s.var("n")
            s.emit(ind, f"{n}, = i16_unpack_from(buf, pos)")
            s.emit(ind, "pos += 2")
        else:
            n = self.count(False, ind)
        self.null_check(n, nullable, v, ind)
        end = s.var("end")
        s.emit(ind + 1, f"{end} = pos + {n}")
        s.emit(ind + 1, f"if {end} > L:")
        s.emit(ind + 2, "raise Fallback")
        if ftype == "string":
            s.emit(ind + 1, f"{v} = str(buf[pos:{end}], 'utf-8')")
        else:
            self.note_bytes(into, ftype, end, ind + 1)
            s.emit(ind + 1, f"{v} = bytes(buf[pos:{end}])")
        s.emit(ind + 1, f"pos = {end}")
        return v


def _field_min_primitive(ftype: str, compact: bool) -> int:
    if ftype in FIXED_FORMAT:
        return struct.calcsize(">" + FIXED_FORMAT[ftype])
    if ftype == "uuid":
        return 16
    if ftype == "string":
        return 1 if compact else 2
    return 1 if compact else 4


# ============================================================================================== public


def struct_codec(
    fields: list[FieldDef], version: int, flexible: bool, label: str
) -> tuple[StructEncoder, StructDecoder]:
    """The generated encoder ``(out, body)`` and decoder ``(buf, pos) -> (body, pos)`` of one struct."""
    enc_src = _Source()
    enc_src.emit(0, "def encode(out, body):")
    _Encoder(enc_src).struct(fields, version, flexible, "body", "out", 1)
    dec_src = _Source()
    dec_src.emit(0, "def decode(buf, pos):")
    dec_src.emit(1, "L = len(buf)")
    d = _Decoder(dec_src).struct(fields, version, flexible, 1)
    dec_src.emit(1, f"return {d}, pos")
    return enc_src.compile("encode", label), dec_src.compile("decode", label)


def request_encoder(
    header: tuple[list[FieldDef], int, bool], body: tuple[list[FieldDef], int, bool], api_key: int, label: str
) -> Callable[[int, str | None, Any], bytes]:
    """``(correlation_id, client_id, body) -> frame``: length prefix, request header, body."""
    h_fields, h_version, h_flexible = header
    b_fields, version, flexible = body
    src = _Source()
    src.emit(0, "def encode_request(correlation_id, client_id, body):")
    src.emit(1, "out = bytearray(b'\\x00\\x00\\x00\\x00')")
    enc = _Encoder(src)
    enc.struct(h_fields, h_version, h_flexible, "", "out", 1, values={
        "RequestApiKey": repr(api_key), "RequestApiVersion": repr(version),
        "CorrelationId": "correlation_id", "ClientId": "client_id"})
    enc.struct(b_fields, version, flexible, "body", "out", 1)
    src.emit(1, "out[0:4] = i32_pack(len(out) - 4)")
    src.emit(1, "return bytes(out)")
    fn: Callable[[int, str | None, Any], bytes] = src.compile("encode_request", label)
    return fn


def response_encoder(
    header: tuple[list[FieldDef], int, bool], body: tuple[list[FieldDef], int, bool], label: str
) -> Callable[[int, Any], bytes]:
    """``(correlation_id, body) -> frame``: length prefix, response header, body."""
    h_fields, h_version, h_flexible = header
    b_fields, version, flexible = body
    src = _Source()
    src.emit(0, "def encode_response(correlation_id, body):")
    src.emit(1, "out = bytearray(b'\\x00\\x00\\x00\\x00')")
    enc = _Encoder(src)
    enc.struct(h_fields, h_version, h_flexible, "", "out", 1, values={"CorrelationId": "correlation_id"})
    enc.struct(b_fields, version, flexible, "body", "out", 1)
    src.emit(1, "out[0:4] = i32_pack(len(out) - 4)")
    src.emit(1, "return bytes(out)")
    fn: Callable[[int, Any], bytes] = src.compile("encode_response", label)
    return fn


def frame_decoder(
    header: tuple[list[FieldDef], int, bool], body: tuple[list[FieldDef], int, bool], label: str
) -> Callable[[Any], tuple[dict[str, Any], dict[str, Any]]]:
    """``payload -> (header, body)`` for a whole request or response (no trailing bytes allowed)."""
    src = _Source()
    src.emit(0, "def decode_frame(buf):")
    src.emit(1, "L = len(buf)")
    src.emit(1, "pos = 0")
    dec = _Decoder(src)
    h = dec.struct(*header, 1)
    b = dec.struct(*body, 1)
    src.emit(1, "if pos != L:")
    src.emit(2, "raise Fallback")
    src.emit(1, f"return {h}, {b}")
    fn: Callable[[Any], tuple[dict[str, Any], dict[str, Any]]] = src.compile("decode_frame", label)
    return fn


__all__ = ["Fallback", "frame_decoder", "request_encoder", "response_encoder", "struct_codec"]
