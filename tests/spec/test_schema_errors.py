"""Message definitions load and are validated; the error table agrees with Kafka's."""

from __future__ import annotations

import csv
import json
import subprocess
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


#: Bare git mirrors of Kafka (newest first) for definitions shared/reference does not hold (it has the
#: KRaft RPCs only; DescribeCluster and the SASL RPCs are in clients/src/main/resources/common/message).
KAFKA_MIRRORS = [REFERENCE.parents[1] / ".mirror" / m / "repo" for m in ("Gongheyang+kafka", "apache+kafka")]


#: Definitions at Kafka 4.0's version, newer than shared/reference's (Kafka 3.9): compared with the newest
#: mirror, with Kafka 4.0's renames mapped back to the kit's names (same wire layout). Vote v2 adds PreVote
#: (KIP-996, KAFKA-17641) and renames Candidate* to Replica*.
KAFKA_4_RENAMES: dict[str, dict[str, str]] = {
    "VoteRequest": {"ReplicaEpoch": "CandidateEpoch", "ReplicaId": "CandidateId",
                    "ReplicaDirectoryId": "CandidateDirectoryId"},
    "VoteResponse": {},
}


def _renamed(node: Any, names: dict[str, str]) -> Any:
    if isinstance(node, dict):
        return {k: (names.get(v, v) if k == "name" else _renamed(v, names)) for k, v in node.items()}
    if isinstance(node, list):
        return [_renamed(x, names) for x in node]
    return node


def _load_reference(name: str) -> dict[str, Any]:
    text = None
    if name in KAFKA_4_RENAMES:
        for mirror in KAFKA_MIRRORS:
            where = f"HEAD:clients/src/main/resources/common/message/{name}.json"
            shown = subprocess.run(["git", "-C", str(mirror), "show", where], capture_output=True, text=True,
                                   check=False)
            if shown.returncode == 0 and '"0-2"' in shown.stdout:
                lines = [line for line in shown.stdout.splitlines() if not line.lstrip().startswith("//")]
                return _renamed(json.loads("\n".join(lines)), KAFKA_4_RENAMES[name])
        pytest.skip(f"no Kafka 4.x mirror holds {name}.json v2: compare it with apache/kafka 4.0's "
                    f"clients/src/main/resources/common/message/{name}.json")
    for sub in ("", "metadata-records"):
        p = REFERENCE / "kafka-messages" / sub / f"{name}.json"
        if p.exists():
            text = p.read_text()
            break
    for mirror in KAFKA_MIRRORS if text is None else ():
        where = f"HEAD:clients/src/main/resources/common/message/{name}.json"
        shown = subprocess.run(["git", "-C", str(mirror), "show", where], capture_output=True, text=True, check=False)
        if shown.returncode == 0:
            text = shown.stdout
            break
    if text is None:
        pytest.skip(f"Kafka's {name}.json is neither in shared/reference/kafka-messages nor in a Kafka mirror: "
                    f"compare it with apache/kafka clients/src/main/resources/common/message/{name}.json")
    return json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))


def _shape(node: Any) -> Any:
    """Everything that affects the wire, without prose (and without ``deprecatedVersions``, which Kafka 4.x marks on
    versions it still serves: KIP-896)."""
    if isinstance(node, dict):
        return {k: _shape(v) for k, v in node.items()
                if k not in ("about", "entityType", "listeners", "deprecatedVersions")}
    if isinstance(node, list):
        return [_shape(x) for x in node]
    return node


@pytest.mark.skipif(
    not (REFERENCE / "kafka-messages").is_dir(), reason="shared/reference is not beside the repo"
)
@pytest.mark.parametrize("name", sorted(load_all()))
def test_definitions_are_faithful_to_kafka(name: str) -> None:
    ours = json.loads((MESSAGES_DIR / f"{name}.json").read_text())
    theirs = _load_reference(name)
    top = [int(str(d["validVersions"]).split("-")[-1]) for d in (ours, theirs)]
    if top[1] < top[0] and not any((REFERENCE / "kafka-messages" / sub / f"{name}.json").exists()
                                   for sub in ("", "metadata-records")):
        pytest.skip(f"the Kafka mirror's {name}.json stops at v{top[1]}, ours (Kafka 4.x) at v{top[0]}: compare it "
                    "with a newer apache/kafka mirror")
    assert _shape(ours) == _shape(theirs)


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
