"""Mutation suite: small, plausible bugs in the reference node, one per test-only subclass.

Each mutant overrides one rule of the core (reference/core.py: the "Fault injection" methods, the named
handlers and helpers) or, for the shell's ordering of persist and send, one method of the shell
(reference/node.py ``Node._apply_ready``). Nothing here is a flag in the product. ``MUTANTS`` maps a name
to the class(es), the KIP clause or Kafka behaviour the bug breaks, and the conformance case ids expected
to catch it; ``launcher.py`` runs the node with the mutant named by ``KRAFT_TCK_MUTANT``, and
``bench/mutants.py`` runs the catalog against every mutant and prints which cases caught it.

``expect`` lists the case ids (first the one the mutant is aimed at; others that may fail first, the
catalog running in file order and stopping at the first failure). A ``pending:`` entry names a scenario
the catalog does not have yet: such a mutant lives in ``SURVIVORS`` (run and reported as a survivor by
``make mutants``), never in ``MUTANTS`` (the registry test refuses it there); ``white-box`` marks a bug no
scenario can see on the wire, ``unobservable`` saying why and tests/mutants/whitebox.py checking it.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from kraft_tck.reference.controller import Controller
from kraft_tck.reference.core import KRaftCore
from kraft_tck.reference.io import ElectionState, Ready, SnapshotLoaded
from kraft_tck.reference.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    ApiVersionsResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    ReplicaKey,
    ReplicaState,
    Request,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    VoteRequest,
    VoteResponse,
)
from kraft_tck.reference.node import Node
from kraft_tck.reference.roles import Candidate, Follower, Leader, ReplicaProgress, Resigned, Role, Unattached, Voted
from kraft_tck.reference.storage import QuorumStateData
from kraft_tck.reference.voters import VoterHistory, VoterSet
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import RecordBatch, data_batch

HERE = Path(__file__).resolve().parent
FAULTY_NODE = HERE.parent / "conformance" / "faulty_node.py"


def _load_faulty_node() -> ModuleType:
    """tests/conformance/faulty_node.py (no package: loaded by path), whose faults are registered below."""
    name = "kraft_tck_faulty_node"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, FAULTY_NODE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_faulty = _load_faulty_node()


def _request_ok(core: KRaftCore, cluster_id: str | None, valid_partition: bool) -> bool:
    """The checks every handler makes before it looks at epochs (cluster id, topic/partition)."""
    return core._cluster_id_ok(cluster_id) and valid_partition


# ================================================================================ Vote request handling


class VoteIgnoresLastEpoch(KRaftCore):
    """Compares only the log end offsets: a candidate whose log ends in an older epoch but runs longer
    gets the vote (KIP-595 "Vote Request Handling": last epoch first, then the offset)."""

    def _can_grant_vote(self, candidate_id: int, last_epoch: int, end_offset: int, pre_vote: bool = False) -> bool:
        if isinstance(self.role, Unattached):
            return end_offset >= self.log.end_offset
        return super()._can_grant_vote(candidate_id, last_epoch, end_offset, pre_vote)


class VoteIgnoresLogEnd(KRaftCore):
    """Compares only the last epochs: a candidate with a shorter log of the same epoch gets the vote."""

    def _can_grant_vote(self, candidate_id: int, last_epoch: int, end_offset: int, pre_vote: bool = False) -> bool:
        if isinstance(self.role, Unattached):
            return last_epoch >= self.last_epoch
        return super()._can_grant_vote(candidate_id, last_epoch, end_offset, pre_vote)


class VoteGrantsStaleLog(KRaftCore):
    """No election restriction at all: any candidate of a new epoch gets the vote."""

    def _can_grant_vote(self, candidate_id: int, last_epoch: int, end_offset: int, pre_vote: bool = False) -> bool:
        if isinstance(self.role, Unattached):
            return True
        return super()._can_grant_vote(candidate_id, last_epoch, end_offset, pre_vote)


class VoteTwicePerEpoch(KRaftCore):
    """A voter that already voted in this epoch votes again for another candidate (VoteOnce)."""

    def _can_grant_vote(self, candidate_id: int, last_epoch: int, end_offset: int, pre_vote: bool = False) -> bool:
        role = self.role
        if isinstance(role, Voted):
            return (last_epoch, end_offset) >= (self.last_epoch, self.log.end_offset)
        return super()._can_grant_vote(candidate_id, last_epoch, end_offset, pre_vote)


class LeaderGrantsOwnEpoch(KRaftCore):
    """The leader of an epoch grants a vote in that same epoch, its role unchecked (two leaders possible).
    (Granting only an up-to-date log would be an equivalent mutant: a leader always holds its LeaderChange
    record, and a candidate of the same epoch cannot hold a record of it.)"""

    def _can_grant_vote(self, candidate_id: int, last_epoch: int, end_offset: int, pre_vote: bool = False) -> bool:
        if isinstance(self.role, Leader):
            return True
        return super()._can_grant_vote(candidate_id, last_epoch, end_offset, pre_vote)


class FollowerGrantsOwnEpoch(KRaftCore):
    """A follower that knows the leader of its epoch grants a vote in that epoch."""

    def _can_grant_vote(self, candidate_id: int, last_epoch: int, end_offset: int, pre_vote: bool = False) -> bool:
        if isinstance(self.role, Follower):
            return (last_epoch, end_offset) >= (self.last_epoch, self.log.end_offset)
        return super()._can_grant_vote(candidate_id, last_epoch, end_offset, pre_vote)


class LeaderRefusesHigherEpochVote(KRaftCore):
    """A leader asked for a vote in a higher epoch refuses it and keeps leading its old epoch, instead of
    moving to the candidate's epoch first (KafkaRaftClient.handleVoteRequest: transitionToUnattached)."""

    def handle_vote_request(self, req: VoteRequest) -> VoteResponse:
        if (
            isinstance(self.role, Leader)
            and req.candidate_epoch > self.epoch
            and _request_ok(self, req.cluster_id, req.valid_partition)
            and 0 <= req.last_offset_epoch < req.candidate_epoch
            and req.last_offset >= 0
        ):
            self._emit("HandleVoteRequest", note=f"refused {req.candidate_id}: still leading")
            return VoteResponse(self.leader_id, self.epoch, False)
        return super().handle_vote_request(req)


class VoteAnswerOldEpoch(KRaftCore):
    """A granted vote is answered with the voter's epoch from before the request (the candidate's
    epoch is adopted, but the response is built from the old state)."""

    def handle_vote_request(self, req: VoteRequest) -> VoteResponse:
        before = self.epoch
        resp = super().handle_vote_request(req)
        return replace(resp, leader_epoch=before) if resp.vote_granted else resp


class VoteFencedNamesCandidateEpoch(KRaftCore):
    """A Vote of an older epoch is refused with FENCED_LEADER_EPOCH, but the answer echoes the candidate's
    epoch instead of the voter's own (the candidate never learns the newer epoch)."""

    def handle_vote_request(self, req: VoteRequest) -> VoteResponse:
        resp = super().handle_vote_request(req)
        if resp.partition_error == Errors.FENCED_LEADER_EPOCH:
            return replace(resp, leader_epoch=req.candidate_epoch)
        return resp


# ================================================================================ Vote response / elections


class CandidateCountsRefusals(KRaftCore):
    """Counts every answered Vote as a grant: a candidate refused by everyone still becomes leader."""

    def handle_vote_response(self, sender_id: int, resp: VoteResponse) -> None:
        if resp.error == Errors.NONE and resp.partition_error == Errors.NONE:
            resp = replace(resp, vote_granted=True)
        super().handle_vote_response(sender_id, resp)


class MajorityMiscount(KRaftCore):
    """Majority computed as ``n // 2`` instead of ``n // 2 + 1``: a 3-voter candidate elects itself and a
    leader commits entries alone (KIP-595 "Vote Response Handling" 2; "Fetch Request Handling" 4). The core
    counts every majority (votes, pre-votes, the high watermark) with ``_majority`` over the voter set in force
    (KIP-853); ``CoreConfig.majority`` is no longer read, so overriding it changed nothing."""

    def _majority(self) -> int:
        return len(self._voter_ids()) // 2


class NoElectionOnFetchTimeout(KRaftCore):
    """A follower whose leader went silent never starts an election (the fetch timeout only rearms)."""

    def _fire_timers(self) -> None:
        role = self.role
        if isinstance(role, Follower) and role.deadline_cause == "FetchTimeout" and self._now >= role.fetch_deadline_ms:
            role.fetch_deadline_ms = self._now + self.config.fetch_timeout_ms
        super()._fire_timers()


class ElectionSkipsAnEpoch(KRaftCore):
    """A new election starts in epoch + 2 (KIP-595 "Leader Election": the candidate bumps its epoch by one)."""

    def _transition(self, role: Role) -> None:
        if isinstance(role, Candidate) and not isinstance(self.role, Candidate):
            role = replace(role, epoch=role.epoch + 1)
        super()._transition(role)


class CandidateUnderstatesLog(KRaftCore):
    """The Vote request reports LastOffset one below the candidate's log end."""

    def _send(self, dest: int, req: Request) -> None:
        if isinstance(req, VoteRequest) and req.last_offset > 0:
            req = replace(req, last_offset=req.last_offset - 1)
        super()._send(dest, req)


class CandidateAsksOneVoter(KRaftCore):
    """A candidate sends its Vote request to the first other voter only."""

    def _due_destinations(self) -> list[int]:
        due = super()._due_destinations()
        if isinstance(self.role, Candidate):
            return due[:1]
        return due


class CandidateNeverRetries(KRaftCore):
    """After a lost election the candidate waits forever instead of retrying after its backoff."""

    def start_election(self, cause: str) -> None:
        role = self.role
        if cause == "ElectionBackoff" and isinstance(role, Candidate):
            role.backoff_until_ms = None
            role.election_deadline_ms = self._now + 10**9
            return
        super().start_election(cause)


class ObserverElectsItself(KRaftCore):
    """An observer whose leader went silent stands for election (KIP-595: only voters are candidates)."""

    def _fire_timers(self) -> None:
        role = self.role
        if (
            not self.config.is_voter
            and isinstance(role, Follower)
            and self._now >= role.fetch_deadline_ms
            and not self._shutting_down
        ):
            self.start_election("FetchTimeout")
            return
        super()._fire_timers()


class RequestsWithoutClusterId(KRaftCore):
    """The node's own requests carry a null ClusterId (KIP-595 "Cluster Id": every request names it)."""

    def _send(self, dest: int, req: Request) -> None:
        if hasattr(req, "cluster_id"):
            req = replace(req, cluster_id=None)
        super()._send(dest, req)


# ================================================================================ BeginQuorumEpoch


class BeginEpochNoFencing(KRaftCore):
    """A BeginQuorumEpoch of an older epoch is acknowledged (no FENCED_LEADER_EPOCH)."""

    def handle_begin_quorum_epoch_request(self, req: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
        if req.leader_epoch < self.epoch and _request_ok(self, req.cluster_id, req.valid_partition):
            self._emit("HandleBeginQuorumEpochRequest", note="stale epoch acknowledged")
            return BeginQuorumEpochResponse(self.leader_id, self.epoch)
        return super().handle_begin_quorum_epoch_request(req)


class BeginEpochFencedNamesRequestEpoch(KRaftCore):
    """The FENCED_LEADER_EPOCH answer to a stale BeginQuorumEpoch names the request's epoch, not ours."""

    def handle_begin_quorum_epoch_request(self, req: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
        resp = super().handle_begin_quorum_epoch_request(req)
        if resp.partition_error == Errors.FENCED_LEADER_EPOCH:
            return replace(resp, leader_epoch=req.leader_epoch)
        return resp


class BeginEpochForgetsLeader(KRaftCore):
    """BeginQuorumEpoch of a higher epoch moves to that epoch but does not follow the announced leader."""

    def handle_begin_quorum_epoch_request(self, req: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
        if req.leader_epoch > self.epoch and _request_ok(self, req.cluster_id, req.valid_partition):
            self._become_unattached(req.leader_epoch)
            self._emit("HandleBeginQuorumEpochRequest", note="epoch adopted, leader forgotten")
            return BeginQuorumEpochResponse(self.leader_id, self.epoch)
        return super().handle_begin_quorum_epoch_request(req)


class LeaderSkipsBeginEpoch(KRaftCore):
    """A new leader never announces itself with BeginQuorumEpoch (KIP-595 "Vote Response Handling" 2)."""

    def become_leader(self) -> None:
        super().become_leader()
        if isinstance(self.role, Leader):
            self.role.begin_epoch_deadline_ms = 1 << 62  # the heartbeat timer never expires


class LeaderChangeMissing(KRaftCore):
    """A new leader starts its epoch with a plain data record instead of the LeaderChange control record."""

    def _append_as_leader(self, batches: list[RecordBatch]) -> None:
        if batches and batches[0].is_control:
            first = batches[0]
            batches = [data_batch(first.base_offset, first.partition_leader_epoch, [b"noop"], timestamp=self._now),
                       *batches[1:]]
        super()._append_as_leader(batches)


# ================================================================================ EndQuorumEpoch / resigning


class SuccessorsLeastCaughtUpFirst(KRaftCore):
    """PreferredSuccessors sorted least caught-up first (KIP-595 "EndQuorumEpoch": most caught-up first,
    the ones that can win the next election)."""

    def _become_resigned(self, cause: str) -> None:
        leader = self.role
        assert isinstance(leader, Leader)
        super()._become_resigned(cause)
        me = self.config.node_id
        others = [leader.replicas.get(v, ReplicaProgress(v)) for v in self.config.voters if v != me]
        order = tuple(p.replica_id for p in sorted(others, key=lambda p: (p.end_offset, p.replica_id)))
        role = self.role
        assert isinstance(role, Resigned)
        role.preferred_successors = order


class EndEpochIgnored(KRaftCore):
    """EndQuorumEpoch from our leader is acknowledged but changes nothing: the follower waits out its fetch
    timeout (never comes, the leader still answers) instead of standing at once as first successor."""

    def handle_end_quorum_epoch_request(self, req: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
        role = self.role
        if (
            isinstance(role, Follower)
            and role.leader_id == req.leader_id
            and role.epoch == req.leader_epoch
            and _request_ok(self, req.cluster_id, req.valid_partition)
        ):
            self._emit("HandleEndQuorumEpochRequest", note="ignored")
            return EndQuorumEpochResponse(self.leader_id, self.epoch)
        return super().handle_end_quorum_epoch_request(req)


class FirstSuccessorBacksOff(KRaftCore):
    """Every successor, the first included, waits election.backoff.max.ms (Kafka's
    endEpochElectionBackoff: 0 for the first preferred successor)."""

    def _end_epoch_backoff_ms(self, successors: tuple[int, ...]) -> int:
        return self.config.election_backoff_max_ms


class ResignWithoutEndEpoch(KRaftCore):
    """A leader that gives up tells nobody (no EndQuorumEpoch) and just waits for its election timeout: no
    sign of giving up reaches the voters until its Vote, after the check-quorum timeout plus an election
    timeout."""

    def _become_resigned(self, cause: str) -> None:
        super()._become_resigned(cause)
        role = self.role
        assert isinstance(role, Resigned)
        role.awaiting_end_epoch = frozenset()


# ================================================================================ Fetch: leader side


class FetchNoDivergenceCheck(KRaftCore):
    """The leader never answers DivergingEpoch (KIP-595 "Fetch Request Handling" step 3)."""

    def _diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        return None


class FetchDivergingOffByOne(KRaftCore):
    """DivergingEpoch names the end offset of the epoch plus one (the first offset after it is counted in)."""

    def _diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        div = super()._diverging_epoch(fetch_offset, last_fetched_epoch)
        return None if div is None else (div[0], div[1] + 1)


class FetchFencedWithoutLeader(KRaftCore):
    """Fetch errors carry no CurrentLeader (KIP-595 "Fetch Request Handling" step 2: the fetcher learns the
    leader from it)."""

    def _fetch_error(self, error: Errors) -> FetchResponse:
        return FetchResponse(-1, partition_error=error)


class FetchNewerEpochFenced(KRaftCore):
    """A Fetch of a newer epoch than the leader's is answered FENCED_LEADER_EPOCH instead of
    UNKNOWN_LEADER_EPOCH."""

    def _validate_leader_only_request(self, request_epoch: int) -> Errors | None:
        if request_epoch > self.epoch:
            return Errors.FENCED_LEADER_EPOCH
        return super()._validate_leader_only_request(request_epoch)


class FetchNotLeaderWithoutHint(KRaftCore):
    """A follower asked to serve a Fetch answers NOT_LEADER_OR_FOLLOWER without naming the leader it knows."""

    def _fetch_error(self, error: Errors) -> FetchResponse:
        resp = super()._fetch_error(error)
        if error == Errors.NOT_LEADER_OR_FOLLOWER:
            return replace(resp, current_leader=LeaderIdAndEpoch(-1, self.epoch))
        return resp


class HwCommitsOldEpoch(KRaftCore):
    """The leader's high watermark moves to a majority's offset even before an entry of its own epoch is
    there (Raft's Figure 8; KIP-595 "Fetch Request Handling" step 4)."""

    def _maybe_advance_high_watermark(self) -> None:
        leader = self.role
        if not isinstance(leader, Leader):
            return
        offsets = sorted((p.end_offset for rid, p in leader.replicas.items() if self._counts_toward_hw(rid)),
                         reverse=True)
        if len(offsets) >= self.config.majority:
            self._set_high_watermark(offsets[self.config.majority - 1])


class HwNeedsEveryVoter(KRaftCore):
    """The high watermark is the smallest offset of all voters (every voter, not a majority, must hold an
    entry before it commits)."""

    def _maybe_advance_high_watermark(self) -> None:
        leader = self.role
        if not isinstance(leader, Leader):
            return
        offsets = [p.end_offset for rid, p in leader.replicas.items() if self._counts_toward_hw(rid)]
        if offsets and min(offsets) > leader.epoch_start_offset:
            self._set_high_watermark(min(offsets))


class HwPublishedBeforeOwnEpoch(KRaftCore):
    """A new leader publishes the high watermark it knew as follower instead of -1 until an entry of its
    epoch commits (Kafka's LeaderState: unknown; a KAFKA-level choice)."""

    def _published_hw(self) -> int:
        return self._hw


class DivergingFetchIsProgress(KRaftCore):
    """A fetch answered with DivergingEpoch still records the replica's FetchOffset as its progress (and
    may commit records the replica does not have)."""

    def handle_fetch_request(self, req: FetchRequest, reply_to: object = None) -> FetchResponse | None:
        resp = super().handle_fetch_request(req, reply_to)
        if resp is not None and resp.diverging_epoch is not None and isinstance(self.role, Leader):
            self._update_replica_progress(req.replica_id, req.fetch_offset)
        return resp


# ================================================================================ Fetch: follower side


class TruncateToLeaderEndOffset(KRaftCore):
    """Truncates to the leader's DivergingEpoch end offset whatever the follower's own epochs say."""

    def _truncation_point(self, diverging_epoch: int, diverging_end_offset: int) -> int:
        return min(diverging_end_offset, self.log.end_offset)


class FollowerDropsLeaderHint(KRaftCore):
    """A follower answered FENCED_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER ignores the CurrentLeader it names
    and keeps asking its old leader (KafkaRaftClient.maybeHandleCommonResponse follows the hint)."""

    def handle_fetch_response(self, sender_id: int, resp: FetchResponse) -> None:
        if resp.error == Errors.NONE and resp.partition_error in (
            Errors.FENCED_LEADER_EPOCH,
            Errors.NOT_LEADER_OR_FOLLOWER,
        ):
            self._request_failed(sender_id)
            self._emit("HandleFetchResponse", note=f"{resp.partition_error.name}: hint dropped")
            return
        super().handle_fetch_response(sender_id, resp)


class FollowerHwAheadOfLog(KRaftCore):
    """A follower takes the leader's HighWatermark as is, even past its own log end (KIP-595 "Fetch
    Response Handling": the follower's high watermark is min(leader's, its log end))."""

    _raw_hw: int | None = None

    def handle_fetch_response(self, sender_id: int, resp: FetchResponse) -> None:
        self._raw_hw = resp.high_watermark
        try:
            super().handle_fetch_response(sender_id, resp)
        finally:
            self._raw_hw = None

    def _set_high_watermark(self, offset: int) -> None:
        if self._raw_hw is not None and isinstance(self.role, Follower):
            offset = max(offset, self._raw_hw)
        super()._set_high_watermark(offset)


class FollowerHwBackwards(KRaftCore):
    """A follower sets its high watermark to whatever the leader says, lower values included
    (HighWatermarkMonotonic)."""

    def _set_high_watermark(self, offset: int) -> None:
        if isinstance(self.role, Follower) and 0 <= offset < self.high_watermark:
            self._hw = offset
            self._out.high_watermark = offset
            return
        super()._set_high_watermark(offset)


class FollowerIgnoresHw(KRaftCore):
    """A follower never learns the high watermark from its leader's Fetch responses."""

    def _set_high_watermark(self, offset: int) -> None:
        if isinstance(self.role, Follower):
            return
        super()._set_high_watermark(offset)


class FetchWrongLastEpoch(KRaftCore):
    """Fetch's LastFetchedEpoch is the current leader epoch, not the epoch of the last record."""

    def send_fetch_request(self, dest_id: int, max_wait_ms: int | None = None) -> None:
        req = FetchRequest(
            cluster_id=self._cluster_id,
            replica_id=self.config.node_id,
            current_leader_epoch=self.epoch,
            fetch_offset=self.log.end_offset,
            last_fetched_epoch=self.epoch if self.log.end_offset > 0 else 0,
            max_wait_ms=self.config.fetch_max_wait_ms if max_wait_ms is None else max_wait_ms,
            max_bytes=self.config.fetch_max_bytes,
        )
        self._send(dest_id, req)
        self._emit("SendFetchRequest", note=f"to {dest_id} at {req.fetch_offset}/{req.last_fetched_epoch}")


class FollowerFetchTimerNotReset(KRaftCore):
    """A successful fetch does not push the follower's fetch timeout back: it starts an election every
    fetch timeout even though its leader answers."""

    def handle_fetch_response(self, sender_id: int, resp: FetchResponse) -> None:
        role = self.role
        before = (role.fetch_deadline_ms, role.deadline_cause) if isinstance(role, Follower) else None
        super().handle_fetch_response(sender_id, resp)
        if before is not None and self.role is role and isinstance(role, Follower):
            role.fetch_deadline_ms, role.deadline_cause = before


# ================================================================================ check quorum


class ObserverFetchKeepsLeader(KRaftCore):
    """Fetches from observers keep the leader in office (KIP-595 "Leader Progress Timeout": only voters;
    Kafka's LeaderState.updateCheckQuorumForFollowingVoter)."""

    def _note_fetch_from(self, replica_id: int) -> None:
        leader = self.role
        if not isinstance(leader, Leader) or replica_id < 0 or replica_id == self.config.node_id:
            return
        fetched = leader.fetched_voters | {replica_id}
        if len(fetched) + 1 >= self.config.majority:
            fetched, leader.progress_deadline_ms = frozenset(), self._now + self.check_quorum_timeout_ms
        leader.fetched_voters = fetched


class CheckQuorumNeverReset(KRaftCore):
    """Voters' fetches never restart the check-quorum timer: the leader resigns 1.5 x fetch.timeout after
    its election whatever happens."""

    def _note_fetch_from(self, replica_id: int) -> None:
        return None


class CheckQuorumAnyVoter(KRaftCore):
    """One voter's fetch restarts the check-quorum timer (a minority keeps the leader in office; the same
    as a majority only in a 3-voter quorum)."""

    def _note_fetch_from(self, replica_id: int) -> None:
        leader = self.role
        if isinstance(leader, Leader) and replica_id in self.config.voters and replica_id != self.config.node_id:
            leader.fetched_voters = frozenset()
            leader.progress_deadline_ms = self._now + self.check_quorum_timeout_ms


# ================================================================================ DescribeQuorum (KIP-836)


class CaughtUpIsLastFetch(KRaftCore):
    """LastCaughtUpTimestamp reported as the last fetch time, caught up or not (KIP-836)."""

    def _update_replica_progress(self, replica_id: int, fetch_offset: int) -> None:
        super()._update_replica_progress(replica_id, fetch_offset)
        leader = self.role
        if isinstance(leader, Leader) and replica_id in leader.replicas:
            p = leader.replicas[replica_id]
            p.last_caught_up_ms = p.last_fetch_ms


class DescribeUnknownAsZero(KRaftCore):
    """Replicas that never fetched are reported with 0 instead of -1 (unknown)."""

    def handle_describe_quorum_request(self, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
        resp = super().handle_describe_quorum_request(req)

        def fix(r: ReplicaState) -> ReplicaState:
            return ReplicaState(r.replica_id, max(r.log_end_offset, 0), max(r.last_fetch_timestamp, 0),
                                max(r.last_caught_up_timestamp, 0))

        return replace(resp, voters=tuple(map(fix, resp.voters)), observers=tuple(map(fix, resp.observers)))


class DescribeLastOffsetNotEnd(KRaftCore):
    """LogEndOffset reported as the last offset (end - 1) of each replica."""

    def handle_describe_quorum_request(self, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
        resp = super().handle_describe_quorum_request(req)

        def fix(r: ReplicaState) -> ReplicaState:
            end = r.log_end_offset - 1 if r.log_end_offset > 0 else r.log_end_offset
            return replace(r, log_end_offset=end)

        return replace(resp, voters=tuple(map(fix, resp.voters)), observers=tuple(map(fix, resp.observers)))


class FetchTimestampFirstFetch(KRaftCore):
    """LastFetchTimestamp keeps the first fetch's time instead of the last one."""

    def _update_replica_progress(self, replica_id: int, fetch_offset: int) -> None:
        leader = self.role
        old = leader.replicas.get(replica_id) if isinstance(leader, Leader) else None
        first = old.last_fetch_ms if old is not None else -1
        super()._update_replica_progress(replica_id, fetch_offset)
        if first >= 0 and isinstance(leader, Leader) and replica_id in leader.replicas:
            leader.replicas[replica_id].last_fetch_ms = first


class DescribeNonLeaderAnswers(KRaftCore):
    """A non-leader answers DescribeQuorum with its own view and no error (KIP-595 "DescribeQuorum Request
    Handling" 1: NOT_LEADER_OR_FOLLOWER)."""

    def handle_describe_quorum_request(self, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
        if req.unknown is None and not isinstance(self.role, Leader):
            self._emit("HandleDescribeQuorumRequest", note="answered as non-leader")
            return DescribeQuorumResponse(self.leader_id, self.epoch, self._hw)
        return super().handle_describe_quorum_request(req)


# ================================================================================ recovery on restart


class RestartForgetsVote(KRaftCore):
    """A restarted voter that had voted comes back Unattached: quorum-state's VotedId is not read back."""

    def _initial_role(self, durable: ElectionState) -> Role:
        role = super()._initial_role(durable)
        if isinstance(role, Voted):
            return Unattached(role.epoch, role.election_deadline_ms)
        return role


class RestartIgnoresQuorumState(KRaftCore):
    """A restarted node takes its epoch from the log only, ignoring quorum-state (KIP-595 "Persistence")."""

    def _initial_role(self, durable: ElectionState) -> Role:
        return super()._initial_role(ElectionState(0, -1, -1, durable.voters))


class RestartResumesLeadership(KRaftCore):
    """A leader restarted after kill -9 leads the same epoch again instead of resigning (Kafka's
    QuorumState.initialize: a leader comes back Resigned)."""

    def _initial_role(self, durable: ElectionState) -> Role:
        me, voters = self.config.node_id, self.config.voters
        if durable.leader_id == me and self.config.is_voter and self.log.last_fetched_epoch <= durable.leader_epoch:
            return Leader(
                epoch=durable.leader_epoch,
                epoch_start_offset=self.log.end_offset,
                granting_voters=frozenset({me}),
                replicas={v: ReplicaProgress(v) for v in sorted(voters)},
                begin_epoch_deadline_ms=self._now,  # announce itself again at once
                progress_deadline_ms=self._now + self.check_quorum_timeout_ms,
            )
        return super()._initial_role(durable)


class RestartForgetsLeader(KRaftCore):
    """A restarted follower comes back Unattached: quorum-state's LeaderId is not read back."""

    def _initial_role(self, durable: ElectionState) -> Role:
        role = super()._initial_role(durable)
        if isinstance(role, Follower):
            deadline = self._random_election_deadline() if self.config.is_voter else None
            return Unattached(role.epoch, deadline)
        return role


# ================================================================================ the shell


class VotePersistedAfterGrant(Node):
    """The shell sends the step's messages first and writes quorum-state 300 ms later (a write-behind
    store): a vote is announced before it is durable (KIP-595 "Vote Request Handling": persisted before the
    response; reference/io.py's order)."""

    DELAY_S = 0.3

    #: The same ordering in the simulator's shell (``SimConfig.persist_after_send_ms``, bench/mutants_sim.py).
    SIM_PERSIST_AFTER_SEND_MS = (300, 300)

    def _delay_s(self) -> float:
        return self.DELAY_S

    def _apply_ready(self, ready: Ready) -> None:
        persist, ready.persist = ready.persist, None
        super()._apply_ready(ready)
        if persist is not None and self._loop is not None:
            self._loop.call_later(self._delay_s(), self._write_late, persist)

    def _write_late(self, p: ElectionState) -> None:
        if self.storage is None or self.failure is not None or self._stopping:
            return
        self.storage.write_quorum_state(
            QuorumStateData(leader_epoch=p.leader_epoch, leader_id=p.leader_id, voted_id=p.voted_id,
                        current_voters=tuple(sorted(self.config.voter_ids)))
        )


class VoteWriteBehindJitter(VotePersistedAfterGrant):
    """As ``VotePersistedAfterGrant``, but the write-behind delay is drawn uniformly in [0, 20] ms per step: a
    short, varying crash window that one kill -9 may miss (the repeated kills of KIP-595/CrashWindow/1 catch
    it with a stated probability; see conformance/test_crashwindow.py)."""

    MAX_DELAY_S = 0.02
    SIM_PERSIST_AFTER_SEND_MS = (0, 20)

    def _delay_s(self) -> float:
        return random.uniform(0.0, self.MAX_DELAY_S)


# ================================================================================ KIP-853 dynamic quorum
# Each overrides one rule of the core's KIP-853 part (reference/voter_changes.py, a mixin of KRaftCore) or a core rule
# KIP-853 changed. None is one of the eight reconfig fault nodes of tests/conformance/faulty_node.py.


class LeaderCountsItselfAfterRemoval(KRaftCore):
    """The leader always counts its own log end toward the high watermark, also once a VotersRecord removing it is
    appended (KIP-853 "High Watermark": the leader counts only while it is in the voter set in force; Kafka's
    LeaderState.maybeUpdateHighWatermark over the voters of the latest set). Its own removal then commits with one
    remaining voter of two, not a majority of the new set."""

    def _counts_toward_hw(self, replica_id: int) -> bool:
        return replica_id == self.config.node_id or super()._counts_toward_hw(replica_id)


class TruncationKeepsVotersRecord(KRaftCore):
    """A follower that truncates its log keeps the voter set of the truncated VotersRecord in force (KIP-853 "Voter
    Changes": the latest VotersRecord of the log; Kafka's KRaftControlRecordStateMachine.truncateNewEntries puts the
    previous set back)."""

    _vh: VoterHistory

    def _truncate(self, offset: int) -> None:
        kept = self._vh.copy()
        super()._truncate(offset)
        self._vh = kept


class ChangeCheckUsesStaleHw(KRaftCore):
    """The voter-change checks judge "the leader has committed an entry of its epoch" by the high watermark it knew
    as a follower, and "no uncommitted change" by comparing the committed set with the latest one: a new leader
    whose epoch has nothing committed accepts AddRaftVoter (KIP-853 AddVoter handling; Kafka's AddVoterHandler:
    REQUEST_TIMED_OUT while the leader's high watermark is unknown, testAddVoterWithoutFencedPreviousLeaders)."""

    def _voter_change_blocked(self, now_ms: int) -> Errors | None:
        self._expire_voter_change()
        leader = self.role
        if isinstance(leader, Leader) and leader.voter_change is not None:
            return Errors.REQUEST_TIMED_OUT
        hw = self._hw  # the follower-era value, not the leader's published one (-1 until its epoch commits)
        if hw < 0:
            return Errors.REQUEST_TIMED_OUT
        if self._vh.kraft_version() < 1:
            return Errors.UNSUPPORTED_VERSION
        if self._vh.voters_at(hw - 1) != self._vh.last():
            return Errors.REQUEST_TIMED_OUT
        return None


class RemovedLeaderResignsAtAppend(KRaftCore):
    """A leader asked to remove itself resigns as soon as it appends the VotersRecord, before it commits (KIP-853
    RemoveVoter handling: the leader keeps leading until the new set commits the record, then resigns; Kafka's
    RemoveVoterHandler.highWatermarkUpdated -> requestResign). The change is then answered NOT_LEADER_OR_FOLLOWER
    and the record may never commit."""

    def handle_remove_raft_voter_request(
        self, req: RemoveRaftVoterRequest, reply_to: object = None
    ) -> RemoveRaftVoterResponse | None:
        resp = super().handle_remove_raft_voter_request(req, reply_to)
        if resp is None and isinstance(self.role, Leader) and not self._is_voter():
            self._resign_removed()
        return resp


class UpdateVoterIgnoresDirectoryId(KRaftCore):
    """UpdateRaftVoter updates the voter with the request's id whatever directory id it names (KIP-853 UpdateVoter
    handling: the exact voter key; Kafka's VoterSet.updateVoter -> VOTER_NOT_FOUND for another directory id). A
    replica on a new disk can rewrite the endpoints of the voter it replaced."""

    def handle_update_raft_voter_request(self, req: UpdateRaftVoterRequest) -> UpdateRaftVoterResponse:
        node = self._vh.last().node(req.voter_id)
        if node is not None and req.voter_directory_id is not None:
            req = replace(req, voter_directory_id=node.key.directory_id)
        return super().handle_update_raft_voter_request(req)


class VoterKeyCheckedSameEpochOnly(KRaftCore):
    """A Vote v1 is checked for its voter key only when it is of the voter's own epoch: a misaddressed Vote of a
    higher epoch is granted (KIP-853 Vote handling; Kafka's handleVoteRequest checks isValidVoterKey after the epoch
    transition, for every epoch)."""

    def handle_vote_request(self, req: VoteRequest) -> VoteResponse:
        if req.candidate_epoch > self.epoch and req.voter_id >= 0:
            req = replace(req, voter_id=-1, voter_directory_id=None)
        return super().handle_vote_request(req)


class DescribeListsElectionVoters(KRaftCore):
    """DescribeQuorum lists as voters the voters of the set the leader was elected in: a voter removed since is still
    listed among CurrentVoters, an added one among the Observers (KIP-853 DescribeQuorum; Kafka's
    LeaderState.voterStates: the latest voter set, committed or not)."""

    def handle_describe_quorum_request(self, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
        resp = super().handle_describe_quorum_request(req)
        leader = self.role
        if not isinstance(leader, Leader) or resp.partition_error != Errors.NONE:
            return resp
        at_election = self._vh.voters_at(leader.epoch_start_offset - 1) or self._vh.static
        rows = [*resp.voters, *resp.observers]
        voters = tuple(r for r in rows if r.replica_id in at_election.ids())
        observers = tuple(r for r in rows if r.replica_id not in at_election.ids())
        return replace(resp, voters=voters, observers=observers)


class RestartVotersFromBootstrap(KRaftCore):
    """A restarted node takes its voter set from the bootstrap checkpoint (format --initial-controllers /
    --standalone) and ignores the VotersRecords of its log (KIP-853 "Bootstrapping": the checkpoint seeds an empty
    log only; Kafka's KRaftControlRecordStateMachine reads the snapshot and the whole log at start-up)."""

    def _init_voters(self, start_snapshot: SnapshotLoaded | None) -> None:
        super()._init_voters(start_snapshot)
        boot = self.config.bootstrap_voters
        if boot is not None:
            history = VoterHistory(VoterSet.static(self.config.voters))
            history.add_kraft_version_at(-1, 1)
            history.add_voters_at(-1, boot)
            self._vh = history


class AddIgnoresKraftVersionRange(KRaftCore):
    """An ApiVersions answer without a kraft.version range is taken as supporting every level (KIP-853 AddVoter
    handling: the new voter must support the finalized kraft.version; Kafka's
    AddVoterHandler.handleApiVersionsResponse -> INVALID_REQUEST, testAddVoterInvalidFeatureVersion)."""

    def handle_api_versions_response(self, sender_id: int, resp: ApiVersionsResponse) -> None:
        if resp.error == Errors.NONE and resp.kraft_version_range is None:
            resp = replace(resp, kraft_version_range=(0, 1))
        super().handle_api_versions_response(sender_id, resp)


class CheckQuorumElectionVoters(KRaftCore):
    """Check quorum counts the fetches of the voters the leader was elected with, never updated on a voter change: a
    removed voter's fetches keep it in office (KIP-853 "Voter Changes"; Kafka's
    LeaderState.updateVoterAndObserverStates moves a removed voter to the observers, which never count)."""

    _cq_voters: VoterSet | None = None

    def become_leader(self) -> None:
        self._cq_voters = self._voters()
        super().become_leader()

    def _note_fetch_from(self, replica_id: int) -> None:
        leader, vs = self.role, self._cq_voters
        if not isinstance(leader, Leader) or vs is None or replica_id == self.config.node_id:
            return super()._note_fetch_from(replica_id)
        if not vs.is_voter(ReplicaKey(replica_id, self._fetch_directory_id)):
            return None
        fetched = leader.fetched_voters | {replica_id}
        if len(fetched) + vs.is_voter(self._local_key) >= vs.majority():
            fetched, leader.progress_deadline_ms = frozenset(), self._now + self.check_quorum_timeout_ms
        leader.fetched_voters = fetched
        return None


class SoleVoterCheckQuorumStale(KRaftCore):
    """A leader that is the only voter never resigns, but its check-quorum timer is not kept running: the moment
    AddRaftVoter makes it one of two voters the long-expired timer fires and it resigns (Kafka's
    LeaderState.timeUntilCheckQuorumExpires restarts the timer while it is the only voter; KIP-853 "Bootstrapping":
    a --standalone voter grows the quorum). The bug the reference shell found in session 17."""

    def _should_resign(self) -> bool:
        if isinstance(self.role, Leader) and self._sole_voter():
            return False
        return super()._should_resign()


class TimeoutRollsBack(KRaftCore):
    """A voter change that times out is undone: the leader appends a VotersRecord with the previous set (KIP-853;
    Kafka's testAddVoterTimeout: REQUEST_TIMED_OUT, the VotersRecord stays in the log and in force)."""

    def voter_change_timeout(self) -> None:
        leader = self.role
        change = leader.voter_change if isinstance(leader, Leader) else None
        super().voter_change_timeout()
        if change is not None and change.offset is not None and isinstance(self.role, Leader):
            previous = self._vh.voters_at(change.offset - 1)
            if previous is not None and previous != self._vh.last():
                self._append_voters_record(previous, None)


class ChangeNeverTimesOut(KRaftCore):
    """A pending AddRaftVoter / RemoveRaftVoter has no timer: one whose new voter never answers (or whose record
    never commits) waits forever and blocks every later change (KIP-853; Kafka's LeaderState
    maybeExpirePendingOperation: REQUEST_TIMED_OUT after controller.quorum.request.timeout.ms,
    testAddVoterTimeout)."""

    def handle_add_raft_voter_request(
        self, req: AddRaftVoterRequest, reply_to: object = None
    ) -> AddRaftVoterResponse | None:
        resp = super().handle_add_raft_voter_request(req, reply_to)
        leader = self.role
        if resp is None and isinstance(leader, Leader) and leader.voter_change is not None:
            leader.voter_change.deadline_ms = 1 << 62
        return resp

    def handle_remove_raft_voter_request(
        self, req: RemoveRaftVoterRequest, reply_to: object = None
    ) -> RemoveRaftVoterResponse | None:
        resp = super().handle_remove_raft_voter_request(req, reply_to)
        leader = self.role
        if resp is None and isinstance(leader, Leader) and leader.voter_change is not None:
            leader.voter_change.deadline_ms = 1 << 62
        return resp


class DuplicateVoterByKey(KRaftCore):
    """AddRaftVoter refuses a voter only when its whole key (id and directory id) is in the set, so a voter's id with
    another directory id goes on to the ApiVersions probe (KIP-853 AddVoter handling; Kafka's AddVoterHandler:
    DUPLICATE_VOTER when the id is a voter, testAddVoterWithExistingVoter)."""

    def _check_add_voter(self, req: AddRaftVoterRequest, key: ReplicaKey) -> tuple[Errors | None, str | None]:
        error, message = super()._check_add_voter(req, key)
        if error is Errors.DUPLICATE_VOTER and not self._vh.last().is_voter(key):
            return None, None
        return error, message


class UpdateVoterTimerResetByFetch(KRaftCore):
    """The follower's UpdateRaftVoter period restarts at every fetch instead of running on: a follower that fetches
    more often than every 3 x fetch.timeout never sends UpdateRaftVoter (KIP-853 UpdateVoter: a voter whose entry
    differs from its listeners tells the leader; Kafka's FollowerState.updateVoterPeriodTimer, reset only when the
    update is sent)."""

    def _update_voter_due(self, role: Follower) -> bool:
        due = super()._update_voter_due(role)
        if not due and role.update_voter_deadline_ms is not None:
            role.update_voter_deadline_ms = self._now + 3 * self.config.fetch_timeout_ms
        return due


class UpdateVoterEchoesEntry(KRaftCore):
    """UpdateRaftVoter carries the listeners of the follower's entry in the voter set (the stale ones it meant to
    correct), not its own (KIP-853 UpdateVoter; Kafka's buildUpdateVoterRequest sends the local listeners)."""

    def send_update_raft_voter_request(self, dest_id: int) -> None:
        node = self._local_node()
        entry = self._vh.last().node(node.key.id)
        endpoints = entry.endpoints if entry is not None else node.endpoints
        req = UpdateRaftVoterRequest(self._cluster_id, self.epoch, node.key.id, node.key.directory_id, endpoints,
                                     node.kraft_min, node.kraft_max)
        self._send(dest_id, req)
        self._emit("SendUpdateRaftVoterRequest", note=f"to {dest_id}", voter_key=node.key)


class NonVoterCampaigns(KRaftCore):
    """Any replica may start an election, voter or not: a leader removed by a committed VotersRecord stands again
    when its resignation's election timer fires (KIP-853 "Leader Election": only voters of the set in force are
    candidates; Kafka's pollResigned makes a removed leader an observer)."""

    def _may_elect(self) -> bool:
        return not self._shutting_down


# ================================================================================ registry


@dataclass(frozen=True)
class Mutant:
    """One registered mutant: the core class (and shell / controller classes), what it breaks, and the
    case ids expected to catch it (``expect[0]`` is the one aimed at)."""

    name: str
    area: str
    core: type[KRaftCore]
    breaks: str
    expect: tuple[str, ...]
    node: type[Node] = Node
    controller: type[Controller] | None = None
    #: extra ``pytest conformance`` options the catching case needs (a 5-voter quorum; ``--strict`` for a
    #: Kafka behaviour the KIP leaves open, reported as a KAFKA-level difference otherwise)
    args: tuple[str, ...] = ()
    #: for a ``white-box`` mutant: why no scenario can see it on the wire (tests/mutants/whitebox.py checks it)
    unobservable: str = ""
    #: The safety invariant the bug breaks (a name of traces/sim/invariants.py ``INVARIANTS`` or the simulator's
    #: ClusterIdIsolation: KRaft.tla's, the simulator's and the Spark pipeline's checks), None for a bug of liveness,
    #: the wire format, error codes or DescribeQuorum bookkeeping; ``safety_also``: others the same bug may break
    #: first; ``safety_reason``: why, in one line. From ``SAFETY`` below. The simulator's default run must catch
    #: every mutant with a ``safety`` (bench/mutants_sim.py, ``make mutants-sim``).
    safety: str | None = None
    safety_also: tuple[str, ...] = ()
    safety_reason: str = ""

    @property
    def sim_profile(self) -> str:
        """The fault profile of the simulator's default run for this mutant: KIP-853 mutants change nothing at
        kraft.version 0 (the "default" profile's static voters), so theirs is "reconfig" (kraft.version 1)."""
        return "reconfig" if self.area.startswith("reconfig") else "default"

    @property
    def sim_config(self) -> dict[str, Any]:
        """``SimConfig`` fields that give the simulator's shell the mutant's shell bug (a write-behind quorum-state:
        ``persist_after_send_ms``); empty for a core mutant, which the simulator runs as the core of every node."""
        late = getattr(self.node, "SIM_PERSIST_AFTER_SEND_MS", None)
        return {} if late is None else {"persist_after_send_ms": late}

    @property
    def white_box_only(self) -> bool:
        return self.expect[0] == WHITE_BOX

    @property
    def pending(self) -> bool:
        return self.expect[0].startswith(PENDING)


WHITE_BOX = "white-box"
PENDING = "pending:"

_VOTE = 'KIP-595 "Vote Request Handling"'
_VOTE_RESP = 'KIP-595 "Vote Response Handling"'
_ELECTION = 'KIP-595 "Leader Election"'
_BQE = 'KIP-595 "BeginQuorumEpoch Request Handling"'
_EQE = 'KIP-595 "EndQuorumEpoch Request Handling"'
_FETCH_REQ = 'KIP-595 "Fetch Request Handling"'
_FETCH_RESP = 'KIP-595 "Fetch Response Handling"'
_PROGRESS = 'KIP-595 "Leader Progress Timeout"'
_DESCRIBE = 'KIP-836 "DescribeQuorum" (ReplicaState)'
_PERSIST = 'KIP-595 "Persistence"'

_ADD = 'KIP-853 "AddRaftVoter Request Handling"'
_REMOVE = 'KIP-853 "RemoveRaftVoter Request Handling"'
_UPDATE = 'KIP-853 "UpdateRaftVoter Request Handling"'
_CHANGES = 'KIP-853 "Voter Changes"'

_HW_BACKWARDS_UNOBSERVABLE = (
    "only a leader that names a lower high watermark than before makes a follower's go back, and no correct "
    "leader does (a new leader publishes -1 until an entry of its epoch commits, then at least that entry's "
    "offset, above every earlier commit point); faced with a leader that does, Kafka's "
    "FollowerState.updateHighWatermark throws (a fault, not a conformance verdict). No KRaft message carries "
    "a follower's high watermark; a follower's high watermark leaks only into what it publishes once leader, "
    "which Kafka and the KIP recompute from the replicas' offsets (never the follower's old value), and into "
    "what its state machine applies, which no request to a non-active controller shows"
)

_ALL: list[Mutant] = [
    # Vote request handling
    Mutant("vote-ignores-last-epoch", "vote-request", VoteIgnoresLastEpoch,
           f"{_VOTE}: last epoch compared first", ("KIP-595/Vote/2",)),
    Mutant("vote-ignores-log-end", "vote-request", VoteIgnoresLogEnd,
           f"{_VOTE}: same last epoch, then the longer log", ("KIP-595/Vote/3",)),
    Mutant("vote-grants-stale-log", "vote-request", VoteGrantsStaleLog,
           f"{_VOTE}: only for a log at least as up-to-date", ("KIP-595/Vote/2", "KIP-595/Vote/3")),
    Mutant("vote-twice-per-epoch", "vote-request", VoteTwicePerEpoch,
           f"{_VOTE}: one vote per epoch (after a restart too)", ("KIP-595/Vote/5", "KIP-595/CrashWindow/1")),
    Mutant("forget-vote", "vote-request", _faulty.ForgetVote,
           f"{_VOTE}: the vote is persisted before the response", ("KIP-595/Vote/8", "KIP-595/CrashWindow/1")),
    Mutant("leader-grants-own-epoch", "vote-request", LeaderGrantsOwnEpoch,
           f"{_VOTE}: a leader of the epoch refuses", ("KIP-595/Vote/6",)),
    Mutant("follower-grants-own-epoch", "vote-request", FollowerGrantsOwnEpoch,
           f"{_VOTE}: a follower of the epoch refuses", ("KIP-595/Vote/7",)),
    Mutant("leader-refuses-higher-epoch-vote", "vote-request", LeaderRefusesHigherEpochVote,
           f"{_VOTE}: a higher epoch is adopted first (KafkaRaftClient.handleVoteRequest)",
           ("KIP-595/Epochs/1",)),
    Mutant("vote-answer-old-epoch", "vote-request", VoteAnswerOldEpoch,
           f"{_VOTE}: the answer carries the voter's (new) epoch", ("KIP-595/Vote/1", "KIP-595/Epochs/1")),
    Mutant("vote-fenced-names-candidate-epoch", "vote-request", VoteFencedNamesCandidateEpoch,
           f"{_VOTE}: a fenced candidate learns the voter's epoch", ("KIP-595/Vote/4",)),
    # Vote response handling, elections, timers
    Mutant("candidate-no-epoch-bump", "election", _faulty.NoEpochBump,
           f"{_ELECTION}: each new election bumps the epoch", ("KIP-595/Retry/1", "KIP-595/Majority/2")),
    Mutant("candidate-counts-refusals", "vote-response", CandidateCountsRefusals,
           f"{_VOTE_RESP} 2: a majority of granted votes", ("KIP-595/Majority/2", "KIP-595/Retry/1")),
    Mutant("majority-miscount", "vote-response", MajorityMiscount,
           f"{_VOTE_RESP} 2 / {_FETCH_REQ} step 4: a majority is n // 2 + 1",
           ("KIP-595/HighWatermark/1", "KIP-595/BeginQuorumEpoch/1", "KIP-595/ClusterId/1", "KIP-595/ClusterId/4",
            "KIP-595/Election/1")),
    Mutant("no-election-on-fetch-timeout", "election", NoElectionOnFetchTimeout,
           f"{_ELECTION}: a voter that misses fetch.timeout starts an election", ("KIP-595/Election/1",)),
    Mutant("election-skips-an-epoch", "election", ElectionSkipsAnEpoch,
           f"{_ELECTION}: the candidate's epoch is its epoch + 1", ("KIP-595/Election/1",)),
    Mutant("candidate-understates-log", "election", CandidateUnderstatesLog,
           f"{_ELECTION}: Vote names the candidate's last epoch and log end", ("KIP-595/Election/1",)),
    Mutant("candidate-asks-one-voter", "election", CandidateAsksOneVoter,
           f"{_ELECTION}: the candidate asks every voter", ("KIP-595/Election/1",)),
    Mutant("candidate-never-retries", "election", CandidateNeverRetries,
           f"{_ELECTION}: a lost election is retried after the backoff", ("KIP-595/Retry/1", "KIP-595/Majority/2")),
    Mutant("observer-elects-itself", "election", ObserverElectsItself,
           f"{_ELECTION}: only voters stand for election", ("KIP-595/Observer/1",)),
    Mutant("requests-without-cluster-id", "cluster-id", RequestsWithoutClusterId,
           'KIP-595 "Cluster Id": every request carries it', ("KIP-595/ClusterId/1",)),
    Mutant("ignore-cluster-id", "cluster-id", _faulty.IgnoreClusterId,
           'KIP-595 "Cluster Id": a foreign id is refused', ("KIP-595/ClusterId/2",)),
    # BeginQuorumEpoch
    Mutant("bqe-no-fencing", "begin-quorum-epoch", BeginEpochNoFencing,
           f"{_BQE}: an older epoch is fenced", ("KIP-595/BeginQuorumEpoch/2",)),
    Mutant("bqe-fenced-names-request-epoch", "begin-quorum-epoch", BeginEpochFencedNamesRequestEpoch,
           f"{_BQE}: the refusal names the current epoch", ("KIP-595/BeginQuorumEpoch/2",)),
    Mutant("bqe-forgets-leader", "begin-quorum-epoch", BeginEpochForgetsLeader,
           f"{_BQE}: follow the announced leader", ("KIP-595/BeginQuorumEpoch/1",)),
    Mutant("leader-skips-begin-epoch", "vote-response", LeaderSkipsBeginEpoch,
           f"{_VOTE_RESP} 2: the new leader sends BeginQuorumEpoch",
           ("KIP-595/ClusterId/4", "KIP-595/ClusterId/1", "KIP-631/Brokers/1", "KIP-595/Election/2")),
    Mutant("leader-change-missing", "vote-response", LeaderChangeMissing,
           f"{_VOTE_RESP} 2: the epoch starts with a LeaderChange record",
           ("KIP-595/Election/2", "KIP-595/ClusterId/4")),
    # EndQuorumEpoch
    Mutant("successors-least-caught-up-first", "end-quorum-epoch", SuccessorsLeastCaughtUpFirst,
           'KIP-595 "EndQuorumEpoch" / Kafka nonLeaderVotersByDescendingFetchOffset (KAFKA-level: --strict)',
           ("KIP-595/Successors/1",), args=("--strict",)),
    Mutant("eqe-ignored", "end-quorum-epoch", EndEpochIgnored,
           f"{_EQE}: the first successor starts its election at once", ("KIP-595/EndQuorumEpoch/1",)),
    Mutant("first-successor-backs-off", "end-quorum-epoch", FirstSuccessorBacksOff,
           f"{_EQE}: no backoff for the first successor (Kafka's endEpochElectionBackoff)",
           ("KIP-595/Successors/2", "KIP-595/EndQuorumEpoch/1")),
    # Its Vote comes an election timeout (300-600 ms) after the check-quorum timeout, inside the cases' slack
    # for a loaded machine (250 ms + half the larger timeout) more often than not: only Kafka's EndQuorumEpoch
    # first (KAFKA-level checkquorum.resign-not-elect, the KIP's text lets a leader vote directly) sees it
    # every time.
    Mutant("resign-without-end-epoch", "check-quorum", ResignWithoutEndEpoch,
           f"{_PROGRESS}: give up visibly within the check-quorum timeout (Kafka: EndQuorumEpoch at once; "
           "KAFKA-level: --strict)",
           ("KIP-595/LeaderProgress/1", "KIP-595/CheckQuorum/1", "KIP-595/CheckQuorum/2"), args=("--strict",)),
    Mutant("never-resign", "check-quorum", _faulty.NeverResign,
           f"{_PROGRESS}: resign without fetches from a majority",
           ("KIP-595/LeaderProgress/1", "KIP-595/CheckQuorum/1", "KIP-595/CheckQuorum/2")),
    Mutant("observer-fetch-keeps-leader", "check-quorum", ObserverFetchKeepsLeader,
           f"{_PROGRESS}: only voters' fetches count", ("KIP-595/CheckQuorum/1",)),
    Mutant("check-quorum-never-reset", "check-quorum", CheckQuorumNeverReset,
           f"{_PROGRESS}: a majority's fetches keep the leader",
           ("KIP-595/LeaderProgress/2", "KIP-595/CheckQuorum/1", "KIP-631/Brokers/2")),
    Mutant("check-quorum-any-voter", "check-quorum", CheckQuorumAnyVoter,
           f"{_PROGRESS}: a majority, not one voter (no difference in a 3-voter quorum)",
           ("KIP-595/CheckQuorum/2",), args=("--quorum-size", "5")),
    # Fetch: leader side
    Mutant("fetch-no-divergence-check", "fetch-request", FetchNoDivergenceCheck,
           f"{_FETCH_REQ} step 3: DivergingEpoch", ("KIP-595/Divergence/4",)),
    Mutant("fetch-diverging-off-by-one", "fetch-request", FetchDivergingOffByOne,
           f"{_FETCH_REQ} step 3: the epoch's end offset", ("KIP-595/Divergence/4",)),
    Mutant("fetch-fenced-without-leader", "fetch-request", FetchFencedWithoutLeader,
           f"{_FETCH_REQ} step 2: CurrentLeader in the error", ("KIP-595/FetchErrors/1", "KIP-595/CrashWindow/2")),
    Mutant("fetch-newer-epoch-fenced", "fetch-request", FetchNewerEpochFenced,
           f"{_FETCH_REQ} step 2: UNKNOWN_LEADER_EPOCH for a newer epoch", ("KIP-595/FetchErrors/2",)),
    Mutant("fetch-not-leader-without-hint", "fetch-request", FetchNotLeaderWithoutHint,
           f"{_FETCH_REQ} step 2: a follower names the leader", ("KIP-595/FetchErrors/3", "KIP-595/CrashWindow/2")),
    Mutant("observers-count", "fetch-request", _faulty.ObserversCount,
           f"{_FETCH_REQ} step 4: observers never count", ("KIP-595/HighWatermark/2",)),
    Mutant("hw-commits-old-epoch", "fetch-request", HwCommitsOldEpoch,
           f"{_FETCH_REQ} step 4: an entry of the current epoch first (Raft's Figure 8: five voters)",
           ("KIP-595/HighWatermark/6", "KIP-595/HighWatermark/1"), args=("--quorum-size", "5")),
    Mutant("hw-needs-every-voter", "fetch-request", HwNeedsEveryVoter,
           f"{_FETCH_REQ} step 4: a majority commits",
           ("KIP-836/DescribeQuorum/1", "KIP-631/Brokers/1", "KIP-595/ClusterId/4")),
    Mutant("hw-published-before-own-epoch", "fetch-request", HwPublishedBeforeOwnEpoch,
           "Kafka LeaderState: a new leader's high watermark is unknown (-1) (KAFKA-level: caught with --strict)",
           ("KIP-595/HighWatermark/1",), args=("--strict",)),
    Mutant("diverging-fetch-is-progress", "fetch-request", DivergingFetchIsProgress,
           f"{_FETCH_REQ} step 3-4: only a valid fetch is progress", ("KIP-595/HighWatermark/4",)),
    # Fetch: follower side
    Mutant("skip-truncation", "fetch-response", _faulty.SkipTruncation,
           f"{_FETCH_RESP}: truncate at DivergingEpoch", ("KIP-595/Divergence/1",)),
    Mutant("truncate-below-hw", "fetch-response", _faulty.TruncateBelowHighWatermark,
           f"{_FETCH_RESP}: never below the high watermark", ("KIP-595/Divergence/1",)),
    Mutant("truncate-to-leader-end-offset", "fetch-response", TruncateToLeaderEndOffset,
           f"{_FETCH_RESP}: truncation point from the follower's own epochs", ("KIP-595/Divergence/2",)),
    Mutant("follower-drops-leader-hint", "fetch-response", FollowerDropsLeaderHint,
           f"{_FETCH_RESP} step 1: follow the CurrentLeader of FENCED_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER",
           ("KIP-595/Epochs/2", "KIP-595/Epochs/3")),
    Mutant("follower-hw-ahead-of-log", "fetch-response", FollowerHwAheadOfLog,
           f"{_FETCH_RESP}: high watermark = min(leader's, log end)", ("KIP-595/HighWatermark/5",)),
    Mutant("follower-hw-backwards", "fetch-response", FollowerHwBackwards,
           f"{_FETCH_RESP}: the high watermark never goes back", (WHITE_BOX,),
           unobservable=_HW_BACKWARDS_UNOBSERVABLE),
    Mutant("follower-ignores-hw", "fetch-response", FollowerIgnoresHw,
           f"{_FETCH_RESP}: learn the high watermark", ("KIP-595/Divergence/3",)),
    Mutant("fetch-wrong-last-epoch", "fetch-request-sending", FetchWrongLastEpoch,
           'KIP-595 "Fetch": LastFetchedEpoch is the epoch of the last record', ("KIP-595/BeginQuorumEpoch/1",)),
    Mutant("follower-fetch-timer-not-reset", "fetch-response", FollowerFetchTimerNotReset,
           f"{_FETCH_RESP}: a successful fetch restarts the fetch timeout", ("KIP-595/Epochs/4",)),
    # DescribeQuorum
    Mutant("caught-up-is-last-fetch", "describe-quorum", CaughtUpIsLastFetch,
           f"{_DESCRIBE}: LastCaughtUpTimestamp", ("KIP-836/Lagging/1",)),
    Mutant("describe-unknown-as-zero", "describe-quorum", DescribeUnknownAsZero,
           f"{_DESCRIBE}: -1 for a replica that never fetched", ("KIP-836/DescribeQuorum/1",)),
    Mutant("describe-last-offset-not-end", "describe-quorum", DescribeLastOffsetNotEnd,
           f"{_DESCRIBE}: LogEndOffset", ("KIP-836/DescribeQuorum/1",)),
    Mutant("fetch-timestamp-first-fetch", "describe-quorum", FetchTimestampFirstFetch,
           f"{_DESCRIBE}: LastFetchTimestamp", ("KIP-836/Lagging/1", "KIP-836/DescribeQuorum/1")),
    Mutant("describe-non-leader-answers", "describe-quorum", DescribeNonLeaderAnswers,
           'KIP-595 "DescribeQuorum Request Handling" 1: NOT_LEADER_OR_FOLLOWER',
           ("KIP-595/DescribeQuorum/1", "KIP-595/CheckQuorum/1", "KIP-595/LeaderProgress/1")),
    # the shell's ordering of persist and send
    Mutant("vote-persisted-after-grant", "shell", KRaftCore,
           f"{_VOTE}: persisted before the response (reference/io.py order)",
           ("KIP-595/Vote/8", "KIP-595/CrashWindow/1"), node=VotePersistedAfterGrant),
    Mutant("vote-write-behind-jitter", "shell", KRaftCore,
           f"{_VOTE}: persisted before the response (a 0-20 ms write-behind window)",
           ("KIP-595/CrashWindow/1", "KIP-595/Vote/8"), node=VoteWriteBehindJitter),
    # recovery on restart
    Mutant("restart-forgets-vote", "restart", RestartForgetsVote,
           f"{_PERSIST}: VotedId read back", ("KIP-595/Vote/8", "KIP-595/CrashWindow/1")),
    Mutant("restart-ignores-quorum-state", "restart", RestartIgnoresQuorumState,
           f"{_PERSIST}: epoch and vote read back",
           ("KIP-595/Vote/8", "KIP-595/CrashWindow/1", "KIP-595/Divergence/3")),
    Mutant("restart-resumes-leadership", "restart", RestartResumesLeadership,
           f"{_PERSIST} / Kafka QuorumState.initialize: a restarted leader resigns (KAFKA-level: --strict)",
           ("KIP-595/CrashWindow/3",), args=("--strict",)),
    Mutant("restart-forgets-leader", "restart", RestartForgetsLeader,
           f"{_PERSIST} / Kafka QuorumState.initialize: a restarted follower follows its leader again",
           ("KIP-595/CrashWindow/2",)),
    # KIP-853 dynamic quorum (none of them is one of the eight reconfig fault nodes)
    Mutant("truncation-keeps-voters-record", "reconfig-voter-set", TruncationKeepsVotersRecord,
           f"{_CHANGES}: a truncated VotersRecord is no longer in force (KRaftControlRecordStateMachine"
           ".truncateNewEntries)", ("KIP-853/FollowerView/2",)),
    Mutant("change-check-uses-stale-hw", "reconfig-add", ChangeCheckUsesStaleHw,
           f"{_ADD}: the leader has committed an entry of its epoch (testAddVoterWithoutFencedPreviousLeaders)",
           ("KIP-853/AddVoter/4",)),
    Mutant("removed-leader-resigns-at-append", "reconfig-remove", RemovedLeaderResignsAtAppend,
           f"{_REMOVE}: a removed leader leads until the removal commits, then resigns "
           "(RemoveVoterHandler.highWatermarkUpdated)", ("KIP-853/RemoveVoter/3",)),
    Mutant("voter-key-checked-same-epoch-only", "reconfig-voter-key", VoterKeyCheckedSameEpochOnly,
           'KIP-853 "Vote Request Handling": VoterId/VoterDirectoryId checked for every epoch '
           "(KafkaRaftClient.handleVoteRequest isValidVoterKey)", ("KIP-853/VoterKey/1",)),
    Mutant("describe-lists-election-voters", "reconfig-describe", DescribeListsElectionVoters,
           'KIP-853 "DescribeQuorum": CurrentVoters = the latest voter set (LeaderState.voterStates)',
           ("KIP-853/Bootstrap/1",)),
    Mutant("add-ignores-kraft-version-range", "reconfig-add", AddIgnoresKraftVersionRange,
           f"{_ADD}: the new voter supports the finalized kraft.version (testAddVoterInvalidFeatureVersion)",
           ("KIP-853/AddVoter/2",)),
    Mutant("check-quorum-election-voters", "reconfig-check-quorum", CheckQuorumElectionVoters,
           f"{_CHANGES}: check quorum counts the voters of the latest VotersRecord "
           "(LeaderState.updateVoterAndObserverStates)", ("KIP-853/CheckQuorum/1",)),
    Mutant("timeout-rolls-back", "reconfig-add", TimeoutRollsBack,
           f"{_CHANGES}: a timed-out change's VotersRecord stays in force (testAddVoterTimeout)",
           ("KIP-853/OneChange/3",)),
    Mutant("change-never-times-out", "reconfig-add", ChangeNeverTimesOut,
           f"{_ADD}: a pending change times out after the request timeout (LeaderState"
           ".maybeExpirePendingOperation)", ("KIP-853/OneChange/3", "KIP-853/OneChange/2")),
    Mutant("duplicate-voter-by-key", "reconfig-add", DuplicateVoterByKey,
           f"{_ADD}: a voter's id is DUPLICATE_VOTER whatever the directory id (testAddVoterWithExistingVoter; "
           "KAFKA-level: --strict)", ("KIP-853/AddVoter/2",), args=("--strict",)),
    Mutant("update-voter-timer-reset-by-fetch", "reconfig-update", UpdateVoterTimerResetByFetch,
           f"{_UPDATE}: a voter whose entry differs sends it every 3 x fetch.timeout (FollowerState"
           ".updateVoterPeriodTimer)", ("KIP-853/UpdateVoter/2",)),
    Mutant("update-voter-echoes-entry", "reconfig-update", UpdateVoterEchoesEntry,
           f"{_UPDATE}: the request carries the voter's own listeners (buildUpdateVoterRequest)",
           ("KIP-853/UpdateVoter/2",)),
    Mutant("non-voter-campaigns", "reconfig-election", NonVoterCampaigns,
           'KIP-853 "Leader Election": only voters of the set in force stand (pollResigned: a removed leader '
           "is an observer)", ("KIP-853/RemoveVoter/3",)),
    Mutant("update-voter-ignores-directory-id", "reconfig-update", UpdateVoterIgnoresDirectoryId,
           f"{_UPDATE}: the exact voter key (VoterSet.updateVoter: VOTER_NOT_FOUND, testUpdateVoterWithNoneVoter)",
           ("KIP-853/UpdateVoter/1",)),
    Mutant("sole-voter-check-quorum-stale", "reconfig-check-quorum", SoleVoterCheckQuorumStale,
           'KIP-853 "Bootstrapping" / KIP-595 "Leader Progress Timeout": the check-quorum timer runs while the '
           "leader is the only voter (LeaderState.timeUntilCheckQuorumExpires)", ("KIP-853/Bootstrap/1",)),
    Mutant("leader-counts-itself-after-removal", "reconfig-hw", LeaderCountsItselfAfterRemoval,
           'KIP-853 "High Watermark": the leader counts only while it is a voter of the latest VotersRecord '
           "(LeaderState.maybeUpdateHighWatermark)", ("KIP-853/RemoveVoter/3",)),
    Mutant("restart-voters-from-bootstrap", "reconfig-restart", RestartVotersFromBootstrap,
           'KIP-853 "Bootstrapping": the checkpoint seeds an empty log; a restart reads the log\'s VotersRecords '
           "(KRaftControlRecordStateMachine)", ("KIP-853/Restart/1",)),
]

_LC, _CNT, _LM, _VO, _ES = ("LeaderCompleteness", "CommittedNeverTruncated", "LogMatching", "VoteOnce",
                              "ElectionSafety")
_NONE_LIVENESS = "liveness only: no invariant of KRaft.tla, the simulator or the pipeline can break"

#: mutant -> (the safety invariant it breaks or None, others it may break first, why). A mutant breaks safety when
#: some run of it reaches a state that violates an invariant KRaft.tla, the simulator or the Spark pipeline checks;
#: every entry was run (bench/mutants_sim.py), the None ones included: the table shows whether the simulator's
#: default run catches each.
SAFETY: dict[str, tuple[str | None, tuple[str, ...], str]] = {
    "vote-ignores-last-epoch": (_LC, (_CNT,), "a longer log of an older last epoch wins: the leader lacks committed "
                                "entries"),
    "vote-ignores-log-end": (_LC, (_CNT,), "a shorter log of the same last epoch wins: the leader lacks committed "
                             "entries"),
    "vote-grants-stale-log": (_LC, (_CNT,), "no election restriction: a stale log wins"),
    "vote-twice-per-epoch": (_VO, (_ES,), "a voter grants a second candidate of its epoch"),
    "forget-vote": (_VO, (_ES,), "the vote lives in memory only: a restart in its epoch forgets it, and the voter may "
                    "vote again there"),
    "leader-grants-own-epoch": (_VO, (_ES,), "the leader of an epoch (it voted for itself) grants another candidate "
                                "of it"),
    "follower-grants-own-epoch": (_VO, (_ES,), "a follower that voted in its epoch grants another candidate of it"),
    "leader-refuses-higher-epoch-vote": (None, (), "a refusal and a late epoch change: no vote given, no second "
                                         "leader of an epoch (liveness)"),
    "vote-answer-old-epoch": (_VO, (), "the grant names the voter's previous epoch: a granted VoteResponse of epoch "
                              "e-1 to another candidate than its vote of e-1 (KRaft.tla's VoteOnce counts granted "
                              "VoteResponses)"),
    "vote-fenced-names-candidate-epoch": (None, (), "the epoch field of a refusal: the candidate learns the epoch "
                                          "later (wire/liveness)"),
    "candidate-no-epoch-bump": (None, (), "a retry in the same epoch asks the same voters, each of which still votes "
                                "once per epoch: KIP-595's epoch + 1 rule (TLA+ trace validation), no invariant"),
    "candidate-counts-refusals": (_LC, (_ES, _CNT), "a candidate refused by a majority leads: a stale log or a second "
                                  "leader of the epoch"),
    "majority-miscount": (_ES, (_LC, _CNT), "a 3-voter candidate elects itself on its own vote and a leader commits "
                          "alone: two leaders of an epoch, lost commits"),
    "no-election-on-fetch-timeout": (None, (), _NONE_LIVENESS),
    "election-skips-an-epoch": (None, (), "epoch + 2: each epoch still has one vote per voter (TLA+ trace validation "
                                "sees it, no invariant)"),
    "candidate-understates-log": (None, (), "a candidate that claims a shorter log only makes voters stricter"),
    "candidate-asks-one-voter": (None, (), _NONE_LIVENESS),
    "candidate-never-retries": (None, (), _NONE_LIVENESS),
    "observer-elects-itself": (_LC, (), "an observer that stands counts its own vote toward a majority of a voter set "
                               "it is not in: with one voter's grant (3 voters) it leads, and neither it nor that "
                               "voter need hold an entry the other two committed (the default run's observer, seed "
                               "21)"),
    "requests-without-cluster-id": (None, (), "a null ClusterId is accepted by every handler (wire format)"),
    "ignore-cluster-id": ("ClusterIdIsolation", (), "a request of another cluster moves the node's epoch, vote or "
                          "leader"),
    "bqe-no-fencing": (None, (), "an error code: the stale BeginQuorumEpoch changes no state"),
    "bqe-fenced-names-request-epoch": (_ES, (), "the refusal of a stale leader's BeginQuorumEpoch names the request's "
                                       "epoch with the leader of a later one: the stale leader is told that another "
                                       "node leads its own epoch (the default run, seed 23: its core's check raises)"),
    "bqe-forgets-leader": (None, (), "the follower finds its leader later (liveness)"),
    "leader-skips-begin-epoch": (None, (), _NONE_LIVENESS),
    "leader-change-missing": (None, (), "the epoch starts with a data record instead of LeaderChange: the commit rule "
                              "still needs an entry of the epoch (the record format, not an invariant)"),
    "successors-least-caught-up-first": (None, (), _NONE_LIVENESS),
    "eqe-ignored": (None, (), _NONE_LIVENESS),
    "first-successor-backs-off": (None, (), _NONE_LIVENESS),
    "resign-without-end-epoch": (None, (), _NONE_LIVENESS),
    "never-resign": (None, (), "a cut-off leader keeps its epoch but commits nothing without a majority (liveness)"),
    "observer-fetch-keeps-leader": (None, (), _NONE_LIVENESS),
    "check-quorum-never-reset": (None, (), _NONE_LIVENESS),
    "check-quorum-any-voter": (None, (), _NONE_LIVENESS),
    "fetch-no-divergence-check": (_LM, (_CNT, _LC), "a follower appends the leader's entries after a divergent tail"),
    "fetch-diverging-off-by-one": (None, (), "the follower cuts whole batches, so only a one-record divergent batch "
                                   "stays; it is refused at every fetch after (stuck: liveness), appends nothing after "
                                   "it and never counts it committed; its epoch differs from the leader's entry there"),
    "fetch-fenced-without-leader": (None, (), "an error's CurrentLeader (wire/liveness)"),
    "fetch-newer-epoch-fenced": (None, (), "an error code (wire)"),
    "fetch-not-leader-without-hint": (None, (), "an error's CurrentLeader (wire/liveness)"),
    "observers-count": (_LC, (_CNT,), "a leader cut off from the voters commits with an observer's fetches"),
    "hw-commits-old-epoch": (_LC, (_CNT,), "Raft's Figure 8: an entry of an older epoch counted committed by "
                             "replication alone is overwritten (the default run's Figure8 schedule with capped Fetch "
                             "answers reaches it)"),
    "hw-needs-every-voter": (None, (), "a stricter commit rule (liveness)"),
    "hw-published-before-own-epoch": (None, (), "the follower-era high watermark it publishes was committed; "
                                      "followers keep the larger one (Kafka-level)"),
    "diverging-fetch-is-progress": (_LC, (_CNT,), "the leader counts a diverging follower's offset: it commits "
                                    "entries a majority lacks"),
    "skip-truncation": (None, (), "the follower never truncates, so the leader refuses it at every fetch (stuck: "
                        "liveness); it appends nothing after its divergent tail and never counts it committed"),
    "truncate-below-hw": (_CNT, (), "a follower truncates to 0, committed entries included"),
    "truncate-to-leader-end-offset": (None, (), "the next fetch's DivergingEpoch corrects the longer truncation point "
                                      "(an extra round trip)"),
    "follower-drops-leader-hint": (None, (), _NONE_LIVENESS),
    "follower-hw-ahead-of-log": (_CNT, (), "a follower counts offsets it does not hold as committed (KRaft.tla: "
                                 "Committed(i) <= Len(log[i])); only a Fetch answer ending below the leader's high "
                                 "watermark shows it (the default run's capped answers)"),
    "follower-hw-backwards": (None, (), "no leader of this core names a lower high watermark: unreachable in a "
                              "cluster (tests/mutants/whitebox.py checks the rule itself)"),
    "follower-ignores-hw": (None, (), "a follower that never learns the commit point (liveness)"),
    "fetch-wrong-last-epoch": (_LM, (_CNT, _LC), "a divergent follower claims the leader's epoch: no DivergingEpoch, "
                               "its tail stays"),
    "follower-fetch-timer-not-reset": (None, (), _NONE_LIVENESS),
    "caught-up-is-last-fetch": (None, (), "DescribeQuorum bookkeeping"),
    "describe-unknown-as-zero": (None, (), "DescribeQuorum bookkeeping"),
    "describe-last-offset-not-end": (None, (), "DescribeQuorum bookkeeping"),
    "fetch-timestamp-first-fetch": (None, (), "DescribeQuorum bookkeeping"),
    "describe-non-leader-answers": (None, (), "DescribeQuorum error code"),
    "vote-persisted-after-grant": (_VO, ("EpochMonotonic",), "quorum-state written 300 ms after the grant: a crash "
                                   "then forgets the vote (and the epoch it moved to)"),
    "vote-write-behind-jitter": (_VO, ("EpochMonotonic",), "quorum-state written 0-20 ms after the grant: a crash "
                                 "then forgets the vote (and the epoch it moved to)"),
    "restart-forgets-vote": (_VO, (_ES,), "a restarted voter drops the vote it read back and may vote again"),
    "restart-ignores-quorum-state": ("EpochMonotonic", (_VO,), "a restarted node takes its epoch from the log: its "
                                     "epoch goes back and its vote is gone"),
    "restart-resumes-leadership": (None, (), "the log is durable before any ack, so the restarted leader holds every "
                                   "entry of its epoch and nobody else leads it (Kafka-level)"),
    "restart-forgets-leader": (_VO, (_ES,), "a follower of the leader it voted for comes back Unattached in that "
                               "epoch with no vote (a follower's quorum-state holds the leader, not the vote): it may "
                               "vote again in the epoch"),
    "truncation-keeps-voters-record": ("SnapshotConfigAgreement", (_ES, "AtMostOneUncommittedConfig"), "a follower "
                                       "keeps a truncated VotersRecord's set in force: its snapshots and its elections "
                                       "use a voter set the committed log never had"),
    "change-check-uses-stale-hw": (_LC, (_CNT, "CommittedConfigsDifferByOne", _ES), "a new leader whose epoch has "
                                   "committed nothing (its LeaderChange on no majority of its set) takes a change, "
                                   "which commits with a majority of the changed set only; an older epoch's "
                                   "uncommitted VotersRecord on the other side has a disjoint majority (two changes "
                                   "from an even set: Raft's single-server-change bug, KRaft.tla ConfigQuorumsOverlap) "
                                   "and elects the old leader, which lacks the committed change (the reconfig "
                                   "profile's ChangeSplit schedule)"),
    "removed-leader-resigns-at-append": (None, (), _NONE_LIVENESS),
    "voter-key-checked-same-epoch-only": (None, (), "a Vote addressed to another replica key matters only when a disk "
                                          "is replaced (a new directory id), which no model or simulator run does"),
    "describe-lists-election-voters": (None, (), "DescribeQuorum bookkeeping"),
    "add-ignores-kraft-version-range": (None, (), "a feature-version check of AddRaftVoter (wire)"),
    "check-quorum-election-voters": (None, (), _NONE_LIVENESS),
    "timeout-rolls-back": ("AtMostOneUncommittedConfig", (), "a second VotersRecord appended while the timed-out one "
                           "is uncommitted"),
    "change-never-times-out": (None, (), _NONE_LIVENESS),
    "duplicate-voter-by-key": (None, (), "an error code of AddRaftVoter (wire)"),
    "update-voter-timer-reset-by-fetch": (None, (), _NONE_LIVENESS),
    "update-voter-echoes-entry": (None, (), "the endpoints UpdateRaftVoter carries (wire)"),
    "non-voter-campaigns": (_ES, (_LM,), "a removed leader stands again and leads without a majority of the voter set "
                            "it holds (it is not in it)"),
    "update-voter-ignores-directory-id": (None, (), "which voter's endpoints UpdateRaftVoter rewrites (bookkeeping)"),
    "sole-voter-check-quorum-stale": (None, (), _NONE_LIVENESS),
    "leader-counts-itself-after-removal": (_LC, (_CNT,), "a removed leader commits its removal and the entries after "
                                           "it with one voter of the new set; lost when that set is odd (4 voters, the "
                                           "leader removed) and the voter at its side gets the record and later "
                                           "entries in one answer (a restart made it fetch from before the record) "
                                           "while the other two hold the record alone and elect one of them (the "
                                           "reconfig profile's RemovalSplit schedule)"),
    "restart-voters-from-bootstrap": ("AtMostOneUncommittedConfig", (_ES, "SnapshotConfigAgreement",
                                                                     "CommittedConfigsDifferByOne"),
                                      "a restarted leader judges voter changes against the bootstrap set, not its "
                                      "log's: it appends a change while another is uncommitted"),
}

_ALL = [replace(m, safety=SAFETY[m.name][0], safety_also=SAFETY[m.name][1], safety_reason=SAFETY[m.name][2])
        if m.name in SAFETY else m for m in _ALL]
MUTANTS: dict[str, Mutant] = {m.name: m for m in _ALL}
assert len(MUTANTS) == len(_ALL), "duplicate mutant name"

#: KIP-853 mutants no case catches yet: ``expect`` names the scenario that would (``pending:``). ``make mutants`` runs
#: them with the rest and reports them as survivors (exit 1); the registry test keeps them apart from ``MUTANTS`` so
#: that ``make test`` holds every registered mutant to a catching case while these wait for their scenario.
_SURVIVORS: list[Mutant] = []
SURVIVORS: dict[str, Mutant] = {m.name: m for m in _SURVIVORS}
assert not set(SURVIVORS) & set(MUTANTS), "a mutant is both registered and a known survivor"


def unmutated() -> Mutant:
    return Mutant("none", "-", KRaftCore, "-", ())


def lookup(name: str) -> Mutant:
    if name == "none":
        return unmutated()
    try:
        return MUTANTS[name] if name in MUTANTS else SURVIVORS[name]
    except KeyError:
        raise SystemExit(f"KRAFT_TCK_MUTANT={name!r}: expected none or one of "
                         f"{', '.join([*MUTANTS, *SURVIVORS])}") from None


async def run_node(mutant: Mutant, config_path: str, trace: str | None) -> None:
    """Run the reference node with ``mutant`` until SIGTERM (the faulty_node.py launcher's loop)."""
    from kraft_tck.reference.config import NodeConfig

    await _faulty.run_node(NodeConfig.load(config_path), trace, mutant.core, mutant.controller, mutant.node)
