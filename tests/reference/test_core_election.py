"""Core tests, KIP-595 "Leader Election" / "Vote Request Handling" / "Vote Response Handling" /
"BeginQuorumEpoch", and restart ("Persistence"). Inputs in, outputs checked; no sockets."""

from __future__ import annotations

import random

import pytest
from kraft_tck.reference.core import CoreConfig, KRaftCore
from kraft_tck.reference.io import ElectionState, Ready, RequestReceived, ResponseReceived
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    FetchRequest,
    VoteRequest,
    VoteResponse,
)
from kraft_tck.reference.roles import Candidate, Follower, Leader, Resigned, Unattached, Voted
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import ControlType, RecordBatch, data_batch, decode_control

VOTERS = frozenset({1, 2, 3})
T = 1000  # election timeout
FRESH = ElectionState()


def make(
    node_id: int = 1,
    durable: ElectionState = FRESH,
    batches: tuple[RecordBatch, ...] = (),
    voters: frozenset[int] = VOTERS,
    cluster_id: str | None = "cid",
    seed: int = 7,
) -> KRaftCore:
    config = CoreConfig(node_id, voters, cluster_id, election_timeout_ms=T, fetch_timeout_ms=2000)
    return KRaftCore(config, durable, Log(batches), random.Random(seed), 0)


def log_with(*epochs: tuple[int, int]) -> tuple[RecordBatch, ...]:
    """One single-record batch per record: ``(epoch, count)`` runs, contiguous from offset 0."""
    out, offset = [], 0
    for epoch, count in epochs:
        for _ in range(count):
            out.append(data_batch(offset, epoch, [b"x%d" % offset]))
            offset += 1
    return tuple(out)


def request(core: KRaftCore, req: object, now: int = 10) -> Ready:
    return core.step(RequestReceived(-1, "tok", req), now)


def vote(
    epoch: int, cand: int, last_epoch: int = 0, end: int = 0, cluster: str | None = "cid"
) -> VoteRequest:
    return VoteRequest(cluster, epoch, cand, last_epoch, end)


def leader_of(epoch: int = 1, batches: tuple[RecordBatch, ...] = (), **kw: object) -> KRaftCore:
    """A node 1 that just won ``epoch`` (restored as candidate, then granted by node 2)."""
    core = make(1, ElectionState(epoch, -1, 1), batches, **kw)  # type: ignore[arg-type]
    core.step(ResponseReceived(2, VoteResponse(-1, epoch, True)), 0)
    assert isinstance(core.role, Leader)
    return core


# ---------------------------------------------------------------------- Vote rules

# (name, durable state of node 1, its log, the request, granted?, error (top, partition), role after)
VOTE_CASES = [
    ("grant to a fresh candidate", ElectionState(1), (), vote(2, 2), True, None, Voted),
    (
        "null cluster id accepted (step 1)",
        ElectionState(1),
        (),
        vote(2, 2, cluster=None),
        True,
        None,
        Voted,
    ),
    (
        "cluster id mismatch",
        ElectionState(1),
        (),
        vote(2, 2, cluster="other"),
        False,
        ("top", Errors.INCONSISTENT_CLUSTER_ID),
        Unattached,
    ),
    (
        "candidate epoch below ours is fenced",
        ElectionState(5),
        (),
        vote(4, 2),
        False,
        ("partition", Errors.FENCED_LEADER_EPOCH),
        Unattached,
    ),
    (
        "candidate outside the voter set: granted as Kafka 3.9+ (no INCONSISTENT_VOTER_SET)",
        ElectionState(1),
        (),
        vote(2, 9),
        True,
        None,
        Voted,
    ),
    (
        "one vote per epoch: refuse another candidate",
        ElectionState(2, -1, 3),
        (),
        vote(2, 2),
        False,
        None,
        Voted,
    ),
    (
        "one vote per epoch: grant the same candidate again",
        ElectionState(2, -1, 2),
        (),
        vote(2, 2),
        True,
        None,
        Voted,
    ),
    (
        "candidate's last epoch is older",
        ElectionState(2),
        log_with((2, 1)),
        vote(3, 2, 1, 50),
        False,
        None,
        Unattached,
    ),
    (
        "same last epoch, shorter log",
        ElectionState(2),
        log_with((2, 3)),
        vote(3, 2, 2, 2),
        False,
        None,
        Unattached,
    ),
    (
        "same last epoch, same length",
        ElectionState(2),
        log_with((2, 3)),
        vote(3, 2, 2, 3),
        True,
        None,
        Voted,
    ),
    (
        "newer last epoch, shorter log",
        ElectionState(2),
        log_with((1, 5)),
        vote(3, 2, 2, 1),
        True,
        None,
        Voted,
    ),
    ("follower of the same epoch refuses", ElectionState(2, 3), (), vote(2, 2), False, None, Follower),
    ("follower grants in a higher epoch", ElectionState(2, 3), (), vote(3, 2), True, None, Voted),
    ("a candidate voted for itself", ElectionState(2, -1, 1), (), vote(2, 2), False, None, Candidate),
    (
        "a leader restarted as resigned refuses its epoch",
        ElectionState(2, 1, 1),
        (),
        vote(2, 2),
        False,
        None,
        Resigned,
    ),
]


@pytest.mark.parametrize(
    ("durable", "batches", "req", "granted", "error", "role_after"),
    [c[1:] for c in VOTE_CASES],
    ids=[c[0] for c in VOTE_CASES],
)
def test_vote_request_handling(
    durable: ElectionState,
    batches: tuple[RecordBatch, ...],
    req: VoteRequest,
    granted: bool,
    error: tuple[str, Errors] | None,
    role_after: type,
) -> None:
    core = make(1, durable, batches)
    ready = request(core, req)
    (reply,) = ready.replies
    resp = reply.response
    assert isinstance(resp, VoteResponse)
    assert reply.reply_to == "tok"
    assert resp.vote_granted is granted
    top, part = (resp.error, resp.partition_error)
    if error is None:
        assert (top, part) == (Errors.NONE, Errors.NONE)
    elif error[0] == "top":
        assert (top, part) == (error[1], Errors.NONE)
    else:
        assert (top, part) == (Errors.NONE, error[1])
    assert isinstance(core.role, role_after)
    assert resp.leader_epoch == core.epoch
    assert ready.trace[0]["event"] == "HandleVoteRequest"


def test_granted_vote_is_in_the_persist_of_the_same_bundle() -> None:
    # KIP-595: the vote is persisted before the response is sent; the shell persists Ready.persist first.
    core = make(1, ElectionState(1))
    ready = request(core, vote(2, 3))
    assert ready.persist == ElectionState(2, -1, 3, (1, 2, 3))
    assert ready.trace[-1]["log"]["persisted"] is True


def test_forgetting_to_persist_the_vote_is_an_injectable_fault() -> None:
    class ForgetfulCore(KRaftCore):
        def _persist_vote(self) -> None:
            pass

    config = CoreConfig(1, VOTERS, "cid", election_timeout_ms=T)
    core = ForgetfulCore(config, ElectionState(1), Log(), random.Random(1), 0)
    ready = request(core, vote(2, 3))
    assert ready.replies[0].response.vote_granted
    assert ready.persist is not None and ready.persist.voted_id == -1  # only the epoch bump reached disk


def test_leader_of_the_same_epoch_refuses_and_a_higher_epoch_unseats_it() -> None:
    core = leader_of(2)
    resp = request(core, vote(2, 3, 2, 1)).replies[0].response
    assert isinstance(resp, VoteResponse) and not resp.vote_granted and resp.leader_id == 1
    resp = request(core, vote(3, 3, 2, 1)).replies[0].response
    assert isinstance(resp, VoteResponse) and resp.vote_granted
    assert isinstance(core.role, Voted) and core.epoch == 3


def test_observer_votes_like_kafka_but_never_elects_itself() -> None:
    """KafkaRaftClientTest.testHandleVoteRequestAsObserver: an observer grants (Kafka 3.9+)."""
    core = make(9)
    ready = request(core, vote(1, 2))
    resp = ready.replies[0].response
    assert isinstance(resp, VoteResponse) and resp.vote_granted and resp.partition_error == Errors.NONE
    assert isinstance(core.role, Voted) and core.role.election_deadline_ms is None
    assert ready.persist == ElectionState(1, -1, 2, (1, 2, 3))
    # it keeps asking the voters who leads, and never becomes a candidate
    assert [type(o.request) for o in ready.send] == [FetchRequest]
    later = core.tick(50_000)
    assert isinstance(core.role, Voted) and not any(isinstance(o.request, VoteRequest) for o in later.send)


# ---------------------------------------------------------------------- elections


def test_election_timeout_starts_an_election_with_jitter() -> None:
    core = make(1, ElectionState(3), log_with((2, 4)))
    deadline = core.tick(0).next_deadline_ms
    assert deadline is not None and T <= deadline < 2 * T  # timeout + uniform jitter in [0, timeout)
    assert core.tick(deadline - 1).send == []
    ready = core.tick(deadline)
    assert [e["event"] for e in ready.trace] == ["StartElection"]
    assert ready.trace[0]["cause"] == "ElectionTimeout"
    assert isinstance(core.role, Candidate) and core.epoch == 4
    assert ready.persist == ElectionState(4, -1, 1, (1, 2, 3))  # self-vote on disk first
    assert sorted(o.dest_id for o in ready.send) == [2, 3]
    assert {o.request for o in ready.send} == {
        VoteRequest("cid", 4, 1, 2, 4, voter_id=2),
        VoteRequest("cid", 4, 1, 2, 4, voter_id=3),
    }


def test_jitter_differs_between_seeds_but_not_within_one() -> None:
    deadlines = {make(1, seed=s).tick(0).next_deadline_ms for s in range(20)}
    assert len(deadlines) > 5
    assert make(1, seed=3).tick(0).next_deadline_ms == make(1, seed=3).tick(0).next_deadline_ms


@pytest.mark.parametrize(("voters", "grants_needed"), [({1, 2, 3}, 1), ({1, 2, 3, 4, 5}, 2), ({1}, 0)])
def test_majority_wins(voters: set[int], grants_needed: int) -> None:
    core = make(1, ElectionState(0), voters=frozenset(voters))
    ready = core.tick(2 * T)
    for i, peer in enumerate(sorted(voters - {1})[:grants_needed]):
        assert not isinstance(core.role, Leader), f"leader after only {i} grants"
        ready = core.step(ResponseReceived(peer, VoteResponse(-1, 1, True)), 2 * T + 1)
    assert isinstance(core.role, Leader)
    assert "BecomeLeader" in [e["event"] for e in ready.trace]


@pytest.mark.parametrize("seed", range(6))
def test_rejection_by_a_majority_backs_off_then_retries_with_a_higher_epoch(seed: int) -> None:
    core = make(1, ElectionState(0), seed=seed)
    core.tick(2 * T)
    core.step(ResponseReceived(2, VoteResponse(-1, 1, False)), 2 * T + 1)
    assert isinstance(core.role, Candidate) and core.role.backoff_until_ms is None  # one "no" is not a loss
    lost_at = 2 * T + 2
    ready = core.step(ResponseReceived(3, VoteResponse(-1, 1, False)), lost_at)
    role = core.role
    assert isinstance(role, Candidate)
    if role.epoch == 1:  # backing off: the next election waits for the (random, bounded) backoff
        assert role.backoff_until_ms is not None
        assert 0 < role.backoff_until_ms - lost_at <= core.config.election_backoff_max_ms
        assert ready.next_deadline_ms == role.backoff_until_ms
        assert core.tick(role.backoff_until_ms - 1).trace == []
        ready = core.tick(role.backoff_until_ms)
    # else: the random backoff was 0 and the next election started in the same step
    (start,) = [e for e in ready.trace if e["event"] == "StartElection"]
    assert start["cause"] == "ElectionBackoff"
    assert core.epoch == 2 and isinstance(core.role, Candidate) and core.role.retries == 2


def test_unanswered_election_times_out_into_backoff() -> None:
    core = make(1, ElectionState(0))
    core.tick(2 * T)
    role = core.role
    assert isinstance(role, Candidate)
    core.tick(role.election_deadline_ms)
    assert isinstance(core.role, Candidate) and core.role.backoff_until_ms is not None
    core.tick(core.role.backoff_until_ms)
    assert core.epoch == 2


def test_vote_response_with_a_newer_epoch_and_leader_makes_the_candidate_follow() -> None:
    core = make(1, ElectionState(0))
    core.tick(2 * T)
    ready = core.step(ResponseReceived(2, VoteResponse(3, 5, False)), 2 * T + 1)
    assert isinstance(core.role, Follower) and (core.epoch, core.leader_id) == (5, 3)
    assert ready.persist == ElectionState(5, 3, -1, (1, 2, 3))


def test_vote_refused_naming_the_leader_of_the_same_epoch_makes_the_candidate_follow_it() -> None:
    """Kafka's maybeHandleCommonResponse, third case (tla/KRaft.tla LearnLeader in HandleVoteResponse): a
    Vote answered without error by a Follower of the leader elected meanwhile in the candidate's own epoch
    makes the candidate that leader's Follower, keeping its own vote, instead of backing off and starting
    a disruptive election in the next epoch."""
    core = make(1, ElectionState(0))
    core.tick(2 * T)
    assert isinstance(core.role, Candidate) and core.epoch == 1
    ready = core.step(ResponseReceived(2, VoteResponse(3, 1, False)), 2 * T + 1)
    assert isinstance(core.role, Follower) and (core.epoch, core.leader_id, core.voted_id) == (1, 3, 1)
    assert ready.persist == ElectionState(1, 3, 1, (1, 2, 3))
    assert [e["state"]["role"] for e in ready.trace if e["event"] == "HandleVoteResponse"] == ["Follower"]


# ---------------------------------------------------------------------- BecomeLeader


def test_become_leader_appends_leader_change_and_sends_begin_quorum_epoch() -> None:
    core = make(1, ElectionState(3, -1, 1), log_with((2, 4)))  # restored as candidate of epoch 3
    ready = core.step(ResponseReceived(3, VoteResponse(-1, 3, True)), 5)
    assert [e["event"] for e in ready.trace] == ["HandleVoteResponse", "BecomeLeader"]
    assert ready.persist == ElectionState(3, 1, 1, (1, 2, 3))
    ((op,),) = [op.batches for op in ready.log_ops]
    assert (op.base_offset, op.partition_leader_epoch, op.is_control) == (4, 3, True)
    ctype, body = decode_control(op.records[0])
    assert ctype == ControlType.LEADER_CHANGE
    assert body["LeaderId"] == 1
    assert [v["VoterId"] for v in body["Voters"]] == [1, 2, 3]
    assert [v["VoterId"] for v in body["GrantingVoters"]] == [1, 3]
    assert ready.trace[-1]["log"]["appended"][0]["control"] is True
    assert {(o.dest_id, o.request) for o in ready.send} == {
        (2, BeginQuorumEpochRequest("cid", 1, 3, 2)),
        (3, BeginQuorumEpochRequest("cid", 1, 3, 3)),
    }


def test_begin_quorum_epoch_is_a_heartbeat_acknowledged_or_not() -> None:
    """Kafka 3.9+ (KAFKA-16536, ``KafkaRaftClient.maybeSendBeginQuorumEpochRequests``): every
    fetch.timeout/2 the leader sends BeginQuorumEpoch to every other voter, whether it acknowledged or
    fetched; the KIP's rule (until acknowledged) sent nothing more here."""
    core = leader_of(1)
    period = core.config.fetch_timeout_ms // 2
    core.step(ResponseReceived(2, BeginQuorumEpochResponse(1, 1)), 1)
    core.step(RequestReceived(3, "f", FetchRequest("cid", 3, 1, 0, 0)), 2)  # it knows the leader too
    core.step(ResponseReceived(3, BeginQuorumEpochResponse(1, 1)), 3)
    assert core.tick(period - 1).send == []
    resent = core.tick(period).send
    assert sorted(o.dest_id for o in resent if isinstance(o.request, BeginQuorumEpochRequest)) == [2, 3]


def test_begin_quorum_epoch_request_makes_a_voter_follow() -> None:
    core = make(2, ElectionState(1, -1, 3))
    ready = request(core, BeginQuorumEpochRequest("cid", 3, 1))
    assert ready.replies[0].response == BeginQuorumEpochResponse(3, 1)
    assert isinstance(core.role, Follower) and core.role.voted_id == 3  # the vote of this epoch is kept
    assert ready.persist == ElectionState(1, 3, 3, (1, 2, 3))
    assert [o.dest_id for o in ready.send] == [3]  # and fetches at once
    assert isinstance(ready.send[0].request, FetchRequest)


@pytest.mark.parametrize(
    ("req", "field", "error"),
    [
        (BeginQuorumEpochRequest("nope", 3, 2), "error", Errors.INCONSISTENT_CLUSTER_ID),
        (BeginQuorumEpochRequest("cid", 3, 0), "partition_error", Errors.FENCED_LEADER_EPOCH),
        (BeginQuorumEpochRequest("cid", -1, 2), "partition_error", Errors.INVALID_REQUEST),
        (BeginQuorumEpochRequest("cid", 3, 2**31 - 1), "partition_error", Errors.INVALID_REQUEST),
    ],
)
def test_begin_quorum_epoch_refusals(req: BeginQuorumEpochRequest, field: str, error: Errors) -> None:
    core = make(2, ElectionState(1))
    resp = request(core, req).replies[0].response
    assert getattr(resp, field) == error
    assert isinstance(core.role, Unattached) and core.epoch == 1


# ---------------------------------------------------------------------- restart


@pytest.mark.parametrize(
    ("durable", "role"),
    [
        (ElectionState(4, 1, 1), Resigned),
        (ElectionState(4, -1, 1), Candidate),
        (ElectionState(4, -1, 2), Voted),
        (ElectionState(4, 2, -1), Follower),
        (ElectionState(4), Unattached),
    ],
)
def test_restart_resumes_the_persisted_role(durable: ElectionState, role: type) -> None:
    config = CoreConfig(1, VOTERS, "cid")
    core, ready = KRaftCore.restart(config, durable, Log(), random.Random(1), 0)
    assert isinstance(core.role, role) and core.epoch == 4
    assert ready.trace[0]["event"] == "Restart"


def test_restarted_leader_resigns_and_restarted_voter_keeps_its_vote() -> None:
    config = CoreConfig(1, VOTERS, "cid")
    _, ready = KRaftCore.restart(config, ElectionState(4, 1, 1), Log(), random.Random(1), 0)
    assert sorted(o.dest_id for o in ready.send) == [2, 3]  # EndQuorumEpoch to the voters
    voter = make(1, ElectionState(4, -1, 2))
    assert not request(voter, vote(4, 3)).replies[0].response.vote_granted


def test_log_epoch_newer_than_quorum_state_wins() -> None:
    core = make(1, ElectionState(1), log_with((3, 2)))
    assert isinstance(core.role, Unattached) and core.epoch == 3


# ---------------------------------------------------------------------- liveness: the election timer


def test_higher_epochs_without_a_leader_keep_the_election_timer_running() -> None:
    """Kafka's QuorumState.transitionToUnattached keeps the remaining election time of an Unattached,
    Voted or Candidate voter. A candidate whose log is behind (every Vote refused) retries with a higher
    epoch after each backoff; if each of them restarted the others' timers, none would ever stand."""
    core = make(1, ElectionState(3), log_with((3, 4)))
    deadline = core.tick(0).next_deadline_ms
    assert deadline is not None
    epoch, now = 3, 0
    while now + 150 < deadline:  # a stale candidate (node 3, empty log) tries again every 150 ms
        epoch, now = epoch + 1, now + 150
        resp = request(core, vote(epoch, 3), now).replies[0].response
        assert isinstance(resp, VoteResponse) and not resp.vote_granted
        assert isinstance(core.role, Unattached) and core.role.election_deadline_ms == deadline
    ready = core.tick(deadline)
    assert [e["cause"] for e in ready.trace if e["event"] == "StartElection"] == ["ElectionTimeout"]
    assert isinstance(core.role, Candidate) and core.epoch == epoch + 1


@pytest.mark.parametrize("role", ["Voted", "Candidate"])
def test_voted_and_candidate_keep_their_election_deadline_on_a_higher_epoch(role: str) -> None:
    core = make(1, ElectionState(1), log_with((1, 2)))
    if role == "Voted":
        request(core, vote(2, 2, 1, 2), 10)  # node 2's log is as long as ours: granted
    else:
        core.tick(2 * T)
    before = core.role
    assert type(before).__name__ == role
    now = 20 if role == "Voted" else 2 * T + 5  # before the role's own deadline
    request(core, vote(before.epoch + 1, 3), now)  # type: ignore[union-attr]  # node 3's empty log: refused
    assert isinstance(core.role, Unattached)
    assert core.role.election_deadline_ms == before.election_deadline_ms  # type: ignore[union-attr]


def test_a_follower_that_learns_of_a_new_epoch_draws_a_fresh_election_timeout() -> None:
    """From Follower (and Leader, Resigned) the timer starts afresh, as in Kafka."""
    core = make(1, ElectionState(2, 2, -1), log_with((2, 2)))
    assert isinstance(core.role, Follower)
    request(core, vote(3, 3), 500)  # node 3's empty log: refused
    role = core.role
    assert isinstance(role, Unattached) and role.election_deadline_ms is not None
    assert 500 + T <= role.election_deadline_ms < 500 + 2 * T
