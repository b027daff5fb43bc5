"""reference/log.py: the core's in-memory log and its epoch cache (KIP-595 Fetch Request Handling step 3)."""

from __future__ import annotations

import dataclasses

import pytest
from kraft_tck.reference.log import Log, LogError
from kraft_tck.spec.records import RecordBatch, data_batch

# epoch 1: offsets 0-2 (one batch of 3), epoch 3: 3-4 (two batches), epoch 4: 5
LOG = (
    data_batch(0, 1, [b"a", b"b", b"c"]),
    data_batch(3, 3, [b"d"]),
    data_batch(4, 3, [b"e"]),
    data_batch(5, 4, [b"f"]),
)


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [(0, (0, 0)), (1, (1, 3)), (2, (1, 3)), (3, (3, 5)), (4, (4, 6)), (9, (4, 6)), (-1, (-1, 0))],
)
def test_epoch_end_offset_is_the_largest_epoch_not_above_with_its_end(
    epoch: int, expected: tuple[int, int]
) -> None:
    assert Log(LOG).epoch_end_offset(epoch) == expected


def test_empty_log() -> None:
    log = Log()
    assert (log.end_offset, log.last_fetched_epoch, log.epoch_end_offset(3)) == (0, -1, (-1, 0))


def test_truncation_drops_epochs_and_batches() -> None:
    log = Log(LOG)
    log.truncate_to(4)
    assert (log.end_offset, log.last_fetched_epoch, [e.epoch for e in log.epoch_cache]) == (4, 3, [1, 3])
    log.truncate_to(3)
    assert (log.end_offset, log.last_fetched_epoch) == (3, 1)
    log.truncate_to(10)  # beyond the end: nothing to do
    assert log.end_offset == 3


@pytest.mark.parametrize(("offset", "end"), [(1, 0), (2, 0), (3, 3), (4, 4), (5, 5)])
def test_truncation_inside_a_batch_removes_the_whole_batch(offset: int, end: int) -> None:
    """Kafka's ``LogSegment.truncateTo`` cuts at the first batch whose last offset is at or beyond the
    target: a point inside a batch removes that whole batch (here [0..2]), never a part of it."""
    log = Log(LOG)
    assert log.batch_start_at_or_below(offset) == end
    assert log.truncate_to(offset) == end
    assert (log.end_offset, len(log)) == (end, sum(b.base_offset < end for b in LOG))
    assert log.last_fetched_epoch == (log.batches[-1].partition_leader_epoch if end else -1)
    log.append([data_batch(end, 5, [b"z"])])  # the log goes on from the batch boundary
    assert log.end_offset == end + 1


def test_truncation_to_a_negative_offset_is_refused() -> None:
    with pytest.raises(LogError, match="negative offset"):
        Log(LOG).truncate_to(-1)


@pytest.mark.parametrize(
    ("batch", "match"),
    [
        (data_batch(7, 4, [b"x"]), "does not continue"),
        (data_batch(6, 2, [b"x"]), "below the log's last epoch"),
    ],
)
def test_append_refuses_gaps_and_older_epochs(batch: RecordBatch, match: str) -> None:
    with pytest.raises(LogError, match=match):
        Log(LOG).append([batch])


def test_read_returns_whole_batches_up_to_max_bytes_but_at_least_one() -> None:
    log = Log(LOG)
    assert [b.base_offset for b in log.read(3, 1 << 20)] == [3, 4, 5]
    assert [b.base_offset for b in log.read(3, 1)] == [3]
    assert [b.base_offset for b in log.read(1, 1)] == [0]  # inside a batch: that whole batch, like Kafka
    assert log.read(6, 100) == ()


def test_each_batch_is_encoded_once_and_its_digest_comes_from_those_bytes() -> None:
    """The log keeps each batch's bytes: given ones are kept as they are, missing ones are encoded on first
    use; the trace digest computed from them equals spec.records.batch_digest."""
    from kraft_tck.spec.records import batch_digest, encode_batch

    given = encode_batch(LOG[0])
    log = Log(LOG[:1], [given])
    log.append(LOG[1:])
    assert log.encoded_at(0) is given
    assert [log.encoded_at(i) for i in range(len(log))] == [encode_batch(b) for b in LOG]
    assert [log.digest_at(i) for i in range(len(log))] == [batch_digest(b) for b in LOG]
    assert log.read_encoded(3, 1 << 20) == (LOG[1:], tuple(encode_batch(b) for b in LOG[1:]))
    with pytest.raises(LogError, match="encoded forms"):
        log.append([data_batch(6, 4, [b"g"])], [b"x", b"y"])


def test_read_counts_encoded_bytes_against_max_bytes() -> None:
    from kraft_tck.spec.records import encode_batch

    log = Log(LOG)
    two = len(encode_batch(LOG[1])) + len(encode_batch(LOG[2]))
    assert [b.base_offset for b in log.read(3, two)] == [3, 4]
    assert [b.base_offset for b in log.read(3, two - 1)] == [3]


def _state(log: Log) -> tuple:
    """Everything a Log keeps, as seen through its queries (and its held bytes)."""
    return (log.batches, [log.encoded_at(i) for i in range(len(log))], log.epoch_cache, log.end_offset,
            log.last_fetched_epoch, list(log.control_batches()), log.held_bytes, log.held_from)


@pytest.mark.parametrize("with_bytes", [True, False])
def test_one_batch_appends_keep_what_one_call_keeps(with_bytes: bool) -> None:
    """Log.append's one-batch path (a commit's: same epoch as the log's last batch) against the loop: control and
    data batches, epoch changes, with and without their bytes; a bad single batch is refused with the loop's
    error and changes nothing."""
    from kraft_tck.spec.records import encode_batch

    batches, off = [], 0
    for i in range(12):
        b = data_batch(off, 1 + i // 4, [bytes([i]) * (10 + i)] * (1 + i % 3))
        if i % 4 == 2:  # a control batch inside an epoch (one-batch path) and one at an epoch's start (the loop)
            b = dataclasses.replace(b, is_control=True)
        if i == 4:
            b = dataclasses.replace(b, is_control=True)
        batches.append(b)
        off = b.last_offset + 1
    one, whole = Log(), Log()
    for b in batches:
        one.append((b,), (encode_batch(b),) if with_bytes else None)
    whole.append(batches, [encode_batch(b) for b in batches] if with_bytes else None)
    assert _state(one) == _state(whole)
    assert len(one.epoch_cache) == 3 and len(list(one.control_batches())) == 4
    before = _state(one)
    for bad, problem in [(data_batch(off + 1, 3, [b"x"]), "does not continue"),
                         (data_batch(off, 2, [b"x"]), "below the log's last epoch"),
                         (dataclasses.replace(data_batch(off, 3, [b"x"]), records=()), "empty batch")]:
        with pytest.raises(LogError, match=problem):
            one.append((bad,), (b"",) if with_bytes else None)
    with pytest.raises(LogError, match="1 batches but 2 encoded forms"):
        one.append((data_batch(off, 3, [b"x"]),), (b"a", b"b"))
    assert _state(one) == before


def test_iter_sized_and_epoch_end_offset_answer_as_a_walk_of_the_log() -> None:
    """The last-batch answer of iter_sized and the latest-epoch answer of epoch_end_offset (a commit's and a
    follower's Fetch's) against a walk of the batches, for every range and epoch."""
    from kraft_tck.spec.records import encode_batch

    batches, off = [], 0
    for i in range(9):
        b = data_batch(off, 2 + i // 3 * 2, [bytes([i]) * (5 + 7 * i)] * (1 + i % 2))
        batches.append(b)
        off = b.last_offset + 1
    log = Log(batches)
    for start in range(off + 1):
        for until in range(off + 2):
            expected = [(b, len(encode_batch(b))) for b in batches
                        if start < until and b.last_offset >= start and b.base_offset < until]
            assert list(log.iter_sized(start, until)) == expected, (start, until)
    for epoch in range(-1, 10):
        known = [b for b in batches if b.partition_leader_epoch <= epoch]
        if not known:
            expected_end = (epoch, 0)
        else:
            e = known[-1].partition_leader_epoch
            later = [b.base_offset for b in batches if b.partition_leader_epoch > e]
            expected_end = (e, later[0] if later else off)
        assert log.epoch_end_offset(epoch) == expected_end, epoch
