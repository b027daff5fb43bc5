"""The commit path's shortcuts give the answers of the plain reads they replace.

Every node applies the committed prefix to its broker registry on every high-watermark move
(``BrokerDriver.commit``). The node reads it with ``Log.iter_sized(from, until)``: only the batches below the high
watermark (a leader may hold thousands uncommitted), each with the length of its kept bytes instead of a size
recomputed from its records. These tests hold that read to ``iter_batches`` + ``batch_size``, on a log whose older
batches were released to its segment files, and the driver's result to the one it gives without the shortcut."""

from __future__ import annotations

import uuid
from pathlib import Path

from kraft_tck.reference.broker_driver import BrokerDriver, batch_size, sized
from kraft_tck.reference.controller import MetadataRecord
from kraft_tck.reference.log import Log
from kraft_tck.reference.registry import REGISTER
from kraft_tck.reference.storage import LogDir
from kraft_tck.spec.records import data_batch, encode_batch


def _register(broker_id: int, epoch: int) -> bytes:
    return MetadataRecord(REGISTER, 1, {
        "BrokerId": broker_id, "IncarnationId": uuid.UUID(int=broker_id), "BrokerEpoch": epoch,
        "EndPoints": [{"Name": "PLAINTEXT", "Host": "h", "Port": 9092, "SecurityProtocol": 0}],
        "Features": [], "Rack": None, "Fenced": True, "InControlledShutdown": False}).value()


def _log(tmp_path: Path) -> Log:
    """60 batches of 1-3 records (some of them broker registrations), the first ones released to the segments."""
    storage = LogDir.open(tmp_path / "data", fsync=False)
    log = Log((), cold=storage)
    offset = 0
    for i in range(60):
        values = [b"w" * (10 + i)] * (1 + i % 3)
        if i % 7 == 3:
            values[0] = _register(100 + i, offset)
        batch = data_batch(offset, 1 + i // 20, values)
        encoded = encode_batch(batch)
        storage.append((batch,), (encoded,))
        log.append((batch,), (encoded,))
        offset = batch.last_offset + 1
    log.release(2000)  # keeps the newest ~2 KB in memory: the older batches are read back from the segments
    assert 0 < log.held_from < log.end_offset
    return log


def test_iter_sized_is_iter_batches_with_their_sizes_up_to_the_bound(tmp_path: Path) -> None:
    log = _log(tmp_path)
    everything = [(b, batch_size(b)) for b in log.iter_batches()]
    assert all(size == len(encode_batch(b)) for b, size in everything)
    for start in (0, 1, 5, log.held_from - 1, log.held_from, log.held_from + 2, log.end_offset - 1, log.end_offset):
        for until in (0, start, start + 1, start + 4, log.held_from, log.held_from + 3, log.end_offset, 10**9):
            got = list(log.iter_sized(start, until))
            want = [(b, s) for b, s in everything if b.last_offset >= start and b.base_offset < until and start < until]
            assert got == want, (start, until)


def test_the_driver_applies_and_counts_the_same_from_the_kept_sizes_and_from_the_records(tmp_path: Path) -> None:
    """One reader, two logs: the node's (``Log.iter_sized``, sizes from the kept bytes) and a records-only log's
    (``sized(iter_batches)``, sizes computed) give the same registry, byte counts and applied offsets."""
    log = _log(tmp_path)
    computed, kept = BrokerDriver(9000), BrokerDriver(9000)
    # The high watermark moves in uneven steps, some of them inside a batch.
    for hw in (1, 2, 7, 8, 30, log.held_from, log.held_from + 1, log.end_offset - 2, log.end_offset):
        a = computed.commit(hw, sized(log.iter_batches), log.epoch_of)
        b = kept.commit(hw, log.iter_sized, log.epoch_of)
        assert (a.bytes, a.changes, a.errors) == (b.bytes, b.changes, b.errors), hw
        assert (computed.applied_offset, computed.applied_aligned, computed.applied_timestamp) == \
            (kept.applied_offset, kept.applied_aligned, kept.applied_timestamp)
    assert computed.registry == kept.registry and len(kept.registry) == 9
