"""Conversions between the core's message types (``messages.py``) and Kafka message bodies.

Bodies are the codec's dicts, keyed by the field names of Kafka's JSON definitions
(``spec/messages/*.json``). Every KRaft RPC addresses one partition, ``__cluster_metadata-0``; Fetch
v13+ names it by topic id (Kafka's ``Uuid.METADATA_TOPIC_ID``), and a v12 Fetch, which has no TopicId, is
another partition to Kafka (``RaftUtil.hasValidTopicPartition``). A request for any other partition still
reaches the core, marked (``valid_partition=False``; DescribeQuorum: ``unknown``), because Kafka checks
the cluster id first (``KafkaRaftClient.handleVoteRequest`` and siblings): the core answers a foreign
cluster id with INCONSISTENT_CLUSTER_ID and only then a wrong partition with a top-level INVALID_REQUEST
(DescribeQuorum: UNKNOWN_TOPIC_OR_PARTITION on each partition named). A response with a top-level error
carries no partition, as Kafka's (``new VoteResponseData().setErrorCode(...)``); partition-level errors
(FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, INVALID_REQUEST for a bad field, ...) come from the core's
``partition_error`` with the responder's epoch and leader.

KIP-853 (dynamic quorum, Kafka 3.9): directory ids (None in the core = ZERO_UUID on the wire), voter keys
(Vote/BeginQuorumEpoch v1), leader endpoints (requests' LeaderEndpoints, responses' NodeEndpoints), Fetch v17
and FetchSnapshot v1 ReplicaDirectoryId, DescribeQuorum v2 Nodes/ReplicaDirectoryId, AddRaftVoter (80),
RemoveRaftVoter (81), UpdateRaftVoter (82) v0, and the ApiVersions probe a leader sends a joining voter (its
answer read down to the ``kraft.version`` range). A field a version lacks is not written, and reads back as its
default.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kraft_tck.reference.messages import (
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
from kraft_tck.reference.messages import NodeEndpoint as ResponseNodeEndpoint
from kraft_tck.reference.net import (
    API_VERSIONS,
    CLIENT_SOFTWARE,
    KRAFT_VERSION_FEATURE,
    supported_features_body,
)
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import BatchTemplates, RecordBatch, encode_batches

Body = dict[str, Any]

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
METADATA_TOPIC_ID = uuid.UUID("00000000-0000-0000-0000-000000000001")  # Kafka's Uuid.METADATA_TOPIC_ID
ZERO_UUID = uuid.UUID(int=0)

FETCH, VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, DESCRIBE_QUORUM, FETCH_SNAPSHOT = 1, 52, 53, 54, 55, 59
ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, UPDATE_RAFT_VOTER = 80, 81, 82  # KIP-853
MIN_FETCH_VERSION = 12  # LastFetchedEpoch, DivergingEpoch and CurrentLeader start at v12 (KIP-595)

_API_KEYS: dict[type, int] = {
    VoteRequest: VOTE,
    VoteResponse: VOTE,
    BeginQuorumEpochRequest: BEGIN_QUORUM_EPOCH,
    BeginQuorumEpochResponse: BEGIN_QUORUM_EPOCH,
    EndQuorumEpochRequest: END_QUORUM_EPOCH,
    EndQuorumEpochResponse: END_QUORUM_EPOCH,
    FetchRequest: FETCH,
    FetchResponse: FETCH,
    FetchSnapshotRequest: FETCH_SNAPSHOT,
    FetchSnapshotResponse: FETCH_SNAPSHOT,
    DescribeQuorumRequest: DESCRIBE_QUORUM,
    DescribeQuorumResponse: DESCRIBE_QUORUM,
    AddRaftVoterRequest: ADD_RAFT_VOTER,
    AddRaftVoterResponse: ADD_RAFT_VOTER,
    RemoveRaftVoterRequest: REMOVE_RAFT_VOTER,
    RemoveRaftVoterResponse: REMOVE_RAFT_VOTER,
    UpdateRaftVoterRequest: UPDATE_RAFT_VOTER,
    UpdateRaftVoterResponse: UPDATE_RAFT_VOTER,
    ApiVersionsRequest: API_VERSIONS,
    ApiVersionsResponse: API_VERSIONS,
}


#: What the reference node serves (ApiVersions, KIP-511). Fetch starts at v12, the first with KRaft's
#: LastFetchedEpoch / DivergingEpoch / CurrentLeader.
SERVED_API_VERSIONS: dict[int, tuple[int, int]] = {
    FETCH: (12, 17),
    VOTE: (0, 2),  # v2: PreVote (KIP-996, Kafka 4.0); a node run without pre-vote serves 0-1 (node.py)
    BEGIN_QUORUM_EPOCH: (0, 1),
    END_QUORUM_EPOCH: (0, 1),
    DESCRIBE_QUORUM: (0, 2),
    FETCH_SNAPSHOT: (0, 1),  # KIP-630; v1 adds ReplicaDirectoryId and NodeEndpoints (KIP-853)
    # KIP-853 (Kafka 3.9): v0 only. AddRaftVoter v1 (AckWhenCommitted, KIP-1186) is Kafka 4.2, not followed.
    ADD_RAFT_VOTER: (0, 0),
    REMOVE_RAFT_VOTER: (0, 0),
    UPDATE_RAFT_VOTER: (0, 0),
}


class WireError(ValueError):
    """A body the core cannot take (or a version it cannot speak); ``error`` is the top-level answer."""

    def __init__(self, message: str, error: Errors = Errors.INVALID_REQUEST) -> None:
        super().__init__(message)
        self.error = error


class InvalidTopicPartition(WireError):
    """The request is not for ``__cluster_metadata-0`` (``_named_partition``; the request is then passed on
    marked, see the module docstring)."""


def api_key(message: Request | Response) -> int:
    return _API_KEYS[type(message)]


# ======================================================================================= directory ids
# The core names a directory id by Kafka's Uuid string (url-safe base64 of the 16 bytes, no padding) and says
# None for Kafka's ZERO_UUID ("no directory id", ``ReplicaKey.NO_DIRECTORY_ID``); the codec carries uuid.UUID.

_UUID_OF: dict[str, uuid.UUID] = {}
_STR_OF: dict[uuid.UUID, str] = {}


def directory_uuid(directory_id: str | None) -> uuid.UUID:
    """The wire's uuid for a directory id (None -> ZERO_UUID). ValueError for a string that is no Kafka Uuid."""
    if directory_id is None:
        return ZERO_UUID
    u = _UUID_OF.get(directory_id)
    if u is None:
        try:
            raw = base64.urlsafe_b64decode(directory_id + "=" * (-len(directory_id) % 4))
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"not a Kafka Uuid: {directory_id!r}") from exc
        if len(raw) != 16:
            raise ValueError(f"not a Kafka Uuid (16 bytes): {directory_id!r}")
        u = uuid.UUID(bytes=raw)
        if len(_UUID_OF) > 4096:
            _UUID_OF.clear()
        _UUID_OF[directory_id] = u
    return u


def directory_id_of(value: uuid.UUID | None) -> str | None:
    """The core's directory id for a wire uuid (ZERO_UUID, or an absent field -> None)."""
    if value is None or value == ZERO_UUID:
        return None
    text = _STR_OF.get(value)
    if text is None:
        text = base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")
        if len(_STR_OF) > 4096:
            _STR_OF.clear()
        _STR_OF[value] = text
    return text


def _listeners_body(endpoints: Iterable[Endpoint]) -> list[Body]:
    """``Listeners`` / ``LeaderEndpoints`` / ``Endpoints`` entries (Name, Host, Port uint16)."""
    return [{"Name": e.name, "Host": e.host, "Port": e.port} for e in endpoints]


def _listeners(rows: Iterable[Body] | None) -> tuple[Endpoint, ...]:
    return tuple(Endpoint(r["Name"], r["Host"], r["Port"]) for r in rows or ())


def _node_endpoints(rows: Iterable[Body] | None) -> tuple[ResponseNodeEndpoint, ...]:
    return tuple(ResponseNodeEndpoint(r["NodeId"], r["Host"], r["Port"]) for r in rows or ())


# ============================================================================================ requests


def request_to_body(req: Request, version: int) -> Body:
    """The Kafka body of ``req`` at ``version``."""
    if isinstance(req, VoteRequest):
        part: Body = {
            "PartitionIndex": METADATA_PARTITION,
            "CandidateEpoch": req.candidate_epoch,
            "CandidateId": req.candidate_id,
            "LastOffsetEpoch": req.last_offset_epoch,
            "LastOffset": req.last_offset,
        }
        if version >= 1:  # KIP-853 (RaftUtil.singletonVoteRequest): the candidate's key and the receiver's
            part["CandidateDirectoryId"] = directory_uuid(req.candidate_directory_id)
            part["VoterDirectoryId"] = directory_uuid(req.voter_directory_id)
        if version >= 2:
            part["PreVote"] = req.pre_vote  # KIP-996; below v2 a pre-vote cannot be written (see node._send_on)
        elif req.pre_vote:
            raise WireError(f"a pre-vote needs Vote v2, not v{version}", Errors.UNSUPPORTED_VERSION)
        body: Body = {"ClusterId": req.cluster_id, "Topics": _named_topic(part)}
        if version >= 1:
            body["VoterId"] = req.voter_id
        return body
    if isinstance(req, BeginQuorumEpochRequest):
        part = {
            "PartitionIndex": METADATA_PARTITION,
            "LeaderId": req.leader_id,
            "LeaderEpoch": req.leader_epoch,
        }
        if version >= 1:  # KIP-853: the receiver's key as the leader's voter set names it
            part["VoterDirectoryId"] = directory_uuid(req.voter_directory_id)
        body = {"ClusterId": req.cluster_id, "Topics": _named_topic(part)}
        if version >= 1:
            body["VoterId"] = req.voter_id
            body["LeaderEndpoints"] = _listeners_body(req.leader_endpoints)
        return body
    if isinstance(req, EndQuorumEpochRequest):
        part = {
            "PartitionIndex": METADATA_PARTITION,
            "LeaderId": req.leader_id,
            "LeaderEpoch": req.leader_epoch,
        }
        if version == 0:
            part["PreferredSuccessors"] = list(req.preferred_successors)
        else:  # KIP-853: PreferredCandidates, each with its directory id (parallel to preferred_successors)
            dirs = req.preferred_directory_ids
            part["PreferredCandidates"] = [
                {"CandidateId": c, "CandidateDirectoryId": directory_uuid(dirs[i] if i < len(dirs) else None)}
                for i, c in enumerate(req.preferred_successors)
            ]
        ebody: Body = {"ClusterId": req.cluster_id, "Topics": _named_topic(part)}
        if version >= 1:
            ebody["LeaderEndpoints"] = _listeners_body(req.leader_endpoints)
        return ebody
    if isinstance(req, FetchRequest):
        _check_fetch_version(version)
        fpart: Body = {
            "Partition": METADATA_PARTITION,
            "CurrentLeaderEpoch": req.current_leader_epoch,
            "FetchOffset": req.fetch_offset,
            "LastFetchedEpoch": req.last_fetched_epoch,
            "LogStartOffset": 0,
            "PartitionMaxBytes": req.max_bytes,
        }
        if version >= 17:  # KIP-853: tagged, written only when not ZERO_UUID
            fpart["ReplicaDirectoryId"] = directory_uuid(req.replica_directory_id)
        topic: Body = {"Partitions": [fpart]}
        if version >= 13:
            topic["TopicId"] = METADATA_TOPIC_ID
        else:
            topic["Topic"] = METADATA_TOPIC
        body = {
            "ClusterId": req.cluster_id,
            "MaxWaitMs": req.max_wait_ms,
            "MinBytes": 0,
            "MaxBytes": req.max_bytes,
            "Topics": [topic],
        }
        if version >= 15:
            body["ReplicaState"] = {"ReplicaId": req.replica_id, "ReplicaEpoch": req.replica_epoch}
        else:
            body["ReplicaId"] = req.replica_id
        return body
    if isinstance(req, DescribeQuorumRequest):
        return {"Topics": _named_topic({"PartitionIndex": METADATA_PARTITION})}
    if isinstance(req, FetchSnapshotRequest):
        spart: Body = {
            "Partition": METADATA_PARTITION,
            "CurrentLeaderEpoch": req.current_leader_epoch,
            "SnapshotId": {"EndOffset": req.snapshot_id.end_offset, "Epoch": req.snapshot_id.epoch},
            "Position": req.position,
        }
        if version >= 1:
            spart["ReplicaDirectoryId"] = directory_uuid(req.replica_directory_id)
        return {
            "ClusterId": req.cluster_id,
            "ReplicaId": req.replica_id,
            "MaxBytes": req.max_bytes,
            "Topics": [{"Name": METADATA_TOPIC, "Partitions": [spart]}],
        }
    if isinstance(req, AddRaftVoterRequest):  # RaftUtil.addVoterRequest
        _check_v0(ADD_RAFT_VOTER, version)
        return {
            "ClusterId": req.cluster_id,
            "TimeoutMs": req.timeout_ms,
            "VoterId": req.voter_id,
            "VoterDirectoryId": directory_uuid(req.voter_directory_id),
            "Listeners": _listeners_body(req.listeners),
        }
    if isinstance(req, RemoveRaftVoterRequest):  # RaftUtil.removeVoterRequest
        _check_v0(REMOVE_RAFT_VOTER, version)
        return {
            "ClusterId": req.cluster_id,
            "VoterId": req.voter_id,
            "VoterDirectoryId": directory_uuid(req.voter_directory_id),
        }
    if isinstance(req, UpdateRaftVoterRequest):  # RaftUtil.updateVoterRequest
        _check_v0(UPDATE_RAFT_VOTER, version)
        return {
            "ClusterId": req.cluster_id,
            "CurrentLeaderEpoch": req.current_leader_epoch,
            "VoterId": req.voter_id,
            "VoterDirectoryId": directory_uuid(req.voter_directory_id),
            "Listeners": _listeners_body(req.listeners),
            "KRaftVersionFeature": {"MinSupportedVersion": req.kraft_version_min,
                                    "MaxSupportedVersion": req.kraft_version_max},
        }
    if isinstance(req, ApiVersionsRequest):
        # The AddRaftVoter leader's probe (AddVoterHandler: an ApiVersionsRequest at the latest version the
        # peer speaks); v3+ names the client software, which Kafka requires non-empty (KIP-511).
        return dict(CLIENT_SOFTWARE) if version >= 3 else {}
    raise TypeError(f"request_to_body: not a KRaft request: {req!r}")


def request_from_body(key: int, version: int, body: Body) -> Request:
    """The core's view of a decoded request body; one for another partition comes marked as such."""
    if key in (VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH):
        try:
            _named_partition(body, codec.api_name(key))
        except InvalidTopicPartition:
            return _foreign_partition_request(key, body)
    if key == VOTE:
        p = _named_partition(body, "Vote")
        return VoteRequest(
            body.get("ClusterId"),
            p["CandidateEpoch"],
            p["CandidateId"],
            p["LastOffsetEpoch"],
            p["LastOffset"],
            voter_id=body.get("VoterId", -1),
            pre_vote=bool(p.get("PreVote", False)),
            candidate_directory_id=directory_id_of(p.get("CandidateDirectoryId")),
            voter_directory_id=directory_id_of(p.get("VoterDirectoryId")),
        )
    if key == BEGIN_QUORUM_EPOCH:
        p = _named_partition(body, "BeginQuorumEpoch")
        return BeginQuorumEpochRequest(
            body.get("ClusterId"), p["LeaderId"], p["LeaderEpoch"], body.get("VoterId", -1),
            voter_directory_id=directory_id_of(p.get("VoterDirectoryId")),
            leader_endpoints=_listeners(body.get("LeaderEndpoints")),
        )
    if key == END_QUORUM_EPOCH:
        p = _named_partition(body, "EndQuorumEpoch")
        dirs: tuple[str | None, ...] = ()
        if version == 0:
            successors = tuple(p.get("PreferredSuccessors") or ())
        else:
            candidates = p.get("PreferredCandidates") or ()
            successors = tuple(c["CandidateId"] for c in candidates)
            dirs = tuple(directory_id_of(c.get("CandidateDirectoryId")) for c in candidates)
            if not any(dirs):
                dirs = ()  # none known (every one ZERO_UUID): the core's default
        return EndQuorumEpochRequest(body.get("ClusterId"), p["LeaderId"], p["LeaderEpoch"], successors,
                                     preferred_directory_ids=dirs,
                                     leader_endpoints=_listeners(body.get("LeaderEndpoints")))
    if key == FETCH:
        _check_fetch_version(version)
        topics = body.get("Topics") or []
        if version >= 15:
            state = body.get("ReplicaState") or {}
            replica_id, replica_epoch = state.get("ReplicaId", -1), state.get("ReplicaEpoch", -1)
        else:
            replica_id, replica_epoch = body.get("ReplicaId", -1), -1
        ok = len(topics) == 1 and len(topics[0].get("Partitions") or []) == 1
        if ok:
            topic = topics[0]
            # RaftUtil.hasValidTopicPartition(FetchRequestData, ...) compares the TopicId only, never the
            # name. A v12 request has no TopicId field, so Kafka compares its default, the zero uuid, with
            # Uuid.METADATA_TOPIC_ID and refuses it: v12 is answered INVALID_REQUEST whatever it names.
            ok_topic = version >= 13 and topic.get("TopicId") == METADATA_TOPIC_ID
            p = topic["Partitions"][0]
            ok = ok_topic and p["Partition"] == METADATA_PARTITION
        if not ok:
            # RaftUtil.hasValidTopicPartition fails: answered (top-level INVALID_REQUEST) after the cluster id.
            return FetchRequest(
                body.get("ClusterId"), replica_id, -1, 0, 0, body["MaxWaitMs"], replica_epoch=replica_epoch,
                valid_partition=False,
            )
        return FetchRequest(
            body.get("ClusterId"),
            replica_id,
            p.get("CurrentLeaderEpoch", -1),
            p["FetchOffset"],
            p.get("LastFetchedEpoch", -1),
            body["MaxWaitMs"],
            min(body.get("MaxBytes", 0x7FFFFFFF), p.get("PartitionMaxBytes", 0x7FFFFFFF)),
            replica_epoch,
            replica_directory_id=directory_id_of(p.get("ReplicaDirectoryId")),
        )
    if key == DESCRIBE_QUORUM:
        try:
            _named_partition(body, "DescribeQuorum")
        except InvalidTopicPartition:
            unknown = tuple(
                (t.get("TopicName"), tuple(p["PartitionIndex"] for p in t.get("Partitions") or ()))
                for t in body.get("Topics") or ()
            )
            return DescribeQuorumRequest(unknown)
        return DescribeQuorumRequest()
    if key == FETCH_SNAPSHOT:
        topics = body.get("Topics") or []
        cluster_id, replica_id = body.get("ClusterId"), body.get("ReplicaId", -1)
        max_bytes = body.get("MaxBytes", 0x7FFFFFFF)
        # Kafka (handleFetchSnapshotRequest) reads the first topic's first partition; another partition than
        # __cluster_metadata-0 is answered UNKNOWN_TOPIC_OR_PARTITION after the cluster id check.
        parts = topics[0].get("Partitions") or [] if topics else []
        if not parts:
            raise WireError("FetchSnapshot names no partition")
        p = parts[0]
        sid = p.get("SnapshotId") or {}
        snapshot_id = SnapshotId(sid.get("EndOffset", -1), sid.get("Epoch", -1))
        ok = topics[0].get("Name") == METADATA_TOPIC and p.get("Partition") == METADATA_PARTITION
        return FetchSnapshotRequest(cluster_id, replica_id, p.get("CurrentLeaderEpoch", -1), snapshot_id,
                                    p.get("Position", 0), max_bytes, valid_partition=ok,
                                    partition_name=None if ok else (str(topics[0].get("Name")),
                                                                    int(p.get("Partition", -1))),
                                    replica_directory_id=directory_id_of(p.get("ReplicaDirectoryId")))
    if key == ADD_RAFT_VOTER:
        return AddRaftVoterRequest(body.get("ClusterId"), body["VoterId"], directory_id_of(body["VoterDirectoryId"]),
                                   _listeners(body.get("Listeners")), body["TimeoutMs"])
    if key == REMOVE_RAFT_VOTER:
        return RemoveRaftVoterRequest(body.get("ClusterId"), body["VoterId"],
                                      directory_id_of(body["VoterDirectoryId"]))
    if key == UPDATE_RAFT_VOTER:
        feature = body.get("KRaftVersionFeature") or {}
        return UpdateRaftVoterRequest(body.get("ClusterId"), body["CurrentLeaderEpoch"], body["VoterId"],
                                      directory_id_of(body["VoterDirectoryId"]), _listeners(body.get("Listeners")),
                                      feature.get("MinSupportedVersion", 0), feature.get("MaxSupportedVersion", 0))
    if key == API_VERSIONS:
        return ApiVersionsRequest()
    raise WireError(f"request_from_body: api key {key} is not a KRaft RPC")


def _foreign_partition_request(key: int, body: Body) -> Request:
    """A Vote/BeginQuorumEpoch/EndQuorumEpoch for another partition: only its cluster id matters."""
    cluster_id = body.get("ClusterId")
    if key == VOTE:
        return VoteRequest(cluster_id, -1, -1, 0, 0, valid_partition=False)
    if key == BEGIN_QUORUM_EPOCH:
        return BeginQuorumEpochRequest(cluster_id, -1, -1, valid_partition=False)
    return EndQuorumEpochRequest(cluster_id, -1, -1, valid_partition=False)


# ============================================================================================ responses


@dataclass(frozen=True, slots=True)
class ListenerEndpoint:
    """Where a voter listens, as ``controller.quorum.voters`` and the controller listener name say."""

    listener: str
    host: str
    port: int


def response_to_body(resp: Response, version: int, endpoints: Mapping[int, ListenerEndpoint] | None = None) -> Body:
    """The Kafka body of ``resp`` at ``version``.

    Where the leader listens (KIP-853): a response's ``node_endpoints`` (or DescribeQuorum's ``nodes``) when the
    core gave them, else ``endpoints`` (voter id → endpoint, the shell's address book) for the leader the
    response names, as Kafka's RaftUtil fills them: Vote/BeginQuorumEpoch/EndQuorumEpoch v1+, FetchSnapshot
    v1+ and Fetch **v17+** ``NodeEndpoints`` whenever the named leader (id >= 0) has a known endpoint, whatever
    the error; DescribeQuorum v2 ``Nodes`` (the voters'); UpdateRaftVoter's CurrentLeader Host/Port. Fields a
    version lacks are dropped; directory ids None are written as ZERO_UUID.
    """
    endpoints = endpoints or {}
    if isinstance(resp, AddRaftVoterResponse | RemoveRaftVoterResponse | UpdateRaftVoterResponse
                  | ApiVersionsResponse):
        return _voter_change_response_body(resp, version, endpoints)
    if resp.error != Errors.NONE and not isinstance(resp, DescribeQuorumResponse):
        # Kafka's top-level errors (INCONSISTENT_CLUSTER_ID, INVALID_REQUEST for another partition) carry
        # no partition: e.g. ``new VoteResponseData().setErrorCode(...)`` in KafkaRaftClient.
        if isinstance(resp, FetchResponse):
            _check_fetch_version(version)
        return error_response_body(api_key(resp), version, resp.error)
    if isinstance(resp, VoteResponse):
        part: Body = {
            "PartitionIndex": METADATA_PARTITION,
            "ErrorCode": int(resp.partition_error),
            "LeaderId": resp.leader_id,
            "LeaderEpoch": resp.leader_epoch,
            "VoteGranted": resp.vote_granted,
        }
        vbody: Body = {"ErrorCode": int(resp.error), "Topics": _named_topic(part)}
        if version >= 1:  # KIP-853 (RaftUtil.singletonVoteResponse): where the known leader listens
            vbody["NodeEndpoints"] = _node_endpoints_body(resp.node_endpoints, resp.leader_id, endpoints)
        return vbody
    if isinstance(resp, BeginQuorumEpochResponse | EndQuorumEpochResponse):
        part = {
            "PartitionIndex": METADATA_PARTITION,
            "ErrorCode": int(resp.partition_error),
            "LeaderId": resp.leader_id,
            "LeaderEpoch": resp.leader_epoch,
        }
        qbody: Body = {"ErrorCode": int(resp.error), "Topics": _named_topic(part)}
        if version >= 1:  # KIP-853 (RaftUtil.singletonBegin/EndQuorumEpochResponse)
            qbody["NodeEndpoints"] = _node_endpoints_body(resp.node_endpoints, resp.leader_id, endpoints)
        return qbody
    if isinstance(resp, FetchResponse):
        _check_fetch_version(version)
        fpart: Body = {
            "PartitionIndex": METADATA_PARTITION,
            "ErrorCode": int(resp.partition_error),
            "HighWatermark": resp.high_watermark,
            "LogStartOffset": resp.log_start_offset,
            "CurrentLeader": {
                "LeaderId": resp.current_leader.leader_id,
                "LeaderEpoch": resp.current_leader.leader_epoch,
            },
            # The log's bytes when the core has them: a batch is encoded once, not once per Fetch.
            "Records": b"".join(resp.encoded) if resp.encoded is not None else encode_batches(resp.batches),
        }
        if resp.diverging_epoch is not None:
            fpart["DivergingEpoch"] = {"Epoch": resp.diverging_epoch[0], "EndOffset": resp.diverging_epoch[1]}
        if resp.snapshot_id is not None:  # KIP-630: fetch this snapshot (tagged SnapshotId, v12+)
            fpart["SnapshotId"] = {"EndOffset": resp.snapshot_id.end_offset, "Epoch": resp.snapshot_id.epoch}
        topic: Body = {"Partitions": [fpart]}
        if version >= 13:
            topic["TopicId"] = METADATA_TOPIC_ID
        else:
            topic["Topic"] = METADATA_TOPIC
        fbody: Body = {"ThrottleTimeMs": 0, "ErrorCode": int(resp.error), "SessionId": 0, "Responses": [topic]}
        if version >= FETCH_NODE_ENDPOINTS_VERSION:
            fbody["NodeEndpoints"] = fetch_node_endpoints(resp, endpoints)
        return fbody
    if isinstance(resp, FetchSnapshotResponse):
        return _fetch_snapshot_response_body(resp, version, endpoints)
    if isinstance(resp, DescribeQuorumResponse) and resp.unknown is not None:
        # DescribeQuorumRequest.getPartitionLevelErrorResponse: every partition named, with the error.
        ubody: Body = {
            "ErrorCode": int(resp.error),
            "Topics": [
                {"TopicName": name, "Partitions": [_describe_error_partition(i, resp.partition_error, version)
                                                   for i in indexes]}
                for name, indexes in resp.unknown
            ],
        }
        if version >= 2:
            ubody["Nodes"] = []
        return ubody
    if isinstance(resp, DescribeQuorumResponse) and resp.partition_error != Errors.NONE:
        # DescribeQuorumResponse.singletonErrorResponse: the error (and its message); LeaderId, LeaderEpoch and
        # HighWatermark stay at the schema's default 0, no voters, no observers, no Nodes.
        ebody: Body = {
            "ErrorCode": int(resp.error),
            "Topics": _named_topic(_describe_error_partition(METADATA_PARTITION, resp.partition_error, version)),
        }
        if version >= 2:
            ebody["Nodes"] = []
        return ebody
    if isinstance(resp, DescribeQuorumResponse):
        dpart: Body = {
            "PartitionIndex": METADATA_PARTITION,
            "ErrorCode": int(resp.partition_error),
            "LeaderId": resp.leader_id,
            "LeaderEpoch": resp.leader_epoch,
            "HighWatermark": resp.high_watermark,
            "CurrentVoters": [_replica_state_body(r, version) for r in resp.voters],
            "Observers": [_replica_state_body(r, version) for r in resp.observers],
        }
        body: Body = {"ErrorCode": int(resp.error), "Topics": _named_topic(dpart)}
        if version >= 2:
            if resp.error_message is not None:  # else the schema's default "", as Kafka writes it
                body["ErrorMessage"] = resp.error_message
            if resp.nodes:  # KIP-853 (RaftUtil.singletonDescribeQuorumResponse): every voter and its listeners
                body["Nodes"] = [{"NodeId": n.node_id, "Listeners": _listeners_body(n.listeners)} for n in resp.nodes]
            else:
                body["Nodes"] = [_node_body(r.replica_id, endpoints[r.replica_id])
                                 for r in resp.voters if r.replica_id in endpoints]
        return body
    raise TypeError(f"response_to_body: not a KRaft response: {resp!r}")


def _fetch_snapshot_response_body(
    resp: FetchSnapshotResponse, version: int, endpoints: Mapping[int, ListenerEndpoint]
) -> Body:
    """KIP-630 FetchSnapshot's answer (Kafka's ``RaftUtil.singletonFetchSnapshotResponse``): one partition, the
    SnapshotId (-1, -1) in an error answer, and from v1 the leader's endpoint when it is known."""
    sid = resp.snapshot_id
    name, index = resp.partition_name or (METADATA_TOPIC, METADATA_PARTITION)
    part: Body = {
        "Index": index,
        "ErrorCode": int(resp.partition_error),
        "SnapshotId": {"EndOffset": sid.end_offset if sid else -1, "Epoch": sid.epoch if sid else -1},
        "CurrentLeader": {"LeaderId": resp.current_leader.leader_id, "LeaderEpoch": resp.current_leader.leader_epoch},
        "Size": resp.size,
        "Position": resp.position,
        "UnalignedRecords": resp.records,
    }
    body: Body = {"ThrottleTimeMs": 0, "ErrorCode": int(resp.error), "Topics": [{"Name": name, "Partitions": [part]}]}
    if version >= 1:
        body["NodeEndpoints"] = _node_endpoints_body(resp.node_endpoints, resp.current_leader.leader_id, endpoints)
    return body


#: Kafka's KRaft fills a Fetch response's NodeEndpoints from v17 only (``RaftUtil.singletonFetchResponse``:
#: ``apiVersion >= 17``), although the field exists from v16 (KIP-951, brokers).
FETCH_NODE_ENDPOINTS_VERSION = 17


def _node_endpoints_body(given: tuple[ResponseNodeEndpoint, ...], leader_id: int,
                         endpoints: Mapping[int, ListenerEndpoint]) -> list[Body]:
    """A response's tagged ``NodeEndpoints``: the ones the core gave, else the known leader's endpoint from the
    shell's address book (Kafka: ``leaderId >= 0`` and an address on the request's listener; else absent)."""
    if given:
        return [{"NodeId": e.node_id, "Host": e.host, "Port": e.port} for e in given]
    leader = endpoints.get(leader_id) if leader_id >= 0 else None
    return [] if leader is None else [{"NodeId": leader_id, "Host": leader.host, "Port": leader.port}]


def fetch_node_endpoints(resp: FetchResponse, endpoints: Mapping[int, ListenerEndpoint]) -> list[Body]:
    """FetchResponse v17+ ``NodeEndpoints`` (its entries also carry ``Rack``, null here, as Kafka's KRaft)."""
    rows = _node_endpoints_body(resp.node_endpoints, resp.current_leader.leader_id, endpoints)
    for row in rows:
        row["Rack"] = None
    return rows


def _voter_change_response_body(
    resp: AddRaftVoterResponse | RemoveRaftVoterResponse | UpdateRaftVoterResponse | ApiVersionsResponse,
    version: int, endpoints: Mapping[int, ListenerEndpoint],
) -> Body:
    """KIP-853's responses (RaftUtil.addVoterResponse / removeVoterResponse / updateVoterResponse) and an
    ApiVersions answer as a value (the node's own ApiVersions answers come from net.KafkaServer)."""
    if isinstance(resp, AddRaftVoterResponse | RemoveRaftVoterResponse):
        _check_v0(api_key(resp), version)
        # Kafka: a null message becomes ``error.message()``, which for NONE is its name.
        message = resp.error_message if resp.error_message is not None else _kafka_error_message(resp.error)
        return {"ThrottleTimeMs": 0, "ErrorCode": int(resp.error), "ErrorMessage": message}
    if isinstance(resp, UpdateRaftVoterResponse):
        _check_v0(UPDATE_RAFT_VOTER, version)
        leader = resp.current_leader
        current: Body = {"LeaderId": leader.leader_id, "LeaderEpoch": leader.leader_epoch, "Host": "", "Port": 0}
        ep = resp.leader_endpoint
        if ep is not None:
            current["Host"], current["Port"] = ep.host, ep.port
        elif leader.leader_id >= 0 and leader.leader_id in endpoints:
            known = endpoints[leader.leader_id]
            current["Host"], current["Port"] = known.host, known.port
        return {"ThrottleTimeMs": 0, "ErrorCode": int(resp.error), "CurrentLeader": current}
    abody: Body = {"ErrorCode": int(resp.error), "ApiKeys": [], "ThrottleTimeMs": 0}
    if version >= 3:
        abody["SupportedFeatures"] = supported_features_body({} if resp.kraft_version_range is None else {
            KRAFT_VERSION_FEATURE: resp.kraft_version_range}, version)
    return abody


def _kafka_error_message(error: Errors) -> str:
    return error.name if error == Errors.NONE else error.message


_REDIRECTING_ERRORS = (Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH)
_ERROR_OF_CODE = {int(e): e for e in Errors}


def _error(code: int) -> Errors:
    """``Errors(code)`` without the enum machinery on the hot path (every Fetch response has two)."""
    error = _ERROR_OF_CODE.get(code)
    return Errors(code) if error is None else error  # an unknown code raises as Errors() does


def _describe_error_partition(index: int, error: Errors, version: int) -> Body:
    part: Body = {
        "PartitionIndex": index,
        "ErrorCode": int(error),
        "LeaderId": 0,
        "LeaderEpoch": 0,
        "HighWatermark": 0,
        "CurrentVoters": [],
        "Observers": [],
    }
    if version >= 2:
        part["ErrorMessage"] = error_message(error)
    return part


def error_message(error: Errors) -> str:
    """Kafka's ``Errors.message()`` for ``error`` (``spec/errors.tsv``)."""
    return error.message


def _node_body(node_id: int, ep: ListenerEndpoint) -> Body:
    return {"NodeId": node_id, "Listeners": [{"Name": ep.listener, "Host": ep.host, "Port": ep.port}]}


def response_from_body(key: int, version: int, body: Body) -> Response:
    """The core's view of a decoded response body. A top-level error may come without partitions."""
    error = _error(body.get("ErrorCode", 0))
    if key == FETCH:
        topics = body.get("Responses") or []
        parts = topics[0].get("Partitions") or [] if topics else []
        if not parts:
            return FetchResponse(error=error)
        p = parts[0]
        div = p.get("DivergingEpoch") or {}
        diverging = None
        if div and (div.get("Epoch", -1) != -1 or div.get("EndOffset", -1) != -1):
            diverging = (div["Epoch"], div["EndOffset"])  # Kafka: set when either differs from -1
        leader = p.get("CurrentLeader") or {}
        batches, encoded = _decode_keeping_bytes(p.get("Records") or b"")
        snap = p.get("SnapshotId") or {}
        snapshot_id = None
        if snap and (snap.get("EndOffset", -1) != -1 or snap.get("Epoch", -1) != -1):
            snapshot_id = SnapshotId(snap.get("EndOffset", -1), snap.get("Epoch", -1))  # Kafka: either != -1
        return FetchResponse(
            high_watermark=p.get("HighWatermark", -1),
            batches=batches,
            diverging_epoch=diverging,
            current_leader=LeaderIdAndEpoch(leader.get("LeaderId", -1), leader.get("LeaderEpoch", -1)),
            partition_error=_error(p.get("ErrorCode", 0)),
            error=error,
            log_start_offset=p.get("LogStartOffset", 0),
            encoded=encoded,
            snapshot_id=snapshot_id,
            node_endpoints=_node_endpoints(body.get("NodeEndpoints")),
        )
    if key == FETCH_SNAPSHOT:
        topics = body.get("Topics") or []
        parts = topics[0].get("Partitions") or [] if topics else []
        if not parts:
            return FetchSnapshotResponse(error=error)
        p = parts[0]
        sid = p.get("SnapshotId") or {}
        end, epoch = sid.get("EndOffset", -1), sid.get("Epoch", -1)
        leader = p.get("CurrentLeader") or {}
        records = p.get("UnalignedRecords") or b""
        return FetchSnapshotResponse(
            snapshot_id=None if end == -1 and epoch == -1 else SnapshotId(end, epoch),
            current_leader=LeaderIdAndEpoch(leader.get("LeaderId", -1), leader.get("LeaderEpoch", -1)),
            size=p.get("Size", -1),
            position=p.get("Position", -1),
            records=bytes(records),
            partition_error=_error(p.get("ErrorCode", 0)),
            error=error,
            node_endpoints=_node_endpoints(body.get("NodeEndpoints")),
        )
    if key in (ADD_RAFT_VOTER, REMOVE_RAFT_VOTER):
        cls = AddRaftVoterResponse if key == ADD_RAFT_VOTER else RemoveRaftVoterResponse
        return cls(error, body.get("ErrorMessage"))
    if key == UPDATE_RAFT_VOTER:
        current = body.get("CurrentLeader") or {}
        leader_id = current.get("LeaderId", -1)
        host = current.get("Host") or ""
        return UpdateRaftVoterResponse(
            error, LeaderIdAndEpoch(leader_id, current.get("LeaderEpoch", -1)),
            ResponseNodeEndpoint(leader_id, host, current.get("Port", 0)) if host and leader_id >= 0 else None)
    if key == API_VERSIONS:
        # AddVoterHandler.handleApiVersionsResponse reads only SupportedFeatures "kraft.version".
        kraft = next((f for f in body.get("SupportedFeatures") or () if f.get("Name") == KRAFT_VERSION_FEATURE), None)
        return ApiVersionsResponse(error, None if kraft is None else (kraft["MinVersion"], kraft["MaxVersion"]))
    topics = body.get("Topics") or []
    parts = topics[0].get("Partitions") or [] if topics else []
    p = parts[0] if parts else {}
    leader_id, leader_epoch = p.get("LeaderId", -1), p.get("LeaderEpoch", -1)
    perror = _error(p.get("ErrorCode", 0))
    if key == VOTE:
        return VoteResponse(leader_id, leader_epoch, bool(p.get("VoteGranted", False)), perror, error,
                            _node_endpoints(body.get("NodeEndpoints")))
    if key == BEGIN_QUORUM_EPOCH:
        return BeginQuorumEpochResponse(leader_id, leader_epoch, perror, error,
                                        _node_endpoints(body.get("NodeEndpoints")))
    if key == END_QUORUM_EPOCH:
        return EndQuorumEpochResponse(leader_id, leader_epoch, perror, error,
                                      _node_endpoints(body.get("NodeEndpoints")))
    if key == DESCRIBE_QUORUM:
        return DescribeQuorumResponse(
            leader_id,
            leader_epoch,
            p.get("HighWatermark", -1),
            tuple(_replica_state(r) for r in p.get("CurrentVoters") or ()),
            tuple(_replica_state(r) for r in p.get("Observers") or ()),
            perror,
            error,
            nodes=tuple(NodeListeners(n["NodeId"], _listeners(n.get("Listeners"))) for n in body.get("Nodes") or ()),
            error_message=body.get("ErrorMessage") or None,
        )
    raise WireError(f"response_from_body: api key {key} is not a KRaft RPC")


def error_response_body(key: int, version: int, error: Errors) -> Body:
    """A response carrying only a top-level error (e.g. INVALID_REQUEST for a foreign partition)."""
    if key == FETCH:
        return {"ThrottleTimeMs": 0, "ErrorCode": int(error), "SessionId": 0, "Responses": []}
    if key == FETCH_SNAPSHOT:
        return {"ThrottleTimeMs": 0, "ErrorCode": int(error), "Topics": []}
    if key in (VOTE, BEGIN_QUORUM_EPOCH, END_QUORUM_EPOCH, DESCRIBE_QUORUM):
        body: Body = {"ErrorCode": int(error), "Topics": []}
        if key == DESCRIBE_QUORUM and version >= 2:
            body["Nodes"] = []
        return body
    if key in (ADD_RAFT_VOTER, REMOVE_RAFT_VOTER):
        return {"ThrottleTimeMs": 0, "ErrorCode": int(error), "ErrorMessage": _kafka_error_message(error)}
    if key == UPDATE_RAFT_VOTER:  # CurrentLeader (tagged) at its default: absent
        return {"ThrottleTimeMs": 0, "ErrorCode": int(error)}
    if key == API_VERSIONS:
        return {"ErrorCode": int(error), "ApiKeys": [], "ThrottleTimeMs": 0}
    raise ValueError(f"error_response_body: api key {key} is not a KRaft RPC")


# ============================================================================================ helpers


def _named_topic(partition: Body) -> list[Body]:
    return [{"TopicName": METADATA_TOPIC, "Partitions": [partition]}]


def _named_partition(body: Body, api: str) -> Body:
    topics = body.get("Topics") or []
    if len(topics) != 1 or len(topics[0].get("Partitions") or []) != 1:
        raise InvalidTopicPartition(f"{api} must name exactly one partition, got {topics!r}")
    topic = topics[0]
    p: Body = topic["Partitions"][0]
    if topic.get("TopicName") != METADATA_TOPIC or p.get("PartitionIndex") != METADATA_PARTITION:
        raise InvalidTopicPartition(f"{api} for {topic.get('TopicName')}-{p.get('PartitionIndex')}")
    return p


#: ``decode_batch`` for the batches a follower fetches: each is usually its last one's shape with other
#: numbers and values (``records.BatchTemplates``; exact, so one for the process serves every node in it).
_FETCHED_BATCHES = BatchTemplates()


def _decode_keeping_bytes(records: bytes) -> tuple[tuple[RecordBatch, ...], tuple[bytes, ...]]:
    """``decode_batches`` (strict) that also returns each batch's bytes as received: a follower stores
    and serves those, as Kafka's followers do, instead of encoding the batch again."""
    if not records:
        return (), ()
    decode = _FETCHED_BATCHES.decode
    batch, end = decode(records, 0)
    size = len(records)
    if end == size:  # one batch (a follower's usual Fetch): kept whole
        return (batch,), (records,)
    batches: list[RecordBatch] = [batch]
    encoded: list[bytes] = [records[:end]]
    pos = end
    while pos < size:
        batch, end = decode(records, pos)
        batches.append(batch)
        encoded.append(records[pos:end])
        pos = end
    return tuple(batches), tuple(encoded)


def _check_fetch_version(version: int) -> None:
    if version < MIN_FETCH_VERSION:
        raise WireError(
            f"Fetch v{version} cannot carry KRaft fields (LastFetchedEpoch needs v12+)",
            Errors.UNSUPPORTED_VERSION,
        )


def _replica_state_body(r: ReplicaState, version: int) -> Body:
    row: Body = {"ReplicaId": r.replica_id, "LogEndOffset": r.log_end_offset}
    if version >= 1:  # KIP-836
        row["LastFetchTimestamp"] = r.last_fetch_timestamp
        row["LastCaughtUpTimestamp"] = r.last_caught_up_timestamp
    if version >= 2:
        row["ReplicaDirectoryId"] = directory_uuid(r.replica_directory_id)
    return row


def _replica_state(row: Body) -> ReplicaState:
    return ReplicaState(
        row["ReplicaId"],
        row["LogEndOffset"],
        row.get("LastFetchTimestamp", -1),
        row.get("LastCaughtUpTimestamp", -1),
        directory_id_of(row.get("ReplicaDirectoryId")),
    )


def _check_v0(key: int, version: int) -> None:
    if version != 0:
        raise WireError(f"{codec.api_name(key)} v{version}: only v0 is spoken (KIP-853, Kafka 3.9)",
                        Errors.UNSUPPORTED_VERSION)


# ============================================================================================ the shell's API
# What reference/node.py calls: the conversions above under the shell's names, with any malformed body
# turned into a ``WireError`` that carries the error to answer with.


def request_from_kafka(key: int, version: int, body: Body | FetchRequest) -> Request:
    if isinstance(body, FetchRequest):
        return body  # typed_wire.TypedCodec read the frame into the core's message already
    try:
        return request_from_body(key, version, body)
    except WireError:
        raise
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        raise WireError(f"malformed {codec.api_name(key)} v{version} request: {exc!r}") from exc


def response_from_kafka(key: int, version: int, body: Body | FetchResponse) -> Response:
    if isinstance(body, FetchResponse):
        return body  # read by typed_wire.TypedCodec
    try:
        return response_from_body(key, version, body)
    except WireError:
        raise
    except (KeyError, TypeError, IndexError, ValueError) as exc:
        raise WireError(f"malformed {codec.api_name(key)} v{version} response: {exc!r}") from exc


def max_wait_ms(req: Request) -> int:
    """How long the receiver may hold ``req`` before answering (a Fetch's long-poll)."""
    return req.max_wait_ms if isinstance(req, FetchRequest) else 0


def sender_of(req: Request) -> int:
    """The replica a request says it comes from (-1 for an admin client's DescribeQuorum)."""
    if type(req) is FetchRequest:  # a follower's fetch: nearly every request a leader handles
        return req.replica_id
    if isinstance(req, VoteRequest):
        return req.candidate_id
    if isinstance(req, BeginQuorumEpochRequest | EndQuorumEpochRequest):
        return req.leader_id
    if isinstance(req, FetchRequest | FetchSnapshotRequest):
        return req.replica_id
    if isinstance(req, UpdateRaftVoterRequest):
        return req.voter_id  # a voter reports its own endpoints (KafkaRaftClient.maybeSendUpdateVoterRequest)
    return -1  # an admin client's DescribeQuorum / AddRaftVoter / RemoveRaftVoter
