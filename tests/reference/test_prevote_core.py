"""Core tests for KIP-996 pre-vote as Kafka 4.x implements it (``CoreConfig.pre_vote``): the Prospective role,
which Vote requests are pre-votes, how they are granted, and what a prospective does with the answers.

Kafka sources the facts come from: ``KafkaRaftClient.handleVoteRequest`` / ``handleVoteResponse`` /
``pollProspective`` / ``pollFollowerAsVoter`` / ``pollCandidate`` / ``pollResigned``, ``QuorumState
.transitionToProspective`` / ``unattachedOrProspectiveCanGrantVote`` / ``prospectiveAddVotedState``,
``FollowerState.canGrantVote`` (``hasFetchedFromLeader``), ``ProspectiveState``; the behaviours are those of
``KafkaRaftClientPreVoteTest``. Inputs in, outputs checked; no sockets."""

from __future__ import annotations

import random
from typing import Any

import pytest
from kraft_tck.reference.core import CoreConfig, KRaftCore
from kraft_tck.reference.io import ElectionState, Ready, RequestReceived, ResponseReceived
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import (
    FetchResponse,
    LeaderIdAndEpoch,
    VoteRequest,
    VoteResponse,
)
from kraft_tck.reference.roles import Candidate, Follower, Leader, Prospective, Resigned, Unattached, Voted
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import RecordBatch, data_batch
from kraft_tck.spec.trace import line_errors

VOTERS = frozenset({1, 2, 3})
T = 1000  # election timeout
F = 2000  # fetch timeout


FRESH = ElectionState()


def make(
    durable: ElectionState = FRESH,
    batches: tuple[RecordBatch, ...] = (),
    voters: frozenset[int] = VOTERS,
    pre_vote: bool = True,
) -> KRaftCore:
    config = CoreConfig(1, voters, "cid", election_timeout_ms=T, fetch_timeout_ms=F, pre_vote=pre_vote)
    return KRaftCore(config, durable, Log(batches), random.Random(7), 0)


def log_of(epoch: int, count: int) -> tuple[RecordBatch, ...]:
    return tuple(data_batch(i, epoch, [b"x"]) for i in range(count))


def votes_sent(ready: Ready) -> dict[int, VoteRequest]:
    return {o.dest_id: o.request for o in ready.send if isinstance(o.request, VoteRequest)}


def events(ready: Ready, name: str) -> list[dict[str, Any]]:
    return [e for e in ready.trace if e["event"] == name]


def answer(core: KRaftCore, ready: Ready, voter: int, granted: bool, epoch: int | None = None,
           leader: int = -1, now: int = 0) -> Ready:
    """The response of ``voter`` to the Vote request ``ready`` sent it."""
    out = next(o for o in ready.send if o.dest_id == voter)
    resp = VoteResponse(leader, core.epoch if epoch is None else epoch, granted)
    return core.step(ResponseReceived(voter, resp, out.request_id), max(now, core._now))


def follower_timed_out(epoch: int = 5, batches: tuple[RecordBatch, ...] = ()) -> tuple[KRaftCore, Ready]:
    core = make(ElectionState(epoch, 2, -1), batches)
    assert isinstance(core.role, Follower)
    return core, core.tick(F)


# ------------------------------------------------------------------------- becoming prospective


def test_fetch_timeout_makes_a_prospective_that_pre_votes_in_its_current_epoch() -> None:
    """pollFollowerAsVoter: fetch timeout -> transitionToProspective; buildVoteRequest(preVote=true) carries
    quorum.epoch(), not epoch + 1; the transition is a memory one (nothing persisted)."""
    core, ready = follower_timed_out(5, log_of(4, 3))
    role = core.role
    assert isinstance(role, Prospective) and role.epoch == 5 and role.leader_id == 2
    assert ready.persist is None, "BecomeProspective persisted quorum-state: Kafka's transition is memory-only"
    sent = votes_sent(ready)
    assert set(sent) == {2, 3}
    for dest, req in sent.items():
        assert req.pre_vote and req.candidate_epoch == 5 and req.candidate_id == 1 and req.voter_id == dest
        assert (req.last_offset_epoch, req.last_offset) == (4, 3)
    [ev] = events(ready, "BecomeProspective")
    assert ev["cause"] == "FetchTimeout" and ev["state"]["role"] == "Prospective" and ev["state"]["epoch"] == 5
    assert ev["state"]["leaderId"] == 2  # Kafka's ProspectiveState.election() keeps the leader it followed
    assert not line_errors({**ev, "seq": 0}), line_errors({**ev, "seq": 0})


def test_without_pre_vote_the_fetch_timeout_starts_an_election_at_once() -> None:
    """Kafka 3.9: pollFollowerAsVoter -> transitionToCandidate; Vote v0/v1 has no PreVote."""
    core = make(ElectionState(5, 2, -1), pre_vote=False)
    ready = core.tick(F)
    assert isinstance(core.role, Candidate) and core.epoch == 6
    assert all(not r.pre_vote and r.candidate_epoch == 6 for r in votes_sent(ready).values())
    assert not events(ready, "BecomeProspective")


def test_election_timeout_of_unattached_and_voted_goes_prospective() -> None:
    for durable in (ElectionState(3), ElectionState(3, -1, 2)):
        core = make(durable)
        ready = core.tick(2 * T)
        role = core.role
        assert isinstance(role, Prospective) and role.epoch == 3 and role.leader_id == -1
        assert role.voted_id == durable.voted_id  # the vote of the epoch is kept (votedKey)
        assert events(ready, "BecomeProspective")[0]["cause"] == "ElectionTimeout"


def test_candidate_timeout_goes_prospective_with_growing_retries() -> None:
    """pollCandidate (Kafka 4.x): an election that times out leads back to Prospective, not to epoch + 2."""
    core = make(ElectionState(4, -1, 1))  # restored as the candidate of epoch 4
    assert isinstance(core.role, Candidate)
    core.tick(2 * T)
    role = core.role
    assert isinstance(role, Prospective) and role.epoch == 4 and role.voted_id == 1 and role.retries == 2


def test_resigned_leader_times_out_into_a_prospective_of_the_next_epoch() -> None:
    """pollResigned (Kafka 4.x): Unattached(epoch + 1), persisted, and then Prospective in that epoch."""
    core = make(ElectionState(4, 1, 1))
    assert isinstance(core.role, Resigned)
    ready = core.tick(2 * T)
    assert isinstance(core.role, Prospective) and core.epoch == 5 and core.leader_id == -1
    assert ready.persist is not None and ready.persist.leader_epoch == 5 and ready.persist.voted_id == -1
    assert all(r.pre_vote and r.candidate_epoch == 5 for r in votes_sent(ready).values())


def test_sole_voter_goes_through_prospective_to_leader() -> None:
    core = make(ElectionState(2), voters=frozenset({1}))
    ready = core.tick(2 * T)
    assert isinstance(core.role, Leader) and core.epoch == 3
    names = [e["event"] for e in ready.trace]
    assert names.index("BecomeProspective") < names.index("StartElection") < names.index("BecomeLeader")


# ------------------------------------------------------------------------- the prospective's answers


def test_majority_of_pre_vote_grants_starts_the_real_election() -> None:
    """maybeTransitionToCandidate: own grant + one = 2 of 3; the real Vote then carries epoch + 1."""
    core, ready = follower_timed_out(5)
    out = answer(core, ready, 2, granted=True)
    assert isinstance(core.role, Candidate) and core.epoch == 6
    assert out.persist is not None and out.persist.voted_id == 1 and out.persist.leader_epoch == 6
    [start] = events(out, "StartElection")
    assert start["cause"] == "PreVoteGranted"
    assert [e["preVote"] for e in events(out, "HandleVoteResponse")] == [True]
    sent = votes_sent(out)
    assert set(sent) == {2, 3} and all(not r.pre_vote and r.candidate_epoch == 6 for r in sent.values())


def test_majority_of_refusals_returns_to_the_leader_it_followed() -> None:
    """maybeHandleElectionLoss -> prospectiveTransitionAfterElectionLoss: leader known -> Follower, same epoch."""
    core, ready = follower_timed_out(5)
    answer(core, ready, 2, granted=False, leader=2)
    assert isinstance(core.role, Prospective)  # one refusal: 2 of 3 still possible
    out = answer(core, ready, 3, granted=False, leader=2)
    role = core.role
    assert isinstance(role, Follower) and role.epoch == 5 and role.leader_id == 2
    [ev] = events(out, "AbandonProspective")
    assert ev["cause"] == "PreVoteRejected" and ev["state"]["epoch"] == 5


def test_refused_without_a_leader_goes_back_to_unattached_and_asks_again_later() -> None:
    core = make(ElectionState(3))
    ready = core.tick(2 * T)
    answer(core, ready, 2, granted=False)
    out = answer(core, ready, 3, granted=False)
    assert isinstance(core.role, Unattached) and core.epoch == 3
    assert events(out, "AbandonProspective")
    deadline = core.role.election_deadline_ms
    assert deadline is not None and deadline > core._now  # a fresh random timeout after a refusal
    core.tick(deadline)
    assert isinstance(core.role, Prospective) and core.epoch == 3


def test_pre_vote_timeout_abandons_then_retries_without_bumping_the_epoch() -> None:
    """pollProspective: election timeout -> Unattached (remaining timer 0) -> Prospective again."""
    core = make(ElectionState(3))
    core.tick(2 * T)
    role = core.role
    assert isinstance(role, Prospective)
    out = core.tick(role.election_deadline_ms)
    assert [e["event"] for e in out.trace if e["event"].endswith("Prospective")] == ["AbandonProspective"]
    assert events(out, "AbandonProspective")[0]["cause"] == "ElectionTimeout"
    core.tick(core._now)
    assert isinstance(core.role, Prospective) and core.epoch == 3


def test_unsupported_version_makes_the_prospective_a_candidate_at_once() -> None:
    """handleVoteResponse: top-level UNSUPPORTED_VERSION while Prospective -> transitionToCandidate."""
    core, ready = follower_timed_out(5)
    out_req = next(o for o in ready.send if o.dest_id == 3)
    out = core.step(ResponseReceived(3, VoteResponse(-1, -1, False, error=Errors.UNSUPPORTED_VERSION),
                                     out_req.request_id), F)
    assert isinstance(core.role, Candidate) and core.epoch == 6
    assert events(out, "StartElection")[0]["cause"] == "UnsupportedVersion"


def test_a_late_pre_vote_grant_is_not_counted_as_a_vote() -> None:
    core, ready = follower_timed_out(5)
    late = next(o for o in ready.send if o.dest_id == 3)
    answer(core, ready, 2, granted=True)  # -> Candidate of epoch 6
    core.step(ResponseReceived(3, VoteResponse(-1, 6, True), late.request_id), F)
    assert isinstance(core.role, Candidate), "a pre-vote answer was counted in the real election"


def test_higher_epoch_in_a_pre_vote_answer_ends_the_pre_vote() -> None:
    core, ready = follower_timed_out(5)
    answer(core, ready, 2, granted=False, epoch=7, leader=3)
    assert isinstance(core.role, Follower) and core.epoch == 7 and core.leader_id == 3


# ------------------------------------------------------------------------- granting pre-votes


def pre_vote(epoch: int, cand: int = 2, last_epoch: int = 0, end: int = 0) -> VoteRequest:
    return VoteRequest("cid", epoch, cand, last_epoch, end, voter_id=1, pre_vote=True)


def ask(core: KRaftCore, req: VoteRequest, now: int = 10) -> tuple[VoteResponse, Ready]:
    ready = core.step(RequestReceived(req.candidate_id, "tok", req), now)
    [reply] = ready.replies
    assert isinstance(reply.response, VoteResponse)
    return reply.response, ready


def test_unattached_grants_a_pre_vote_without_voting_or_persisting() -> None:
    core = make(ElectionState(3), log_of(2, 4))
    resp, ready = ask(core, pre_vote(3, last_epoch=2, end=4))
    assert resp.vote_granted and resp.leader_epoch == 3
    assert isinstance(core.role, Unattached) and core.epoch == 3 and core.voted_id == -1
    assert ready.persist is None, "a granted pre-vote was persisted"
    [ev] = events(ready, "HandleVoteRequest")
    assert ev["preVote"] is True
    assert not line_errors({**ev, "seq": 0}), line_errors({**ev, "seq": 0})
    # ... and the node can still give its one real vote of the epoch to someone else.
    resp, _ = ask(core, VoteRequest("cid", 4, 3, 2, 4, voter_id=1))
    assert resp.vote_granted and core.voted_id == 3


def test_voted_node_grants_a_pre_vote_to_another_nominee() -> None:
    """unattachedOrProspectiveCanGrantVote: for a pre-vote only the log counts, not votedKey."""
    core = make(ElectionState(3, -1, 3))
    resp, ready = ask(core, pre_vote(3))
    assert resp.vote_granted and isinstance(core.role, Voted) and core.voted_id == 3 and ready.persist is None


def test_pre_vote_refused_to_a_stale_log() -> None:
    core = make(ElectionState(3), log_of(2, 4))
    resp, _ = ask(core, pre_vote(3, last_epoch=2, end=3))
    assert not resp.vote_granted
    resp, _ = ask(core, pre_vote(3, last_epoch=1, end=9))
    assert not resp.vote_granted


def test_follower_refuses_pre_votes_once_its_leader_answered_a_fetch() -> None:
    """FollowerState.canGrantVote: grant only while !hasFetchedFromLeader (KafkaRaftClientPreVoteTest)."""
    core = make(ElectionState(5, 3, -1))
    resp, first = ask(core, pre_vote(5))
    assert resp.vote_granted, "a follower that never heard from its leader refused a pre-vote"
    fetch = next(o for o in first.send if o.dest_id == 3)
    core.step(ResponseReceived(3, FetchResponse(0, (), None, LeaderIdAndEpoch(3, 5)), fetch.request_id), 30)
    assert isinstance(core.role, Follower) and core.role.fetched
    resp, ready = ask(core, pre_vote(5), now=40)
    assert not resp.vote_granted and resp.leader_id == 3 and resp.leader_epoch == 5
    assert isinstance(core.role, Follower) and ready.persist is None


def test_leader_refuses_pre_votes() -> None:
    core = make(ElectionState(4, -1, 1))
    ready = core.tick(0)
    answer(core, ready, 2, granted=True)
    assert isinstance(core.role, Leader)
    resp, _ = ask(core, pre_vote(4))
    assert not resp.vote_granted and isinstance(core.role, Leader)


def test_candidate_and_prospective_grant_pre_votes_but_not_votes() -> None:
    core = make(ElectionState(4, -1, 1))  # candidate of epoch 4
    resp, _ = ask(core, pre_vote(4))
    assert resp.vote_granted and isinstance(core.role, Candidate)
    core, _ = follower_timed_out(5)
    resp, _ = ask(core, pre_vote(5), now=F)
    assert resp.vote_granted and isinstance(core.role, Prospective)


def test_pre_vote_of_a_higher_epoch_still_moves_the_receiver_to_that_epoch() -> None:
    """handleVoteRequest: replicaEpoch > quorum.epoch() -> transitionToUnattached, before the grant decision."""
    core = make(ElectionState(5, 3, -1))
    resp, ready = ask(core, pre_vote(7))
    assert resp.vote_granted and resp.leader_epoch == 7
    assert isinstance(core.role, Unattached) and core.epoch == 7 and core.voted_id == -1
    assert ready.persist is not None and ready.persist.leader_epoch == 7


@pytest.mark.parametrize(("last_epoch", "valid"), [(5, True), (6, False)])
def test_a_pre_vote_may_name_its_own_epoch_as_last_epoch(last_epoch: int, valid: bool) -> None:
    """handleVoteRequest: preVote ? lastEpoch > replicaEpoch : lastEpoch >= replicaEpoch is INVALID_REQUEST."""
    core = make(ElectionState(5))
    resp, _ = ask(core, pre_vote(5, last_epoch=last_epoch, end=1))
    assert (resp.partition_error == Errors.NONE) == valid
    real = VoteRequest("cid", 5, 2, 5, 1, voter_id=1)
    resp, _ = ask(make(ElectionState(5)), real)
    assert resp.partition_error == Errors.INVALID_REQUEST


def test_prospective_gives_its_one_real_vote_and_keeps_it() -> None:
    """QuorumState.prospectiveAddVotedState: a candidate of the prospective's own epoch (it bumped from the
    epoch before) gets the vote: persisted, still Prospective; a second candidate is refused."""
    core = make(ElectionState(3))
    core.tick(2 * T)
    assert isinstance(core.role, Prospective) and core.voted_id == -1
    resp, ready = ask(core, VoteRequest("cid", 3, 2, 0, 0, voter_id=1), now=core._now)
    assert resp.vote_granted and isinstance(core.role, Prospective) and core.epoch == 3 and core.voted_id == 2
    assert ready.persist is not None and ready.persist.voted_id == 2 and ready.persist.leader_epoch == 3
    resp, _ = ask(core, VoteRequest("cid", 3, 3, 0, 0, voter_id=1), now=core._now)
    assert not resp.vote_granted and core.voted_id == 2
    resp, _ = ask(core, VoteRequest("cid", 3, 2, 0, 0, voter_id=1), now=core._now)
    assert resp.vote_granted  # the same candidate asking again (a lost response)


def test_prospective_with_a_known_leader_refuses_real_votes() -> None:
    core, _ = follower_timed_out(5)
    resp, _ = ask(core, VoteRequest("cid", 5, 3, 0, 0, voter_id=1), now=F)
    assert not resp.vote_granted
