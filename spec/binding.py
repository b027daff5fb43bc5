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
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from kraft_tck.spec.codegen import (
    Fallback,
    _compact,
    _Decoder,
    _Encoder,
    _is_fixed,
    _runs,
    _Source,
    _split,
    compiled_maker,
)
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

    def __init__(self, src: _Source, label: str, record: Params | None = None) -> None:
        super().__init__(src)
        self.label = label
        self.slots: dict[str, str] = {}  # parameter -> the local holding it
        # With ``record`` (the parameters), the code also notes in list ``at`` where it read each parameter
        # a later frame of the same shape may hold another value of (``FrameTemplates``): a fixed-width one
        # as (start, unpack, parameter indexes, ((offset, size), ...)), bytes as (start, end, index).
        self.record = None if record is None else {name: i for i, (name, _) in enumerate(record)}

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
        regular, tagged = _split(fields, version)
        for grp in _runs(regular):
            if isinstance(grp, list):
                self.bound_run(grp, tree, ind)
                continue
            f = grp
            sub = tree.get(f.name)
            if sub is None:
                self.value(f, version, flexible, ind)  # read (and checked) as the dict path reads it
            elif isinstance(sub, dict):
                self.bound_struct(f, version, flexible, sub, ind)
            elif isinstance(sub, Expect):
                self.expect(self.value(f, version, flexible, ind), sub.value, ind)
            else:
                self.value(f, version, flexible, ind, into=self.slot(sub))
        if flexible:
            self.bound_tags(tagged, version, tree, ind)

    def bound_run(self, grp: list[FieldDef], tree: _Tree, ind: int) -> None:
        """A run of fixed-width fields, unpacked by one call: bound ones straight into their parameters'
        locals, expected ones into a local to check, unbound ones skipped as pad bytes (the call still
        checks that the whole run is in the frame, as the dict path's read does)."""
        s = self.s
        fmt, targets, checks = ">", [], []
        for f in grp:
            code = FIXED_FORMAT.get(f.type, "16s")
            leaf = tree.get(f.name)
            if leaf is None:
                fmt += "16x" if code == "16s" else struct.calcsize(">" + code) * "x"
                continue
            fmt += code
            if isinstance(leaf, str) and f.type != "uuid":
                targets.append(self.slot(leaf))
                continue
            n = s.var()
            targets.append(n)
            checks.append((f, leaf, n))
        st = struct.Struct(fmt)
        if targets:
            unpack = s.const(st.unpack_from, "unpack")
            s.emit(ind, f"{', '.join(targets)}{',' if len(targets) == 1 else ''} = {unpack}(buf, pos)")
        # else nothing to read: a frame too short for the run fails later, as pos never goes back and the
        # frame must end exactly at pos (every read past its end raises, the last check refuses the rest).
        if self.record is not None:
            self.note_run(grp, tree, ind)
        s.emit(ind, f"pos += {st.size}")
        for f, leaf, n in checks:
            if isinstance(leaf, Expect):
                self.expect(n, leaf.value, ind, raw_uuid=f.type == "uuid")
            else:
                assert isinstance(leaf, str)
                s.emit(ind, f"{self.slot(leaf)} = new_uuid({n})")

    def note_run(self, grp: list[FieldDef], tree: _Tree, ind: int) -> None:
        """``at`` entry of a run's parameters (uuids left out: a uuid the template keeps is the same value)."""
        assert self.record is not None
        fmt, indexes, spans, offset = ">", [], [], 0
        for f in grp:
            code = FIXED_FORMAT.get(f.type, "16s")
            size = struct.calcsize(">" + code)
            leaf = tree.get(f.name)
            if isinstance(leaf, str) and f.type != "uuid" and leaf in self.record:
                fmt += code
                indexes.append(self.record[leaf])
                spans.append((offset, size))
            else:
                fmt += f"{size}x"
            offset += size
        if indexes:
            s = self.s
            unpack = s.const(struct.Struct(fmt).unpack_from, "unpack")
            s.emit(ind, f"at.append((pos, {unpack}, {tuple(indexes)!r}, {tuple(spans)!r}))")

    def note_bytes(self, into: str | None, ftype: str, end: str, ind: int) -> None:
        if self.record is None or into is None or ftype not in ("bytes", "records"):
            return
        param = next((p for p, local in self.slots.items() if local == into), None)
        if param in self.record:
            self.s.emit(ind, f"at.append((pos, {end}, {self.record[param]}))")

    def bound_struct(self, f: FieldDef, version: int, flexible: bool, sub: _Tree, ind: int) -> None:
        """A bound struct field, or a ``[0]`` array of them: exactly one element, read in place."""
        s = self.s
        assert f.fields is not None
        if f.is_array and _compact(f, version, flexible):
            # A count of one is the one-byte uvarint 2 (a longer form of it, legal but never written, is
            # left to the dict path with any other count).
            s.emit(ind, "if buf[pos] != 2:")
            s.emit(ind + 1, "raise Fallback")
            s.emit(ind, "pos += 1")
        elif f.is_array:
            n = self.count(False, ind)
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
            else:  # (unbound: read, as the dict path does)
                self.value(f, version, True, ind + 3, into=self.slot(sub) if isinstance(sub, str) else None)
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
                  label: str, response: bool, record: bool = False) -> Callable[[Any], tuple[Any, Any]]:
    """``payload -> (header, value)`` for a request (``header`` the header dict, as ``codec`` gives it),
    or ``payload -> (correlation id, value)`` for a ``response``; ``value`` is ``build(*params)``.
    With ``record``: ``payload -> (header, [params], at)`` instead (``build`` not called; ``at``: where the
    frame holds each parameter another frame of its shape may change, see ``FrameTemplates``)."""
    tree = _tree(binding, params, body[0], label)
    src = _Source()
    src.namespace["build"] = build
    src.emit(0, "def decode_frame(buf):")
    src.emit(1, "L = len(buf)")
    src.emit(1, "pos = 0")
    if record:
        src.emit(1, "at = []")
    dec = _BoundDecoder(src, label, params if record else None)
    if response:  # the caller takes only the correlation id: the header is read as a bound struct too
        dec.bound(*header, {"CorrelationId": "correlation_id"}, 1)
        head = dec.slots["correlation_id"]
    else:
        head = dec.struct(*header, 1)
    dec.bound(*body, tree, 1)
    src.emit(1, "if pos != L:")
    src.emit(2, "raise Fallback")
    call = dec.call(params)
    src.emit(1, f"return {head}, [{call[len('build('):-1]}], at" if record else f"return {head}, {call}")
    fn: Callable[[Any], tuple[Any, Any]] = src.compile("decode_frame", label + (" recording" if record else ""))
    return fn


class _Template:
    """A frame a ``FrameTemplates`` read: the int of its bytes, what it read, and where."""

    __slots__ = ("args", "blobs", "fresh", "head", "head_fresh", "hit", "mask", "prepared", "runs", "value")

    def __init__(self, buf: Any, head: Any, args: list[Any], at: list[Any], head_span: tuple[int, int],
                 copies: bool, build: Callable[..., Any], response: bool, names: list[str],
                 prepare: Prepare | None) -> None:
        size = len(buf)
        self.value = int.from_bytes(buf, "big")
        self.args = args
        # Lists and dicts (arrays read whole, unknown tagged fields) are the caller's to keep or change: unless
        # ``build`` only reads them (``copies`` False), each frame gets copies, as a frame read afresh would.
        self.fresh = [i for i, a in enumerate(args) if type(a) in (list, dict)] if copies else []
        self.head = head
        self.head_fresh = [k for k, v in head.items() if type(v) in (list, dict)] if type(head) is dict else []

        def bits(start: int, n: int) -> int:  # the bits of bytes [start, start + n) in the frame's int
            return ((1 << (8 * n)) - 1) << (8 * (size - start - n))

        variable = bits(head_span[0], head_span[1] - head_span[0])
        runs, blobs = [], []
        for entry in at:
            if len(entry) == 4:  # fixed-width parameters of one run: (start, unpack, indexes, spans)
                start, unpack, indexes, spans = entry
                m = 0
                for offset, n in spans:
                    m |= bits(start + offset, n)
                # Parameters in a row (the usual case) are set by one slice assignment.
                k = indexes[0]
                runs.append((m, start, unpack, slice(k, k + len(indexes)) if indexes == tuple(range(k, k + len(
                    indexes))) else indexes))
            else:  # the content of a bytes field (its length is part of the shape): (start, end, index)
                start, end, index = entry
                m = bits(start, end - start) if end > start else 0
                blobs.append((m, start, end, index))
            variable |= m
        self.runs, self.blobs = tuple(runs), tuple(blobs)
        self.mask = ((1 << (8 * size)) - 1) ^ variable  # every byte the frame's shape is made of
        self.prepared = False  # (set by _frame_hit: its hit calls what ``prepare`` made)
        self.hit = _frame_hit(self, build, response, head_span[0], names, prepare)


#: ``prepare(args, variable)``: ``build`` for the frames of one template (``args``: its arguments, ``variable``: the
#: indexes of those its frames may change), or None (then ``build`` serves): ``(function, takes)``, the function
#: taking the arguments of indexes ``takes`` (every variable one among them), in that order, and returning
#: ``build(*args)`` with them put in, or raising what that raises; it may work out once what depends on the
#: other arguments only.
Prepare = Callable[[list[Any], frozenset[int]], tuple[Callable[..., Any], tuple[int, ...]] | None]


def _frame_hit(t: _Template, build: Callable[..., Any], response: bool, cid_at: int, names: list[str],
               prepare: Prepare | None) -> Callable[[Any, int], Any]:
    """``hit(buf, x)`` (``x``: the frame's int): None if the frame is not of template ``t``'s shape, else what
    the plain decoder returns, as ``FrameTemplates`` reads it, in straight generated code: every run of numbers
    unpacked by one call into locals (read again even where unchanged: the same bytes give the same values),
    every bytes parameter copied, the other arguments the template's (closure cells), ``build`` called once
    (or what ``prepare`` made of it for this template, given the variable arguments only)."""
    local = [f"c{i}" for i in range(len(t.args))]
    lines, consts = [], {"V": t.value, "M": t.mask, "HEAD": t.head, "build": build, "fresh": _fresh, "i32": _INT32}
    for k, (_, start, unpack, target) in enumerate(t.runs):
        indexes = range(target.start, target.stop) if type(target) is slice else target
        for i in indexes:
            local[i] = f"a{i}"
        # (Offsets and sizes are closure cells, not literals: frames of one structure but other lengths share
        # one compiled source: codegen.compiled_maker.)
        consts[f"u{k}"], consts[f"s{k}"] = unpack, start
        lines.append(f"{', '.join(local[i] for i in indexes)}, = u{k}(buf, s{k})")
    for m, start, end, i in t.blobs:
        if m:  # (an empty one is the template's value)
            local[i] = f"a{i}"
            consts[f"b{i}"], consts[f"e{i}"] = start, end
            lines.append(f"a{i} = bytes(buf[b{i}:e{i}])")
    for i in t.fresh:
        local[i] = f"fresh(c{i})"
    lines.append(f"cid, = i32(buf, {cid_at})")
    if response:
        head = "cid"
    else:
        head = "head"
        lines += ["head = HEAD.copy()", "head['CorrelationId'] = cid"]
        lines += [f"head[{k!r}] = fresh(head[{k!r}])" for k in t.head_fresh]
    call = ", ".join(local)
    variable = frozenset(i for i, name in enumerate(local) if name.startswith("a"))
    if prepare is not None and not t.fresh:
        try:
            made = prepare(list(t.args), variable)
        except Exception:  # (build accepted these arguments; a prepare that cannot: build serves)
            made = None
        if made is not None and variable <= set(made[1]):
            consts["build"] = made[0]
            t.prepared = True
            call = ", ".join(local[i] for i in made[1])
    lines.append(f"return {head}, build({call})")
    names = [*consts, *(f"c{i}" for i in range(len(t.args)))]
    text = "\n".join([f"def make({', '.join(names)}):", "    def hit(buf, x):", "        if (x ^ V) & M:",
                      "            return None", *(f"        {line}" for line in lines), "    return hit", ""])
    return compiled_maker(text, "frame template")(*consts.values(), *t.args)


_INT32 = struct.Struct(">i").unpack_from
_INT32_INTO = struct.Struct(">i").pack_into


def _fresh(value: Any) -> Any:
    """A copy of the lists and dicts in ``value`` (a decoded value: its leaves are immutable)."""
    if type(value) is list:
        return [_fresh(v) for v in value]
    if type(value) is dict:
        return {k: _fresh(v) for k, v in value.items()}
    return value


class FrameTemplates:
    """A generated frame decoder with memory of the last few frames' shapes: a frame equal to one of them in
    every byte but the fixed-width parameters, the content of bytes parameters and the correlation id reads
    as that frame did, with those values read again: what the plain decoder returns, for a fraction of the
    work (a follower's Fetch differs from its last one only in numbers). Each template reads by its own
    generated code (``_frame_hit``), and ``prepare`` (see ``Prepare``) may work out once per template what
    ``build`` makes of the arguments its frames share.

    Why it is exact: a bound decoder's path through a frame (lengths, counts, tags, nulls, expected values,
    strings) depends only on the bytes of its shape; the bytes in between are only copied into parameters
    (a fixed-width number takes any bytes, a bytes field any content). So equal shape bytes and length give
    the same path, the same reads at the same places and, from the same parameters, the same ``build``
    result or exception (``prepare``'s function must keep that: the tests compare it with the plain decoder
    too). A frame of any other shape is read plainly the first time its length is seen, then
    by the recording decoder (``frame_decoder``'s ``record``), and becomes a template if ``build`` accepts it.
    ``tests/reference/test_typed_wire_templates.py`` checks template == plain decoder on random frames and
    mutations of them.
    """

    #: Templates kept per frame length, and frame lengths kept (then all are dropped), and the longest frame kept
    #: (a template holds two ints of its size; a long frame, a catch-up's, is read plainly): memory stays bounded.
    PER_LENGTH = 4
    LENGTHS = 16
    SEEN = 64
    MAX_BYTES = 65536

    def __init__(self, plain: Callable[[Any], Any], recording: Callable[[Any], Any], build: Callable[..., Any],
                 response: bool, head_span: tuple[int, int], copies: bool = True, names: list[str] | None = None,
                 prepare: Prepare | None = None) -> None:
        self._plain = plain
        self._recording = recording
        self._seen: set[int] = set()  # lengths of frames read plainly (the next one of each is remembered)
        self._build = build
        self._response = response
        self._head_span = head_span
        self._copies = copies
        self._names = names or []
        self._prepare = prepare if names else None
        self._by_length: dict[int, list[_Template]] = {}
        #: Frames read from a template, and by the recording decoder.
        self.hits = 0
        self.misses = 0

    def __call__(self, buf: Any) -> tuple[Any, Any]:
        templates = self._by_length.get(len(buf))
        if templates is not None:
            x = int.from_bytes(buf, "big")
            for t in templates:
                out = t.hit(buf, x)
                if out is not None:
                    self.hits += 1
                    return out
        self.misses += 1
        if len(buf) > self.MAX_BYTES:
            return self._plain(buf)
        if templates is None and len(buf) not in self._seen:
            # The first frame of its length is read plainly: most lengths seen once never come again (a
            # batch of another size), and remembering a frame costs more than reading it.
            if len(self._seen) >= self.SEEN:
                self._seen.clear()
            self._seen.add(len(buf))
            return self._plain(buf)
        head, args, at = self._recording(buf)
        value = self._build(*args)  # (raises before the frame becomes a template)
        read = [i for entry in at for i in (entry[2] if len(entry) == 4 else (entry[2],))]
        if len(read) != len(set(read)):
            return head, value  # a parameter read twice (two fields bound to it): the last read must win, always
        if templates is None:
            if len(self._by_length) >= self.LENGTHS:
                self._by_length.clear()
            templates = self._by_length[len(buf)] = []
        stored = _fresh(head)  # the caller's to change
        templates.insert(0, _Template(buf, stored, args if not self._copies else _fresh(args), at, self._head_span,
                                      self._copies, self._build, self._response, self._names, self._prepare))
        del templates[self.PER_LENGTH:]
        return head, value


def templated_frame_decoder(header: Struct, body: Struct, binding: Binding, params: Params,
                            build: Callable[..., Any], label: str, response: bool,
                            copies: bool = True, prepare: Prepare | None = None) -> Callable[[], FrameTemplates]:
    """``frame_decoder``'s function as a maker of ``FrameTemplates`` (each with its own templates, all sharing
    one generated decoder). The correlation id's place is the header's: its first fixed-width run holds it
    (a request's after the api key and version, a response's first)."""
    fields, version, _ = header
    first = _runs(_split(fields, version)[0])[0]
    assert isinstance(first, list)
    offset = 0
    for f in first:
        size = struct.calcsize(">" + FIXED_FORMAT[f.type])
        if f.name == "CorrelationId":
            assert f.type == "int32"
            break
        offset += size
    else:
        raise ValueError(f"{label}: no CorrelationId in the header's first fixed-width fields")
    plain = frame_decoder(header, body, binding, params, build, label, response)
    recording = frame_decoder(header, body, binding, params, build, label, response, record=True)
    names = [name for name, _ in params]
    return lambda: FrameTemplates(plain, recording, build, response, (offset, offset + 4), copies, names, prepare)


# ============================================================================================== encode


class _BoundEncoder(_Encoder):
    """``codegen``'s encoder, with bound structs written from parameters instead of a body dict."""

    def __init__(self, src: _Source, label: str, record: dict[str, int] | None = None,
                 variable: frozenset[str] = frozenset()) -> None:
        super().__init__(src)
        self.label = label
        # Where each parameter is used: ``packed`` counts its uses as a fixed-width field written straight to
        # ``out`` outside any tagged field, ``uses`` all of them. A parameter used only so (``variable``) changes
        # bytes at fixed places and nothing else: with ``record`` (parameter -> argument index), the code
        # notes those places in list ``at`` for ``EncoderTemplates``.
        self.uses: dict[str, int] = {}
        self.packed: dict[str, int] = {}
        self.blobs: dict[str, int] = {}  # uses as a bytes value appended to out outside tagged fields
        self.depth = 0  # > 0 while a tagged field's value is written
        self.record, self.variable = record, variable

    def use(self, param: str, packed: bool = False) -> None:
        self.uses[param] = self.uses.get(param, 0) + 1
        if packed:
            self.packed[param] = self.packed.get(param, 0) + 1

    def note_run(self, grp: list[FieldDef], tree: _Tree, o: str, ind: int) -> None:
        """Count a run's parameters; with ``record``, the ``at`` entry of its variable ones: (the run's start in
        ``out``, ((offset in the run, pack_into, first argument, end argument), ...)), one pack_into for each
        stretch of fields whose arguments follow each other."""
        offset = 0
        stretches: list[list[Any]] = []  # [offset, size, format, end argument, first argument]
        for f in grp:
            leaf = tree.get(f.name)
            size = struct.calcsize(">" + FIXED_FORMAT.get(f.type, "16s"))
            if isinstance(leaf, str):
                writable = f.type != "uuid" and o == "out" and self.depth == 0
                self.use(leaf, packed=writable)
                if writable and self.record is not None and leaf in self.variable:
                    i = self.record[leaf]
                    last = stretches[-1] if stretches else None
                    if last is not None and last[0] + last[1] == offset and last[3] == i:
                        last[1] += size
                        last[2] += FIXED_FORMAT[f.type]
                        last[3] = i + 1
                    else:
                        stretches.append([offset, size, ">" + FIXED_FORMAT[f.type], i + 1, i])
            offset += size
        if stretches:
            entry = tuple((start, struct.Struct(fmt).pack_into, first, end) for start, _, fmt, end, first in stretches)
            self.s.emit(ind, f"at.append((len({o}), {self.s.const(entry, 'at')}))")

    def note_blob(self, v: str, o: str, ind: int) -> None:
        """A bytes parameter's content written straight to ``out``: with ``record``, ``at`` gets (its start, its
        argument index) (its length, written before it, stays part of the frame's shape)."""
        if o != "out" or self.depth != 0 or v not in self.uses:
            return
        self.blobs[v] = self.blobs.get(v, 0) + 1
        if self.record is not None and v in self.variable:
            self.s.emit(ind, f"at.append((len(out), {self.record[v]}))")

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
                    s.emit_bytes(ind, o, raw)
                else:
                    self.note_run(grp, tree, o, ind)
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
                    s.emit_bytes(ind, o, once)
                    continue
            v = self.leaf(f, version, sub)
            if isinstance(sub, str):
                self.use(sub)
            else:  # a literal: into a local
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
            self.s.emit_bytes(ind, o, raw)
        elif version in f.nullable:
            self.s.emit_bytes(ind, o, b"\x01")
        self.bound(f.fields, version, flexible, sub, o, ind)

    def bound_tags(self, tagged: list[FieldDef], version: int, tree: _Tree, o: str, ind: int) -> None:
        s = self.s
        _check_tagged(tree, tagged, version, self.label)
        # An unbound tagged field holds its default, which is never written; a bound one is written
        # unless every bound value under it is its default or null (the dict path's rule).
        bound = [f for f in tagged if f.name in tree]
        if not bound:
            s.emit_bytes(ind, o, b"\x00")
            return
        assert len(bound) < 128
        tmps = []
        direct: dict[str, tuple[int, Callable[[int], None]]] = {}
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
            for p, _ in leaves:
                assert isinstance(p, str)  # (_check_tagged: no Expect under a tagged field)
                self.use(p)

            def emit(i: int, f: FieldDef = f, sub: str | _Tree = sub, out: str = o) -> None:
                self.depth += 1
                if isinstance(sub, dict):
                    self.bound_struct(f, version, True, sub, out, i)
                else:
                    self.use(sub)
                    self.value(f, version, True, sub, out, i)
                self.depth -= 1

            size = _fixed_size(f, version, sub)
            if size is not None:  # written later, straight to o (write_tags)
                s.emit(ind, f"{tmp} = not ({held})")
                direct[tmp] = (size, emit)
                continue
            s.emit(ind, f"if {held}:")
            s.emit(ind + 1, f"{tmp} = None")
            s.emit(ind, "else:")
            s.emit(ind + 1, f"{tmp} = bytearray()")
            emit(ind + 1, out=tmp)
        self.write_tags(bound, tmps, o, ind, direct)


def _fixed_size(f: FieldDef, version: int, sub: str | _Tree) -> int | None:
    """The bytes a bound tagged field's value always takes, or None if that depends on the value: a fixed-width
    field, or a struct of them (not nullable) with no bound tagged field (its tag section: one 0 byte)."""
    if f.is_array:
        return None
    if not f.is_struct:
        return 16 if f.type == "uuid" else struct.calcsize(">" + FIXED_FORMAT[f.type]) if f.type in FIXED_FORMAT \
            else None
    assert f.fields is not None and isinstance(sub, dict)
    regular, tagged = _split(f.fields, version)
    if version in f.nullable or not all(_is_fixed(x) for x in regular) or any(x.name in sub for x in tagged):
        return None
    return sum(16 if x.type == "uuid" else struct.calcsize(">" + FIXED_FORMAT[x.type]) for x in regular) + 1


def request_encoder(header: Struct, body: Struct, api_key: int, binding: Binding, params: Params,
                    label: str) -> Callable[..., bytes]:
    """``(correlation_id, client_id, *params) -> frame``: length prefix, request header, body."""
    return _request_encoder(header, body, api_key, binding, params, label)[0]


def _request_encoder(header: Struct, body: Struct, api_key: int, binding: Binding, params: Params, label: str,
                     record: frozenset[str] | None = None) -> tuple[Callable[..., Any], _BoundEncoder]:
    """``request_encoder``'s function and generator; with ``record`` (the variable parameters) the function
    returns ``(frame, at)`` (see ``_BoundEncoder.note_run``; argument 0 is the correlation id)."""
    tree = _tree(binding, params, body[0], label)
    h_fields, h_version, h_flexible = header
    src = _Source()
    src.emit(0, f"def encode_request(correlation_id, client_id, {', '.join(name for name, _ in params)}):")
    src.emit(1, "out = bytearray(b'\\x00\\x00\\x00\\x00')")
    if record is not None:
        src.emit(1, "at = []")
    enc = _BoundEncoder(src, label, None if record is None else {name: i + 2 for i, (name, _) in enumerate(params)},
                        record or frozenset())
    enc.struct(h_fields, h_version, h_flexible, "", "out", 1, values={
        "RequestApiKey": repr(api_key), "RequestApiVersion": repr(body[1]),
        "CorrelationId": "correlation_id", "ClientId": "client_id"})
    enc.bound(*body, tree, "out", 1)
    src.emit(1, "out[0:4] = i32_pack(len(out) - 4)")
    src.emit(1, "return bytes(out), at" if record is not None else "return bytes(out)")
    return src.compile("encode_request", label + (" recording" if record is not None else "")), enc


#: Argument types an encoder's template compares by type and value: equal ones encode to equal bytes (not
#: floats: 0.0 == -0.0). Lists and dicts (of the decoded kinds) are compared by value and by repr, which tells
#: the builtin types apart all the way down (1, True and 1.0; "a" and b"a"), in one C call.
_SCALARS = frozenset({type(None), bool, int, str, bytes, uuid.UUID})


class EncoderTemplates:
    """A generated encoder with memory of its last frames: called with the same arguments as one of them but for
    the variable ones it copies that frame and writes those arguments at their places: the same bytes for a
    fraction of the work (a follower's next Fetch differs from its last one in its offset and id; a leader's
    next answer in its high watermark and records). Variable: the correlation id, parameters used only as
    fixed-width fields outside tagged fields (packed again), and bytes parameters used only as a value outside
    tagged fields, of the same length (copied in); the generator finds them by counting every use.

    Why it is exact: the encoder's path (lengths, tags written or not, strings) depends only on the other
    arguments, compared by type and value (lists and dicts by value and repr); a variable argument only fills
    its own bytes, packed the same way (or raising the same struct.error) in either path.
    ``tests/reference/test_typed_wire_templates.py`` checks template == plain encoder on random arguments and
    odd values.
    """

    #: Templates kept; lengths of bytes arguments remembered (then all are dropped).
    KEPT = 2
    SEEN = 64

    def __init__(self, recording: Callable[..., Any], variable: list[int], blobs: list[int], nargs: int,
                 cid_at: int | None) -> None:
        self._recording = recording
        first = 0 if cid_at is None else 1  # (argument 0 of a request encoder: the correlation id)
        self._shape = tuple(i for i in range(first, nargs) if i not in variable and i not in blobs)
        self._blobs = tuple(blobs)
        self._cid_at = cid_at
        self._nargs = nargs
        self._seen: set[tuple[int, ...]] = set()  # lengths of bytes arguments written once (see __call__)
        self._templates: list[Callable[..., bytes | None]] = []
        #: Frames written from a template, and by the recording encoder.
        self.hits = 0
        self.misses = 0

    def __call__(self, *args: Any) -> bytes:
        for hit in self._templates:
            frame = hit(*args)
            if frame is not None:
                self.hits += 1
                return frame
        frame, at = self._recording(*args)
        self.misses += 1
        if self._blobs:
            # A template is made the second time its bytes arguments' lengths are seen: answers of ever other
            # sizes (records of any length) would each pay for one and never use it.
            try:
                sizes = tuple([len(args[i]) for i in self._blobs])
            except TypeError:
                return frame  # (no template: see _hit)
            if sizes not in self._seen:
                if len(self._seen) >= self.SEEN:
                    self._seen.clear()
                self._seen.add(sizes)
                return frame
        made = self._hit(args, frame, at)
        if made is not None:
            self._templates.insert(0, made)
            del self._templates[self.KEPT:]
        return frame

    def _hit(self, args: tuple[Any, ...], frame: bytes, at: list[Any]) -> Callable[..., bytes | None] | None:
        """``hit(*args)``: None unless a call shares ``args``' shape arguments (by type and value: the same object,
        or one of the same type and equal value; lists and dicts by type, value and repr) and its bytes
        arguments' types and lengths, else the frame, in straight generated code; None if that cannot be said
        exactly for ``args`` (a float, another type, a bytes argument without a length: no template)."""
        consts: dict[str, Any] = {"FRAME": frame, "i32_into": _INT32_INTO}
        checks = []
        for i in self._shape:
            value, kind = args[i], type(args[i])
            if kind in _SCALARS:  # immutable: the same object is the same value
                consts[f"k{i}"], consts[f"t{i}"] = value, kind
                checks.append(f"(a{i} is k{i} or type(a{i}) is t{i} and a{i} == k{i})")
            elif kind in (list, dict):
                text = repr(value)
                if "nan" in text or "inf" in text:  # a float inside (or a string holding those letters)
                    return None
                consts[f"k{i}"], consts[f"t{i}"], consts[f"r{i}"] = _fresh(value), kind, text
                checks.append(f"(type(a{i}) is t{i} and a{i} == k{i} and repr(a{i}) == r{i})")
            else:
                return None  # a float, another type: no exact comparison here
        sizes: dict[int, int] = {}
        for i in self._blobs:
            try:
                size = len(args[i])
            except TypeError:  # a bytes argument without a length: the encoder decides
                return None
            consts[f"t{i}"], consts[f"n{i}"] = type(args[i]), size  # (closure cells: see _frame_hit)
            sizes[i] = size
            checks.append(f"type(a{i}) is t{i} and len(a{i}) == n{i}")
        lines = ["out = bytearray(FRAME)"]
        if self._cid_at is not None:
            lines.append(f"i32_into(out, {self._cid_at}, a0)")
        k = 0
        for run, stretches in at:
            if type(stretches) is tuple:
                for start, pack_into, first, end in stretches:
                    consts[f"p{k}"], consts[f"o{k}"] = pack_into, run + start
                    lines.append(f"p{k}(out, o{k}, {', '.join(f'a{i}' for i in range(first, end))})")
                    k += 1
            else:  # (start, argument index): a bytes argument's content
                consts[f"o{k}"], consts[f"e{k}"] = run, run + sizes[stretches]
                lines.append(f"out[o{k}:e{k}] = a{stretches}")
                k += 1
        lines.append("return bytes(out)")
        text = "\n".join([f"def make({', '.join(consts)}):",
                           f"    def hit({', '.join(f'a{i}' for i in range(self._nargs))}):",
                           *([f"        if not ({' and '.join(checks)}):", "            return None"]
                             if checks else []),
                           *(f"        {line}" for line in lines), "    return hit", ""])
        return compiled_maker(text, "encoder template")(*consts.values())


def _variable(enc: _BoundEncoder) -> tuple[frozenset[str], frozenset[str]]:
    """(parameters only packed as fixed-width fields, parameters only written as bytes) outside tagged fields."""
    return (frozenset(p for p, n in enc.packed.items() if n == enc.uses[p]),
            frozenset(p for p, n in enc.blobs.items() if n == enc.uses[p]))


def templated_request_encoder(header: Struct, body: Struct, api_key: int, binding: Binding, params: Params,
                              label: str) -> Callable[[], EncoderTemplates]:
    """``request_encoder``'s function as a maker of ``EncoderTemplates`` (each its own templates)."""
    _, plain = _request_encoder(header, body, api_key, binding, params, label)
    packed, blobs = _variable(plain)
    recording, _ = _request_encoder(header, body, api_key, binding, params, label, record=packed | blobs)
    index = {name: i + 2 for i, (name, _) in enumerate(params)}
    # The correlation id's place: after the length prefix, in the header's first fixed-width run.
    fields, version, _ = header
    first = _runs(_split(fields, version)[0])[0]
    assert isinstance(first, list)
    names = [f.name for f in first]
    cid_at = 4 + sum(struct.calcsize(">" + FIXED_FORMAT[f.type]) for f in first[:names.index("CorrelationId")])
    return lambda: EncoderTemplates(recording, sorted(index[p] for p in packed), sorted(index[p] for p in blobs),
                                    len(params) + 2, cid_at)


def body_encoder(body: Struct, binding: Binding, params: Params, label: str) -> Callable[..., bytes]:
    """``(*params) -> body bytes``, to frame with ``codec.frame_response`` (or a request header)."""
    return _body_encoder(body, binding, params, label)[0]


def _body_encoder(body: Struct, binding: Binding, params: Params, label: str,
                  record: frozenset[str] | None = None) -> tuple[Callable[..., Any], _BoundEncoder]:
    """``body_encoder``'s function and generator; with ``record``, returning ``(body, at)`` too."""
    tree = _tree(binding, params, body[0], label)
    src = _Source()
    src.emit(0, f"def encode_body({', '.join(name for name, _ in params)}):")
    src.emit(1, "out = bytearray()")
    if record is not None:
        src.emit(1, "at = []")
    enc = _BoundEncoder(src, label, None if record is None else {name: i for i, (name, _) in enumerate(params)},
                        record or frozenset())
    enc.bound(*body, tree, "out", 1)
    src.emit(1, "return bytes(out), at" if record is not None else "return bytes(out)")
    return src.compile("encode_body", label + (" recording" if record is not None else "")), enc


def templated_body_encoder(body: Struct, binding: Binding, params: Params,
                           label: str) -> Callable[[], EncoderTemplates]:
    """``body_encoder``'s function as a maker of ``EncoderTemplates`` (each its own templates)."""
    _, plain = _body_encoder(body, binding, params, label)
    packed, blobs = _variable(plain)
    recording, _ = _body_encoder(body, binding, params, label, record=packed | blobs)
    index = {name: i for i, (name, _) in enumerate(params)}
    return lambda: EncoderTemplates(recording, sorted(index[p] for p in packed), sorted(index[p] for p in blobs),
                                    len(params), None)


__all__ = ["Binding", "EncoderTemplates", "Expect", "Fallback", "FrameTemplates", "Params", "body_encoder",
           "frame_decoder", "request_encoder", "templated_body_encoder", "templated_frame_decoder",
           "templated_request_encoder"]
