"""The reference node follows Kafka: one test per row of spec/kafka-behaviour.yaml (the row id is in each
test's name, with ``.`` and ``-`` as ``_``).

Each test drives the pure core (``KRaftCore.step`` with ``RequestReceived``, ``tick``) and, where the row
is about the bytes' shape, the wire conversion (``reference/wire.py``) the node uses. Refused requests
must leave the state alone: role, epoch, leader, vote, no ``Ready.persist`` and no log operation.
Kafka references are to raft/src/main/java/org/apache/kafka/raft/ (KafkaRaftClient, LeaderState, ...) and
the tests in KafkaRaftClientTest.java named in the table.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest
from kraft_tck.reference import wire
from kraft_tck.reference.core import CoreConfig, KRaftCore, SafetyViolation
from kraft_tck.reference.io import (
    ClientWrite,
    ElectionState,
    Ready,
    RequestReceived,
    ResponseReceived,
    Shutdown,
)
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from kraft_tck.reference.roles import Candidate, Follower, Leader, Resigned, Unattached, Voted
from kraft_tck.reference.typed_wire import TypedCodec
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import RecordBatch, data_batch

VOTERS = frozenset({1, 2, 3})
ELECTION_TIMEOUT = 1000
FETCH_TIMEOUT = 2000
BACKOFF_MAX = 800
INT32_MAX = 2**31 - 1
CID = "cid"


# ============================================================================================ helpers


FRESH = ElectionState()


def core_of(
    node_id: int = 1,
    durable: ElectionState = FRESH,
    batches: tuple[RecordBatch, ...] = (),
    voters: frozenset[int] = VOTERS,
    fetch_timeout_ms: int = FETCH_TIMEOUT,
) -> KRaftCore:
    config = CoreConfig(
        node_id, voters, CID, election_timeout_ms=ELECTION_TIMEOUT, fetch_timeout_ms=fetch_timeout_ms,
        election_backoff_max_ms=BACKOFF_MAX,
    )
    core = KRaftCore(config, durable, Log(batches), random.Random(3), 0)
    core.tick(0)  # the requests its role owes at start leave now, not with the request under test
    return core


def log_with(*runs: tuple[int, int]) -> tuple[RecordBatch, ...]:
    """One single-record batch per record: ``(epoch, count)`` runs from offset 0."""
    out, offset = [], 0
    for epoch, count in runs:
        for _ in range(count):
            out.append(data_batch(offset, epoch, [b"r%d" % offset]))
            offset += 1
    return tuple(out)


def follower_of(node_id: int = 2, epoch: int = 5, leader: int = 1, **kw: Any) -> KRaftCore:
    core = core_of(node_id, ElectionState(epoch, leader), **kw)
    assert isinstance(core.role, Follower)
    return core


def unattached(node_id: int = 1, epoch: int = 5, **kw: Any) -> KRaftCore:
    core = core_of(node_id, ElectionState(epoch), **kw)
    assert isinstance(core.role, Unattached)
    return core


def leader_of(epoch: int = 5, batches: tuple[RecordBatch, ...] = (), voters: frozenset[int] = VOTERS,
              **kw: Any) -> KRaftCore:
    """Node 1, just elected in ``epoch`` (restored as a candidate, then granted by node 2 and 3)."""
    core = core_of(1, ElectionState(epoch, -1, 1), batches, voters, **kw)
    for v in sorted(voters - {1}):
        if isinstance(core.role, Leader):
            break
        core.step(ResponseReceived(v, VoteResponse(-1, epoch, True)), 0)
    assert isinstance(core.role, Leader)
    return core


def ask(core: KRaftCore, req: object, now: int = 10) -> tuple[Any, Ready]:
    ready = core.step(RequestReceived(-1, "tok", req), now)
    (reply,) = ready.replies
    return reply.response, ready


def state(core: KRaftCore) -> tuple[str, int, int, int]:
    return (core.role.name, core.epoch, core.leader_id, core.voted_id)


def assert_unchanged(core: KRaftCore, before: tuple[str, int, int, int], ready: Ready) -> None:
    assert state(core) == before
    assert ready.persist is None and ready.log_ops == [] and ready.send == []


def via_wire(
    core: KRaftCore, key: int, version: int, body: dict[str, Any], now: int = 10
) -> tuple[dict[str, Any], Ready]:
    """The node's path for one request body: wire -> core -> wire, then through the codec's bytes."""
    req = wire.request_from_kafka(key, version, body)
    ready = core.step(RequestReceived(wire.sender_of(req), "tok", req), now)
    (reply,) = ready.replies
    out = wire.response_to_body(reply.response, version)
    raw = codec.encode_response(key, version, 7, out)
    return codec.decode_response(key, version, raw[4:])[1], ready


def vote_body(cluster: str | None = CID, topic: str = "__cluster_metadata", partition: int = 0) -> dict[str, Any]:
    part = {"PartitionIndex": partition, "CandidateEpoch": 6, "CandidateId": 3, "LastOffsetEpoch": 0,
            "LastOffset": 0}
    return {"ClusterId": cluster, "Topics": [{"TopicName": topic, "Partitions": [part]}], "VoterId": -1}


def quorum_epoch_body(cluster: str | None = CID, topic: str = "other") -> dict[str, Any]:
    part = {"PartitionIndex": 0, "LeaderId": 3, "LeaderEpoch": 6}
    return {"ClusterId": cluster, "Topics": [{"TopicName": topic, "Partitions": [part]}]}


def fetch(core: KRaftCore, replica: int, offset: int, last_epoch: int, epoch: int | None = None,
          max_wait: int = 0, now: int = 10, cluster: str | None = CID) -> tuple[Any, Ready]:
    req = FetchRequest(cluster, replica, core.epoch if epoch is None else epoch, offset, last_epoch, max_wait)
    ready = core.step(RequestReceived(replica, ("f", replica, now), req), now)
    return (ready.replies[0].response if ready.replies else None), ready


def progress(core: KRaftCore, replica: int) -> tuple[int, int]:
    role = core.role
    assert isinstance(role, Leader)
    p = role.replicas.get(replica)
    return (-1, -1) if p is None else (p.end_offset, p.last_fetch_ms)


def check_quorum_deadline(core: KRaftCore) -> int:
    assert isinstance(core.role, Leader)
    return core.role.progress_deadline_ms


def inflight_fetch(core: KRaftCore, dest: int) -> int:
    return core._inflight[dest]


# ============================================================================================ Vote


def test_vote_cluster_id_mismatch() -> None:
    core = follower_of()
    before = state(core)
    body, ready = via_wire(core, wire.VOTE, 1, vote_body(cluster="other"))
    assert body["ErrorCode"] == Errors.INCONSISTENT_CLUSTER_ID and body["Topics"] == []
    assert_unchanged(core, before, ready)


def test_vote_null_cluster_id_accepted() -> None:
    core = unattached()
    resp, _ = ask(core, VoteRequest(None, 6, 2, 0, 0))
    assert resp.vote_granted and resp.error == Errors.NONE
    assert isinstance(core.role, Voted) and core.role.voted_id == 2


def test_vote_wrong_topic_partition() -> None:
    for body in (vote_body(topic="other"), vote_body(partition=1), {"ClusterId": CID, "Topics": []}):
        core = follower_of()
        before = state(core)
        answer, ready = via_wire(core, wire.VOTE, 1, body)
        assert answer["ErrorCode"] == Errors.INVALID_REQUEST and answer["Topics"] == []
        assert_unchanged(core, before, ready)


def test_vote_order_cluster_id_first() -> None:
    core = follower_of()
    body = vote_body(cluster="other", topic="other")
    body["Topics"][0]["Partitions"][0]["LastOffset"] = -5
    answer, _ = via_wire(core, wire.VOTE, 1, body)
    assert answer["ErrorCode"] == Errors.INCONSISTENT_CLUSTER_ID and answer["Topics"] == []


def _assert_vote_refused_invalid(req: VoteRequest) -> None:
    """KafkaRaftClientTest.testInvalidVoteRequest: INVALID_REQUEST at partition level, with the receiver's
    epoch and known leader, and the follower of epoch 5 stays one."""
    core = follower_of()
    before = state(core)
    resp, ready = ask(core, req)
    assert isinstance(resp, VoteResponse)
    assert (resp.error, resp.partition_error) == (Errors.NONE, Errors.INVALID_REQUEST)
    assert (resp.leader_id, resp.leader_epoch, resp.vote_granted) == (1, 5, False)
    assert_unchanged(core, before, ready)


def test_vote_invalid_last_offset() -> None:
    _assert_vote_refused_invalid(VoteRequest(CID, 6, 3, 0, -5))


def test_vote_invalid_last_epoch() -> None:
    _assert_vote_refused_invalid(VoteRequest(CID, 6, 3, -1, 0))


def test_vote_last_epoch_not_below_candidate_epoch() -> None:
    _assert_vote_refused_invalid(VoteRequest(CID, 6, 3, 6, 0))
    _assert_vote_refused_invalid(VoteRequest(CID, 6, 3, 7, 0))


def test_vote_sanity_before_epoch() -> None:
    _assert_vote_refused_invalid(VoteRequest(CID, 3, 3, 0, -1))  # an older epoch, but invalid first


def test_vote_fenced_epoch() -> None:
    core = follower_of()
    before = state(core)
    resp, ready = ask(core, VoteRequest(CID, 4, 3, 0, 0))
    assert resp.partition_error == Errors.FENCED_LEADER_EPOCH and not resp.vote_granted
    assert (resp.leader_id, resp.leader_epoch) == (1, 5)
    assert_unchanged(core, before, ready)


def test_vote_invalid_candidate_id() -> None:
    core = unattached()
    before = state(core)
    resp, ready = ask(core, VoteRequest(CID, 6, -1, 0, 0))
    assert resp.partition_error == Errors.INVALID_REQUEST and (resp.leader_id, resp.leader_epoch) == (-1, 5)
    assert_unchanged(core, before, ready)
    resp, _ = ask(core, VoteRequest(CID, 4, -1, 0, 0))  # the fenced check comes first
    assert resp.partition_error == Errors.FENCED_LEADER_EPOCH


def test_vote_higher_epoch_unattached() -> None:
    core = follower_of(batches=log_with((5, 3)))
    resp, ready = ask(core, VoteRequest(CID, 6, 3, 1, 9))  # a stale log: refused, but the epoch moves
    assert (resp.partition_error, resp.vote_granted, resp.leader_id, resp.leader_epoch) == (Errors.NONE, False, -1, 6)
    assert isinstance(core.role, Unattached) and state(core) == ("Unattached", 6, -1, -1)
    assert ready.persist == ElectionState(6, -1, -1, (1, 2, 3))


@pytest.mark.parametrize(
    ("last_epoch", "end", "granted"),
    [(3, 2, True), (3, 5, True), (4, 0, True), (3, 1, False), (2, 9, False)],
)
def test_vote_grant_log_up_to_date(last_epoch: int, end: int, granted: bool) -> None:
    core = unattached(batches=log_with((3, 2)))
    resp, ready = ask(core, VoteRequest(CID, 6, 2, last_epoch, end))
    assert resp.vote_granted is granted
    if granted:
        assert isinstance(core.role, Voted) and ready.persist == ElectionState(6, -1, 2, (1, 2, 3))


def test_vote_one_vote_per_epoch() -> None:
    core = core_of(1, ElectionState(5, -1, 2))
    assert isinstance(core.role, Voted)
    assert ask(core, VoteRequest(CID, 5, 2, 0, 0))[0].vote_granted  # the same candidate again
    resp, ready = ask(core, VoteRequest(CID, 5, 3, 4, 100))
    assert not resp.vote_granted and resp.partition_error == Errors.NONE
    assert_unchanged(core, ("Voted", 5, -1, 2), ready)


def test_vote_same_epoch_known_leader_or_candidate() -> None:
    req = VoteRequest(CID, 5, 3, 4, 100)
    lead = leader_of(5)
    resigned = leader_of(5)
    resigned.step(Shutdown(), 1)
    assert isinstance(resigned.role, Resigned)
    for core, leader in (
        (lead, 1), (follower_of(2), 1), (core_of(1, ElectionState(5, -1, 1)), -1), (resigned, 1)
    ):
        before = state(core)
        resp, ready = ask(core, req, now=20)
        assert (resp.partition_error, resp.vote_granted) == (Errors.NONE, False), before
        assert (resp.leader_id, resp.leader_epoch) == (leader, 5), before
        assert state(core) == before and ready.persist is None


def test_vote_persist_before_response() -> None:
    core = unattached()
    resp, ready = ask(core, VoteRequest(CID, 6, 2, 0, 0))
    assert resp.vote_granted and ready.persist == ElectionState(6, -1, 2, (1, 2, 3))
    again = core_of(1, ready.persist)  # a restart from what was persisted
    assert isinstance(again.role, Voted) and not ask(again, VoteRequest(CID, 6, 3, 0, 0))[0].vote_granted


def test_vote_from_non_voter() -> None:
    lead = leader_of(5)
    resp, _ = ask(lead, VoteRequest(CID, 4, 9, 0, 0))
    assert (resp.partition_error, resp.leader_id, resp.leader_epoch) == (Errors.FENCED_LEADER_EPOCH, 1, 5)
    resp, _ = ask(lead, VoteRequest(CID, 5, 9, 0, 0))
    assert (resp.partition_error, resp.vote_granted, resp.leader_id) == (Errors.NONE, False, 1)
    voter = unattached()
    resp, _ = ask(voter, VoteRequest(CID, 6, 9, 0, 0))
    assert resp.partition_error == Errors.NONE and resp.vote_granted  # never INCONSISTENT_VOTER_SET
    assert isinstance(voter.role, Voted) and voter.role.voted_id == 9


def test_vote_to_non_voter() -> None:
    core = core_of(9, ElectionState(2))
    resp, ready = ask(core, VoteRequest(CID, 3, 2, 2, 1))
    assert (resp.partition_error, resp.vote_granted, resp.leader_epoch) == (Errors.NONE, True, 3)
    assert isinstance(core.role, Voted) and ready.persist == ElectionState(3, -1, 2, (1, 2, 3))
    # still an observer: it never asks for votes, however long it waits
    later = core.tick(100_000)
    assert not any(isinstance(o.request, VoteRequest) for o in later.send) and core.epoch == 3


def test_vote_voter_key_mismatch() -> None:
    core = leader_of(5)
    resp, _ = ask(core, VoteRequest(CID, 6, 2, 5, 100, voter_id=10))
    assert resp.partition_error == Errors.INVALID_VOTER_KEY and not resp.vote_granted
    assert (resp.leader_id, resp.leader_epoch) == (-1, 6)  # the epoch step came first
    assert state(core) == ("Unattached", 6, -1, -1)
    resp, _ = ask(core_of(1, ElectionState(5)), VoteRequest(CID, 6, 2, 0, 0, voter_id=1))
    assert resp.vote_granted  # addressed to us


def test_vote_empty_log_sentinel() -> None:
    core = unattached(1, 5)
    ready = core.tick(2 * ELECTION_TIMEOUT)
    votes = [o.request for o in ready.send if isinstance(o.request, VoteRequest)]
    assert len(votes) == 2 and {(v.last_offset_epoch, v.last_offset) for v in votes} == {(0, 0)}
    body = wire.request_to_body(votes[0], 1)
    assert body["Topics"][0]["Partitions"][0]["LastOffsetEpoch"] == 0
    assert core.state_snapshot()["lastFetchedEpoch"] == 0  # the trace says what the wire says


def test_vote_epoch_overflow() -> None:
    core = follower_of()
    before = state(core)
    resp, ready = ask(core, VoteRequest(CID, INT32_MAX, 3, 0, 0))
    assert resp.partition_error == Errors.INVALID_REQUEST and (resp.leader_id, resp.leader_epoch) == (1, 5)
    assert_unchanged(core, before, ready)


def test_vote_rejected_backoff() -> None:
    """binaryExponentialElectionBackoffMs: after the first lost election (retries 1) the wait is
    100 ms x random[0, 2), i.e. 0 or 100 ms; then the next election, epoch + 1, retries 2."""
    waits = set()
    for seed in range(12):
        core = core_of(1, ElectionState(5, -1, 1))  # a candidate in epoch 5, first try
        core._rng.seed(seed)
        core.step(ResponseReceived(2, VoteResponse(-1, 5, False)), 10)
        core.step(ResponseReceived(3, VoteResponse(-1, 5, False)), 11)
        role = core.role
        assert isinstance(role, Candidate)
        if core.epoch == 6:  # a wait of 0: the next election started in the same step
            waits.add(0)
        else:
            assert role.backoff_until_ms is not None
            waits.add(role.backoff_until_ms - 11)
            core.tick(role.backoff_until_ms)
        assert isinstance(core.role, Candidate) and core.epoch == 6 and core.role.retries == 2
    assert waits == {0, 100}


def test_election_no_epoch_overflow() -> None:
    core = unattached(1, INT32_MAX - 1)
    ready = core.tick(3 * ELECTION_TIMEOUT)
    assert state(core) == ("Unattached", INT32_MAX - 1, -1, -1) and ready.send == []
    assert ready.next_deadline_ms is not None and ready.next_deadline_ms > 3 * ELECTION_TIMEOUT  # no spin
    follower = follower_of(2, INT32_MAX - 1)
    ready = follower.tick(10 * FETCH_TIMEOUT)
    assert isinstance(follower.role, Follower) and follower.epoch == INT32_MAX - 1
    assert not any(isinstance(o.request, VoteRequest) for o in ready.send)


# ============================================================================================ BeginQuorumEpoch


def test_begin_cluster_id_mismatch() -> None:
    core = unattached(2)
    before = state(core)
    body, ready = via_wire(core, wire.BEGIN_QUORUM_EPOCH, 1, quorum_epoch_body("other", "__cluster_metadata"))
    assert body["ErrorCode"] == Errors.INCONSISTENT_CLUSTER_ID and body["Topics"] == []
    assert_unchanged(core, before, ready)


def test_begin_wrong_topic_partition() -> None:
    core = unattached(2)
    before = state(core)
    body, ready = via_wire(core, wire.BEGIN_QUORUM_EPOCH, 1, quorum_epoch_body(topic="other"))
    assert body["ErrorCode"] == Errors.INVALID_REQUEST and body["Topics"] == []
    assert_unchanged(core, before, ready)


def test_begin_fenced_epoch() -> None:
    core = follower_of()
    before = state(core)
    resp, ready = ask(core, BeginQuorumEpochRequest(CID, 3, 4))
    assert (resp.partition_error, resp.leader_id, resp.leader_epoch) == (Errors.FENCED_LEADER_EPOCH, 1, 5)
    assert_unchanged(core, before, ready)


def test_begin_invalid_leader_id() -> None:
    core = unattached(2)
    before = state(core)
    resp, ready = ask(core, BeginQuorumEpochRequest(CID, -1, 6))
    assert (resp.partition_error, resp.leader_id, resp.leader_epoch) == (Errors.INVALID_REQUEST, -1, 5)
    assert_unchanged(core, before, ready)


def test_begin_follow_leader() -> None:
    core = unattached(2)
    resp, ready = ask(core, BeginQuorumEpochRequest(CID, 3, 6))
    assert resp == BeginQuorumEpochResponse(3, 6)
    assert state(core) == ("Follower", 6, 3, -1) and ready.persist == ElectionState(6, 3, -1, (1, 2, 3))
    same_epoch = unattached(2, 5)
    assert ask(same_epoch, BeginQuorumEpochRequest(CID, 3, 5))[0] == BeginQuorumEpochResponse(3, 5)
    assert state(same_epoch) == ("Follower", 5, 3, -1)


def test_begin_from_non_voter() -> None:
    core = unattached(2)
    resp, _ = ask(core, BeginQuorumEpochRequest(CID, 9, 6))
    assert resp == BeginQuorumEpochResponse(9, 6)  # never INCONSISTENT_VOTER_SET
    assert state(core) == ("Follower", 6, 9, -1)


def test_begin_voter_key_mismatch() -> None:
    core = unattached(2, 4)
    resp, _ = ask(core, BeginQuorumEpochRequest(CID, 3, 5, voter_id=10))
    assert (resp.partition_error, resp.leader_id, resp.leader_epoch) == (Errors.INVALID_VOTER_KEY, 3, 5)
    assert state(core) == ("Follower", 5, 3, -1)  # followed anyway: the key is checked after
    assert ask(core, BeginQuorumEpochRequest(CID, 3, 5, voter_id=2))[0] == BeginQuorumEpochResponse(3, 5)


def test_begin_epoch_overflow() -> None:
    core = unattached(2)
    before = state(core)
    resp, ready = ask(core, BeginQuorumEpochRequest(CID, 3, INT32_MAX))
    assert resp.partition_error == Errors.INVALID_REQUEST
    assert_unchanged(core, before, ready)


def begin_sent(ready: Ready) -> list[tuple[int, BeginQuorumEpochRequest]]:
    return sorted((o.dest_id, o.request) for o in ready.send if isinstance(o.request, BeginQuorumEpochRequest))


def test_begin_resend() -> None:
    """Kafka 3.9+ (KAFKA-16536) ``KafkaRaftClientTest.testBeginQuorumEpochHeartbeat``: the leader sends
    BeginQuorumEpoch to every other voter when it wins and then every fetch.timeout/2
    (``LeaderState.beginQuorumEpochTimeoutMs``) for as long as it leads, acknowledged or not; a voter with
    a request still in flight waits for the next round (``KafkaRaftClient.maybeSendBeginQuorumEpochRequests``
    sends only where ``RequestManager.isReady``). The KIP's rule (until acknowledged) stops after the acks."""
    period = FETCH_TIMEOUT // 2
    core = core_of(1, ElectionState(5, -1, 1))
    won = core.step(ResponseReceived(2, VoteResponse(-1, 5, True)), 0)
    assert isinstance(core.role, Leader)
    announce = [(2, BeginQuorumEpochRequest(CID, 1, 5, 2)), (3, BeginQuorumEpochRequest(CID, 1, 5, 3))]
    assert begin_sent(won) == announce  # the timer starts expired: the first round goes with the win
    # both voters acknowledge, and voter 3 fetches too: under the KIP's rule nothing more would be sent
    core.step(ResponseReceived(2, BeginQuorumEpochResponse(1, 5)), 1)
    acked = core.step(ResponseReceived(3, BeginQuorumEpochResponse(1, 5)), 1)
    fetch(core, 3, 0, 0, now=2)
    assert acked.next_deadline_ms == period  # the heartbeat is the leader's next timer
    assert begin_sent(core.tick(period - 1)) == []
    assert begin_sent(core.tick(period)) == announce  # a heartbeat, though both acknowledged
    assert begin_sent(core.tick(period + period // 2)) == []  # not before the next period
    # voter 2 answers this round, voter 3 does not: its request is still in flight at the next round
    core.step(ResponseReceived(2, BeginQuorumEpochResponse(1, 5)), period + period // 2)
    assert begin_sent(core.tick(2 * period)) == announce[:1]
    assert isinstance(core.role, Leader) and core.role.begin_epoch_deadline_ms == 3 * period
    # the leader goes on for as long as it leads (fetches from a voter keep it in office)
    for n in range(3, 7):
        core.step(ResponseReceived(2, BeginQuorumEpochResponse(1, 5)), n * period - 1)
        fetch(core, 2, 1, 5, now=n * period - 1)
        assert [dest for dest, _ in begin_sent(core.tick(n * period))][:1] == [2]


def test_begin_resend_is_idempotent_at_the_follower() -> None:
    """A follower takes the leader's repeated BeginQuorumEpoch of its own epoch as a no-op (Kafka's
    ``KafkaRaftClient.maybeTransition``: leader known, same epoch, no new endpoints): NONE, no persist, its
    fetch timer and its fetch in flight untouched."""
    core = follower_of(2, 5, 1)
    assert isinstance(core.role, Follower)
    deadline, inflight = core.role.fetch_deadline_ms, inflight_fetch(core, 1)
    for now in (10, FETCH_TIMEOUT // 2 + 10, FETCH_TIMEOUT - 10):
        before = state(core)
        resp, ready = ask(core, BeginQuorumEpochRequest(CID, 1, 5, 2), now=now)
        assert resp == BeginQuorumEpochResponse(1, 5)
        assert state(core) == before and ready.persist is None and ready.log_ops == [] and ready.send == []
        assert isinstance(core.role, Follower) and core.role.fetch_deadline_ms == deadline
        assert inflight_fetch(core, 1) == inflight


# ============================================================================================ EndQuorumEpoch


def test_end_cluster_id_mismatch() -> None:
    core = follower_of()
    before = state(core)
    body = quorum_epoch_body("other", "__cluster_metadata")
    body["Topics"][0]["Partitions"][0].update(LeaderId=1, LeaderEpoch=5, PreferredSuccessors=[2])
    answer, ready = via_wire(core, wire.END_QUORUM_EPOCH, 0, body)
    assert answer["ErrorCode"] == Errors.INCONSISTENT_CLUSTER_ID and answer["Topics"] == []
    assert_unchanged(core, before, ready)
    assert isinstance(core.role, Follower) and core.role.fetch_deadline_ms == FETCH_TIMEOUT  # timer untouched


def test_end_wrong_topic_partition() -> None:
    core = follower_of()
    before = state(core)
    body = quorum_epoch_body(topic="other")
    body["Topics"][0]["Partitions"][0].update(LeaderId=1, LeaderEpoch=5, PreferredSuccessors=[2])
    answer, ready = via_wire(core, wire.END_QUORUM_EPOCH, 0, body)
    assert answer["ErrorCode"] == Errors.INVALID_REQUEST and answer["Topics"] == []
    assert_unchanged(core, before, ready)


def test_end_fenced_epoch() -> None:
    core = follower_of()
    before = state(core)
    resp, ready = ask(core, EndQuorumEpochRequest(CID, 1, 4, (2,)))
    assert (resp.partition_error, resp.leader_id, resp.leader_epoch) == (Errors.FENCED_LEADER_EPOCH, 1, 5)
    assert_unchanged(core, before, ready)
    assert isinstance(core.role, Follower) and core.role.deadline_cause == "FetchTimeout"


def test_end_invalid_leader_id() -> None:
    core = follower_of()
    before = state(core)
    resp, ready = ask(core, EndQuorumEpochRequest(CID, -1, 5, (2,)))
    assert (resp.partition_error, resp.leader_id, resp.leader_epoch) == (Errors.INVALID_REQUEST, 1, 5)
    assert_unchanged(core, before, ready)


def test_end_epoch_overflow() -> None:
    core = follower_of()
    before = state(core)
    resp, ready = ask(core, EndQuorumEpochRequest(CID, 3, INT32_MAX, (2,)))
    assert resp.partition_error == Errors.INVALID_REQUEST
    assert_unchanged(core, before, ready)


def test_end_successor_order() -> None:
    voters = frozenset({1, 2, 3, 4, 5})
    core = leader_of(5, voters=voters)  # LeaderChange at 0
    core.step(ClientWrite((b"a", b"b")), 1)  # log end 3
    fetch(core, 4, 2, 5, now=2)
    fetch(core, 2, 1, 5, now=3)
    fetch(core, 3, 2, 5, now=4)  # 5 never fetched
    ready = core.step(Shutdown(), 5)
    ends = {o.dest_id: o.request for o in ready.send if isinstance(o.request, EndQuorumEpochRequest)}
    assert sorted(ends) == [2, 3, 4, 5]
    assert {r.preferred_successors for r in ends.values()} == {(3, 4, 2, 5)}  # offset desc, then id


def test_end_first_successor_elects_now() -> None:
    core = follower_of(2)
    resp, ready = ask(core, EndQuorumEpochRequest(CID, 1, 5, (2, 3)))
    assert resp == EndQuorumEpochResponse(1, 5)
    assert isinstance(core.role, Candidate) and core.epoch == 6
    assert sorted(o.dest_id for o in ready.send if isinstance(o.request, VoteRequest)) == [1, 3]
    # testEndQuorumStartsNewElectionImmediatelyIfFollowerUnattached: it learns the leader from the request
    fresh = unattached(2, 5)
    assert ask(fresh, EndQuorumEpochRequest(CID, 1, 5, (2, 3)))[0] == EndQuorumEpochResponse(1, 5)
    assert isinstance(fresh.role, Candidate) and fresh.epoch == 6


@pytest.mark.parametrize(
    ("successors", "backoff"), [((2, 3, 4), 200), ((2, 4, 3), 400), ((2, 3), 400), ((1, 2, 4, 3), 400)]
)
def test_end_successor_position_backoff(successors: tuple[int, ...], backoff: int) -> None:
    """strictExponentialElectionBackoffMs: min(B, (B >> (n-1)) << (p-1)), B = election.backoff.max.ms."""
    core = follower_of(3, voters=frozenset({1, 2, 3, 4}))
    ask(core, EndQuorumEpochRequest(CID, 1, 5, successors), now=10)
    role = core.role
    assert isinstance(role, Follower) and role.fetch_deadline_ms == 10 + backoff
    core.tick(10 + backoff - 1)
    assert isinstance(core.role, Follower)
    core.tick(10 + backoff)
    assert isinstance(core.role, Candidate) and core.epoch == 6


def test_end_not_named_backoff() -> None:
    core = follower_of(3)
    ask(core, EndQuorumEpochRequest(CID, 1, 5, (2,)), now=10)
    assert isinstance(core.role, Follower) and core.role.fetch_deadline_ms == 10 + BACKOFF_MAX


def test_end_empty_successors() -> None:
    core = follower_of(3)
    ask(core, EndQuorumEpochRequest(CID, 1, 5, ()), now=10)
    assert isinstance(core.role, Candidate) and core.epoch == 6


def test_end_inconsistent_leader() -> None:
    core = follower_of(2)  # follows 1 in epoch 5
    with pytest.raises(SafetyViolation, match="ElectionSafety"):
        core.step(RequestReceived(7, "tok", EndQuorumEpochRequest(CID, 7, 5, (2,))), 10)
    assert state(core) == ("Follower", 5, 1, -1)


def test_end_resend_until_acknowledged() -> None:
    core = leader_of(5)
    ready = core.step(Shutdown(), 10)
    assert sorted(o.dest_id for o in ready.send if isinstance(o.request, EndQuorumEpochRequest)) == [2, 3]
    core.step(ResponseReceived(2, EndQuorumEpochResponse(1, 5)), 20)
    later = core.tick(10 + core.config.request_timeout_ms)
    assert [o.dest_id for o in later.send if isinstance(o.request, EndQuorumEpochRequest)] == [3]


# ============================================================================================ Fetch


def _fetch_body(version: int = 13, partition: int = 0, cluster: str | None = CID, offset: int = 0,
                last_epoch: int = 0, epoch: int = 5) -> dict[str, Any]:
    body = wire.request_to_body(FetchRequest(cluster, 2, epoch, offset, last_epoch), version)
    body["Topics"][0]["Partitions"][0]["Partition"] = partition
    return body


def test_fetch_cluster_id_mismatch() -> None:
    core = leader_of(5)
    before, deadline = state(core), check_quorum_deadline(core)
    body, ready = via_wire(core, wire.FETCH, 13, _fetch_body(cluster="other"))
    assert body["ErrorCode"] == Errors.INCONSISTENT_CLUSTER_ID and body["Responses"] == []
    assert_unchanged(core, before, ready)
    assert progress(core, 2) == (-1, -1) and check_quorum_deadline(core) == deadline


def test_fetch_wrong_topic_partition() -> None:
    core = leader_of(5)
    before = state(core)
    body, ready = via_wire(core, wire.FETCH, 13, _fetch_body(partition=3))
    assert body["ErrorCode"] == Errors.INVALID_REQUEST and body["Responses"] == []
    assert_unchanged(core, before, ready)
    other_topic = _fetch_body()
    other_topic["Topics"][0]["TopicId"] = wire.ZERO_UUID
    assert via_wire(core, wire.FETCH, 13, other_topic)[0]["ErrorCode"] == Errors.INVALID_REQUEST
    assert progress(core, 2) == (-1, -1)


def test_fetch_order_cluster_id_first() -> None:
    core = leader_of(5)
    body, _ = via_wire(core, wire.FETCH, 13, _fetch_body(partition=3, cluster="other", offset=-1))
    assert body["ErrorCode"] == Errors.INCONSISTENT_CLUSTER_ID


def _assert_fetch_refused_invalid(offset: int, last_epoch: int, epoch: int = 5, max_wait: int = 0) -> None:
    """KafkaRaftClientTest.testInvalidFetchRequest: partition INVALID_REQUEST, HW -1, the leader's hint,
    and the fetch counts for nothing (no replica progress, no check-quorum credit)."""
    core = leader_of(5)
    core.step(ClientWrite((b"x",)), 1)
    fetch(core, 3, 2, 5, now=2)  # HW 2 is known: errors still carry -1
    before, deadline = state(core), check_quorum_deadline(core)
    resp, ready = fetch(core, 2, offset, last_epoch, epoch=epoch, max_wait=max_wait, now=100)
    assert isinstance(resp, FetchResponse)
    assert (resp.error, resp.partition_error) == (Errors.NONE, Errors.INVALID_REQUEST)
    assert (resp.high_watermark, resp.batches, resp.diverging_epoch) == (-1, (), None)
    assert resp.current_leader == LeaderIdAndEpoch(1, 5)
    assert_unchanged(core, before, ready)
    assert progress(core, 2) == (-1, -1) and check_quorum_deadline(core) == deadline


def test_fetch_invalid_max_wait() -> None:
    _assert_fetch_refused_invalid(0, 0, max_wait=-1)


def test_fetch_invalid_fetch_offset() -> None:
    _assert_fetch_refused_invalid(-5, 0)


def test_fetch_invalid_last_fetched_epoch() -> None:
    _assert_fetch_refused_invalid(0, -1)
    _assert_fetch_refused_invalid(2, -1)


def test_fetch_last_fetched_epoch_above_leader_epoch() -> None:
    _assert_fetch_refused_invalid(0, 6)


def test_fetch_sanity_before_epoch() -> None:
    _assert_fetch_refused_invalid(-1, 0, epoch=4)  # an older epoch, but invalid first
    core = follower_of(2)
    resp, _ = fetch(core, 3, -1, 0, epoch=5)
    assert resp.partition_error == Errors.INVALID_REQUEST  # not NOT_LEADER_OR_FOLLOWER


def _epoch_error(epoch: int, error: Errors) -> None:  # shared by the two rows below
    core = leader_of(5)
    core.step(ClientWrite((b"x",)), 1)
    fetch(core, 3, 2, 5, now=2)
    assert core.high_watermark == 2
    resp, _ = fetch(core, 2, 0, 0, epoch=epoch)
    assert (resp.error, resp.partition_error, resp.high_watermark) == (Errors.NONE, error, -1)
    assert resp.current_leader == LeaderIdAndEpoch(1, 5) and resp.batches == ()
    assert progress(core, 2) == (-1, -1)


def test_fetch_fenced_epoch() -> None:
    _epoch_error(4, Errors.FENCED_LEADER_EPOCH)


def test_fetch_unknown_leader_epoch() -> None:
    _epoch_error(6, Errors.UNKNOWN_LEADER_EPOCH)


def test_fetch_not_leader() -> None:
    core = follower_of(2)
    resp, _ = fetch(core, 3, 0, 0, epoch=5)
    assert (resp.error, resp.high_watermark) == (Errors.NONE, -1)
    assert resp.partition_error == Errors.NOT_LEADER_OR_FOLLOWER
    assert resp.current_leader == LeaderIdAndEpoch(1, 5)
    resp, _ = fetch(unattached(2, 5), 3, 0, 0, epoch=5)
    assert resp.partition_error == Errors.NOT_LEADER_OR_FOLLOWER and resp.current_leader == LeaderIdAndEpoch(-1, 5)


def test_fetch_empty_log_sentinel() -> None:
    core = unattached(2, 4)
    _, ready = ask(core, BeginQuorumEpochRequest(CID, 1, 5))
    (out,) = ready.send
    assert isinstance(out.request, FetchRequest)
    assert (out.request.fetch_offset, out.request.last_fetched_epoch) == (0, 0)
    assert wire.request_to_body(out.request, 13)["Topics"][0]["Partitions"][0]["LastFetchedEpoch"] == 0
    assert core.state_snapshot()["lastFetchedEpoch"] == 0
    lead = leader_of(5)
    resp, _ = fetch(lead, 2, 0, 0)
    assert resp.partition_error == Errors.NONE and resp.diverging_epoch is None and len(resp.batches) == 1


def test_fetch_diverging_epoch() -> None:
    core = leader_of(4, log_with((1, 3), (2, 2)))  # epoch 4's LeaderChange at 5
    deadline = check_quorum_deadline(core)
    resp, _ = fetch(core, 2, 6, 3, max_wait=500, now=100)  # epoch 3 never reached this leader
    assert isinstance(resp, FetchResponse)  # answered at once, not parked
    assert (resp.partition_error, resp.diverging_epoch, resp.batches) == (Errors.NONE, (2, 5), ())
    assert progress(core, 2) == (-1, -1) and check_quorum_deadline(core) == deadline
    assert isinstance(core.role, Leader)


def test_fetch_new_leader_hw_unknown() -> None:
    # A follower that knew HW 3 wins the next epoch: its answers say -1 until epoch 6's first entry commits.
    core = follower_of(1, 5, 2, batches=log_with((5, 3)))
    core.step(ResponseReceived(2, FetchResponse(3, (), None, LeaderIdAndEpoch(2, 5))), 10)
    assert core.high_watermark == 3
    core.tick(10 + FETCH_TIMEOUT)
    assert isinstance(core.role, Candidate) and core.epoch == 6
    core.step(ResponseReceived(3, VoteResponse(-1, 6, True)), 10 + FETCH_TIMEOUT + 1)
    assert isinstance(core.role, Leader)
    resp, _ = fetch(core, 3, 3, 5, now=3000)
    assert resp.partition_error == Errors.NONE and resp.high_watermark == -1 and len(resp.batches) == 1
    resp, _ = fetch(core, 3, 4, 6, now=3001)  # node 3 holds the LeaderChange of epoch 6: committed
    assert resp.high_watermark == 4


def test_fetch_observer_not_counted_for_hw() -> None:
    core = leader_of(5)
    resp, _ = fetch(core, 9, 1, 5)
    assert resp.high_watermark == -1 and core.high_watermark == 0
    resp, _ = fetch(core, 2, 1, 5)
    assert resp.high_watermark == 1


def test_fetch_long_poll() -> None:
    core = leader_of(5)
    resp, _ = fetch(core, 2, 1, 5, max_wait=500, now=10)
    assert resp is None  # caught up: parked
    ready = core.step(ClientWrite((b"x",)), 20)
    (early,) = ready.replies
    assert isinstance(early.response, FetchResponse) and [b.base_offset for b in early.response.batches] == [1]
    assert fetch(core, 2, 2, 5, max_wait=500, now=30)[0] is None
    (late,) = core.tick(530).replies  # MaxWaitMs passed: answered empty
    assert isinstance(late.response, FetchResponse) and late.response.batches == ()
    assert fetch(core, 2, 2, 5, max_wait=0, now=540)[0] is not None  # MaxWaitMs 0: at once


def test_fetch_follower_hw() -> None:
    core = follower_of(2, 5, 1)
    rid = inflight_fetch(core, 1)
    batches = log_with((5, 2))
    core.step(ResponseReceived(1, FetchResponse(10, batches, None, LeaderIdAndEpoch(1, 5)), rid), 10)
    assert core.high_watermark == 2  # min(leader HW, log end)
    rid = inflight_fetch(core, 1)
    core.step(ResponseReceived(1, FetchResponse(-1, (), None, LeaderIdAndEpoch(1, 5)), rid), 20)
    assert core.high_watermark == 2  # -1 (unknown) leaves it


def test_fetch_truncate_below_hw_fails() -> None:
    core = follower_of(2, 5, 1, batches=log_with((4, 2), (5, 2)))
    rid = inflight_fetch(core, 1)
    core.step(ResponseReceived(1, FetchResponse(3, (), None, LeaderIdAndEpoch(1, 5)), rid), 10)
    assert core.high_watermark == 3
    rid = inflight_fetch(core, 1)
    with pytest.raises(SafetyViolation, match="CommittedNeverTruncated"):
        core.step(ResponseReceived(1, FetchResponse(3, (), (4, 1), LeaderIdAndEpoch(1, 5)), rid), 20)
    assert core.log.end_offset == 4 and core.high_watermark == 3  # nothing was cut


def test_fetch_v12_topic_id() -> None:
    """``RaftUtil.hasValidTopicPartition(FetchRequestData, TopicPartition, Uuid)`` (called by
    ``KafkaRaftClient.handleFetchRequest`` right after the cluster id) compares the TopicId with the log's,
    ``Uuid.METADATA_TOPIC_ID`` (= ``Uuid.ONE_UUID``, 0...01; ``KafkaRaftServer.MetadataTopicId``), and never
    the name. A v12 request has no TopicId, so Kafka compares the zero uuid and answers top-level
    INVALID_REQUEST, whatever topic name it gives; v13+ is served when its TopicId is the metadata one."""
    assert uuid.UUID(int=1) == wire.METADATA_TOPIC_ID
    core = leader_of(5)
    before = state(core)
    body, ready = via_wire(core, wire.FETCH, 12, _fetch_body(version=12))
    assert body["ErrorCode"] == Errors.INVALID_REQUEST and body["Responses"] == []
    assert_unchanged(core, before, ready)
    assert progress(core, 2) == (-1, -1)  # and it counted for nothing
    # the cluster id is still checked first
    foreign = via_wire(core, wire.FETCH, 12, _fetch_body(version=12, cluster="other"))[0]
    assert foreign["ErrorCode"] == Errors.INCONSISTENT_CLUSTER_ID
    # the node's hot path (TypedCodec, straight from the frame) refuses it too: it leaves v12 to wire.py
    frame = codec.encode_request(wire.FETCH, 12, 7, "c", _fetch_body(version=12))
    _, decoded = TypedCodec().decode_request(frame[4:])
    v12 = wire.request_from_kafka(wire.FETCH, 12, decoded)
    assert isinstance(v12, FetchRequest) and not v12.valid_partition
    # v13+: matched by TopicId (no name on the wire)
    for version in range(13, codec.supported_versions(wire.FETCH)[1] + 1):
        answer, _ = via_wire(core, wire.FETCH, version, _fetch_body(version=version))
        assert answer["ErrorCode"] == Errors.NONE
        assert answer["Responses"][0]["TopicId"] == wire.METADATA_TOPIC_ID
        assert answer["Responses"][0]["Partitions"][0]["ErrorCode"] == Errors.NONE
        _, decoded = TypedCodec().decode_request(
            codec.encode_request(wire.FETCH, version, 7, "c", _fetch_body(version=version))[4:]
        )
        assert wire.request_from_kafka(wire.FETCH, version, decoded).valid_partition
    zero_id = _fetch_body(version=13)
    zero_id["Topics"][0]["TopicId"] = wire.ZERO_UUID
    assert via_wire(core, wire.FETCH, 13, zero_id)[0]["ErrorCode"] == Errors.INVALID_REQUEST


# ============================================================================================ check quorum


def test_checkquorum_voters_only() -> None:
    core = leader_of(5)
    assert check_quorum_deadline(core) == 3000
    fetch(core, 9, 1, 5, now=1000)  # an observer: no credit
    assert check_quorum_deadline(core) == 3000
    fetch(core, 2, 1, 5, now=2000)  # a voter: with the leader, a majority of 3
    assert check_quorum_deadline(core) == 2000 + 3000
    core.tick(4999)
    assert isinstance(core.role, Leader)


@pytest.mark.parametrize(("fetch_timeout", "check_quorum"), [(2000, 3000), (1001, 1501)])
def test_checkquorum_timeout_factor(fetch_timeout: int, check_quorum: int) -> None:
    core = leader_of(5, fetch_timeout_ms=fetch_timeout)
    core.tick(check_quorum - 1)
    assert isinstance(core.role, Leader)
    ready = core.tick(check_quorum)
    assert isinstance(core.role, Resigned) and [e["event"] for e in ready.trace] == ["LeaderProgressTimeout"]


def test_checkquorum_resign_not_elect() -> None:
    core = leader_of(5)
    ready = core.tick(3000)
    role = core.role
    assert isinstance(role, Resigned) and core.epoch == 5
    assert sorted(o.dest_id for o in ready.send if isinstance(o.request, EndQuorumEpochRequest)) == [2, 3]
    assert not any(isinstance(o.request, VoteRequest) for o in ready.send)
    core.tick(role.election_deadline_ms)
    assert isinstance(core.role, Candidate) and core.epoch == 6


def test_checkquorum_sole_voter() -> None:
    core = core_of(1, ElectionState(5, -1, 1), voters=frozenset({1}))
    core.tick(0)
    assert isinstance(core.role, Leader)
    ready = core.tick(100 * FETCH_TIMEOUT)
    assert isinstance(core.role, Leader) and ready.next_deadline_ms is None


# ============================================================================================ DescribeQuorum


def test_describe_wrong_topic_partition() -> None:
    core = leader_of(5)
    body = {"Topics": [{"TopicName": "other", "Partitions": [{"PartitionIndex": 0}, {"PartitionIndex": 4}]}]}
    answer, ready = via_wire(core, wire.DESCRIBE_QUORUM, 2, body)
    assert answer["ErrorCode"] == Errors.NONE and answer["Nodes"] == []
    (topic,) = answer["Topics"]
    assert topic["TopicName"] == "other"
    assert [(p["PartitionIndex"], p["ErrorCode"]) for p in topic["Partitions"]] == [
        (0, Errors.UNKNOWN_TOPIC_OR_PARTITION), (4, Errors.UNKNOWN_TOPIC_OR_PARTITION)
    ]
    assert topic["Partitions"][0]["ErrorMessage"] == Errors.UNKNOWN_TOPIC_OR_PARTITION.message
    assert isinstance(core.role, Leader) and ready.persist is None


def test_describe_non_leader() -> None:
    core = follower_of(2)  # it knows the leader (1, epoch 5), and still names nobody, as Kafka
    for version in (0, 1, 2):
        body = {"Topics": [{"TopicName": "__cluster_metadata", "Partitions": [{"PartitionIndex": 0}]}]}
        answer, _ = via_wire(core, wire.DESCRIBE_QUORUM, version, body)
        assert answer["ErrorCode"] == Errors.NONE
        (part,) = answer["Topics"][0]["Partitions"]
        assert part["ErrorCode"] == Errors.NOT_LEADER_OR_FOLLOWER
        assert (part["LeaderId"], part["LeaderEpoch"], part["HighWatermark"]) == (0, 0, 0)
        assert part["CurrentVoters"] == [] and part["Observers"] == []
        if version >= 2:
            assert part["ErrorMessage"] == Errors.NOT_LEADER_OR_FOLLOWER.message and answer["Nodes"] == []


def test_describe_leader() -> None:
    core = leader_of(5)  # LeaderChange at 0
    fetch(core, 2, 1, 5, now=100)
    fetch(core, 9, 1, 5, now=120)  # an observer
    resp, _ = ask(core, DescribeQuorumRequest(), now=200)
    assert isinstance(resp, DescribeQuorumResponse) and resp.partition_error == Errors.NONE
    assert (resp.leader_id, resp.leader_epoch, resp.high_watermark) == (1, 5, 1)
    assert resp.voters == (ReplicaState(1, 1, 200, 200), ReplicaState(2, 1, 100, 100), ReplicaState(3, -1, -1, -1))
    assert resp.observers == (ReplicaState(9, 1, 120, 120),)


def test_describe_hw_unknown() -> None:
    core = leader_of(5)
    resp, _ = ask(core, DescribeQuorumRequest(), now=50)
    assert (resp.leader_id, resp.leader_epoch, resp.high_watermark) == (1, 5, -1)
