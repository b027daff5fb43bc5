"""Convert between this codec's bodies and kafka-python's protocol objects (kafka-python 3.x).

Used by the differential tests and the codec benchmark, which compare the two codecs on the same
messages; kafka-python itself is a development dependency and is imported by the callers.
"""

from __future__ import annotations

from typing import Any


def _kp_fields(struct: Any, version: int) -> list[Any]:
    return [f for f in struct._fields if f.for_version_q(version)]


def _kp_default(f: Any, version: int) -> Any:
    d = f.default
    if f.is_struct():
        return {sf._json["name"]: _kp_default(sf, version) for sf in _kp_fields(f, version)}
    if d is not None and f.is_struct_array():
        return list(d)
    return d


def to_kafka_python(struct: Any, data_class: Any, body: dict[str, Any], version: int) -> Any:
    kwargs = {}
    for f in _kp_fields(struct, version):
        camel = f._json["name"]
        if camel not in body:
            continue
        v = body[camel]
        if f._tag is not None and v == _kp_default(f, version):
            # Kafka writes a tagged field only when it differs from its default; kafka-python writes
            # any field it was given, so give it only the fields Kafka would write.
            continue
        sub_cls = getattr(data_class, f.type_str, None) if f.is_struct() or f.is_struct_array() else None
        if v is not None and f.is_struct():
            v = to_kafka_python(f, sub_cls, v, version)
        elif v is not None and f.is_struct_array():
            v = [to_kafka_python(f, sub_cls, x, version) for x in v]
        kwargs[f.name] = v
    return data_class(version=version, **kwargs)


def from_kafka_python(struct: Any, obj: Any, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in _kp_fields(struct, version):
        v = getattr(obj, f.name)
        if v is not None and f.is_struct():
            v = from_kafka_python(f, v, version)
        elif v is not None and f.is_struct_array():
            v = [from_kafka_python(f, x, version) for x in v]
        elif isinstance(v, bytes | bytearray | memoryview):
            v = bytes(v)
        out[f._json["name"]] = v
    return out
