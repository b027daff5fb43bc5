"""reference/log.py with a cold store: released batches are read back from real segment files, and every
answer the core gets is the one a log holding everything in memory gives (the core stays deterministic).

The cold store is the node's own ``LogDir``, kept in step with the log as ``Node._apply`` keeps it: each
append or truncation goes to both, then the log may release. (fsync is off here: durability is
test_storage's subject; these tests are about which bytes come back.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraft_tck.reference.log import Log, LogError
from kraft_tck.reference.storage import LogDir
from kraft_tck.spec.records import RecordBatch, data_batch


class Mirrored:
    """A log with a cold store, and a log that keeps everything: the model it must agree with."""

    def __init__(self, d: Path, segment_bytes: int = 2048) -> None:
        self.disk = LogDir.open(d, segment_bytes=segment_bytes, index_interval_bytes=256, fsync=False)
        self.log = Log(cold=self.disk)
        self.model = Log()

    def append(self, batches: list[RecordBatch]) -> None:
        self.log.append(batches)
        self.model.append(batches)
        self.disk.append(batches, [self.log.encoded_at(i) for i in range(len(self.log) - len(batches), len(self.log))])
        self.disk.flush()

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self.model.truncate_to(offset)
        self.disk.truncate_to(offset)

    def agree(self) -> None:
        log, model = self.log, self.model
        assert (log.end_offset, log.last_fetched_epoch, log.epoch_cache, len(log)) == (
            model.end_offset, model.last_fetched_epoch, model.epoch_cache, len(model))
        assert log.batches == model.batches
        for offset in range(model.end_offset + 1):
            assert log.epoch_of(offset) == model.epoch_of(offset)
        for i in range(len(model)):
            assert log.encoded_at(i) == model.encoded_at(i)


def batches_from(end: int, epoch: int, sizes: list[int]) -> list[RecordBatch]:
    out = []
    for n in sizes:
        out.append(data_batch(end, epoch, [bytes([end % 251]) * 40] * n))
        end += n
    return out


def test_a_released_batch_is_read_back_from_the_segment_files(tmp_path: Path) -> None:
    m = Mirrored(tmp_path)
    m.append(batches_from(0, 1, [2, 1, 3, 1]))
    m.append(batches_from(7, 2, [1, 2]))
    assert m.log.release(0) == 6 and m.log.held_bytes == 0 and m.log.held_from == m.log.end_offset == 10
    m.agree()
    # A read among released batches stops where the held ones begin (here: none are held, so the end).
    assert m.log.read_encoded(1, 1 << 20) == m.model.read_encoded(1, 1 << 20)
    m.append(batches_from(10, 2, [1]))
    assert m.log.held_from == 10
    assert [b.base_offset for b in m.log.read(0, 1 << 20)] == [0, 2, 3, 6, 7, 8]  # the released ones only
    assert [b.base_offset for b in m.log.read(10, 1 << 20)] == [10]


def test_release_keeps_the_newest_bytes_and_acts_only_past_twice_the_budget(tmp_path: Path) -> None:
    m = Mirrored(tmp_path, segment_bytes=1 << 20)
    keep = 2000
    peak = 0
    for _ in range(1000):
        m.append(batches_from(m.log.end_offset, 1, [1]))
        m.log.release(keep)
        peak = max(peak, m.log.held_bytes)
    size = len(m.log.encoded_at(len(m.log) - 1))
    assert keep < peak <= 2 * keep + size  # bounded by the budget, not by the 1,000 batches written
    assert 1000 * size > 10 * peak
    m.agree()


def test_truncation_below_the_held_batches_and_appends_after_it(tmp_path: Path) -> None:
    m = Mirrored(tmp_path)
    m.append(batches_from(0, 1, [1] * 20))
    m.log.release(0)
    m.append(batches_from(20, 2, [1] * 5))
    m.truncate_to(12)  # below the first held batch (20): everything held goes, and some released ones
    assert (m.log.held_from, m.log.held_bytes) == (12, 0)
    m.append(batches_from(12, 3, [2, 2]))
    m.agree()
    assert m.log.truncate_to(13) == 12  # inside batch [12..13]: the whole batch goes, as in Kafka's log
    m.model.truncate_to(12)
    m.disk.truncate_to(12)
    m.agree()


def test_a_log_without_a_cold_store_refuses_to_release() -> None:
    log = Log(batches_from(0, 1, [1, 1]))
    with pytest.raises(LogError, match="no cold store"):
        log.release(0)


def test_a_cold_store_that_lacks_a_released_batch_is_a_loud_error(tmp_path: Path) -> None:
    """The shell must write a batch before the log releases it; if not, the read names the offset."""
    empty = LogDir.open(tmp_path, fsync=False)
    log = Log(batches_from(0, 1, [1, 1]), cold=empty)
    log.release(0)
    with pytest.raises(LogError, match="cold store returned nothing for the released batch at offset 0"):
        log.read(0, 100)


op = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2), st.lists(st.integers(1, 3), min_size=1, max_size=4)),
    st.tuples(st.just("release"), st.sampled_from([0, 60, 200, 10_000])),
    st.tuples(st.just("truncate"), st.integers(0, 40)),
    st.tuples(st.just("read"), st.integers(0, 40), st.sampled_from([0, 100, 300, 1 << 20])),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=30))
def test_random_appends_releases_truncations_and_reads_agree_with_an_all_in_memory_log(ops: list[tuple]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        m = Mirrored(Path(d))
        for o in ops:
            if o[0] == "append":
                m.append(batches_from(m.log.end_offset, max(1, m.log.last_fetched_epoch) + o[1], o[2]))
            elif o[0] == "release":
                m.log.release(o[1])
            elif o[0] == "truncate":
                bases = [b.base_offset for b in m.model.batches if b.base_offset >= o[1]]
                if bases:
                    m.truncate_to(bases[0])  # a batch boundary, as the protocol's truncations are
            else:
                offset, max_bytes = o[1], o[2]
                got, want = m.log.read_encoded(offset, max_bytes), m.model.read_encoded(offset, max_bytes)
                # The same batches from the start; a read from released ones may stop earlier, where the
                # held ones begin (the follower then asks again from there).
                assert got[0] == want[0][: len(got[0])] and got[1] == want[1][: len(got[1])]
                assert bool(got[0]) == bool(want[0])
                if want[0] and want[0][0].base_offset >= m.log.held_from:
                    assert got == want
        m.agree()


def _walk(batches: list[RecordBatch], offset: int, max_bytes: int) -> tuple[tuple, tuple]:
    """``read_encoded`` by its definition, batch by batch: the batch holding ``offset``, then whole batches while
    their encoded sizes fit ``max_bytes`` (at least one)."""
    from kraft_tck.spec.records import encode_batch

    out: list[RecordBatch] = []
    used = 0
    for b in batches:
        if b.last_offset < offset:
            continue
        used += len(encode_batch(b))
        if out and used > max_bytes:
            break
        out.append(b)
    return tuple(out), tuple(encode_batch(b) for b in out)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(1, 4), min_size=1, max_size=8), st.integers(0, 2), st.integers(0, 8),
       st.sampled_from([0, 100, 1 << 20]), st.booleans(), st.booleans())
def test_a_read_from_the_last_batch_is_the_batch_walk(sizes: list[int], epoch_step: int, release_at: int,
                                                      max_bytes: int, encoded_now: bool, release_last: bool) -> None:
    """A Fetch at the log's last batch (how the leader answers a parked Fetch after a client write) reads that
    batch alone, with its bytes, as the general walk does: held or released, its bytes given at the append or
    encoded on first use, from every offset inside it."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        m = Mirrored(Path(d))
        bs = batches_from(0, 1, sizes[:-1]) if len(sizes) > 1 else []
        if bs:
            m.append(bs)
        end = bs[-1].last_offset + 1 if bs else 0
        last = batches_from(end, 1 + epoch_step, sizes[-1:])
        m.log.release(release_at)
        if encoded_now:
            m.append(last)  # (Mirrored asks the log for the bytes: encoded at once)
            if release_last:
                m.log.release(0)  # nothing held: read back from the segment files
        else:
            m.log.append(last)
            m.model.append(last)
        every = bs + last
        for offset in range(last[0].base_offset, last[0].last_offset + 1):
            for log in (m.log, m.model):
                assert log.read_encoded(offset, max_bytes) == _walk(every, offset, max_bytes)
        assert m.log.read_encoded(m.log.end_offset, max_bytes) == ((), ())
        for offset in range(0, end):  # and the walk from earlier batches still reaches it
            got, want = m.log.read_encoded(offset, 1 << 20), _walk(every, offset, 1 << 20)
            assert got[0] == want[0][: len(got[0])] and got[1] == want[1][: len(got[1])] and got[0]
