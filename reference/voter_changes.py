"""KIP-853 (dynamic quorum) for the reference node's core: the voter set in force and the voter-change RPCs.

``KRaftCore`` (``core.py``) inherits ``ReconfigHandlers``; nothing here runs on its own. It holds what KIP-853 added
to the core, as Kafka keeps it apart from ``KafkaRaftClient`` (``internals/KRaftControlRecordStateMachine``,
``VoterSetHistory``, ``AddVoterHandler``, ``RemoveVoterHandler``, ``UpdateVoterHandler``):

- the voter set in force: the latest VotersRecord of the log, committed or not (``voters.VoterHistory``, fed by every
  append, truncation, snapshot and the bootstrap checkpoint); with static controller.quorum.voters (kraft.version 0)
  it is that set and never changes; the endpoints the core knows (voter set, leaders' announcements, bootstrap
  servers);
- the handlers ``handle_add_raft_voter_request``, ``handle_api_versions_response``,
  ``handle_remove_raft_voter_request``, ``handle_update_raft_voter_request``, ``send_update_raft_voter_request``,
  ``handle_update_raft_voter_response`` and ``voter_change_timeout`` (TLA+ action = handler = trace event, see the
  vocabulary in spec/README.md);
- the fault-injection points fault nodes and mutants override: ``_voter_change_blocked``, ``_replica_caught_up``,
  ``_voter_key_ok``, ``_voter_set_for_quorum``, ``_should_resign_after_removal``, ``_add_completes_at_append``.

The rest of the core's state and rules (roles, the log, ``_emit``, ``_send``, ...) are ``KRaftCore``'s: the
declarations under ``TYPE_CHECKING`` below name what this mixin uses of them, so mypy checks both sides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kraft_tck.reference.io import Ready, Reply, SnapshotLoaded
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BeginQuorumEpochResponse,
    Endpoint,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    ReplicaKey,
    Request,
    SnapshotId,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    VoteResponse,
)
from kraft_tck.reference.roles import Follower, Leader, ReplicaProgress, Role, Unattached, Voted, VoterChange
from kraft_tck.reference.voters import VoterHistory, VoterNode, VoterSet, voter_set_from_record, voters_record
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import ControlType, DecodeError, RecordBatch, control_batch, decode_batch, decode_control

if TYPE_CHECKING:
    from kraft_tck.reference.core import CoreConfig

# The control record types the voter history reads (KRaftVersionRecord, VotersRecord).
_KRAFT_CONTROL_TYPES = (int(ControlType.KRAFT_VERSION), int(ControlType.KRAFT_VOTERS))

# Responses with a tagged NodeEndpoints (KIP-853): the leader's endpoint, filled when known.
ENDPOINT_RESPONSES = (VoteResponse, BeginQuorumEpochResponse, EndQuorumEpochResponse, FetchResponse,
                      FetchSnapshotResponse)

# ``LeaderState.isReplicaCaughtUp``: the joining replica must have fetched within the last hour.
_CAUGHT_UP_WINDOW_MS = 3_600_000


def first_batch_bytes(head: bytes, data: bytes) -> bytes:
    """``head`` (the first bytes of a snapshot download) grown with the next chunk ``data`` until it holds the
    whole first batch (its 8-byte base offset, 4-byte length and that many bytes), and nothing after it."""
    pos = 0
    while True:
        need = 12 if len(head) < 12 else 12 + max(0, int.from_bytes(head[8:12], "big", signed=True))
        if len(head) >= need or pos >= len(data):
            return head
        take = data[pos: pos + need - len(head)]
        head += take
        pos += len(take)


class ReconfigHandlers:
    """KIP-853's part of ``KRaftCore`` (a mixin: see the module docstring)."""

    # Set by ``_init_voters`` (called from ``KRaftCore.__init__``).
    _vh: VoterHistory
    _local_key: ReplicaKey
    _learned_endpoints: dict[int, tuple[str, int]]
    _bootstrap_addresses: dict[int, tuple[str, int]]
    _completion_note: str | None
    _fetch_directory_id: str | None

    if TYPE_CHECKING:  # KRaftCore's, used here
        config: CoreConfig
        role: Role
        log: Log
        _now: int
        _hw: int
        _out: Ready
        _cluster_id: str | None
        _shutting_down: bool
        _ready_at: dict[int, int]

        @property
        def epoch(self) -> int: ...
        @property
        def leader_id(self) -> int: ...
        def _emit(self, event: str, cause: str | None = None, note: str | None = None, pre_vote: bool = False,
                  snapshot_id: SnapshotId | None = None, voter_key: ReplicaKey | None = None) -> None: ...
        def _send(self, dest: int, req: Request) -> None: ...
        def _request_failed(self, dest: int) -> None: ...
        def _validate_leader_only_request(self, request_epoch: int) -> Errors | None: ...
        def _handle_common_response(self, sender_id: int, error: Errors, leader_id: int, epoch: int) -> bool: ...
        def _random_election_deadline(self) -> int: ...
        def _published_hw(self) -> int: ...
        def _drain_accumulator(self) -> None: ...
        def _current_leader(self) -> LeaderIdAndEpoch: ...
        def _cluster_id_ok(self, cluster_id: str | None) -> bool: ...
        def _become_resigned(self, cause: str) -> None: ...
        def _append_as_leader(self, batches: list[RecordBatch]) -> None: ...

    # ============================================================================ the voter set in force

    def _init_voters(self, start_snapshot: SnapshotLoaded | None) -> None:
        """The voter history at start-up (Kafka's ``KRaftControlRecordStateMachine`` + ``VoterSetHistory``): the
        static set of controller.quorum.voters (kraft.version 0) as fallback, the bootstrap checkpoint's set at
        offset -1, the snapshot at the log start at its end offset - 1, then every KRaftVersion/Voters record
        of the log."""
        config = self.config
        self._local_key = ReplicaKey(config.node_id, config.directory_id)
        self._vh = VoterHistory(VoterSet.static(config.voters))
        # Endpoints learnt from LeaderEndpoints / NodeEndpoints (node id -> (host, port)), and the bootstrap
        # servers by Kafka's ids -2, -3, ... (KafkaRaftClient constructor).
        self._learned_endpoints: dict[int, tuple[str, int]] = {}
        self._bootstrap_addresses = {-2 - i: addr for i, addr in enumerate(config.bootstrap_servers)}
        self._completion_note: str | None = None
        self._fetch_directory_id = None  # the ReplicaDirectoryId of the Fetch being handled
        if config.bootstrap_voters is not None:
            self._vh.add_kraft_version_at(-1, 1)
            self._vh.add_voters_at(-1, config.bootstrap_voters)
        if start_snapshot is not None and start_snapshot.snapshot_id == self.log.start_snapshot:
            self._load_snapshot_voters(start_snapshot)
        else:
            self._read_kraft_records(self.log.control_batches())

    def voter_set(self) -> VoterSet:
        """KIP-853 "Voter changes": the voter set in force, the latest VotersRecord of the log (committed or not),
        else the snapshot's or bootstrap checkpoint's, else controller.quorum.voters (``lastVoterSet``). The core
        decides with ``_voters()``, which a fault node may bend (``_voter_set_for_quorum``); this is the log's."""
        return self._vh.last()

    def kraft_version(self) -> int:
        """The latest KRaftVersionRecord's kraft.version (0 without one: static voters)."""
        return self._vh.kraft_version()

    def voters_at(self, offset: int) -> tuple[int, VoterSet | None]:
        """For the snapshot writer (Kafka's ``kraftVersionAtOffset`` / ``voterSetAtOffset``): kraft.version and the
        voter set read from the log in force at ``offset`` (None when no VotersRecord precedes it)."""
        return self._vh.kraft_version_at(offset), self._vh.voters_at(offset)

    def _voters(self) -> VoterSet:
        return self._voter_set_for_quorum()

    def _voter_ids(self) -> frozenset[int]:
        return self._voter_set_for_quorum().ids()

    def _majority(self) -> int:
        return self._voter_set_for_quorum().majority()

    def _is_voter(self) -> bool:
        """``QuorumState.isVoter``: is this node's key in the voter set in force? Otherwise it is an observer."""
        return self._voter_set_for_quorum().is_voter(self._local_key)

    def _local_node(self) -> VoterNode:
        """This node as a voter (Kafka's ``QuorumState.localVoterNodeOrThrow``): key, own listeners (the entry it
        has when the shell names none), supported kraft.version range."""
        endpoints = self.config.listeners
        if not endpoints:
            node = self._vh.last().node(self.config.node_id)
            endpoints = node.endpoints if node is not None else ()
        lo, hi = self.config.kraft_version_range
        return VoterNode(self._local_key, endpoints, lo, hi)

    def _listener_name(self) -> str | None:
        """The default controller listener (controller.listener.names[0]); None: take a node's first endpoint."""
        return self.config.listeners[0].name if self.config.listeners else None

    def _read_kraft_records(self, batches: Any) -> bool:
        """Enter every KRaftVersionRecord / VotersRecord of these batches into the history at its offset
        (``KRaftControlRecordStateMachine.handleBatch``). True when one was found. A record that does not
        decode is skipped (Kafka would stop the node)."""
        found = False
        history = self._vh
        for batch in batches:
            if not batch.is_control:
                continue
            for rec in batch.records:
                key = rec.key
                if key is None or len(key) != 4 or key[:3] != b"\0\0\0" or key[3] not in _KRAFT_CONTROL_TYPES:
                    continue
                offset = batch.base_offset + rec.offset_delta
                try:
                    ctype, body = decode_control(rec)
                    if ctype is ControlType.KRAFT_VERSION:
                        history.add_kraft_version_at(offset, int(body["KRaftVersion"]))
                    else:
                        # Kafka 3.9.0 refuses a set without an overlapping majority here; 3.9.1 (KAFKA-17973)
                        # relaxed that: the leader's one-change-at-a-time rule is what keeps majorities overlapping.
                        history.add_voters_at(offset, voter_set_from_record(body), strict=False)
                except (DecodeError, ValueError, KeyError, TypeError):
                    continue
                found = True
        return found

    def _load_snapshot_voters(self, loaded: SnapshotLoaded) -> None:
        """``KRaftControlRecordStateMachine.maybeLoadSnapshot``: the snapshot at the log start replaces the history;
        its records count at its end offset - 1, the log's after it. A snapshot that names neither (a shell that
        reads no KIP-853 header) leaves the history alone."""
        sid = loaded.snapshot_id
        if sid != self.log.start_snapshot or (loaded.voters is None and loaded.kraft_version == 0):
            return
        history = self._vh
        history.clear()
        at = sid.end_offset - 1
        if loaded.kraft_version:
            history.add_kraft_version_at(at, loaded.kraft_version)
        if loaded.voters is not None:
            history.add_voters_at(at, loaded.voters)
        self._read_kraft_records(self.log.control_batches())
        if hasattr(self, "role"):
            self._voter_set_changed()

    def _load_snapshot_header(self, snapshot_id: SnapshotId, head: bytes) -> None:
        """A downloaded snapshot just installed: its header batch's KRaftVersionRecord / VotersRecord become the
        history (``_load_snapshot_voters``), as Kafka's ``handleFetchSnapshotResponse`` reloads the partition state
        from the new snapshot in that step. A header that does not decode changes nothing (the shell's
        SnapshotLoaded still comes)."""
        kraft_version, voters = 0, None
        try:
            batch, _ = decode_batch(head)
            for rec in batch.records if batch.is_control else ():
                key = rec.key
                if key is None or len(key) != 4 or key[:3] != b"\0\0\0" or key[3] not in _KRAFT_CONTROL_TYPES:
                    continue
                ctype, body = decode_control(rec)
                if ctype is ControlType.KRAFT_VERSION:
                    kraft_version = int(body["KRaftVersion"])
                else:
                    voters = voter_set_from_record(body)
        except (DecodeError, ValueError, KeyError, TypeError):
            return
        self._load_snapshot_voters(SnapshotLoaded(snapshot_id, None, kraft_version=kraft_version, voters=voters))

    def _voter_set_changed(self) -> None:
        """After an append, truncation or snapshot changed the set in force. A leader's replica states follow it
        (``LeaderState.updateVoterAndObserverStates``): a new voter gets a state (its observer progress kept when
        the key matches), a removed one stays as an observer and stops counting at once (KIP-853: the set is
        the latest in the log). A node that became a voter gets an election timer, one that stopped being one
        loses it."""
        role = self.role
        vs = self._voters()
        if isinstance(role, Leader):
            for node in vs.nodes:
                p = role.replicas.get(node.id)
                if p is None or not node.is_voter(p.key):
                    # An observer state under the voter's exact key keeps its progress (``getReplicaState``); the
                    # state it displaces stays an observer under its own key.
                    state = role.other_keys.pop(node.key, None)
                    if p is not None and p.replica_id != self.config.node_id:
                        role.other_keys[p.key] = p
                    role.replicas[node.id] = state if state is not None else ReplicaProgress(
                        node.id, directory_id=node.key.directory_id)
            role.fetched_voters = frozenset(v for v in role.fetched_voters if v in vs.ids())
        elif isinstance(role, (Unattached, Voted)):
            if self._is_voter() and role.election_deadline_ms is None:
                role.election_deadline_ms = self._random_election_deadline()
            elif not self._is_voter():
                role.election_deadline_ms = None

    def _voter_key_ok(self, voter_id: int, voter_directory_id: str | None) -> bool:
        """Kafka's ``isValidVoterKey`` (Vote and BeginQuorumEpoch v1): a request naming a voter (VoterId >= 0) must
        name this node, and its directory id, when given, must be ours."""
        if voter_id < 0:
            return True
        if voter_id != self.config.node_id:
            return False
        return voter_directory_id is None or voter_directory_id == self.config.directory_id

    def _address_of(self, dest: int) -> tuple[str, int] | None:
        """Where ``dest`` listens, when the core knows: a bootstrap server (-2, -3, ...), a voter's endpoint on the
        default listener in the set in force, or an endpoint learnt from a leader. None: the shell's address book."""
        if dest < -1:
            return self._bootstrap_addresses.get(dest)
        node = self._vh.last().node(dest)
        if node is not None:
            ep = node.endpoint(self._listener_name()) or node.endpoint()
            if ep is not None:
                return ep.host, ep.port
        return self._learned_endpoints.get(dest)

    def _learn_endpoints(self, node_endpoints: tuple[NodeEndpoint, ...]) -> None:
        for ne in node_endpoints:
            if ne.node_id >= 0:
                self._learned_endpoints[ne.node_id] = (ne.host, ne.port)

    def _learn_leader_endpoints(self, leader_id: int, endpoints: tuple[Endpoint, ...]) -> None:
        """BeginQuorumEpoch / EndQuorumEpoch v1 ``LeaderEndpoints`` (``handleBeginQuorumEpochRequest``)."""
        name = self._listener_name()
        ep = next((e for e in endpoints if e.name == name), endpoints[0] if endpoints else None)
        if ep is not None and leader_id >= 0:
            self._learned_endpoints[leader_id] = (ep.host, ep.port)

    def _leader_node_endpoints(self) -> tuple[NodeEndpoint, ...]:
        """A response's ``NodeEndpoints`` (Vote/BeginQuorumEpoch/EndQuorumEpoch v1, Fetch v17, FetchSnapshot v1): the
        known leader's endpoint on the default listener (``RaftUtil.singletonVoteResponse`` and friends). The
        wire drops it below those versions."""
        leader = self.leader_id
        if leader < 0:
            return ()
        if leader == self.config.node_id:
            listeners = self.config.listeners
            return (NodeEndpoint(leader, listeners[0].host, listeners[0].port),) if listeners else ()
        addr = self._address_of(leader)
        return () if addr is None else (NodeEndpoint(leader, addr[0], addr[1]),)

    def _with_node_endpoints(self, resp: Any) -> Any:
        if isinstance(resp, ENDPOINT_RESPONSES) and not resp.node_endpoints:
            eps = self._leader_node_endpoints()
            if eps:
                resp.node_endpoints = eps
        return resp

    def _observer_targets(self) -> list[int]:
        """Whom an observer without a leader asks (Kafka's ``maybeSendAnyVoterFetch``): the bootstrap servers
        when configured, else the voters."""
        if self._bootstrap_addresses:
            return sorted(self._bootstrap_addresses, reverse=True)  # -2, -3, ...
        return sorted(self._voter_ids() - {self.config.node_id})

    # ------------------------------------------------------------------ Add/Remove/UpdateRaftVoter

    def handle_add_raft_voter_request(self, req: AddRaftVoterRequest, reply_to: object = None
                                      ) -> AddRaftVoterResponse | None:
        """KIP-853 "AddVoter" handling, Kafka's order (``KafkaRaftClient.handleAddVoterRequest``,
        ``AddVoterHandler.handleAddVoterRequest``): cluster id, leadership, the key, the default-listener endpoint,
        the one-change rule, an existing id; then the new voter's ApiVersions is asked (its supported kraft.version)
        and the change waits (None: answered later, by ``handle_api_versions_response``, the commit, a timeout or
        a lost leadership)."""
        key = ReplicaKey(req.voter_id, req.voter_directory_id)
        error, message = self._check_add_voter(req, key)
        if error is None:
            endpoint = self._endpoint_on_listener(req.listeners)
            assert endpoint is not None and isinstance(self.role, Leader)
            if self._ready_at.get(req.voter_id, 0) > self._now:
                error, message = Errors.REQUEST_TIMED_OUT, f"New voter {req.voter_id} is not ready to receive requests"
            else:
                # The request's endpoint on the default listener (``AddVoterHandler``: ``requestSender.send``).
                self._learned_endpoints[req.voter_id] = (endpoint.host, endpoint.port)
                self._send(req.voter_id, ApiVersionsRequest())
                self.role.voter_change = VoterChange("add", key, reply_to, self._now + self.config.request_timeout_ms,
                                                     req.listeners)
                self._emit("HandleAddRaftVoterRequest", note=f"asking {endpoint.host}:{endpoint.port} for ApiVersions",
                           voter_key=key)
                return None
        self._emit("HandleAddRaftVoterRequest", note=f"refused: {error.name}", voter_key=key)
        return AddRaftVoterResponse(error, message)

    def _check_add_voter(self, req: AddRaftVoterRequest, key: ReplicaKey) -> tuple[Errors | None, str | None]:
        error = self._check_change_request(req.cluster_id, self.epoch, key)
        if error is not None:
            return error
        if self._endpoint_on_listener(req.listeners) is None:
            return Errors.INVALID_REQUEST, f"Listeners do not contain the default listener {self._listener_name()}"
        blocked = self._voter_change_blocked(self._now)
        if blocked is not None:
            return blocked, "Request timed out waiting for the previous voter change" if blocked is \
                Errors.REQUEST_TIMED_OUT else "Cluster does not support adding voters (kraft.version 0)"
        if req.voter_id in self._vh.last().ids():
            return Errors.DUPLICATE_VOTER, f"The voter id for {key} is already part of the set of voters"
        return None, None

    def _check_change_request(self, cluster_id: str | None, request_epoch: int, key: ReplicaKey
                              ) -> tuple[Errors, str | None] | None:
        """The common first checks of the three RPCs: cluster id, ``validateLeaderOnlyRequest`` (with the
        shutting-down case, BROKER_NOT_AVAILABLE), then the voter key (``RaftUtil.addVoterRequestVoterKey``: an id
        >= 0 and a directory id)."""
        if not self._cluster_id_ok(cluster_id):
            return Errors.INCONSISTENT_CLUSTER_ID, f"The cluster id in the request ({cluster_id}) is not ours"
        error = self._validate_leader_only_request(request_epoch)
        if error is None and self._shutting_down:
            error = Errors.BROKER_NOT_AVAILABLE
        if error is not None:
            return error, None
        if key.id < 0 or key.directory_id is None:
            return Errors.INVALID_REQUEST, f"Invalid voter key {key}"
        return None

    def _endpoint_on_listener(self, listeners: tuple[Endpoint, ...]) -> Endpoint | None:
        name = self._listener_name()
        if name is None:
            return listeners[0] if listeners else None
        return next((e for e in listeners if e.name == name), None)

    def handle_api_versions_response(self, sender_id: int, resp: ApiVersionsResponse) -> None:
        """``AddVoterHandler.handleApiVersionsResponse``: the joining voter's answer. Ignored without a pending add
        from that node; an error aborts (REQUEST_TIMED_OUT); a kraft.version range that does not hold the
        finalized one is INVALID_REQUEST; a replica not caught up (``_replica_caught_up``) REQUEST_TIMED_OUT;
        else the VotersRecord with the new voter is appended: in force at once, answered at its commit."""
        leader = self.role
        change = leader.voter_change if isinstance(leader, Leader) else None
        if change is None or change.kind != "add" or change.offset is not None or change.key.id != sender_id:
            self._emit("HandleApiVersionsResponse", note=f"ignored: no add of {sender_id} waits for it")
            return
        assert isinstance(leader, Leader)
        key, kv, supported = change.key, self.kraft_version(), resp.kraft_version_range
        error: Errors | None = None
        if resp.error != Errors.NONE:
            error, message = Errors.REQUEST_TIMED_OUT, f"ApiVersions returned {resp.error.name}"
        elif supported is None or not supported[0] <= kv <= supported[1]:
            error, message = Errors.INVALID_REQUEST, f"kraft.version range {supported} does not hold {kv}"
        elif not self._replica_caught_up(key, self._now):
            error, message = Errors.REQUEST_TIMED_OUT, f"Replica {key} is not caught up to the leader"
        if error is not None:
            leader.voter_change = None
            self._reply_voter_change(change, error, message)
            self._emit("HandleApiVersionsResponse", note=f"add aborted: {error.name}", voter_key=key)
            return
        assert supported is not None
        new = self._vh.last().add(VoterNode(key, change.endpoints, supported[0], supported[1]))
        if new is None:
            leader.voter_change = None
            self._reply_voter_change(change, Errors.DUPLICATE_VOTER, f"{key.id} is already a voter")
            self._emit("HandleApiVersionsResponse", note="add aborted: DUPLICATE_VOTER", voter_key=key)
            return
        self._append_voters_record(new, change)
        self._emit("HandleApiVersionsResponse", note=f"VotersRecord at {change.offset} adds {key.id}", voter_key=key)
        if self._add_completes_at_append() and leader.voter_change is change:
            leader.voter_change = None
            self._reply_voter_change(change, Errors.NONE)

    def handle_remove_raft_voter_request(self, req: RemoveRaftVoterRequest, reply_to: object = None
                                         ) -> RemoveRaftVoterResponse | None:
        """KIP-853 "RemoveVoter" handling (``KafkaRaftClient.handleRemoveVoterRequest``, ``RemoveVoterHandler``):
        cluster id, leadership, key, the one-change rule, ``VoterSet.removeVoter`` (exact key, never the last
        voter: VOTER_NOT_FOUND); then the VotersRecord without it is appended at once (in force: the removed
        voter stops counting now) and the answer waits for its commit (None)."""
        key = ReplicaKey(req.voter_id, req.voter_directory_id)
        failed = self._check_change_request(req.cluster_id, self.epoch, key)
        new: VoterSet | None = None
        if failed is None:
            blocked = self._voter_change_blocked(self._now)
            if blocked is not None:
                failed = blocked, "Request timed out waiting for the previous voter change" \
                    if blocked is Errors.REQUEST_TIMED_OUT else "Cluster does not support removing voters"
            else:
                new = self._vh.last().remove(key)
                if new is None:
                    failed = Errors.VOTER_NOT_FOUND, f"Cannot remove voter {key} from the set of voters"
        if failed is not None or new is None:
            error, message = failed if failed is not None else (Errors.UNKNOWN_SERVER_ERROR, None)
            self._emit("HandleRemoveRaftVoterRequest", note=f"refused: {error.name}", voter_key=key)
            return RemoveRaftVoterResponse(error, message)
        leader = self.role
        assert isinstance(leader, Leader)
        change = VoterChange("remove", key, reply_to, self._now + self.config.request_timeout_ms)
        leader.voter_change = change
        self._append_voters_record(new, change)
        self._emit("HandleRemoveRaftVoterRequest", note=f"VotersRecord at {change.offset} removes {key.id}",
                   voter_key=key)
        return None

    def handle_update_raft_voter_request(self, req: UpdateRaftVoterRequest) -> UpdateRaftVoterResponse:
        """KIP-853 "UpdateVoter" handling (``KafkaRaftClient.handleUpdateVoterRequest``, ``UpdateVoterHandler``):
        cluster id, ``validateLeaderOnlyRequest(CurrentLeaderEpoch)``, key, default-listener endpoint, the range,
        the one-change rule, the range against the finalized kraft.version, ``VoterSet.updateVoter``; then the
        VotersRecord with the voter's new endpoints and range is appended and answered NONE at once."""
        key = ReplicaKey(req.voter_id, req.voter_directory_id)
        error = self._check_update_voter(req, key)
        if error is None:
            node = VoterNode(key, req.listeners, req.kraft_version_min, req.kraft_version_max)
            new = self._vh.last().update(node)
            if new is None:
                error = Errors.VOTER_NOT_FOUND
            else:
                self._append_voters_record(new, None)
        note = f"VotersRecord updates {key.id}" if error is None else f"refused: {error.name}"
        self._emit("HandleUpdateRaftVoterRequest", note=note, voter_key=key)
        eps = self._leader_node_endpoints()
        return UpdateRaftVoterResponse(error or Errors.NONE, self._current_leader(), eps[0] if eps else None)

    def _check_update_voter(self, req: UpdateRaftVoterRequest, key: ReplicaKey) -> Errors | None:
        failed = self._check_change_request(req.cluster_id, req.current_leader_epoch, key)
        if failed is not None:
            return failed[0]
        if self._endpoint_on_listener(req.listeners) is None:
            return Errors.INVALID_REQUEST
        lo, hi = req.kraft_version_min, req.kraft_version_max
        if lo < 0 or hi < 0 or hi < lo:
            return Errors.INVALID_REQUEST
        blocked = self._voter_change_blocked(self._now)
        if blocked is not None:
            return blocked
        if not lo <= self.kraft_version() <= hi:
            return Errors.INVALID_REQUEST
        return None

    def _append_voters_record(self, new: VoterSet, change: VoterChange | None) -> None:
        """Append one VotersRecord as leader (``LeaderState.appendVotersRecord``), after any held-back client writes
        (their offsets were promised). ``change.offset`` is its offset, set before the append so that a commit in
        the same step (a sole remaining voter) completes it."""
        self._drain_accumulator()
        offset = self.log.end_offset
        if change is not None:
            change.offset = offset
        batch = control_batch(offset, self.epoch, ControlType.KRAFT_VOTERS, voters_record(new), timestamp=self._now)
        self._append_as_leader([batch])

    def _reply_voter_change(self, change: VoterChange, error: Errors, message: str | None = None) -> None:
        kind = AddRaftVoterResponse if change.kind == "add" else RemoveRaftVoterResponse
        resp: AddRaftVoterResponse | RemoveRaftVoterResponse = kind(error, message)
        self._out.replies.append(Reply(change.reply_to, resp))

    def _maybe_complete_voter_change(self) -> None:
        """``AddVoterHandler/RemoveVoterHandler.highWatermarkUpdated``: the high watermark passed the change's
        VotersRecord: answer NONE. A leader whose removal committed resigns (``requestResign``)."""
        leader = self.role
        if not isinstance(leader, Leader) or leader.voter_change is None:
            return
        change = leader.voter_change
        if change.offset is None or self._hw <= change.offset:
            return
        leader.voter_change = None
        self._reply_voter_change(change, Errors.NONE)
        # No action of its own: the step that moved the high watermark says so in its event's note.
        self._completion_note = f"{'Add' if change.kind == 'add' else 'Remove'}RaftVoter committed"
        if change.kind == "remove" and not self._is_voter() and self._should_resign_after_removal():
            leader.resign_requested = True

    def _expire_voter_change(self) -> None:
        """``LeaderState.maybeExpirePendingOperation``: a change past its deadline is answered REQUEST_TIMED_OUT."""
        leader = self.role
        if isinstance(leader, Leader) and leader.voter_change is not None \
                and self._now >= leader.voter_change.deadline_ms:
            self.voter_change_timeout()

    def voter_change_timeout(self) -> None:
        """KIP-853 ``VoterChangeTimeout``: the pending Add/Remove is answered REQUEST_TIMED_OUT; the log is untouched
        (a VotersRecord already appended stays, and stays in force: ``testAddVoterTimeout``)."""
        leader = self.role
        assert isinstance(leader, Leader) and leader.voter_change is not None
        change, leader.voter_change = leader.voter_change, None
        self._reply_voter_change(change, Errors.REQUEST_TIMED_OUT, f"{change.kind} of {change.key} timed out")
        self._emit("VoterChangeTimeout", note=f"{change.kind} of {change.key.id}", voter_key=change.key)

    def _resign_removed(self) -> None:
        """KIP-853: the committed voter set no longer holds the leader: resign (``pollLeader`` after
        ``requestResign``), telling the remaining voters with EndQuorumEpoch."""
        self._become_resigned("RemovedFromVoters")
        self._emit("Resign", cause="RemovedFromVoters")

    def _update_voter_due(self, role: Follower) -> bool:
        """``pollFollowerAsVoter``: every 3 x fetch timeout a voter whose entry in the set in force differs from
        itself (endpoints, supported range) sends UpdateRaftVoter instead of that round's Fetch."""
        if self._vh.kraft_version() < 1:
            return False
        now, period = self._now, 3 * self.config.fetch_timeout_ms
        if role.update_voter_deadline_ms is None:
            role.update_voter_deadline_ms = now + period
            return False
        if now < role.update_voter_deadline_ms:
            return False
        role.update_voter_deadline_ms = now + period
        return bool(self.config.listeners) and self._is_voter() and self._voters().needs_update(self._local_node())

    def send_update_raft_voter_request(self, dest_id: int) -> None:
        """KIP-853 ``SendUpdateRaftVoterRequest`` (``buildUpdateVoterRequest``): own key, epoch, listeners and range."""
        node = self._local_node()
        req = UpdateRaftVoterRequest(self._cluster_id, self.epoch, node.key.id, node.key.directory_id,
                                     node.endpoints, node.kraft_min, node.kraft_max)
        self._send(dest_id, req)
        self._emit("SendUpdateRaftVoterRequest", note=f"to {dest_id}", voter_key=node.key)

    def handle_update_raft_voter_response(self, sender_id: int, resp: UpdateRaftVoterResponse) -> None:
        """``handleUpdateVoterResponse``: only the common response handling (epochs, leaders)."""
        if resp.leader_endpoint is not None:
            self._learn_endpoints((resp.leader_endpoint,))
        current = resp.current_leader
        handled = self._handle_common_response(sender_id, resp.error, current.leader_id, current.leader_epoch)
        if not handled and resp.error != Errors.NONE:
            self._request_failed(sender_id)
        self._emit("HandleUpdateRaftVoterResponse", note=resp.error.name, voter_key=self._local_key)

    # ------------------------------------------------------------------ KIP-853 fault-injection points

    def _voter_change_blocked(self, now_ms: int) -> Errors | None:
        """The one-change-at-a-time rule, in Kafka's order (Add/Remove/UpdateVoterHandler): a pending change (after
        expiring a timed-out one) or an unknown high watermark (no entry of this epoch committed) is
        REQUEST_TIMED_OUT; kraft.version 0 is UNSUPPORTED_VERSION; an uncommitted VotersRecord (or none)
        REQUEST_TIMED_OUT."""
        self._expire_voter_change()
        leader = self.role
        if isinstance(leader, Leader) and leader.voter_change is not None:
            return Errors.REQUEST_TIMED_OUT
        hw = self._published_hw()
        if hw < 0:
            return Errors.REQUEST_TIMED_OUT
        if self._vh.kraft_version() < 1:
            return Errors.UNSUPPORTED_VERSION
        offset = self._vh.last_offset()
        if offset is None or offset >= hw:
            return Errors.REQUEST_TIMED_OUT
        return None

    def _replica_caught_up(self, key: ReplicaKey, now_ms: int) -> bool:
        """``LeaderState.isReplicaCaughtUp``: an observer under exactly this key that has fetched up to this leader's
        end at least once (LastCaughtUpTimestamp known) and fetched within the last hour."""
        leader = self.role
        if not isinstance(leader, Leader):
            return False
        p = leader.replicas.get(key.id)
        if p is None or p.directory_id != key.directory_id:
            p = leader.other_keys.get(key)  # a joiner under a voter's id with another directory id
        return (p is not None and p.directory_id == key.directory_id and p.last_caught_up_ms >= 0
                and p.last_fetch_ms > now_ms - _CAUGHT_UP_WINDOW_MS)

    def _voter_set_for_quorum(self) -> VoterSet:
        """The voter set elections, the high watermark and check quorum use: the latest in the log, committed or
        not (KIP-853; Kafka's ``lastVoterSet``)."""
        return self._vh.last()

    def _should_resign_after_removal(self) -> bool:
        """A leader removed by a committed VotersRecord resigns (KIP-853 RemoveVoter; ``requestResign``)."""
        return True

    def _add_completes_at_append(self) -> bool:
        """False: AddRaftVoter is answered when its VotersRecord commits (Kafka 3.9/4.0; 4.2's AckWhenCommitted=false
        answers at append)."""
        return False
