"""KIP-853's messages in the spec codec, against bytes written by hand from Kafka's protocol rules (not by the
codec under test): flexible versions use compact strings/arrays (length + 1 as an unsigned varint), uuids are
16 raw bytes, ``uint16`` is 2 bytes big-endian, and every flexible struct ends with its tagged-field section
(count, then tag / size / value for each; a tagged field at its default is not written). The request header
v2 keeps a classic int16-length ClientId and adds a tag section; the response header v1 is the correlation id
and a tag section."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kraft_tck.spec import codec
from kraft_tck.spec.codec import EncodeError

DIR = uuid.UUID("6b726166-742d-7463-6b2d-636f6e666f72")
TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def framed(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


# ------------------------------------------------------------------------------------------- AddRaftVoter

ADD_VOTER_BODY = {
    "ClusterId": "ab", "TimeoutMs": 1000, "VoterId": 3, "VoterDirectoryId": DIR,
    "Listeners": [{"Name": "CONTROLLER", "Host": "h", "Port": 9093}],
}
ADD_VOTER_FRAME = framed(
    h("0050 0000 00000007 0001") + b"c" + h("00")  # header v2: key 80, v0, correlation 7, ClientId "c", no tags
    + h("03") + b"ab"  # ClusterId: compact nullable string, length 2 + 1
    + h("000003e8")  # TimeoutMs 1000
    + h("00000003")  # VoterId 3
    + DIR.bytes  # VoterDirectoryId: 16 raw bytes
    + h("02")  # Listeners: compact array of 1
    + h("0b") + b"CONTROLLER" + h("02") + b"h" + h("2385")  # Name, Host, Port 9093 as uint16
    + h("00")  # the listener's tag section
    + h("00")  # the body's tag section
)


def test_add_raft_voter_request_v0_layout() -> None:
    assert codec.request_header_version(80, 0) == 2
    assert codec.encode_request(80, 0, 7, "c", ADD_VOTER_BODY) == ADD_VOTER_FRAME
    header, body = codec.decode_request(ADD_VOTER_FRAME[4:])
    assert (header["RequestApiKey"], header["RequestApiVersion"], header["CorrelationId"]) == (80, 0, 7)
    assert body == ADD_VOTER_BODY


def test_add_raft_voter_request_null_cluster_id_and_port_range() -> None:
    body = {**ADD_VOTER_BODY, "ClusterId": None, "Listeners": []}
    frame = codec.encode_request(80, 0, 7, "c", body)
    expected = h("0050 0000 00000007 0001") + b"c" + h("00") + h("00") + h("000003e8 00000003") + DIR.bytes + h(
        "01 00")  # null string = 0; empty compact array = 1
    assert frame == framed(expected)
    assert codec.decode_request(frame[4:])[1] == body
    with pytest.raises(EncodeError):  # Port is uint16: 0-65535
        codec.encode_request(80, 0, 7, "c",
                             {**ADD_VOTER_BODY, "Listeners": [{"Name": "C", "Host": "h", "Port": 70000}]})


def test_remove_raft_voter_request_and_response_v0_layout() -> None:
    body = {"ClusterId": None, "VoterId": 2, "VoterDirectoryId": DIR}
    frame = framed(h("0051 0000 00000001 ffff 00") + h("00 00000002") + DIR.bytes + h("00"))  # null ClientId
    assert codec.encode_request(81, 0, 1, None, body) == frame
    assert codec.decode_request(frame[4:])[1] == body
    answer = framed(h("00000001 00") + h("00000000 007f 10") + b"no such voter!!" + h("00"))  # code 127
    resp = {"ThrottleTimeMs": 0, "ErrorCode": 127, "ErrorMessage": "no such voter!!"}
    assert codec.encode_response(81, 0, 1, resp) == answer
    assert codec.decode_response(81, 0, answer[4:]) == (1, resp)


# ---------------------------------------------------------------------------------------- UpdateRaftVoter


def test_update_raft_voter_response_v0_tagged_current_leader() -> None:
    body = {"ThrottleTimeMs": 0, "ErrorCode": 0,
            "CurrentLeader": {"LeaderId": 1, "LeaderEpoch": 2, "Host": "h", "Port": 9}}
    frame = framed(
        h("00000007 00")  # response header v1: correlation 7, no tags
        + h("00000000 0000")  # ThrottleTimeMs, ErrorCode
        + h("01 00 0f")  # one tagged field: tag 0, 15 bytes
        + h("00000001 00000002 02") + b"h" + h("00000009 00")  # LeaderId, LeaderEpoch, Host, Port int32, tags
    )
    assert codec.response_header_version(82, 0) == 1
    assert codec.encode_response(82, 0, 7, body) == frame
    assert codec.decode_response(82, 0, frame[4:]) == (7, body)
    # Unknown leader: CurrentLeader at its default is not written; reading it back gives the defaults.
    bare = framed(h("00000007 00 00000000 0000 00"))
    assert codec.encode_response(82, 0, 7, {"ThrottleTimeMs": 0, "ErrorCode": 0}) == bare
    assert codec.decode_response(82, 0, bare[4:])[1]["CurrentLeader"] == {
        "LeaderId": -1, "LeaderEpoch": -1, "Host": "", "Port": 0}


def test_update_raft_voter_request_v0_layout() -> None:
    body = {"ClusterId": "c", "CurrentLeaderEpoch": 5, "VoterId": 2, "VoterDirectoryId": DIR,
            "Listeners": [{"Name": "C", "Host": "h", "Port": 1}],
            "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}}
    frame = framed(h("0052 0000 00000002 ffff 00") + h("02") + b"c" + h("00000005 00000002") + DIR.bytes
                   + h("02 02") + b"C" + h("02") + b"h" + h("0001 00")  # one listener
                   + h("0000 0001 00")  # KRaftVersionFeature: Min, Max, its tags
                   + h("00"))
    assert codec.encode_request(82, 0, 2, None, body) == frame
    assert codec.decode_request(frame[4:])[1] == body


# ------------------------------------------------------------------------------------------- VotersRecord


def test_voters_record_v0_layout() -> None:
    body = {"Version": 0, "Voters": [
        {"VoterId": 1, "VoterDirectoryId": DIR,
         "Endpoints": [{"Name": "CONTROLLER", "Host": "localhost", "Port": 9093}],
         "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}},
        {"VoterId": 2, "VoterDirectoryId": uuid.UUID(int=0), "Endpoints": [],
         "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 0}},
    ]}
    data = (
        h("0000")  # Version 0
        + h("03")  # two voters
        + h("00000001") + DIR.bytes
        + h("02 0b") + b"CONTROLLER" + h("0a") + b"localhost" + h("2385 00")
        + h("0000 0001 00")  # KRaftVersionFeature 0-1 and its tags
        + h("00")  # the voter's tags
        + h("00000002") + bytes(16) + h("01") + h("0000 0000 00") + h("00")
        + h("00")  # the record's tags
    )
    assert codec.encode_data("VotersRecord", 0, body) == data
    assert codec.decode_data("VotersRecord", 0, data) == body


# -------------------------------------------------------------------------------- Fetch v17 directory id


def _fetch_v17(directory_tags: bytes) -> bytes:
    return framed(
        h("0001 0011 00000001 0001") + b"c" + h("00")  # header v2: Fetch v17
        + h("000001f4 00000000 7fffffff 00 00000000 ffffffff")  # MaxWait, MinBytes, MaxBytes, Isolation, Session*
        + h("02") + TOPIC_ID.bytes  # one topic, by id
        + h("02 00000000 00000004 000000000000000a 00000003 0000000000000000 00100000")  # one partition
        + directory_tags  # the partition's tag section
        + h("00")  # the topic's tags
        + h("01 01")  # ForgottenTopicsData empty, RackId ""
        + h("01 01 0d 00000002 ffffffffffffffff 00")  # tagged ReplicaState (tag 1): ReplicaId 2, ReplicaEpoch -1
    )


def _fetch_v17_body(directory: uuid.UUID) -> dict[str, Any]:
    return {
        "ClusterId": None, "ReplicaState": {"ReplicaId": 2, "ReplicaEpoch": -1}, "MaxWaitMs": 500, "MinBytes": 0,
        "MaxBytes": 0x7FFFFFFF, "IsolationLevel": 0, "SessionId": 0, "SessionEpoch": -1,
        "Topics": [{"TopicId": TOPIC_ID, "Partitions": [{
            "Partition": 0, "CurrentLeaderEpoch": 4, "FetchOffset": 10, "LastFetchedEpoch": 3, "LogStartOffset": 0,
            "PartitionMaxBytes": 1 << 20, "ReplicaDirectoryId": directory}]}],
        "ForgottenTopicsData": [], "RackId": "",
    }


@pytest.mark.parametrize(("directory", "tags"), [
    (DIR, h("01 00 10") + DIR.bytes),  # KIP-853: tag 0 of the partition, 16 bytes
    (uuid.UUID(int=0), h("00")),  # ZERO_UUID is the default: not written
])
def test_fetch_v17_replica_directory_id_is_a_tagged_partition_field(directory: uuid.UUID, tags: bytes) -> None:
    frame = _fetch_v17(tags)
    assert codec.encode_request(1, 17, 1, "c", _fetch_v17_body(directory)) == frame
    assert codec.decode_request(frame[4:])[1] == _fetch_v17_body(directory)


def test_fetch_v16_has_no_replica_directory_id() -> None:
    body: dict[str, Any] = _fetch_v17_body(DIR)
    body["Topics"][0]["Partitions"][0].pop("ReplicaDirectoryId")
    frame = codec.encode_request(1, 16, 1, "c", body)
    assert frame[4:6] == h("0001") and frame[6:8] == h("0010")
    assert DIR.bytes not in frame
    assert codec.decode_request(frame[4:])[1]["Topics"][0]["Partitions"][0].get("ReplicaDirectoryId") is None


# ------------------------------------------------------------------- generated bindings of KIP-853 fields


def test_a_tagged_array_of_structs_binds_whole() -> None:
    """spec/binding.py: VoteResponse v1 ``NodeEndpoints`` (tagged 0, KIP-853) bound as one list parameter writes the
    codec's bytes, absent when empty, and reads back the same list."""
    from kraft_tck.spec import binding
    from kraft_tck.spec.binding import Expect

    part = "Topics[0].Partitions[0]."
    bind: binding.Binding = {"ErrorCode": "error", "Topics[0].TopicName": Expect("__cluster_metadata"),
                             part + "PartitionIndex": Expect(0), part + "LeaderId": "leader",
                             "NodeEndpoints": "nodes"}
    params: binding.Params = (("error", 0), ("leader", -1), ("nodes", ()))
    body_def = codec.message_struct("VoteResponse", 1)
    encode = binding.body_encoder(body_def, bind, params, "Vote v1 response")
    header = codec.message_struct("ResponseHeader", codec.response_header_version(52, 1))
    decode = binding.frame_decoder(header, body_def, bind, params, lambda *a: a, "Vote v1 response", response=True)
    for nodes in ([{"NodeId": 1, "Host": "h", "Port": 9091}], []):
        got = encode(0, 1, nodes)
        want = {"ErrorCode": 0, "Topics": [{"TopicName": "__cluster_metadata", "Partitions": [
            {"PartitionIndex": 0, "ErrorCode": 0, "LeaderId": 1, "LeaderEpoch": 0, "VoteGranted": False}]}],
            "NodeEndpoints": nodes}
        assert got == codec.encode_response_body(52, 1, want)
        # the body's tag section: one field, tag 0, 10 bytes: a compact array of one (NodeId, Host, Port uint16, tags)
        assert got.endswith(h("01 00 0a 02 00000001 02") + b"h" + h("2383 00") if nodes
                            else h("00000000 00 00 00 00"))  # LeaderEpoch, VoteGranted, 3 empty tag sections
        assert decode(codec.frame_response(52, 1, 9, got)[4:]) == (9, (0, 1, nodes))
