"""Spark types and the fast-path schema check derived from spec/trace.schema.json (never written by hand).

`spark_type` turns a JSON Schema node into a Spark DataType; `event_type` is the explicit schema every
event line is parsed with, once (`from_json` with a `_corrupt_record` column). `conforms` compiles the
schema into one boolean Spark expression over that parse and the line's text: true means the line
certainly conforms. It must never be true for a line the JSON Schema rejects; it may be false for a valid
one (such lines are "suspects" and go to the Python validator, which has the last word and writes the
reason). What decides, without a second parse:

* Spark's typed reader is strict for integers, numbers, booleans, objects and arrays: a wrong JSON type,
  malformed or truncated JSON, or a non-object line set `_corrupt_record`.
* required / enum / const / minimum / maximum / minLength / uniqueItems / the `allOf` if-then requirements
  and NaN or infinite numbers are SQL expressions over the typed values.
* What the typed parse cannot see — unknown keys, explicit nulls, a non-string where a free-text string is
  expected (Spark reads `"note": 5` as "5"), a string where a free-form object is expected, text after the
  object (Spark stops at its end) — is decided by counting characters in the line's text: keys (colons,
  less those inside string values), nulls per nullable name (`"clusterId":null`; any other null is a key
  the typed values do not predict), quotes (two per key and per string value: a non-string read as a
  string is two short) and closing braces (one more for text after the object). Each count must equal
  what the typed values predict, plus what the free-form objects (which Spark hands back as their compact
  JSON text) contain. Typed checks add what text cannot show: a string value holding a quote, or a
  free-form value not starting `{"`, is another JSON value read as text. Counting characters makes blanks
  harmless (a blank around a colon only hides a `"clusterId":null`, whose colon then exceeds the
  prediction). An escape could hide a counted character (`\\u003a` is a colon the text does not show),
  so a line with a backslash is a suspect. `tests/traces/test_pipeline_fast_path.py` checks thousands of
  mutated lines against the JSON Schema validator and shows that dropping any one of these counts, the
  typed checks, the escape check or the end check lets an invalid line through.
  Remaining blind spot, by construction: an unknown key spelled like a nullable field of another object
  (`clusterId`) with the value null, in a line whose own nullable field is absent.

The whole-line counts of colons, quotes and closing braces, and the backslash test, come from the JVM
helper (`jvm.py`, `char_counts`: one pass over the line) when the session has it; otherwise from `replace`
and `octet_length` (no regular expressions: several times cheaper than those, but a pass per character).
Counts inside typed values always use the latter. Higher-order functions appear only for `log.appended`
items.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from kraft_tck.spec.trace import schema as trace_schema
from kraft_tck.traces.pipeline.jvm import FUNCTION
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

_SCALARS: dict[str, T.DataType] = {
    "integer": T.LongType(),
    "number": T.DoubleType(),
    "string": T.StringType(),
    "boolean": T.BooleanType(),
}


def root() -> dict[str, Any]:
    return trace_schema()


def resolve(node: dict[str, Any]) -> dict[str, Any]:
    """Follow `$ref` (only local `#/$defs/...` references occur in the trace schema)."""
    while "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"trace schema: unsupported $ref {ref!r}")
        node = root()["$defs"][ref.removeprefix("#/$defs/")]
    return node


def definition(name: str) -> dict[str, Any]:
    return resolve({"$ref": f"#/$defs/{name}"})


def _json_types(node: dict[str, Any]) -> list[str]:
    """The JSON types a node allows (from `type`, or inferred from `enum`/`const` values)."""
    if "type" in node:
        t = node["type"]
        return list(t) if isinstance(t, list) else [t]
    values = node.get("enum", [node["const"]] if "const" in node else [])
    kinds = set()
    for v in values:
        kinds.add("boolean" if isinstance(v, bool) else "integer" if isinstance(v, int)
                  else "number" if isinstance(v, float) else "string" if isinstance(v, str) else "null")
    return sorted(kinds)


def spark_type(node: dict[str, Any]) -> T.DataType:
    """The Spark type of a schema node. Free-form objects (no `properties`) stay JSON text."""
    node = resolve(node)
    kinds = [k for k in _json_types(node) if k != "null"]
    if kinds == ["object"] or (not kinds and "properties" in node):
        props = node.get("properties")
        if not props:
            return T.StringType()
        return T.StructType([T.StructField(k, spark_type(v), True) for k, v in props.items()])
    if kinds == ["array"]:
        return T.ArrayType(spark_type(node.get("items", {"type": "string"})), True)
    if len(kinds) == 1 and kinds[0] in _SCALARS:
        return _SCALARS[kinds[0]]
    if set(kinds) == {"integer", "number"}:
        return T.DoubleType()
    raise ValueError(f"trace schema: no Spark type for {node!r}")


@lru_cache(maxsize=1)
def event_type() -> T.StructType:
    t = spark_type(definition("event"))
    assert isinstance(t, T.StructType)
    return t


@lru_cache(maxsize=1)
def header_type() -> T.StructType:
    t = spark_type(definition("header"))
    assert isinstance(t, T.StructType)
    return t


# ------------------------------------------------------------------------------------------- fast path

CORRUPT = "_corrupt_record"


@lru_cache(maxsize=1)
def parse_type() -> T.StructType:
    """`event_type` plus the column Spark fills with the line when the typed parse fails anywhere."""
    return T.StructType([*event_type().fields, T.StructField(CORRUPT, T.StringType(), True)])


def parse(text: Column) -> Column:
    return F.from_json(text, parse_type(), {"columnNameOfCorruptRecord": CORRUPT, "mode": "PERMISSIVE"})


def count(text: Column, pattern: str, guarded: bool = True) -> Column:
    """Non-overlapping occurrences of a literal in `text`: a byte-length difference after a plain replace
    (no regex). `guarded`: skipped by a cheaper `contains` when the pattern is absent (the usual case for
    most patterns; a pattern in every line, such as `:`, skips the guard's extra pass)."""
    width = len(pattern.encode())
    n = F.octet_length(text) - F.octet_length(F.replace(text, F.lit(pattern), F.lit("")))
    if width > 1:
        n = (n / width).cast("int")  # exact: every occurrence removed `width` bytes
    return F.when(text.contains(pattern), n).otherwise(0) if guarded else n


def _one(c: Column) -> Column:
    return F.when(c, 1).otherwise(0)


class _Tally:
    """What the typed values of one object predict about its text, and the typed checks that failed."""

    def __init__(self) -> None:
        self.keys: list[Column] = []  # present (non-null) keys at every schema-described level
        self.braces: list[Column] = []  # objects the schema describes, besides the line itself
        self.strings: list[Column] = []  # present string-typed values (enums too, array items too)
        self.colons: list[Column] = []  # colons inside those values (enum values hold none)
        self.free_text: list[Column] = []  # the free-form objects' JSON text (Spark re-serialised)
        self.nullable: dict[str, list[Column]] = {}  # per nullable name: places where it may be null
        self.bad: list[Column] = []  # typed checks that failed (null counts as not failed)

    def fold(self, other: _Tally, scale: Callable[[Callable[[_Tally], Column]], Column],
             failed: Column) -> None:
        """Add a nested tally: `scale(pick)` is pick(nested tally) summed over where it applies."""
        self.keys.append(scale(lambda tl: _sum(tl.keys)))
        self.braces.append(scale(lambda tl: _sum(tl.braces)))
        self.strings.append(scale(lambda tl: _sum(tl.strings)))
        self.colons.append(scale(lambda tl: _sum(tl.colons)))
        for name in other.nullable:
            self.nullable.setdefault(name, []).append(scale(_named("nullable", name)))
        self.free_text.extend(other.free_text)
        self.bad.append(failed)

    def any_bad(self) -> Column:
        return _any(self.bad)


def _named(kind: str, name: str) -> Callable[[_Tally], Column]:
    """Pick the sum of one per-name list (`nullable`) of a tally."""
    return lambda tl: _sum(getattr(tl, kind)[name])


def _where_present(present: Column, inner: _Tally) -> Callable[[Callable[[_Tally], Column]], Column]:
    return lambda pick: F.when(present, pick(inner)).otherwise(0)


def _if_holds(cond: dict[str, Any], typed: Column) -> Column:
    """The `if` of an `allOf` branch: only `{properties: {k: {enum|not enum}}}` occurs in the schema."""
    out = F.lit(True)
    for key, sub in cond.get("properties", {}).items():
        if "enum" in sub:
            out = out & typed[key].isin(*sub["enum"])
        elif "not" in sub and "enum" in sub["not"]:
            out = out & ~typed[key].isin(*sub["not"]["enum"])
        else:
            raise ValueError(f"trace schema: unsupported `if` condition {cond!r}")
    return F.coalesce(out, F.lit(False))


def _is_string(node: dict[str, Any]) -> bool:
    """A string-typed leaf. Spark reads any JSON value into a string column (`5` as "5", an object as its
    text), so such a value needs its quotes counted, and its text must not hold a quote, which a string
    cannot without a backslash; an enum or const must not accept the text of another JSON value."""
    if [k for k in _json_types(node) if k != "null"] != ["string"]:
        return False
    for value in node.get("enum", [node["const"]] if "const" in node else []):
        if not isinstance(value, str) or value[:1] in ("{", "[") or '"' in value or ":" in value \
                or _json_literal(value):
            raise ValueError(f"trace schema: the fast path cannot tell the enum value {value!r} from a JSON value")
    return True


def _add_colons(acc: Column, x: Column) -> Column:
    return acc + count(x, ":")


def _json_literal(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _leaf_bad(node: dict[str, Any], v: Column) -> list[Column]:
    out: list[Column] = []
    if _is_string(node) and "enum" not in node and "const" not in node:
        out.append(v.contains('"'))
    if "enum" in node:
        out.append(~v.isin(*node["enum"]))
    if "const" in node:
        out.append(v != F.lit(node["const"]))
    if "minimum" in node:
        out.append(v < F.lit(node["minimum"]))
    if "maximum" in node:
        out.append(v > F.lit(node["maximum"]))
    if "minLength" in node:
        out.append(F.length(v) < node["minLength"])
    if "number" in _json_types(node):  # Spark reads "NaN", "Infinity" (quoted or not) as doubles; JSON does not
        out.append(F.isnan(v) | (F.abs(v) == F.lit(float("inf"))))
    return [v.isNotNull() & c for c in out]


# Spark's lambdas are plain one- or two-argument functions (PySpark counts the parameters), so closures
# over the item schema are built by these factories rather than with default arguments.
def _is_null(x: Column) -> Column:
    return x.isNull()


def _item_bad(items: dict[str, Any]) -> Callable[[Column], Column]:
    return lambda x: _tally(items, x).any_bad()


def _scalar_bad(items: dict[str, Any]) -> Callable[[Column], Column]:
    return lambda x: _any(_leaf_bad(items, x))


def _any(cs: list[Column]) -> Column:
    """OR of conditions, a null counting as false (each condition is a failed check)."""
    out: Column = F.lit(False)
    for c in cs:
        out = out | F.coalesce(c, F.lit(False))
    return out


def _over_items(arr: Column, items: dict[str, Any]) -> Callable[[Callable[[_Tally], Column]], Column]:
    """Sum of pick(tally of the item) over the items of `arr` (0 when there are none)."""
    def over(pick: Callable[[_Tally], Column]) -> Column:
        return F.coalesce(F.aggregate(arr, F.lit(0), lambda acc, x: acc + pick(_tally(items, x))), F.lit(0))
    return over


def _tally(node: dict[str, Any], t: Column) -> _Tally:
    """Tally one schema-described object whose typed value `t` is present (the caller guards presence)."""
    node = resolve(node)
    tally = _Tally()
    props: dict[str, Any] = node.get("properties", {})
    if node.get("additionalProperties", True) is not False:
        raise ValueError("trace schema: the fast path needs additionalProperties: false on described objects")
    for key in node.get("required", []):
        tally.bad.append(t[key].isNull())  # missing or null: both fail unless the field is nullable
    for branch in node.get("allOf", []):
        holds = _if_holds(branch.get("if", {}), t)
        for key in branch.get("then", {}).get("required", []):
            tally.bad.append(holds & t[key].isNull())
    for key, sub in props.items():
        sub = resolve(sub)
        v = t[key]
        present = v.isNotNull()
        kinds = _json_types(sub)
        real = [k for k in kinds if k != "null"]
        tally.keys.append(_one(present))
        if "null" in kinds:
            tally.nullable.setdefault(key, []).append(_one(v.isNull()))
        if real == ["object"] and sub.get("properties"):
            tally.braces.append(_one(present))
            inner = _tally(sub, v)
            tally.fold(inner, _where_present(present, inner), present & inner.any_bad())
        elif real == ["object"]:
            # Spark hands a free-form value back as its compact JSON text. An object with members begins
            # `{"`; a string cannot (no backslash, so no quote inside it), nor can any other JSON value.
            # An empty object is a suspect: its text `{}` is also what the string "{}" reads as.
            tally.free_text.append(v)
            tally.bad.append(present & ~v.startswith('{"'))
        elif real == ["array"]:
            items = resolve(sub.get("items", {}))
            tally.bad.append(present & F.exists(v, _is_null))
            if sub.get("uniqueItems"):
                tally.bad.append(present & (F.size(F.array_distinct(v)) < F.size(v)))
            if [k for k in _json_types(items) if k != "null"] == ["object"] and items.get("properties"):
                tally.braces.append(F.when(present, F.size(v)).otherwise(0))
                shape = _tally(items, v[0])  # which names occur; the sums below rebuild it per item
                if shape.free_text:
                    raise ValueError("trace schema: free-form objects inside arrays are not supported")

                tally.fold(shape, _over_items(v, items), present & F.exists(v, _item_bad(items)))
            else:
                tally.bad.append(present & F.exists(v, _scalar_bad(items)))
                if _is_string(items):
                    tally.strings.append(F.when(present, F.size(v)).otherwise(0))
                    tally.colons.append(F.when(present, F.aggregate(v, F.lit(0), _add_colons)).otherwise(0))
        else:
            if _is_string(sub):
                tally.strings.append(_one(present))
                tally.colons.append(F.when(present, count(v, ":")).otherwise(0))
            tally.bad.extend(_leaf_bad(sub, v))
    return tally


def _sum(cs: list[Column]) -> Column:
    out: Column = F.lit(0)
    for c in cs:
        out = out + c
    return out


def _free_count(tally: _Tally, pattern: str, guarded: bool = True) -> Column:
    return _sum([F.coalesce(count(t, pattern, guarded), F.lit(0)) for t in tally.free_text])


def char_counts(text: Column) -> Column:
    """The JVM helper's packed counts of `text` (`jvm/CharCounts.java`); the session must have registered
    it (`session.register_char_counts`)."""
    return F.call_function(FUNCTION, text)


_BITS = 21  # CharCounts.BITS
_MASK = (1 << _BITS) - 1


def checks(e: Column, text: Column, counts: Column | None = None) -> list[tuple[str, Column]]:
    """The fast path's conditions by name (all must hold; see the module docstring). `counts`: the line's
    `char_counts`, when the session has the JVM helper (give it as a column of its own, so it is computed
    once); without it the counts are Spark SQL expressions."""
    tally = _tally(definition("event"), e)
    t = text
    if counts is None:
        colons, quotes, braces = (count(t, c, guarded=False) for c in (":", '"', "}"))
        no_escapes = ~t.contains("\\")
    else:  # null: a backslash, or a count beyond 21 bits
        colons, quotes = counts.bitwiseAND(_MASK), F.shiftright(counts, _BITS).bitwiseAND(_MASK)
        braces, no_escapes = F.shiftright(counts, 2 * _BITS), counts.isNotNull()

    # Explicit nulls are counted only where the schema allows them, by name: any other null is a key the
    # typed values do not predict, which the key count catches.
    named_nulls = [(count(t, f'"{name}":null') - _free_count(tally, f'"{name}":null'), _sum(places))
                   for name, places in tally.nullable.items()]
    nulls = _sum([n for n, _ in named_nulls])
    closes = 1 + _sum(tally.braces)
    free_closes = _free_count(tally, "}", False)
    return [
        ("parsed", e.isNotNull() & e[CORRUPT].isNull()),
        ("no escapes", no_escapes),
        ("ends with }", F.rtrim(t).endswith("}")),
        ("typed checks", ~tally.any_bad()),
        # Keys: one colon each, plus those inside string values. A blank cannot hide a colon.
        ("keys", colons
         == _sum(tally.keys) + nulls + _sum(tally.colons) + _free_count(tally, ":", False)),
        ("nulls", _all([(n >= 0) & (n <= places) for n, places in named_nulls])),
        # Closing braces: each object the typed values hold has one (Jackson parsed it), so equality means
        # none in a string and none after the object (text after it that ends with `}` has one more).
        ("closing braces", braces == closes + free_closes),
        # Quotes: two per key and two per string value. With the keys exact, a value of another JSON type
        # read into a string column is two short, and nothing else can make up for it (a string where a
        # free-form object belongs, which would be two over, fails the typed checks).
        ("quotes", quotes
         == 2 * (_sum(tally.keys) + nulls + _sum(tally.strings)) + _free_count(tally, '"', False)),
    ]


def conforms(e: Column, text: Column, counts: Column | None = None) -> Column:
    """True when the event line `text`, parsed as `e` (see `parse`), certainly conforms to the schema."""
    return _all([c for _, c in checks(e, text, counts)])


def _all(cs: list[Column]) -> Column:
    """AND of conditions, a null counting as false (so an unknown never clears a line)."""
    out: Column = F.lit(True)
    for c in cs:
        out = out & F.coalesce(c, F.lit(False))
    return out
