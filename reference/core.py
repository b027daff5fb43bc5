"""The reference KRaft node's protocol core: a pure, deterministic state machine (KIP-595, KIP-836).

Role states and transitions (Kafka's QuorumState names). Every role change goes through ``_transition``;
this table lists all of them, one line each, with the handler that makes it.

    Unattached --election timeout (voters only)---------------> Candidate   start_election         [no pre-vote]
    Unattached --grants a vote---------------------------------> Voted       handle_vote_request
    Unattached --learns the leader of its epoch----------------> Follower    _maybe_transition
    Voted      --election timeout------------------------------> Candidate   start_election         [no pre-vote]
    Voted      --learns the leader of its epoch----------------> Follower    _maybe_transition
    Candidate  --majority of votes-----------------------------> Leader      become_leader
    Candidate  --lost or timed out, then election backoff------> Candidate   start_election (epoch + 1) [no pre-vote]
    Candidate  --learns the leader of its epoch----------------> Follower    _maybe_transition
    Leader     --no fetches from a majority (check quorum)-----> Resigned    leader_progress_timeout
    Leader     --graceful shutdown-----------------------------> Resigned    resign
    Leader     --its removal committed (KIP-853)---------------> Resigned    _resign_removed (cause RemovedFromVoters)
    Follower   --fetch timeout (voter)-------------------------> Candidate   start_election         [no pre-vote]
    Follower   --fetch timeout (observer)----------------------> Unattached  _observer_fetch_timeout
                                                                 | Voted (it voted in the epoch: the vote stays)
    Follower   --EndQuorumEpoch from its leader, then backoff--> Candidate   start_election         [no pre-vote]
    Resigned   --election timeout------------------------------> Candidate   start_election         [no pre-vote]
    Resigned   --election timeout, not a voter (KIP-853)-------> Unattached  _become_unattached (epoch + 1)

    With pre-vote (KIP-996, ``CoreConfig.pre_vote``; Kafka 4.x QuorumState's table) every timer above that
    starts an election goes to Prospective instead, and only a Prospective becomes a Candidate:

    Unattached, Voted --election timeout-----------------------> Prospective become_prospective
    Follower   --fetch timeout, or EndQuorumEpoch + backoff----> Prospective become_prospective
    Candidate  --election timeout, or lost + election backoff--> Prospective become_prospective
    Resigned   --election timeout: Unattached(epoch + 1) first-> Prospective become_prospective (pollResigned)
    Prospective--majority of pre-vote grants, or a voter that
                 cannot take Vote v2 (UNSUPPORTED_VERSION)-----> Candidate   start_election (epoch + 1)
    Prospective--majority refused, or election timeout---------> Follower    abandon_prospective (leader known)
                                                                 | Unattached / Voted (no leader known)
    Prospective--grants a (real) vote--------------------------> Prospective handle_vote_request (voted_id set)
    any        --sees a higher epoch with a known leader-------> Follower    _maybe_transition
    any        --sees a higher epoch, leader unknown-----------> Unattached  _maybe_transition
    (restart)  --quorum-state + log----------------------------> Unattached | Voted | Candidate
                                                                 | Follower | Resigned          restart
                                                                 (Resigned whenever it led the epoch, even
                                                                 when no longer a voter; a vote always stays)
    (restart)  --the only voter of its set---------------------> Candidate (Prospective first with pre-vote),
                                                                 then Leader                 _start_as_only_voter

Snapshots (KIP-630) change no role: a Follower downloads a snapshot (``Follower.fetching_snapshot``, sending
FetchSnapshot instead of Fetch) and installs it (``handle_fetch_snapshot_response``); any role records a
snapshot its shell wrote (``create_snapshot``) and moves its log start up to one (``clean_log``). The shell
writes the snapshot files; the core reads them only through the ``io.SnapshotSource`` it is given.

The shell contract (etcd-raft style). The shell feeds one input at a time, ``step(input, now_ms)``, or
lets time pass, ``tick(now_ms)``, and gets a ``Ready`` bundle (``reference/io.py``). It must apply the
bundle in order: persist ``persist`` and ``log_ops`` (fsync) BEFORE sending ``send`` and ``replies``,
because a vote or an appended entry must be durable before anyone can learn of it (KIP-595 "the vote
is persisted before the response is sent"). Then call ``tick`` again by ``next_deadline_ms``.

Nothing in here touches a socket, a clock, a disk or global state: time is the ``now_ms`` argument and
randomness (election jitter, the bootstrap cluster id) comes from the ``random.Random`` passed in, so
the same inputs and seed give the same outputs.

Fault injection: the conformance tests need broken nodes. Rather than flags in the product, a few rules
are small named methods a test-only subclass can override: ``_cluster_id_ok``, ``_persist_vote``,
``_truncation_point``, ``_guard_truncation``, ``_should_resign``, ``_counts_toward_hw``; for snapshots
``_snapshot_allowed``, ``_fetch_needs_snapshot``, ``_clean_limit``, ``_snapshot_chunk_bytes``; for KIP-853
``_voter_change_blocked``, ``_replica_caught_up``, ``_voter_key_ok``, ``_voter_set_for_quorum``,
``_should_resign_after_removal``, ``_add_completes_at_append`` (in ``voter_changes.py``, inherited).

Dynamic quorum (KIP-853, Kafka 3.9/4.0): "voter" means a member of the voter set in force, the latest VotersRecord
of the log, committed or not (``voters.VoterHistory``, fed by every append, truncation, snapshot and the bootstrap
checkpoint; with static controller.quorum.voters, kraft.version 0, it is that set and nothing changes). A node
outside it is an observer: it never campaigns. A leader changes the set one voter at a time
(``handle_add_raft_voter_request``, ``handle_remove_raft_voter_request``, ``handle_update_raft_voter_request``).
That part of the core, the voter set in force and the voter-change handlers, is ``voter_changes.ReconfigHandlers``, a
mixin ``KRaftCore`` inherits (Kafka keeps it apart too: AddVoterHandler, RemoveVoterHandler, UpdateVoterHandler).
"""

from __future__ import annotations

import base64
import bisect
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kraft_tck.reference.io import (
    AbortSnapshotDownload,
    AdvanceLogStart,
    AppendBatches,
    CleanLogTo,
    ClientAppendResult,
    ClientWrite,
    CoreStatus,
    DeleteSnapshot,
    ElectionState,
    Input,
    InstallSnapshot,
    OutboundRequest,
    Ready,
    Reply,
    RequestFailed,
    RequestReceived,
    ResponseReceived,
    Shutdown,
    SnapshotLoaded,
    SnapshotSource,
    SnapshotWritten,
    TruncateTo,
    WriteSnapshotChunk,
)
from kraft_tck.reference.log import Log, records_digest
from kraft_tck.reference.messages import (
    EPOCH_LIMIT,
    AddRaftVoterRequest,
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
    ReplicaKey,
    ReplicaState,
    Request,
    SnapshotId,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    VoteRequest,
    VoteResponse,
)
from kraft_tck.reference.roles import (
    Candidate,
    Follower,
    Leader,
    Prospective,
    ReplicaProgress,
    Resigned,
    Role,
    Unattached,
    Voted,
)
from kraft_tck.reference.voter_changes import ENDPOINT_RESPONSES, ReconfigHandlers, first_batch_bytes
from kraft_tck.reference.voters import (
    VoterSet,
    kraft_version_record,
    voters_record,
)
from kraft_tck.spec.codec import encode_data
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import (
    CONTROL_SCHEMAS,
    HEADER_SIZE,
    ControlType,
    Record,
    RecordBatch,
    control_batch,
    data_batch,
)

# KIP-595 "Cluster Bootstrapping" leaves the cluster-id record to the state machine above Raft. This
# project's choice: one plain data record with this key and the id (Kafka's base64 uuid form) as value.
CLUSTER_ID_KEY = b"kraft-tck/cluster-id"

# Kafka's unit for the randomised exponential election backoff (KafkaRaftClient.RETRY_BACKOFF_BASE_MS).
ELECTION_BACKOFF_BASE_MS = 100

# Kafka's LeaderState.OBSERVER_SESSION_TIMEOUT_MS: a leader forgets an observer that has not fetched for 5 minutes
# (DescribeQuorum stops listing it).
OBSERVER_SESSION_TIMEOUT_MS = 300_000

# Kafka's LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR: a leader resigns after 1.5 x the fetch timeout without
# fetches from a majority of the voters (the KIP says the fetch timeout itself).
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5

# A data record's bytes besides its value: length, attributes, timestamp and offset deltas, null key,
# value length, header count — at most 3+1+1+3+1+3+1 for offsets and values below 2**20.
RECORD_SIZE_BOUND = 13


class SafetyViolation(RuntimeError):
    """The core was about to break a Raft safety property (named in the message). Always a bug."""


@dataclass(frozen=True, slots=True)
class CoreConfig:
    """The protocol settings, with Kafka's meaning (``controller.quorum.*`` in milliseconds).

    ``cluster_id`` None means "not formatted": the node runs KIP-595's cluster bootstrap.
    ``append_linger_ms`` / ``append_max_batch_bytes``: how a leader batches client writes (Kafka's
    ``controller.quorum.append.linger.ms`` and KafkaRaftClient's 8 MiB batch limit); 0 appends each
    write at once, as its own batch.
    """

    node_id: int
    voters: frozenset[int] = frozenset()
    cluster_id: str | None = None
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    fetch_max_wait_ms: int = 500
    append_linger_ms: int = 0
    append_max_batch_bytes: int = 8 * 1024 * 1024
    retry_backoff_ms: int = 20
    emit_trace: bool = True  # False: Ready.trace stays empty (a shell that writes no trace saves the work)
    fetch_max_bytes: int = 8 * 1024 * 1024
    # KIP-996 pre-vote, as Kafka 4.x: timeouts lead to Prospective (Vote v2 PreVote=true in the current epoch)
    # and only a majority of pre-vote grants to Candidate. False: Kafka 3.9's elections (Vote v0-1 only).
    pre_vote: bool = False
    # KIP-630: MaxBytes of a follower's FetchSnapshot (Kafka's KafkaRaftClient.MAX_FETCH_SIZE_BYTES, 8 MiB): the
    # largest chunk it asks for. Smaller values download a snapshot in more chunks.
    fetch_snapshot_max_bytes: int = 8 * 1024 * 1024
    # KIP-853 (dynamic quorum). ``directory_id``: this node's metadata-log directory id (meta.properties
    # ``directory.id``; None = Kafka's ZERO_UUID). ``listeners``: its own controller endpoints, the first being
    # the default listener (controller.listener.names[0]) used for VotersRecord entries, LeaderEndpoints and
    # the listener an AddRaftVoter must name. ``kraft_version_range``: the kraft.version levels it supports.
    # ``bootstrap_voters``: the voter set of the bootstrap checkpoint (format --standalone/--initial-controllers),
    # in force at offset -1 and making the node kraft.version 1. ``bootstrap_servers``:
    # controller.quorum.bootstrap.servers (ids -2, -3, ...). ``voters`` (controller.quorum.voters, kraft.version 0)
    # may be empty only when one of the last two is given.
    directory_id: str | None = None
    listeners: tuple[Endpoint, ...] = ()
    kraft_version_range: tuple[int, int] = (0, 1)
    bootstrap_voters: VoterSet | None = None
    bootstrap_servers: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if self.node_id < 0:
            raise ValueError(f"node_id must be >= 0, got {self.node_id}")
        if any(v < 0 for v in self.voters):
            raise ValueError(f"voters must be ids >= 0, got {sorted(self.voters)}")
        if not self.voters and self.bootstrap_voters is None and not self.bootstrap_servers:
            raise ValueError("voters must be a non-empty set of ids >= 0 unless bootstrap_voters or "
                             f"bootstrap_servers is given, got {sorted(self.voters)}")
        lo, hi = self.kraft_version_range
        if lo < 0 or hi < lo:
            raise ValueError(f"kraft_version_range must be 0 <= min <= max, got {self.kraft_version_range}")
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.fetch_snapshot_max_bytes <= 0:
            raise ValueError(f"fetch_snapshot_max_bytes must be > 0, got {self.fetch_snapshot_max_bytes}")
        for name in ("election_backoff_max_ms", "fetch_max_wait_ms", "retry_backoff_ms", "append_linger_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.append_max_batch_bytes < HEADER_SIZE + RECORD_SIZE_BOUND:
            raise ValueError(f"append_max_batch_bytes must be >= {HEADER_SIZE + RECORD_SIZE_BOUND}, "
                             f"got {self.append_max_batch_bytes}")
        if self.fetch_max_wait_ms >= self.request_timeout_ms:
            raise ValueError(
                f"fetch_max_wait_ms ({self.fetch_max_wait_ms}) must be below request_timeout_ms "
                f"({self.request_timeout_ms}), or every long-poll fetch would time out"
            )

    @property
    def initial_voters(self) -> frozenset[int]:
        """The configured voter ids: controller.quorum.voters, else the bootstrap checkpoint's (KIP-853). The set in
        force may differ once the log holds VotersRecords: ask ``KRaftCore.voter_set()`` for that."""
        if self.voters or self.bootstrap_voters is None:
            return self.voters
        return self.bootstrap_voters.ids()

    @property
    def majority(self) -> int:
        return len(self.initial_voters) // 2 + 1

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.initial_voters


@dataclass(slots=True)
class _Accumulator:
    """Client writes a leader holds back to append them as one batch (Kafka's BatchAccumulator).

    The linger timer starts with the first write: at ``drain_at_ms`` everything held becomes one batch.
    ``size`` bounds the batch's encoded size; a write that would take it past the maximum drains what
    is held first (a write's records always share one batch, like Kafka's atomic appends).
    """

    epoch: int
    base_offset: int
    started_ms: int
    drain_at_ms: int
    values: list[bytes]
    size: int = HEADER_SIZE


def write_size_bound(values: tuple[bytes, ...]) -> int:
    """An upper bound of the encoded size of these values as data records."""
    return sum(len(v) for v in values) + RECORD_SIZE_BOUND * len(values)


@dataclass(slots=True)  # not frozen: a frozen __init__ costs several times more, and nothing changes one
class _ParkedFetch:
    """A caught-up fetch waiting for new data (KIP-595 long-poll), answered by ``deadline_ms``."""

    reply_to: object
    request: FetchRequest
    deadline_ms: int


class KRaftCore(ReconfigHandlers):
    """One KRaft node's protocol logic. See the module docstring for the contract. KIP-853's voter set in force and
    voter-change handlers are in ``voter_changes.ReconfigHandlers``."""

    def __init__(
        self, config: CoreConfig, durable: ElectionState, log: Log, rng: random.Random, now_ms: int, *,
        snapshots: SnapshotSource | None = None, snapshot_ids: Sequence[SnapshotId] = (),
        start_snapshot: SnapshotLoaded | None = None,
    ) -> None:
        self.config = config
        self.log = log
        self._rng = rng
        self._now = now_ms
        # KIP-630: where the shell keeps its snapshots (read to serve FetchSnapshot), and the ids of those the
        # core knows, oldest first (Kafka's KafkaMetadataLog.snapshots): the earliest is at the log start once
        # the log was cleaned, the latest is what a fetch below the log start is told to fetch.
        self.snapshots = snapshots
        self._snapshot_ids: list[SnapshotId] = sorted(set(snapshot_ids))
        start = log.start_snapshot
        if start is not None and start not in self._snapshot_ids:
            bisect.insort(self._snapshot_ids, start)  # the snapshot at the log start is known by definition
        self._restart_install: SnapshotId | None = None
        latest = self.latest_snapshot_id
        if latest is not None and self._log_behind_snapshot(latest):
            # Kafka's KafkaMetadataLog.apply: a follower that crashed after it froze a downloaded snapshot but
            # before its log was emptied (truncateToLatestSnapshot) finishes that at start-up.
            log.reset_to_snapshot(latest)
            self._restart_install = latest
        # Volatile, like Kafka's: a restarted node relearns it. Everything below the log start is in a snapshot,
        # taken at a committed offset, so it starts there (0 without snapshots).
        self._hw = log.start_offset
        self._cluster_id = config.cluster_id
        self._pending_cluster_id: tuple[int, str] | None = None  # (offset, id) of the log's first id record
        self._note_cluster_id_records(log.iter_batches())  # read only while the cluster id is unknown
        self._ready_at: dict[int, int] = {}  # destination -> when it may get the next request
        self._inflight: dict[int, int] = {}  # destination -> id of the one request awaiting its answer
        self._last_request_id = 0
        self._parked: list[_ParkedFetch] = []
        self._accumulator: _Accumulator | None = None  # a leader's held-back client writes
        self._probe_index = 0  # observers without a leader ask the voters in turn
        self._shutting_down = False
        self._out = Ready()
        self._pending_log: dict[str, Any] = {}
        self._due: list[int] = []  # who the role still has to ask, as of this step's ``_poll``
        # state_snapshot's role-derived fields: a role's kind, epoch, leader and vote never change in place
        # (roles.py), so they are read once per role object, not once per trace event.
        self._snap_role: Role | None = None
        self._snap_fields: tuple[str, int, int, int] = ("", -1, -1, -1)
        self._leader_role: Role | None = None  # the role ``_leader_and_epoch`` was made for
        self._leader_and_epoch = LeaderIdAndEpoch(-1, -1)
        self._init_voters(start_snapshot)
        self.role: Role = self._initial_role(durable)

    @classmethod
    def restart(
        cls, config: CoreConfig, durable: ElectionState, log: Log, rng: random.Random, now_ms: int, *,
        snapshots: SnapshotSource | None = None, snapshot_ids: Sequence[SnapshotId] = (),
        start_snapshot: SnapshotLoaded | None = None,
    ) -> tuple[KRaftCore, Ready]:
        """KIP-595 "Persistence": a node comes back with its quorum-state, log and meta.properties only; with
        KIP-630, also its snapshots: ``snapshot_ids`` are the valid ones on disk, and ``log`` starts at the
        snapshot its ``start`` names. A latest snapshot past the log end empties the log (``InstallSnapshot``).
        KIP-853: ``start_snapshot`` is what the shell read from the snapshot at the log start (its kraft.version
        and voter set, Kafka's ``KRaftControlRecordStateMachine.maybeLoadSnapshot``); the voter set in force is
        then the latest of bootstrap checkpoint, that snapshot and the log's VotersRecords."""
        core = cls(config, durable, log, rng, now_ms, snapshots=snapshots, snapshot_ids=snapshot_ids,
                   start_snapshot=start_snapshot)
        core._begin(now_ms)
        if core._restart_install is not None:
            core._out.log_ops.append(InstallSnapshot(core._restart_install))
            core._forget_snapshots_before(core._restart_install)
        core._emit("Restart", note=f"restored as {core.role.name} from quorum-state {durable}",
                   snapshot_id=core.latest_snapshot_id)
        core._start_as_only_voter()
        core._poll()
        return core, core._finish()

    def _start_as_only_voter(self) -> None:
        """Kafka's ``KafkaRaftClient.initialize``: the only voter of its set does not wait for an election timeout.
        Kafka 3.9 (``quorum.isOnlyVoter() && !quorum.isCandidate()``) becomes Candidate at once; Kafka 4.x, with
        pre-vote, Prospective from Unattached (voted or not), Follower or Resigned. Its own vote is the majority, so
        it leads in the same step (``onBecomeCandidate`` / ``onBecomeProspective``); a node restarted as Candidate
        leads at its first poll (``_fire_timers``), as Kafka's ``onBecomeCandidate`` at start. Cause ``OnlyVoter``.

        One difference, in the epoch number only: Kafka 4.x makes a restarted Resigned leader Prospective in its
        epoch (leader in epoch + 1); here, as on every Resigned timeout (``become_prospective``, tla/KRaft.tla
        BecomeProspective), it first moves to epoch + 1 (leader in epoch + 2)."""
        role = self.role
        if isinstance(role, (Unattached, Voted, Follower, Resigned)) and self._sole_voter() and not self._shutting_down:
            self._elect("OnlyVoter")

    # ============================================================================ public interface

    def step(self, inp: Input, now_ms: int) -> Ready:
        """Handle one input at ``now_ms``; return everything it produced."""
        self._begin(now_ms)
        if isinstance(inp, RequestReceived):
            self._on_request(inp)
        elif isinstance(inp, ResponseReceived):
            self._on_response(inp)
        elif isinstance(inp, RequestFailed):
            if self._answers_inflight(inp.dest_id, inp.request_id):
                self._request_failed(inp.dest_id)
                if inp.api == "ApiVersions":  # the joining voter did not answer: the add is aborted
                    self.handle_api_versions_response(inp.dest_id, ApiVersionsResponse(Errors.NETWORK_EXCEPTION))
        elif isinstance(inp, ClientWrite):
            self._out.client_append = self.client_append(inp.values)
        elif isinstance(inp, Shutdown):
            self._shutting_down = True
            if isinstance(self.role, Leader):
                self.resign()
        elif isinstance(inp, SnapshotWritten):
            self.create_snapshot(inp.snapshot_id)
        elif isinstance(inp, CleanLogTo):
            self.clean_log(inp.offset)
        elif isinstance(inp, SnapshotLoaded):
            self._snapshot_loaded(inp.snapshot_id, inp.cluster_id)
            self._load_snapshot_voters(inp)
        else:
            raise TypeError(f"KRaftCore.step: unknown input {inp!r}")
        self._poll()
        return self._finish()

    def tick(self, now_ms: int) -> Ready:
        """Let time pass: fire due timers, send due requests, answer expired long-polls."""
        self._begin(now_ms)
        self._poll()
        return self._finish()

    def state_snapshot(self) -> dict[str, Any]:
        """The trace's ``state`` object (names as in spec/README.md and tla/KRaft.tla)."""
        role, log = self.role, self.log
        if role is not self._snap_role:
            self._snap_role = role
            self._snap_fields = (role.name, role.epoch, self.voted_id, self.leader_id)
        name, epoch, voted, leader = self._snap_fields
        state = {
            "role": name,
            "epoch": epoch,
            "votedId": voted,
            "leaderId": leader,
            "logEndOffset": log.end_offset,
            "lastFetchedEpoch": self.last_epoch,
            "highWatermark": self._hw,
            "clusterId": self._cluster_id,
        }
        start = log.start_offset
        if start:
            state["logStartOffset"] = start  # KIP-630; absent means 0, so traces without snapshots are as before
        kraft_version = self._vh.kraft_version()
        if kraft_version >= 1:  # KIP-853; absent with static voters, so kraft.version 0 traces are as before
            state["voters"] = list(self._vh.last().sorted_ids())
            state["kraftVersion"] = kraft_version
        return state

    @property
    def epoch(self) -> int:
        return self.role.epoch

    @property
    def last_epoch(self) -> int:
        """The epoch of the last record, 0 for an empty log: what Fetch's LastFetchedEpoch and Vote's
        LastOffsetEpoch carry (Kafka's ``log.lastFetchedEpoch()``; it answers INVALID_REQUEST to -1)."""
        epoch = self.log.last_fetched_epoch
        return epoch if epoch > 0 else 0

    @property
    def begin_quorum_epoch_timeout_ms(self) -> int:
        """The BeginQuorumEpoch heartbeat period (Kafka's ``LeaderState``: ``fetchTimeoutMs / 2``)."""
        return self.config.fetch_timeout_ms // 2

    @property
    def check_quorum_timeout_ms(self) -> int:
        """How long a leader may go without fetches from a majority (Kafka: ``(int) (1.5 * fetch timeout)``)."""
        return int(self.config.fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)

    # leader_id and voted_id are read for every trace event: the commonest roles are tested first.

    @property
    def leader_id(self) -> int:
        role = self.role
        if isinstance(role, Follower):
            return role.leader_id
        if isinstance(role, (Leader, Resigned)):
            return self.config.node_id
        if isinstance(role, Prospective):
            return role.leader_id  # Kafka's ProspectiveState keeps the leader it followed
        return -1

    @property
    def voted_id(self) -> int:
        role = self.role
        if isinstance(role, (Follower, Voted, Prospective)):
            return role.voted_id
        if isinstance(role, (Leader, Candidate, Resigned)):
            return self.config.node_id  # a candidate votes for itself; leaders and resigned ones were one
        return -1

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def cluster_id(self) -> str | None:
        return self._cluster_id

    @property
    def resignation_pending(self) -> bool:
        """True while a resigned leader still waits for EndQuorumEpoch acknowledgements (for shutdown)."""
        return isinstance(self.role, Resigned) and bool(self.role.awaiting_end_epoch)

    # ============================================================================ dispatch

    def _on_request(self, inp: RequestReceived) -> None:
        req = inp.request
        resp: Any
        if isinstance(req, VoteRequest):
            resp = self.handle_vote_request(req)
        elif isinstance(req, BeginQuorumEpochRequest):
            resp = self.handle_begin_quorum_epoch_request(req)
        elif isinstance(req, EndQuorumEpochRequest):
            resp = self.handle_end_quorum_epoch_request(req)
        elif isinstance(req, FetchRequest):
            resp = self.handle_fetch_request(req, inp.reply_to)
            if resp is None:
                return  # parked: answered later
        elif isinstance(req, DescribeQuorumRequest):
            resp = self.handle_describe_quorum_request(req)
        elif isinstance(req, FetchSnapshotRequest):
            resp = self.handle_fetch_snapshot_request(req)
        elif isinstance(req, AddRaftVoterRequest):
            resp = self.handle_add_raft_voter_request(req, inp.reply_to)
            if resp is None:
                return  # waits for the new voter's ApiVersions and the commit
        elif isinstance(req, RemoveRaftVoterRequest):
            resp = self.handle_remove_raft_voter_request(req, inp.reply_to)
            if resp is None:
                return  # answered at the commit
        elif isinstance(req, UpdateRaftVoterRequest):
            resp = self.handle_update_raft_voter_request(req)
        else:
            raise TypeError(f"KRaftCore: unknown request {req!r}")
        self._out.replies.append(Reply(inp.reply_to, self._with_node_endpoints(resp)))

    def _answers_inflight(self, dest: int, request_id: int | None) -> bool:
        """Is this the answer to the one request in flight to ``dest``? Anything else is stale: acting on
        it could, e.g., apply an old DivergingEpoch after a newer fetch already moved the log on."""
        if request_id is not None and self._inflight.get(dest) != request_id:
            return False
        self._inflight.pop(dest, None)
        return True

    def _on_response(self, inp: ResponseReceived) -> None:
        if not self._answers_inflight(inp.sender_id, inp.request_id):
            return
        self._ready_at[inp.sender_id] = self._now  # that destination is free for the next request
        resp = inp.response
        if isinstance(resp, ENDPOINT_RESPONSES) and resp.node_endpoints:
            self._learn_endpoints(resp.node_endpoints)
        if isinstance(resp, VoteResponse):
            self.handle_vote_response(inp.sender_id, resp)
        elif isinstance(resp, BeginQuorumEpochResponse):
            self.handle_begin_quorum_epoch_response(inp.sender_id, resp)
        elif isinstance(resp, EndQuorumEpochResponse):
            self.handle_end_quorum_epoch_response(inp.sender_id, resp)
        elif isinstance(resp, FetchResponse):
            self.handle_fetch_response(inp.sender_id, resp)
        elif isinstance(resp, FetchSnapshotResponse):
            self.handle_fetch_snapshot_response(inp.sender_id, resp)
        elif isinstance(resp, ApiVersionsResponse):
            self.handle_api_versions_response(inp.sender_id, resp)
        elif isinstance(resp, UpdateRaftVoterResponse):
            self.handle_update_raft_voter_response(inp.sender_id, resp)
        else:
            raise TypeError(f"KRaftCore: unexpected response {resp!r} (the core never sends that request)")

    # ============================================================================ Leader Election

    def start_election(self, cause: str) -> None:
        """KIP-595 "Leader Election": bump the epoch, vote for yourself (persisted), ask every voter.

        ``cause``: ElectionTimeout, FetchTimeout, ElectionBackoff, EndQuorumEpoch or OnlyVoter (at start).
        """
        if self.epoch + 1 >= EPOCH_LIMIT:
            self._rearm_exhausted_epoch()
            return
        role = self.role
        if isinstance(role, Prospective):
            retries = role.retries  # Kafka's QuorumState.transitionToCandidate: the prospective's count
        else:
            retries = role.retries + 1 if isinstance(role, Candidate) else 1
        me = self.config.node_id
        self._inflight.clear()  # like Kafka's resetConnections: answers to the old role's requests are void
        self._transition(
            Candidate(
                epoch=self.epoch + 1,
                granted=frozenset({me}),
                rejected=frozenset(),
                retries=retries,
                election_deadline_ms=self._random_election_deadline(),
            )
        )
        self._persist()  # the self-vote is on disk before any VoteRequest leaves (sent by _poll)
        self._emit("StartElection", cause=cause)
        if len(self._voters()) == 1:
            self.become_leader()  # a one-voter quorum: its own vote is the majority

    def _elect(self, cause: str) -> None:
        """A timer (or EndQuorumEpoch) says: time for an election. With pre-vote, ask first (Prospective);
        without, Kafka 3.9's direct StartElection."""
        if self.config.pre_vote:
            self.become_prospective(cause)
        else:
            self.start_election(cause)

    def become_prospective(self, cause: str) -> None:
        """KIP-996 (Kafka 4.x ``QuorumState.transitionToProspective``, ``KafkaRaftClient.transitionToProspective``):
        no epoch bump and nothing persisted; keep the leader and the vote of this epoch; count our own grant
        and send a pre-vote (Vote v2 ``PreVote=true``, ``CandidateEpoch`` = our current epoch) to every other
        voter (``_poll``). ``cause`` as StartElection's. A sole voter is its own majority: Candidate at once."""
        role = self.role
        if isinstance(role, Resigned):
            # Kafka 4.x ``pollResigned``: the election timeout moves a resigned leader to Unattached in
            # epoch + 1 (durable), whose timer has run out too: Prospective in that epoch right away.
            self._transition(Unattached(role.epoch + 1, self._now))
            self._persist()
            role = self.role
        retries = role.retries + 1 if isinstance(role, Candidate) else 1
        me = self.config.node_id
        self._inflight.clear()  # Kafka's resetConnections on becoming a nominee
        self._transition(
            Prospective(
                epoch=self.epoch,
                leader_id=self.leader_id if isinstance(role, Follower) else -1,
                voted_id=self.voted_id if not isinstance(role, Candidate) else me,
                granted=frozenset({me}),
                rejected=frozenset(),
                retries=retries,
                election_deadline_ms=self._random_election_deadline(),
                voted_directory_id=(self.config.directory_id if isinstance(role, Candidate)
                                    else role.voted_directory_id if isinstance(role, (Voted, Follower)) else None),
            )
        )
        self._emit("BecomeProspective", cause=cause)
        if len(self._voters()) == 1:
            self.start_election(cause)  # ``onBecomeProspective``: a majority of one already

    def abandon_prospective(self, cause: str) -> None:
        """KIP-996: the pre-vote was lost (a majority refused) or timed out (Kafka 4.x
        ``prospectiveTransitionAfterElectionLoss``): back to Follower of the leader it knew, else Unattached
        (Voted when it voted in this epoch). Same epoch. After a timeout the election timer has run out
        (``transitionToUnattached`` keeps a prospective's remaining time unless it lost): a new pre-vote at
        the next poll; after a refusal a fresh random timeout."""
        role = self.role
        assert isinstance(role, Prospective), f"abandon_prospective from {role.name}"
        if role.leader_id >= 0:
            self._transition(
                Follower(role.epoch, role.leader_id, self._now + self.config.fetch_timeout_ms, voted_id=role.voted_id,
                         voted_directory_id=role.voted_directory_id)
            )
        else:
            lost = self._election_lost(role)
            deadline = self._random_election_deadline() if lost else role.election_deadline_ms
            if role.voted_id >= 0:
                self._transition(Voted(role.epoch, role.voted_id, deadline, role.voted_directory_id))
            else:
                self._transition(Unattached(role.epoch, deadline))
        self._persist()
        self._emit("AbandonProspective", cause=cause)

    def handle_vote_request(self, req: VoteRequest) -> VoteResponse:
        """KIP-595 "Vote Request Handling", in Kafka's order (``KafkaRaftClient.handleVoteRequest``): cluster
        id, topic/partition, the request's own fields, the epoch, the candidate id; only then may the
        request change anything. Every refusal before the epoch step leaves the state as it was."""
        # Step 1: the cluster id, when given, must be ours (a null one is always accepted).
        if not self._cluster_id_ok(req.cluster_id):
            self._emit("HandleVoteRequest", note=f"refused: cluster id {req.cluster_id!r}")
            return VoteResponse(self.leader_id, self.epoch, False, error=Errors.INCONSISTENT_CLUSTER_ID)
        if not req.valid_partition:
            self._emit("HandleVoteRequest", note="refused: not __cluster_metadata-0")
            return VoteResponse(self.leader_id, self.epoch, False, error=Errors.INVALID_REQUEST)
        # Kafka's sanity checks: an empty log is (LastOffsetEpoch 0, LastOffset 0), never negative, and the
        # last epoch is below the candidate's. Plus the kit's own: no epoch that could never be followed.
        # A pre-vote is sent in the prospective's current epoch, so its last epoch may equal it (Kafka 4.x
        # ``handleVoteRequest``: ``preVote ? lastEpoch > replicaEpoch : lastEpoch >= replicaEpoch``).
        pre_vote = req.pre_vote
        if (
            req.last_offset < 0
            or req.last_offset_epoch < 0
            or req.last_offset_epoch > req.candidate_epoch
            or (req.last_offset_epoch == req.candidate_epoch and not pre_vote)
            or req.candidate_epoch >= EPOCH_LIMIT
        ):
            return self._refuse_vote(Errors.INVALID_REQUEST, "invalid fields")
        # A candidate epoch below ours is fenced; a negative candidate id is invalid (validateVoterOnlyRequest).
        error = self._validate_voter_only_request(req.candidate_id, req.candidate_epoch)
        if error is not None:
            return self._refuse_vote(error, error.name)
        # A higher epoch: forget the old leader/vote first (persisted as Unattached in that epoch). Kafka 4.x
        # does this for a pre-vote too (``handleVoteRequest`` before ``canGrantVote``).
        if req.candidate_epoch > self.epoch:
            self._become_unattached(req.candidate_epoch)
        # v1: the candidate meant another replica (Kafka's isValidVoterKey, after the epoch step; KIP-853: the
        # directory id too).
        if not self._voter_key_ok(req.voter_id, req.voter_directory_id):
            return self._refuse_vote(Errors.INVALID_VOTER_KEY, f"meant for {req.voter_id}")
        granted = self._can_grant_vote(req.candidate_id, req.last_offset_epoch, req.last_offset, pre_vote)
        role = self.role
        if (granted and not pre_vote and isinstance(role, (Voted, Prospective)) and role.voted_id == req.candidate_id
                and role.voted_directory_id != req.candidate_directory_id):
            granted = False  # Kafka compares the whole ReplicaKey voted for (UnattachedState.canGrantVote)
        if granted and not pre_vote and isinstance(role, Unattached):
            deadline = self._random_election_deadline() if self._is_voter() else None
            self._transition(Voted(self.epoch, req.candidate_id, deadline, req.candidate_directory_id))
            self._persist_vote()  # persisted before the response leaves (the shell's ordering)
        elif granted and not pre_vote and isinstance(role, Prospective) and role.voted_id < 0:
            # Kafka 4.x ``QuorumState.prospectiveAddVotedState``: still Prospective, now with a vote (durable),
            # a fresh election timer and a fresh tally.
            self._transition(
                Prospective(role.epoch, role.leader_id, req.candidate_id, frozenset({self.config.node_id}),
                            frozenset(), role.retries, self._random_election_deadline(),
                            voted_directory_id=req.candidate_directory_id)
            )
            self._persist_vote()
        # A granted pre-vote changes nothing and persists nothing (KIP-996).
        kind = "pre-vote " if pre_vote else ""  # a real vote's note is as before pre-vote existed
        self._emit("HandleVoteRequest", note=f"{kind}{'granted' if granted else 'refused'} {req.candidate_id}",
                   pre_vote=pre_vote)
        return VoteResponse(self.leader_id, self.epoch, granted)

    def _refuse_vote(self, error: Errors, why: str) -> VoteResponse:
        self._emit("HandleVoteRequest", note=f"refused: {why}")
        return VoteResponse(self.leader_id, self.epoch, False, partition_error=error)

    def _can_grant_vote(self, candidate_id: int, last_epoch: int, end_offset: int, pre_vote: bool = False) -> bool:
        """At most one vote per epoch; only for a log at least as up-to-date as ours.

        A pre-vote (KIP-996, Kafka 4.x ``canGrantVote`` of each state) asks only for an up-to-date log, whatever
        vote was cast: granted by Unattached, Voted, Prospective, Candidate and Resigned; a Follower grants
        it only before its first successful fetch from the leader (``FollowerState.hasFetchedFromLeader``:
        a leader that answers is alive); a Leader never."""
        role = self.role
        up_to_date = (last_epoch, end_offset) >= (self.last_epoch, self.log.end_offset)
        if pre_vote:
            if isinstance(role, Leader):
                return False
            if isinstance(role, Follower):
                return up_to_date and not role.fetched
            return up_to_date
        if isinstance(role, Prospective):
            # ``QuorumState.unattachedOrProspectiveCanGrantVote``: the vote of this epoch, else none while a
            # leader is known, else the log decides.
            if role.voted_id >= 0:
                return role.voted_id == candidate_id
            return role.leader_id < 0 and up_to_date
        if isinstance(role, Voted):
            return role.voted_id == candidate_id  # the same candidate may ask again (lost response)
        if isinstance(role, Unattached):
            # Raft's election restriction: compare the last epoch first, then the log end offset. Kafka
            # 3.9+ (UnattachedState.canGrantVote) asks nothing of either side's voter-set membership.
            return (last_epoch, end_offset) >= (self.last_epoch, self.log.end_offset)
        # A candidate voted for itself; a leader, follower or resigned leader of this epoch knows the
        # leader already (KIP-595: "leader and follower of the same epoch reject").
        return False

    def handle_vote_response(self, sender_id: int, resp: VoteResponse) -> None:
        """KIP-595 "Vote Response Handling"; a Prospective counts pre-vote answers the same way (KIP-996)."""
        if resp.error == Errors.UNSUPPORTED_VERSION and isinstance(self.role, Prospective):
            # Kafka 4.x ``handleVoteResponse``: a voter that cannot take Vote v2 (a 3.x node) makes the
            # prospective a candidate at once, without waiting for the rest of the pre-vote.
            self._emit("HandleVoteResponse", note=f"{sender_id}: UNSUPPORTED_VERSION, no pre-vote possible",
                       pre_vote=True)
            self.start_election("UnsupportedVersion")
            return
        if resp.error != Errors.NONE:
            self._request_failed(sender_id)
            self._emit("HandleVoteResponse", note=f"top-level error {resp.error.name}")
            return
        if self._handle_common_response(sender_id, resp.partition_error, resp.leader_id, resp.leader_epoch):
            self._emit("HandleVoteResponse", note="newer epoch or stale response")
            return
        role = self.role
        if isinstance(role, Prospective) and resp.partition_error == Errors.NONE:
            self._handle_pre_vote_response(sender_id, role, resp)
            return
        if resp.partition_error != Errors.NONE or not isinstance(role, Candidate):
            if resp.partition_error != Errors.NONE:
                self._request_failed(sender_id)
            self._emit("HandleVoteResponse", note=f"ignored ({resp.partition_error.name}, {role.name})")
            return
        if sender_id not in self._voter_ids():
            self._emit("HandleVoteResponse", note=f"ignored: {sender_id} is not a voter")
            return
        if resp.vote_granted:  # same role and epoch: a tally, not a transition
            role.granted = role.granted | {sender_id}
        else:
            role.rejected = role.rejected | {sender_id}
        verdict = "granted" if resp.vote_granted else "rejected"
        self._emit("HandleVoteResponse", note=f"{verdict} by {sender_id}")
        if len(role.granted) >= self._majority():
            self.become_leader()
        elif self._election_lost(role) and role.backoff_until_ms is None:
            role.backoff_until_ms = self._now + self._election_backoff_ms(role.retries)

    def _handle_pre_vote_response(self, sender_id: int, role: Prospective, resp: VoteResponse) -> None:
        """KIP-996 (Kafka 4.x ``handleVoteResponse`` for a ``ProspectiveState``, ``EpochElection``): a majority
        of grants makes a Candidate (epoch + 1); a majority of refusals ends the pre-vote."""
        if sender_id not in self._voter_ids():
            self._emit("HandleVoteResponse", note=f"ignored: {sender_id} is not a voter", pre_vote=True)
            return
        if resp.vote_granted:
            role.granted = role.granted | {sender_id}
        else:
            role.rejected = role.rejected | {sender_id}
        verdict = "granted" if resp.vote_granted else "rejected"
        self._emit("HandleVoteResponse", note=f"pre-vote {verdict} by {sender_id}", pre_vote=True)
        if len(role.granted) >= self._majority():
            self.start_election("PreVoteGranted")
        elif self._election_lost(role):
            self.abandon_prospective("PreVoteRejected")

    def _election_lost(self, role: Candidate | Prospective) -> bool:
        return len(self._voters()) - len(role.rejected) < self._majority()

    def become_leader(self) -> None:
        """KIP-595 "Vote Response Handling" 2: with a majority, lead; start the epoch with LeaderChange.

        The LeaderChange control record is the first entry of the new epoch: once it is on a majority
        the high watermark may move (Fetch Request Handling step 4). Voters learn of the leader from
        BeginQuorumEpoch, which ``_poll`` sends at once and then every fetch.timeout/2 for as long as
        this node leads (``_send_begin_quorum_epoch``).
        """
        cand = self.role
        assert isinstance(cand, Candidate), f"become_leader from {cand.name}"
        me = self.config.node_id
        vs = self._voters()
        voters = vs.ids()
        start = self.log.end_offset
        self._transition(
            Leader(
                epoch=cand.epoch,
                epoch_start_offset=start,
                granting_voters=cand.granted,
                replicas={n.id: ReplicaProgress(n.id, directory_id=n.key.directory_id) for n in vs.nodes},
                begin_epoch_deadline_ms=self._now,  # Kafka's timer starts at 0: the first round goes now
                progress_deadline_ms=self._now + self.check_quorum_timeout_ms,
            )
        )
        self._persist()
        body = {
            "Version": 0,
            "LeaderId": me,
            "Voters": [{"VoterId": v} for v in sorted(voters)],
            "GrantingVoters": [{"VoterId": v} for v in sorted(cand.granted)],
        }
        batches = [self._epoch_start_batch(start, cand.epoch, body)]
        if self._cluster_id is None and self._pending_cluster_id is None:
            # KIP-595 "Cluster Bootstrapping": the first elected leader generates the cluster id.
            batches.append(self._cluster_id_batch(batches[0].last_offset + 1, cand.epoch))
        self._append_as_leader(batches)
        self._emit("BecomeLeader")

    def _epoch_start_batch(self, start: int, epoch: int, leader_change: dict[str, Any]) -> RecordBatch:
        """The first batch of an epoch (``LeaderState.appendStartOfEpochControlRecords``): LeaderChange and, with
        kraft.version >= 1 when the set came only from the bootstrap checkpoint (offset -1) or the leader's own
        entry differs from itself, KRaftVersionRecord and VotersRecord (the set with the leader's node updated),
        all in this one control batch (``KafkaRaftClientReconfigTest.testLeaderWritesBootstrapRecords``)."""
        vs, kv = self._vh.last(), self._vh.kraft_version()
        records = [(ControlType.LEADER_CHANGE, leader_change)]
        if kv >= 1:
            local = self._local_node()
            if self._vh.last_offset() == -1 or vs.needs_update(local):
                updated = vs.update(local)
                if updated is not None:
                    records.append((ControlType.KRAFT_VERSION, kraft_version_record(kv)))
                    records.append((ControlType.KRAFT_VOTERS, voters_record(updated)))
        if len(records) == 1:
            return control_batch(start, epoch, ControlType.LEADER_CHANGE, leader_change, timestamp=self._now)
        out = tuple(
            Record(i, encode_data(CONTROL_SCHEMAS[ctype], 0, body), int(ctype).to_bytes(4, "big"))
            for i, (ctype, body) in enumerate(records)
        )
        return RecordBatch(start, epoch, out, is_control=True, base_timestamp=self._now, max_timestamp=self._now)

    # ============================================================================ BeginQuorumEpoch

    def handle_begin_quorum_epoch_request(self, req: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
        """KIP-595 "BeginQuorumEpoch Request Handling": follow the announced leader.

        Kafka's order (``KafkaRaftClient.handleBeginQuorumEpochRequest``): cluster id, topic/partition,
        the epoch and leader id; then follow; the voter key (v1) is checked only after that."""
        if not self._cluster_id_ok(req.cluster_id):
            self._emit("HandleBeginQuorumEpochRequest", note=f"refused: cluster id {req.cluster_id!r}")
            return BeginQuorumEpochResponse(self.leader_id, self.epoch, error=Errors.INCONSISTENT_CLUSTER_ID)
        if not req.valid_partition:
            self._emit("HandleBeginQuorumEpochRequest", note="refused: not __cluster_metadata-0")
            return BeginQuorumEpochResponse(self.leader_id, self.epoch, error=Errors.INVALID_REQUEST)
        error = self._validate_voter_only_request(req.leader_id, req.leader_epoch)
        if error is not None:
            self._emit("HandleBeginQuorumEpochRequest", note=f"refused: {error.name}")
            return BeginQuorumEpochResponse(self.leader_id, self.epoch, partition_error=error)
        if req.leader_endpoints:
            self._learn_leader_endpoints(req.leader_id, req.leader_endpoints)
        self._maybe_transition(req.leader_id, req.leader_epoch)
        if not self._voter_key_ok(req.voter_id, req.voter_directory_id):
            self._emit("HandleBeginQuorumEpochRequest", note=f"INVALID_VOTER_KEY: meant for {req.voter_id}")
            return BeginQuorumEpochResponse(
                self.leader_id, self.epoch, partition_error=Errors.INVALID_VOTER_KEY
            )
        self._emit("HandleBeginQuorumEpochRequest")
        return BeginQuorumEpochResponse(self.leader_id, self.epoch)

    def handle_begin_quorum_epoch_response(self, sender_id: int, resp: BeginQuorumEpochResponse) -> None:
        """KIP-595 "BeginQuorumEpoch Response Handling": a newer epoch deposes the leader; an error backs off
        that destination. An acknowledgement changes nothing: the heartbeat goes on regardless (Kafka 3.9+
        ``KafkaRaftClient.handleBeginQuorumEpochResponse`` only notes it, ``LeaderState.addAcknowledgementFrom``,
        and ``maybeSendBeginQuorumEpochRequests`` no longer reads it)."""
        if resp.error != Errors.NONE:
            self._request_failed(sender_id)
            self._emit("HandleBeginQuorumEpochResponse", note=f"top-level error {resp.error.name}")
            return
        if self._handle_common_response(sender_id, resp.partition_error, resp.leader_id, resp.leader_epoch):
            self._emit("HandleBeginQuorumEpochResponse", note="newer epoch or stale response")
            return
        if resp.partition_error != Errors.NONE:
            self._request_failed(sender_id)
        self._emit("HandleBeginQuorumEpochResponse", note=f"{resp.partition_error.name} from {sender_id}")

    # ============================================================================ Fetch: leader side

    def handle_fetch_request(self, req: FetchRequest, reply_to: object = None) -> FetchResponse | None:
        """KIP-595 "Fetch Request Handling" 1-4. Returns None when the fetch is parked (long-poll)."""
        early = self._validate_fetch_request(req)
        if early is not None:
            note = early.error.name if early.error != Errors.NONE else early.partition_error.name
            self._emit("HandleFetchRequest", note=f"refused {req.replica_id}: {note}")
            return early
        leader = self.role
        assert isinstance(leader, Leader)
        self._fetch_directory_id = req.replica_directory_id  # KIP-853: progress is per ReplicaKey
        start = self.log.start_offset
        if self._snapshot_ids:
            # KIP-630: a fetch the log can no longer answer is told to fetch the latest snapshot (Kafka's
            # tryCompleteFetchRequest, ValidOffsetAndEpoch.SNAPSHOT): answered at once, no records, and like a
            # diverging fetch neither replica progress nor check-quorum credit.
            snapshot = self._fetch_needs_snapshot(req.fetch_offset, req.last_fetched_epoch)
            if snapshot is not None:
                self._emit("HandleFetchRequest", note=f"{req.replica_id} @{req.fetch_offset}: snapshot {snapshot}")
                return FetchResponse(self._published_hw(), (), None, self._current_leader(),
                                     log_start_offset=start, snapshot_id=snapshot)
        # Step 3: LastFetchedEpoch/FetchOffset must agree with our epoch cache.
        diverging = self._diverging_epoch(req.fetch_offset, req.last_fetched_epoch)
        if diverging is not None:
            # Like Kafka (tryCompleteFetchRequest), a diverging fetch is neither replica progress nor a
            # fetch that keeps the leader in office (check quorum): only a valid one is.
            self._emit("HandleFetchRequest", note=f"{req.replica_id} diverges: {diverging}")
            return FetchResponse(self._published_hw(), (), diverging, self._current_leader(), log_start_offset=start)
        self._note_fetch_from(req.replica_id)
        # Step 4: the fetch offset is what the replica has; voters' offsets may move the high watermark.
        self._update_replica_progress(req.replica_id, req.fetch_offset)
        batches, encoded = self.log.read_encoded(req.fetch_offset, req.max_bytes)
        if not batches and req.max_wait_ms > 0:
            # Caught up: wait (up to MaxWaitMs) for new data instead of answering empty at once.
            self._parked.append(_ParkedFetch(reply_to, req, self._now + req.max_wait_ms))
            self._emit("HandleFetchRequest", note=f"{req.replica_id} caught up: parked")
            return None
        self._emit("HandleFetchRequest", note=f"{req.replica_id} @{req.fetch_offset}: {len(batches)} batches")
        return FetchResponse(self._published_hw(), batches, None, self._current_leader(), log_start_offset=start,
                             encoded=encoded)

    def _validate_fetch_request(self, req: FetchRequest) -> FetchResponse | None:
        """Kafka's order (``KafkaRaftClient.handleFetchRequest``): cluster id (step 1), topic/partition, the
        request's own fields, then the epoch and leadership (step 2). An error response, or None."""
        # Step 1: cluster id (top-level error, like Kafka).
        if not self._cluster_id_ok(req.cluster_id):
            return FetchResponse(error=Errors.INCONSISTENT_CLUSTER_ID)
        if not req.valid_partition:
            return FetchResponse(error=Errors.INVALID_REQUEST)
        # An empty log fetches from (0, LastFetchedEpoch 0); nothing is negative, and nobody has fetched
        # an epoch past the leader epoch it names.
        if (
            req.max_wait_ms < 0
            or req.fetch_offset < 0
            or req.last_fetched_epoch < 0
            or req.last_fetched_epoch > req.current_leader_epoch
        ):
            return self._fetch_error(Errors.INVALID_REQUEST)
        # Step 2: the request's leader epoch must be ours, and we must lead it.
        error = self._validate_leader_only_request(req.current_leader_epoch)
        return None if error is None else self._fetch_error(error)

    def _fetch_error(self, error: Errors) -> FetchResponse:
        """An error answer: no records, HighWatermark -1, the leader we know (Kafka's buildEmptyFetchResponse
        with no high watermark)."""
        return FetchResponse(-1, partition_error=error, current_leader=self._current_leader())

    def _published_hw(self) -> int:
        """The HighWatermark a leader's answers carry: -1 until an entry of its own epoch is committed
        (Kafka's LeaderState starts each epoch with an unknown high watermark), then the high watermark.
        ``_hw`` itself, the commit point this node knows, never goes back; this is only what it tells."""
        leader = self.role
        if isinstance(leader, Leader) and self._hw <= leader.epoch_start_offset:
            return -1
        return self._hw

    def _diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """KIP-595 "Fetch Request Handling" step 3, as a function.

        The leader assumes LastFetchedEpoch is the epoch of the record before FetchOffset. That holds
        when our log has that epoch and FetchOffset is within it or at its end. Otherwise answer the
        largest epoch not greater than the follower's, with its end offset: everything the follower has
        past that point may diverge.
        """
        if fetch_offset == 0 and last_fetched_epoch <= 0:
            return None  # an empty follower log (LastFetchedEpoch 0) agrees with every log
        epoch, end_offset = self.log.epoch_end_offset(last_fetched_epoch)
        if epoch != last_fetched_epoch or end_offset < fetch_offset:
            return epoch, end_offset
        return None

    def _update_replica_progress(self, replica_id: int, fetch_offset: int) -> None:
        """Record a valid fetch; KIP-836 LastFetchTimestamp / LastCaughtUpTimestamp bookkeeping."""
        leader = self.role
        if replica_id < 0 or not isinstance(leader, Leader):
            return
        progress = self._progress_for_fetch(leader, replica_id, self._fetch_directory_id)
        if progress is None:
            return
        leader_end, now = self.log.end_offset, self._now
        if fetch_offset >= leader_end:
            # Has everything we have right now.
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, now)
        elif 0 < progress.last_fetch_leader_end_offset <= fetch_offset:
            # Had, by now, all we had at its previous fetch.
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.end_offset = fetch_offset
        progress.last_fetch_ms = max(progress.last_fetch_ms, now)
        progress.last_fetch_leader_end_offset = leader_end
        self._maybe_advance_high_watermark()

    def _progress_for_fetch(self, leader: Leader, replica_id: int, directory_id: str | None) -> ReplicaProgress | None:
        """The replica state a fetch by (``replica_id``, ``directory_id``) updates (KIP-853: Kafka keys replicas by
        ReplicaKey, ``LeaderState.getOrCreateReplicaState``). A fetch under a voter's id with another directory id
        is another replica, an observer (``ReplicaState.matchesKey``): its own state in ``Leader.other_keys``, listed
        by DescribeQuorum, never counted; so is a second directory id under an observer's id. A voter of a static
        set (no directory id) matches any directory id. None: no state (never, here; fault nodes may say so)."""
        progress = leader.replicas.get(replica_id)
        if progress is None:
            progress = leader.replicas[replica_id] = ReplicaProgress(replica_id, directory_id=directory_id)
        elif progress.directory_id != directory_id:
            key = ReplicaKey(replica_id, directory_id)
            vs = self._voters()
            if vs.is_voter(progress.key) and vs.is_voter(key):
                progress.directory_id = directory_id  # a voter without a directory id (static set) matches any
            else:
                progress = leader.other_keys.get(key) or leader.other_keys.setdefault(
                    key, ReplicaProgress(replica_id, directory_id=directory_id))
        return progress

    def _note_fetch_from(self, replica_id: int) -> None:
        """A valid fetch from a voter keeps the leader in office (Kafka's
        ``LeaderState.updateCheckQuorumForFollowingVoter``; KIP-595 "Leader Progress Timeout"): once voters
        that fetched and the leader make a majority, the check-quorum timer restarts. Observers never count."""
        leader = self.role
        if not isinstance(leader, Leader) or replica_id == self.config.node_id:
            return
        vs = self._voters()
        if not vs.is_voter(ReplicaKey(replica_id, self._fetch_directory_id)):
            return  # KIP-853: an observer, a removed voter, or another directory id under a voter's id
        fetched = leader.fetched_voters
        if replica_id not in fetched:
            fetched = fetched | {replica_id}
        # The leader counts itself only while it is a voter (``updateCheckQuorumForFollowingVoter``).
        if len(fetched) + vs.is_voter(self._local_key) >= vs.majority():
            fetched, leader.progress_deadline_ms = frozenset(), self._now + self.check_quorum_timeout_ms
        leader.fetched_voters = fetched

    def _maybe_advance_high_watermark(self) -> None:
        """KIP-595 "Fetch Request Handling" step 4.

        The high watermark is the largest offset on a majority of voters (the leader included), but it
        only moves once that offset is past ``epoch_start_offset``, i.e. an entry of the current epoch is
        on a majority: entries of older epochs are committed only indirectly (Raft's Figure 8 rule).
        Observers never count.
        """
        leader = self.role
        if not isinstance(leader, Leader):
            return
        counts = self._counts_toward_hw
        offsets = [p.end_offset for rid, p in leader.replicas.items() if counts(rid)]
        offsets.sort(reverse=True)
        majority = self._majority()
        if len(offsets) < majority:
            return
        candidate = offsets[majority - 1]
        if candidate > leader.epoch_start_offset:
            self._set_high_watermark(candidate)

    def _answer_parked_fetch(self, request: FetchRequest) -> FetchResponse:
        """The answer to a long-poll now (tla/KRaft.tla AnswerParkedFetch): whatever is there, or an error
        if we no longer lead."""
        error = self._validate_leader_only_request(request.current_leader_epoch)
        if error is not None:
            return self._fetch_error(error)
        start = self.log.start_offset
        if self._snapshot_ids:
            # The log may have been cleaned past a parked fetch meanwhile (KIP-630): it fetches the snapshot.
            snapshot = self._fetch_needs_snapshot(request.fetch_offset, request.last_fetched_epoch)
            if snapshot is not None:
                return FetchResponse(self._published_hw(), (), None, self._current_leader(),
                                     log_start_offset=start, snapshot_id=snapshot)
        batches, encoded = self.log.read_encoded(request.fetch_offset, request.max_bytes)
        return self._with_node_endpoints(
            FetchResponse(self._published_hw(), batches, None, self._current_leader(), log_start_offset=start,
                          encoded=encoded)
        )

    def _complete_parked_fetches(self) -> None:
        """New data, a new high watermark or a lost leadership: every parked fetch has an answer now.

        Caught-up followers park identical fetches (same offset, size limit and epoch), so they get one
        answer object: read once here, and encoded once by the shell, which sees the same object.

        KIP-853: not while a leader whose removal just committed is about to resign (``resign_requested``: it
        resigns at its next poll, which it asks for at once). Its parked fetches are answered by that transition, with
        NOT_LEADER_OR_FOLLOWER, as Kafka's ``transitionToResigned`` completes its fetch purgatory; answered here
        instead, they would carry a leader's data but follow the ``Resign`` in the trace (a shell writes a
        step's events before its replies), which no behaviour of tla/KRaft.tla produces."""
        leader = self.role
        if isinstance(leader, Leader) and leader.resign_requested:
            return
        parked, self._parked = self._parked, []
        answers: dict[tuple[int, int, int], FetchResponse] = {}
        replies = self._out.replies
        for p in parked:
            req = p.request
            key = (req.fetch_offset, req.max_bytes, req.current_leader_epoch)
            resp = answers.get(key)
            if resp is None:
                resp = answers[key] = self._answer_parked_fetch(req)
            replies.append(Reply(p.reply_to, resp))

    # ============================================================================ Fetch: follower side

    def send_fetch_request(self, dest_id: int, max_wait_ms: int | None = None) -> None:
        """KIP-595 "Fetch": ask from our log end, naming the epoch of our last record."""
        req = FetchRequest(
            cluster_id=self._cluster_id,
            replica_id=self.config.node_id,
            current_leader_epoch=self.epoch,
            fetch_offset=self.log.end_offset,
            last_fetched_epoch=self.last_epoch,
            max_wait_ms=self.config.fetch_max_wait_ms if max_wait_ms is None else max_wait_ms,
            max_bytes=self.config.fetch_max_bytes,
            replica_directory_id=self.config.directory_id,
        )
        self._send(dest_id, req)
        self._emit("SendFetchRequest", note=f"to {dest_id} at {req.fetch_offset}/{req.last_fetched_epoch}")

    def handle_fetch_response(self, sender_id: int, resp: FetchResponse) -> None:
        """KIP-595 "Fetch Response Handling" 1-2."""
        if resp.error != Errors.NONE:
            self._request_failed(sender_id)
            self._emit("HandleFetchResponse", note=f"top-level error {resp.error.name}")
            return
        current = resp.current_leader
        # Step 1: FENCED_LEADER_EPOCH (or a newer epoch) with a known leader: follow it.
        error = resp.partition_error
        if self._handle_common_response(sender_id, error, current.leader_id, current.leader_epoch):
            self._emit("HandleFetchResponse", note=f"{resp.partition_error.name}: leader {current}")
            return
        role = self.role
        if not (isinstance(role, Follower) and role.leader_id == sender_id):
            self._emit("HandleFetchResponse", note=f"ignored: {sender_id} is not our leader")
            return
        if resp.partition_error != Errors.NONE:
            self._request_failed(sender_id)
            self._emit("HandleFetchResponse", note=f"error {resp.partition_error.name}")
            return
        role.fetch_deadline_ms = self._now + self.config.fetch_timeout_ms
        role.deadline_cause = "FetchTimeout"
        role.fetched = True  # the leader answers: refuse pre-votes from now on (KIP-996)
        # Step 2: DivergingEpoch: truncate, then refetch (``_poll``) from the new end and last epoch.
        if resp.diverging_epoch is not None:
            epoch, end_offset = resp.diverging_epoch
            self._truncate(self._truncation_point(epoch, end_offset))
            self._emit("HandleFetchResponse", note=f"diverging epoch {resp.diverging_epoch}")
            return
        if resp.snapshot_id is not None:
            self._start_snapshot_download(role, resp.snapshot_id)
            return
        if resp.batches and resp.batches[0].base_offset != self.log.end_offset:
            self._emit("HandleFetchResponse", note="ignored: records do not continue our log (stale)")
            return
        if resp.batches:
            self._append(resp.batches, resp.encoded)
        if resp.high_watermark >= 0:  # -1: the leader does not know it yet (KafkaRaftClient.handleFetchResponse)
            self._set_high_watermark(min(resp.high_watermark, self.log.end_offset))
        self._emit("HandleFetchResponse", note=f"{len(resp.batches)} batches, HW {resp.high_watermark}")

    def _truncation_point(self, diverging_epoch: int, diverging_end_offset: int) -> int:
        """Where to cut the log for a DivergingEpoch (KIP-595 "Fetch Response Handling" step 2).

        If our log has the leader's epoch, we agree up to the smaller end of it; otherwise our records
        diverge from the end of our largest epoch below it. Several rounds may be needed when the
        follower's log holds several epochs the leader never saw.
        """
        local_epoch, local_end = self.log.epoch_end_offset(diverging_epoch)
        if local_epoch == diverging_epoch:
            return min(local_end, diverging_end_offset)
        return local_end

    def _truncate(self, offset: int) -> None:
        # A point inside a batch (only a faulty leader names one) cuts the whole batch, as Kafka's log
        # does (LogSegment.truncateTo); the guard then judges where the log really ends.
        offset = self.log.batch_start_at_or_below(offset)
        self._guard_truncation(offset)
        if offset >= self.log.end_offset:
            return
        self.log.truncate_to(offset)
        self._out.log_ops.append(TruncateTo(offset))
        last = self._vh.last_offset()
        self._vh.truncate_new(offset)  # KIP-853 ``truncateNewEntries``: the previous voter set is in force again
        if last is not None and last >= offset:
            self._voter_set_changed()
        self._pending_log["truncatedTo"] = offset
        if self._pending_cluster_id is not None and self._pending_cluster_id[0] >= offset:
            self._pending_cluster_id = None

    def _guard_truncation(self, offset: int) -> None:
        """Committed entries are never removed (Raft's Leader Completeness): say so loudly if asked to."""
        if offset < self._hw:
            raise SafetyViolation(
                f"CommittedNeverTruncated: node {self.config.node_id} was asked to truncate to offset "
                f"{offset}, below its high watermark {self._hw}"
            )

    # ============================================================================ client writes

    def client_append(self, values: tuple[bytes, ...]) -> ClientAppendResult:
        """Append client records in the current epoch (leader only), batched for ``append_linger_ms``.

        The offsets are known at once (the records go after the log and whatever is held back); the
        records reach the log, and the trace's ``ClientAppend``, when the batch is drained: at once
        with no linger, when the linger time since the batch's first write has passed (``_poll``), or
        when the next write would not fit in the batch.
        """
        if not values:
            raise ValueError("client_append needs at least one record value")
        size = write_size_bound(values)
        if size + HEADER_SIZE > self.config.append_max_batch_bytes:
            raise ValueError(
                f"client_append: {len(values)} records of up to {size} bytes do not fit in one batch of "
                f"append_max_batch_bytes={self.config.append_max_batch_bytes}"
            )
        if not isinstance(self.role, Leader) or self._shutting_down:
            return ClientAppendResult(False, leader_id=self.leader_id)
        acc = self._accumulator
        if acc is not None and acc.size + size > self.config.append_max_batch_bytes:
            self._drain_accumulator()  # full: that batch goes now, this write starts the next one
            acc = None
        if acc is None:
            start = self.log.end_offset
            acc = self._accumulator = _Accumulator(
                self.epoch, start, self._now, self._now + self.config.append_linger_ms, []
            )
        base = acc.base_offset + len(acc.values)
        acc.values.extend(values)
        acc.size += size
        result = ClientAppendResult(True, base, base + len(values) - 1, self.epoch)
        if self._now >= acc.drain_at_ms:
            self._drain_accumulator()
        return result

    @property
    def next_append_offset(self) -> int:
        """The offset the next client record will get: after the log and any held-back writes."""
        acc = self._accumulator
        return self.log.end_offset if acc is None else acc.base_offset + len(acc.values)

    def _drain_accumulator(self) -> None:
        acc, self._accumulator = self._accumulator, None
        if acc is None or not acc.values:
            return
        assert isinstance(self.role, Leader) and acc.epoch == self.epoch and acc.base_offset == self.log.end_offset
        batch = data_batch(acc.base_offset, acc.epoch, acc.values, timestamp=acc.started_ms)
        self._append_as_leader([batch])
        self._emit("ClientAppend")

    # ============================================================================ resigning

    def leader_progress_timeout(self) -> None:
        """KIP-595 "Leader Progress Timeout": no fetches from a majority within 1.5 x the fetch timeout.

        The KIP says the leader begins a new election once the fetch timeout passes. Kafka (and this core)
        waits ``check_quorum_timeout_ms`` (1.5 x the fetch timeout, ``LeaderState.CHECK_QUORUM_TIMEOUT_FACTOR``)
        and then resigns: it becomes Resigned, tells the voters with EndQuorumEpoch, and becomes a candidate
        only after its election timeout. A caught-up follower that still sees a quorum can then win without
        the old leader's higher epoch disrupting it.
        """
        self._become_resigned("LeaderProgressTimeout")
        self._emit("LeaderProgressTimeout")

    def resign(self) -> None:
        """Graceful shutdown (KIP-595 "EndQuorumEpoch"): step down and name preferred successors."""
        self._become_resigned("Resign")
        self._emit("Resign")

    def _become_resigned(self, cause: str) -> None:
        leader = self.role
        assert isinstance(leader, Leader), f"resign from {leader.name}"
        me = self.config.node_id
        # The most caught-up voters first: they are the ones that can win the next election.
        others = [leader.replicas.get(v, ReplicaProgress(v)) for v in self._voter_ids() if v != me]
        successors = tuple(p.replica_id for p in sorted(others, key=lambda p: (-p.end_offset, p.replica_id)))
        self._transition(
            Resigned(
                epoch=leader.epoch,
                preferred_successors=successors,
                awaiting_end_epoch=frozenset(successors),
                election_deadline_ms=self._random_election_deadline(),
                cause=cause,
            )
        )

    def handle_end_quorum_epoch_request(self, req: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
        """KIP-595 "EndQuorumEpoch Request Handling", with Kafka's order and backoffs.

        Cluster id, topic/partition, epoch and leader id first (``KafkaRaftClient.handleEndQuorumEpochRequest``);
        then follow. A follower of the resigning leader waits ``_end_epoch_backoff_ms`` before its election:
        0 for the first successor (it starts at once), a strict exponential backoff for the others, and
        ``election.backoff.max.ms`` for a voter not named.
        """
        if not self._cluster_id_ok(req.cluster_id):
            self._emit("HandleEndQuorumEpochRequest", note=f"refused: cluster id {req.cluster_id!r}")
            return EndQuorumEpochResponse(self.leader_id, self.epoch, error=Errors.INCONSISTENT_CLUSTER_ID)
        if not req.valid_partition:
            self._emit("HandleEndQuorumEpochRequest", note="refused: not __cluster_metadata-0")
            return EndQuorumEpochResponse(self.leader_id, self.epoch, error=Errors.INVALID_REQUEST)
        error = self._validate_voter_only_request(req.leader_id, req.leader_epoch)
        if error is not None:
            self._emit("HandleEndQuorumEpochRequest", note=f"refused: {error.name}")
            return EndQuorumEpochResponse(self.leader_id, self.epoch, partition_error=error)
        if req.leader_endpoints:
            self._learn_leader_endpoints(req.leader_id, req.leader_endpoints)
        self._maybe_transition(req.leader_id, req.leader_epoch)
        resp = EndQuorumEpochResponse(self.leader_id, self.epoch)  # answered in the resigned epoch
        role = self.role
        start_now = False
        if isinstance(role, Follower) and role.leader_id == req.leader_id:
            backoff = self._end_epoch_backoff_ms(req.preferred_successors)
            start_now = backoff == 0
            role.fetch_deadline_ms, role.deadline_cause = self._now + backoff, "EndQuorumEpoch"
        self._emit("HandleEndQuorumEpochRequest")
        if start_now and self._may_elect():
            self._elect("EndQuorumEpoch")
        return resp

    def _end_epoch_backoff_ms(self, successors: tuple[int, ...]) -> int:
        """Kafka's ``endEpochElectionBackoff``: our position p in the successors (p = their count when not
        named; an empty list makes everyone first), then ``_successor_backoff_ms``."""
        me = self.config.node_id
        position = successors.index(me) if me in successors else len(successors)
        return self._successor_backoff_ms(position, len(successors))

    def handle_end_quorum_epoch_response(self, sender_id: int, resp: EndQuorumEpochResponse) -> None:
        """KIP-595 "EndQuorumEpoch Response Handling": stop resending to a voter that acknowledged."""
        if resp.error != Errors.NONE:
            self._request_failed(sender_id)
            self._emit("HandleEndQuorumEpochResponse", note=f"top-level error {resp.error.name}")
            return
        if self._handle_common_response(sender_id, resp.partition_error, resp.leader_id, resp.leader_epoch):
            self._emit("HandleEndQuorumEpochResponse", note="newer epoch or stale response")
            return
        role = self.role
        if isinstance(role, Resigned) and resp.partition_error == Errors.NONE:
            role.awaiting_end_epoch = role.awaiting_end_epoch - {sender_id}
        elif resp.partition_error != Errors.NONE:
            self._request_failed(sender_id)
        self._emit("HandleEndQuorumEpochResponse", note=f"{resp.partition_error.name} from {sender_id}")

    # ============================================================================ DescribeQuorum

    def handle_describe_quorum_request(self, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
        """KIP-595 "DescribeQuorum Request Handling" with KIP-836's timestamps (v1+)."""
        if req.unknown is not None:
            # Not __cluster_metadata-0: each partition named gets UNKNOWN_TOPIC_OR_PARTITION (Kafka's
            # DescribeQuorumRequest.getPartitionLevelErrorResponse).
            self._emit("HandleDescribeQuorumRequest", note="unknown topic or partition")
            return DescribeQuorumResponse(
                0, 0, 0, partition_error=Errors.UNKNOWN_TOPIC_OR_PARTITION, unknown=req.unknown
            )
        leader = self.role
        if not isinstance(leader, Leader):
            # Step 1: not the leader. The KIP adds the leader when known; Kafka does not
            # (DescribeQuorumResponse.singletonErrorResponse: LeaderId, LeaderEpoch, HighWatermark stay 0).
            self._emit("HandleDescribeQuorumRequest", note="not leader")
            return DescribeQuorumResponse(0, 0, 0, partition_error=Errors.NOT_LEADER_OR_FOLLOWER)
        me = self.config.node_id
        vs = self._voters()
        self._expire_observers(leader, vs)
        voters: list[ReplicaState] = []
        observers: list[ReplicaState] = []
        # KIP-853 (``LeaderState.voterStates/observerStates``): the voters of the set in force, committed or not;
        # every other replica that fetched is an observer (a removed voter, the leader itself after its removal,
        # another directory id under a voter's id).
        for rid in sorted(set(leader.replicas) | vs.ids()):
            node = vs.node(rid)
            p = leader.replicas.get(rid)
            if p is None:
                p = ReplicaProgress(rid, directory_id=node.key.directory_id if node is not None else None)
            is_voter = node is not None and node.is_voter(p.key)
            if rid == me:
                # KIP-836: the leader is always caught up with itself; its table shows "now" for both.
                row = ReplicaState(rid, self.log.end_offset, self._now, self._now, self.config.directory_id)
            else:
                row = ReplicaState(rid, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms, p.directory_id)
            (voters if is_voter else observers).append(row)
        if leader.other_keys:
            observers.extend(ReplicaState(p.replica_id, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms,
                                          p.directory_id) for p in leader.other_keys.values())
            observers.sort(key=lambda r: (r.replica_id, r.replica_directory_id or ""))
        nodes = tuple(NodeListeners(n.id, n.endpoints) for n in vs.nodes if n.endpoints)
        self._emit("HandleDescribeQuorumRequest")
        return DescribeQuorumResponse(me, self.epoch, self._published_hw(), tuple(voters), tuple(observers),
                                      nodes=nodes)

    def _expire_observers(self, leader: Leader, vs: VoterSet) -> None:
        """Kafka's ``LeaderState.clearInactiveObservers`` (run when DescribeQuorum lists them): an observer that has
        not fetched for ``OBSERVER_SESSION_TIMEOUT_MS`` (5 minutes) is forgotten, the leader's own state (after its
        removal) excepted. One that never fetched from this leader (a voter removed before its first fetch:
        LastFetchTimestamp -1) is forgotten at once, as Kafka's wall-clock test ``now - (-1) >= 5 min`` is."""
        now, me = self._now, self.config.node_id

        def expired(p: ReplicaProgress) -> bool:
            return p.last_fetch_ms < 0 or now - p.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS

        for rid in [rid for rid, p in leader.replicas.items()
                    if rid != me and not vs.is_voter(p.key) and expired(p)]:
            del leader.replicas[rid]
        for key in [key for key, p in leader.other_keys.items() if expired(p)]:
            del leader.other_keys[key]

    # ============================================================================ Snapshots (KIP-630)

    @property
    def latest_snapshot_id(self) -> SnapshotId | None:
        """The newest snapshot the core knows (created, installed or restored), None without one."""
        ids = self._snapshot_ids
        return ids[-1] if ids else None

    @property
    def log_start_offset(self) -> int:
        return self.log.start_offset

    @property
    def snapshot_ids(self) -> tuple[SnapshotId, ...]:
        """Every snapshot the core knows, oldest first (those below the log start are forgotten)."""
        return tuple(self._snapshot_ids)

    def snapshot_id_at(self, end_offset: int) -> SnapshotId:
        """The id a snapshot of everything below ``end_offset`` gets: its epoch is that of the record at
        ``end_offset - 1`` (0 for an empty prefix). For the shell, before it writes the file: ``end_offset`` must
        be committed (at most the high watermark), at or above the log start, and a batch boundary (this
        project's nodes snapshot whole batches); ValueError otherwise."""
        log = self.log
        if not log.start_offset <= end_offset <= self._hw:
            raise ValueError(f"snapshot end offset {end_offset} outside [log start {log.start_offset}, "
                             f"high watermark {self._hw}]")
        if end_offset < log.end_offset and log.batch_start_at_or_below(end_offset) != end_offset:
            raise ValueError(f"snapshot end offset {end_offset} is inside a batch")
        return SnapshotId(end_offset, log.epoch_of(end_offset - 1) if end_offset > 0 else 0)

    def create_snapshot(self, snapshot_id: SnapshotId) -> None:
        """KIP-630 ``CreateSnapshot``: the shell wrote a snapshot of its state machine at ``snapshot_id``; record
        it (it becomes the latest, what fetches below the log start are sent to). The rules are Kafka's
        ``KafkaMetadataLog.createNewSnapshot`` (``_snapshot_allowed``): a snapshot of uncommitted records is a
        ``SafetyViolation``. A snapshot the core knows already changes nothing (``createNewSnapshotUnchecked``)."""
        self._snapshot_allowed(snapshot_id)
        if snapshot_id in self._snapshot_ids:
            return
        bisect.insort(self._snapshot_ids, snapshot_id)
        self._emit("CreateSnapshot", note=f"snapshot {snapshot_id.end_offset}-{snapshot_id.epoch}",
                   snapshot_id=snapshot_id)

    def clean_log(self, offset: int) -> None:
        """KIP-630 ``CleanLog``: the shell's retention rules let the log start move up to ``offset``. As Kafka's
        ``KafkaMetadataLog.deleteBeforeSnapshot``, it moves only to the end offset of a snapshot the core knows,
        above the current start and at most the latest snapshot's end (``_clean_limit``); the records below it
        go (``AdvanceLogStart``) and the older snapshots are forgotten (``DeleteSnapshot``). Anything else
        changes nothing and emits nothing."""
        log = self.log
        target = None
        for sid in self._snapshot_ids:
            if sid.end_offset == offset:
                target = sid
        if target is None or offset <= log.start_offset or offset > self._clean_limit() or offset > log.end_offset:
            return
        log.advance_start(target)
        self._out.log_ops.append(AdvanceLogStart(offset))
        self._vh.truncate_old(offset - 1)  # KIP-853 ``truncateOldEntries``: keep the set in force at the start
        self._forget_snapshots_before(target)
        self._emit("CleanLog", note=f"log start {offset}")

    def _forget_snapshots_before(self, snapshot_id: SnapshotId) -> None:
        """Kafka's ``forgetSnapshotsBefore``: snapshots older than ``snapshot_id`` are no longer needed."""
        keep = [s for s in self._snapshot_ids if s >= snapshot_id]
        for old in self._snapshot_ids[: len(self._snapshot_ids) - len(keep)]:
            self._out.log_ops.append(DeleteSnapshot(old))
        self._snapshot_ids = keep

    def _snapshot_loaded(self, snapshot_id: SnapshotId, cluster_id: str | None) -> None:
        """The shell loaded an installed snapshot and found ``cluster_id`` in its content (KIP-595 bootstrap
        record): committed like everything in a snapshot, so a node without an id adopts it."""
        if cluster_id is None or cluster_id == self._cluster_id:
            return
        if self._cluster_id is not None:
            raise SafetyViolation(
                f"ClusterIdIsolation: node {self.config.node_id} of cluster {self._cluster_id} installed snapshot "
                f"{snapshot_id} of cluster {cluster_id}"
            )
        self._cluster_id = self._out.cluster_id_adopted = cluster_id
        self._pending_cluster_id = None

    def _log_behind_snapshot(self, snapshot_id: SnapshotId) -> bool:
        """Kafka's ``KafkaMetadataLog.truncateToLatestSnapshot`` condition: the snapshot is past the log (a newer
        epoch than the log's last, or the same epoch further on), so the log is replaced by it."""
        last = self.log.last_fetched_epoch
        last = last if last > 0 else 0
        return snapshot_id.epoch > last or (snapshot_id.epoch == last and snapshot_id.end_offset > self.log.end_offset)

    # ------------------------------------------------------------------ leader side

    def handle_fetch_snapshot_request(self, req: FetchSnapshotRequest) -> FetchSnapshotResponse:
        """KIP-630 "FetchSnapshot", in Kafka's order (``KafkaRaftClient.handleFetchSnapshotRequest``): cluster id
        (top-level INCONSISTENT_CLUSTER_ID), the partition (UNKNOWN_TOPIC_OR_PARTITION), the epoch and leadership
        (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER), the snapshot (SNAPSHOT_NOT_FOUND;
        the empty snapshot (0, 0) is never served), the position (POSITION_OUT_OF_RANGE unless 0 <= Position <
        Size); then the bytes from Position, at most MaxBytes. A served chunk counts for check quorum
        (``LeaderState.updateCheckQuorumForFollowingVoter``). Nothing else changes."""
        if not self._cluster_id_ok(req.cluster_id):
            self._emit("HandleFetchSnapshotRequest", note=f"refused: cluster id {req.cluster_id!r}")
            return FetchSnapshotResponse(error=Errors.INCONSISTENT_CLUSTER_ID)
        if not req.valid_partition:
            self._emit("HandleFetchSnapshotRequest", note="refused: not __cluster_metadata-0")
            return FetchSnapshotResponse(partition_error=Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                         partition_name=req.partition_name)
        error = self._validate_leader_only_request(req.current_leader_epoch)
        if error is None:
            sid = req.snapshot_id
            reader = None
            if self.snapshots is not None and sid.end_offset > 0:
                reader = self.snapshots.read_snapshot(sid)
            if reader is None:
                error = Errors.SNAPSHOT_NOT_FOUND
            else:
                size = reader.size_in_bytes()
                if not 0 <= req.position < size:
                    error = Errors.POSITION_OUT_OF_RANGE
        if error is not None:
            self._emit("HandleFetchSnapshotRequest", note=f"refused {req.replica_id}: {error.name}")
            return FetchSnapshotResponse(current_leader=self._current_leader(), partition_error=error)
        assert reader is not None
        # (A negative MaxBytes reads nothing: Kafka's slice would throw, and the store need not handle it.)
        data = reader.slice(req.position, max(0, self._snapshot_chunk_bytes(min(req.max_bytes, size))))
        self._fetch_directory_id = req.replica_directory_id
        self._note_fetch_from(req.replica_id)
        self._emit("HandleFetchSnapshotRequest",
                   note=f"{req.replica_id}: {sid.end_offset}-{sid.epoch} [{req.position}, +{len(data)}) of {size}")
        return FetchSnapshotResponse(sid, self._current_leader(), size, req.position, data)

    def _snapshot_chunk_bytes(self, max_bytes: int) -> int:
        """How many bytes one FetchSnapshot answer carries at most: MaxBytes, at most the snapshot's size (Kafka:
        ``Math.min(data.maxBytes(), snapshotSize)``)."""
        return max_bytes

    # ------------------------------------------------------------------ follower side

    def _start_snapshot_download(self, role: Follower, snapshot_id: SnapshotId) -> None:
        """A Fetch answer with SnapshotId (Kafka's ``handleFetchResponse``, ``FollowerState.setFetchingSnapshot``):
        download that snapshot, from byte 0. Not checked against the local log (it lies past it); an id with a
        negative field is refused, and one already stored is not downloaded again."""
        if snapshot_id.end_offset < 0 or snapshot_id.epoch < 0:
            self._emit("HandleFetchResponse", note=f"ignored: invalid snapshot id {snapshot_id}")
            return
        if snapshot_id in self._snapshot_ids:
            self._emit("HandleFetchResponse", note=f"snapshot {snapshot_id} already stored")
            return
        if role.fetching_snapshot is not None and role.fetching_snapshot != snapshot_id:
            self._out.log_ops.append(AbortSnapshotDownload(role.fetching_snapshot))
        role.fetching_snapshot, role.snapshot_position, role.snapshot_head = snapshot_id, 0, b""
        self._emit("HandleFetchResponse", note=f"fetch snapshot {snapshot_id.end_offset}-{snapshot_id.epoch}")

    def send_fetch_snapshot_request(self, dest_id: int) -> None:
        """KIP-630: ask the leader for the next chunk of the snapshot being downloaded, from the bytes we have."""
        role = self.role
        assert isinstance(role, Follower) and role.fetching_snapshot is not None
        req = FetchSnapshotRequest(self._cluster_id, self.config.node_id, self.epoch, role.fetching_snapshot,
                                   role.snapshot_position, self.config.fetch_snapshot_max_bytes,
                                   replica_directory_id=self.config.directory_id)
        self._send(dest_id, req)
        sid = role.fetching_snapshot
        self._emit("SendFetchSnapshotRequest",
                   note=f"to {dest_id}: {sid.end_offset}-{sid.epoch} at {role.snapshot_position}")

    def handle_fetch_snapshot_response(self, sender_id: int, resp: FetchSnapshotResponse) -> None:
        """KIP-630, Kafka's ``handleFetchSnapshotResponse``: epochs and leaders as for every response; an error or
        an id of (-1, -1) (SNAPSHOT_NOT_FOUND, POSITION_OUT_OF_RANGE, ...) drops the download and the follower
        fetches again; a chunk is written (``WriteSnapshotChunk``), and the one that completes the snapshot
        installs it (``_install_snapshot``). Kafka throws on an answer for another snapshot or position; the core
        ignores it (it cannot come from a correct leader)."""
        if resp.error != Errors.NONE:
            self._request_failed(sender_id)
            self._emit("HandleFetchSnapshotResponse", note=f"top-level error {resp.error.name}")
            return
        current = resp.current_leader
        if self._handle_common_response(sender_id, resp.partition_error, current.leader_id, current.leader_epoch):
            self._emit("HandleFetchSnapshotResponse", note=f"{resp.partition_error.name}: leader {current}")
            return
        role = self.role
        if not (isinstance(role, Follower) and role.leader_id == sender_id and role.fetching_snapshot is not None):
            self._emit("HandleFetchSnapshotResponse", note=f"ignored: no download from {sender_id}")
            return
        role.fetch_deadline_ms = self._now + self.config.fetch_timeout_ms  # Kafka: state.resetFetchTimeout
        role.deadline_cause = "FetchTimeout"
        role.fetched = True
        sid = resp.snapshot_id
        if resp.partition_error != Errors.NONE or sid is None or sid.end_offset < 0 or sid.epoch < 0:
            # The leader no longer has it (or refused the position): start over with a Fetch.
            self._out.log_ops.append(AbortSnapshotDownload(role.fetching_snapshot))
            role.fetching_snapshot, role.snapshot_position = None, 0
            self._emit("HandleFetchSnapshotResponse", note=f"download dropped: {resp.partition_error.name}")
            return
        if sid != role.fetching_snapshot or resp.position != role.snapshot_position:
            self._request_failed(sender_id)
            self._emit("HandleFetchSnapshotResponse",
                       note=f"ignored: {sid} at {resp.position}, expected {role.fetching_snapshot} at "
                            f"{role.snapshot_position}")
            return
        data = resp.records
        self._out.log_ops.append(WriteSnapshotChunk(sid, resp.position, data))
        role.snapshot_position += len(data)
        role.snapshot_head = first_batch_bytes(role.snapshot_head, data)
        if role.snapshot_position != resp.size:
            self._emit("HandleFetchSnapshotResponse", note=f"{sid.end_offset}-{sid.epoch}: "
                                                           f"{role.snapshot_position} of {resp.size} bytes")
            return
        head = role.snapshot_head
        role.fetching_snapshot, role.snapshot_position, role.snapshot_head = None, 0, b""
        self._install_snapshot(sid)
        # KIP-853: the snapshot's voter set is in force at once, as Kafka's ``log.truncateToLatestSnapshot()`` is
        # followed by ``partitionState.updateState()`` in the same step; the shell's SnapshotLoaded loads it again.
        self._load_snapshot_header(sid, head)
        self._emit("HandleFetchSnapshotResponse", note=f"installed {sid.end_offset}-{sid.epoch}", snapshot_id=sid)

    def _install_snapshot(self, snapshot_id: SnapshotId) -> None:
        """The download is complete (Kafka: ``snapshot.freeze()``, ``log.truncateToLatestSnapshot()``,
        ``updateFollowerHighWatermark``): the log is emptied and starts at the snapshot's end offset, the snapshot
        is the latest, the older ones are forgotten, and the high watermark moves up to the snapshot's end (it
        holds committed records only). Kafka replaces the log only when the snapshot is past it
        (``_log_behind_snapshot``) and throws otherwise; the core replaces it whenever that cuts no committed
        record (``_guard_truncation``), which a correct leader's snapshot never does."""
        end = snapshot_id.end_offset
        self._guard_truncation(end)
        self.log.reset_to_snapshot(snapshot_id)
        self._out.log_ops.append(InstallSnapshot(snapshot_id))
        # KIP-853: the replaced log's records from ``end`` on are gone; the snapshot's own voter set is loaded from its
        # header by the caller (``_load_snapshot_header``) and again by the shell's SnapshotLoaded.
        self._vh.truncate_new(end)
        self._voter_set_changed()
        if snapshot_id not in self._snapshot_ids:
            bisect.insort(self._snapshot_ids, snapshot_id)
        self._forget_snapshots_before(snapshot_id)
        # The whole log is replaced, so a pending cluster id record of it is gone even below ``end``: it was never
        # committed and the leader's log may hold something else there (the simulator found a node adopting its
        # own stale id this way). The snapshot's content says which id is committed (SnapshotLoaded).
        self._pending_cluster_id = None
        self._set_high_watermark(end)

    # ------------------------------------------------------------------ fault-injection points

    def _snapshot_allowed(self, snapshot_id: SnapshotId) -> None:
        """Kafka's ``KafkaMetadataLog.createNewSnapshot`` rules, each a ``SafetyViolation``: the end offset at most
        the high watermark (a snapshot holds committed records only), at or above the log start, the epoch that
        of the record at ``end_offset - 1`` (``validateOffsetAndEpoch``), at a batch boundary. (Kafka declines a
        snapshot below the log start without an error; here the shell decided wrongly, so it is one.)"""
        end, epoch = snapshot_id.end_offset, snapshot_id.epoch
        me = self.config.node_id
        if end > self._hw:
            raise SafetyViolation(f"CreateSnapshot: node {me} was asked to snapshot up to {end}, above its high "
                                  f"watermark {self._hw} (uncommitted records)")
        log = self.log
        if end < log.start_offset:
            raise SafetyViolation(f"CreateSnapshot: node {me}: snapshot end {end} below the log start "
                                  f"{log.start_offset}")
        expected = log.epoch_of(end - 1) if end > 0 else 0
        if epoch != expected:
            raise SafetyViolation(f"CreateSnapshot: node {me}: snapshot {snapshot_id} does not match the log "
                                  f"(the record at {end - 1} has epoch {expected})")
        if end < log.end_offset and log.batch_start_at_or_below(end) != end:
            raise SafetyViolation(f"CreateSnapshot: node {me}: snapshot end {end} is inside a batch")

    def _fetch_needs_snapshot(self, fetch_offset: int, last_fetched_epoch: int) -> SnapshotId | None:
        """The leader's SnapshotId rule (Kafka's ``tryCompleteFetchRequest`` and
        ``ReplicatedLog.validateOffsetAndEpoch``): the latest snapshot when the fetcher's log is empty (FetchOffset
        0) and a non-empty snapshot exists, or, with a snapshot, when FetchOffset is below the log start, at the
        log start with another LastFetchedEpoch than the earliest snapshot's, or LastFetchedEpoch is older than
        the earliest snapshot's epoch. None: the log answers (records or DivergingEpoch)."""
        ids = self._snapshot_ids
        if not ids:
            return None
        latest, earliest = ids[-1], ids[0]
        if fetch_offset == 0 and latest.end_offset > 0:
            return latest
        start = self.log.start_offset
        if start == 0 and fetch_offset == 0:
            return None
        if (
            fetch_offset < start
            or (fetch_offset == start and last_fetched_epoch != earliest.epoch)
            or last_fetched_epoch < earliest.epoch
        ):
            return latest
        return None

    def _clean_limit(self) -> int:
        """How far ``clean_log`` may move the log start: the latest snapshot's end offset (records below it are
        in a snapshot), never past the high watermark."""
        latest = self.latest_snapshot_id
        return -1 if latest is None else min(latest.end_offset, self._hw)

    # ============================================================================ shared rules

    def _validate_voter_only_request(self, remote_id: int, remote_epoch: int) -> Errors | None:
        """Vote, BeginQuorumEpoch, EndQuorumEpoch (Kafka's ``validateVoterOnlyRequest``): a fenced epoch, a
        negative sender id, and (the kit's choice) an epoch that cannot be followed by another.

        No voter-set check: KIP-595 answers INCONSISTENT_VOTER_SET when either end is not a voter, Kafka
        3.9+ does not (the voter set may change, KIP-853), and the node follows Kafka."""
        if remote_epoch < self.epoch:
            return Errors.FENCED_LEADER_EPOCH
        if remote_id < 0 or remote_epoch >= EPOCH_LIMIT:
            return Errors.INVALID_REQUEST
        return None

    def _validate_leader_only_request(self, request_epoch: int) -> Errors | None:
        """KIP-595 "Fetch Request Handling" step 2."""
        if request_epoch < self.epoch:
            return Errors.FENCED_LEADER_EPOCH  # the fetcher will learn the new epoch from CurrentLeader
        if request_epoch > self.epoch:
            return Errors.UNKNOWN_LEADER_EPOCH  # we will learn it ourselves soon
        if not isinstance(self.role, Leader):
            return Errors.NOT_LEADER_OR_FOLLOWER
        return None

    def _handle_common_response(self, sender_id: int, error: Errors, leader_id: int, epoch: int) -> bool:
        """What every response says about epochs. True when the response needs no further handling."""
        if epoch < self.epoch or error == Errors.UNKNOWN_LEADER_EPOCH:
            if error != Errors.NONE:
                self._request_failed(sender_id)  # an error answer: do not ask again at once
            return True  # stale: we have moved on (or the responder has not caught up yet)
        if epoch > self.epoch or error in (Errors.FENCED_LEADER_EPOCH, Errors.NOT_LEADER_OR_FOLLOWER):
            before = self.role
            self._maybe_transition(leader_id, epoch)
            if self.role is before:
                self._request_failed(sender_id)  # nothing learnt: do not ask the same node again at once
            return True
        if error == Errors.NONE and epoch == self.epoch and leader_id >= 0 and self.leader_id < 0:
            # Kafka's third case: an answer naming the leader of our epoch, which we did not know (a
            # Candidate's Vote refused by a Follower of the leader elected meanwhile). Follow it; the answer
            # still goes to its handler (a Fetch response's records are appended at once).
            self._maybe_transition(leader_id, epoch)
        return False

    def _maybe_transition(self, leader_id: int, epoch: int) -> None:
        """Follow a leader (or just an epoch) learnt from a request or response."""
        if epoch == self.epoch and leader_id >= 0 and self.leader_id >= 0 and leader_id != self.leader_id:
            raise SafetyViolation(
                f"ElectionSafety: node {self.config.node_id} knows leader {self.leader_id} for epoch {epoch} "
                f"but was told the leader is {leader_id}"
            )
        if epoch > self.epoch:
            if leader_id >= 0:
                self._become_follower(epoch, leader_id)
            else:
                self._become_unattached(epoch)
        elif epoch == self.epoch and leader_id >= 0 and self.leader_id < 0:
            self._become_follower(epoch, leader_id)

    # ============================================================================ transitions

    def _transition(self, role: Role) -> None:
        """Every role change goes through here (see the table at the top of this module)."""
        old = self.role
        was_leader = isinstance(old, Leader)
        if isinstance(old, Follower) and old.fetching_snapshot is not None:
            # Kafka's FollowerState.close: the unfrozen download of the old role is deleted.
            self._out.log_ops.append(AbortSnapshotDownload(old.fetching_snapshot))
        self.role = role
        if was_leader and not isinstance(role, Leader):
            self._accumulator = None  # like Kafka's: held-back writes of a lost epoch are never appended
            assert isinstance(old, Leader)
            if old.voter_change is not None:  # KIP-853 (``LeaderState.close``): the pending change fails
                self._reply_voter_change(old.voter_change, Errors.NOT_LEADER_OR_FOLLOWER, "Leadership lost")
                old.voter_change = None
        self._ready_at.clear()  # like Kafka: requests of the old role no longer matter
        if was_leader and not isinstance(role, Leader):
            self._complete_parked_fetches()  # they now get NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH

    def _become_unattached(self, epoch: int) -> None:
        role = self.role
        deadline: int | None
        if not self._is_voter():
            deadline = None
        elif isinstance(role, (Unattached, Voted, Candidate, Prospective)) and role.election_deadline_ms is not None:
            # Kafka's QuorumState.transitionToUnattached: a voter that has no leader keeps its running
            # election timer. Restarting it on every higher epoch let a voter whose stale log can never
            # win (its Vote requests refused, retried after each backoff) hold the others off forever.
            deadline = role.election_deadline_ms
        else:
            deadline = self._random_election_deadline()
        self._transition(Unattached(epoch, deadline))
        self._persist()

    def _observer_fetch_timeout(self, role: Follower) -> None:
        """An observer's fetch timer ran out: it forgets the leader and asks the voters in turn who leads, in the
        same epoch. The vote it cast in this epoch stays (KIP-595 "Vote Request Handling": one vote per epoch,
        persisted; TLA+ VoteOnce): Voted when it voted, else Unattached, and quorum-state keeps the votedId.
        Kafka 3.9 (``pollFollowerAsObserver``) stays Follower and sends its Fetch to any bootstrap server
        (``maybeSendAnyVoterFetch``) until one names a leader; neither way forgets the epoch's vote."""
        if role.voted_id >= 0:
            self._transition(Voted(role.epoch, role.voted_id, None, role.voted_directory_id))
            self._persist()
        else:
            self._become_unattached(role.epoch)

    def _become_follower(self, epoch: int, leader_id: int) -> None:
        voted = self.voted_id if epoch == self.epoch else -1
        role = self.role
        voted_dir = role.voted_directory_id if voted >= 0 and isinstance(role, (Voted, Follower, Prospective)) else None
        self._transition(Follower(epoch, leader_id, self._now + self.config.fetch_timeout_ms, voted_id=voted,
                                  voted_directory_id=voted_dir))
        self._persist()

    def _initial_role(self, durable: ElectionState) -> Role:
        """Kafka's QuorumState.initialize: the role a restarted node resumes in."""
        me, voters, is_voter = self.config.node_id, self._voter_ids(), self._is_voter()
        epoch = durable.leader_epoch
        election = self._random_election_deadline() if is_voter else None
        if self.log.last_fetched_epoch > epoch:
            # The log saw a later epoch than quorum-state (possible only if quorum-state was lost).
            return Unattached(self.log.last_fetched_epoch, election)
        if durable.leader_id == me:
            # A leader cannot lead again after a restart (its unflushed tail may be gone, and another
            # vote in this epoch would break VoteOnce): resign and let the voters know. Also a leader since
            # removed from the voter set (KIP-853): Kafka's QuorumState.initialize makes any node whose
            # quorum-state names itself leader Resigned, voter or not; ``pollResigned`` then moves a non-voter
            # to Unattached in epoch + 1 at its election timeout (``_fire_timers``).
            return Resigned(epoch, (), voters - {me}, election if election is not None
                            else self._random_election_deadline(), cause="Restart")
        if durable.leader_id < 0 and durable.voted_id == me and is_voter:
            assert election is not None
            return Candidate(epoch, frozenset({me}), frozenset(), 1, election)
        if durable.leader_id < 0 and durable.voted_id == me:
            # KIP-853: a candidate removed from the voter set meanwhile (its log's VotersRecords no longer name
            # it) keeps its vote for itself in this epoch as an observer (Kafka 3.9's initialize would build a
            # CandidateState, which refuses a non-voter): Voted, no election timer, probing the voters.
            return Voted(epoch, me, None, durable.voted_directory_id)
        if durable.leader_id < 0 and durable.voted_id >= 0 and durable.voted_id != me:
            # an observer may have voted too (Kafka 3.9+)
            return Voted(epoch, durable.voted_id, election, durable.voted_directory_id)
        if durable.leader_id >= 0 and durable.leader_id in voters:
            deadline = self._now + self.config.fetch_timeout_ms
            return Follower(epoch, durable.leader_id, deadline, durable.voted_id,
                            voted_directory_id=durable.voted_directory_id)
        if durable.voted_id >= 0:
            # A Follower's quorum-state keeps its vote; its leader is no longer a voter (KIP-853), so the node
            # does not know where it listens and looks for it Unattached (Kafka's initialize), keeping the vote.
            return Voted(epoch, durable.voted_id, election, durable.voted_directory_id)
        return Unattached(epoch, election)

    # ============================================================================ fault-injection points

    def _cluster_id_ok(self, cluster_id: str | None) -> bool:
        """KIP-595 step 1 of every handler: a null id is accepted; a node without an id yet (bootstrap)
        accepts any; otherwise the ids must match."""
        return cluster_id is None or self._cluster_id is None or cluster_id == self._cluster_id

    def _persist_vote(self) -> None:
        """A granted vote is written to quorum-state before the response is sent."""
        self._persist()

    def _should_resign(self) -> bool:
        """Check quorum (KIP-595 "Leader Progress Timeout"): has the leader gone ``check_quorum_timeout_ms``
        (1.5 x the fetch timeout, as Kafka) without fetches from a majority? Never for the only voter: it
        is its own majority, and no voter will ever fetch from it (Kafka's
        ``LeaderState.timeUntilCheckQuorumExpires``: a quorum of one voter never expires)."""
        role = self.role
        if not isinstance(role, Leader):
            return False
        if self._sole_voter():
            # Kafka's timeUntilCheckQuorumExpires restarts the timer while the leader is the only voter: a voter added
            # later (KIP-853 AddVoter) gets a whole check-quorum timeout to fetch before the leader resigns.
            role.progress_deadline_ms = self._now + self.check_quorum_timeout_ms
            return False
        return self._now >= role.progress_deadline_ms

    def _sole_voter(self) -> bool:
        return self._voters().is_only_voter(self._local_key)

    def _counts_toward_hw(self, replica_id: int) -> bool:
        """Only voters' offsets commit entries; observers fetch but never count. KIP-853: the voters of the set in
        force, by key; the leader only while it is one (a removed voter stops counting at the append)."""
        leader = self.role
        p = leader.replicas.get(replica_id) if isinstance(leader, Leader) else None
        return self._voters().is_voter(ReplicaKey(replica_id, p.directory_id if p is not None else None))

    # ============================================================================ timers and sending

    def _poll(self) -> None:
        """After every input: fire due timers, then send whatever requests are due (Kafka's poll)."""
        now = self._now
        # Timers first, expired long-polls after: an answer then shows the state at the end of the step,
        # which is where the node's trace puts it (a step's lines are written before its answers). The
        # other order answered an expiring fetch empty and appended the linger's batch after it, in the
        # same step: a trace no behaviour of tla/KRaft.tla (AnswerParkedFetch after ClientAppend) produces.
        self._fire_timers()
        if self._parked:
            for parked in [p for p in self._parked if p.deadline_ms <= now]:
                self._parked.remove(parked)
                self._out.replies.append(Reply(parked.reply_to, self._answer_parked_fetch(parked.request)))
        # Sending changes no role, so these are still the due destinations when ``_finish`` asks.
        self._due = self._due_destinations()
        for dest in self._due:
            if self._ready_at.get(dest, 0) <= now:
                self._send_role_request(dest)
        role = self.role
        if isinstance(role, Leader) and now >= role.begin_epoch_deadline_ms:
            self._send_begin_quorum_epoch(role)

    def _send_begin_quorum_epoch(self, leader: Leader) -> None:
        """The leader's BeginQuorumEpoch heartbeat (Kafka 3.9+, KAFKA-16536:
        ``KafkaRaftClient.maybeSendBeginQuorumEpochRequests``, ``LeaderState.resetBeginQuorumEpochTimer``;
        ``KafkaRaftClientTest.testBeginQuorumEpochHeartbeat``). When the timer passes, every other voter
        whose connection is free (no request in flight, no backoff: Kafka's ``RequestManager.isReady``)
        gets BeginQuorumEpoch, acknowledged before or not; the others wait for the next round. Then the
        timer restarts at fetch.timeout/2. It tells a voter that restarted, or missed the first round,
        who leads before its fetch timeout sends it campaigning. (KIP-595 "BeginQuorumEpoch" only asks
        the leader to send it until each voter acknowledged; Kafka before 3.9 did that.)"""
        now = self._now
        me = self.config.node_id
        listeners = self.config.listeners
        for node in self._voters().nodes:
            dest = node.id
            if dest != me and self._ready_at.get(dest, 0) <= now:
                # v1 (KIP-853): the recipient's key as the voter set names it, and where the leader listens.
                self._send(dest, BeginQuorumEpochRequest(self._cluster_id, me, leader.epoch, dest,
                                                         voter_directory_id=node.key.directory_id,
                                                         leader_endpoints=listeners))
        leader.begin_epoch_deadline_ms = now + self.begin_quorum_epoch_timeout_ms

    def _fire_timers(self) -> None:
        # The commonest roles first: the branches are disjoint, so their order changes nothing else.
        role, now = self.role, self._now
        if isinstance(role, Follower):
            if now >= role.fetch_deadline_ms:
                if self._is_voter():
                    if self._may_elect():
                        self._elect(role.deadline_cause)
                else:
                    self._observer_fetch_timeout(role)  # an observer looks for the leader again
        elif isinstance(role, Leader):
            if role.resign_requested:
                # KIP-853: its removal committed (``requestResign``); it resigns at the next poll (``pollLeader``)
                if role.resign_due:
                    self._resign_removed()
                else:
                    role.resign_due = True
            elif self._should_resign():
                self.leader_progress_timeout()
            else:
                if role.voter_change is not None and now >= role.voter_change.deadline_ms:
                    self.voter_change_timeout()  # KIP-853 ``maybeExpirePendingOperation``
                if self._accumulator is not None and now >= self._accumulator.drain_at_ms:
                    self._drain_accumulator()  # linger over: the held-back writes become one batch
        elif isinstance(role, (Unattached, Voted)):
            deadline = role.election_deadline_ms
            if deadline is not None and now >= deadline:
                if self._may_elect():
                    self._elect("ElectionTimeout")
                elif not self._is_voter():
                    role.election_deadline_ms = None  # KIP-853: no longer a voter, an observer has no election timer
        elif isinstance(role, Candidate):
            if len(role.granted) >= self._majority():
                self.become_leader()
            elif role.backoff_until_ms is not None:
                if now >= role.backoff_until_ms and self._may_elect():
                    self._elect("ElectionBackoff")
            elif now >= role.election_deadline_ms:
                if self.config.pre_vote and self._may_elect():
                    self.become_prospective("ElectionTimeout")  # Kafka 4.x ``pollCandidate``
                else:
                    role.backoff_until_ms = now + self._election_backoff_ms(role.retries)
        elif isinstance(role, Prospective):
            if len(role.granted) >= self._majority():
                self.start_election("PreVoteGranted")
            elif now >= role.election_deadline_ms:
                self.abandon_prospective("ElectionTimeout")  # Kafka 4.x ``pollProspective``
        elif isinstance(role, Resigned) and now >= role.election_deadline_ms:
            if self._may_elect():
                self._elect("ElectionTimeout")
            elif not self._is_voter() and not self._shutting_down:
                # KIP-853 (``pollResigned``): a leader removed from the voters goes on as an observer.
                self._become_unattached(role.epoch + 1)  # (no event: as an observer's fetch timeout)

    def _may_elect(self) -> bool:
        """Only voters start elections, and not while shutting down."""
        return self._is_voter() and not self._shutting_down

    def _due_destinations(self) -> list[int]:
        """Who the current role still has to ask something (sent as soon as that peer is free)."""
        role = self.role
        if isinstance(role, Follower):
            return [role.leader_id]
        if isinstance(role, Leader):
            return []  # BeginQuorumEpoch goes out on its own timer (``_send_begin_quorum_epoch``)
        if isinstance(role, Candidate) and role.backoff_until_ms is None:
            return sorted(self._voter_ids() - role.granted - role.rejected - {self.config.node_id})
        if isinstance(role, Prospective):  # Kafka's maybeSendVoteRequests: the voters not heard from yet
            return sorted(self._voter_ids() - role.granted - role.rejected - {self.config.node_id})
        if isinstance(role, Resigned):
            return sorted(role.awaiting_end_epoch)
        if isinstance(role, (Unattached, Voted)) and not self._is_voter():
            targets = self._observer_targets()
            return [targets[self._probe_index % len(targets)]] if targets else []
        return []

    def _send_role_request(self, dest: int) -> None:
        role = self.role
        if isinstance(role, (Candidate, Prospective)):
            # Kafka's ``buildVoteRequest``: the current epoch, the log end; ``PreVote`` while Prospective.
            # v1 (KIP-853, ``RaftUtil.singletonVoteRequest``): the recipient's key and our directory id.
            node = self._vh.last().node(dest)
            self._send(
                dest,
                VoteRequest(
                    self._cluster_id, role.epoch, self.config.node_id, self.last_epoch,
                    self.log.end_offset, voter_id=dest, pre_vote=isinstance(role, Prospective),
                    candidate_directory_id=self.config.directory_id,
                    voter_directory_id=node.key.directory_id if node is not None else None,
                ),
            )
        elif isinstance(role, Resigned):
            vs = self._vh.last()
            dirs = tuple(n.key.directory_id if (n := vs.node(v)) is not None else None
                         for v in role.preferred_successors)
            if not any(dirs):
                dirs = ()  # no directory ids known (static voters): as before KIP-853
            self._send(
                dest,
                EndQuorumEpochRequest(
                    self._cluster_id, self.config.node_id, role.epoch, role.preferred_successors,
                    preferred_directory_ids=dirs, leader_endpoints=self.config.listeners,
                ),
            )
        elif isinstance(role, Follower):
            if role.fetching_snapshot is not None:
                self.send_fetch_snapshot_request(dest)  # Kafka's maybeSendFetchOrFetchSnapshot
            elif self._update_voter_due(role):
                self.send_update_raft_voter_request(dest)  # KIP-853 ``pollFollowerAsVoter``
            else:
                self.send_fetch_request(dest)
        elif isinstance(role, (Unattached, Voted)):
            self.send_fetch_request(dest, max_wait_ms=0)  # an observer's probe: who leads?

    def _send(self, dest: int, req: Request) -> None:
        # One request in flight per destination: a newer one supersedes any the shell never answered.
        self._last_request_id += 1
        self._inflight[dest] = self._last_request_id
        # KIP-853: where ``dest`` listens when the core knows (None: the shell's address book).
        self._out.send.append(OutboundRequest(dest, req, self._last_request_id, self._address_of(dest)))
        self._ready_at[dest] = self._now + self.config.request_timeout_ms  # in flight until answered

    def _request_failed(self, dest: int) -> None:
        self._ready_at[dest] = self._now + self.config.retry_backoff_ms
        if isinstance(self.role, (Unattached, Voted)) and not self._is_voter():
            self._probe_index += 1  # an observer tries the next voter

    def _next_deadline(self) -> int | None:
        """The earliest of the role's timer, the parked fetches' deadlines and the due destinations' ready
        times (a running minimum: this runs after every step)."""
        role = self.role
        deadline: int | None
        if isinstance(role, Follower):
            deadline = role.fetch_deadline_ms
        elif isinstance(role, Leader) and role.resign_requested:
            deadline = self._now  # KIP-853: resign at the next poll, at once
        elif isinstance(role, Leader):
            # a sole voter has no check quorum and nobody to send BeginQuorumEpoch to
            deadline = None if self._sole_voter() else min(role.progress_deadline_ms, role.begin_epoch_deadline_ms)
            if self._accumulator is not None:
                drain = self._accumulator.drain_at_ms
                deadline = drain if deadline is None else min(deadline, drain)
            if role.voter_change is not None:
                change_at = role.voter_change.deadline_ms
                deadline = change_at if deadline is None else min(deadline, change_at)
        elif isinstance(role, Candidate):
            backoff = role.backoff_until_ms
            deadline = backoff if backoff is not None else role.election_deadline_ms
        else:  # Unattached, Voted, Prospective, Resigned (an observer's Unattached has no election timer)
            deadline = role.election_deadline_ms
        for parked in self._parked:
            if deadline is None or parked.deadline_ms < deadline:
                deadline = parked.deadline_ms
        ready_at = self._ready_at
        for dest in self._due:  # computed by this step's ``_poll``
            at = ready_at.get(dest, 0)
            if deadline is None or at < deadline:
                deadline = at
        return deadline

    def _random_election_deadline(self) -> int:
        """Election timeout with jitter: Kafka draws uniformly from [timeout, 2 * timeout)."""
        timeout = self.config.election_timeout_ms
        return self._now + timeout + self._rng.randrange(timeout)

    def _election_backoff_ms(self, retries: int) -> int:
        """Randomised exponential backoff after a lost election, bounded by election.backoff.max.ms."""
        span = 2 << min(20, retries - 1)
        return min(ELECTION_BACKOFF_BASE_MS * self._rng.randrange(span), self.config.election_backoff_max_ms)

    def _successor_backoff_ms(self, position: int, count: int) -> int:
        """Kafka's ``strictExponentialElectionBackoffMs`` for the successor at ``position`` of ``count``:
        0 for the first, ``election.backoff.max.ms`` for a position outside the list."""
        cap = self.config.election_backoff_max_ms
        if position == 0:
            return 0
        if position < 0 or position >= count:
            return cap
        base = cap >> (count - 1)
        return min(cap, base << (position - 1))

    def _rearm_exhausted_epoch(self) -> None:
        """The next election would need an epoch an int32 cannot hold: stay, and look again after another
        election timeout (the kit's choice; Kafka has no such check)."""
        role, deadline = self.role, self._random_election_deadline()
        if isinstance(role, Follower):
            role.fetch_deadline_ms = deadline
        elif isinstance(role, Candidate):
            role.backoff_until_ms, role.election_deadline_ms = None, deadline
        elif isinstance(role, (Unattached, Voted, Prospective, Resigned)):
            role.election_deadline_ms = deadline

    # ============================================================================ log and state helpers

    def _append(
        self, batches: tuple[RecordBatch, ...] | list[RecordBatch], encoded: tuple[bytes, ...] | None = None
    ) -> None:
        log = self.log
        first = len(log)
        log.append(batches, encoded)
        # Each batch is encoded once (or kept as received): the same bytes go to disk, to every Fetch
        # response, and into the trace's digest (spec.records.batch_digest, computed from those bytes).
        if encoded is None:
            encoded = tuple([log.encoded_at(i) for i in range(first, len(log))])
        self._out.log_ops.append(AppendBatches(tuple(batches), tuple(encoded)))
        if self.config.emit_trace:
            self._pending_log.setdefault("appended", []).extend(
                [
                    {
                        "baseOffset": b.base_offset,
                        "lastOffset": b.last_offset,
                        "epoch": b.partition_leader_epoch,
                        "control": b.is_control,
                        "digest": records_digest(data),
                    }
                    for b, data in zip(batches, encoded, strict=True)
                ]
            )
        self._note_cluster_id_records(batches)
        if self._read_kraft_records(batches):  # KIP-853: the set in force changes at the append
            self._voter_set_changed()

    def _append_as_leader(self, batches: list[RecordBatch]) -> None:
        self._append(batches)
        leader = self.role
        assert isinstance(leader, Leader)
        me = self.config.node_id
        own = leader.replicas.get(me)
        if own is None:
            own = leader.replicas[me] = ReplicaProgress(me)
        own.end_offset = self.log.end_offset
        self._maybe_advance_high_watermark()
        self._complete_parked_fetches()  # long-polls waiting for new data get it now

    def _set_high_watermark(self, offset: int) -> None:
        """The high watermark only moves forward (HighWatermarkMonotonic)."""
        if offset <= self._hw:
            return
        self._hw = offset
        self._out.high_watermark = offset
        if self._pending_cluster_id is not None and self._pending_cluster_id[0] < offset:
            self._cluster_id = self._pending_cluster_id[1]  # committed: adopt it (KIP-595 bootstrap)
            self._out.cluster_id_adopted = self._cluster_id
            self._pending_cluster_id = None
        self._maybe_complete_voter_change()  # KIP-853: Add/RemoveRaftVoter are answered at their commit
        # Followers waiting in a long-poll learn the new high watermark without waiting MaxWaitMs.
        self._complete_parked_fetches()

    def _note_cluster_id_records(self, batches: Any) -> None:
        if self._cluster_id is not None or self._pending_cluster_id is not None:
            return
        for batch in batches:
            if batch.is_control:
                continue
            for rec in batch.records:
                if rec.key == CLUSTER_ID_KEY and rec.value is not None:
                    self._pending_cluster_id = (batch.base_offset + rec.offset_delta, rec.value.decode())
                    return

    def _cluster_id_batch(self, base_offset: int, epoch: int) -> RecordBatch:
        """A fresh cluster id from the seeded rng, in Kafka's form (base64url of a v4 uuid, no '-' first)."""
        while True:
            raw = uuid.UUID(int=self._rng.getrandbits(128), version=4).bytes
            cluster_id = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
            if not cluster_id.startswith("-"):
                break
        record = Record(0, cluster_id.encode(), CLUSTER_ID_KEY)
        return RecordBatch(base_offset, epoch, (record,), base_timestamp=self._now, max_timestamp=self._now)

    def _current_leader(self) -> LeaderIdAndEpoch:
        # One (immutable) value per role object: its leader and epoch never change in place.
        role = self.role
        if role is not self._leader_role:
            self._leader_role, self._leader_and_epoch = role, LeaderIdAndEpoch(self.leader_id, self.epoch)
        return self._leader_and_epoch

    def _persist(self) -> None:
        role = self.role
        voted_dir = role.voted_directory_id if isinstance(role, (Voted, Follower, Prospective)) else None
        if isinstance(role, (Leader, Candidate, Resigned)):
            voted_dir = self.config.directory_id  # it voted for itself
        self._out.persist = ElectionState(
            self.epoch, self.leader_id, self.voted_id, self._vh.last().sorted_ids(), voted_dir
        )
        self._pending_log["persisted"] = True

    # ============================================================================ step bookkeeping

    def _begin(self, now_ms: int) -> None:
        if now_ms < self._now:
            raise ValueError(f"time went backwards: now_ms {now_ms} < previous {self._now}")
        self._now = now_ms
        # Every field given: cheaper than Ready()'s default factories, and this runs on every step.
        self._out = Ready(None, [], None, None, [], [], [], None, None)
        self._pending_log = {}
        self._completion_note = None

    def _emit(self, event: str, cause: str | None = None, note: str | None = None, pre_vote: bool = False,
              snapshot_id: SnapshotId | None = None, voter_key: ReplicaKey | None = None) -> None:
        if not self.config.emit_trace:
            self._pending_log.clear()
            return
        ev: dict[str, Any] = {
            "type": "event",
            "ts": self._now,
            "node": self.config.node_id,
            "event": event,
            "state": self.state_snapshot(),
        }
        if cause is not None:
            ev["cause"] = cause
        if pre_vote:
            ev["preVote"] = True  # KIP-996: the Vote handled was a pre-vote (spec/README.md)
        if snapshot_id is not None:  # KIP-630 (spec/README.md): the snapshot created, installed or restored
            ev["snapshotId"] = {"endOffset": snapshot_id.end_offset, "epoch": snapshot_id.epoch}
        if voter_key is not None:  # KIP-853: the voter an Add/Remove/UpdateRaftVoter step is about
            ev["voterKey"] = {"id": voter_key.id, "directoryId": voter_key.directory_id}
        if self._pending_log:
            ev["log"], self._pending_log = self._pending_log, {}
        if self._completion_note is not None:  # KIP-853: an Add/Remove completed in this step
            note = self._completion_note if note is None else f"{note}; {self._completion_note}"
            self._completion_note = None
        if note is not None:
            ev["note"] = note
        self._out.trace.append(ev)

    def _finish(self) -> Ready:
        if self._pending_log and self._out.trace:
            self._out.trace[-1].setdefault("log", {}).update(self._pending_log)
            self._pending_log = {}
        self._out.next_deadline_ms = self._next_deadline()
        return self._out  # the next step starts a fresh one (``_begin``)

    # ============================================================================ status

    def status(self) -> CoreStatus:
        """The core's state as one value (``io.CoreStatus``): what shells read between steps."""
        role = self.role
        return CoreStatus(
            self.config.node_id,
            role.name,
            role.epoch,
            self.leader_id,
            self.voted_id,
            self.log.end_offset,
            self._hw,
            self.next_append_offset,
            role.epoch_start_offset if isinstance(role, Leader) else -1,
            self._cluster_id,
            self.log.start_offset,
            self.latest_snapshot_id,
            role.fetching_snapshot if isinstance(role, Follower) else None,
            self._vh.last().sorted_ids(),
            self._vh.kraft_version(),
            self.config.directory_id,
        )
