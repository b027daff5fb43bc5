"""reference/wire.py through the real codec: every core message survives encode -> bytes -> decode at
every version it supports, and errors land at Kafka's level (top-level vs partition-level)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kraft_tck.reference import wire
from kraft_tck.reference.messages import (
    ZERO_UUID,
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    Endpoint,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    NodeListeners,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    ReplicaState,
    Request,
    Response,
    SnapshotId,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    VoteRequest,
    VoteResponse,
)
from kraft_tck.reference.net import CLIENT_SOFTWARE
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import ControlType, control_batch, data_batch

LEADER_CHANGE = control_batch(
    0,
    3,
    ControlType.LEADER_CHANGE,
    {"Version": 0, "LeaderId": 1, "Voters": [{"VoterId": 1}], "GrantingVoters": []},
)
BATCHES = (LEADER_CHANGE, data_batch(1, 3, [b"a", b"bb"], timestamp=7))

REQUESTS: list[tuple[Request, range]] = [
    (VoteRequest("cid", 4, 1, 3, 10, voter_id=2), range(0, 2)),
    (VoteRequest(None, 4, 1, 3, 10), range(0, 2)),
    (BeginQuorumEpochRequest("cid", 1, 4, voter_id=2), range(0, 2)),
    (EndQuorumEpochRequest("cid", 1, 4, (3, 2)), range(0, 2)),
    # v13+: a v12 request names no TopicId and reads as another topic (RaftUtil.hasValidTopicPartition)
    (FetchRequest("cid", 2, 4, 10, 3, 500, 1024), range(13, 18)),
    (FetchRequest(None, 9, 4, 0, -1, 0), range(13, 18)),
    (DescribeQuorumRequest(), range(0, 3)),
]

RESPONSES: list[tuple[Response, range]] = [
    (VoteResponse(1, 4, True), range(0, 2)),
    (VoteResponse(-1, 4, False, partition_error=Errors.INCONSISTENT_VOTER_SET), range(0, 2)),
    (BeginQuorumEpochResponse(1, 4, Errors.FENCED_LEADER_EPOCH), range(0, 2)),
    (EndQuorumEpochResponse(1, 4), range(0, 2)),
    (FetchResponse(5, BATCHES, None, LeaderIdAndEpoch(1, 3)), range(12, 18)),
    (FetchResponse(5, (), (2, 7), LeaderIdAndEpoch(1, 3)), range(12, 18)),
    (FetchResponse(5, (), (0, 0), LeaderIdAndEpoch(1, 3)), range(12, 18)),
    (
        FetchResponse(
            0, partition_error=Errors.NOT_LEADER_OR_FOLLOWER, current_leader=LeaderIdAndEpoch(2, 5)
        ),
        range(12, 18),
    ),
    (
        DescribeQuorumResponse(
            1, 4, 9, (ReplicaState(1, 10, 50, 50), ReplicaState(2, 9, 40, 30)), (ReplicaState(7, 3, 20, -1),)
        ),
        range(1, 3),
    ),
    # DescribeQuorumResponse.singletonErrorResponse: LeaderId, LeaderEpoch, HighWatermark stay 0
    (DescribeQuorumResponse(0, 0, 0, partition_error=Errors.NOT_LEADER_OR_FOLLOWER), range(0, 3)),
]


@pytest.mark.parametrize(
    ("req", "versions"), REQUESTS, ids=[f"{type(r).__name__}-{i}" for i, (r, _) in enumerate(REQUESTS)]
)
def test_requests_round_trip_through_the_codec(req: Request, versions: range) -> None:
    key = wire.api_key(req)
    for version in versions:
        raw = codec.encode_request(key, version, 17, "t", wire.request_to_body(req, version))
        header, body = codec.decode_request(raw[4:])  # drop the frame's size prefix
        assert header["RequestApiKey"] == key and header["RequestApiVersion"] == version
        back = wire.request_from_body(key, version, body)
        if isinstance(req, VoteRequest) and version == 0:
            req = VoteRequest(
                req.cluster_id, req.candidate_epoch, req.candidate_id, req.last_offset_epoch, req.last_offset
            )  # VoterId is v1+
            back = VoteRequest(
                back.cluster_id,
                back.candidate_epoch,
                back.candidate_id,
                back.last_offset_epoch,
                back.last_offset,
            )
        if isinstance(req, BeginQuorumEpochRequest) and version == 0:
            assert back == BeginQuorumEpochRequest(req.cluster_id, req.leader_id, req.leader_epoch)
            continue
        assert back == req, f"v{version}"


@pytest.mark.parametrize(
    ("resp", "versions"), RESPONSES, ids=[f"{type(r).__name__}-{i}" for i, (r, _) in enumerate(RESPONSES)]
)
def test_responses_round_trip_through_the_codec(resp: Response, versions: range) -> None:
    key = wire.api_key(resp)
    for version in versions:
        raw = codec.encode_response(key, version, 17, wire.response_to_body(resp, version))
        corr, body = codec.decode_response(key, version, raw[4:])  # drop the frame's size prefix
        assert corr == 17
        assert wire.response_from_body(key, version, body) == resp, f"v{version}"


def test_describe_quorum_v0_has_no_kip836_timestamps() -> None:
    resp = DescribeQuorumResponse(1, 4, 9, (ReplicaState(1, 10, 50, 50),))
    body = wire.response_to_body(resp, 0)
    (row,) = body["Topics"][0]["Partitions"][0]["CurrentVoters"]
    assert row == {"ReplicaId": 1, "LogEndOffset": 10}


def test_fetch_v13_names_the_metadata_topic_by_id_and_v15_moves_the_replica_id() -> None:
    req = FetchRequest("cid", 2, 4, 10, 3, 500)
    v13, v15 = wire.request_to_body(req, 13), wire.request_to_body(req, 15)
    assert v13["Topics"][0]["TopicId"] == wire.METADATA_TOPIC_ID
    assert str(wire.METADATA_TOPIC_ID) == "00000000-0000-0000-0000-000000000001"
    assert v13["ReplicaId"] == 2 and "ReplicaState" not in v13
    assert v15["ReplicaState"] == {"ReplicaId": 2, "ReplicaEpoch": -1} and "ReplicaId" not in v15
    assert wire.request_to_body(req, 12)["Topics"][0]["Topic"] == "__cluster_metadata"


def test_error_levels_follow_kafka() -> None:
    # A top-level error carries no partition (KafkaRaftClient: new FetchResponseData().setErrorCode(...)).
    top = wire.response_to_body(FetchResponse(error=Errors.INCONSISTENT_CLUSTER_ID), 16)
    assert top["ErrorCode"] == Errors.INCONSISTENT_CLUSTER_ID and top["Responses"] == []
    for resp in (
        VoteResponse(1, 2, False, error=Errors.INVALID_REQUEST),
        BeginQuorumEpochResponse(1, 2, error=Errors.INCONSISTENT_CLUSTER_ID),
        EndQuorumEpochResponse(1, 2, error=Errors.INVALID_REQUEST),
    ):
        body = wire.response_to_body(resp, 1)
        assert body["ErrorCode"] == resp.error and body["Topics"] == []
    part = wire.response_to_body(VoteResponse(1, 2, False, partition_error=Errors.FENCED_LEADER_EPOCH), 1)
    assert (
        part["ErrorCode"] == 0
        and part["Topics"][0]["Partitions"][0]["ErrorCode"] == Errors.FENCED_LEADER_EPOCH
    )


@pytest.mark.parametrize(
    ("key", "version", "body"),
    [
        (
            wire.VOTE,
            0,
            {
                "ClusterId": None,
                "Topics": [
                    {
                        "TopicName": "other",
                        "Partitions": [
                            {
                                "PartitionIndex": 0,
                                "CandidateEpoch": 1,
                                "CandidateId": 1,
                                "LastOffsetEpoch": 0,
                                "LastOffset": 0,
                            }
                        ],
                    }
                ],
            },
        ),
        (
            wire.DESCRIBE_QUORUM,
            0,
            {"Topics": [{"TopicName": "__cluster_metadata", "Partitions": [{"PartitionIndex": 3}]}]},
        ),
        (wire.FETCH, 13, {"MaxWaitMs": 0, "Topics": []}),
    ],
)
def test_foreign_partitions_reach_the_core_marked(
    key: int, version: int, body: dict[str, object]
) -> None:
    """Kafka checks the cluster id before the partition, so the core answers both (in that order)."""
    req = wire.request_from_body(key, version, body)
    if isinstance(req, DescribeQuorumRequest):
        assert req.unknown == (("__cluster_metadata", (3,)),)
    else:
        assert req.valid_partition is False
    err = wire.error_response_body(key, version, Errors.INVALID_REQUEST)
    raw = codec.encode_response(key, version, 1, err)
    _, decoded = codec.decode_response(key, version, raw[4:])  # drop the frame's size prefix
    assert wire.response_from_body(key, version, decoded).error == Errors.INVALID_REQUEST


def test_shell_api_names_senders_and_refuses_what_the_core_cannot_take() -> None:
    fetch = FetchRequest("cid", 3, 4, 10, 3, 500)
    for version in (12, 13, 15):
        body = wire.request_to_body(fetch, version)
        assert wire.sender_of(wire.request_from_kafka(wire.FETCH, version, body)) == 3
    assert wire.sender_of(VoteRequest("cid", 4, 2, 3, 10)) == 2
    assert wire.max_wait_ms(fetch) == 500 and wire.max_wait_ms(DescribeQuorumRequest()) == 0
    with pytest.raises(wire.WireError) as old:
        wire.request_to_body(fetch, 11)
    assert old.value.error == Errors.UNSUPPORTED_VERSION
    with pytest.raises(wire.WireError) as bad:
        wire.request_from_kafka(
            wire.VOTE,
            0,
            {
                "ClusterId": None,
                "Topics": [{"TopicName": "__cluster_metadata", "Partitions": [{"PartitionIndex": 0}]}],
            },
        )
    assert bad.value.error == Errors.INVALID_REQUEST
    assert wire.SERVED_API_VERSIONS[wire.FETCH][0] == 12


ENDPOINTS = {v: wire.ListenerEndpoint("CONTROLLER", f"10.0.0.{v}", 9090 + v) for v in (1, 2, 3)}


def _encoded(resp: Response, version: int) -> dict[str, Any]:
    """The body as a client decodes it from the bytes (so the codec checks the added fields' layout)."""
    key = wire.api_key(resp)
    raw = codec.encode_response(key, version, 5, wire.response_to_body(resp, version, ENDPOINTS))
    return codec.decode_response(key, version, raw[4:])[1]


@pytest.mark.parametrize(
    ("resp", "version", "named"),
    [
        # Not the leader: Kafka's singletonErrorResponse names nobody (the KIP's leader hint is not sent).
        (DescribeQuorumResponse(0, 0, 0, partition_error=Errors.NOT_LEADER_OR_FOLLOWER), 2, []),
        (DescribeQuorumResponse(0, 0, 0, partition_error=Errors.NOT_LEADER_OR_FOLLOWER), 1, None),
        # The leader lists every voter's endpoint, as Kafka's does.
        (DescribeQuorumResponse(1, 5, 9, (ReplicaState(1, 9), ReplicaState(3, 9))), 2, [1, 3]),
    ],
)
def test_describe_quorum_v2_names_where_the_leader_listens(
    resp: DescribeQuorumResponse, version: int, named: list[int] | None
) -> None:
    body = _encoded(resp, version)
    if named is None:
        assert "Nodes" not in body
        return
    assert body["Nodes"] == [
        {"NodeId": i, "Listeners": [{"Name": "CONTROLLER", "Host": f"10.0.0.{i}", "Port": 9090 + i}]} for i in named
    ]


@pytest.mark.parametrize(
    ("error", "version", "named"),
    [
        # KIP-853 (RaftUtil.singletonFetchResponse): from v17 any answer naming a leader with a known endpoint
        # carries it, whatever the error; v16 has the field (KIP-951) but Kafka's KRaft leaves it empty.
        (Errors.NOT_LEADER_OR_FOLLOWER, 17, True),
        (Errors.FENCED_LEADER_EPOCH, 17, True),
        (Errors.NONE, 17, True),
        (Errors.UNKNOWN_LEADER_EPOCH, 17, True),
        (Errors.NOT_LEADER_OR_FOLLOWER, 16, False),
        (Errors.NOT_LEADER_OR_FOLLOWER, 15, False),  # no such field below v16
    ],
)
def test_fetch_names_the_leader_endpoint_from_v17(error: Errors, version: int, named: bool) -> None:
    body = _encoded(FetchResponse(9, (), None, LeaderIdAndEpoch(3, 5), partition_error=error), version)
    expected = [{"NodeId": 3, "Host": "10.0.0.3", "Port": 9093, "Rack": None}] if named else []
    assert body.get("NodeEndpoints", []) == expected


def test_fetch_names_no_endpoint_for_an_unknown_leader() -> None:
    # RaftUtil.singletonFetchResponse: only when leaderId >= 0 and its address on the listener is known.
    assert _encoded(FetchResponse(9, (), None, LeaderIdAndEpoch(-1, 5)), 17).get("NodeEndpoints") == []
    assert _encoded(FetchResponse(9, (), None, LeaderIdAndEpoch(7, 5)), 17).get("NodeEndpoints") == []


def test_fetch_responses_carry_the_bytes_the_log_holds() -> None:
    """The leader sends each batch's stored bytes; a follower keeps the bytes it received (one encode per
    batch in the cluster). Equal to encoding the batches, so the wire does not change."""
    from kraft_tck.spec.records import encode_batch, encode_batches

    stored = tuple(encode_batch(b) for b in BATCHES)
    resp = FetchResponse(5, BATCHES, None, LeaderIdAndEpoch(1, 3), encoded=stored)
    body = wire.response_to_body(resp, 17)
    assert body["Responses"][0]["Partitions"][0]["Records"] == encode_batches(BATCHES)
    back = wire.response_from_body(wire.FETCH, 17, body)
    assert isinstance(back, FetchResponse) and back.batches == BATCHES and back.encoded == stored


# ============================================================================ KIP-853 (dynamic quorum)

DIR_A, DIR_B, DIR_C = "Zx1W-0mTQzSWb8b0NoQ0Kg", "AAAAAAAAAAAAAAAAAAAAAQ", "_____________________w"
CONTROLLER = (Endpoint("CONTROLLER", "10.0.0.5", 9095),)


def _through_codec_request(req: Request, version: int) -> tuple[dict[str, Any], Request]:
    key = wire.api_key(req)
    raw = codec.encode_request(key, version, 3, "t", wire.request_to_body(req, version))
    header, body = codec.decode_request(raw[4:])
    assert (header["RequestApiKey"], header["RequestApiVersion"]) == (key, version)
    return body, wire.request_from_body(key, version, body)


def _through_codec_response(resp: Response, version: int) -> tuple[dict[str, Any], Response]:
    key = wire.api_key(resp)
    raw = codec.encode_response(key, version, 3, wire.response_to_body(resp, version))
    corr, body = codec.decode_response(key, version, raw[4:])
    assert corr == 3
    return body, wire.response_from_body(key, version, body)


# Each message with every KIP-853 field set, and what it reads back as at a version without them.
KIP853_REQUESTS: list[tuple[Request, dict[int, Request]]] = [
    (VoteRequest("cid", 4, 1, 3, 10, voter_id=2, candidate_directory_id=DIR_A, voter_directory_id=DIR_B),
     {0: VoteRequest("cid", 4, 1, 3, 10)}),
    (VoteRequest("cid", 4, 1, 3, 10, voter_id=2, pre_vote=True, candidate_directory_id=DIR_A), {}),
    (BeginQuorumEpochRequest("cid", 1, 4, voter_id=2, voter_directory_id=DIR_C, leader_endpoints=CONTROLLER),
     {0: BeginQuorumEpochRequest("cid", 1, 4)}),
    (EndQuorumEpochRequest("cid", 1, 4, (3, 2), preferred_directory_ids=(DIR_A, None), leader_endpoints=CONTROLLER),
     {0: EndQuorumEpochRequest("cid", 1, 4, (3, 2))}),
    (FetchRequest("cid", 2, 4, 10, 3, 500, 1024, replica_directory_id=DIR_A),
     {v: FetchRequest("cid", 2, 4, 10, 3, 500, 1024) for v in (13, 14, 15, 16)}),
    (FetchSnapshotRequest("cid", 2, 4, SnapshotId(10, 3), 7, 99, replica_directory_id=DIR_B),
     {0: FetchSnapshotRequest("cid", 2, 4, SnapshotId(10, 3), 7, 99)}),
    (AddRaftVoterRequest("cid", 4, DIR_A, (*CONTROLLER, Endpoint("OTHER", "h", 1)), 1500), {}),
    (AddRaftVoterRequest(None, 4, None, (), 0), {}),
    (RemoveRaftVoterRequest("cid", 3, DIR_C), {}),
    (UpdateRaftVoterRequest("cid", 7, 2, DIR_B, CONTROLLER, 0, 1), {}),
]
KIP853_VERSIONS = {wire.VOTE: range(0, 3), wire.BEGIN_QUORUM_EPOCH: range(0, 2), wire.END_QUORUM_EPOCH: range(0, 2),
                   wire.FETCH: range(13, 18), wire.FETCH_SNAPSHOT: range(0, 2), wire.ADD_RAFT_VOTER: range(0, 1),
                   wire.REMOVE_RAFT_VOTER: range(0, 1), wire.UPDATE_RAFT_VOTER: range(0, 1)}


@pytest.mark.parametrize(("req", "below"), KIP853_REQUESTS,
                         ids=[f"{type(r).__name__}-{i}" for i, (r, _) in enumerate(KIP853_REQUESTS)])
def test_kip853_request_fields_round_trip_and_drop_below_their_version(req: Request, below: dict[int, Request]) -> None:
    """Every KIP-853 field survives the real codec at each version that has it; below that version it is not
    written and reads back as its default (None directory id, no endpoints)."""
    for version in KIP853_VERSIONS[wire.api_key(req)]:
        if isinstance(req, VoteRequest) and req.pre_vote and version < 2:
            continue  # a pre-vote cannot be written below v2 (test_vote_v2)
        _, back = _through_codec_request(req, version)
        assert back == below.get(version, req), f"v{version}"


def test_directory_ids_are_zero_uuid_on_the_wire_and_none_in_the_core() -> None:
    assert wire.directory_uuid(None) == wire.ZERO_UUID and wire.directory_id_of(wire.ZERO_UUID) is None
    assert wire.directory_id_of(None) is None
    assert wire.directory_uuid(ZERO_UUID) == wire.ZERO_UUID  # messages.ZERO_UUID is the same value
    u = wire.directory_uuid(DIR_B)
    assert u == uuid.UUID(int=1) and wire.directory_id_of(u) == DIR_B
    assert wire.directory_id_of(wire.directory_uuid(DIR_A)) == DIR_A
    for bad in ("not a uuid!", "AAAA"):
        with pytest.raises(ValueError):
            wire.directory_uuid(bad)
    # An unknown directory id is Kafka's ZERO_UUID: a Vote v1 naming none carries 16 zero bytes.
    body, _ = _through_codec_request(VoteRequest("cid", 4, 1, 3, 10, voter_id=2), 1)
    part = body["Topics"][0]["Partitions"][0]
    assert part["CandidateDirectoryId"] == part["VoterDirectoryId"] == uuid.UUID(int=0)


def test_fetch_v17_replica_directory_id_is_tagged() -> None:
    """Fetch v17 ``ReplicaDirectoryId`` is tagged (tag 0 of the partition): absent when ZERO_UUID."""
    plain = codec.encode_request(wire.FETCH, 17, 1, "t", wire.request_to_body(FetchRequest("c", 2, 4, 10, 3), 17))
    named = codec.encode_request(wire.FETCH, 17, 1, "t", wire.request_to_body(
        FetchRequest("c", 2, 4, 10, 3, replica_directory_id=DIR_A), 17))
    assert len(named) == len(plain) + 1 + 1 + 16  # tag, size, uuid (the partition's tag count stays 1 byte)


KIP853_RESPONSES: list[tuple[Response, dict[int, Response]]] = [
    (VoteResponse(1, 4, True, node_endpoints=(NodeEndpoint(1, "10.0.0.1", 9091),)), {0: VoteResponse(1, 4, True)}),
    (BeginQuorumEpochResponse(1, 4, node_endpoints=(NodeEndpoint(1, "h", 1),)), {0: BeginQuorumEpochResponse(1, 4)}),
    (EndQuorumEpochResponse(1, 4, Errors.FENCED_LEADER_EPOCH, node_endpoints=(NodeEndpoint(1, "h", 2),)),
     {0: EndQuorumEpochResponse(1, 4, Errors.FENCED_LEADER_EPOCH)}),
    (FetchResponse(5, BATCHES, None, LeaderIdAndEpoch(1, 3), node_endpoints=(NodeEndpoint(1, "h", 3),)),
     {v: FetchResponse(5, BATCHES, None, LeaderIdAndEpoch(1, 3)) for v in (13, 14, 15, 16)}),
    (FetchSnapshotResponse(SnapshotId(10, 2), LeaderIdAndEpoch(1, 3), 100, 0, b"xy",
                           node_endpoints=(NodeEndpoint(1, "h", 4),)),
     {0: FetchSnapshotResponse(SnapshotId(10, 2), LeaderIdAndEpoch(1, 3), 100, 0, b"xy")}),
    (DescribeQuorumResponse(1, 4, 9, (ReplicaState(1, 10, 50, 50, DIR_A), ReplicaState(2, 9, 40, 30)),
                            (ReplicaState(7, 3, 20, -1, DIR_C),),
                            nodes=(NodeListeners(1, CONTROLLER), NodeListeners(2, ()))),
     {1: DescribeQuorumResponse(1, 4, 9, (ReplicaState(1, 10, 50, 50), ReplicaState(2, 9, 40, 30)),
                                (ReplicaState(7, 3, 20, -1),))}),
    (AddRaftVoterResponse(Errors.DUPLICATE_VOTER, "already a voter"), {}),
    (AddRaftVoterResponse(), {}),
    (RemoveRaftVoterResponse(Errors.VOTER_NOT_FOUND, "no such voter"), {}),
    (UpdateRaftVoterResponse(Errors.NONE, LeaderIdAndEpoch(1, 4), NodeEndpoint(1, "10.0.0.1", 9091)), {}),
    (UpdateRaftVoterResponse(Errors.NOT_LEADER_OR_FOLLOWER), {}),
]
KIP853_RESPONSE_VERSIONS = {**KIP853_VERSIONS, wire.FETCH: range(12, 18), wire.DESCRIBE_QUORUM: range(1, 3)}


@pytest.mark.parametrize(("resp", "below"), KIP853_RESPONSES,
                         ids=[f"{type(r).__name__}-{i}" for i, (r, _) in enumerate(KIP853_RESPONSES)])
def test_kip853_response_fields_round_trip_and_drop_below_their_version(
        resp: Response, below: dict[int, Response]) -> None:
    for version in KIP853_RESPONSE_VERSIONS[wire.api_key(resp)]:
        _, back = _through_codec_response(resp, version)
        if isinstance(resp, FetchResponse) and version == 12:
            assert back == below[13], "v12"
            continue
        expected = below.get(version, resp)
        if isinstance(resp, AddRaftVoterResponse) and resp.error_message is None:
            # Kafka (RaftUtil.addVoterResponse): a null message is written as error.message(), "NONE" for NONE
            expected = AddRaftVoterResponse(resp.error, "NONE")
        assert back == expected, f"v{version}"


def test_voter_change_responses_carry_kafkas_fields() -> None:
    body, _ = _through_codec_response(RemoveRaftVoterResponse(Errors.REQUEST_TIMED_OUT), 0)
    assert body == {"ThrottleTimeMs": 0, "ErrorCode": Errors.REQUEST_TIMED_OUT,
                    "ErrorMessage": Errors.REQUEST_TIMED_OUT.message}
    # UpdateRaftVoter: CurrentLeader is tagged; an unknown leader leaves it at its default (not written).
    raw = codec.encode_response(wire.UPDATE_RAFT_VOTER, 0, 3, wire.response_to_body(UpdateRaftVoterResponse(), 0))
    assert raw[4:] == bytes.fromhex("00000003" "00" "00000000" "0000" "00")
    # The leader's endpoint comes from the shell's address book when the core gave none (RaftUtil.updateVoterResponse).
    body = wire.response_to_body(UpdateRaftVoterResponse(Errors.NONE, LeaderIdAndEpoch(3, 6)), 0, ENDPOINTS)
    assert body["CurrentLeader"] == {"LeaderId": 3, "LeaderEpoch": 6, "Host": "10.0.0.3", "Port": 9093}
    # Every new api has a body-only error answer (the node's authorization and refusals use it).
    for key in (wire.ADD_RAFT_VOTER, wire.REMOVE_RAFT_VOTER, wire.UPDATE_RAFT_VOTER, wire.API_VERSIONS):
        err = wire.error_response_body(key, 0, Errors.CLUSTER_AUTHORIZATION_FAILED)
        raw = codec.encode_response(key, 0, 1, err)
        back = wire.response_from_body(key, 0, codec.decode_response(key, 0, raw[4:])[1])
        assert back.error == Errors.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(wire.WireError) as newer:
        wire.request_to_body(AddRaftVoterRequest("c", 1, DIR_A), 1)  # v1 (KIP-1186, Kafka 4.2) is not spoken
    assert newer.value.error == Errors.UNSUPPORTED_VERSION


def test_kip853_responses_take_the_leader_endpoint_from_the_address_book() -> None:
    """RaftUtil.singletonVote/BeginQuorumEpoch/EndQuorumEpoch/FetchSnapshotResponse: v1+ NodeEndpoints name the
    leader (id >= 0) when its endpoint is known; the core's own node_endpoints win when given."""
    assert _encoded(VoteResponse(3, 4, False), 1)["NodeEndpoints"] == [{"NodeId": 3, "Host": "10.0.0.3", "Port": 9093}]
    assert "NodeEndpoints" not in _encoded(VoteResponse(3, 4, False), 0)
    assert _encoded(VoteResponse(-1, 4, False), 1)["NodeEndpoints"] == []
    assert _encoded(BeginQuorumEpochResponse(2, 4), 1)["NodeEndpoints"][0]["Port"] == 9092
    assert _encoded(EndQuorumEpochResponse(1, 4), 1)["NodeEndpoints"][0]["Host"] == "10.0.0.1"
    given = (NodeEndpoint(3, "elsewhere", 1),)
    assert _encoded(VoteResponse(3, 4, False, node_endpoints=given), 1)["NodeEndpoints"] == [
        {"NodeId": 3, "Host": "elsewhere", "Port": 1}]
    snap = _encoded(FetchSnapshotResponse(current_leader=LeaderIdAndEpoch(2, 4)), 1)
    assert snap["NodeEndpoints"] == [{"NodeId": 2, "Host": "10.0.0.2", "Port": 9092}]


def test_describe_quorum_v2_carries_directory_ids_and_the_cores_nodes() -> None:
    resp = DescribeQuorumResponse(1, 4, 9, (ReplicaState(1, 10, 5, 5, DIR_A),), (ReplicaState(9, 3),),
                                  nodes=(NodeListeners(1, CONTROLLER),))
    body = _encoded(resp, 2)
    part = body["Topics"][0]["Partitions"][0]
    assert part["CurrentVoters"][0]["ReplicaDirectoryId"] == wire.directory_uuid(DIR_A)
    assert part["Observers"][0]["ReplicaDirectoryId"] == uuid.UUID(int=0)
    assert body["Nodes"] == [{"NodeId": 1, "Listeners": [{"Name": "CONTROLLER", "Host": "10.0.0.5", "Port": 9095}]}]
    assert body["ErrorMessage"] == ""  # Kafka's default for the top-level message (no "default": null)


def test_the_api_versions_probe_names_the_client_from_v3() -> None:
    """KIP-853's leader probes a joining voter with ApiVersions at the latest version (AddVoterHandler); v3+
    carries ClientSoftwareName/Version, which Kafka requires (KIP-511)."""
    body, back = _through_codec_request(ApiVersionsRequest(), 4)
    assert body == CLIENT_SOFTWARE and back == ApiVersionsRequest()
    assert wire.request_to_body(ApiVersionsRequest(), 2) == {}
    assert wire.sender_of(ApiVersionsRequest()) == -1


@pytest.mark.parametrize(("features", "version", "expected"), [
    ([{"Name": "kraft.version", "MinVersion": 0, "MaxVersion": 1}], 4, (0, 1)),
    ([{"Name": "metadata.version", "MinVersion": 7, "MaxVersion": 21},
      {"Name": "kraft.version", "MinVersion": 1, "MaxVersion": 1}], 3, (1, 1)),
    ([{"Name": "metadata.version", "MinVersion": 7, "MaxVersion": 21}], 4, None),
    ([], 4, None),
    (None, 2, None),  # no SupportedFeatures below v3
])
def test_api_versions_response_gives_the_kraft_version_range(
        features: list[dict[str, Any]] | None, version: int, expected: tuple[int, int] | None) -> None:
    body: dict[str, Any] = {"ErrorCode": 0, "ApiKeys": [{"ApiKey": 18, "MinVersion": 0, "MaxVersion": 4}],
                            "ThrottleTimeMs": 0}
    if features is not None:
        body["SupportedFeatures"] = features
    raw = codec.encode_response(wire.API_VERSIONS, version, 8, body)
    _, decoded = codec.decode_response(wire.API_VERSIONS, version, raw[4:])
    assert wire.response_from_kafka(wire.API_VERSIONS, version, decoded) == ApiVersionsResponse(Errors.NONE, expected)


def test_api_versions_response_value_is_filtered_as_kafka_filters_features() -> None:
    # ApiVersionsResponse.maybeFilterSupportedFeatureKeys: a feature with min 0 only at v4+.
    for version, expected in ((4, (0, 1)), (3, None)):
        _, back = _through_codec_response(ApiVersionsResponse(Errors.NONE, (0, 1)), version)
        assert back == ApiVersionsResponse(Errors.NONE, expected), f"v{version}"
    _, back = _through_codec_response(ApiVersionsResponse(Errors.NONE, (1, 1)), 3)
    assert back == ApiVersionsResponse(Errors.NONE, (1, 1))


def test_the_new_apis_are_served_and_named() -> None:
    for key in (wire.ADD_RAFT_VOTER, wire.REMOVE_RAFT_VOTER, wire.UPDATE_RAFT_VOTER):
        assert wire.SERVED_API_VERSIONS[key] == (0, 0)
    assert wire.SERVED_API_VERSIONS[wire.FETCH] == (12, 17)
    assert wire.SERVED_API_VERSIONS[wire.FETCH_SNAPSHOT] == (0, 1)
    assert wire.SERVED_API_VERSIONS[wire.DESCRIBE_QUORUM] == (0, 2)
    assert wire.SERVED_API_VERSIONS[wire.BEGIN_QUORUM_EPOCH] == (0, 1)
    assert wire.SERVED_API_VERSIONS[wire.END_QUORUM_EPOCH] == (0, 1)
    assert wire.sender_of(UpdateRaftVoterRequest("c", 1, 5, DIR_A)) == 5
    assert wire.sender_of(AddRaftVoterRequest("c", 5, DIR_A)) == -1
    assert wire.sender_of(RemoveRaftVoterRequest("c", 5, DIR_A)) == -1
