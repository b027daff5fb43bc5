"""Core tests, KIP-630 snapshots: CreateSnapshot, CleanLog, the leader's SnapshotId answers to Fetch
(Kafka's ``KafkaRaftClient.handleFetchRequest`` / ``ReplicatedLog.validateOffsetAndEpoch``), FetchSnapshot on
the leader (``handleFetchSnapshotRequest``) and on the follower (``handleFetchSnapshotResponse``), restart
from a snapshot, and the log's start offset. Hand-fed inputs, as ``KafkaRaftClientSnapshotTest`` does."""

from __future__ import annotations

import random
from typing import Any

import pytest
from kraft_tck.reference import wire
from kraft_tck.reference.core import CoreConfig, KRaftCore, SafetyViolation
from kraft_tck.reference.io import (
    AbortSnapshotDownload,
    AdvanceLogStart,
    CleanLogTo,
    ClientWrite,
    DeleteSnapshot,
    ElectionState,
    InstallSnapshot,
    OutboundRequest,
    Ready,
    RequestReceived,
    ResponseReceived,
    SnapshotLoaded,
    SnapshotWritten,
    WriteSnapshotChunk,
)
from kraft_tck.reference.log import Log, LogError, MemorySnapshots
from kraft_tck.reference.messages import (
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kraft_tck.reference.roles import Follower, Leader
from kraft_tck.reference.typed_wire import BOUND_VERSIONS, TypedCodec
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import RecordBatch, data_batch
from kraft_tck.spec.trace import line_errors

VOTERS = frozenset({1, 2, 3})
SNAPSHOT_BYTES = bytes(range(256)) * 3  # what the shell "wrote": the core only moves these bytes


def log_with(*epochs: tuple[int, int]) -> tuple[RecordBatch, ...]:
    """One record per batch, ``count`` batches per epoch, from offset 0."""
    out, offset = [], 0
    for epoch, count in epochs:
        for _ in range(count):
            out.append(data_batch(offset, epoch, [b"r%d-%d" % (epoch, offset)]))
            offset += 1
    return tuple(out)


def config(node_id: int, cluster_id: str | None = "cid", **kw: Any) -> CoreConfig:
    return CoreConfig(node_id, VOTERS, cluster_id, election_timeout_ms=1000, fetch_timeout_ms=2000, **kw)


def committed_leader(epoch: int, batches: tuple[RecordBatch, ...], store: MemorySnapshots | None = None) -> KRaftCore:
    """Node 1 leading ``epoch`` over ``batches`` + its LeaderChange, everything committed (node 2 fetched it)."""
    core = KRaftCore(config(1), ElectionState(epoch, -1, 1), Log(batches), random.Random(1), 0, snapshots=store)
    core.step(ResponseReceived(2, VoteResponse(-1, epoch, True)), 0)
    assert isinstance(core.role, Leader)
    fetch(core, 2, core.log.end_offset, epoch, now=1)
    assert core.high_watermark == core.log.end_offset
    return core


def fetch(core: KRaftCore, replica: int, offset: int, last_epoch: int, *, epoch: int | None = None,
          now: int = 10, max_wait: int = 0) -> FetchResponse:
    req = FetchRequest("cid", replica, core.epoch if epoch is None else epoch, offset, last_epoch, max_wait)
    ready = core.step(RequestReceived(replica, ("fetch", replica), req), now)
    (r,) = ready.replies
    assert isinstance(r.response, FetchResponse)
    return r.response


def fetch_snapshot(core: KRaftCore, snapshot_id: SnapshotId, position: int, *, max_bytes: int = 0x7FFFFFFF,
                   epoch: int | None = None, cluster: str | None = "cid", replica: int = 2, now: int = 40,
                   valid_partition: bool = True) -> tuple[FetchSnapshotResponse, Ready]:
    req = FetchSnapshotRequest(cluster, replica, core.epoch if epoch is None else epoch, snapshot_id, position,
                               max_bytes, valid_partition=valid_partition,
                               partition_name=None if valid_partition else ("other", 3))
    ready = core.step(RequestReceived(replica, ("fs", replica), req), now)
    (r,) = ready.replies
    assert isinstance(r.response, FetchSnapshotResponse)
    return r.response, ready


def events(ready: Ready, name: str) -> list[dict[str, Any]]:
    return [e for e in ready.trace if e["event"] == name]


def assert_trace_valid(ready: Ready) -> None:
    for i, ev in enumerate(ready.trace):
        problems = line_errors({**ev, "seq": i})
        assert not problems, (ev, problems)


def snapshotted_leader(clean: bool = True) -> tuple[KRaftCore, SnapshotId, MemorySnapshots]:
    """Leader of epoch 4 over epochs 1 (0-2) and 2 (3-4), its LeaderChange at 5; snapshot (5, 2) taken, and the
    log cleaned up to it when ``clean``."""
    store = MemorySnapshots()
    core = committed_leader(4, log_with((1, 3), (2, 2)), store)
    sid = core.snapshot_id_at(5)
    assert sid == SnapshotId(5, 2)
    store.put(sid, SNAPSHOT_BYTES)
    core.step(SnapshotWritten(sid), 30)
    if clean:
        ready = core.step(CleanLogTo(5), 31)
        assert ready.log_ops == [AdvanceLogStart(5)]
    return core, sid, store


# ============================================================================ the log's start (log.py)


def test_log_advance_start_keeps_epoch_answers_at_the_start() -> None:
    """Kafka's KafkaMetadataLog.endOffsetForEpoch / lastFetchedEpoch: the snapshot at the log start answers."""
    log = Log(log_with((1, 3), (2, 2), (4, 1)))
    assert log.advance_start(SnapshotId(4, 2)) == 4
    assert (log.start_offset, log.end_offset, len(log)) == (4, 6, 2)
    assert [b.base_offset for b in log.batches] == [4, 5]
    assert log.epoch_of(3) == 2 and log.epoch_of(2) == -1 and log.epoch_of(4) == 2
    assert log.epoch_end_offset(1) == (2, 4)  # older than every record left: the snapshot (Kafka's override)
    assert log.epoch_end_offset(2) == (2, 5)
    assert log.epoch_end_offset(3) == (2, 5)
    assert log.epoch_end_offset(4) == (4, 6)
    with pytest.raises(LogError, match="below the log start"):
        log.read(3, 100)
    with pytest.raises(LogError, match="below the log start"):
        log.truncate_to(3)
    assert log.truncate_to(4) == 4 and log.last_fetched_epoch == 2  # the snapshot's epoch: no record left
    log.append([data_batch(4, 2, [b"x"])])  # same epoch as the snapshot: still gets its cache entry
    assert log.epoch_cache[0].epoch == 2 and log.epoch_end_offset(2) == (2, 5)


def test_log_advance_start_refuses_a_snapshot_that_does_not_match() -> None:
    log = Log(log_with((1, 3), (2, 2)))
    with pytest.raises(LogError, match="does not match"):
        log.advance_start(SnapshotId(4, 1))
    with pytest.raises(LogError, match="beyond the log end"):
        log.advance_start(SnapshotId(9, 2))
    assert log.advance_start(SnapshotId(5, 2)) == 5  # everything: no record left
    assert (log.start_offset, log.end_offset, len(log), log.last_fetched_epoch) == (5, 5, 0, 2)
    assert log.epoch_end_offset(7) == (2, 5)


def test_log_reset_to_snapshot_and_a_log_restored_from_one() -> None:
    log = Log(log_with((1, 3)))
    log.reset_to_snapshot(SnapshotId(10, 3))
    assert (log.start_offset, log.end_offset, len(log), log.last_fetched_epoch) == (10, 10, 0, 3)
    restored = Log([data_batch(10, 3, [b"a"]), data_batch(11, 5, [b"b"])], start=SnapshotId(10, 3))
    assert (restored.start_offset, restored.end_offset, restored.epoch_of(9)) == (10, 12, 3)
    assert [(e.epoch, e.start_offset) for e in restored.epoch_cache] == [(3, 10), (5, 11)]
    with pytest.raises(LogError, match="does not continue"):
        Log([data_batch(0, 3, [b"a"])], start=SnapshotId(10, 3))


# ============================================================================ CreateSnapshot


def test_create_snapshot_at_the_high_watermark_is_recorded_and_traced() -> None:
    core = committed_leader(4, log_with((1, 3), (2, 2)))
    ready = core.step(SnapshotWritten(SnapshotId(5, 2)), 30)
    (ev,) = events(ready, "CreateSnapshot")
    assert ev["snapshotId"] == {"endOffset": 5, "epoch": 2}
    assert "logStartOffset" not in ev["state"]  # creating does not clean
    assert ready.log_ops == [] and ready.send == []
    assert core.latest_snapshot_id == SnapshotId(5, 2) and core.status().latest_snapshot_id == SnapshotId(5, 2)
    assert_trace_valid(ready)
    again = core.step(SnapshotWritten(SnapshotId(5, 2)), 31)  # Kafka: createNewSnapshotUnchecked -> empty
    assert events(again, "CreateSnapshot") == []


def test_snapshot_id_at_names_the_epoch_of_the_last_record() -> None:
    core = committed_leader(4, log_with((1, 3), (2, 2)))
    assert core.snapshot_id_at(0) == SnapshotId(0, 0)
    assert core.snapshot_id_at(3) == SnapshotId(3, 1)
    assert core.snapshot_id_at(6) == SnapshotId(6, 4)  # the LeaderChange record of epoch 4
    with pytest.raises(ValueError, match="high watermark"):
        core.snapshot_id_at(7)


@pytest.mark.parametrize(("sid", "why"), [
    (SnapshotId(7, 4), "above its high watermark"),  # KafkaMetadataLog.createNewSnapshot: > HW
    (SnapshotId(5, 1), "does not match the log"),  # validateOffsetAndEpoch not VALID
])
def test_create_snapshot_that_breaks_the_rules_is_a_safety_violation(sid: SnapshotId, why: str) -> None:
    core = committed_leader(4, log_with((1, 3), (2, 2)))
    with pytest.raises(SafetyViolation, match=why):
        core.step(SnapshotWritten(sid), 30)
    assert core.latest_snapshot_id is None


def test_create_snapshot_above_the_high_watermark_on_a_follower() -> None:
    """KafkaRaftClientSnapshotTest.testCreateSnapshotAsFollowerWithInvalidSnapshotId: a follower's HW bounds it."""
    core = KRaftCore(config(2), ElectionState(4, 1), Log(log_with((1, 3))), random.Random(2), 0)
    with pytest.raises(SafetyViolation, match="high watermark 0"):
        core.step(SnapshotWritten(SnapshotId(3, 1)), 1)


def test_create_snapshot_below_the_log_start_is_refused() -> None:
    core, _, _ = snapshotted_leader()
    with pytest.raises(SafetyViolation, match="below the log start"):
        core.step(SnapshotWritten(SnapshotId(3, 1)), 40)


def test_an_uncommitted_snapshot_is_an_injectable_fault() -> None:
    class SnapshotsAnything(KRaftCore):
        def _snapshot_allowed(self, snapshot_id: SnapshotId) -> None:
            pass

    core = SnapshotsAnything(config(2), ElectionState(4, 1), Log(log_with((1, 3))), random.Random(2), 0)
    ready = core.step(SnapshotWritten(SnapshotId(3, 1)), 1)
    assert events(ready, "CreateSnapshot") and core.latest_snapshot_id == SnapshotId(3, 1)


# ============================================================================ CleanLog


def test_clean_log_moves_the_start_to_a_snapshot_and_forgets_older_ones() -> None:
    store = MemorySnapshots()
    core = committed_leader(4, log_with((1, 3), (2, 2)), store)
    for end in (3, 5):
        store.put(core.snapshot_id_at(end), SNAPSHOT_BYTES)
        core.step(SnapshotWritten(core.snapshot_id_at(end)), 30)
    ready = core.step(CleanLogTo(5), 31)
    assert ready.log_ops == [AdvanceLogStart(5), DeleteSnapshot(SnapshotId(3, 1))]
    (ev,) = events(ready, "CleanLog")
    assert ev["state"]["logStartOffset"] == 5 and ev["state"]["logEndOffset"] == 6
    assert_trace_valid(ready)
    assert core.snapshot_ids == (SnapshotId(5, 2),)
    assert (core.log.start_offset, [b.base_offset for b in core.log.batches]) == (5, [5])
    assert core.status().log_start_offset == 5


@pytest.mark.parametrize(("offset", "why"), [
    (4, "no snapshot ends there"),
    (6, "past the latest snapshot"),
    (0, "not above the start"),
])
def test_clean_log_changes_nothing_unless_allowed(offset: int, why: str) -> None:
    core = committed_leader(4, log_with((1, 3), (2, 2)))
    core.step(SnapshotWritten(SnapshotId(5, 2)), 30)
    ready = core.step(CleanLogTo(offset), 31)
    assert (ready.log_ops, ready.trace, core.log.start_offset) == ([], [], 0), why


def test_clean_log_never_passes_the_clean_limit() -> None:
    class NeverClean(KRaftCore):
        def _clean_limit(self) -> int:
            return 0

    store = MemorySnapshots()
    core = NeverClean(config(1), ElectionState(4, -1, 1), Log(log_with((1, 3))), random.Random(1), 0, snapshots=store)
    core.step(ResponseReceived(2, VoteResponse(-1, 4, True)), 0)
    fetch(core, 2, 4, 4, now=1)
    core.step(SnapshotWritten(SnapshotId(3, 1)), 2)
    assert core.step(CleanLogTo(3), 3).log_ops == [] and core.log.start_offset == 0


# ============================================================================ the leader's Fetch answers

# KafkaRaftClientSnapshotTest: log epochs 2 (0-2), 2 (3-5), 4 (6-8), leader of epoch 5 (LeaderChange at 9),
# snapshot (3, 2) ("oldestSnapshotId"). Rows: (clean?, FetchOffset, LastFetchedEpoch) -> SnapshotId / Diverging.
FETCH_CASES = [
    ("testFetchRequestAtLogStartOffsetWithValidEpoch", False, 3, 2, None, None),
    ("testFetchRequestAtLogStartOffsetWithInvalidEpoch", True, 3, 3, SnapshotId(3, 2), None),
    ("testFetchRequestWithLastFetchedEpochLessThanOldestSnapshot", False, 10, 1, SnapshotId(3, 2), None),
    ("testFetchRequestOffsetAtZero (empty follower)", False, 0, 0, SnapshotId(3, 2), None),
    ("offset below the log start", True, 2, 2, SnapshotId(3, 2), None),
    ("at the log start, valid epoch, cleaned", True, 3, 2, None, None),
    ("divergence answered from the snapshot at the start", True, 5, 3, None, (2, 6)),
    ("testFetchRequestTruncateToLogStart (diverging, not cleaned)", False, 4, 3, None, (2, 6)),
    ("caught up", True, 10, 5, None, None),
]


@pytest.mark.parametrize(("clean", "offset", "last_epoch", "snapshot", "diverging"),
                         [c[1:] for c in FETCH_CASES], ids=[c[0] for c in FETCH_CASES])
def test_fetch_below_the_log_start_gets_the_snapshot_id(
        clean: bool, offset: int, last_epoch: int, snapshot: SnapshotId | None,
        diverging: tuple[int, int] | None) -> None:
    store = MemorySnapshots()
    core = committed_leader(5, log_with((2, 6), (4, 3)), store)
    store.put(SnapshotId(3, 2), SNAPSHOT_BYTES)
    core.step(SnapshotWritten(SnapshotId(3, 2)), 30)
    if clean:
        core.step(CleanLogTo(3), 31)
    leader = core.role
    assert isinstance(leader, Leader)
    progress_before = leader.replicas[3].end_offset
    # A SnapshotId (or DivergingEpoch) answer goes at once, never parked (Kafka's handleFetchRequest, case 5).
    wait = 500 if snapshot is not None or diverging is not None else 0
    resp = fetch(core, 3, offset, last_epoch, now=40, max_wait=wait)
    assert (resp.partition_error, resp.error) == (Errors.NONE, Errors.NONE)
    assert resp.current_leader == LeaderIdAndEpoch(1, 5)
    assert resp.snapshot_id == snapshot and resp.diverging_epoch == diverging
    assert resp.log_start_offset == (3 if clean else 0)
    if snapshot is not None or diverging is not None:
        assert resp.batches == ()
        assert leader.replicas[3].end_offset == progress_before  # no replica progress
    else:
        assert [b.base_offset for b in resp.batches] == list(range(offset, core.log.end_offset))


def test_the_latest_snapshot_is_named_not_the_earliest() -> None:
    """KafkaRaftClientSnapshotTest.testLeaderImmediatelySendsSnapshotId: the latest snapshot id is the answer."""
    core, _, _ = snapshotted_leader()
    core.step(SnapshotWritten(SnapshotId(6, 4)), 40)
    assert fetch(core, 2, 2, 1, now=41).snapshot_id == SnapshotId(6, 4)
    assert fetch(core, 3, 0, 0, now=42).snapshot_id == SnapshotId(6, 4)


def test_a_parked_fetch_the_log_was_cleaned_past_gets_the_snapshot_id() -> None:
    store = MemorySnapshots()
    core = committed_leader(4, log_with((1, 3)), store)
    ready = core.step(RequestReceived(3, "parked", FetchRequest("cid", 3, 4, 4, 4, max_wait_ms=500)), 5)
    assert ready.replies == []  # node 3 caught up at 4: parked
    store.put(SnapshotId(4, 4), SNAPSHOT_BYTES)
    core.step(SnapshotWritten(SnapshotId(4, 4)), 6)
    core.step(CleanLogTo(4), 7)
    lagging = FetchRequest("cid", 3, 4, 1, 1)
    assert core.step(RequestReceived(3, "r", lagging), 8).replies[0].response.snapshot_id == SnapshotId(4, 4)
    expired = core.tick(505)
    (r,) = expired.replies
    assert r.reply_to == "parked" and r.response.snapshot_id is None and r.response.batches == ()


# ============================================================================ FetchSnapshot on the leader


def test_fetch_snapshot_serves_chunks_by_position() -> None:
    """KafkaRaftClientSnapshotTest.testPartialFetchSnapshotRequestAsLeader: MaxBytes chunks, Size and Position."""
    core, sid, _ = snapshotted_leader()
    got, position = b"", 0
    while position < len(SNAPSHOT_BYTES):
        resp, ready = fetch_snapshot(core, sid, position, max_bytes=300)
        assert (resp.partition_error, resp.error) == (Errors.NONE, Errors.NONE)
        assert (resp.snapshot_id, resp.size, resp.position) == (sid, len(SNAPSHOT_BYTES), position)
        assert resp.current_leader == LeaderIdAndEpoch(1, 4)
        assert len(resp.records) == min(300, len(SNAPSHOT_BYTES) - position)
        assert len(events(ready, "HandleFetchSnapshotRequest")) == 1
        assert ready.log_ops == [] and ready.persist is None
        assert_trace_valid(ready)
        got += resp.records
        position += len(resp.records)
    assert got == SNAPSHOT_BYTES
    whole, _ = fetch_snapshot(core, sid, 0)
    assert whole.records == SNAPSHOT_BYTES  # Kafka: min(MaxBytes, snapshot size)


def test_a_served_chunk_counts_for_check_quorum() -> None:
    """KafkaRaftClientSnapshotTest.testLeaderShouldResignLeadershipIfNotGetFetchSnapshotRequestFromMajorityVoters."""
    core, sid, _ = snapshotted_leader()
    leader = core.role
    assert isinstance(leader, Leader)
    deadline = leader.progress_deadline_ms
    fetch_snapshot(core, sid, 0, now=2500)
    assert leader.progress_deadline_ms == 2500 + core.check_quorum_timeout_ms > deadline
    core.tick(deadline + 1)
    assert isinstance(core.role, Leader)


@pytest.mark.parametrize(("kafka_test", "sid", "position", "epoch", "error"), [
    ("testFetchSnapshotRequestMissingSnapshot", SnapshotId(9, 4), 0, 4, Errors.SNAPSHOT_NOT_FOUND),
    ("testFetchSnapshotRequestBootstrapSnapshot", SnapshotId(0, 0), 0, 4, Errors.SNAPSHOT_NOT_FOUND),
    ("testFetchSnapshotRequestWithInvalidPosition (negative)", SnapshotId(5, 2), -1, 4, Errors.POSITION_OUT_OF_RANGE),
    ("testFetchSnapshotRequestWithInvalidPosition (at size)", SnapshotId(5, 2), len(SNAPSHOT_BYTES), 4,
     Errors.POSITION_OUT_OF_RANGE),
    ("testFetchSnapshotRequestWithOlderEpoch", SnapshotId(5, 2), 0, 3, Errors.FENCED_LEADER_EPOCH),
    ("testFetchSnapshotRequestWithNewerEpoch", SnapshotId(5, 2), 0, 5, Errors.UNKNOWN_LEADER_EPOCH),
])
def test_fetch_snapshot_errors(kafka_test: str, sid: SnapshotId, position: int, epoch: int, error: Errors) -> None:
    core, _, _ = snapshotted_leader()
    resp, ready = fetch_snapshot(core, sid, position, epoch=epoch)
    assert (resp.partition_error, resp.error) == (error, Errors.NONE), kafka_test
    assert resp.snapshot_id is None and resp.records == b"" and resp.current_leader == LeaderIdAndEpoch(1, 4)
    assert isinstance(core.role, Leader) and core.epoch == 4  # nothing changed
    assert events(ready, "HandleFetchSnapshotRequest")


def test_fetch_snapshot_to_a_follower_is_not_leader_or_follower() -> None:
    """KafkaRaftClientSnapshotTest.testFetchSnapshotRequestAsFollower."""
    core = KRaftCore(config(2), ElectionState(4, 1), Log(log_with((1, 3))), random.Random(2), 0,
                     snapshots=MemorySnapshots())
    resp, _ = fetch_snapshot(core, SnapshotId(3, 1), 0, replica=3)
    assert resp.partition_error == Errors.NOT_LEADER_OR_FOLLOWER
    assert resp.current_leader == LeaderIdAndEpoch(1, 4)


def test_fetch_snapshot_with_a_foreign_cluster_id_or_partition() -> None:
    """KafkaRaftClientSnapshotTest.testFetchSnapshotRequestClusterIdValidation and ...UnknownPartition."""
    core, sid, _ = snapshotted_leader()
    resp, _ = fetch_snapshot(core, sid, 0, cluster="other")
    assert (resp.error, resp.partition_error) == (Errors.INCONSISTENT_CLUSTER_ID, Errors.NONE)
    resp, _ = fetch_snapshot(core, sid, 0, cluster=None)  # a null id is accepted
    assert resp.records == SNAPSHOT_BYTES
    resp, _ = fetch_snapshot(core, sid, 0, valid_partition=False)
    assert (resp.error, resp.partition_error) == (Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION)
    assert resp.partition_name == ("other", 3)


# ============================================================================ the follower's download


def follower_told_to_fetch(sid: SnapshotId, batches: tuple[RecordBatch, ...] = (),
                           **kw: Any) -> tuple[KRaftCore, OutboundRequest]:
    """Node 2 following node 1 in epoch 4; its Fetch is answered with ``sid``; returns its FetchSnapshot."""
    core = KRaftCore(config(2, **kw), ElectionState(4, 1), Log(batches), random.Random(2), 0)
    ready = core.tick(1)
    (out,) = ready.send
    assert isinstance(out.request, FetchRequest)
    ready = core.step(ResponseReceived(1, FetchResponse(5, (), None, LeaderIdAndEpoch(1, 4), snapshot_id=sid),
                                       out.request_id), 2)
    assert ready.log_ops == []
    (req,) = ready.send
    assert isinstance(req.request, FetchSnapshotRequest)
    assert events(ready, "SendFetchSnapshotRequest")
    assert_trace_valid(ready)
    return core, req


def test_follower_downloads_in_chunks_and_installs_the_snapshot() -> None:
    """KafkaRaftClientSnapshotTest.testFetchResponseWithSnapshotId and testFetchSnapshotResponsePartialData."""
    sid = SnapshotId(5, 2)
    core, out = follower_told_to_fetch(sid, log_with((1, 2)), fetch_snapshot_max_bytes=300)
    store = MemorySnapshots()
    now, position = 3, 0
    while True:
        req = out.request
        assert isinstance(req, FetchSnapshotRequest)
        assert (req.snapshot_id, req.position, req.max_bytes, req.current_leader_epoch) == (sid, position, 300, 4)
        chunk = SNAPSHOT_BYTES[position:position + 300]
        resp = FetchSnapshotResponse(sid, LeaderIdAndEpoch(1, 4), len(SNAPSHOT_BYTES), position, chunk)
        ready = core.step(ResponseReceived(1, resp, out.request_id), now)
        assert_trace_valid(ready)
        for op in ready.log_ops:
            store.apply_op(op)
        assert ready.log_ops[0] == WriteSnapshotChunk(sid, position, chunk)
        position += len(chunk)
        (out,) = ready.send
        if position == len(SNAPSHOT_BYTES):
            break
        assert core.log.end_offset == 2 and len(ready.log_ops) == 1  # nothing installed before the last chunk
        assert core.status().snapshot_download == sid
        now += 1
    assert ready.log_ops[1:] == [InstallSnapshot(sid)]
    assert store.data(sid) == SNAPSHOT_BYTES  # the shell's copy, frozen
    (ev,) = events(ready, "HandleFetchSnapshotResponse")
    assert ev["snapshotId"] == {"endOffset": 5, "epoch": 2}
    assert ev["state"]["logStartOffset"] == ev["state"]["logEndOffset"] == 5
    assert ev["state"]["highWatermark"] == 5 and ev["state"]["lastFetchedEpoch"] == 2
    assert ready.high_watermark == 5  # Kafka: updateFollowerHighWatermark(log.highWatermark) after truncateFully
    assert core.latest_snapshot_id == sid and core.status().snapshot_download is None
    # The next request is a Fetch from the snapshot's end, naming its epoch.
    assert isinstance(out.request, FetchRequest)
    assert (out.request.fetch_offset, out.request.last_fetched_epoch) == (5, 2)


def test_follower_drops_the_download_when_the_leader_lost_the_snapshot() -> None:
    """KafkaRaftClientSnapshotTest.testFetchSnapshotResponseMissingSnapshot: back to Fetch."""
    sid = SnapshotId(5, 2)
    core, out = follower_told_to_fetch(sid)
    resp = FetchSnapshotResponse(None, LeaderIdAndEpoch(1, 4), partition_error=Errors.SNAPSHOT_NOT_FOUND)
    ready = core.step(ResponseReceived(1, resp, out.request_id), 3)
    assert ready.log_ops == [AbortSnapshotDownload(sid)]
    (nxt,) = ready.send
    assert isinstance(nxt.request, FetchRequest) and nxt.request.fetch_offset == 0
    assert isinstance(core.role, Follower) and core.role.fetch_deadline_ms == 3 + 2000  # resetFetchTimeout


def test_follower_ignores_a_chunk_of_another_snapshot_or_position() -> None:
    """KafkaRaftClientSnapshotTest.testFetchSnapshotResponseWithInvalidId: Kafka throws; the core ignores it."""
    sid = SnapshotId(5, 2)
    core, out = follower_told_to_fetch(sid)
    wrong = FetchSnapshotResponse(SnapshotId(6, 2), LeaderIdAndEpoch(1, 4), 10, 0, b"x" * 10)
    ready = core.step(ResponseReceived(1, wrong, out.request_id), 3)
    assert ready.log_ops == [] and core.status().snapshot_download == sid
    nxt = core.tick(3 + 20).send[0]  # after the retry backoff, the same chunk is asked again
    assert isinstance(nxt.request, FetchSnapshotRequest) and nxt.request.position == 0
    bad_position = FetchSnapshotResponse(sid, LeaderIdAndEpoch(1, 4), 10, 4, b"x" * 6)
    assert core.step(ResponseReceived(1, bad_position, nxt.request_id), 30).log_ops == []


def test_a_newer_epoch_during_the_download_drops_it() -> None:
    """KafkaRaftClientSnapshotTest.testFetchSnapshotResponseFromNewerEpochNotLeader: a new role, no download."""
    sid = SnapshotId(5, 2)
    core, out = follower_told_to_fetch(sid)
    resp = FetchSnapshotResponse(None, LeaderIdAndEpoch(3, 5), partition_error=Errors.FENCED_LEADER_EPOCH)
    ready = core.step(ResponseReceived(1, resp, out.request_id), 3)
    assert AbortSnapshotDownload(sid) in ready.log_ops
    assert isinstance(core.role, Follower) and core.role.leader_id == 3 and core.role.fetching_snapshot is None


def test_a_fetch_timeout_during_the_download_drops_it() -> None:
    sid = SnapshotId(5, 2)
    core, _ = follower_told_to_fetch(sid)
    ready = core.tick(2 + 2000)
    assert AbortSnapshotDownload(sid) in ready.log_ops and events(ready, "StartElection")


def test_installing_a_snapshot_below_the_high_watermark_is_a_safety_violation() -> None:
    core = KRaftCore(config(2), ElectionState(4, 1), Log(), random.Random(2), 0)
    (out,) = core.tick(1).send
    ready = core.step(ResponseReceived(1, FetchResponse(3, log_with((1, 3)), None, LeaderIdAndEpoch(1, 4)),
                                       out.request_id), 2)
    assert core.high_watermark == 3
    (out,) = ready.send
    ready = core.step(ResponseReceived(1, FetchResponse(3, (), None, LeaderIdAndEpoch(1, 4),
                                                        snapshot_id=SnapshotId(2, 1)), out.request_id), 4)
    (out,) = ready.send
    assert isinstance(out.request, FetchSnapshotRequest)
    with pytest.raises(SafetyViolation, match="CommittedNeverTruncated"):
        core.step(ResponseReceived(1, FetchSnapshotResponse(SnapshotId(2, 1), LeaderIdAndEpoch(1, 4), 4, 0, b"abcd"),
                                   out.request_id), 6)


def test_an_invalid_or_known_snapshot_id_starts_no_download() -> None:
    """KafkaRaftClientSnapshotTest.testFetchResponseWithInvalidSnapshotId."""
    core = KRaftCore(config(2), ElectionState(4, 1), Log(), random.Random(2), 0)
    out = core.tick(1).send[0]
    ready = core.step(ResponseReceived(1, FetchResponse(5, (), None, LeaderIdAndEpoch(1, 4),
                                                        snapshot_id=SnapshotId(-1, 2)), out.request_id), 2)
    assert isinstance(ready.send[0].request, FetchRequest) and core.status().snapshot_download is None


# ============================================================================ end to end: leader and follower cores


def exchange(a: KRaftCore, b: KRaftCore, now: int, rounds: int = 40) -> None:
    """Deliver every request between the two cores (and a tick) until nothing is left to say."""
    cores = {a.config.node_id: a, b.config.node_id: b}
    pending = [(a.config.node_id, r) for r in a.tick(now).send] + [(b.config.node_id, r) for r in b.tick(now).send]
    for _ in range(rounds):
        if not pending:
            return
        src, out = pending.pop(0)
        dst = cores.get(out.dest_id)
        if dst is None:
            continue
        ready = dst.step(RequestReceived(src, ("x", src), out.request), now)
        for rep in ready.replies:
            back = cores[src].step(ResponseReceived(out.dest_id, rep.response, out.request_id), now)
            pending += [(src, r) for r in back.send]
            store = cores[src].snapshots
            if isinstance(store, MemorySnapshots):
                for op in back.log_ops:
                    store.apply_op(op)
        pending += [(out.dest_id, r) for r in ready.send]


def test_a_follower_catches_up_through_a_snapshot_and_describe_quorum_agrees() -> None:
    store = MemorySnapshots()
    lead = committed_leader(4, log_with((1, 3), (2, 2)), store)
    sid = lead.snapshot_id_at(6)
    store.put(sid, SNAPSHOT_BYTES)
    lead.step(SnapshotWritten(sid), 30)
    lead.step(CleanLogTo(6), 31)
    lead.step(RequestReceived(9, "w", FetchRequest("cid", 2, 4, 6, 4)), 32)  # node 2 keeps up
    lead.step(ClientWrite((b"after",)), 33)
    follower_store = MemorySnapshots()
    foll = KRaftCore(config(3, fetch_snapshot_max_bytes=100, fetch_max_wait_ms=0), ElectionState(4, 1), Log(),
                     random.Random(3), 0, snapshots=follower_store)
    exchange(lead, foll, 40)
    assert follower_store.data(sid) == SNAPSHOT_BYTES  # downloaded in 8 chunks of at most 100 bytes
    assert (foll.log.start_offset, foll.log.end_offset) == (6, 7)
    assert [b.base_offset for b in foll.log.batches] == [6]
    lead.step(RequestReceived(2, "w2", FetchRequest("cid", 2, 4, 7, 4)), 41)
    exchange(lead, foll, 42)
    assert foll.high_watermark == lead.high_watermark == 7
    ready = lead.step(RequestReceived(-1, "dq", DescribeQuorumRequest()), 50)
    (r,) = ready.replies
    assert isinstance(r.response, DescribeQuorumResponse)
    assert {v.replica_id: v.log_end_offset for v in r.response.voters} == {1: 7, 2: 7, 3: 7}
    assert r.response.high_watermark == 7


# ============================================================================ restart and cluster id


def test_restart_from_a_snapshot() -> None:
    sid = SnapshotId(5, 2)
    log = Log([data_batch(5, 4, [b"lc"])], start=sid)
    core, ready = KRaftCore.restart(config(2), ElectionState(4, 1), log, random.Random(2), 0,
                                    snapshot_ids=[SnapshotId(3, 1), sid])
    (ev,) = events(ready, "Restart")
    assert ev["snapshotId"] == {"endOffset": 5, "epoch": 2}
    assert ev["state"]["logStartOffset"] == 5 and ev["state"]["highWatermark"] == 5
    assert_trace_valid(ready)
    assert ready.log_ops == [] and core.latest_snapshot_id == sid
    (out,) = ready.send
    assert isinstance(out.request, FetchRequest)
    assert (out.request.fetch_offset, out.request.last_fetched_epoch) == (6, 4)


def test_restart_with_a_snapshot_past_the_log_empties_the_log() -> None:
    """Kafka's KafkaMetadataLog.apply -> truncateToLatestSnapshot: crashed after the download's freeze."""
    core, ready = KRaftCore.restart(config(2), ElectionState(4, 1), Log(log_with((1, 3))), random.Random(2), 0,
                                    snapshot_ids=[SnapshotId(8, 3)])
    assert ready.log_ops == [InstallSnapshot(SnapshotId(8, 3))]
    assert (core.log.start_offset, core.log.end_offset, core.last_epoch, core.high_watermark) == (8, 8, 3, 8)


def test_an_unformatted_follower_adopts_the_cluster_id_of_an_installed_snapshot() -> None:
    sid = SnapshotId(5, 2)
    core, out = follower_told_to_fetch(sid, cluster_id=None)
    ready = core.step(ResponseReceived(1, FetchSnapshotResponse(sid, LeaderIdAndEpoch(1, 4), 3, 0, b"abc"),
                                       out.request_id), 3)
    assert InstallSnapshot(sid) in ready.log_ops and core.cluster_id is None
    ready = core.step(SnapshotLoaded(sid, "the-cluster"), 4)
    assert ready.cluster_id_adopted == "the-cluster" and core.cluster_id == "the-cluster"
    with pytest.raises(SafetyViolation, match="ClusterIdIsolation"):
        core.step(SnapshotLoaded(sid, "another"), 5)


# ============================================================================ snapshots off: as before


def test_without_snapshots_nothing_changes() -> None:
    core = committed_leader(4, log_with((1, 3), (2, 2)))
    resp = fetch(core, 3, 0, 0)
    assert resp.snapshot_id is None and resp.log_start_offset == 0 and len(resp.batches) == 6
    ready = core.step(RequestReceived(3, "fs", FetchSnapshotRequest("cid", 3, 4, SnapshotId(5, 2), 0)), 20)
    assert ready.replies[0].response.partition_error == Errors.SNAPSHOT_NOT_FOUND  # no SnapshotSource
    assert all("logStartOffset" not in e["state"] for e in ready.trace)
    assert core.step(CleanLogTo(3), 21).log_ops == []


# ============================================================================ the wire (wire.py, typed_wire.py)


def test_fetch_snapshot_is_advertised_and_round_trips_on_the_wire() -> None:
    assert wire.SERVED_API_VERSIONS[wire.FETCH_SNAPSHOT] == (0, 1)
    req = FetchSnapshotRequest("cid", 2, 4, SnapshotId(5, 2), 300, 1000)
    resp = FetchSnapshotResponse(SnapshotId(5, 2), LeaderIdAndEpoch(1, 4), 768, 300, b"\x01\x02\x03")
    err = FetchSnapshotResponse(None, LeaderIdAndEpoch(1, 4), partition_error=Errors.POSITION_OUT_OF_RANGE)
    for version in (0, 1):
        body = codec.decode_request(codec.encode_request(59, version, 7, "c", wire.request_to_body(req, version))[4:])
        assert wire.request_from_kafka(59, version, body[1]) == req
        assert wire.sender_of(req) == 2
        for r in (resp, err):
            payload = codec.frame_response(59, version, 7, codec.encode_response_body(
                59, version, wire.response_to_body(r, version, {})))[4:]
            assert wire.response_from_kafka(59, version, codec.decode_response(59, version, payload)[1]) == r
    foreign = wire.request_to_body(req, 1)
    foreign["Topics"][0]["Name"] = "other"
    parsed = wire.request_from_kafka(59, 1, foreign)
    assert isinstance(parsed, FetchSnapshotRequest) and not parsed.valid_partition
    top = wire.response_to_body(FetchSnapshotResponse(error=Errors.INCONSISTENT_CLUSTER_ID), 1, {})
    assert top == {"ThrottleTimeMs": 0, "ErrorCode": int(Errors.INCONSISTENT_CLUSTER_ID), "Topics": []}


@pytest.mark.parametrize("version", list(BOUND_VERSIONS))
def test_a_fetch_answer_with_a_snapshot_id_reads_the_same_on_both_paths(version: int) -> None:
    resp = FetchResponse(5, (), None, LeaderIdAndEpoch(1, 4), log_start_offset=5, snapshot_id=SnapshotId(5, 2))
    tc = TypedCodec()
    body = tc.encode_response_body(version, resp, {})
    assert body == codec.encode_response_body(1, version, wire.response_to_body(resp, version, {}))
    payload = codec.frame_response(1, version, 3, body)[4:]
    _, typed = tc.decode_response(1, version, payload)
    _, plain = codec.decode_response(1, version, payload)
    assert wire.response_from_kafka(1, version, typed) == wire.response_from_kafka(1, version, plain) == resp
    assert (tc.bound, tc.fallbacks) == (2, 0)


def test_a_follower_that_installed_a_snapshot_leads_from_its_end() -> None:
    """After an install the log starts at the snapshot: elected, the new leader appends its LeaderChange there,
    publishes HW -1 until that commits (KIP-595), and DescribeQuorum counts from the snapshot's end."""
    sid = SnapshotId(5, 2)
    core, out = follower_told_to_fetch(sid)
    core.snapshots = MemorySnapshots()
    ready = core.step(ResponseReceived(1, FetchSnapshotResponse(sid, LeaderIdAndEpoch(1, 4), 3, 0, b"abc"),
                                       out.request_id), 3)
    for op in ready.log_ops:
        core.snapshots.apply_op(op)
    ready = core.tick(3 + 2000)  # the leader is gone: fetch timeout, election in epoch 5
    (vote, _) = sorted(ready.send, key=lambda o: o.dest_id)
    assert isinstance(vote.request, VoteRequest)
    assert (vote.request.last_offset, vote.request.last_offset_epoch) == (5, 2)
    core.step(ResponseReceived(vote.dest_id, VoteResponse(-1, 5, True), vote.request_id), 2004)
    assert isinstance(core.role, Leader) and core.log.end_offset == 6 and core.log.start_offset == 5
    dq = core.step(RequestReceived(-1, "dq", DescribeQuorumRequest()), 2005).replies[0].response
    assert isinstance(dq, DescribeQuorumResponse) and dq.high_watermark == -1
    assert {v.replica_id: v.log_end_offset for v in dq.voters} == {1: -1, 2: 6, 3: -1}
    assert fetch(core, 3, 0, 0, now=2006).snapshot_id == sid  # an empty follower is sent the snapshot
    resp = fetch(core, 1, 5, 2, now=2007)  # the old leader had the snapshot's records: it gets the LeaderChange
    assert [b.base_offset for b in resp.batches] == [5]
    fetch(core, 1, 6, 5, now=2008)
    dq = core.step(RequestReceived(-1, "dq2", DescribeQuorumRequest()), 2009).replies[0].response
    assert isinstance(dq, DescribeQuorumResponse) and dq.high_watermark == 6 == core.high_watermark
    assert {v.replica_id: v.log_end_offset for v in dq.voters} == {1: 6, 2: 6, 3: -1}
