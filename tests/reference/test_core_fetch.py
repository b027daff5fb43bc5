"""Core tests, KIP-595 "Fetch Request Handling" 1-4 (leader side, long-poll, high watermark) and
"Fetch Response Handling" 1-2 (follower side, divergence, truncation safety)."""

from __future__ import annotations

import random

import pytest
from kraft_tck.reference.core import CoreConfig, KRaftCore, SafetyViolation
from kraft_tck.reference.io import (
    AppendBatches,
    ClientWrite,
    ElectionState,
    Ready,
    RequestFailed,
    RequestReceived,
    ResponseReceived,
    TruncateTo,
)
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import FetchRequest, FetchResponse, LeaderIdAndEpoch, VoteResponse
from kraft_tck.reference.roles import Candidate, Follower, Leader, Unattached
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import RecordBatch, data_batch

VOTERS = frozenset({1, 2, 3})


def log_with(*epochs: tuple[int, int]) -> tuple[RecordBatch, ...]:
    out, offset = [], 0
    for epoch, count in epochs:
        for _ in range(count):
            out.append(data_batch(offset, epoch, [b"r%d-%d" % (epoch, offset)]))
            offset += 1
    return tuple(out)


def config(node_id: int, voters: frozenset[int] = VOTERS) -> CoreConfig:
    return CoreConfig(node_id, voters, "cid", election_timeout_ms=1000, fetch_timeout_ms=2000)


def leader(
    epoch: int,
    batches: tuple[RecordBatch, ...] = (),
    voters: frozenset[int] = VOTERS,
    cls: type[KRaftCore] = KRaftCore,
) -> KRaftCore:
    """Node 1 leading ``epoch`` over ``batches`` (+ its LeaderChange record)."""
    core = cls(config(1, voters), ElectionState(epoch, -1, 1), Log(batches), random.Random(1), 0)
    core.step(ResponseReceived(2, VoteResponse(-1, epoch, True)), 0)
    if len(voters) > 3:
        core.step(ResponseReceived(3, VoteResponse(-1, epoch, True)), 0)
    assert isinstance(core.role, Leader)
    return core


def follower(node_id: int, epoch: int, leader_id: int, batches: tuple[RecordBatch, ...] = ()) -> KRaftCore:
    return KRaftCore(
        config(node_id), ElectionState(epoch, leader_id), Log(batches), random.Random(2), 0
    )


def fetch(
    core: KRaftCore,
    replica: int,
    offset: int,
    last_epoch: int,
    epoch: int | None = None,
    now: int = 10,
    max_wait: int = 0,
    cluster: str | None = "cid",
) -> Ready:
    req = FetchRequest(cluster, replica, core.epoch if epoch is None else epoch, offset, last_epoch, max_wait)
    return core.step(RequestReceived(replica, ("fetch", replica, now), req), now)


def reply(ready: Ready) -> FetchResponse:
    (r,) = ready.replies
    assert isinstance(r.response, FetchResponse)
    return r.response


# Leader log: epoch 1 at 0-2, epoch 2 at 3-4, then epoch 4's LeaderChange at 5 (LEO 6).
LEADER_LOG = log_with((1, 3), (2, 2))

# KIP-595 "Fetch Request Handling" step 3: (FetchOffset, LastFetchedEpoch) -> DivergingEpoch or None
DIVERGENCE_CASES = [
    ("empty follower (Kafka's LastFetchedEpoch 0)", 0, 0, None),
    ("inside epoch 1", 2, 1, None),
    ("at the end of epoch 1", 3, 1, None),
    ("past the end of epoch 1", 4, 1, (1, 3)),
    ("at the end of epoch 2", 5, 2, None),
    ("past the end of epoch 2", 6, 2, (2, 5)),
    ("epoch 3 never reached the leader", 7, 3, (2, 5)),
    ("epoch 3, shorter", 4, 3, (2, 5)),
    ("caught up in the current epoch", 6, 4, None),
    ("beyond the leader's log end", 8, 4, (4, 6)),
    ("an epoch older than the whole log", 2, 0, (0, 0)),
]


@pytest.mark.parametrize(
    ("offset", "last_epoch", "diverging"),
    [c[1:] for c in DIVERGENCE_CASES],
    ids=[c[0] for c in DIVERGENCE_CASES],
)
def test_fetch_divergence_validation(offset: int, last_epoch: int, diverging: tuple[int, int] | None) -> None:
    core = leader(4, LEADER_LOG)
    resp = reply(fetch(core, 2, offset, last_epoch))
    assert resp.partition_error == Errors.NONE and resp.error == Errors.NONE
    assert resp.diverging_epoch == diverging
    assert resp.current_leader == LeaderIdAndEpoch(1, 4)
    if diverging is not None:
        assert resp.batches == ()  # KIP: an empty response carrying DivergingEpoch
    else:
        assert [b.base_offset for b in resp.batches] == list(range(offset, 6))


@pytest.mark.parametrize(
    ("epoch", "cluster", "field", "error"),
    [
        (3, "cid", "partition_error", Errors.FENCED_LEADER_EPOCH),
        (5, "cid", "partition_error", Errors.UNKNOWN_LEADER_EPOCH),
        (4, "other", "error", Errors.INCONSISTENT_CLUSTER_ID),
    ],
)
def test_fetch_epoch_and_cluster_checks(epoch: int, cluster: str, field: str, error: Errors) -> None:
    core = leader(4, LEADER_LOG)
    resp = reply(fetch(core, 2, 0, 0, epoch=epoch, cluster=cluster))
    assert getattr(resp, field) == error
    assert resp.batches == ()


def test_fetch_with_a_null_cluster_id_is_accepted() -> None:
    assert reply(fetch(leader(4, LEADER_LOG), 2, 0, 0, cluster=None)).partition_error == Errors.NONE


@pytest.mark.parametrize(("offset", "last_epoch"), [(-1, -1), (3, -1), (0, -1), (0, 9)])
def test_malformed_fetch_is_invalid_request(offset: int, last_epoch: int) -> None:
    resp = reply(fetch(leader(4, LEADER_LOG), 2, offset, last_epoch))
    assert resp.partition_error == Errors.INVALID_REQUEST


def test_non_leader_answers_not_leader_or_follower_with_the_current_leader() -> None:
    core = follower(2, 4, 1)
    resp = reply(fetch(core, 3, 0, 0, epoch=4))
    assert resp.partition_error == Errors.NOT_LEADER_OR_FOLLOWER
    assert resp.current_leader == LeaderIdAndEpoch(1, 4)


# ---------------------------------------------------------------------- long-poll


def test_caught_up_fetch_waits_until_max_wait() -> None:
    core = leader(4, LEADER_LOG)
    ready = fetch(core, 2, 6, 4, now=100, max_wait=500)
    assert ready.replies == [] and ready.next_deadline_ms == 600
    assert core.tick(599).replies == []
    resp = reply(core.tick(600))
    assert resp.batches == () and resp.partition_error == Errors.NONE


def test_parked_fetch_completes_on_append() -> None:
    core = leader(4, LEADER_LOG)
    fetch(core, 2, 6, 4, now=100, max_wait=500)
    ready = core.step(ClientWrite((b"a", b"b")), 150)
    (r,) = ready.replies
    assert r.reply_to == ("fetch", 2, 100)
    assert [b.base_offset for b in r.response.batches] == [6]


def test_parked_fetch_is_answered_with_an_error_when_leadership_is_lost() -> None:
    core = leader(4, LEADER_LOG)
    fetch(core, 2, 6, 4, now=100, max_wait=500)
    ready = core.step(RequestReceived(3, "v", _vote(5, 3)), 120)
    parked = [r.response for r in ready.replies if r.reply_to == ("fetch", 2, 100)]
    # the fetch names epoch 4; the node has moved to epoch 5 (and no longer leads)
    assert len(parked) == 1 and parked[0].partition_error == Errors.FENCED_LEADER_EPOCH


def _vote(epoch: int, cand: int) -> object:
    from kraft_tck.reference.messages import VoteRequest

    return VoteRequest("cid", epoch, cand, 4, 6)


# ---------------------------------------------------------------------- high watermark


def test_high_watermark_waits_for_an_entry_of_the_current_epoch() -> None:
    # KIP-595 step 4: old-epoch entries on a majority do not move the HW; the current epoch's must.
    core = leader(4, LEADER_LOG)  # epoch_start_offset 5
    ready = fetch(core, 2, 5, 2)
    assert core.high_watermark == 0 and ready.high_watermark is None
    ready = fetch(core, 2, 6, 4, now=20)
    assert core.high_watermark == 6 and ready.high_watermark == 6


def test_high_watermark_needs_a_majority_of_voters() -> None:
    voters = frozenset({1, 2, 3, 4, 5})
    core = leader(4, LEADER_LOG, voters=voters)
    fetch(core, 2, 6, 4)
    assert core.high_watermark == 0  # leader + 1 of 5
    fetch(core, 3, 6, 4)
    assert core.high_watermark == 6  # leader + 2 of 5


def test_observers_never_count_toward_the_high_watermark() -> None:
    core = leader(4, LEADER_LOG)
    fetch(core, 9, 6, 4)
    fetch(core, 8, 6, 4)
    assert core.high_watermark == 0


def test_counting_observers_is_an_injectable_fault() -> None:
    class ObserversCount(KRaftCore):
        def _counts_toward_hw(self, replica_id: int) -> bool:
            return True

    core = leader(4, LEADER_LOG, cls=ObserversCount)
    fetch(core, 9, 6, 4)
    assert core.high_watermark == 6


def test_single_voter_commits_on_append() -> None:
    core = leader(1, voters=frozenset({1}))
    ready = core.step(ClientWrite((b"x",)), 5)
    assert ready.high_watermark == 2 and ready.client_append is not None and ready.client_append.accepted


def test_client_write_on_a_non_leader_is_refused_with_a_hint() -> None:
    ready = follower(2, 4, 1).step(ClientWrite((b"x",)), 5)
    assert ready.client_append is not None and not ready.client_append.accepted
    assert ready.client_append.leader_id == 1 and ready.log_ops == []


# ---------------------------------------------------------------------- follower side


def test_follower_appends_and_takes_min_of_leader_hw_and_log_end() -> None:
    core = follower(2, 4, 1)
    batches = log_with((1, 3))
    ready = core.step(ResponseReceived(1, FetchResponse(10, batches, None, LeaderIdAndEpoch(1, 4))), 5)
    assert ready.log_ops == [AppendBatches(batches)]
    assert core.high_watermark == 3  # min(10, LEO 3)
    assert [e["event"] for e in ready.trace] == ["HandleFetchResponse", "SendFetchRequest"]
    (out,) = ready.send
    assert out.request == FetchRequest("cid", 2, 4, 3, 1, 500, core.config.fetch_max_bytes)


def test_fenced_leader_epoch_with_a_known_leader_makes_the_follower_follow_it() -> None:
    core = follower(2, 4, 1)
    resp = FetchResponse(partition_error=Errors.FENCED_LEADER_EPOCH, current_leader=LeaderIdAndEpoch(3, 6))
    ready = core.step(ResponseReceived(1, resp), 5)
    assert isinstance(core.role, Follower) and (core.epoch, core.leader_id) == (6, 3)
    assert ready.persist == ElectionState(6, 3, -1, (1, 2, 3))
    assert [o.dest_id for o in ready.send] == [3]


def test_fenced_leader_epoch_without_a_leader_makes_the_follower_unattached() -> None:
    core = follower(2, 4, 1)
    core.step(
        ResponseReceived(
            1,
            FetchResponse(partition_error=Errors.FENCED_LEADER_EPOCH, current_leader=LeaderIdAndEpoch(-1, 6)),
        ),
        5,
    )
    assert isinstance(core.role, Unattached) and core.epoch == 6


def test_fetch_timeout_makes_a_voter_a_candidate_and_an_observer_unattached() -> None:
    voter = follower(2, 4, 1)
    ready = voter.tick(2000)
    assert isinstance(voter.role, Candidate) and ready.trace[0]["cause"] == "FetchTimeout"
    observer = KRaftCore(config(9), ElectionState(4, 1), Log(), random.Random(1), 0)
    observer.tick(2000)
    assert isinstance(observer.role, Unattached)


def _converge(lead: KRaftCore, foll: KRaftCore, rounds: int = 10) -> list[int]:
    """Pass fetches and responses between two cores; return the truncation offsets seen on the way."""
    truncations: list[int] = []
    ready = foll.tick(1)
    now = 2
    for _ in range(rounds):
        if foll.log.end_offset == lead.log.end_offset and foll.log.batches == lead.log.batches:
            break
        (out,) = ready.send
        resp = reply(lead.step(RequestReceived(foll.config.node_id, "x", out.request), now))
        ready = foll.step(ResponseReceived(1, resp), now)
        truncations += [op.offset for op in ready.log_ops if isinstance(op, TruncateTo)]
        now += 1
    return truncations


@pytest.mark.parametrize(
    ("leader_log", "leader_epoch", "follower_log", "truncations"),
    [
        # the follower holds epoch 3 the leader never saw: one round, cut at the end of epoch 1
        (log_with((1, 3), (2, 2)), 4, log_with((1, 3), (3, 4)), [3]),
        # the follower has more of epoch 2 than the leader: cut at the leader's end of epoch 2
        (log_with((1, 3), (2, 2)), 4, log_with((1, 3), (2, 4), (3, 2)), [5]),
        # several diverging epochs: three rounds, each cutting deeper (KIP-595 multi-epoch divergence)
        (log_with((1, 3), (2, 2), (4, 1)), 6, log_with((1, 3), (3, 2), (5, 2)), [5, 3]),
    ],
)
def test_follower_truncates_on_diverging_epoch_and_converges(
    leader_log: tuple[RecordBatch, ...],
    leader_epoch: int,
    follower_log: tuple[RecordBatch, ...],
    truncations: list[int],
) -> None:
    lead = leader(leader_epoch, leader_log)
    foll = follower(2, leader_epoch, 1, follower_log)
    assert _converge(lead, foll) == truncations
    assert [(b.base_offset, b.partition_leader_epoch, b.records) for b in foll.log.batches] == [
        (b.base_offset, b.partition_leader_epoch, b.records) for b in lead.log.batches
    ]


def test_truncating_below_the_high_watermark_is_a_loud_safety_violation() -> None:
    core = follower(2, 4, 1)
    core.step(
        ResponseReceived(1, FetchResponse(5, log_with((1, 3), (3, 2)), None, LeaderIdAndEpoch(1, 4))), 5
    )
    assert core.high_watermark == 5
    with pytest.raises(SafetyViolation, match=r"CommittedNeverTruncated.*below its high watermark 5"):
        core.step(ResponseReceived(1, FetchResponse(5, (), (2, 3), LeaderIdAndEpoch(1, 4))), 6)


def test_skipping_truncation_is_an_injectable_fault() -> None:
    class NeverTruncates(KRaftCore):
        def _truncation_point(self, diverging_epoch: int, diverging_end_offset: int) -> int:
            return self.log.end_offset

    core = NeverTruncates(
        config(2), ElectionState(4, 1), Log(log_with((1, 3), (3, 2))), random.Random(1), 0
    )
    ready = core.step(ResponseReceived(1, FetchResponse(0, (), (1, 3), LeaderIdAndEpoch(1, 4))), 5)
    assert core.log.end_offset == 5 and not any(isinstance(op, TruncateTo) for op in ready.log_ops)


def test_a_stale_fetch_response_is_dropped_not_applied() -> None:
    """Found by the simulator (seed 24, heavy faults): an old DivergingEpoch answer arriving after a newer
    fetch was answered must not truncate the log. The core keeps one request in flight per destination
    and drops any response that does not answer it (KIP-595 relies on Kafka's correlation ids for this)."""
    core = follower(2, 4, 1)
    first = core.step(ResponseReceived(1, FetchResponse(0, log_with((1, 3)), None, LeaderIdAndEpoch(1, 4))), 5)
    (fetch1,) = first.send
    newer = core.step(
        ResponseReceived(1, FetchResponse(3, log_with((1, 3), (4, 2))[3:], None, LeaderIdAndEpoch(1, 4)),
                         request_id=fetch1.request_id), 6)
    (fetch2,) = newer.send
    assert fetch2.request_id != fetch1.request_id and core.log.end_offset == 5
    # A duplicate of the answer to fetch1, now carrying a DivergingEpoch, arrives late: ignored.
    stale = core.step(ResponseReceived(1, FetchResponse(0, (), (1, 1), LeaderIdAndEpoch(1, 4)),
                                       request_id=fetch1.request_id), 7)
    assert stale.log_ops == [] and stale.trace == [] and core.log.end_offset == 5
    # A failure report for a superseded request changes nothing either.
    assert core.step(RequestFailed(1, "Fetch", request_id=fetch1.request_id), 8).send == []
