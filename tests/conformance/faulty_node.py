"""Test-only launcher: the reference node with one injected fault, chosen by KRAFT_TCK_FAULT.

Used as ``pytest conformance --target-launcher tests/conformance/faulty_node.py``; takes the reference
CLI's ``node --config F --trace-file T`` arguments. The faults override the core's named rule methods
(reference/core.py "Fault injection") or, for broker faults, one helper of the active controller
(reference/controller.py), never a flag in the product.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import signal
import sys
from collections.abc import Sequence
from typing import Any

from kraft_tck.reference.broker_driver import BrokerDriver
from kraft_tck.reference.config import NodeConfig
from kraft_tck.reference.controller import Controller
from kraft_tck.reference.core import CoreConfig, KRaftCore
from kraft_tck.reference.io import (
    AbortSnapshotDownload,
    ElectionState,
    Ready,
    Reply,
    RequestReceived,
    SnapshotLoaded,
    SnapshotSource,
    TruncateTo,
)
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    NodeListeners,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    ReplicaKey,
    Request,
    SnapshotId,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    VoteRequest,
    VoteResponse,
)
from kraft_tck.reference.node import Node
from kraft_tck.reference.roles import Candidate, Follower, Leader, Prospective, Resigned
from kraft_tck.reference.voters import VoterSet
from kraft_tck.spec.errors import Errors


class SkipTruncation(KRaftCore):
    def _truncation_point(self, diverging_epoch: int, diverging_end_offset: int) -> int:
        return self.log.end_offset  # ignore DivergingEpoch entirely


class TruncateBelowHighWatermark(KRaftCore):
    def _truncation_point(self, diverging_epoch: int, diverging_end_offset: int) -> int:
        return 0  # throws away committed records too

    def _guard_truncation(self, offset: int) -> None:
        return None


class ForgetVote(KRaftCore):
    def _persist_vote(self) -> None:
        return None  # the vote lives in memory only


class NeverResign(KRaftCore):
    def _should_resign(self) -> bool:
        return False


class IgnoreClusterId(KRaftCore):
    def _cluster_id_ok(self, cluster_id: str | None) -> bool:
        return True


class ObserversCount(KRaftCore):
    def _counts_toward_hw(self, replica_id: int) -> bool:
        return True


class NeedsUnanimity(KRaftCore):
    """Leads only when every voter granted (KIP-595 "Vote Response Handling" 2 asks a majority)."""

    def become_leader(self) -> None:
        role = self.role
        if isinstance(role, Candidate) and len(role.granted) < len(self.config.voters):
            return
        super().become_leader()


class RefusalCounts(KRaftCore):
    """Counts every vote answer as a grant, VoteGranted ignored."""

    def handle_vote_response(self, sender_id: int, resp: VoteResponse) -> None:
        super().handle_vote_response(sender_id, dataclasses.replace(resp, vote_granted=True))


class NoEpochBump(KRaftCore):
    """A candidate retries its election in the same epoch (KIP-595 "Leader Election": epoch + 1)."""

    def start_election(self, cause: str) -> None:
        role = self.role
        # With pre-vote (KIP-996) a lost candidate retries through Prospective, still holding its own vote.
        retrying = isinstance(role, Candidate) or (
            isinstance(role, Prospective) and role.voted_id == self.config.node_id
        )
        if not retrying:
            super().start_election(cause)
            return
        assert isinstance(role, Candidate | Prospective)
        me = self.config.node_id
        self._transition(
            Candidate(
                epoch=role.epoch,
                granted=frozenset({me}),
                rejected=frozenset(),
                retries=role.retries + 1,
                election_deadline_ms=self._random_election_deadline(),
            )
        )
        self._emit("StartElection", cause=cause)


class ObserversKeepLeader(KRaftCore):
    """Check quorum counts any fetching replica, observers included (KIP-595 "Leader Progress Timeout":
    a majority of the quorum, i.e. of the voters)."""

    def _note_fetch_from(self, replica_id: int) -> None:
        leader = self.role
        if not isinstance(leader, Leader) or replica_id == self.config.node_id or replica_id < 0:
            return
        fetched = leader.fetched_voters | {replica_id}
        if len(fetched) + 1 >= self.config.majority:
            fetched, leader.progress_deadline_ms = frozenset(), self._now + self.check_quorum_timeout_ms
        leader.fetched_voters = fetched


class AnyFetchKeepsLeader(KRaftCore):
    """Check quorum restarts on any single voter's fetch: a minority of voters keeps the leader in office
    (told apart from a majority only with 5 voters)."""

    def _note_fetch_from(self, replica_id: int) -> None:
        leader = self.role
        if isinstance(leader, Leader) and replica_id in self.config.voters and replica_id != self.config.node_id:
            leader.fetched_voters, leader.progress_deadline_ms = frozenset(), self._now + self.check_quorum_timeout_ms


class CheckQuorumNeverReset(KRaftCore):
    """Check quorum is a fixed term from the election: fetches never restart the timer."""

    def _note_fetch_from(self, replica_id: int) -> None:
        return None


class SuccessorsLeastCaughtUpFirst(KRaftCore):
    """PreferredSuccessors sorted least caught-up first (KIP-595 "EndQuorumEpoch": most caught-up first)."""

    def _become_resigned(self, cause: str) -> None:
        super()._become_resigned(cause)
        role = self.role
        assert isinstance(role, Resigned)
        role.preferred_successors = tuple(reversed(role.preferred_successors))


class CaughtUpIsLastFetch(KRaftCore):
    """KIP-836 LastCaughtUpTimestamp reported as the last fetch time: a lagging voter looks caught up."""

    def _update_replica_progress(self, replica_id: int, fetch_offset: int) -> None:
        super()._update_replica_progress(replica_id, fetch_offset)
        leader = self.role
        progress = leader.replicas.get(replica_id) if isinstance(leader, Leader) else None
        if progress is not None:
            progress.last_caught_up_ms = progress.last_fetch_ms


class ObserversUnlisted(KRaftCore):
    """DescribeQuorum leaves out the observers (KIP-595/KIP-836: an Observers row per fetching observer)."""

    def handle_describe_quorum_request(self, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
        return dataclasses.replace(super().handle_describe_quorum_request(req), observers=())


class HaltBelowHighWatermark(KRaftCore):
    """Not a fault: Kafka's choice. Told to truncate below its high watermark, the process halts before
    truncating anything (KafkaRaftClient.handleFetchResponse throws; the fatal fault handler halts)."""

    def _guard_truncation(self, offset: int) -> None:
        if offset < self.high_watermark:
            sys.stderr.write(f"halt: asked to truncate to {offset}, below the high watermark {self.high_watermark}\n")
            sys.stderr.flush()
            os._exit(1)


# ------------------------------------------------------------------ KIP-996 pre-vote faults (run with pre-vote on)


class NoPreVote(KRaftCore):
    """Advertises Vote v2 (the node's pre-vote key is on) but elects as Kafka 3.9 and reads a pre-vote as a
    real vote: the PreVote field ignored on both sides."""

    def __init__(self, config: CoreConfig, *args: Any, **kwargs: Any) -> None:
        super().__init__(dataclasses.replace(config, pre_vote=False), *args, **kwargs)

    def handle_vote_request(self, req: VoteRequest) -> VoteResponse:
        return super().handle_vote_request(dataclasses.replace(req, pre_vote=False))


class PreVoteBumpsEpoch(KRaftCore):
    """Takes a pre-vote for the nominee's next epoch: a real Vote in epoch + 1 (the disruption KIP-996 exists
    to avoid: the receiver leaves its epoch and leader for the prospective's)."""

    def handle_vote_request(self, req: VoteRequest) -> VoteResponse:
        if req.pre_vote:
            req = dataclasses.replace(req, pre_vote=False, candidate_epoch=req.candidate_epoch + 1)
        return super().handle_vote_request(req)


class FollowerGrantsPreVote(KRaftCore):
    """Grants pre-votes while following a leader that answers its fetches (KIP-996: refuse them)."""

    def _can_grant_vote(self, candidate_id: int, last_epoch: int, end_offset: int, pre_vote: bool = False) -> bool:
        role = self.role
        if pre_vote and isinstance(role, Follower):
            return (last_epoch, end_offset) >= (self.last_epoch, self.log.end_offset)
        return super()._can_grant_vote(candidate_id, last_epoch, end_offset, pre_vote)


class PreVoteIgnoresLog(KRaftCore):
    """Grants every pre-vote it may, up-to-date log or not."""

    def _can_grant_vote(self, candidate_id: int, last_epoch: int, end_offset: int, pre_vote: bool = False) -> bool:
        if pre_vote and not isinstance(self.role, (Leader, Follower)):
            return True
        return super()._can_grant_vote(candidate_id, last_epoch, end_offset, pre_vote)


class ProspectiveAsksNextEpoch(KRaftCore):
    """A prospective's pre-votes name epoch + 1 (KIP-996: its current epoch)."""

    def _send(self, dest: int, req: Request) -> None:
        if isinstance(req, VoteRequest) and req.pre_vote:
            req = dataclasses.replace(req, candidate_epoch=req.candidate_epoch + 1)
        super()._send(dest, req)


class NoUnsupportedVersionFallback(KRaftCore):
    """A voter that cannot take Vote v2 (UNSUPPORTED_VERSION) is only an error to retry: the prospective keeps
    waiting for pre-votes (Kafka 4.x becomes a candidate at once)."""

    def handle_vote_response(self, sender_id: int, resp: VoteResponse) -> None:
        if resp.error == Errors.UNSUPPORTED_VERSION and isinstance(self.role, Prospective):
            self._request_failed(sender_id)
            return
        super().handle_vote_response(sender_id, resp)


# ------------------------------------------------------------------ KIP-630 snapshot faults (test_snapshots.py)


class NoSnapshotIdBelowLogStart(KRaftCore):
    """A leader that answers every Fetch from its log as if nothing were cleaned: never a SnapshotId; a Fetch
    below its log start gets the records from the log start on (KIP-630 "Handling Fetch Request")."""

    def _fetch_needs_snapshot(self, fetch_offset: int, last_fetched_epoch: int) -> SnapshotId | None:
        return None

    def handle_fetch_request(self, req: FetchRequest, reply_to: object = None) -> FetchResponse | None:
        start = self.log.start_offset
        if req.fetch_offset < start:
            earliest = self.log.start_snapshot
            epoch = earliest.epoch if earliest is not None else req.last_fetched_epoch
            req = dataclasses.replace(req, fetch_offset=start, last_fetched_epoch=epoch)
        return super().handle_fetch_request(req, reply_to)


class SnapshotChunkIgnoresMaxBytes(KRaftCore):
    """Serves the rest of the snapshot in one answer, whatever MaxBytes the FetchSnapshot asked."""

    def _snapshot_chunk_bytes(self, max_bytes: int) -> int:
        return 1 << 30


class SnapshotIgnoresPosition(KRaftCore):
    """Serves every FetchSnapshot from byte 0, whatever its Position."""

    def handle_fetch_snapshot_request(self, req: FetchSnapshotRequest) -> FetchSnapshotResponse:
        return super().handle_fetch_snapshot_request(dataclasses.replace(req, position=0))


class SnapshotAnyId(KRaftCore):
    """Serves its latest snapshot whatever SnapshotId the FetchSnapshot names (no SNAPSHOT_NOT_FOUND)."""

    def handle_fetch_snapshot_request(self, req: FetchSnapshotRequest) -> FetchSnapshotResponse:
        latest = self.latest_snapshot_id
        if latest is not None:
            req = dataclasses.replace(req, snapshot_id=latest)
        return super().handle_fetch_snapshot_request(req)


class SnapshotAnyEpoch(KRaftCore):
    """Serves a FetchSnapshot of a stale (or future) leader epoch as one of its own."""

    def handle_fetch_snapshot_request(self, req: FetchSnapshotRequest) -> FetchSnapshotResponse:
        return super().handle_fetch_snapshot_request(dataclasses.replace(req, current_leader_epoch=self.epoch))


class SnapshotNotInstalled(KRaftCore):
    """Downloads the whole snapshot, then drops it: the log stays as it was and the follower goes on fetching
    from its old log end, not from the snapshot's end (KIP-630 "Fetch Snapshot Response Handling")."""

    def _install_snapshot(self, snapshot_id: SnapshotId) -> None:
        self._out.log_ops.append(AbortSnapshotDownload(snapshot_id))


class RestartDropsLogAfterSnapshot(KRaftCore):
    """Restarts from its latest snapshot but drops the records its log held after it (KIP-630: the snapshot,
    then the log after it)."""

    @classmethod
    def restart(
        cls, config: CoreConfig, durable: ElectionState, log: Log, rng: random.Random, now_ms: int, *,
        snapshots: SnapshotSource | None = None, snapshot_ids: Sequence[SnapshotId] = (),
        start_snapshot: SnapshotLoaded | None = None,
    ) -> tuple[KRaftCore, Ready]:
        start = log.start_offset
        dropped = start > 0 and log.end_offset > start
        if dropped:
            log.truncate_to(start)
        core, ready = super().restart(config, durable, log, rng, now_ms, snapshots=snapshots,
                                      snapshot_ids=snapshot_ids, start_snapshot=start_snapshot)
        if dropped:
            ready.log_ops.insert(0, TruncateTo(start))
        return core, ready


# ---------------------------------------------------------------------------------------------- KIP-853 faults


class AckBeforeCommit(KRaftCore):
    """Answers AddRaftVoter and RemoveRaftVoter NONE as soon as the VotersRecord is appended, not once it commits
    (KIP-853 "AddRaftVoter/RemoveRaftVoter Request Handling": answered after the commit)."""

    def _add_completes_at_append(self) -> bool:
        return True

    def handle_remove_raft_voter_request(
        self, req: RemoveRaftVoterRequest, reply_to: object = None
    ) -> RemoveRaftVoterResponse | None:
        resp = super().handle_remove_raft_voter_request(req, reply_to)
        leader = self.role
        if resp is None and isinstance(leader, Leader) and leader.voter_change is not None:
            leader.voter_change = None  # no longer waits for the commit (nor resigns at it)
            return RemoveRaftVoterResponse(Errors.NONE)
        return resp


class NoCatchUpCheck(KRaftCore):
    """Adds a voter that has never fetched (KIP-853 AddRaftVoter: the new replica must be caught up)."""

    def _replica_caught_up(self, key: ReplicaKey, now_ms: int) -> bool:
        return True


class TwoChangesAtOnce(KRaftCore):
    """Accepts a voter change whatever is pending or uncommitted, and before its own epoch committed an entry
    (KIP-853 "Voter Changes": one uncommitted change at a time)."""

    def _voter_change_blocked(self, now_ms: int) -> Errors | None:
        self._expire_voter_change()
        return Errors.UNSUPPORTED_VERSION if self.kraft_version() < 1 else None


class VotersFromCommittedOnly(KRaftCore):
    """Takes the voter set in force from the last committed VotersRecord, not the latest appended one (KIP-853
    "Voter Changes"): HW, check quorum and elections use the committed set."""

    def _voter_set_for_quorum(self) -> VoterSet:
        committed = self._vh.voters_at(self._hw - 1) if self._hw > 0 else None
        return committed if committed is not None else super()._voter_set_for_quorum()


class IgnoreVoterKey(KRaftCore):
    """Takes every Vote and BeginQuorumEpoch as its own, whatever VoterId / VoterDirectoryId they name."""

    def _voter_key_ok(self, voter_id: int, voter_directory_id: str | None) -> bool:
        return True


class VoterKeyBeforeTransition(KRaftCore):
    """Checks a BeginQuorumEpoch's voter key before following its leader, and does not follow a misaddressed one
    (Kafka follows first: KafkaRaftClient.handleBeginQuorumEpochRequest)."""

    def handle_begin_quorum_epoch_request(self, req: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
        if self._cluster_id_ok(req.cluster_id) and not self._voter_key_ok(req.voter_id, req.voter_directory_id):
            return BeginQuorumEpochResponse(self.leader_id, self.epoch, partition_error=Errors.INVALID_VOTER_KEY)
        return super().handle_begin_quorum_epoch_request(req)


class RemoveIgnoresDirectoryId(KRaftCore):
    """Removes a voter named by its id alone, whatever directory id the request gives (KIP-853 RemoveRaftVoter: the
    exact voter key)."""

    def handle_remove_raft_voter_request(
        self, req: RemoveRaftVoterRequest, reply_to: object = None
    ) -> RemoveRaftVoterResponse | None:
        node = self._vh.last().node(req.voter_id)
        if node is not None and req.voter_directory_id is not None:
            req = dataclasses.replace(req, voter_directory_id=node.key.directory_id)
        return super().handle_remove_raft_voter_request(req, reply_to)


class NeverResignAfterRemoval(KRaftCore):
    """A leader whose own removal committed goes on leading (KIP-853 RemoveRaftVoter: it resigns)."""

    def _should_resign_after_removal(self) -> bool:
        return False


class AnyRoleChanges(KRaftCore):
    """A replica that is not the leader takes AddRaftVoter too, answering NONE (KIP-853 AddRaftVoter: only the leader
    changes the voter set; Kafka's validateLeaderOnlyRequest answers NOT_LEADER_OR_FOLLOWER)."""

    def handle_add_raft_voter_request(
        self, req: AddRaftVoterRequest, reply_to: object = None
    ) -> AddRaftVoterResponse | None:
        if not isinstance(self.role, Leader) and self._cluster_id_ok(req.cluster_id):
            return AddRaftVoterResponse(Errors.NONE)
        return super().handle_add_raft_voter_request(req, reply_to)


class NoConfigRollback(KRaftCore):
    """A follower that truncates a VotersRecord keeps that record's voter set in force (KIP-853 "Voter Changes":
    truncating it restores the previous set; Kafka's VoterSetHistory.truncateNewEntries), until a later
    VotersRecord arrives."""

    _sticky: tuple[int, VoterSet] | None = None  # (truncation offset, the set it should have dropped)

    def _truncate(self, offset: int) -> None:
        before, last = self._vh.last(), self._vh.last_offset()
        super()._truncate(offset)
        if last is not None and last >= offset and self._vh.last() != before:
            self._sticky = (offset, before)
            self._voter_set_changed()

    def _voter_set_for_quorum(self) -> VoterSet:
        sticky = self._sticky
        last = self._vh.last_offset()
        if sticky is not None and (last is None or last < sticky[0]):
            return sticky[1]
        return super()._voter_set_for_quorum()


class UpdateWaitsCommit(KRaftCore):
    """Answers UpdateRaftVoter once its VotersRecord commits (Kafka answers at once: UpdateVoterHandler appends the
    record and replies; a KAFKA-level difference, the KIP leaves it open)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: list[tuple[object, int, UpdateRaftVoterResponse]] = []

    def _on_request(self, inp: RequestReceived) -> None:
        req = inp.request
        if isinstance(req, UpdateRaftVoterRequest):
            end = self.log.end_offset
            resp = self.handle_update_raft_voter_request(req)
            if resp.error == Errors.NONE and self.log.end_offset > end:
                self._held.append((inp.reply_to, end, resp))  # its VotersRecord is at ``end``
                return
            self._out.replies.append(Reply(inp.reply_to, resp))
            return
        super()._on_request(inp)

    def _maybe_complete_voter_change(self) -> None:
        super()._maybe_complete_voter_change()
        done = [h for h in self._held if self._hw > h[1]]
        self._held = [h for h in self._held if h not in done]
        self._out.replies.extend(Reply(reply_to, resp) for reply_to, _, resp in done)


class NoNodeEndpoints(KRaftCore):
    """DescribeQuorum v2 lists the voters in Nodes without their listeners (KIP-853 DescribeQuorum; Kafka's
    RaftUtil.singletonDescribeQuorumResponse gives each voter's: a KAFKA-level difference)."""

    def handle_describe_quorum_request(self, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
        resp = super().handle_describe_quorum_request(req)
        # an empty ``nodes`` would let the shell fill Nodes from its address book: name the voters, no listeners
        return dataclasses.replace(resp, nodes=tuple(NodeListeners(r.replica_id, ()) for r in resp.voters))


class NeverUpdates(KRaftCore):
    """A follower voter never sends UpdateRaftVoter, whatever its entry in the voter set says (KIP-853; Kafka's
    KafkaRaftClient.pollFollowerAsVoter every 3 x fetch timeout)."""

    def _update_voter_due(self, role: Follower) -> bool:
        return False


class RemovedStillCounts(KRaftCore):
    """Check quorum counts the fetches of a replica that was a voter of any set in the log, a removed one included
    (KIP-853: the voters of the latest VotersRecord; Kafka's LeaderState.updateCheckQuorumForFollowingVoter)."""

    def _note_fetch_from(self, replica_id: int) -> None:
        leader = self.role
        key = ReplicaKey(replica_id, self._fetch_directory_id)
        if (isinstance(leader, Leader) and replica_id != self.config.node_id and not self._voters().is_voter(key)
                and any(vs.is_voter(key) for _, vs in self._vh.entries())):
            leader.fetched_voters, leader.progress_deadline_ms = frozenset(), self._now + self.check_quorum_timeout_ms
            return
        super()._note_fetch_from(replica_id)


class TimeoutRollsBack(KRaftCore):
    """An AddRaftVoter that times out is undone: the leader appends a VotersRecord of the set before it (Kafka leaves
    the record, in force: KafkaRaftClientReconfigTest.testAddVoterTimeout)."""

    def voter_change_timeout(self) -> None:
        leader = self.role
        change = leader.voter_change if isinstance(leader, Leader) else None
        super().voter_change_timeout()
        if change is not None and change.kind == "add" and change.offset is not None:
            previous = self._vh.voters_at(change.offset - 1)
            if previous is not None:
                self._append_voters_record(previous, None)


class NeverExpireSessions(Controller):
    def _expired(self, broker_id: int, now_ms: int) -> bool:
        return False  # a broker that stopped heartbeating is never fenced


#: Broker faults: the node's controller is replaced by one of these (the Raft core stays correct).
CONTROLLER_FAULTS: dict[str, type[Controller]] = {
    "never-fence-expired": NeverExpireSessions,
}

FAULTS: dict[str, type[KRaftCore]] = {
    "skip-truncation": SkipTruncation,
    "truncate-below-hw": TruncateBelowHighWatermark,
    "forget-vote": ForgetVote,
    "never-resign": NeverResign,
    "ignore-cluster-id": IgnoreClusterId,
    "observers-count": ObserversCount,
    "needs-unanimity": NeedsUnanimity,
    "refusal-counts": RefusalCounts,
    "no-epoch-bump": NoEpochBump,
    "observers-keep-leader": ObserversKeepLeader,
    "any-fetch-keeps-leader": AnyFetchKeepsLeader,
    "check-quorum-never-reset": CheckQuorumNeverReset,
    "successors-least-first": SuccessorsLeastCaughtUpFirst,
    "caught-up-is-last-fetch": CaughtUpIsLastFetch,
    "observers-unlisted": ObserversUnlisted,
    "halt-below-hw": HaltBelowHighWatermark,  # Kafka's behaviour, no fault: the catalog passes
    "no-pre-vote": NoPreVote,
    "pre-vote-bumps-epoch": PreVoteBumpsEpoch,
    "follower-grants-pre-vote": FollowerGrantsPreVote,
    "pre-vote-ignores-log": PreVoteIgnoresLog,
    "prospective-asks-next-epoch": ProspectiveAsksNextEpoch,
    "no-unsupported-fallback": NoUnsupportedVersionFallback,
    "no-snapshot-id-below-log-start": NoSnapshotIdBelowLogStart,
    "snapshot-chunk-ignores-max-bytes": SnapshotChunkIgnoresMaxBytes,
    "snapshot-ignores-position": SnapshotIgnoresPosition,
    "snapshot-any-id": SnapshotAnyId,
    "snapshot-any-epoch": SnapshotAnyEpoch,
    "snapshot-not-installed": SnapshotNotInstalled,
    "restart-drops-log-after-snapshot": RestartDropsLogAfterSnapshot,
    "ack-before-commit": AckBeforeCommit,
    "no-catch-up-check": NoCatchUpCheck,
    "two-changes-at-once": TwoChangesAtOnce,
    "voters-from-committed-only": VotersFromCommittedOnly,
    "ignore-voter-key": IgnoreVoterKey,
    "voter-key-before-transition": VoterKeyBeforeTransition,
    "never-resign-after-removal": NeverResignAfterRemoval,
    "remove-ignores-dir-id": RemoveIgnoresDirectoryId,
    "any-role-changes": AnyRoleChanges,
    "no-config-rollback": NoConfigRollback,
    "update-waits-commit": UpdateWaitsCommit,
    "no-node-endpoints": NoNodeEndpoints,
    "never-updates": NeverUpdates,
    "removed-still-counts": RemovedStillCounts,
    "timeout-rolls-back": TimeoutRollsBack,
    "none": KRaftCore,
}


def node_arg(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


async def run_node(
    cfg: NodeConfig, trace: str | None, factory: Any, controller: type[Controller] | None = None,
    node_class: type[Node] = Node,
) -> None:
    """Run a ``node_class`` with ``factory`` as its core (and ``controller`` as its active controller) until
    SIGTERM."""
    node = node_class(cfg, trace_file=trace, core_factory=factory)
    if controller is not None:
        node.brokers = BrokerDriver(cfg.broker_session_timeout_ms, is_voter=node.brokers.is_voter,
                                    controller_class=controller)
    await node.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await node.stop(graceful=False)


def main(argv: list[str]) -> None:
    fault = os.environ.get("KRAFT_TCK_FAULT", "none")
    if fault not in FAULTS and fault not in CONTROLLER_FAULTS:
        known = ", ".join(sorted([*FAULTS, *CONTROLLER_FAULTS]))
        raise SystemExit(f"KRAFT_TCK_FAULT={fault!r}: expected one of {known}")
    config = node_arg(argv, "--config")
    if argv[:1] != ["node"] or config is None:
        raise SystemExit("usage: faulty_node.py node --config FILE [--trace-file FILE]")
    core = FAULTS.get(fault, KRaftCore)
    cfg = NodeConfig.load(config)
    # KRAFT_TCK_PRE_VOTE=true|false: run with reference.quorum.pre.vote set so (KIP-996; the pre-vote faults
    # need it on, and the whole catalog is run both ways).
    pre_vote = os.environ.get("KRAFT_TCK_PRE_VOTE")
    if pre_vote is not None:
        cfg = dataclasses.replace(cfg, pre_vote=pre_vote.strip().lower() == "true")
    asyncio.run(run_node(cfg, node_arg(argv, "--trace-file"), core, CONTROLLER_FAULTS.get(fault)))


if __name__ == "__main__":
    main(sys.argv[1:])
