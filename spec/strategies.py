"""Hypothesis strategies that build message bodies from the definitions in ``spec/messages``.

Test-only: imports ``hypothesis`` (a dev dependency). Used by the codec's own tests and available to
other areas that want well-formed protocol bodies (e.g. fuzzing a node's request handling).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from kraft_tck.spec.codec import UNKNOWN_TAGGED, message_def
from kraft_tck.spec.schema import INT_RANGES, FieldDef

_SMALL_TEXT = st.text(max_size=12)
_SMALL_BYTES = st.binary(max_size=24)


def _primitive(ftype: str) -> st.SearchStrategy[Any]:
    if ftype in INT_RANGES:
        lo, hi = INT_RANGES[ftype]
        return st.integers(lo, hi)
    if ftype == "bool":
        return st.booleans()
    if ftype == "float64":
        return st.floats(allow_nan=False)
    if ftype == "uuid":
        return st.uuids()
    if ftype == "string":
        return _SMALL_TEXT
    if ftype in ("bytes", "records"):
        return _SMALL_BYTES
    raise ValueError(f"no strategy for {ftype}")


def _unknown_tags(known: set[int]) -> st.SearchStrategy[dict[int, bytes]]:
    tags = st.integers(0, 300).filter(lambda t: t not in known)
    return st.dictionaries(tags, st.binary(max_size=8), min_size=1, max_size=2)


def _field(fd: FieldDef, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if fd.is_struct:
        assert fd.fields is not None
        elem: st.SearchStrategy[Any] = struct_strategy(fd.fields, version, flexible)
    else:
        elem = _primitive(fd.element_type)
    s = st.lists(elem, max_size=3) if fd.is_array else elem
    if version in fd.nullable:
        s = st.none() | s
    return s


def struct_strategy(
    fields: list[FieldDef], version: int, flexible: bool
) -> st.SearchStrategy[dict[str, Any]]:
    present = [f for f in fields if version in f.versions]
    required = {f.name: _field(f, version, flexible) for f in present}
    base = st.fixed_dictionaries(required)
    if not flexible:
        return base
    known = {f.tag for f in present if f.tag is not None and version in f.tagged}
    extra = st.fixed_dictionaries({}, optional={UNKNOWN_TAGGED: _unknown_tags(known)})
    return st.tuples(base, extra).map(lambda t: {**t[0], **t[1]})


def body_strategy(message: str, version: int) -> st.SearchStrategy[dict[str, Any]]:
    """Bodies of ``message`` at ``version`` with every field present (tagged ones included)."""
    md = message_def(message)
    return struct_strategy(md.fields, version, version in md.flexible)
