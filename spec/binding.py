"""Generated codecs that read a Kafka message straight into an application's own value and write one
straight from it: no body dicts in between.

:mod:`kraft_tck.spec.codegen` turns a message into a nested body dict and back; an application then maps
the dict onto its own types (the reference node: ``reference/wire.py``). On a hot path those dicts are
most of the memory a message touches. Kafka's generated Java classes avoid them by being the
application's type. Here an application *binds* the fields it carries to parameter names instead:

* a **binding** maps field paths to parameter names, e.g. ``"Topics[0].Partitions[0].FetchOffset":
  "fetch_offset"``, or to an :class:`Expect`\\ ed value the application does not carry (the one topic a
  KRaft RPC names). ``[0]`` marks an array of structs that must hold exactly one element; an array of
  primitives binds whole, as a list, and so does a tagged array of structs (as the codec's list of dicts);
* the **decoder** reads the frame and calls ``build(p1, p2, ...)`` with the parameters in the order
  given (a parameter whose field this version lacks gets its declared default);
* the **encoder** takes the parameters positionally and writes every field: bound ones from them,
  expected ones as expected, every other field at its schema default.

The wire layout still comes only from ``spec/messages/*.json``; the binding says nothing about types,
versions, order or tags, so a new message version is a new definition, not new code here.

Like ``codegen``, this is a fast path that gives up rather than decides: a frame the binding cannot
represent (two partitions, another topic, a null where a struct is bound, an exception in ``build``)
raises, and the caller takes the dict path, which answers or fails precisely. A bound frame reads the
same fields the dict path reads, unbound ones included, so it fails wherever the dict path fails.
Unknown tagged fields are skipped (the dict path keeps them for a body nobody here reads).
``tests/spec/test_binding.py`` (Vote) and ``tests/reference/test_typed_wire.py`` (the node's Fetch)
check, on every version, that both paths give the same bytes and values.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from kraft_tck.spec.codegen import Fallback, _compact, _Decoder, _Encoder, _runs, _Source, _split
from kraft_tck.spec.primitives import FIXED_FORMAT
from kraft_tck.spec.schema import FieldDef


@dataclass(frozen=True)
class Expect:
    """A field the application does not carry: written as ``value``; a frame holding anything else is
    not the binding's to read."""

    value: Any


#: Field path -> parameter name, or the value the field must hold.
Binding = Mapping[str, "str | Expect"]
#: The parameters in call order, each with the value it takes at a version that lacks its field.
Params = Sequence[tuple[str, Any]]
#: A binding as a tree: field name -> parameter name, Expect, or the subtree of a struct / ``[0]`` array.
_Tree = dict[str, Union[str, Expect, "_Tree"]]

#: (fields, version, flexible) of one struct, as ``codec`` gives them.
Struct = tuple[list[FieldDef], int, bool]


def _tree(binding: Binding, params: Params, fields: list[FieldDef], label: str) -> _Tree:
    """The binding as a tree, checked against the definition at every version (a typo fails here) and
    against ``params`` (every parameter it names is one)."""
    names = {name for name, _ in params}
    root: _Tree = {}
    for path, leaf in binding.items():
        node, where = root, fields
        steps = path.split(".")
        for i, step in enumerate(steps):
            name, one = (step[:-3], True) if step.endswith("[0]") else (step, False)
            fd = next((f for f in where if f.name == name), None)
            if fd is None:
                raise ValueError(f"{label}: binding path {path!r}: no field {name!r} here")
            last = i == len(steps) - 1
            # A tagged array of structs (e.g. a response's NodeEndpoints) binds whole, as the codec's list of
            # dicts: it is absent (its default, []) in most frames, so a [0] binding could not read it.
            whole = last and not one and fd.is_array and fd.is_struct and fd.tag is not None
            if fd.is_array and not fd.is_struct:  # a list of primitives binds whole, as a list
                if one or not last:
                    raise ValueError(f"{label}: binding path {path!r}: {name!r} is {fd.type}; "
                                     "bind the whole list (no [0], nothing after it)")
            elif one != fd.is_array and not whole:
                raise ValueError(f"{label}: binding path {path!r}: {name!r} is {fd.type}; "
                                 f"{'drop' if not fd.is_array else 'add'} the [0]")
            if last:
                if fd.is_struct and not whole:
                    raise ValueError(f"{label}: binding path {path!r} ends at a struct; bind its fields")
                if isinstance(leaf, str) and leaf not in names:
                    raise ValueError(f"{label}: binding names parameter {leaf!r}, not in {sorted(names)}")
                node[name] = leaf
            else:
                if not fd.is_struct:
                    raise ValueError(f"{label}: binding path {path!r}: {name!r} has no fields")
                sub = node.setdefault(name, {})
                assert isinstance(sub, dict)
                assert fd.fields is not None
                node, where = sub, fd.fields
    return root


def _leaves(tree: _Tree, fields: list[FieldDef], version: int) -> list[tuple[FieldDef, str | Expect]]:
    """Every bound leaf under ``tree`` present at ``version``, with its field."""
    out: list[tuple[FieldDef, str | Expect]] = []
    for f in fields:
        sub = tree.get(f.name)
        if sub is None or version not in f.versions:
            continue
        if isinstance(sub, dict):
            assert f.fields is not None
            out += _leaves(sub, f.fields, version)
        else:
            out.append((f, sub))
    return out


def _check_tagged(tree: _Tree, tagged: list[FieldDef], version: int, label: str) -> None:
    for f in tagged:
        sub = tree.get(f.name)
        if isinstance(sub, Expect) or (isinstance(sub, dict) and any(
                isinstance(leaf, Expect) for _, leaf in _leaves(sub, f.fields or [], version))):
            raise ValueError(f"{label}: {f.name} is tagged: an absent tagged field holds its default, so "
                             "an Expect on it cannot be checked; bind it to a parameter")
        if f.is_array and sub is not None and not isinstance(sub, str):
            raise ValueError(f"{label}: {f.name}: a tagged array binds whole (no [0])")


# ============================================================================================== decode


class _BoundDecoder(_Decoder):
    """``codegen``'s decoder, with bound structs read into parameter locals instead of dicts."""

    def __init__(self, src: _Source, label: str) -> None:
        super().__init__(src)
        self.label = label
        self.slots: dict[str, str] = {}  # parameter -> the local holding it

    def slot(self, param: str) -> str:
        local = self.slots.get(param)
        if local is None:
            local = self.slots[param] = self.s.var("p")
        return local

    def expect(self, local: str, value: Any, ind: int, raw_uuid: bool = False) -> None:
        want = self.s.const(value.bytes if raw_uuid else value, "want")
        self.s.emit(ind, f"if {local} != {want}:")
        self.s.emit(ind + 1, "raise Fallback")

    def bound(self, fields: list[FieldDef], version: int, flexible: bool, tree: _Tree, ind: int) -> None:
        s = self.s
        regular, tagged = _split(fields, version)
        for grp in _runs(regular):
            if isinstance(grp, list):
                st = struct.Struct(">" + "".join(FIXED_FORMAT.get(f.type, "16s") for f in grp))
                names = [s.var() for _ in grp]
                target = names[0] + "," if len(names) == 1 else ", ".join(names)
                s.emit(ind, f"{target} = {s.const(st.unpack_from, 'unpack')}(buf, pos)")
                s.emit(ind, f"pos += {st.size}")
                for f, n in zip(grp, names, strict=True):
                    leaf = tree.get(f.name)
                    if isinstance(leaf, Expect):
                        self.expect(n, leaf.value, ind, raw_uuid=f.type == "uuid")
                    elif isinstance(leaf, str):
                        s.emit(ind, f"{self.slot(leaf)} = {'new_uuid(' + n + ')' if f.type == 'uuid' else n}")
                continue
            f = grp
            sub = tree.get(f.name)
            if sub is None:
                self.value(f, version, flexible, ind)  # read (and checked) as the dict path reads it
            elif isinstance(sub, dict):
                self.bound_struct(f, version, flexible, sub, ind)
            else:
                v = self.value(f, version, flexible, ind)
                if isinstance(sub, Expect):
                    self.expect(v, sub.value, ind)
                else:
                    s.emit(ind, f"{self.slot(sub)} = {v}")
        if flexible:
            self.bound_tags(tagged, version, tree, ind)

    def bound_struct(self, f: FieldDef, version: int, flexible: bool, sub: _Tree, ind: int) -> None:
        """A bound struct field, or a ``[0]`` array of them: exactly one element, read in place."""
        s = self.s
        assert f.fields is not None
        if f.is_array:
            n = self.count(_compact(f, version, flexible), ind)
            s.emit(ind, f"if {n} != 1:")
            s.emit(ind + 1, "raise Fallback")
        elif version in f.nullable:
            s.emit(ind, "if buf[pos] != 1:")  # null (255) is not a value the binding can hold
            s.emit(ind + 1, "raise Fallback")
            s.emit(ind, "pos += 1")
        self.bound(f.fields, version, flexible, sub, ind)

    def bound_tags(self, tagged: list[FieldDef], version: int, tree: _Tree, ind: int) -> None:
        s = self.s
        _check_tagged(tree, tagged, version, self.label)
        for f in tagged:  # an absent tagged field holds its default
            sub = tree.get(f.name)
            if isinstance(sub, str):
                s.emit(ind, f"{self.slot(sub)} = {s.literal(f.default_value(version))}")
            elif isinstance(sub, dict):
                assert f.fields is not None
                for leaf_f, leaf in _leaves(sub, f.fields, version):
                    assert isinstance(leaf, str)
                    s.emit(ind, f"{self.slot(leaf)} = {s.literal(leaf_f.default_value(version))}")
        tag, end = self.tag_loop(ind)
        kw = "if"
        for f in tagged:
            s.emit(ind + 2, f"{kw} {tag} == {f.tag}:")
            kw = "elif"
            sub = tree.get(f.name)
            if isinstance(sub, dict):
                self.bound_struct(f, version, True, sub, ind + 3)
            else:
                v = self.value(f, version, True, ind + 3)  # unbound: read, as the dict path does
                if isinstance(sub, str):
                    s.emit(ind + 3, f"{self.slot(sub)} = {v}")
            s.emit(ind + 3, f"if pos != {end}:")
            s.emit(ind + 4, "raise Fallback")
        if tagged:
            s.emit(ind + 2, "else:")
            s.emit(ind + 3, f"pos = {end}")  # unknown: nothing here reads it
        else:
            s.emit(ind + 2, f"pos = {end}")

    def call(self, params: Params) -> str:
        """The ``build(...)`` call: each parameter's local, or its default where this version lacks it."""
        args = [self.slots[name] if name in self.slots else self.s.literal(default) for name, default in params]
        return f"build({', '.join(args)})"


def frame_decoder(header: Struct, body: Struct, binding: Binding, params: Params, build: Callable[..., Any],
                  label: str, response: bool) -> Callable[[Any], tuple[Any, Any]]:
    """``payload -> (header, value)`` for a request (``header`` the header dict, as ``codec`` gives it),
    or ``payload -> (correlation id, value)`` for a ``response``; ``value`` is ``build(*params)``."""
    tree = _tree(binding, params, body[0], label)
    src = _Source()
    src.namespace["build"] = build
    src.emit(0, "def decode_frame(buf):")
    src.emit(1, "L = len(buf)")
    src.emit(1, "pos = 0")
    dec = _BoundDecoder(src, label)
    h = dec.struct(*header, 1)
    dec.bound(*body, tree, 1)
    src.emit(1, "if pos != L:")
    src.emit(2, "raise Fallback")
    head = f"{h}['CorrelationId']" if response else h
    src.emit(1, f"return {head}, {dec.call(params)}")
    fn: Callable[[Any], tuple[Any, Any]] = src.compile("decode_frame", label)
    return fn


# ============================================================================================== encode


class _BoundEncoder(_Encoder):
    """``codegen``'s encoder, with bound structs written from parameters instead of a body dict."""

    def __init__(self, src: _Source, label: str) -> None:
        super().__init__(src)
        self.label = label

    def leaf(self, f: FieldDef, version: int, leaf: str | Expect | None) -> str:
        """Source of a leaf's value: its parameter, its expected value, or its default."""
        if isinstance(leaf, str):
            return leaf
        return self.s.literal(leaf.value if isinstance(leaf, Expect) else f.default_value(version))

    def bound(self, fields: list[FieldDef], version: int, flexible: bool, tree: _Tree, o: str, ind: int) -> None:
        s = self.s
        regular, tagged = _split(fields, version)
        for grp in _runs(regular):
            if isinstance(grp, list):
                args = []
                for f in grp:
                    leaf = tree.get(f.name)
                    assert not isinstance(leaf, dict)
                    if f.type != "uuid":
                        args.append(self.leaf(f, version, leaf))
                    elif isinstance(leaf, str):
                        args.append(f"{leaf}.bytes")
                    else:
                        value = leaf.value if isinstance(leaf, Expect) else f.default_value(version)
                        args.append(s.const(value.bytes, "raw"))
                fmt = ">" + "".join(FIXED_FORMAT.get(f.type, "16s") for f in grp)
                pack = struct.Struct(fmt).pack
                if not any(isinstance(tree.get(f.name), str) for f in grp):  # nothing bound: packed once, here
                    raw = pack(*(self.fixed_value(f, version, tree.get(f.name)) for f in grp))
                    s.emit(ind, f"{o} += {s.const(raw, 'raw')}")
                else:
                    s.emit(ind, f"{o} += {s.const(pack, 'pack')}({', '.join(args)})")
                continue
            f = grp
            sub = tree.get(f.name)
            if isinstance(sub, dict):
                self.bound_struct(f, version, flexible, sub, o, ind)
                continue
            if not isinstance(sub, str):  # unbound or expected: the same bytes in every frame, written at once
                once = self.constant(f, version, flexible, sub.value if isinstance(sub, Expect) else
                                     f.default_value(version))
                if once is not None:
                    s.emit(ind, f"{o} += {s.const(once, 'raw')}")
                    continue
            v = s.var()
            s.emit(ind, f"{v} = {self.leaf(f, version, sub)}")
            self.value(f, version, flexible, v, o, ind)
        if flexible:
            self.bound_tags(tagged, version, tree, o, ind)

    @staticmethod
    def fixed_value(f: FieldDef, version: int, leaf: object) -> Any:
        """The value an unbound (or expected) fixed-width field packs: uuids as their 16 bytes."""
        value = leaf.value if isinstance(leaf, Expect) else f.default_value(version)
        return value.bytes if f.type == "uuid" else value

    def constant(self, f: FieldDef, version: int, flexible: bool, value: Any) -> bytes | None:
        """Field ``f`` holding ``value`` as bytes, encoded once by the code ``value`` would run in every call
        (an unbound array of structs, say, would be walked in each frame); None if that code gives up."""

        def write(enc: _Encoder, src: _Source) -> None:
            src.emit(1, f"v = {src.literal(value)}")
            enc.value(f, version, flexible, "v", "out", 1)

        return self._run_once(write, f.name)

    def _run_once(self, write: Callable[[_Encoder, _Source], Any], what: str) -> bytes | None:
        """What the code ``write`` emits appends to ``out``, run once now; None if it gives up (Fallback)."""
        src = _Source()
        src.emit(0, "def constant():")
        src.emit(1, "out = bytearray()")
        write(_Encoder(src), src)
        src.emit(1, "return bytes(out)")
        try:
            raw: bytes = src.compile("constant", f"{self.label} {what}")()
        except Fallback:
            return None
        return raw

    def bound_struct(self, f: FieldDef, version: int, flexible: bool, sub: _Tree, o: str, ind: int) -> None:
        assert f.fields is not None
        if f.is_array:  # one element: a constant length
            raw = self._run_once(lambda enc, _: enc.length("1", _compact(f, version, flexible), "out", 1), f.name)
            assert raw is not None
            self.s.emit(ind, f"{o} += {self.s.const(raw, 'raw')}")
        elif version in f.nullable:
            self.s.emit(ind, f"{o}.append(1)")
        self.bound(f.fields, version, flexible, sub, o, ind)

    def bound_tags(self, tagged: list[FieldDef], version: int, tree: _Tree, o: str, ind: int) -> None:
        s = self.s
        _check_tagged(tree, tagged, version, self.label)
        # An unbound tagged field holds its default, which is never written; a bound one is written
        # unless every bound value under it is its default or null (the dict path's rule).
        bound = [f for f in tagged if f.name in tree]
        if not bound:
            s.emit(ind, f"{o}.append(0)")
            return
        assert len(bound) < 128
        tmps = []
        for f in bound:
            sub = tree[f.name]
            tmp = s.var("tmp")
            tmps.append(tmp)
            if isinstance(sub, dict):
                assert f.fields is not None
                leaves = [(leaf, s.literal(lf.default_value(version))) for lf, leaf in _leaves(sub, f.fields, version)]
            else:
                assert isinstance(sub, str)
                leaves = [(sub, s.literal(f.default_value(version)))]
            held = " and ".join(f"({p} is None or {p} == {d})" for p, d in leaves)
            s.emit(ind, f"if {held}:")
            s.emit(ind + 1, f"{tmp} = None")
            s.emit(ind, "else:")
            s.emit(ind + 1, f"{tmp} = bytearray()")
            if isinstance(sub, dict):
                self.bound_struct(f, version, True, sub, tmp, ind + 1)
            else:
                self.value(f, version, True, sub, tmp, ind + 1)
        self.write_tags(bound, tmps, o, ind)


def request_encoder(header: Struct, body: Struct, api_key: int, binding: Binding, params: Params,
                    label: str) -> Callable[..., bytes]:
    """``(correlation_id, client_id, *params) -> frame``: length prefix, request header, body."""
    tree = _tree(binding, params, body[0], label)
    h_fields, h_version, h_flexible = header
    src = _Source()
    src.emit(0, f"def encode_request(correlation_id, client_id, {', '.join(name for name, _ in params)}):")
    src.emit(1, "out = bytearray(b'\\x00\\x00\\x00\\x00')")
    enc = _BoundEncoder(src, label)
    enc.struct(h_fields, h_version, h_flexible, "", "out", 1, values={
        "RequestApiKey": repr(api_key), "RequestApiVersion": repr(body[1]),
        "CorrelationId": "correlation_id", "ClientId": "client_id"})
    enc.bound(*body, tree, "out", 1)
    src.emit(1, "out[0:4] = i32_pack(len(out) - 4)")
    src.emit(1, "return bytes(out)")
    fn: Callable[..., bytes] = src.compile("encode_request", label)
    return fn


def body_encoder(body: Struct, binding: Binding, params: Params, label: str) -> Callable[..., bytes]:
    """``(*params) -> body bytes``, to frame with ``codec.frame_response`` (or a request header)."""
    tree = _tree(binding, params, body[0], label)
    src = _Source()
    src.emit(0, f"def encode_body({', '.join(name for name, _ in params)}):")
    src.emit(1, "out = bytearray()")
    _BoundEncoder(src, label).bound(*body, tree, "out", 1)
    src.emit(1, "return bytes(out)")
    fn: Callable[..., bytes] = src.compile("encode_body", label)
    return fn


__all__ = ["Binding", "Expect", "Fallback", "Params", "body_encoder", "frame_decoder", "request_encoder"]
