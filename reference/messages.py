"""The RPC payloads as the core sees them: one flat, typed value per request or response.

Kafka's bodies nest a single partition (``__cluster_metadata-0``) inside ``Topics[].Partitions[]``;
the core only ever talks about that one partition, so these types keep the partition's fields at the
top and say which error is which: ``error`` is Kafka's *top-level* ``ErrorCode`` (whole request refused:
INCONSISTENT_CLUSTER_ID, INVALID_REQUEST), ``partition_error`` the partition-level one (FENCED_LEADER_EPOCH,
NOT_LEADER_OR_FOLLOWER, INCONSISTENT_VOTER_SET, ...). ``reference/wire.py`` converts to and from the
Kafka bodies.

Messages are values: nothing changes one after it is built. They are not frozen dataclasses only
because a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``, several times
the cost of a plain one, and the core builds a few per fetch; ``unsafe_hash`` keeps them hashable, as
frozen ones are. ``LeaderIdAndEpoch`` (two fields) stays frozen: it is a shared default.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import RecordBatch

NO_LEADER = -1

#: The first epoch the kit never adopts: an epoch is an int32 on the wire, so a node at 2**31-1 could never
#: start the next election. Requests naming it are refused (INVALID_REQUEST) and no election reaches it.
EPOCH_LIMIT = 2**31 - 1


@dataclass(frozen=True, slots=True)  # frozen: FetchResponse shares one instance as its default
class LeaderIdAndEpoch:
    """Fetch's tagged ``CurrentLeader``: who the responder believes leads, in which epoch."""

    leader_id: int = NO_LEADER
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """A snapshot's id (KIP-630; Kafka's ``OffsetAndEpoch``): it holds every record below ``end_offset``, and
    ``epoch`` is the epoch of the record at ``end_offset - 1`` (0 for an empty prefix). Ordered by
    (end_offset, epoch), as Kafka orders snapshot ids."""

    end_offset: int
    epoch: int


# ------------------------------------------------------------------------------ KIP-853 keys and endpoints

#: Kafka's ``Uuid.ZERO_UUID`` as a string; the core and the wire use None for it ("no directory id").
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"


@dataclass(frozen=True, slots=True, order=True)
class ReplicaKey:
    """A replica as KIP-853 names it: node id and metadata-log directory id (Kafka's ``ReplicaKey``;
    ``directory_id`` None = Kafka's ZERO_UUID, "not known", which matches any directory id of that node)."""

    id: int
    directory_id: str | None = None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener of a node: ``Listeners``/``LeaderEndpoints``/``Endpoints`` entries (Name, Host, Port)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class NodeEndpoint:
    """A response's tagged ``NodeEndpoints`` entry: where node ``node_id`` listens on the request's listener."""

    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class NodeListeners:
    """DescribeQuorum v2 ``Nodes`` entry: a voter and its listeners."""

    node_id: int
    listeners: tuple[Endpoint, ...] = ()


# ---------------------------------------------------------------------------------------------- Vote


@dataclass(slots=True, unsafe_hash=True)
class VoteRequest:
    cluster_id: str | None
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int  # the candidate's log end offset (Kafka sends its LEO here)
    voter_id: int = -1  # v1+: the receiver the candidate meant (-1: not named)
    # False when the body did not name exactly __cluster_metadata-0 (the other fields are then defaults):
    # Kafka answers that with a top-level INVALID_REQUEST, after the cluster id check (RaftUtil).
    valid_partition: bool = True
    # v2+ (KIP-996, Kafka 4.0): a Prospective's pre-vote, in its current epoch; nothing is persisted for it.
    pre_vote: bool = False
    # v1+ (KIP-853): the candidate's directory id and the receiver's (as the candidate's voter set names it).
    candidate_directory_id: str | None = None
    voter_directory_id: str | None = None


@dataclass(slots=True, unsafe_hash=True)
class VoteResponse:
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    partition_error: Errors = Errors.NONE
    error: Errors = Errors.NONE
    node_endpoints: tuple[NodeEndpoint, ...] = ()  # v1+ tagged: the known leader's endpoint


# ------------------------------------------------------------------------------ BeginQuorumEpoch


@dataclass(slots=True, unsafe_hash=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    voter_id: int = -1
    valid_partition: bool = True
    voter_directory_id: str | None = None  # v1+ (KIP-853): the receiver's directory id as the leader knows it
    leader_endpoints: tuple[Endpoint, ...] = ()  # v1+: where the leader listens


@dataclass(slots=True, unsafe_hash=True)
class BeginQuorumEpochResponse:
    leader_id: int
    leader_epoch: int
    partition_error: Errors = Errors.NONE
    error: Errors = Errors.NONE
    node_endpoints: tuple[NodeEndpoint, ...] = ()  # v1+ tagged


# ------------------------------------------------------------------------------ EndQuorumEpoch


@dataclass(slots=True, unsafe_hash=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()
    valid_partition: bool = True
    # v1+ (KIP-853) ``PreferredCandidates``: the directory id of each of ``preferred_successors``, same order
    # (None where unknown). v0 carries ids only.
    preferred_directory_ids: tuple[str | None, ...] = ()
    leader_endpoints: tuple[Endpoint, ...] = ()  # v1+


@dataclass(slots=True, unsafe_hash=True)
class EndQuorumEpochResponse:
    leader_id: int
    leader_epoch: int
    partition_error: Errors = Errors.NONE
    error: Errors = Errors.NONE
    node_endpoints: tuple[NodeEndpoint, ...] = ()  # v1+ tagged


# ---------------------------------------------------------------------------------------------- Fetch


@dataclass(slots=True, unsafe_hash=True)
class FetchRequest:
    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 0
    max_bytes: int = 0x7FFFFFFF
    replica_epoch: int = -1
    valid_partition: bool = True
    replica_directory_id: str | None = None  # v17+ tagged (KIP-853): the fetcher's directory id


@dataclass(slots=True, unsafe_hash=True)
class FetchResponse:
    high_watermark: int = -1
    batches: tuple[RecordBatch, ...] = ()
    diverging_epoch: tuple[int, int] | None = None  # (Epoch, EndOffset), KIP-595 DivergingEpoch
    current_leader: LeaderIdAndEpoch = LeaderIdAndEpoch()
    partition_error: Errors = Errors.NONE
    error: Errors = Errors.NONE
    log_start_offset: int = 0
    # Each batch's bytes, one per batch, when known: the leader sends the bytes its log holds, and a
    # follower keeps the bytes it received (Kafka's followers append the leader's batches as they are).
    encoded: tuple[bytes, ...] | None = field(default=None, compare=False, repr=False)
    # KIP-630: the leader's answer to a fetch below its log start (or diverging below it): fetch this snapshot
    # (Kafka's tagged ``SnapshotId``; set on the wire when either field differs from -1).
    snapshot_id: SnapshotId | None = None
    node_endpoints: tuple[NodeEndpoint, ...] = ()  # v17+ tagged (KIP-853): the named leader's endpoint


# ------------------------------------------------------------------------------ FetchSnapshot (KIP-630)


@dataclass(slots=True, unsafe_hash=True)
class FetchSnapshotRequest:
    """A chunk of snapshot ``snapshot_id`` from byte ``position`` on, at most ``max_bytes`` (API 59)."""

    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int = 0x7FFFFFFF
    # False when the body did not name exactly __cluster_metadata-0: Kafka answers UNKNOWN_TOPIC_OR_PARTITION
    # on the partition after the cluster id check (KafkaRaftClient.handleFetchSnapshotRequest).
    valid_partition: bool = True
    partition_name: tuple[str, int] | None = None  # (topic, partition) it named, when not valid
    replica_directory_id: str | None = None  # v1+ tagged (KIP-853)


@dataclass(slots=True, unsafe_hash=True)
class FetchSnapshotResponse:
    """One chunk: ``records`` are the snapshot file's bytes ``[position, position + len(records))`` of ``size``
    (Kafka's UnalignedRecords: not cut at batch boundaries). ``snapshot_id`` None on the wire is (-1, -1)."""

    snapshot_id: SnapshotId | None = None
    current_leader: LeaderIdAndEpoch = LeaderIdAndEpoch()
    size: int = -1
    position: int = -1
    records: bytes = b""
    partition_error: Errors = Errors.NONE
    error: Errors = Errors.NONE
    partition_name: tuple[str, int] | None = None  # echoed with UNKNOWN_TOPIC_OR_PARTITION (None: ours)
    node_endpoints: tuple[NodeEndpoint, ...] = ()  # v1+ tagged (KIP-853)


# ------------------------------------------------------------------------------ DescribeQuorum


@dataclass(slots=True, unsafe_hash=True)
class DescribeQuorumRequest:
    """No fields of its own but the partitions it named when they are not just ``__cluster_metadata-0``:
    ``unknown`` lists them, (topic, partition indexes), for Kafka's per-partition
    UNKNOWN_TOPIC_OR_PARTITION answer (``DescribeQuorumRequest.getPartitionLevelErrorResponse``)."""

    unknown: tuple[tuple[str, tuple[int, ...]], ...] | None = None


@dataclass(slots=True, unsafe_hash=True)
class ReplicaState:
    """One row of DescribeQuorum (KIP-595 ReplicaState, timestamps from KIP-836; -1 = unknown)."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1
    replica_directory_id: str | None = None  # v2+ (KIP-853); None is ZERO_UUID on the wire


@dataclass(slots=True, unsafe_hash=True)
class DescribeQuorumResponse:
    leader_id: int
    leader_epoch: int
    high_watermark: int = -1
    voters: tuple[ReplicaState, ...] = ()
    observers: tuple[ReplicaState, ...] = ()
    partition_error: Errors = Errors.NONE
    error: Errors = Errors.NONE
    # Set when answering a request for other partitions: each is echoed with ``partition_error``.
    unknown: tuple[tuple[str, tuple[int, ...]], ...] | None = None
    nodes: tuple[NodeListeners, ...] = ()  # v2+ (KIP-853): the voters and their listeners
    error_message: str | None = None  # v2+


# ------------------------------------------------------------------------------ KIP-853 voter changes


@dataclass(slots=True, unsafe_hash=True)
class AddRaftVoterRequest:
    """API 80 v0. ``timeout_ms`` is carried but, as in Kafka, the leader's own request timeout bounds the change."""

    cluster_id: str | None
    voter_id: int
    voter_directory_id: str | None
    listeners: tuple[Endpoint, ...] = ()
    timeout_ms: int = 30000


@dataclass(slots=True, unsafe_hash=True)
class AddRaftVoterResponse:
    error: Errors = Errors.NONE
    error_message: str | None = None


@dataclass(slots=True, unsafe_hash=True)
class RemoveRaftVoterRequest:
    """API 81 v0."""

    cluster_id: str | None
    voter_id: int
    voter_directory_id: str | None


@dataclass(slots=True, unsafe_hash=True)
class RemoveRaftVoterResponse:
    error: Errors = Errors.NONE
    error_message: str | None = None


@dataclass(slots=True, unsafe_hash=True)
class UpdateRaftVoterRequest:
    """API 82 v0: a voter tells the leader its current listeners and supported ``kraft.version`` range."""

    cluster_id: str | None
    current_leader_epoch: int
    voter_id: int
    voter_directory_id: str | None
    listeners: tuple[Endpoint, ...] = ()
    kraft_version_min: int = 0
    kraft_version_max: int = 1


@dataclass(slots=True, unsafe_hash=True)
class UpdateRaftVoterResponse:
    error: Errors = Errors.NONE
    current_leader: LeaderIdAndEpoch = LeaderIdAndEpoch()
    leader_endpoint: NodeEndpoint | None = None  # tagged CurrentLeader Host/Port (node_id = leader id)


@dataclass(slots=True, unsafe_hash=True)
class ApiVersionsRequest:
    """The leader's probe of a joining voter (AddRaftVoter step "send ApiVersions"); the core sends it like any
    request. The shell answers inbound ApiVersions itself (net.py); the core never receives one."""


@dataclass(slots=True, unsafe_hash=True)
class ApiVersionsResponse:
    """What the core needs of an ApiVersions answer: the error and the responder's supported ``kraft.version``
    range (SupportedFeatures, v3+; None when absent)."""

    error: Errors = Errors.NONE
    kraft_version_range: tuple[int, int] | None = None


Request = (
    VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest
    | DescribeQuorumRequest | AddRaftVoterRequest | RemoveRaftVoterRequest | UpdateRaftVoterRequest
    | ApiVersionsRequest
)
Response = (
    VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse | FetchSnapshotResponse
    | DescribeQuorumResponse | AddRaftVoterResponse | RemoveRaftVoterResponse | UpdateRaftVoterResponse
    | ApiVersionsResponse
)

API_NAMES: dict[type, str] = {
    VoteRequest: "Vote",
    VoteResponse: "Vote",
    BeginQuorumEpochRequest: "BeginQuorumEpoch",
    BeginQuorumEpochResponse: "BeginQuorumEpoch",
    EndQuorumEpochRequest: "EndQuorumEpoch",
    EndQuorumEpochResponse: "EndQuorumEpoch",
    FetchRequest: "Fetch",
    FetchResponse: "Fetch",
    FetchSnapshotRequest: "FetchSnapshot",
    FetchSnapshotResponse: "FetchSnapshot",
    DescribeQuorumRequest: "DescribeQuorum",
    DescribeQuorumResponse: "DescribeQuorum",
    AddRaftVoterRequest: "AddRaftVoter",
    AddRaftVoterResponse: "AddRaftVoter",
    RemoveRaftVoterRequest: "RemoveRaftVoter",
    RemoveRaftVoterResponse: "RemoveRaftVoter",
    UpdateRaftVoterRequest: "UpdateRaftVoter",
    UpdateRaftVoterResponse: "UpdateRaftVoter",
    ApiVersionsRequest: "ApiVersions",
    ApiVersionsResponse: "ApiVersions",
}


def api_name(message: Request | Response) -> str:
    """Kafka's API name of a message ("Vote", "Fetch", ...)."""
    return API_NAMES[type(message)]
