"""Message definitions load and are validated; the error table agrees with Kafka's."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.spec import codec
from kraft_tck.spec.errors import ERRORS_TSV, Errors, error_table
from kraft_tck.spec.schema import MESSAGES_DIR, SchemaError, load_all, parse_message

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference"
# Kafka's table (as exported in shared/reference) skips code 99; Kafka's Errors.java has
# POSITION_OUT_OF_RANGE there (KIP-630 FetchSnapshot), which KRaft uses.
NOT_IN_REFERENCE = {"POSITION_OUT_OF_RANGE"}


def test_all_definitions_load_as_plain_json() -> None:
    for path in MESSAGES_DIR.glob("*.json"):
        json.loads(path.read_text())  # no // comments
    defs = load_all()
    assert {
        "RequestHeader",
        "ResponseHeader",
        "QuorumStateData",
        "VotersRecord",
        "RegisterBrokerRecord",
        "BrokerRegistrationChangeRecord",
        "UnregisterBrokerRecord",
    } <= set(defs)


def _load_reference(name: str) -> dict[str, Any]:
    for sub in ("", "metadata-records"):
        p = REFERENCE / "kafka-messages" / sub / f"{name}.json"
        if p.exists():
            text = "\n".join(
                line for line in p.read_text().splitlines() if not line.lstrip().startswith("//")
            )
            return json.loads(text)
    raise FileNotFoundError(name)


def _shape(node: Any) -> Any:
    """Everything that affects the wire, without prose."""
    if isinstance(node, dict):
        return {k: _shape(v) for k, v in node.items() if k not in ("about", "entityType", "listeners")}
    if isinstance(node, list):
        return [_shape(x) for x in node]
    return node


@pytest.mark.skipif(
    not (REFERENCE / "kafka-messages").is_dir(), reason="shared/reference is not beside the repo"
)
@pytest.mark.parametrize("name", sorted(load_all()))
def test_definitions_are_faithful_to_kafka(name: str) -> None:
    ours = json.loads((MESSAGES_DIR / f"{name}.json").read_text())
    assert _shape(ours) == _shape(_load_reference(name))


def _bad(doc: dict[str, Any]) -> None:
    parse_message(doc, Path("Bad.json"))


def _msg(**field: Any) -> dict[str, Any]:
    return {
        "name": "Bad",
        "type": "data",
        "validVersions": "0-1",
        "flexibleVersions": "0+",
        "fields": [{"name": "F", "versions": "0+", **field}],
    }


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        (_msg(type="int33"), "F: unknown type"),
        (_msg(type="int32", versions="x+"), "F.versions: malformed version range"),
        (_msg(type="int32", nullableVersions="0+"), "F: type int32 cannot be nullable"),
        (_msg(type="int32", tag=1), "'tag' without 'taggedVersions'"),
        (_msg(type="int32", taggedVersions="0+"), "'taggedVersions' without 'tag'"),
        (_msg(type="Sub"), "struct type Sub has no 'fields'"),
        (_msg(type="int32", default="abc"), "bad default"),
        (_msg(type="int8", default="300"), "bad default"),
        (_msg(type="int32", colour="red"), "unknown key(s) ['colour']"),
        ({**_msg(type="int32"), "validVersions": "0+"}, "closed range"),
        ({**_msg(type="int32"), "type": "request"}, "needs an integer 'apiKey'"),
    ],
)
def test_malformed_definitions_are_named(doc: dict[str, Any], needle: str) -> None:
    with pytest.raises(SchemaError) as info:
        _bad(doc)
    assert "Bad.json" in str(info.value) and needle in str(info.value)


def test_duplicate_tags_rejected() -> None:
    doc = _msg(type="int32", tag=0, taggedVersions="0+")
    doc["fields"].append({"name": "G", "type": "int32", "versions": "0+", "tag": 0, "taggedVersions": "0+"})
    with pytest.raises(SchemaError, match="tag 0 already used by F"):
        _bad(doc)


def test_errors_enum_matches_tsv_and_kafka() -> None:
    table = error_table()
    assert {e.name: int(e) for e in Errors} == {row.name: code for code, row in table.items()}
    required = [
        "NONE",
        "UNKNOWN_SERVER_ERROR",
        "CORRUPT_MESSAGE",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "NOT_LEADER_OR_FOLLOWER",
        "BROKER_NOT_AVAILABLE",
        "CLUSTER_AUTHORIZATION_FAILED",
        "UNSUPPORTED_VERSION",
        "INVALID_REQUEST",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_LEADER_EPOCH",
        "OFFSET_OUT_OF_RANGE",
        "INCONSISTENT_VOTER_SET",
        "INCONSISTENT_CLUSTER_ID",
        "INVALID_RECORD",
        "POSITION_OUT_OF_RANGE",
        "NOT_CONTROLLER",
        "STALE_BROKER_EPOCH",
        "DUPLICATE_BROKER_REGISTRATION",
        "BROKER_ID_NOT_REGISTERED",
        "INVALID_REGISTRATION",
    ]
    assert set(required) <= {e.name for e in Errors}
    assert Errors.NOT_LEADER_OR_FOLLOWER.retriable and not Errors.INVALID_REQUEST.retriable
    ref_path = REFERENCE / "kafka-errors.tsv"
    if not ref_path.exists():
        pytest.skip("shared/reference/kafka-errors.tsv is not beside the repo")
    with ref_path.open() as fh:
        ref = {
            row["name"]: (int(row["code"]), row["message"] or "")
            for row in csv.DictReader(fh, delimiter="\t")
        }
    for code, row in table.items():
        if row.name in NOT_IN_REFERENCE:
            continue
        assert ref[row.name] == (code, row.message), row.name
    assert ERRORS_TSV.exists()


def test_unknown_api_raises_unsupported_version_with_header() -> None:
    from kraft_tck.spec.errors import UnsupportedVersionError

    with pytest.raises(UnsupportedVersionError) as info:
        codec.decode_request(bytes.fromhex("0034 0009 00000011 0000"))
    assert (info.value.api_key, info.value.version, info.value.correlation_id) == (52, 9, 17)
    assert info.value.error_code == Errors.UNSUPPORTED_VERSION
    with pytest.raises(UnsupportedVersionError):
        codec.decode_request(bytes.fromhex("0fff 0000 00000001 0000"))
    with pytest.raises(ValueError):
        codec.unsupported_version_response(52, 9, 17)
