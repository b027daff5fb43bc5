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


@dataclass(slots=True, unsafe_hash=True)
class VoteResponse:
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    partition_error: Errors = Errors.NONE
    error: Errors = Errors.NONE


# ------------------------------------------------------------------------------ BeginQuorumEpoch


@dataclass(slots=True, unsafe_hash=True)
class BeginQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    voter_id: int = -1
    valid_partition: bool = True


@dataclass(slots=True, unsafe_hash=True)
class BeginQuorumEpochResponse:
    leader_id: int
    leader_epoch: int
    partition_error: Errors = Errors.NONE
    error: Errors = Errors.NONE


# ------------------------------------------------------------------------------ EndQuorumEpoch


@dataclass(slots=True, unsafe_hash=True)
class EndQuorumEpochRequest:
    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...] = ()
    valid_partition: bool = True


@dataclass(slots=True, unsafe_hash=True)
class EndQuorumEpochResponse:
    leader_id: int
    leader_epoch: int
    partition_error: Errors = Errors.NONE
    error: Errors = Errors.NONE


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


Request = (
    VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest
    | DescribeQuorumRequest
)
Response = (
    VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse | FetchSnapshotResponse
    | DescribeQuorumResponse
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
}


def api_name(message: Request | Response) -> str:
    """Kafka's API name of a message ("Vote", "Fetch", ...)."""
    return API_NAMES[type(message)]
