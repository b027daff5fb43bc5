"""Spark types and validation expressions derived from spec/trace.schema.json (never written by hand).

`spark_type` turns a JSON Schema node into a Spark DataType; `problems` compiles the same node into a
Spark expression that lists what is wrong with one parsed line, so the whole schema is checked inside the
JVM (the Python validator costs tens of microseconds a line; this costs a few).

How a line is seen: `typed` is `from_json(line, <derived StructType>)`; `raw` is
`from_json(line, map<string,string>)`, which keeps every key (so unknown and missing keys are visible)
and keeps nested objects as their JSON text. A key present in `raw` but null in `typed` had the wrong
type. Known gap, by Spark's JSON reader: a number where a free-text string is expected (e.g. `"note": 5`)
is read as the string "5" and passes; enum, const and every numeric field are checked exactly. Headers
are few (one per file) and are validated with the full Python validator on the driver instead.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from kraft_tck.traces.trace import schema as trace_schema
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

RAW_OBJECT = T.MapType(T.StringType(), T.StringType())

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


# ------------------------------------------------------------------------------------------- validation

Problem = tuple[Column, Column]  # (this is wrong, message)


def _lit_list(values: list[Any]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def _present(raw: Column, key: str) -> Column:
    return F.coalesce(F.map_contains_key(raw, F.lit(key)), F.lit(False))


def _leaf_problems(node: dict[str, Any], typed: Column, present: Column, raw_text: Column,
                   path: str) -> list[Problem]:
    kinds = _json_types(node)
    out: list[Problem] = []
    is_null = present & raw_text.isNull()
    if "null" not in kinds:
        out.append((is_null, F.lit(f"{path}: null is not allowed")))
    has_value = present & raw_text.isNotNull()
    out.append((has_value & typed.isNull(),
                F.concat(F.lit(f"{path}: "), raw_text, F.lit(f" is not of type {'/'.join(kinds)}"))))
    good = has_value & typed.isNotNull()
    if "enum" in node:
        out.append((good & ~typed.isin(*node["enum"]),
                    F.concat(F.lit(f"{path}: "), raw_text, F.lit(f" is not one of {_lit_list(node['enum'])}"))))
    if "const" in node:
        out.append((good & (typed != F.lit(node["const"])),
                    F.concat(F.lit(f"{path}: "), raw_text, F.lit(f" is not {json.dumps(node['const'])}"))))
    if "minimum" in node:
        out.append((good & (typed < F.lit(node["minimum"])),
                    F.concat(F.lit(f"{path}: "), raw_text, F.lit(f" is less than {node['minimum']}"))))
    if "maximum" in node:
        out.append((good & (typed > F.lit(node["maximum"])),
                    F.concat(F.lit(f"{path}: "), raw_text, F.lit(f" is greater than {node['maximum']}"))))
    if "minLength" in node:
        out.append((good & (F.length(typed) < node["minLength"]),
                    F.lit(f"{path}: shorter than {node['minLength']} characters")))
    return out


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


def object_problems(node: dict[str, Any], typed: Column, raw: Column, path: str) -> list[Problem]:
    """Problems of one JSON object: `raw` is its map<string,string>, `typed` its parsed struct."""
    node = resolve(node)
    props: dict[str, Any] = node.get("properties", {})
    where = path or "<line>"
    out: list[Problem] = []
    if node.get("additionalProperties") is False:
        extra = F.array_sort(F.array_except(F.map_keys(raw), F.array(*[F.lit(k) for k in props])))
        out.append((F.size(extra) > 0,
                    F.concat(F.lit(f"{where}: unexpected properties "), F.concat_ws(", ", extra))))
    for key in node.get("required", []):
        out.append((~_present(raw, key), F.lit(f"{where}: '{key}' is a required property")))
    for branch in node.get("allOf", []):
        then = branch.get("then", {})
        holds = _if_holds(branch.get("if", {}), typed)
        for key in then.get("required", []):
            out.append((holds & ~_present(raw, key),
                        F.concat(F.lit(f"{where}: '{key}' is required for event "), typed["event"])))
    for key, sub in props.items():
        sub = resolve(sub)
        sub_path = f"{path}/{key}" if path else key
        present = _present(raw, key)
        raw_text = raw[key]
        kinds = [k for k in _json_types(sub) if k != "null"]
        if kinds == ["object"] and sub.get("properties"):
            inner = F.col(raw_column(sub_path))
            out.append((present & raw_text.isNotNull() & inner.isNull(), F.lit(f"{sub_path}: not an object")))
            for cond, msg in object_problems(sub, typed[key], inner, sub_path):
                out.append((present & inner.isNotNull() & cond, msg))
        elif kinds == ["object"]:
            # Free-form objects (message bodies, config) are kept as text; only their shape is checked.
            out.append((present & raw_text.isNotNull() & ~F.ltrim(raw_text).startswith("{"),
                        F.lit(f"{sub_path}: not an object")))
        elif kinds == ["array"]:
            out.extend(_array_problems(sub, typed[key], present, raw_text, sub_path))
        else:
            out.extend(_leaf_problems(sub, typed[key], present, raw_text, sub_path))
    return out


def _array_problems(node: dict[str, Any], typed: Column, present: Column, raw_text: Column,
                    path: str) -> list[Problem]:
    items = resolve(node.get("items", {}))
    out: list[Problem] = [(present & raw_text.isNotNull() & typed.isNull(), F.lit(f"{path}: not an array"))]
    if node.get("uniqueItems"):
        out.append((F.size(F.array_distinct(typed)) < F.size(typed), F.lit(f"{path}: items are not unique")))
    item_kinds = [k for k in _json_types(items) if k != "null"]
    if item_kinds == ["object"] and items.get("properties"):
        raw_items = F.col(raw_column(path))
        zipped = F.arrays_zip(typed.alias("t"), raw_items.alias("r"))

        def item(z: Column) -> Column:
            checks = object_problems(items, z["t"], z["r"], f"{path}/*")
            return _collect(checks)

        out.append((F.lit(True), F.nullif(F.array_join(F.flatten(F.transform(zipped, item)), "; "), F.lit(""))))
    else:
        def scalar(x: Column) -> Column:
            return _collect(_leaf_problems(items, x, F.lit(True), x.cast("string"), f"{path}/*"))

        out.append((F.lit(True), F.nullif(F.array_join(F.flatten(F.transform(typed, scalar)), "; "), F.lit(""))))
    return out


def _collect(checks: list[Problem]) -> Column:
    """Array of the messages whose condition holds (an empty array when the object is valid)."""
    flagged = F.array(*[F.when(F.coalesce(c, F.lit(False)), m) for c, m in checks])
    return F.filter(flagged, lambda x: x.isNotNull() & (F.length(x) > 0))


def raw_column(path: str) -> str:
    """Name of the column holding the raw map (or array of maps) of the nested object at `path`."""
    return "__raw_" + path.replace("/", "_")


def _nested_raw(node: dict[str, Any], parent: str, path: str, out: list[tuple[str, Column]]) -> None:
    for key, sub in resolve(node).get("properties", {}).items():
        sub = resolve(sub)
        sub_path = f"{path}/{key}" if path else key
        kinds = [k for k in _json_types(sub) if k != "null"]
        text = F.col(parent)[key]
        if kinds == ["object"] and sub.get("properties"):
            out.append((raw_column(sub_path), F.from_json(text, RAW_OBJECT)))
            _nested_raw(sub, raw_column(sub_path), sub_path, out)
        elif kinds == ["array"] and resolve(sub.get("items", {})).get("properties"):
            out.append((raw_column(sub_path), F.from_json(text, T.ArrayType(RAW_OBJECT))))


def raw_columns(node_name: str, raw: str) -> list[tuple[str, Column]]:
    """(name, expression) of every nested raw map, parents first: parse each nested object once, as its
    own column, instead of once per check that looks at it."""
    out: list[tuple[str, Column]] = []
    _nested_raw(definition(node_name), raw, "", out)
    return out


def with_raw_columns(df: Any, raw: str = "raw") -> Any:
    for name, expr in raw_columns("event", raw):
        df = df.withColumn(name, expr)
    return df


def event_problems(typed: Column, raw: Column) -> Column:
    """Every way one event line breaks the trace schema, "; "-joined (empty string when it conforms).

    A flat concat_ws of conditional messages, not an array filtered by a lambda: higher-order functions
    keep Spark from compiling the stage, and this expression runs once per line.
    Needs the nested raw columns of `with_raw_columns` on the same DataFrame."""
    checks = object_problems(definition("event"), typed, raw, "")
    return F.concat_ws("; ", *[F.when(F.coalesce(c, F.lit(False)), m) for c, m in checks])


