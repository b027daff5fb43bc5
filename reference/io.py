"""What goes into the core and what comes out of it (etcd-style: inputs in, one ``Ready`` bundle back).

Inputs: ``RequestReceived``, ``ResponseReceived``, ``RequestFailed``, ``ClientWrite``, ``Shutdown``, and for
snapshots (KIP-630) ``SnapshotWritten``, ``CleanLogTo``, ``SnapshotLoaded`` (passed to ``KRaftCore.step``) and
the passage of time (``KRaftCore.tick(now_ms)``). The core reads snapshot bytes (to serve FetchSnapshot)
through a ``SnapshotSource`` the shell gives it; it never writes one: writes are ``Ready.log_ops``.

Output: ``Ready``. The shell must apply it in this order — the durability rule of KIP-595 "the vote is
on disk before it is announced", and Raft's "entries are durable before they are acknowledged":

1. ``persist`` (quorum-state, fsync) and ``log_ops`` (append/truncate the log, fsync),
2. ``cluster_id_adopted`` (write meta.properties),
3. then ``send`` and ``replies``.

One exception, Kafka's own (KafkaRaftClient.flushLeaderLog answers parked fetches before it flushes): a leader's
``FetchResponse`` replies may leave between the log's writes and its fsync when the bundle has no ``persist``, only
appends in ``log_ops`` and no ``high_watermark`` move. They claim nothing durable of the bundle: the high watermark
they name was published by an earlier bundle, and the leader's new end offset counts toward it only in a later step,
after the fsync (``Node._fetch_answers_lead_the_fsync``).

``trace`` holds the trace events of this step without ``seq`` (the trace writer numbers them). A shell that
writes a trace writes them first, before step 1: a write-ahead record, so that a crash never leaves a
durable effect the trace lacks (a traced step that a crash kept from disk announced nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from kraft_tck.reference.messages import Request, Response, SnapshotId
from kraft_tck.reference.voters import VoterSet
from kraft_tck.spec.records import RecordBatch

# ---------------------------------------------------------------------------------------------- durable state


@dataclass(frozen=True, slots=True)
class ElectionState:
    """The core's durable election state (Kafka's ``ElectionState``): what ``Ready.persist`` asks the shell to
    write to ``quorum-state`` and what the core restarts from (KIP-595 "Persistence"). The file's own record,
    with the fields Kafka's format carries besides, is ``storage.QuorumStateData``; the shells convert.

    The cluster id is not here: it lives in meta.properties (``Ready.cluster_id_adopted`` /
    ``CoreConfig.cluster_id``).
    """

    leader_epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1
    voters: tuple[int, ...] = ()
    # KIP-853: the directory id of the replica voted for (quorum-state v1 ``votedDirectoryId``; None = none/ZERO).
    voted_directory_id: str | None = None


# ---------------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """A request from a peer. ``reply_to`` is the shell's opaque token for the connection/correlation
    id; the core hands it back unchanged in a ``Reply``. Ids inside the request body are authoritative;
    ``sender_id`` is informational (-1 when the shell cannot tell)."""

    sender_id: int
    reply_to: object
    request: Request


@dataclass(frozen=True, slots=True)
class ResponseReceived:
    """The response to a request this core asked the shell to send to ``sender_id``.

    ``request_id`` is the ``OutboundRequest.request_id`` it answers. The core has at most one request in
    flight per destination and drops a response that does not answer it (late, duplicated, or for a
    request it has since given up on) — Kafka's RaftClient does the same with correlation ids. Shells
    must pass it; ``None`` is only for hand-fed input in tests, and skips the check.
    """

    sender_id: int
    response: Response
    request_id: int | None = None


@dataclass(frozen=True, slots=True)
class RequestFailed:
    """A request to ``dest_id`` got no response (connection failure or request timeout)."""

    dest_id: int
    api: str
    request_id: int | None = None  # as in ResponseReceived


@dataclass(frozen=True, slots=True)
class ClientWrite:
    """Append these record values on the leader (one batch)."""

    values: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class Shutdown:
    """Graceful shutdown: a leader resigns (KIP-595 "EndQuorumEpoch"); nobody starts new elections."""


@dataclass(frozen=True, slots=True)
class SnapshotWritten:
    """KIP-630 ``CreateSnapshot``: the shell has written and frozen (fsync, rename) a snapshot of its state
    machine at ``snapshot_id``; the core checks Kafka's rules (``KRaftCore.create_snapshot``) and records it.
    Name the file with ``KRaftCore.snapshot_id_at(end_offset)``."""

    snapshot_id: SnapshotId


@dataclass(frozen=True, slots=True)
class CleanLogTo:
    """KIP-630 ``CleanLog``: retention allows the log start to move to ``offset``, the end offset of a snapshot
    the core knows (Kafka's ``KafkaMetadataLog.deleteBeforeSnapshot``). Anything else changes nothing."""

    offset: int


@dataclass(frozen=True, slots=True)
class SnapshotLoaded:
    """After applying ``InstallSnapshot`` and loading the state machine from the snapshot, the shell reports the
    cluster id the snapshot's content holds (the ``kraft-tck/cluster-id`` record, ``core.CLUSTER_ID_KEY``), or
    None: a node without a cluster id adopts it (it is committed, as everything in a snapshot)."""

    snapshot_id: SnapshotId
    cluster_id: str | None
    # KIP-853: the snapshot header batch's KRaftVersionRecord (0 when absent) and VotersRecord (None when absent),
    # in force at the snapshot's end offset - 1 (KRaftControlRecordStateMachine.maybeLoadSnapshot).
    kraft_version: int = 0
    voters: VoterSet | None = None


Input = (
    RequestReceived | ResponseReceived | RequestFailed | ClientWrite | Shutdown | SnapshotWritten | CleanLogTo
    | SnapshotLoaded
)

# ---------------------------------------------------------------------------------------------- snapshot bytes


class RawSnapshotReader(Protocol):
    """One frozen snapshot's bytes (Kafka's ``RawSnapshotReader``)."""

    def size_in_bytes(self) -> int:
        ...

    def slice(self, position: int, max_bytes: int) -> bytes:
        """The bytes ``[position, position + max_bytes)``, cut at the end of the snapshot."""
        ...


class SnapshotSource(Protocol):
    """Where the core reads the snapshots it serves (Kafka's ``ReplicatedLog.readSnapshot``): the shell's snapshot
    store. ``None``: no such snapshot (any more)."""

    def read_snapshot(self, snapshot_id: SnapshotId) -> RawSnapshotReader | None:
        ...

# ---------------------------------------------------------------------------------------------- outputs


@dataclass(frozen=True, slots=True)
class AppendBatches:
    """Append ``batches`` to the log. ``encoded`` holds their bytes, one per batch, when the core has
    them (it always does): the shell writes those instead of encoding again. Not part of equality."""

    batches: tuple[RecordBatch, ...]
    encoded: tuple[bytes, ...] | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class TruncateTo:
    """Remove every record at ``offset`` and beyond."""

    offset: int


@dataclass(frozen=True, slots=True)
class AdvanceLogStart:
    """KIP-630 ``CleanLog``: the log now starts at ``offset`` (a snapshot's end offset); every record below it is
    gone. Delete the segments wholly below it (Kafka's ``maybeIncrementLogStartOffset`` + ``deleteOldSegments``)."""

    offset: int


@dataclass(frozen=True, slots=True)
class WriteSnapshotChunk:
    """A follower's download (KIP-630 FetchSnapshot): write ``data`` at byte ``position`` of the partial file
    ``<snapshot_id>.checkpoint.part``. Position 0 starts (or restarts) the file; chunks come in order."""

    snapshot_id: SnapshotId
    position: int
    data: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    """The download is complete (or, at restart, the latest snapshot lies past the log): freeze the partial file
    if there is one (fsync, rename to ``.checkpoint``, fsync the directory), then empty the log so that it
    starts and ends at ``snapshot_id.end_offset`` (Kafka's ``snapshot.freeze()``, ``log.truncateToLatestSnapshot``),
    load the state machine from the snapshot and report it with ``SnapshotLoaded``."""

    snapshot_id: SnapshotId


@dataclass(frozen=True, slots=True)
class AbortSnapshotDownload:
    """Delete the partial file of ``snapshot_id`` (the leader lost it, or this node stopped following)."""

    snapshot_id: SnapshotId


@dataclass(frozen=True, slots=True)
class DeleteSnapshot:
    """The core no longer needs this snapshot (it lies below the log start): the shell may delete its file
    (Kafka's ``forgetSnapshotsBefore`` / ``removeSnapshots``)."""

    snapshot_id: SnapshotId


LogOp = (
    AppendBatches | TruncateTo | AdvanceLogStart | WriteSnapshotChunk | InstallSnapshot | AbortSnapshotDownload
    | DeleteSnapshot
)


@dataclass(frozen=True, slots=True)
class OutboundRequest:
    dest_id: int
    request: Request
    request_id: int = 0  # hand it back in the ResponseReceived / RequestFailed for this request
    # KIP-853: where to send it when the shell may not know ``dest_id``'s address (a voter known only from a
    # VotersRecord, a joining voter's ApiVersions probe, a bootstrap server with id -2, -3, ...). None: the
    # shell's own address book.
    address: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    reply_to: object
    response: Response


@dataclass(frozen=True, slots=True)
class ClientAppendResult:
    """The answer to a ``ClientWrite``: the offsets it got, or why it was refused."""

    accepted: bool
    base_offset: int = -1
    last_offset: int = -1
    epoch: int = -1
    leader_id: int = -1  # when refused: where to go instead (-1 unknown)


@dataclass(slots=True)
class Ready:
    """Everything one step produced. Apply in the order given in this module's docstring."""

    persist: ElectionState | None = None
    log_ops: list[LogOp] = field(default_factory=list)
    high_watermark: int | None = None  # the new high watermark when it moved
    cluster_id_adopted: str | None = None
    send: list[OutboundRequest] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    trace: list[dict[str, Any]] = field(default_factory=list)
    client_append: ClientAppendResult | None = None
    next_deadline_ms: int | None = None  # call ``tick`` no later than this


# ---------------------------------------------------------------------------------------------- status


@dataclass(frozen=True, slots=True)
class CoreStatus:
    """What a shell may read of the core between steps (``KRaftCore.status()``), so that no shell reaches
    into the core's role objects or log bookkeeping. A value: it does not change when the core moves on.

    ``role`` is the role's vocabulary name (spec/README.md: "Leader", "Follower", "Voted", ...).
    ``epoch_start_offset`` is a leader's log end offset when it won (the high watermark passes it once an
    entry of its epoch commits, KIP-595 "Leader Election"); -1 in every other role. ``next_append_offset``
    is where the next client record goes: past the log end while a leader holds writes back
    (``controller.quorum.append.linger.ms``), the log end otherwise.
    """

    node_id: int
    role: str
    epoch: int
    leader_id: int
    voted_id: int
    log_end_offset: int
    high_watermark: int
    next_append_offset: int
    epoch_start_offset: int
    cluster_id: str | None
    log_start_offset: int = 0  # KIP-630: records below it are gone (in the latest snapshot)
    latest_snapshot_id: SnapshotId | None = None
    snapshot_download: SnapshotId | None = None  # a follower's download in progress
    # KIP-853: the voter set in force (sorted ids; the latest VotersRecord, committed or not), kraft.version, and
    # this node's metadata-log directory id.
    voters: tuple[int, ...] = ()
    kraft_version: int = 0
    directory_id: str | None = None

    @property
    def is_leader(self) -> bool:
        return self.epoch_start_offset >= 0
