"""Core tests: KIP-595 "Leader Progress Timeout", "EndQuorumEpoch", "DescribeQuorum" (+ KIP-836
timestamps), "Cluster Bootstrapping" / clusterId checks, and determinism."""

from __future__ import annotations

import random

import pytest
from kraft_tck.reference.core import CLUSTER_ID_KEY, CoreConfig, KRaftCore
from kraft_tck.reference.io import (
    ClientWrite,
    ElectionState,
    Input,
    Ready,
    RequestReceived,
    ResponseReceived,
    Shutdown,
)
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import (
    BeginQuorumEpochRequest,
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
from kraft_tck.reference.roles import Candidate, Follower, Leader, Resigned
from kraft_tck.spec.errors import Errors

VOTERS = frozenset({1, 2, 3})
FETCH_TIMEOUT = 2000
CHECK_QUORUM = 3000  # Kafka's LeaderState: 1.5 x the fetch timeout


def config(node_id: int, cluster_id: str | None = "cid", voters: frozenset[int] = VOTERS) -> CoreConfig:
    return CoreConfig(
        node_id,
        voters,
        cluster_id,
        election_timeout_ms=1000,
        fetch_timeout_ms=FETCH_TIMEOUT,
        election_backoff_max_ms=800,
    )


def leader(
    cluster_id: str | None = "cid", cls: type[KRaftCore] = KRaftCore, voters: frozenset[int] = VOTERS
) -> KRaftCore:
    core = cls(config(1, cluster_id, voters), ElectionState(1, -1, 1), Log(), random.Random(5), 0)
    if len(voters) > 1:
        core.step(ResponseReceived(2, VoteResponse(-1, 1, True)), 0)
    else:
        core.tick(0)
    assert isinstance(core.role, Leader)
    return core


def fetch(core: KRaftCore, replica: int, offset: int, last_epoch: int, now: int) -> Ready:
    req = FetchRequest("cid", replica, core.epoch, offset, last_epoch)
    return core.step(RequestReceived(replica, "f", req), now)


def events(ready: Ready) -> list[str]:
    return [e["event"] for e in ready.trace]


# ---------------------------------------------------------------------- progress timeout


def test_leader_without_fetches_from_a_majority_resigns_then_elects() -> None:
    core = leader()
    assert core.tick(CHECK_QUORUM - 1).trace == []
    ready = core.tick(CHECK_QUORUM)
    assert events(ready) == ["LeaderProgressTimeout"]
    assert isinstance(core.role, Resigned) and core.epoch == 1
    assert {(o.dest_id, type(o.request)) for o in ready.send} == {
        (2, EndQuorumEpochRequest),
        (3, EndQuorumEpochRequest),
    }
    deadline = core.role.election_deadline_ms
    ready = core.tick(deadline)
    assert ready.trace[0]["event"] == "StartElection" and isinstance(core.role, Candidate) and core.epoch == 2


def test_fetches_from_a_majority_keep_the_leader_in_office() -> None:
    core = leader()
    fetch(core, 2, 0, 0, now=1500)  # leader + node 2 = majority of 3: timer restarts
    assert core.tick(CHECK_QUORUM + 100).trace == []
    assert isinstance(core.role, Leader)
    assert events(core.tick(1500 + CHECK_QUORUM)) == ["LeaderProgressTimeout"]


def test_observer_fetches_do_not_keep_the_leader_in_office() -> None:
    core = leader()
    fetch(core, 9, 0, 0, now=1500)
    assert events(core.tick(CHECK_QUORUM)) == ["LeaderProgressTimeout"]


def test_the_only_voter_never_resigns() -> None:
    # KIP-595 "Leader Progress Timeout": check quorum needs fetches from a majority of the *other*
    # voters; a quorum of one voter has none, and its leader is its own majority (Kafka:
    # LeaderState.timeUntilCheckQuorumExpires never expires with one voter). It keeps leading with no
    # timer at all, and commits alone.
    core = leader(voters=frozenset({1}))
    ready = core.tick(10 * FETCH_TIMEOUT)
    assert isinstance(core.role, Leader) and core.epoch == 1 and ready.trace == []
    assert ready.next_deadline_ms is None
    ready = core.step(ClientWrite((b"v",)), 10 * FETCH_TIMEOUT + 1)
    assert ready.high_watermark == core.log.end_offset
    assert core.tick(100 * FETCH_TIMEOUT).next_deadline_ms is None and isinstance(core.role, Leader)


def test_never_resigning_is_an_injectable_fault() -> None:
    class Zombie(KRaftCore):
        def _should_resign(self) -> bool:
            return False

    core = leader(cls=Zombie)
    core.tick(10 * FETCH_TIMEOUT)
    assert isinstance(core.role, Leader)


# ---------------------------------------------------------------------- resign


def test_shutdown_resigns_with_successors_ordered_by_fetch_offset() -> None:
    core = leader()
    core.step(ClientWrite((b"a",)), 1)  # LEO 2
    fetch(core, 2, 1, 1, now=2)
    fetch(core, 3, 2, 1, now=3)
    ready = core.step(Shutdown(), 4)
    assert events(ready) == ["Resign"]
    assert isinstance(core.role, Resigned) and core.role.preferred_successors == (3, 2)
    assert {o.request for o in ready.send} == {EndQuorumEpochRequest("cid", 1, 1, (3, 2))}
    assert core.step(ClientWrite((b"b",)), 5).client_append.accepted is False
    core.step(ResponseReceived(3, EndQuorumEpochResponse(1, 1)), 6)
    assert core.resignation_pending
    resent = core.tick(6 + core.config.request_timeout_ms)
    assert [o.dest_id for o in resent.send] == [2]  # only the voter that has not acknowledged
    core.step(ResponseReceived(2, EndQuorumEpochResponse(1, 1)), 5000)
    assert not core.resignation_pending
    assert core.tick(100_000).trace == []  # shutting down: no new elections


def _follower(node_id: int) -> KRaftCore:
    return KRaftCore(config(node_id), ElectionState(1, 1), Log(), random.Random(3), 0)


def test_first_preferred_successor_starts_its_election_at_once() -> None:
    core = _follower(3)
    ready = core.step(RequestReceived(1, "e", EndQuorumEpochRequest("cid", 1, 1, (3, 2))), 10)
    assert events(ready)[:2] == ["HandleEndQuorumEpochRequest", "StartElection"]
    assert ready.trace[1]["cause"] == "EndQuorumEpoch"
    assert ready.replies[0].response == EndQuorumEpochResponse(1, 1)  # answered in the resigned epoch
    assert isinstance(core.role, Candidate) and core.epoch == 2


def test_later_successor_waits_a_position_based_backoff() -> None:
    core = _follower(2)
    core.step(RequestReceived(1, "e", EndQuorumEpochRequest("cid", 1, 1, (3, 2))), 10)
    role = core.role
    assert isinstance(role, Follower)
    assert role.fetch_deadline_ms == 10 + 800 // 2  # cap >> (count - 1), << (position - 1)
    ready = core.tick(role.fetch_deadline_ms)
    assert ready.trace[0]["event"] == "StartElection" and ready.trace[0]["cause"] == "EndQuorumEpoch"


def test_unnamed_follower_waits_the_election_backoff_max() -> None:
    """Kafka 3.9+ endEpochElectionBackoff: a voter not named waits election.backoff.max.ms."""
    core = _follower(2)
    core.step(RequestReceived(1, "e", EndQuorumEpochRequest("cid", 1, 1, (3,))), 10)
    role = core.role
    assert isinstance(role, Follower) and role.fetch_deadline_ms == 10 + 800


@pytest.mark.parametrize(
    ("req", "field", "error"),
    [
        (EndQuorumEpochRequest("x", 1, 1, ()), "error", Errors.INCONSISTENT_CLUSTER_ID),
        (EndQuorumEpochRequest("cid", 1, 0, ()), "partition_error", Errors.FENCED_LEADER_EPOCH),
        (EndQuorumEpochRequest("cid", -1, 1, ()), "partition_error", Errors.INVALID_REQUEST),
        (EndQuorumEpochRequest("cid", 1, 2**31 - 1, ()), "partition_error", Errors.INVALID_REQUEST),
    ],
)
def test_end_quorum_epoch_refusals(req: EndQuorumEpochRequest, field: str, error: Errors) -> None:
    resp = _follower(2).step(RequestReceived(1, "e", req), 10).replies[0].response
    assert getattr(resp, field) == error


# ---------------------------------------------------------------------- DescribeQuorum


def test_describe_quorum_reports_kip836_timestamps() -> None:
    core = leader()  # LEO 1 (LeaderChange)
    fetch(core, 2, 1, 1, now=100)  # caught up at 100
    core.step(ClientWrite((b"a",)), 150)  # LEO 2
    fetch(core, 2, 1, 1, now=200)  # behind, but has all the leader had at its previous fetch
    fetch(core, 3, 0, 0, now=250)  # behind
    fetch(core, 9, 2, 1, now=260)  # an observer, caught up
    ready = core.step(RequestReceived(-1, "d", DescribeQuorumRequest()), 300)
    resp = ready.replies[0].response
    assert isinstance(resp, DescribeQuorumResponse)
    assert (resp.leader_id, resp.leader_epoch, resp.high_watermark) == (1, 1, 1)  # LeaderChange committed
    assert resp.voters == (
        ReplicaState(1, 2, 300, 300),  # the leader: now, now (KIP-836)
        ReplicaState(2, 1, 200, 100),
        ReplicaState(3, 0, 250, -1),
    )
    assert resp.observers == (ReplicaState(9, 2, 260, 260),)


def test_describe_quorum_on_a_non_leader_answers_as_kafka() -> None:
    """DescribeQuorumResponse.singletonErrorResponse: no leader hint; LeaderId/LeaderEpoch/HW stay 0."""
    resp = _follower(2).step(RequestReceived(-1, "d", DescribeQuorumRequest()), 1).replies[0].response
    assert resp == DescribeQuorumResponse(0, 0, 0, partition_error=Errors.NOT_LEADER_OR_FOLLOWER)


# ---------------------------------------------------------------------- cluster id


@pytest.mark.parametrize(
    "req",
    [
        VoteRequest("other", 2, 2, 0, 0),
        BeginQuorumEpochRequest("other", 2, 2),
        EndQuorumEpochRequest("other", 2, 2, ()),
        FetchRequest("other", 2, 1, 0, 0),
    ],
)
def test_every_kraft_rpc_checks_the_cluster_id(req: object) -> None:
    core = KRaftCore(config(1), ElectionState(1), Log(), random.Random(1), 0)
    resp = core.step(RequestReceived(2, "r", req), 1).replies[0].response
    assert resp.error == Errors.INCONSISTENT_CLUSTER_ID
    assert core.epoch == 1


def test_an_unformatted_node_accepts_any_cluster_id() -> None:
    core = KRaftCore(config(1, None), ElectionState(1), Log(), random.Random(1), 0)
    resp = core.step(RequestReceived(2, "r", VoteRequest("whatever", 2, 2, 0, 0)), 1).replies[0].response
    assert isinstance(resp, VoteResponse) and resp.vote_granted


def test_ignoring_the_cluster_id_is_an_injectable_fault() -> None:
    class Careless(KRaftCore):
        def _cluster_id_ok(self, cluster_id: str | None) -> bool:
            return True

    core = Careless(config(1), ElectionState(1), Log(), random.Random(1), 0)
    resp = core.step(RequestReceived(2, "r", VoteRequest("other", 2, 2, 0, 0)), 1).replies[0].response
    assert isinstance(resp, VoteResponse) and resp.vote_granted


def test_bootstrap_single_voter_generates_and_adopts_a_cluster_id() -> None:
    core = leader(None, voters=frozenset({1}))
    assert core.cluster_id is not None and len(core.cluster_id) == 22  # Kafka's base64 uuid form
    records = [r for b in core.log.batches if not b.is_control for r in b.records]
    assert [(r.key, r.value) for r in records] == [(CLUSTER_ID_KEY, core.cluster_id.encode())]


def test_bootstrap_cluster_id_is_adopted_once_committed_and_then_enforced() -> None:
    lead = leader(None)
    (cid_batch,) = [b for b in lead.log.batches if not b.is_control]
    assert lead.cluster_id is None  # not committed yet
    foll = KRaftCore(config(2, None), ElectionState(1, 1), Log(), random.Random(9), 0)
    resp = FetchResponse(0, tuple(lead.log.batches), None, LeaderIdAndEpoch(1, 1))
    foll.step(ResponseReceived(1, resp), 5)
    assert foll.cluster_id is None  # replicated, but not committed
    ready = fetch(lead, 2, 2, 1, now=6)
    cid = cid_batch.records[0].value.decode()
    assert ready.cluster_id_adopted == cid and lead.cluster_id == cid
    ready = foll.step(ResponseReceived(1, FetchResponse(2, (), None, LeaderIdAndEpoch(1, 1))), 7)
    assert ready.cluster_id_adopted == cid and foll.cluster_id == cid
    refused = foll.step(RequestReceived(3, "v", VoteRequest("not-" + cid, 2, 3, 1, 2)), 8).replies[0].response
    assert refused.error == Errors.INCONSISTENT_CLUSTER_ID


def test_a_second_leader_does_not_generate_another_cluster_id() -> None:
    first = leader(None)
    batches = tuple(first.log.batches)
    core = KRaftCore(config(1, None), ElectionState(2, -1, 1), Log(batches), random.Random(5), 0)
    core.step(ResponseReceived(2, VoteResponse(-1, 2, True)), 0)
    assert sum(1 for b in core.log.batches if not b.is_control) == 1


# ---------------------------------------------------------------------- determinism


def _run(seed: int) -> list[Ready]:
    core = KRaftCore(config(1), ElectionState(0), Log(), random.Random(seed), 0)
    inputs: list[tuple[int, Input | None]] = [
        (3000, None),
        (3001, ResponseReceived(2, VoteResponse(-1, 1, False))),
        (3002, ResponseReceived(3, VoteResponse(-1, 1, False))),
        (5000, None),
        (5001, ResponseReceived(3, VoteResponse(-1, 2, True))),
        (5002, ClientWrite((b"a", b"b"))),
        (5003, RequestReceived(2, "f", FetchRequest("cid", 2, 2, 0, 0))),
        (9000, None),
    ]
    out = []
    for now, inp in inputs:
        out.append(core.tick(now) if inp is None else core.step(inp, now))
    return out


def test_same_seed_and_inputs_give_identical_ready_sequences() -> None:
    assert _run(11) == _run(11)
    assert _run(11) != _run(12)  # the jitter really comes from the rng
