"""Core tests: ``controller.quorum.append.linger.ms`` — a leader batches client writes.

No seed KIP specifies the linger; the behaviour follows Kafka's BatchAccumulator (KafkaRaftClient):
the linger timer starts with the first held-back write, everything held then goes as one batch, a write
that would overflow the batch size sends the held batch at once, and one write's records always share a
batch. Offsets are known when the write is accepted. Time is the ``now_ms`` argument only.
"""

from __future__ import annotations

import random

import pytest
from kraft_tck.reference.core import RECORD_SIZE_BOUND, CoreConfig, KRaftCore, write_size_bound
from kraft_tck.reference.io import (
    AppendBatches,
    ClientWrite,
    ElectionState,
    Ready,
    RequestReceived,
    ResponseReceived,
)
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import FetchRequest, FetchResponse, LeaderIdAndEpoch, VoteResponse
from kraft_tck.reference.roles import Follower, Leader
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import HEADER_SIZE, data_batch, encode_batch

VOTERS = frozenset({1, 2, 3})
VALUE = b"v" * 20
ONE = write_size_bound((VALUE,))  # the size one single-record write counts for


def leader(linger_ms: int, max_batch_bytes: int = 8 * 1024 * 1024) -> KRaftCore:
    cfg = CoreConfig(1, VOTERS, "cid", append_linger_ms=linger_ms, append_max_batch_bytes=max_batch_bytes)
    core = KRaftCore(cfg, ElectionState(3, -1, 1), Log(), random.Random(1), 0)
    core.step(ResponseReceived(2, VoteResponse(-1, 3, True)), 0)
    assert isinstance(core.role, Leader) and core.log.end_offset == 1  # the LeaderChange record
    return core


def appended(ready: Ready) -> list[tuple[int, int]]:
    """(base offset, last offset) of every batch the step appended."""
    return [(b.base_offset, b.last_offset) for op in ready.log_ops if isinstance(op, AppendBatches) for b in op.batches]


# (linger ms, max batch bytes, script, batches appended at each step). A script step is
# ("write", now, record count) or ("tick", now).
MAX = 8 * 1024 * 1024
CASES = [
    pytest.param(0, MAX, [("write", 0, 1), ("write", 0, 2), ("tick", 5)], [[(1, 1)], [(2, 3)], []],
                 id="no linger: each write is its own batch, at once"),
    pytest.param(10, MAX, [("write", 0, 1), ("write", 3, 2), ("tick", 9), ("write", 9, 1), ("tick", 10)],
                 [[], [], [], [], [(1, 4)]], id="linger: held writes go as one batch when the linger ends"),
    pytest.param(10, MAX,
                 [("write", 2, 1), ("write", 11, 1), ("tick", 12), ("write", 13, 1), ("tick", 22), ("tick", 23)],
                 [[], [], [(1, 2)], [], [], [(3, 3)]],
                 id="the linger runs from the first held write, not the last"),
    pytest.param(10, MAX, [("write", 0, 1), ("tick", 30)], [[], [(1, 1)]],
                 id="a late timer still drains (the shell may tick late)"),
    pytest.param(10, HEADER_SIZE + 2 * ONE, [("write", 0, 1), ("write", 1, 1), ("write", 2, 1), ("tick", 12)],
                 [[], [], [(1, 2)], [(3, 3)]],
                 id="a write that would overflow the batch sends the held batch at once"),
    pytest.param(10, HEADER_SIZE + 3 * ONE, [("write", 0, 1), ("write", 1, 3), ("tick", 10), ("tick", 11)],
                 [[], [(1, 1)], [], [(2, 4)]],
                 id="one write's records share a batch; the new batch lingers from its own first write"),
]


@pytest.mark.parametrize(("linger", "max_bytes", "script", "expected"), CASES)
def test_linger_batches_client_writes(
    linger: int, max_bytes: int, script: list[tuple[object, ...]], expected: list[list[tuple[int, int]]]
) -> None:
    core = leader(linger, max_bytes)
    results = []
    got: list[list[tuple[int, int]]] = []
    for step in script:
        if step[0] == "write":
            _, now, count = step
            ready = core.step(ClientWrite((VALUE,) * int(str(count))), int(str(now)))
            assert ready.client_append is not None and ready.client_append.accepted
            results.append(ready.client_append)
        else:
            ready = core.tick(int(str(step[1])))
        got.append(appended(ready))
        # The trace names the append when it happens: one ClientAppend per batch that reached the log.
        assert [e["event"] for e in ready.trace].count("ClientAppend") == len(appended(ready))
    assert got == expected
    # The offsets each write was promised are where its records landed, all in the leader's epoch.
    for r in results:
        assert core.log.epoch_of(r.base_offset) == core.log.epoch_of(r.last_offset) == r.epoch == 3
    assert [(r.base_offset, r.last_offset) for r in results] == [
        (b, b + n - 1) for b, n in _promised([int(str(s[2])) for s in script if s[0] == "write"])
    ]


def _promised(counts: list[int]) -> list[tuple[int, int]]:
    out, base = [], 1
    for n in counts:
        out.append((base, n))
        base += n
    return out


def test_the_next_deadline_is_the_end_of_the_linger() -> None:
    core = leader(10)
    ready = core.step(ClientWrite((VALUE,)), 4)
    assert ready.next_deadline_ms == 14 and core.next_append_offset == 2 and core.log.end_offset == 1
    assert core.step(ClientWrite((VALUE,)), 6).next_deadline_ms == 14


def test_held_records_are_not_served_to_followers_until_appended() -> None:
    """Only appended records replicate: a fetch during the linger sees the log without them."""
    core = leader(10)
    core.step(ClientWrite((VALUE,)), 1)
    ready = core.step(RequestReceived(2, "r", FetchRequest("cid", 2, 3, 0, 0)), 2)
    (reply,) = ready.replies
    assert isinstance(reply.response, FetchResponse)
    assert [b.last_offset for b in reply.response.batches] == [0]  # the LeaderChange record only
    # The batch that drains later carries the bytes the log keeps (encoded once, reused by Fetch).
    ready = core.tick(11)
    (op,) = ready.log_ops
    assert isinstance(op, AppendBatches) and op.encoded == (encode_batch(op.batches[0]),)


def test_losing_leadership_drops_held_writes() -> None:
    """Like Kafka's accumulator of a lost epoch: held-back writes are never appended."""
    core = leader(10)
    result = core.step(ClientWrite((VALUE,)), 1).client_append
    assert result is not None and result.accepted and result.base_offset == 1
    # A newer leader's fetch response: this node follows it.
    fenced = FetchResponse(partition_error=Errors.FENCED_LEADER_EPOCH, current_leader=LeaderIdAndEpoch(2, 4))
    core.step(ResponseReceived(2, fenced), 2)
    assert isinstance(core.role, Follower) and core.epoch == 4
    ready = core.tick(20)
    assert appended(ready) == [] and core.log.end_offset == 1 and core.next_append_offset == 1


def test_a_write_larger_than_a_batch_is_refused_naming_the_limit() -> None:
    core = leader(10, HEADER_SIZE + 2 * ONE)
    with pytest.raises(ValueError, match="append_max_batch_bytes"):
        core.step(ClientWrite((VALUE,) * 3), 1)


def test_the_size_bound_covers_the_encoded_records() -> None:
    """``write_size_bound`` must never undercount, or a "full" batch could exceed the limit."""
    for n, size in [(1, 0), (1, 100), (300, 100), (5000, 7), (3, 70_000)]:
        values = tuple(b"x" * size for _ in range(n))
        assert len(encode_batch(data_batch(0, 1, values))) <= HEADER_SIZE + write_size_bound(values)
    assert RECORD_SIZE_BOUND >= 7  # the smallest record (spec.records.MIN_RECORD_SIZE)


def test_config_refuses_a_batch_limit_below_one_record() -> None:
    with pytest.raises(ValueError, match="append_max_batch_bytes"):
        CoreConfig(1, VOTERS, append_max_batch_bytes=10)


def test_a_long_poll_expiring_as_the_linger_ends_is_answered_with_the_new_batch() -> None:
    """One tick ends both the linger and a parked fetch's MaxWaitMs: the batch is appended first, so the
    expiring fetch gets it. Its answer shows the state at the end of the step, where the node's trace puts
    it (a step's lines before its answers); tla/KRaft.tla's AnswerParkedFetch answers from the log of that
    moment. The other order answered it empty after a ClientAppend of the same step (a CI trace-validation
    failure of test_silent_broker_is_fenced_after_the_session_timeout)."""
    core = leader(100)
    parked = core.step(RequestReceived(2, "r", FetchRequest("cid", 2, 3, 1, 3, max_wait_ms=100)), 10)
    assert parked.replies == []  # caught up: parked until 110
    core.step(ClientWrite((VALUE,)), 10)  # held until the linger ends, also at 110
    ready = core.tick(110)
    assert appended(ready) == [(1, 1)]
    (r,) = ready.replies
    assert r.reply_to == "r" and isinstance(r.response, FetchResponse)
    assert [(b.base_offset, b.last_offset) for b in r.response.batches] == [(1, 1)]
