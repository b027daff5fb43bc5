"""reference/wire.py through the real codec: every core message survives encode -> bytes -> decode at
every version it supports, and errors land at Kafka's level (top-level vs partition-level)."""

from __future__ import annotations

import pytest
from kraft_tck.reference import wire
from kraft_tck.reference.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    ReplicaState,
    Request,
    Response,
    VoteRequest,
    VoteResponse,
)
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


ENDPOINTS = {v: wire.NodeEndpoint("CONTROLLER", f"10.0.0.{v}", 9090 + v) for v in (1, 2, 3)}


def _encoded(resp: Response, version: int) -> dict[str, object]:
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
        (Errors.NOT_LEADER_OR_FOLLOWER, 16, True),  # KIP-595 "Fetch Request Handling" step 2, KIP-951 endpoint
        (Errors.FENCED_LEADER_EPOCH, 17, True),
        (Errors.NOT_LEADER_OR_FOLLOWER, 15, False),  # NodeEndpoints starts at v16
        (Errors.NONE, 17, False),  # a fetch from the leader itself needs no redirect
        (Errors.UNKNOWN_LEADER_EPOCH, 17, False),
    ],
)
def test_fetch_names_the_leader_endpoint_with_the_errors_that_redirect(
    error: Errors, version: int, named: bool
) -> None:
    body = _encoded(FetchResponse(9, (), None, LeaderIdAndEpoch(3, 5), partition_error=error), version)
    expected = [{"NodeId": 3, "Host": "10.0.0.3", "Port": 9093, "Rack": None}] if named else []
    assert body.get("NodeEndpoints", []) == expected


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
