"""Load and validate Kafka-format message definitions (``spec/messages/*.json``).

The format is Kafka's own: a message has ``name``, ``type`` (request/response/header/data/metadata),
``validVersions``, ``flexibleVersions`` and ``fields``; a field has ``name``, ``type``, ``versions`` and
optionally ``nullableVersions``, ``default``, ``taggedVersions`` + ``tag``, ``flexibleVersions``,
``ignorable``, ``mapKey``, ``entityType``, ``about`` and nested ``fields``; ``commonStructs`` declares
struct types shared by several fields. Everything is checked here so that the codec can trust it: a
malformed definition raises :class:`SchemaError` naming the file and the field.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

MESSAGES_DIR = Path(__file__).with_name("messages")

PRIMITIVES = frozenset(
    {
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint16",
        "uint32",
        "float64",
        "uuid",
        "string",
        "bytes",
        "records",
    }
)
NULLABLE_PRIMITIVES = frozenset({"string", "bytes", "records"})
MESSAGE_TYPES = frozenset({"request", "response", "header", "data", "metadata"})
INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}
MESSAGE_KEYS = frozenset(
    {
        "apiKey",
        "type",
        "name",
        "about",
        "validVersions",
        "flexibleVersions",
        "fields",
        "commonStructs",
        "listeners",
        "latestVersionUnstable",
        "deprecatedVersions",
    }
)
FIELD_KEYS = frozenset(
    {
        "name",
        "type",
        "versions",
        "nullableVersions",
        "default",
        "ignorable",
        "entityType",
        "about",
        "mapKey",
        "taggedVersions",
        "tag",
        "flexibleVersions",
        "fields",
        "zeroCopy",
    }
)
STRUCT_KEYS = frozenset({"name", "versions", "fields", "about"})
_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*$")
MAX_VERSION = 0x7FFF


class SchemaError(ValueError):
    """A malformed message definition."""


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; ``hi`` is MAX_VERSION for "N+"; empty when lo > hi ("none")."""

    lo: int
    hi: int

    def __contains__(self, v: object) -> bool:
        return isinstance(v, int) and self.lo <= v <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def intersect(self, other: Versions) -> Versions:
        return Versions(max(self.lo, other.lo), min(self.hi, other.hi))

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        return str(self.lo) if self.lo == self.hi else f"{self.lo}-{self.hi}"


NONE = Versions(1, 0)


def parse_versions(text: object, where: str) -> Versions:
    if not isinstance(text, str):
        raise SchemaError(f"{where}: version range must be a string, got {text!r}")
    s = text.strip()
    if s == "none":
        return NONE
    m = re.fullmatch(r"(\d+)(\+|-(\d+))?", s)
    if not m:
        raise SchemaError(f"{where}: malformed version range {text!r} (expected 'N', 'N+', 'N-M' or 'none')")
    lo = int(m.group(1))
    if m.group(2) == "+":
        hi = MAX_VERSION
    elif m.group(3) is not None:
        hi = int(m.group(3))
    else:
        hi = lo
    if lo > hi or hi > MAX_VERSION:
        raise SchemaError(f"{where}: empty or out-of-range version range {text!r}")
    return Versions(lo, hi)


@dataclass(slots=True)
class FieldDef:
    name: str
    type: str  # e.g. "int32", "[]int32", "[]Voter", "EpochEndOffset", "records"
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    flexible_override: Versions | None
    ignorable: bool
    map_key: bool
    default_raw: object
    fields: list[FieldDef] | None  # element/struct fields for struct-typed fields (resolved commonStructs)
    where: str

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVES

    def default_value(self, version: int) -> Any:
        """The value an absent field takes at ``version`` (Kafka's rules for the ``default`` key)."""
        raw = self.default_raw
        if self.is_array:
            if raw == "null":
                return None
            return []
        if self.is_struct:
            if raw == "null":
                return None
            assert self.fields is not None
            return {f.name: f.default_value(version) for f in self.fields if version in f.versions}
        t = self.type
        if raw == "null":
            return None
        if t in INT_RANGES:
            return _parse_int(raw, 0)
        if t == "bool":
            return raw in (True, "true")
        if t == "float64":
            return float(str(raw)) if raw is not None else 0.0
        if t == "string":
            return "" if raw is None else str(raw)
        if t == "uuid":
            return uuid.UUID(int=0) if raw is None else _parse_uuid(str(raw))
        if t == "bytes":
            return b""
        return None  # records: Kafka's default is null


@dataclass(slots=True)
class MessageDef:
    name: str
    type: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: list[FieldDef]
    path: Path
    about: str = ""
    listeners: list[str] = field(default_factory=list)


def _parse_int(raw: object, fallback: int) -> int:
    if raw is None:
        return fallback
    if isinstance(raw, bool):
        raise ValueError(f"boolean {raw!r} is not an integer default")
    if isinstance(raw, int):
        return raw
    s = str(raw).strip()
    return int(s, 16) if s.lower().startswith(("0x", "-0x")) else int(s)


def _parse_uuid(raw: str) -> uuid.UUID:
    import base64

    # Kafka writes UUID defaults in its URL-safe base64 form (22 characters).
    padded = raw + "=" * (-len(raw) % 4)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(padded))


def _check_default(fd: FieldDef, where: str) -> None:
    raw = fd.default_raw
    if raw is None:
        return
    if raw == "null":
        if fd.nullable.empty:
            raise SchemaError(f"{where}: default 'null' on a field that is never nullable")
        return
    if fd.is_array or fd.is_struct:
        raise SchemaError(f"{where}: array and struct fields take only 'null' as an explicit default")
    t = fd.type
    try:
        if t in INT_RANGES:
            lo, hi = INT_RANGES[t]
            v = _parse_int(raw, 0)
            if not lo <= v <= hi:
                raise ValueError(f"{v} outside {t}")
        elif t == "bool":
            if raw not in (True, False, "true", "false"):
                raise ValueError("not true/false")
        elif t == "float64":
            float(str(raw))
        elif t == "uuid":
            _parse_uuid(str(raw))
        elif t in ("bytes", "records"):
            raise ValueError(f"{t} fields take no explicit default")
    except ValueError as exc:
        raise SchemaError(f"{where}: bad default {raw!r} for type {t}: {exc}") from None


def _parse_field(
    raw: object,
    where: str,
    parent_versions: Versions,
    structs: dict[str, dict[str, Any]],
    flexible: Versions,
    path: Path,
    depth: int,
) -> FieldDef:
    if not isinstance(raw, dict):
        raise SchemaError(f"{where}: a field must be an object, got {type(raw).__name__}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise SchemaError(f"{where}: field name {name!r} must be CamelCase letters and digits")
    where = f"{where}.{name}"
    unknown = set(raw) - FIELD_KEYS
    if unknown:
        raise SchemaError(f"{where}: unknown key(s) {sorted(unknown)}")
    ftype = raw.get("type")
    if not isinstance(ftype, str) or not ftype:
        raise SchemaError(f"{where}: missing 'type'")
    if "versions" not in raw:
        raise SchemaError(f"{where}: missing 'versions'")
    versions = parse_versions(raw["versions"], f"{where}.versions")
    nullable = (
        parse_versions(raw["nullableVersions"], f"{where}.nullableVersions")
        if "nullableVersions" in raw
        else NONE
    )
    tagged = (
        parse_versions(raw["taggedVersions"], f"{where}.taggedVersions") if "taggedVersions" in raw else NONE
    )
    flex_override = (
        parse_versions(raw["flexibleVersions"], f"{where}.flexibleVersions")
        if "flexibleVersions" in raw
        else None
    )
    tag: int | None = None
    if "tag" in raw:
        try:
            tag = _parse_int(raw["tag"], 0)
        except ValueError:
            raise SchemaError(f"{where}: tag {raw['tag']!r} is not an integer") from None
        if tag < 0:
            raise SchemaError(f"{where}: negative tag {tag}")
        if tagged.empty:
            raise SchemaError(f"{where}: 'tag' without 'taggedVersions'")
    elif not tagged.empty:
        raise SchemaError(f"{where}: 'taggedVersions' without 'tag'")
    if not tagged.empty:
        if tagged.lo < versions.lo or tagged.hi > versions.hi:
            raise SchemaError(f"{where}: taggedVersions {tagged} outside versions {versions}")
        if tagged.lo < flexible.lo or flexible.empty:
            raise SchemaError(
                f"{where}: taggedVersions {tagged} outside the message's flexibleVersions {flexible}"
            )
    if not nullable.empty and (nullable.lo < versions.lo or nullable.hi > versions.hi):
        raise SchemaError(f"{where}: nullableVersions {nullable} outside versions {versions}")

    element = ftype[2:] if ftype.startswith("[]") else ftype
    sub: list[FieldDef] | None = None
    if element in PRIMITIVES:
        if "fields" in raw:
            raise SchemaError(f"{where}: primitive type {ftype} cannot have nested 'fields'")
        if not nullable.empty and not ftype.startswith("[]") and element not in NULLABLE_PRIMITIVES:
            raise SchemaError(f"{where}: type {ftype} cannot be nullable")
        if ftype.startswith("[]") and element == "records":
            raise SchemaError(f"{where}: arrays of records are not a Kafka type")
    else:
        if not _NAME.match(element):
            raise SchemaError(f"{where}: unknown type {ftype!r}")
        if depth > 16:
            raise SchemaError(f"{where}: structs nested deeper than 16 levels")
        if "fields" in raw:
            if element in structs:
                raise SchemaError(f"{where}: struct {element} is defined both inline and in commonStructs")
            sub_raw = raw["fields"]
        elif element in structs:
            sub_raw = structs[element]["fields"]
        else:
            raise SchemaError(f"{where}: struct type {element} has no 'fields' and is not in commonStructs")
        if not isinstance(sub_raw, list):
            raise SchemaError(f"{where}: 'fields' must be a list")
        sub = _parse_fields(sub_raw, where, versions, structs, flexible, path, depth + 1)
    fd = FieldDef(
        name=name,
        type=ftype,
        versions=versions,
        nullable=nullable,
        tagged=tagged,
        tag=tag,
        flexible_override=flex_override,
        ignorable=bool(raw.get("ignorable", False)),
        map_key=bool(raw.get("mapKey", False)),
        default_raw=raw.get("default"),
        fields=sub,
        where=f"{path.name}: {where}",
    )
    _check_default(fd, f"{path.name}: {where}")
    return fd


def _parse_fields(
    raws: list[Any],
    where: str,
    parent_versions: Versions,
    structs: dict[str, dict[str, Any]],
    flexible: Versions,
    path: Path,
    depth: int,
) -> list[FieldDef]:
    out: list[FieldDef] = []
    names: set[str] = set()
    tags: dict[int, str] = {}
    for i, raw in enumerate(raws):
        fd = _parse_field(
            raw,
            f"{where}[{i}]" if not isinstance(raw, dict) else where,
            parent_versions,
            structs,
            flexible,
            path,
            depth,
        )
        if fd.name in names:
            raise SchemaError(f"{path.name}: {where}.{fd.name}: duplicate field name")
        names.add(fd.name)
        if fd.tag is not None:
            if fd.tag in tags:
                raise SchemaError(
                    f"{path.name}: {where}.{fd.name}: tag {fd.tag} already used by {tags[fd.tag]}"
                )
            tags[fd.tag] = fd.name
        out.append(fd)
    return out


def parse_message(doc: object, path: Path) -> MessageDef:
    """Validate one decoded JSON definition; ``path`` is only used in error messages."""
    if not isinstance(doc, dict):
        raise SchemaError(f"{path.name}: top level must be an object")
    unknown = set(doc) - MESSAGE_KEYS
    if unknown:
        raise SchemaError(f"{path.name}: unknown top-level key(s) {sorted(unknown)}")
    name = doc.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise SchemaError(f"{path.name}: missing or malformed 'name' {name!r}")
    if path.suffix == ".json" and path.stem != name:
        raise SchemaError(f"{path.name}: file name does not match message name {name!r}")
    mtype = doc.get("type")
    if mtype not in MESSAGE_TYPES:
        raise SchemaError(f"{path.name}: 'type' must be one of {sorted(MESSAGE_TYPES)}, got {mtype!r}")
    api_key = doc.get("apiKey")
    if mtype in ("request", "response", "metadata"):
        if not isinstance(api_key, int) or isinstance(api_key, bool) or not 0 <= api_key <= 0x7FFF:
            raise SchemaError(f"{path.name}: {mtype} needs an integer 'apiKey', got {api_key!r}")
    elif api_key is not None:
        raise SchemaError(f"{path.name}: a {mtype} message has no apiKey")
    if "validVersions" not in doc:
        raise SchemaError(f"{path.name}: missing 'validVersions'")
    valid = parse_versions(doc["validVersions"], f"{path.name}: validVersions")
    if valid.empty or valid.hi == MAX_VERSION:
        raise SchemaError(f"{path.name}: validVersions must be a closed range, got {doc['validVersions']!r}")
    flexible = parse_versions(doc.get("flexibleVersions", "none"), f"{path.name}: flexibleVersions")
    structs: dict[str, dict[str, Any]] = {}
    for i, s in enumerate(doc.get("commonStructs", [])):
        if (
            not isinstance(s, dict)
            or not isinstance(s.get("name"), str)
            or not isinstance(s.get("fields"), list)
        ):
            raise SchemaError(f"{path.name}: commonStructs[{i}] needs a 'name' and a 'fields' list")
        extra = set(s) - STRUCT_KEYS
        if extra:
            raise SchemaError(f"{path.name}: commonStructs.{s['name']}: unknown key(s) {sorted(extra)}")
        if s["name"] in structs:
            raise SchemaError(f"{path.name}: commonStructs.{s['name']}: defined twice")
        structs[s["name"]] = s
    raw_fields = doc.get("fields")
    if not isinstance(raw_fields, list):
        raise SchemaError(f"{path.name}: 'fields' must be a list")
    try:
        fields = _parse_fields(raw_fields, name, valid, structs, flexible, path, 0)
    except SchemaError as exc:
        text = str(exc)
        if not text.startswith(path.name):
            raise SchemaError(f"{path.name}: {text}") from None
        raise
    return MessageDef(
        name=name,
        type=str(mtype),
        api_key=api_key if isinstance(api_key, int) else None,
        valid=valid,
        flexible=flexible,
        fields=fields,
        path=path,
        about=str(doc.get("about", "")),
        listeners=list(doc.get("listeners", [])),
    )


def load_file(path: Path) -> MessageDef:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{path.name}: not valid JSON: {exc}") from None
    return parse_message(doc, path)


@cache
def load_all(directory: Path = MESSAGES_DIR) -> dict[str, MessageDef]:
    """Every definition in ``directory`` keyed by message name."""
    out: dict[str, MessageDef] = {}
    for path in sorted(directory.glob("*.json")):
        md = load_file(path)
        out[md.name] = md
    if not out:
        raise SchemaError(f"no message definitions found in {directory}")
    return out
