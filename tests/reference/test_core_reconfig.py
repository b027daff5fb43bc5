"""Core tests, KIP-853 dynamic quorum: the voter set in force (the latest VotersRecord, committed or not), the
AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter handlers with Kafka's order of checks and errors, voter keys on
Vote and BeginQuorumEpoch, self-removal, truncation, snapshots and restart. Hand-fed inputs, as Kafka's
``KafkaRaftClientReconfigTest`` drives ``RaftClientTestContext``; each test names the Kafka test it mirrors."""

from __future__ import annotations

import itertools
import random
from typing import Any

from kraft_tck.reference.core import CoreConfig, KRaftCore
from kraft_tck.reference.io import (
    ClientWrite,
    ElectionState,
    Input,
    OutboundRequest,
    Ready,
    RequestFailed,
    RequestReceived,
    ResponseReceived,
    SnapshotLoaded,
)
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    Endpoint,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    ReplicaKey,
    SnapshotId,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    VoteRequest,
    VoteResponse,
)
from kraft_tck.reference.roles import Follower, Leader, Prospective, Resigned, Unattached, Voted
from kraft_tck.reference.voters import VoterNode, VoterSet, kraft_version_record, voters_record
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import ControlType, RecordBatch, control_batch, data_batch, decode_control

CID = "cid"
# Kafka Uuid strings (22 url-safe base64 characters; the last one holds 2 bits only).
DIRS = {i: f"AAAAAAAAAAAAAAAAAAAA{c}A" for i, c in zip(range(1, 7), "BCDEFG", strict=True)}
OTHER_DIR = "AAAAAAAAAAAAAAAAAAAAHA"
FETCH_TIMEOUT = 2000
REQUEST_TIMEOUT = 2000


def endpoint(i: int, port: int | None = None) -> Endpoint:
    return Endpoint("CONTROLLER", "localhost", port or 9000 + i)


def node(i: int, port: int | None = None) -> VoterNode:
    return VoterNode(ReplicaKey(i, DIRS[i]), (endpoint(i, port),), 0, 1)


def voters(*ids: int) -> VoterSet:
    return VoterSet(tuple(node(i) for i in ids))


def config(me: int, bootstrap: VoterSet | None, **kw: Any) -> CoreConfig:
    return CoreConfig(me, cluster_id=CID, directory_id=DIRS[me], listeners=(endpoint(me),),
                      bootstrap_voters=bootstrap, fetch_timeout_ms=FETCH_TIMEOUT,
                      request_timeout_ms=REQUEST_TIMEOUT, **kw)


class Node:
    """One core with its clock: every input a millisecond later than the previous one."""

    def __init__(self, core: KRaftCore, now: int = 0) -> None:
        self.core, self.now = core, now

    def step(self, inp: Input, dt: int = 1) -> Ready:
        self.now += dt
        return self.core.step(inp, self.now)

    def tick(self, at: int) -> Ready:
        self.now = max(self.now, at)
        return self.core.tick(self.now)

    def request(self, req: Any, sender: int = -1) -> tuple[Any, Ready]:
        ready = self.step(RequestReceived(sender, ("req", self.now + 1), req))
        mine = [r.response for r in ready.replies if r.reply_to == ("req", self.now)]
        return (mine[0] if mine else None), ready

    def fetch(self, rid: int, offset: int, last_epoch: int, directory_id: str | None = "") -> tuple[Any, Ready]:
        dir_id = DIRS.get(rid) if directory_id == "" else directory_id
        req = FetchRequest(CID, rid, self.core.epoch, offset, last_epoch, replica_directory_id=dir_id)
        return self.request(req, rid)

    def events(self, ready: Ready) -> list[str]:
        return [e["event"] for e in ready.trace]


def leader_of(*ids: int, me: int = 1, cls: type[KRaftCore] = KRaftCore) -> Node:
    """A leader of epoch 1 for the bootstrap voter set ``ids``, its epoch-start batch committed by voter 2
    (one voter: by itself). Epoch start: LeaderChange + KRaftVersion + Voters at offsets 0-2."""
    n = Node(cls(config(me, voters(*ids)), ElectionState(1, -1, me), Log(), random.Random(5), 0))
    if len(ids) > 1:
        for i in ids[1: len(ids) // 2 + 1]:
            n.step(ResponseReceived(i, VoteResponse(-1, 1, True)))
        assert isinstance(n.core.role, Leader)
        for i in ids[1: len(ids) // 2 + 1]:
            n.fetch(i, 3, 1)
    else:
        n.tick(1)
    assert isinstance(n.core.role, Leader) and n.core.high_watermark == 3
    return n


def add_request(i: int, **kw: Any) -> AddRaftVoterRequest:
    args: dict[str, Any] = {"cluster_id": CID, "voter_id": i, "voter_directory_id": DIRS[i],
                            "listeners": (endpoint(i),)}
    args.update(kw)
    return AddRaftVoterRequest(**args)


def probe(ready: Ready) -> OutboundRequest:
    [out] = [o for o in ready.send if isinstance(o.request, ApiVersionsRequest)]
    return out


def voters_records(core: KRaftCore) -> list[tuple[int, VoterSet]]:
    out = []
    for batch in core.log.batches:
        if batch.is_control:
            for rec in batch.records:
                ctype, body = decode_control(rec)
                if ctype is ControlType.KRAFT_VOTERS:
                    from kraft_tck.reference.voters import voter_set_from_record

                    out.append((batch.base_offset + rec.offset_delta, voter_set_from_record(body)))
    return out


def pending_add(n: Node, i: int = 4) -> OutboundRequest:
    """Voter ``i`` fetched up to the leader's end as an observer; AddRaftVoter is pending on its ApiVersions."""
    n.fetch(i, n.core.log.end_offset, n.core.last_epoch)
    resp, ready = n.request(add_request(i))
    assert resp is None
    return probe(ready)


# ============================================================================ the voter set in force


def test_leader_writes_bootstrap_records() -> None:
    """KafkaRaftClientReconfigTest.testLeaderWritesBootstrapRecords: the epoch-start batch holds LeaderChange,
    KRaftVersionRecord(1) and the bootstrap VotersRecord in one control batch; the trace shows the set."""
    n = leader_of(1, 2, 3)
    first = n.core.log.batches[0]
    kinds = [decode_control(r)[0] for r in first.records]
    assert first.is_control
    assert kinds == [ControlType.LEADER_CHANGE, ControlType.KRAFT_VERSION, ControlType.KRAFT_VOTERS]
    assert voters_records(n.core) == [(2, voters(1, 2, 3))]
    assert n.core.kraft_version() == 1 and n.core.voter_set() == voters(1, 2, 3)
    state = n.core.state_snapshot()
    assert state["voters"] == [1, 2, 3] and state["kraftVersion"] == 1
    status = n.core.status()
    assert status.voters == (1, 2, 3) and status.kraft_version == 1 and status.directory_id == DIRS[1]
    assert n.core.voters_at(1) == (1, voters(1, 2, 3)) and n.core.voters_at(2) == (1, voters(1, 2, 3))


def test_static_voters_keep_kraft_version_0_and_old_trace() -> None:
    """kraft.version 0 (controller.quorum.voters): no KIP-853 records or trace fields; changes are refused with
    UNSUPPORTED_VERSION (testAddVoterWithKraftVersion0, testRemoveVoterWithKraftVersion0)."""
    n = Node(KRaftCore(CoreConfig(1, frozenset({1, 2, 3}), CID), ElectionState(1, -1, 1), Log(), random.Random(5), 0))
    n.step(ResponseReceived(2, VoteResponse(-1, 1, True)))
    n.fetch(2, 1, 1, None)
    assert n.core.high_watermark == 1 and len(n.core.log.batches[0].records) == 1
    state = n.core.state_snapshot()
    assert "voters" not in state and "kraftVersion" not in state
    assert n.core.voters_at(0) == (0, None)
    resp, _ = n.request(add_request(4))
    assert resp == AddRaftVoterResponse(Errors.UNSUPPORTED_VERSION, resp.error_message)
    resp, _ = n.request(RemoveRaftVoterRequest(CID, 3, DIRS[3]))
    assert resp.error == Errors.UNSUPPORTED_VERSION


# ============================================================================ AddRaftVoter


def test_add_voter_commits_with_the_new_majority() -> None:
    """KafkaRaftClientReconfigTest.testAddVoter: ApiVersions goes to the new voter's default-listener endpoint; the
    VotersRecord is in force at its append; the answer NONE waits until the new set's majority has it."""
    n = leader_of(1, 2, 3)
    out = pending_add(n)
    assert out.dest_id == 4 and out.address == ("localhost", 9004)
    ready = n.step(ResponseReceived(4, ApiVersionsResponse(Errors.NONE, (0, 1)), out.request_id))
    assert "HandleApiVersionsResponse" in n.events(ready)
    event = next(e for e in ready.trace if e["event"] == "HandleApiVersionsResponse")
    assert event["voterKey"] == {"id": 4, "directoryId": DIRS[4]} and event["state"]["voters"] == [1, 2, 3, 4]
    assert voters_records(n.core)[-1] == (3, VoterSet((*voters(1, 2, 3).nodes, node(4))))
    assert n.core.voter_set().ids() == {1, 2, 3, 4}
    _, ready = n.fetch(2, 4, 1)
    assert n.core.high_watermark == 3 and not [r for r in ready.replies if isinstance(r.response, AddRaftVoterResponse)]
    _, ready = n.fetch(4, 4, 1)  # the added voter counts at once, for its own record too
    assert n.core.high_watermark == 4
    assert next(e["note"] for e in ready.trace if e["event"] == "HandleFetchRequest").endswith("AddRaftVoter committed")
    assert [r.response for r in ready.replies if isinstance(r.response, AddRaftVoterResponse)] == [
        AddRaftVoterResponse(Errors.NONE)]


def test_add_voter_invalid_cluster_id() -> None:
    """testAddVoterInvalidClusterId."""
    n = leader_of(1, 2, 3)
    resp, _ = n.request(add_request(4, cluster_id="other"))
    assert resp.error == Errors.INCONSISTENT_CLUSTER_ID and resp.error_message


def test_add_voter_to_not_leader() -> None:
    """testAddVoterToNotLeader: a follower answers NOT_LEADER_OR_FOLLOWER."""
    n = Node(KRaftCore(config(2, voters(1, 2, 3)), ElectionState(1, 1), Log(), random.Random(1), 0))
    assert isinstance(n.core.role, Follower)
    resp, _ = n.request(add_request(4))
    assert resp.error == Errors.NOT_LEADER_OR_FOLLOWER


def test_add_voter_with_missing_directory_id_and_default_listener() -> None:
    """testAddVoterWithMissingDirectoryId, testAddVoterWithMissingDefaultListener: INVALID_REQUEST, in that order."""
    n = leader_of(1, 2, 3)
    resp, _ = n.request(add_request(4, voter_directory_id=None, listeners=()))
    assert resp.error == Errors.INVALID_REQUEST and "key" in resp.error_message
    resp, _ = n.request(add_request(4, listeners=(Endpoint("OTHER", "localhost", 1),)))
    assert resp.error == Errors.INVALID_REQUEST and "listener" in resp.error_message


def test_add_voter_with_pending_add_or_remove() -> None:
    """testAddVoterWithPendingAddVoter, testAddVoterWithPendingRemoveVoter, testRemoveVoterWithPendingAddVoter:
    one change at a time: REQUEST_TIMED_OUT, nothing sent or appended."""
    n = leader_of(1, 2, 3)
    pending_add(n)
    end = n.core.log.end_offset
    resp, ready = n.request(add_request(5))
    assert resp.error == Errors.REQUEST_TIMED_OUT and not ready.send
    resp, _ = n.request(RemoveRaftVoterRequest(CID, 3, DIRS[3]))
    assert resp.error == Errors.REQUEST_TIMED_OUT and n.core.log.end_offset == end
    m = leader_of(1, 2, 3, 4)
    m.fetch(3, 3, 1)
    resp, _ = m.request(RemoveRaftVoterRequest(CID, 4, DIRS[4]))
    assert resp is None  # pending remove (needs 2 of 3 remaining: 2 and 3 must fetch it)
    resp, _ = m.request(add_request(5))
    assert resp.error == Errors.REQUEST_TIMED_OUT


def test_add_voter_without_fenced_previous_leaders() -> None:
    """testAddVoterWithoutFencedPreviousLeaders: until an entry of the leader's epoch commits (HW unknown):
    REQUEST_TIMED_OUT."""
    n = Node(KRaftCore(config(1, voters(1, 2, 3)), ElectionState(1, -1, 1), Log(), random.Random(5), 0))
    n.step(ResponseReceived(2, VoteResponse(-1, 1, True)))
    n.fetch(4, 3, 1)
    resp, ready = n.request(add_request(4))
    assert resp.error == Errors.REQUEST_TIMED_OUT and n.core.log.end_offset == 3 and not ready.send


def test_add_voter_with_uncommitted_voters_record() -> None:
    """AddVoterHandler: the latest VotersRecord not committed (offset >= HW): REQUEST_TIMED_OUT."""
    n = leader_of(1, 2, 3)
    resp, _ = n.request(UpdateRaftVoterRequest(CID, 1, 2, DIRS[2], (endpoint(2, 7002),), 0, 1))
    assert resp.error == Errors.NONE  # a VotersRecord at 3, not committed
    resp, _ = n.request(add_request(4))
    assert resp.error == Errors.REQUEST_TIMED_OUT


def test_add_voter_with_existing_voter() -> None:
    """testAddVoterWithExistingVoter: the id is a voter (any directory id): DUPLICATE_VOTER."""
    n = leader_of(1, 2, 3)
    resp, _ = n.request(add_request(2, voter_directory_id=OTHER_DIR))
    assert resp.error == Errors.DUPLICATE_VOTER


def test_add_voter_with_api_versions_from_incorrect_node() -> None:
    """testAddVoterWithApiVersionsFromIncorrectNode: ignored; the add still waits."""
    n = leader_of(1, 2, 3)
    pending_add(n)
    ready = n.step(ResponseReceived(5, ApiVersionsResponse(Errors.NONE, (0, 1))))
    assert not ready.replies and len(voters_records(n.core)) == 1
    role = n.core.role
    assert isinstance(role, Leader) and role.voter_change is not None


def test_add_voter_invalid_feature_version() -> None:
    """testAddVoterInvalidFeatureVersion: the new voter's kraft.version range lacks 1 (or is absent)."""
    for supported in [(0, 0), None]:
        n = leader_of(1, 2, 3)
        out = pending_add(n)
        ready = n.step(ResponseReceived(4, ApiVersionsResponse(Errors.NONE, supported), out.request_id))
        assert [r.response.error for r in ready.replies] == [Errors.INVALID_REQUEST]
        assert len(voters_records(n.core)) == 1


def test_add_voter_api_versions_error_or_failure() -> None:
    """AddVoterHandler.handleApiVersionsResponse: an error answer (or no answer at all) aborts: REQUEST_TIMED_OUT."""
    n = leader_of(1, 2, 3)
    out = pending_add(n)
    ready = n.step(RequestFailed(4, "ApiVersions", out.request_id))
    assert [r.response.error for r in ready.replies] == [Errors.REQUEST_TIMED_OUT]


def test_add_voter_with_lagging_new_voter() -> None:
    """testAddVoterWithLaggingNewVoter: the new replica never fetched up to the leader's end: REQUEST_TIMED_OUT."""
    n = leader_of(1, 2, 3)
    n.fetch(4, 0, 0)  # an observer that is behind
    resp, ready = n.request(add_request(4))
    assert resp is None
    ready = n.step(ResponseReceived(4, ApiVersionsResponse(Errors.NONE, (0, 1)), probe(ready).request_id))
    assert [r.response.error for r in ready.replies] == [Errors.REQUEST_TIMED_OUT]
    assert n.core.voter_set() == voters(1, 2, 3)
    # Caught up under another directory id is another replica (ReplicaState.matchesKey).
    n.fetch(4, n.core.log.end_offset, 1, OTHER_DIR)
    resp, ready = n.request(add_request(4))
    ready = n.step(ResponseReceived(4, ApiVersionsResponse(Errors.NONE, (0, 1)), probe(ready).request_id))
    assert [r.response.error for r in ready.replies] == [Errors.REQUEST_TIMED_OUT]


def test_add_voter_timeout() -> None:
    """testAddVoterTimeout: the commit does not come within the request timeout: REQUEST_TIMED_OUT
    (VoterChangeTimeout); the VotersRecord stays in the log and in force."""
    n = leader_of(1, 2, 3)
    out = pending_add(n)
    n.step(ResponseReceived(4, ApiVersionsResponse(Errors.NONE, (0, 1)), out.request_id))
    ready = n.tick(n.now + REQUEST_TIMEOUT)
    assert "VoterChangeTimeout" in n.events(ready)
    assert next(r.response for r in ready.replies if isinstance(r.response, AddRaftVoterResponse)).error == \
        Errors.REQUEST_TIMED_OUT
    assert n.core.voter_set().ids() == {1, 2, 3, 4} and len(voters_records(n.core)) == 2


def test_add_voter_fails_when_losing_leadership() -> None:
    """testAddVoterFailsWhenLosingLeadership: NOT_LEADER_OR_FOLLOWER."""
    n = leader_of(1, 2, 3)
    pending_add(n)
    _, ready = n.request(VoteRequest(CID, 5, 3, 1, 10, voter_id=1, voter_directory_id=DIRS[1]), 3)
    assert [r.response.error for r in ready.replies if isinstance(r.response, AddRaftVoterResponse)] == [
        Errors.NOT_LEADER_OR_FOLLOWER]


def test_add_voter_answered_at_append_is_a_hook() -> None:
    """``_add_completes_at_append`` (Kafka 4.2's AckWhenCommitted=false) answers NONE at the append."""

    class AckAtAppend(KRaftCore):
        def _add_completes_at_append(self) -> bool:
            return True

    n = leader_of(1, 2, 3, cls=AckAtAppend)
    out = pending_add(n)
    ready = n.step(ResponseReceived(4, ApiVersionsResponse(Errors.NONE, (0, 1)), out.request_id))
    assert [r.response for r in ready.replies] == [AddRaftVoterResponse(Errors.NONE)]
    assert n.core.high_watermark == 3


# ============================================================================ RemoveRaftVoter


def test_remove_voter_errors() -> None:
    """testRemoveVoterWithNoneVoter, testRemoveVoterToEmptyVoterSet, the key checks: VOTER_NOT_FOUND for an unknown
    id, another directory id, or the last voter; INVALID_REQUEST without a directory id."""
    n = leader_of(1, 2, 3)
    for req, error in [
        (RemoveRaftVoterRequest(CID, 4, DIRS[4]), Errors.VOTER_NOT_FOUND),
        (RemoveRaftVoterRequest(CID, 3, OTHER_DIR), Errors.VOTER_NOT_FOUND),
        (RemoveRaftVoterRequest(CID, 3, None), Errors.INVALID_REQUEST),
        (RemoveRaftVoterRequest("other", 3, DIRS[3]), Errors.INCONSISTENT_CLUSTER_ID),
    ]:
        resp, _ = n.request(req)
        assert resp.error == error, req
    solo = leader_of(1)
    resp, _ = solo.request(RemoveRaftVoterRequest(CID, 1, DIRS[1]))
    assert resp.error == Errors.VOTER_NOT_FOUND


def test_removed_voter_stops_counting_at_append() -> None:
    """KIP-853 "Voter changes" (LeaderState.updateReplicaState): once the VotersRecord removing 3 is appended, 3's
    fetches no longer move the high watermark nor keep the leader in office; 2 and the leader commit it."""
    n = leader_of(1, 2, 3)
    resp, ready = n.request(RemoveRaftVoterRequest(CID, 3, DIRS[3]))
    assert resp is None and "HandleRemoveRaftVoterRequest" in n.events(ready)
    assert n.core.voter_set().ids() == {1, 2}
    n.fetch(3, 4, 1)
    assert n.core.high_watermark == 3
    _, ready = n.fetch(2, 4, 1)
    assert n.core.high_watermark == 4
    assert [r.response for r in ready.replies if isinstance(r.response, RemoveRaftVoterResponse)] == [
        RemoveRaftVoterResponse(Errors.NONE)]
    describe, _ = n.request(DescribeQuorumRequest())
    assert isinstance(describe, DescribeQuorumResponse)
    assert [r.replica_id for r in describe.voters] == [1, 2] and [r.replica_id for r in describe.observers] == [3]
    assert [nl.node_id for nl in describe.nodes] == [1, 2] and describe.voters[1].replica_directory_id == DIRS[2]
    # Check quorum: 3's fetches no longer keep the leader in office.
    for _t in range(1, 4):
        n.now += 1000
        n.fetch(3, 4, 1)
    n.tick(n.now)
    assert isinstance(n.core.role, Resigned)


def test_fetch_under_a_voters_id_with_another_directory_id_is_another_observer() -> None:
    """LeaderState.updateReplicaState / getOrCreateReplicaState (ReplicaState.matchesKey): a Fetch under voter 2's id
    with another directory id is another replica, an observer of its own: answered, listed among the observers
    (testDescribeQuorumWithObserver's rows), never counted for the high watermark or check quorum; voter 2's own
    state is untouched."""
    n = leader_of(1, 2, 3)  # voter 2 fetched at 3 (DIRS[2])
    deadline = n.core.role.progress_deadline_ms
    resp, _ = n.fetch(2, 0, 0, OTHER_DIR)
    assert isinstance(resp, FetchResponse) and resp.partition_error == Errors.NONE and resp.batches
    at = n.now
    describe, _ = n.request(DescribeQuorumRequest())
    assert [(r.replica_id, r.replica_directory_id, r.log_end_offset) for r in describe.voters] == [
        (1, DIRS[1], 3), (2, DIRS[2], 3), (3, DIRS[3], -1)]
    from kraft_tck.reference.messages import ReplicaState

    assert describe.observers == (ReplicaState(2, 0, at, -1, OTHER_DIR),)
    n.fetch(2, 3, 1, OTHER_DIR)  # caught up under the other key: still no commit credit, no check-quorum credit
    assert n.core.high_watermark == 3 and n.core.role.progress_deadline_ms == deadline
    describe, _ = n.request(DescribeQuorumRequest())
    assert [(r.replica_id, r.replica_directory_id, r.log_end_offset) for r in describe.observers] == [
        (2, OTHER_DIR, 3)]


def test_voter_added_under_another_directory_id_keeps_its_observer_progress() -> None:
    """LeaderState.updateVoterAndObserverStates: voter (2, DIRS[2]) removed, then (2, OTHER_DIR), which fetched up to
    the end as an observer, is added: its observer state becomes the voter state (caught up: the add goes through,
    isReplicaCaughtUp by exact key) and the old key's state stays an observer."""
    n = leader_of(1, 2, 3)
    n.fetch(3, 3, 1)
    n.request(RemoveRaftVoterRequest(CID, 2, DIRS[2]))
    n.fetch(3, 4, 1)
    assert n.core.voter_set().ids() == {1, 3} and n.core.high_watermark == 4
    n.now += REQUEST_TIMEOUT  # the leader's last BeginQuorumEpoch to 2 (then a voter) is no longer in flight
    n.fetch(3, 4, 1)
    n.fetch(2, 4, 1, OTHER_DIR)
    resp, ready = n.request(add_request(2, voter_directory_id=OTHER_DIR))
    assert resp is None
    ready = n.step(ResponseReceived(2, ApiVersionsResponse(Errors.NONE, (0, 1)), probe(ready).request_id))
    assert "adds 2" in ready.trace[-1]["note"]
    assert n.core.voter_set().node(2) is not None and n.core.voter_set().node(2).key == ReplicaKey(2, OTHER_DIR)
    describe, _ = n.request(DescribeQuorumRequest())
    assert [(r.replica_id, r.replica_directory_id, r.log_end_offset) for r in describe.voters] == [
        (1, DIRS[1], 5), (2, OTHER_DIR, 4), (3, DIRS[3], 4)]
    assert [(r.replica_id, r.replica_directory_id) for r in describe.observers] == [(2, DIRS[2])]


def test_observer_states_expire_after_the_observer_session_timeout() -> None:
    """testDescribeQuorumWithObserver (LeaderState.OBSERVER_SESSION_TIMEOUT_MS = 5 min, clearInactiveObservers): an
    observer that has not fetched for 5 minutes is no longer listed; the voters keep the leader in office
    meanwhile. Time is the core's ``now_ms`` argument."""
    n = leader_of(1, 2, 3)
    n.fetch(4, 3, 1)
    seen = n.now
    while n.now < seen + 300_000 - 3_000:
        n.now += 2_999  # within check quorum (1.5 x fetch timeout)
        n.fetch(2, 3, 1)
    n.now = seen + 300_000 - 3
    n.fetch(2, 3, 1)
    describe, _ = n.request(DescribeQuorumRequest())  # at seen + 299,999
    assert [r.replica_id for r in describe.observers] == [4]
    describe, _ = n.request(DescribeQuorumRequest())  # at seen + 300,000
    assert isinstance(n.core.role, Leader) and describe.observers == ()
    n.fetch(4, 3, 1)  # fetching again: a fresh observer state
    describe, _ = n.request(DescribeQuorumRequest())
    assert [(r.replica_id, r.last_fetch_timestamp) for r in describe.observers] == [(4, n.now - 1)]


def test_removed_voter_that_never_fetched_is_not_listed() -> None:
    """clearInactiveObservers: a voter removed before it ever fetched from this leader (LastFetchTimestamp -1) is an
    expired observer at once (Kafka's wall-clock ``now - (-1) >= 5 min``); one that fetched is listed."""
    n = leader_of(1, 2, 3)  # 3 never fetched
    n.request(RemoveRaftVoterRequest(CID, 3, DIRS[3]))
    n.fetch(2, 4, 1)
    describe, _ = n.request(DescribeQuorumRequest())
    assert [r.replica_id for r in describe.voters] == [1, 2] and describe.observers == ()


def test_remove_voter_timed_out() -> None:
    """testRemoveVoterTimedOut: not committed within the request timeout: REQUEST_TIMED_OUT."""
    n = leader_of(1, 2, 3)
    n.request(RemoveRaftVoterRequest(CID, 3, DIRS[3]))
    ready = n.tick(n.now + REQUEST_TIMEOUT)
    assert [r.response.error for r in ready.replies if isinstance(r.response, RemoveRaftVoterResponse)] == [
        Errors.REQUEST_TIMED_OUT]


def test_remove_voter_is_leader() -> None:
    """testRemoveVoterIsLeader: the leader removes itself, keeps leading (HW counted without it) until both
    followers have the record, answers NONE, resigns (cause RemovedFromVoters), sends EndQuorumEpoch to the
    remaining voters and, after its election timeout, is an observer in epoch + 1."""
    n = leader_of(1, 2, 3)
    resp, _ = n.request(RemoveRaftVoterRequest(CID, 1, DIRS[1]))
    assert resp is None and isinstance(n.core.role, Leader)
    n.fetch(2, 4, 1)
    assert n.core.high_watermark == 3  # the leader no longer counts itself
    describe, _ = n.request(DescribeQuorumRequest())
    assert [r.replica_id for r in describe.voters] == [2, 3] and [r.replica_id for r in describe.observers] == [1]
    assert describe.observers[0].replica_directory_id == DIRS[1]
    _, ready = n.fetch(3, 4, 1)
    assert n.core.high_watermark == 4
    assert [r.response for r in ready.replies if isinstance(r.response, RemoveRaftVoterResponse)] == [
        RemoveRaftVoterResponse(Errors.NONE)]
    # requestResign: it resigns at its next poll, which it asks for at once (pollLeader), not in this step
    assert isinstance(n.core.role, Leader) and not [e for e in ready.trace if e["event"] == "Resign"]
    assert ready.next_deadline_ms == n.now
    ready = n.tick(n.now)
    resign = [e for e in ready.trace if e["event"] == "Resign"]
    assert resign and resign[0]["cause"] == "RemovedFromVoters"
    role = n.core.role
    assert isinstance(role, Resigned) and set(role.preferred_successors) == {2, 3}
    eqe = [o for o in ready.send if isinstance(o.request, EndQuorumEpochRequest)]
    assert sorted(o.dest_id for o in eqe) == [2, 3]
    assert eqe[0].request.preferred_directory_ids == tuple(DIRS[i] for i in role.preferred_successors)
    ready = n.tick(n.now + 2 * 1000 * 2)
    assert isinstance(n.core.role, Unattached) and n.core.epoch == 2 and n.core.role.election_deadline_ms is None
    # Traced as the observer's next fetch in the same step (tla/KRaft.tla ObserverLooksForLeader is part of
    # SendFetchRequest): the event's state already shows Unattached in epoch 2.
    [event] = ready.trace
    assert event["event"] == "SendFetchRequest"
    assert (event["state"]["role"], event["state"]["epoch"]) == ("Unattached", 2)
    assert [type(o.request) for o in ready.send] == [FetchRequest]
    n.tick(n.now + 10_000)
    assert isinstance(n.core.role, Unattached)  # never a candidate: an observer


def test_removed_leader_answers_parked_fetches_when_it_resigns() -> None:
    """A leader whose own removal commits resigns at its next poll (Kafka's ``requestResign`` then
    ``pollLeader``), which it asks for at once, and its parked long polls are answered by the resignation with
    NOT_LEADER_OR_FOLLOWER (Kafka's ``KafkaRaftClient.transitionToResigned`` completes the fetch purgatory with
    NotLeaderOrFollowerException; ``testRemoveVoterIsLeader``), not with the new high watermark in the step that
    committed the removal."""
    n = leader_of(1, 2, 3)
    n.fetch(4, 3, 1)  # an observer, caught up
    resp, _ = n.request(RemoveRaftVoterRequest(CID, 1, DIRS[1]), sender=900)
    assert resp is None
    parked = []
    for rid in (2, 4):  # long polls at the end of the log: parked
        req = FetchRequest(CID, rid, 1, 4, 1, max_wait_ms=500, replica_directory_id=DIRS.get(rid))
        ready = n.step(RequestReceived(rid, ("fetch", rid), req))
        assert not ready.replies
        parked.append(("fetch", rid))
    assert n.core.high_watermark == 3  # voter 2 has the record, voter 3 not yet
    commit = FetchRequest(CID, 3, 1, 4, 1, max_wait_ms=500, replica_directory_id=DIRS[3])
    ready = n.step(RequestReceived(3, ("fetch", 3), commit))
    assert n.core.high_watermark == 4 and isinstance(n.core.role, Leader)
    assert n.events(ready) == ["HandleFetchRequest"]
    assert [r.response for r in ready.replies if isinstance(r.response, RemoveRaftVoterResponse)] == [
        RemoveRaftVoterResponse(Errors.NONE)]
    assert not [r for r in ready.replies if isinstance(r.response, FetchResponse)]  # no leader answer after it
    ready = n.tick(n.now)
    assert isinstance(n.core.role, Resigned) and n.events(ready) == ["Resign"]
    fetch_answers = {r.reply_to: r.response for r in ready.replies if isinstance(r.response, FetchResponse)}
    assert sorted(fetch_answers, key=str) == sorted([*parked, ("fetch", 3)], key=str)
    for answer in fetch_answers.values():  # Kafka's buildEmptyFetchResponse with the error
        assert answer.partition_error == Errors.NOT_LEADER_OR_FOLLOWER and answer.high_watermark == -1
        assert answer.batches == () and answer.current_leader == LeaderIdAndEpoch(1, 1)


# ============================================================================ UpdateRaftVoter


def test_update_voter() -> None:
    """testUpdateVoter: NONE at once, VotersRecord with the new endpoint appended; CurrentLeader filled."""
    n = leader_of(1, 2, 3)
    resp, ready = n.request(UpdateRaftVoterRequest(CID, 1, 2, DIRS[2], (endpoint(2, 7002),), 0, 1))
    assert resp == UpdateRaftVoterResponse(Errors.NONE, LeaderIdAndEpoch(1, 1), NodeEndpoint(1, "localhost", 9001))
    assert voters_records(n.core)[-1] == (3, VoterSet((node(1), node(2, 7002), node(3))))
    assert [e["voterKey"] for e in ready.trace if e["event"] == "HandleUpdateRaftVoterRequest"] == [
        {"id": 2, "directoryId": DIRS[2]}]


def test_update_voter_errors() -> None:
    """testUpdateVoterOldEpoch, testUpdateVoterNewEpoch, testUpdateVoterWithNoneVoter, testUpdateVoterInvalid...,
    testUpdateVoterWithPendingAddVoter, testUpdateVoterToNotLeader."""
    n = leader_of(1, 2, 3)
    cases = [
        (UpdateRaftVoterRequest(CID, 0, 2, DIRS[2], (endpoint(2),), 0, 1), Errors.FENCED_LEADER_EPOCH),
        (UpdateRaftVoterRequest(CID, 2, 2, DIRS[2], (endpoint(2),), 0, 1), Errors.UNKNOWN_LEADER_EPOCH),
        (UpdateRaftVoterRequest(CID, 1, 2, None, (endpoint(2),), 0, 1), Errors.INVALID_REQUEST),
        (UpdateRaftVoterRequest(CID, 1, 2, DIRS[2], (), 0, 1), Errors.INVALID_REQUEST),
        (UpdateRaftVoterRequest(CID, 1, 2, DIRS[2], (endpoint(2),), 1, 0), Errors.INVALID_REQUEST),
        (UpdateRaftVoterRequest(CID, 1, 2, DIRS[2], (endpoint(2),), 0, 0), Errors.INVALID_REQUEST),
        (UpdateRaftVoterRequest(CID, 1, 2, OTHER_DIR, (endpoint(2),), 0, 1), Errors.VOTER_NOT_FOUND),
        (UpdateRaftVoterRequest(CID, 1, 5, DIRS[5], (endpoint(5),), 0, 1), Errors.VOTER_NOT_FOUND),
    ]
    for req, error in cases:
        resp, _ = n.request(req)
        assert resp.error == error, req
    pending_add(n)
    resp, _ = n.request(UpdateRaftVoterRequest(CID, 1, 2, DIRS[2], (endpoint(2, 7002),), 0, 1))
    assert resp.error == Errors.REQUEST_TIMED_OUT
    follower = Node(KRaftCore(config(2, voters(1, 2, 3)), ElectionState(1, 1), Log(), random.Random(1), 0))
    resp, _ = follower.request(UpdateRaftVoterRequest(CID, 1, 2, DIRS[2], (endpoint(2),), 0, 1))
    assert resp.error == Errors.NOT_LEADER_OR_FOLLOWER and resp.current_leader == LeaderIdAndEpoch(1, 1)


def leader_batches(voter_set: VoterSet, epoch: int = 1) -> list[RecordBatch]:
    """A leader's epoch-start control batch for ``voter_set``, as the follower receives it."""
    from kraft_tck.spec.codec import encode_data
    from kraft_tck.spec.records import CONTROL_SCHEMAS, Record

    body = {"Version": 0, "LeaderId": 1, "Voters": [], "GrantingVoters": []}
    recs = [(ControlType.LEADER_CHANGE, body), (ControlType.KRAFT_VERSION, kraft_version_record(1)),
            (ControlType.KRAFT_VOTERS, voters_record(voter_set))]
    out = tuple(Record(i, encode_data(CONTROL_SCHEMAS[t], 0, b), int(t).to_bytes(4, "big"))
                for i, (t, b) in enumerate(recs))
    return [RecordBatch(0, epoch, out, is_control=True)]


def test_follower_sends_update_voter() -> None:
    """testFollowerSendsUpdateVoter: a voter whose entry differs from itself sends UpdateRaftVoter instead of a Fetch
    once per 3 x fetch timeout; the answer only goes through the common response handling."""
    n = Node(KRaftCore(config(2, voters(1, 2, 3)), ElectionState(1, 1), Log(), random.Random(1), 0))
    stale = VoterSet((node(1), node(2, 7777), node(3)))
    ready = n.tick(1)
    fetch = next(o for o in ready.send if isinstance(o.request, FetchRequest))
    assert fetch.request.replica_directory_id == DIRS[2] and fetch.address == ("localhost", 9001)
    ready = n.step(ResponseReceived(1, FetchResponse(3, tuple(leader_batches(stale)), None, LeaderIdAndEpoch(1, 1)),
                                    fetch.request_id))
    assert n.core.voter_set() == stale
    sent: list[OutboundRequest] = []
    outstanding = list(ready.send)
    for _ in range(20):  # the leader answers every request 1 s later: 20 s, about 3 update periods
        for o in outstanding:
            assert o.dest_id == 1
            resp: Any = FetchResponse(3, (), None, LeaderIdAndEpoch(1, 1))
            if isinstance(o.request, UpdateRaftVoterRequest):
                resp = UpdateRaftVoterResponse(Errors.NONE, LeaderIdAndEpoch(1, 1))
            sent.append(o)
            ready = n.step(ResponseReceived(1, resp, o.request_id), dt=1000)
        outstanding = list(ready.send)
        assert isinstance(n.core.role, Follower)
    updates = [o.request for o in sent if isinstance(o.request, UpdateRaftVoterRequest)]
    assert updates and updates[0] == UpdateRaftVoterRequest(CID, 1, 2, DIRS[2], (endpoint(2),), 0, 1)
    assert len(updates) == 3  # one per 3 x fetch timeout (6 s) in 20 s
    assert all(isinstance(o.request, FetchRequest) for o in sent[:5])  # the first period: fetches only


# ============================================================================ follower view, truncation, snapshots


def test_follower_removed_by_uncommitted_record_stops_elections_and_truncation_restores() -> None:
    """KIP-853 "Voter changes": a follower that appends a VotersRecord without itself is an observer at once (no
    candidacy at its fetch timeout); a truncation of that record makes it a voter again."""
    n = Node(KRaftCore(config(3, voters(1, 2, 3)), ElectionState(1, 1), Log(), random.Random(1), 0))
    ready = n.tick(1)
    fetch = next(o for o in ready.send if isinstance(o.request, FetchRequest))
    batches = leader_batches(voters(1, 2, 3))
    batches.append(control_batch(3, 1, ControlType.KRAFT_VOTERS, voters_record(voters(1, 2))))
    n.step(ResponseReceived(1, FetchResponse(3, tuple(batches), None, LeaderIdAndEpoch(1, 1)), fetch.request_id))
    assert n.core.voter_set().ids() == {1, 2} and n.core.state_snapshot()["voters"] == [1, 2]
    n.tick(n.now + FETCH_TIMEOUT)
    assert isinstance(n.core.role, Unattached) and n.core.role.election_deadline_ms is None  # observer
    # A new leader (2, epoch 2) whose log lacks the record: DivergingEpoch truncates it.
    _, ready = n.request(BeginQuorumEpochRequest(CID, 2, 2, 3, voter_directory_id=DIRS[3]), 2)
    assert isinstance(n.core.role, Follower)
    fetch = next(o for o in ready.send if isinstance(o.request, FetchRequest))
    n.step(ResponseReceived(2, FetchResponse(3, (), (1, 3), LeaderIdAndEpoch(2, 2)), fetch.request_id))
    assert n.core.log.end_offset == 3 and n.core.voter_set().ids() == {1, 2, 3}
    n.tick(n.now + 2 * FETCH_TIMEOUT)
    assert n.core.role.name in ("Candidate", "Prospective")


def test_snapshot_load_and_restart_read_the_voter_set() -> None:
    """KRaftControlRecordStateMachine: a snapshot's VotersRecord counts at its end offset - 1 (SnapshotLoaded; at
    restart ``start_snapshot``); a restart reads the log's VotersRecords (testFollowerReadsKRaftBootstrapRecords)."""
    n = Node(KRaftCore(config(2, voters(1, 2, 3)), ElectionState(1, 1), Log(), random.Random(1), 0))
    sid = SnapshotId(10, 1)
    n.core._install_snapshot(sid)  # as a completed FetchSnapshot download does
    n.step(SnapshotLoaded(sid, CID, kraft_version=1, voters=voters(1, 2, 4)))
    assert n.core.voter_set().ids() == {1, 2, 4} and n.core.voters_at(9) == (1, voters(1, 2, 4))
    # Restart from a log starting at that snapshot, plus a VotersRecord after it.
    log = Log([control_batch(10, 1, ControlType.KRAFT_VOTERS, voters_record(voters(1, 2)))], start=sid)
    core, _ = KRaftCore.restart(config(2, voters(1, 2, 3)), ElectionState(1, 1), log, random.Random(1), 0,
                                snapshot_ids=[sid],
                                start_snapshot=SnapshotLoaded(sid, CID, kraft_version=1, voters=voters(1, 2, 4)))
    assert core.voter_set().ids() == {1, 2} and core.voters_at(9)[1] == voters(1, 2, 4)
    # Without the snapshot's content: the bootstrap set, then the log's record.
    core2, _ = KRaftCore.restart(config(2, voters(1, 2, 3)), ElectionState(1, 1),
                                 Log([*leader_batches(voters(1, 2, 3)), data_batch(3, 1, [b"x"])]),
                                 random.Random(1), 0)
    assert core2.voter_set() == voters(1, 2, 3) and core2.voters_at(2) == (1, voters(1, 2, 3))


def test_downloaded_snapshot_voter_set_is_in_force_when_installed() -> None:
    """KafkaRaftClient.handleFetchSnapshotResponse: the download that completes is installed
    (``log.truncateToLatestSnapshot``) and the partition state reloaded from it in the same step
    (``partitionState.updateState``): the snapshot header's VotersRecord is in force at once, and the
    HandleFetchSnapshotResponse event shows it, before the shell's SnapshotLoaded (which loads it again). The header
    batch arrives split across chunks."""
    from kraft_tck.reference.messages import FetchSnapshotRequest, FetchSnapshotResponse
    from kraft_tck.reference.snapshot import encode_snapshot

    n = Node(KRaftCore(config(2, voters(1, 2, 3)), ElectionState(1, 1), Log(), random.Random(1), 0))
    ready = n.tick(1)
    fetch = next(o for o in ready.send if isinstance(o.request, FetchRequest))
    sid = SnapshotId(10, 1)
    ready = n.step(ResponseReceived(1, FetchResponse(10, (), None, LeaderIdAndEpoch(1, 1), snapshot_id=sid),
                                    fetch.request_id))
    data = encode_snapshot(sid, [[b"a", b"b"]], kraft_version=1, voters=voters(1, 2, 4))
    cuts = [0, 7, 30, len(data)]  # the header batch is longer than 30 bytes: split in three
    for lo, hi in itertools.pairwise(cuts):
        out: OutboundRequest = next(o for o in ready.send if isinstance(o.request, FetchSnapshotRequest))
        assert out.request.position == lo
        resp = FetchSnapshotResponse(sid, LeaderIdAndEpoch(1, 1), len(data), lo, data[lo:hi])
        ready = n.step(ResponseReceived(1, resp, out.request_id))
        if hi < len(data):
            assert n.core.voter_set() == voters(1, 2, 3)  # not installed yet
    [event] = [e for e in ready.trace if e["event"] == "HandleFetchSnapshotResponse"]
    assert event["state"]["voters"] == [1, 2, 4] and event["state"]["logStartOffset"] == 10
    assert n.core.voter_set() == voters(1, 2, 4) and n.core.voters_at(9) == (1, voters(1, 2, 4))
    n.step(SnapshotLoaded(sid, CID, kraft_version=1, voters=voters(1, 2, 4)))
    assert n.core.voter_set() == voters(1, 2, 4)


def test_restart_of_a_removed_voter_is_an_observer() -> None:
    """QuorumState.initialize: a node not in the set in force restarts as an observer (no election timer)."""
    log = Log([*leader_batches(voters(1, 2, 3)),
               control_batch(3, 1, ControlType.KRAFT_VOTERS, voters_record(voters(1, 2)))])
    core, _ = KRaftCore.restart(config(3, voters(1, 2, 3)), ElectionState(1), log, random.Random(1), 0)
    assert isinstance(core.role, Unattached) and core.role.election_deadline_ms is None
    assert core.status().voters == (1, 2)


# ============================================================================ voter keys


def test_vote_with_invalid_voter_key_bumps_the_epoch_first() -> None:
    """KafkaRaftClientReconfigTest.testInvalidVoteRequest / handleVoteRequest: the higher epoch is taken (durable)
    first, then isValidVoterKey: another id, or our id with another directory id: INVALID_VOTER_KEY, not granted."""
    for voter_id, voter_dir in [(3, DIRS[3]), (2, OTHER_DIR)]:
        n = Node(KRaftCore(config(2, voters(1, 2, 3)), ElectionState(1, 1), Log(), random.Random(1), 0))
        resp, ready = n.request(VoteRequest(CID, 5, 1, 0, 0, voter_id=voter_id, voter_directory_id=voter_dir,
                                            candidate_directory_id=DIRS[1]), 1)
        assert resp.partition_error == Errors.INVALID_VOTER_KEY and not resp.vote_granted and resp.error == Errors.NONE
        assert n.core.epoch == 5 and ready.persist is not None and isinstance(n.core.role, Unattached)


def test_vote_keeps_the_candidate_directory_id() -> None:
    """The persisted vote keeps the candidate's directory id (quorum-state v1 votedDirectoryId); the same id with
    another directory id is another candidate (UnattachedState.canGrantVote compares ReplicaKeys)."""
    n = Node(KRaftCore(config(2, voters(1, 2, 3)), ElectionState(1, 1), Log(), random.Random(1), 0))
    resp, ready = n.request(VoteRequest(CID, 5, 1, 0, 0, voter_id=2, voter_directory_id=DIRS[2],
                                        candidate_directory_id=DIRS[1]), 1)
    assert resp.vote_granted and isinstance(n.core.role, Voted)
    assert ready.persist is not None and ready.persist.voted_directory_id == DIRS[1]
    resp, _ = n.request(VoteRequest(CID, 5, 1, 0, 0, voter_id=2, candidate_directory_id=OTHER_DIR), 1)
    assert not resp.vote_granted
    resp, _ = n.request(VoteRequest(CID, 5, 1, 0, 0, voter_id=2, candidate_directory_id=DIRS[1]), 1)
    assert resp.vote_granted


def test_begin_quorum_epoch_follows_before_the_voter_key_check() -> None:
    """handleBeginQuorumEpochRequest: a misaddressed BeginQuorumEpoch still makes the receiver follow the leader;
    then INVALID_VOTER_KEY. LeaderEndpoints give the leader's address."""
    n = Node(KRaftCore(config(2, voters(1, 2, 3)), ElectionState(1, 1), Log(), random.Random(1), 0))
    resp, ready = n.request(BeginQuorumEpochRequest(CID, 3, 4, 2, voter_directory_id=OTHER_DIR,
                                                    leader_endpoints=(endpoint(3, 7003),)), 3)
    assert isinstance(resp, BeginQuorumEpochResponse) and resp.partition_error == Errors.INVALID_VOTER_KEY
    assert isinstance(n.core.role, Follower) and n.core.leader_id == 3 and n.core.epoch == 4
    fetch = next(o for o in ready.send if isinstance(o.request, FetchRequest))
    assert fetch.dest_id == 3 and fetch.address == ("localhost", 9003)  # the voter set's entry wins


def test_outgoing_vote_and_begin_quorum_epoch_carry_keys() -> None:
    """RaftUtil.singletonVoteRequest / singletonBeginQuorumEpochRequest: the recipient's key, our directory id, our
    endpoints; responses name the leader's endpoint (NodeEndpoints)."""
    n = Node(KRaftCore(config(1, voters(1, 2, 3)), ElectionState(1, -1, 1), Log(), random.Random(5), 0))
    ready = n.tick(1)
    votes = {o.dest_id: o for o in ready.send if isinstance(o.request, VoteRequest)}
    assert votes[3].request.voter_directory_id == DIRS[3] and votes[3].request.candidate_directory_id == DIRS[1]
    assert votes[3].address == ("localhost", 9003)
    ready = n.step(ResponseReceived(2, VoteResponse(-1, n.core.epoch, True), votes[2].request_id))
    assert isinstance(n.core.role, Leader)
    bqe = {o.dest_id: o.request for o in ready.send if isinstance(o.request, BeginQuorumEpochRequest)}
    assert bqe[3].voter_directory_id == DIRS[3] and bqe[3].leader_endpoints == (endpoint(1),)
    resp, _ = n.fetch(2, 0, 0)
    assert isinstance(resp, FetchResponse) and resp.node_endpoints == (NodeEndpoint(1, "localhost", 9001),)
    resp, _ = n.request(VoteRequest(CID, n.core.epoch, 3, 0, 0), 3)
    assert resp.node_endpoints == (NodeEndpoint(1, "localhost", 9001),)


def test_observer_with_bootstrap_servers_finds_the_leader() -> None:
    """controller.quorum.bootstrap.servers (KafkaRaftClient ids -2, -3, ...): an observer that knows no voters asks
    them; the answer's NodeEndpoints tell where the leader is (testObserverDiscoversLeaderWithUnknownVoters)."""
    cfg = CoreConfig(6, cluster_id=CID, directory_id=DIRS[6], listeners=(endpoint(6),),
                     bootstrap_servers=(("h1", 1), ("h2", 2)))
    n = Node(KRaftCore(cfg, ElectionState(0), Log(), random.Random(1), 0))
    ready = n.tick(1)
    [out] = ready.send
    assert out.dest_id == -2 and out.address == ("h1", 1)
    resp = FetchResponse(-1, (), None, LeaderIdAndEpoch(1, 1), partition_error=Errors.NOT_LEADER_OR_FOLLOWER,
                         node_endpoints=(NodeEndpoint(1, "h9", 9),))
    ready = n.step(ResponseReceived(-2, resp, out.request_id))
    assert isinstance(n.core.role, Follower) and n.core.leader_id == 1
    fetch = [o for o in ready.send if isinstance(o.request, FetchRequest)]
    assert fetch and fetch[0].address == ("h9", 9)


def _deliver(src: Node, dst: Node, ready: Ready, src_id: int, replies: list[Any] | None = None) -> Ready:
    """Hand ``src``'s first outgoing request to ``dst`` and its answer back to ``src``; ``src``'s next Ready.
    A parked long poll (no answer yet) is answered at ``dst``'s next tick."""
    out = ready.send[0]
    dst.now = max(dst.now, src.now)
    resp, dready = dst.request(out.request, src_id)
    if replies is not None:
        replies += [r.response for r in dready.replies]
    while resp is None:  # parked Fetch: MaxWaitMs passes at the leader
        parked = dst.tick(dst.now + 600)
        if replies is not None:
            replies += [r.response for r in parked.replies]
        answers = [r.response for r in parked.replies if r.reply_to == ("req", dst.now - 600 + 1)]
        resp = answers[0] if answers else next((r.response for r in parked.replies), None)
    src.now = max(src.now, dst.now)
    return src.step(ResponseReceived(out.dest_id, resp, out.request_id))


def test_joining_observer_follows_the_leader_its_bootstrap_server_names() -> None:
    """A node formatted --no-initial-controllers, with controller.quorum.bootstrap.servers = a --standalone
    leader: its first Fetch goes to the bootstrap server (id -2); the answer names leader 1 (epoch 1) and the
    observer follows it (KafkaRaftClient.maybeHandleCommonResponse, testObserverDiscoversLeaderWithUnknownVoters),
    fetching from node 1 itself from then on. AddRaftVoter(2) then succeeds at epoch 1: the sole-voter leader's
    check-quorum timer ran on its own (LeaderState.timeUntilCheckQuorumExpires), and node 2, now a voter, is a
    Follower of the leader and never campaigns (testAddVoter keeps the leader)."""
    leader = leader_of(1)
    cfg = CoreConfig(2, cluster_id=CID, directory_id=DIRS[2], listeners=(endpoint(2),),
                     bootstrap_servers=(("localhost", 9001),), fetch_timeout_ms=FETCH_TIMEOUT,
                     request_timeout_ms=REQUEST_TIMEOUT)
    joiner = Node(KRaftCore(cfg, ElectionState(0), Log(), random.Random(1), 0))
    ready = joiner.tick(leader.now + 1)
    assert [(o.dest_id, o.address) for o in ready.send] == [(-2, ("localhost", 9001))]
    ready = _deliver(joiner, leader, ready, 2)
    role = joiner.core.role
    assert isinstance(role, Follower) and (role.epoch, role.leader_id) == (1, 1)
    assert [(o.dest_id, o.address) for o in ready.send] == [(1, ("localhost", 9001))]
    for _ in range(3):  # catch up with the leader's epoch-start batch
        ready = _deliver(joiner, leader, ready, 2)
    assert joiner.core.log.end_offset == 3 and joiner.core.high_watermark == 3
    leader.now = max(leader.now, joiner.now) + 5 * FETCH_TIMEOUT  # long past the first check-quorum deadline
    resp, lready = leader.request(add_request(2))
    assert resp is None and isinstance(leader.core.role, Leader), "the sole voter kept leading"
    out = probe(lready)
    lready = leader.step(ResponseReceived(2, ApiVersionsResponse(Errors.NONE, (0, 1)), out.request_id))
    assert leader.core.voter_set().ids() == {1, 2}
    answers: list[Any] = []
    for _ in range(4):  # node 2 fetches the VotersRecord, then its fetch commits it
        if not ready.send:
            ready = joiner.tick(max(joiner.now, leader.now) + 1)
        ready = _deliver(joiner, leader, ready, 2, answers)
    assert [a for a in answers if isinstance(a, AddRaftVoterResponse)] == [AddRaftVoterResponse(Errors.NONE)]
    # The add committed at epoch 1 and node 2 follows leader 1 as a voter.
    assert leader.core.high_watermark == 4 and leader.core.epoch == 1 and isinstance(leader.core.role, Leader)
    role = joiner.core.role
    assert joiner.core.voter_set().ids() == {1, 2}
    assert isinstance(role, Follower) and (role.epoch, role.leader_id) == (1, 1)


def test_prospective_vote_keeps_the_candidate_directory_id() -> None:
    """Kafka 4.x ProspectiveState keeps the ReplicaKey voted for (``prospectiveAddVotedState``): a real vote granted
    while Prospective persists the candidate's directory id, and the same id with another directory id is refused."""
    n = Node(KRaftCore(config(2, voters(1, 2, 3), pre_vote=True), ElectionState(1), Log(), random.Random(1), 0))
    n.tick(10 * FETCH_TIMEOUT)
    assert isinstance(n.core.role, Prospective)
    resp, ready = n.request(VoteRequest(CID, 1, 3, 0, 0, voter_id=2, voter_directory_id=DIRS[2],
                                        candidate_directory_id=DIRS[3]), 3)
    assert resp.vote_granted and isinstance(n.core.role, Prospective) and n.core.role.voted_id == 3
    assert ready.persist is not None and ready.persist.voted_directory_id == DIRS[3]
    resp, _ = n.request(VoteRequest(CID, 1, 3, 0, 0, voter_id=2, candidate_directory_id=OTHER_DIR), 3)
    assert not resp.vote_granted
    resp, _ = n.request(VoteRequest(CID, 1, 3, 0, 0, voter_id=2, candidate_directory_id=DIRS[3]), 3)
    assert resp.vote_granted


def test_client_writes_held_back_keep_their_offsets() -> None:
    """A VotersRecord goes after the client writes a leader holds back (their offsets were promised)."""
    n = leader_of(1, 2, 3, cls=KRaftCore)
    n.core.config = CoreConfig(**{**{f: getattr(n.core.config, f) for f in n.core.config.__dataclass_fields__},
                                  "append_linger_ms": 50})
    ready = n.step(ClientWrite((b"a", b"b")))
    assert ready.client_append is not None and ready.client_append.base_offset == 3
    resp, _ = n.request(UpdateRaftVoterRequest(CID, 1, 2, DIRS[2], (endpoint(2, 7002),), 0, 1))
    assert resp.error == Errors.NONE
    assert [b.base_offset for b in n.core.log.batches] == [0, 3, 5] and voters_records(n.core)[-1][0] == 5


# ============================================================================ hooks for fault nodes


def test_hooks_can_break_the_rules() -> None:
    """The one-line hooks conformance fault nodes override: a node that uses the committed voter set keeps counting
    a removed voter (``_voter_set_for_quorum``); one that skips the catch-up check adds a lagging voter
    (``_replica_caught_up``); one that ignores voter keys grants a misaddressed vote (``_voter_key_ok``)."""

    class CommittedOnly(KRaftCore):
        def _voter_set_for_quorum(self) -> VoterSet:
            return self._vh.voters_at(self.high_watermark - 1) or self._vh.static

    n = leader_of(1, 2, 3, cls=CommittedOnly)
    n.request(RemoveRaftVoterRequest(CID, 2, DIRS[2]))
    n.fetch(2, 4, 1)
    assert n.core.high_watermark == 4  # the removed voter's fetch committed its own removal

    class NoCatchUp(KRaftCore):
        def _replica_caught_up(self, key: ReplicaKey, now_ms: int) -> bool:
            return True

    n = leader_of(1, 2, 3, cls=NoCatchUp)
    _, ready = n.request(add_request(4))
    ready = n.step(ResponseReceived(4, ApiVersionsResponse(Errors.NONE, (0, 1)), probe(ready).request_id))
    assert n.core.voter_set().ids() == {1, 2, 3, 4} and not ready.replies

    class IgnoreKey(KRaftCore):
        def _voter_key_ok(self, voter_id: int, voter_directory_id: str | None) -> bool:
            return True

    m = Node(IgnoreKey(config(2, voters(1, 2, 3)), ElectionState(1, 1), Log(), random.Random(1), 0))
    resp, _ = m.request(VoteRequest(CID, 5, 1, 0, 0, voter_id=3, voter_directory_id=DIRS[3]), 1)
    assert resp.vote_granted


def test_trace_carries_sends_to_bootstrap_servers() -> None:
    """controller.quorum.bootstrap.servers get ids -2, -3, ... (KafkaRaftClient ctor): a traced observer's Fetch to one
    and the answer from it are valid trace lines (msg.from/msg.to), a node id stays >= -1 elsewhere."""
    from kraft_tck.spec.trace import line_errors

    def send(frm: int, to: int) -> dict[str, Any]:
        return {"type": "event", "seq": 1, "ts": 1, "node": 2, "event": "Send", "msg": {
            "api": "Fetch", "apiKey": 1, "kind": "request", "version": 17, "correlationId": 3, "from": frm, "to": to,
            "body": {"ClusterId": CID}}}

    assert line_errors(send(2, -2)) == [] and line_errors(send(-3, 2)) == []
    state = {"role": "Follower", "epoch": 1, "votedId": -1, "leaderId": -2, "logEndOffset": 0,
             "lastFetchedEpoch": 0, "highWatermark": -1}
    assert line_errors({"type": "event", "seq": 2, "ts": 1, "node": 2, "event": "HandleFetchResponse", "state": state})


# ============================================================================ one vote per epoch, observers too


def _vote(candidate: int, epoch: int, voter: int) -> VoteRequest:
    return VoteRequest(CID, epoch, candidate, 0, 0, voter_id=voter, candidate_directory_id=DIRS[candidate],
                       voter_directory_id=DIRS[voter])


def test_observer_fetch_timeout_keeps_its_vote_of_the_epoch() -> None:
    """KIP-595 "Vote Request Handling": a replica grants at most one vote per epoch, persisted (TLA+ VoteOnce). An
    observer may vote (Kafka 3.9 ``UnattachedState.canGrantVote``, KafkaRaftClientTest.testHandleVoteRequestAsObserver,
    QuorumStateTest.testObserverWithIdCanVote), then follow the winner keeping the vote. When its fetch timer runs out
    it looks for the leader again (Kafka stays Follower and asks any voter:
    testFollowerAsObserverDoesNotBecomeCandidateAfterFetchTimeout, testObserverSendDiscoveryFetchAfterFetchTimeout);
    the vote of the epoch stays, in memory and in quorum-state, so a second candidate of that epoch is refused."""
    n = Node(KRaftCore(config(4, voters(1, 2, 3)), ElectionState(1), Log(), random.Random(1), 0))
    n.tick(1)
    resp, ready = n.request(_vote(2, 2, 4), 2)
    assert isinstance(resp, VoteResponse) and resp.vote_granted and isinstance(n.core.role, Voted)
    assert ready.persist is not None and (ready.persist.leader_epoch, ready.persist.voted_id) == (2, 2)
    probe_out = next(o for o in ready.send if isinstance(o.request, FetchRequest))  # a Voted observer asks voters
    n.step(ResponseReceived(probe_out.dest_id, FetchResponse(-1, (), None, LeaderIdAndEpoch(2, 2),
                                                             partition_error=Errors.NOT_LEADER_OR_FOLLOWER),
                            probe_out.request_id))
    role = n.core.role
    assert isinstance(role, Follower) and (role.epoch, role.leader_id, role.voted_id) == (2, 2, 2)
    ready = n.tick(n.now + FETCH_TIMEOUT + 1)  # the observer's fetch timeout
    role = n.core.role
    assert n.core.epoch == 2 and n.core.leader_id == -1 and n.core.voted_id == 2, role
    assert isinstance(role, Voted) and role.election_deadline_ms is None  # an observer: no election timer
    assert ready.persist is None or (ready.persist.leader_epoch, ready.persist.voted_id) == (2, 2)
    assert any(isinstance(o.request, FetchRequest) for o in ready.send)  # it asks a voter who leads
    resp, _ = n.request(_vote(3, 2, 4), 3)
    assert isinstance(resp, VoteResponse) and not resp.vote_granted, "a second vote in epoch 2"
    assert n.core.voted_id == 2


def test_restart_of_a_removed_leader_keeps_its_epoch_and_vote() -> None:
    """QuorumState.initialize: a node whose quorum-state names itself leader of its epoch restarts Resigned in that
    epoch (QuorumStateTest.testInitializeAsResignedLeader,
    KafkaRaftClientTest.testInitializeAsResignedLeaderFromStateStore), whatever its log's voter set says: a leader
    removed by a VotersRecord (KIP-853) keeps its vote for itself in that epoch and refuses another candidate of it.
    At its election timeout it moves on as an observer, Unattached in epoch + 1 (``pollResigned``), with no election
    of its own."""
    log = Log([*leader_batches(voters(1, 2, 3)),
               control_batch(3, 1, ControlType.KRAFT_VOTERS, voters_record(voters(2, 3)))])
    core, ready = KRaftCore.restart(config(1, voters(1, 2, 3)), ElectionState(1, 1, 1), log, random.Random(1), 0)
    assert core.voter_set().ids() == {2, 3}
    assert isinstance(core.role, Resigned) and core.epoch == 1 and core.voted_id == 1 and core.leader_id == 1
    [restart] = [e for e in ready.trace if e["event"] == "Restart"]
    assert (restart["state"]["role"], restart["state"]["votedId"]) == ("Resigned", 1)
    n = Node(core)
    resp, _ = n.request(VoteRequest(CID, 1, 2, 1, 4, voter_id=1, candidate_directory_id=DIRS[2],
                                    voter_directory_id=DIRS[1]), 2)
    assert isinstance(resp, VoteResponse) and not resp.vote_granted, "a second vote in epoch 1"
    deadline = core.role.election_deadline_ms
    ready = n.tick(deadline)
    assert isinstance(core.role, Unattached) and core.epoch == 2 and core.role.election_deadline_ms is None
    assert not any(isinstance(o.request, VoteRequest) for o in ready.send)


def test_restart_keeps_a_vote_whose_leader_left_the_voter_set() -> None:
    """QuorumState.initialize: a Follower whose leader is no longer in the voter set of its log does not know where
    that leader listens and restarts without it (Kafka: Unattached,
    QuorumStateTest.testInitializeAsUnattachedWhenMissingEndpoints); the vote its quorum-state holds for the epoch
    stays (Voted), so VoteOnce holds across the restart."""
    log = Log([*leader_batches(voters(1, 2, 3)),
               control_batch(3, 1, ControlType.KRAFT_VOTERS, voters_record(voters(2, 3)))])
    core, _ = KRaftCore.restart(config(3, voters(1, 2, 3)), ElectionState(1, 1, 1), log, random.Random(1), 0)
    assert isinstance(core.role, Voted) and core.epoch == 1 and core.voted_id == 1 and core.leader_id == -1
    resp, _ = Node(core).request(_vote(2, 1, 3), 2)
    assert isinstance(resp, VoteResponse) and not resp.vote_granted
