"""A DivergingEpoch end offset inside a batch (only a faulty leader names one): the follower cuts the whole
batch, as Kafka's log does (``UnifiedLog.truncateTo`` → ``LogSegment.truncateTo`` cuts at the first batch
whose last offset reaches the target), and refuses the answer instead when that would remove committed
entries (``KafkaRaftClient.handleFetchResponse`` throws on a truncation below the high watermark)."""

from __future__ import annotations

import random

import pytest
from kraft_tck.reference.core import CoreConfig, KRaftCore, SafetyViolation
from kraft_tck.reference.io import ElectionState, ResponseReceived, TruncateTo
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import FetchResponse, LeaderIdAndEpoch
from kraft_tck.spec.records import data_batch

# epoch 1: one batch [0..2]; epoch 3: one batch [3..4]
LOG = (data_batch(0, 1, [b"a", b"b", b"c"]), data_batch(3, 3, [b"d", b"e"]))
LEADER = LeaderIdAndEpoch(1, 4)


def follower() -> KRaftCore:
    """Node 2, Follower of leader 1 in epoch 4, holding LOG."""
    config = CoreConfig(2, frozenset({1, 2, 3}), "cid", election_timeout_ms=1000, fetch_timeout_ms=2000)
    return KRaftCore(config, ElectionState(4, 1), Log(LOG), random.Random(2), 0)


@pytest.mark.parametrize(("diverging", "end"), [((3, 4), 3), ((1, 2), 0), ((3, 3), 3), ((1, 1), 0)])
def test_a_point_inside_a_batch_cuts_the_whole_batch(diverging: tuple[int, int], end: int) -> None:
    core = follower()
    ready = core.step(ResponseReceived(1, FetchResponse(0, (), diverging, LEADER)), 5)
    assert core.log.end_offset == end
    assert [op.offset for op in ready.log_ops if isinstance(op, TruncateTo)] == [end]
    assert ready.trace[-1]["state"]["logEndOffset"] == end
    assert [b.base_offset for b in core.log.batches] == [b.base_offset for b in LOG if b.base_offset < end]


def test_a_point_inside_a_batch_whose_start_is_committed_is_refused() -> None:
    """HW 4: the batch [3..4] holds committed offset 3; cutting it at 3 would remove it, so the core refuses
    the answer (SafetyViolation, which reference/node.py logs and drops), though the point named, 4, is not
    below the HW."""
    core = follower()
    core.step(ResponseReceived(1, FetchResponse(4, (), None, LEADER)), 5)
    assert core.high_watermark == 4
    with pytest.raises(SafetyViolation, match=r"CommittedNeverTruncated.*offset 3, below its high watermark 4"):
        core.step(ResponseReceived(1, FetchResponse(4, (), (3, 4), LEADER)), 6)
    assert core.log.end_offset == 5  # nothing was cut
