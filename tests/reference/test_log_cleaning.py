"""Log start offset and cleaning (KIP-630) in ``LogDir``, on real files with fsync.

Kafka's rules (``KafkaMetadataLog.deleteBeforeSnapshot`` / ``maybeClean`` / ``truncateToLatestSnapshot`` and
``UnifiedLog.deleteOldSegments``): the log start moves up to a snapshot's end offset, the segments wholly
below it go with their indexes, the epoch cache is trimmed from the start, and a restart comes back with the
same start, end and epoch cache. A follower installing a snapshot empties its log to start at the snapshot's
end; a crash between the download and that truncation is finished at open.
"""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference import storage
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import SnapshotId
from kraft_tck.reference.snapshot import SnapshotStore, encode_snapshot, snapshot_filename
from kraft_tck.reference.storage import EpochEntry, LogDir, OffsetOutOfRangeError, StorageError
from kraft_tck.spec.records import RecordBatch, data_batch

SEGMENT = 2048  # ~5 batches of 3 x 100-byte records per segment


def part(d: Path) -> Path:
    return d / storage.METADATA_PARTITION_DIR


def open_log(d: Path) -> LogDir:
    return LogDir.open(d, segment_bytes=SEGMENT, index_interval_bytes=512)


def fill(log: LogDir, n: int, epoch: int | None = None, epoch_every: int = 7) -> list[RecordBatch]:
    """Append and flush ``n`` batches of three 100-byte records; the epoch grows every ``epoch_every``."""
    first = epoch if epoch is not None else (log.epoch_entries[-1].epoch if log.epoch_entries else 1)
    out = []
    for i in range(n):
        b = data_batch(log.end_offset, first + i // epoch_every, [bytes([i % 251]) * 100 for _ in range(3)])
        log.append([b])
        out.append(b)
    log.flush()
    return out


def snapshot_at(log: LogDir, end_offset: int, ts: int = 0) -> SnapshotId:
    """Write a snapshot at ``end_offset`` (its epoch from the log) holding one record naming the offset."""
    epoch = next(e.epoch for e in reversed(log.epoch_entries) if e.start_offset < end_offset)
    sid = SnapshotId(end_offset, epoch)
    log.create_snapshot(sid, [[f"state@{end_offset}".encode()]], last_contained_log_timestamp=ts)
    return sid


def segment_bases(d: Path) -> list[int]:
    return sorted(int(p.stem) for p in part(d).glob("*.log"))


def index_bases(d: Path) -> list[int]:
    return sorted(int(p.stem) for p in part(d).glob("*.index"))


# ------------------------------------------------------------------------------------------ cleaning


def test_cleaning_deletes_exactly_the_segments_wholly_below_the_snapshot(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    batches = fill(log, 60)
    bases_before = segment_bases(tmp_path)
    assert len(bases_before) >= 8
    # A snapshot inside the 5th segment, at a batch boundary that is not the segment's base.
    target = next(b for b in batches if b.base_offset > bases_before[4] and b.base_offset not in bases_before)
    sid = snapshot_at(log, target.base_offset)
    before = {b.base_offset: b for b in log.read_from(target.base_offset)}

    assert log.delete_before_snapshot(sid)

    assert log.start_offset == sid.end_offset
    expected = [
        b for i, b in enumerate(bases_before) if i + 1 == len(bases_before) or bases_before[i + 1] > sid.end_offset
    ]
    assert segment_bases(tmp_path) == expected == bases_before[4:]
    assert index_bases(tmp_path) == expected
    # The rest is readable, the same batches; below the start is a clear error.
    assert {b.base_offset: b for b in log.read_from(sid.end_offset)} == before
    assert log.read_all() == list(before.values())
    assert [b for b, _ in log.iter_encoded()] == list(before.values())
    with pytest.raises(OffsetOutOfRangeError, match="below the log start offset"):
        log.read_encoded(sid.end_offset - 1, 1 << 20)
    with pytest.raises(OffsetOutOfRangeError):
        log.read_from(0)
    # The epoch cache starts at the start (Kafka's truncateFromStart).
    assert log.epoch_entries[0] == EpochEntry(before[sid.end_offset].partition_leader_epoch, sid.end_offset)
    assert all(e.start_offset >= sid.end_offset for e in log.epoch_entries)
    # Cleaning again to the same snapshot, or to one below the start, does nothing.
    assert not log.delete_before_snapshot(sid)
    log.close()


def test_restart_after_cleaning_has_the_same_start_end_and_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 45)
    sid = snapshot_at(log, 30 * 3)
    assert log.delete_before_snapshot(sid)
    state = (log.start_offset, log.end_offset, log.epoch_entries, log.read_all(), log.latest_snapshot_id)
    checkpoint = (part(tmp_path) / storage.EPOCH_CHECKPOINT).read_text()
    log.close()

    again = open_log(tmp_path)
    assert (
        again.start_offset,
        again.end_offset,
        again.epoch_entries,
        again.read_all(),
        again.latest_snapshot_id,
    ) == state
    assert (part(tmp_path) / storage.EPOCH_CHECKPOINT).read_text() == checkpoint
    assert (tmp_path / storage.LOG_START_CHECKPOINT).read_text() == f"0\n1\n__cluster_metadata 0 {sid.end_offset}\n"
    # The log goes on from there, and survives another restart.
    fill(again, 5)
    end = again.end_offset
    again.close()
    third = open_log(tmp_path)
    assert third.start_offset == sid.end_offset and third.end_offset == end
    third.close()


def test_without_the_start_checkpoint_the_start_comes_back_at_the_snapshot(tmp_path: Path) -> None:
    """Kafka's metadata log keeps no log-start checkpoint: its start falls back to the first segment. Here the
    start then moves up to the first snapshot end at or above it, so that a snapshot covers the start."""
    log = open_log(tmp_path)
    fill(log, 45)
    sid = snapshot_at(log, 31 * 3)
    log.delete_before_snapshot(sid)
    first_segment = segment_bases(tmp_path)[0]
    assert first_segment < sid.end_offset
    state = (log.start_offset, log.end_offset, log.epoch_entries, log.read_all())
    log.close()
    (tmp_path / storage.LOG_START_CHECKPOINT).unlink()
    again = open_log(tmp_path)
    assert (again.start_offset, again.end_offset, again.epoch_entries, again.read_all()) == state
    assert again.start_snapshot_id == sid
    assert (tmp_path / storage.LOG_START_CHECKPOINT).exists()
    again.close()


def test_a_corrupt_snapshot_at_the_start_moves_the_start_to_the_next(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 60)
    s1 = snapshot_at(log, 15 * 3)
    log.delete_before_snapshot(s1)
    s2 = snapshot_at(log, 40 * 3)
    after_s2 = log.read_from(s2.end_offset)
    log.close()
    p = part(tmp_path) / snapshot_filename(s1)
    p.write_bytes(p.read_bytes()[:-1])
    again = open_log(tmp_path)
    assert again.start_offset == s2.end_offset and again.start_snapshot_id == s2
    assert again.read_all() == after_s2
    assert (part(tmp_path) / (snapshot_filename(s1) + ".corrupt")).exists()
    assert segment_bases(tmp_path)[0] <= s2.end_offset
    again.close()
    third = open_log(tmp_path)
    assert third.start_offset == s2.end_offset and third.snapshots.quarantined == []
    third.close()


def test_clean_up_to_the_log_end(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 20)
    sid = snapshot_at(log, log.end_offset)
    assert log.delete_before_snapshot(sid)
    assert log.start_offset == log.end_offset == sid.end_offset
    assert log.read_all() == [] and log.epoch_entries == []
    assert log.segment_count == 1  # the last segment always stays (Kafka)
    log.close()
    again = open_log(tmp_path)
    assert (again.start_offset, again.end_offset, again.epoch_entries) == (sid.end_offset, sid.end_offset, [])
    fill(again, 2, epoch=sid.epoch)
    assert again.epoch_entries == [EpochEntry(sid.epoch, sid.end_offset)]
    again.close()


def test_a_crash_after_the_start_checkpoint_is_finished_at_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 40)
    sid = snapshot_at(log, 25 * 3)
    bases = segment_bases(tmp_path)
    log.close()
    # The cleaning wrote the new start durably, then the process died before deleting anything.
    (tmp_path / storage.LOG_START_CHECKPOINT).write_text(f"0\n1\n__cluster_metadata 0 {sid.end_offset}\n")
    again = open_log(tmp_path)
    assert again.start_offset == sid.end_offset
    assert segment_bases(tmp_path) == [
        b for i, b in enumerate(bases) if i + 1 == len(bases) or bases[i + 1] > sid.end_offset
    ]
    assert again.epoch_entries[0].start_offset == sid.end_offset
    again.close()


def test_create_snapshot_checks(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    batches = fill(log, 10, epoch_every=4)
    with pytest.raises(StorageError, match="outside the log"):
        log.create_snapshot(SnapshotId(log.end_offset + 3, 3), [])
    with pytest.raises(StorageError, match="inside a batch"):
        log.create_snapshot(SnapshotId(batches[2].base_offset + 1, 1), [])
    with pytest.raises(StorageError, match="has epoch 2"):
        log.create_snapshot(SnapshotId(batches[6].base_offset, 1), [])
    log.create_snapshot(SnapshotId(batches[6].base_offset, 2), [])
    log.create_snapshot(SnapshotId(0, 0), [])
    log.delete_before_snapshot(SnapshotId(batches[6].base_offset, 2))
    with pytest.raises(StorageError, match="outside the log"):
        log.create_snapshot(SnapshotId(batches[5].base_offset, 2), [])
    assert log.snapshots.ids() == [SnapshotId(batches[6].base_offset, 2)]
    log.close()


# ------------------------------------------------------------------------------------------ retention rules


def test_maybe_clean_size_rule(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 30)
    s1 = snapshot_at(log, 10 * 3)
    assert not log.maybe_clean(0, retention_bytes=0, retention_ms=-1)  # one snapshot: never (Kafka)
    fill(log, 30)
    s2 = snapshot_at(log, 40 * 3)
    # Under the limit: nothing.
    assert log.clean_target(0, retention_bytes=1 << 30, retention_ms=-1) is None
    assert not log.maybe_clean(0, retention_bytes=1 << 30, retention_ms=-1)
    # Over it: the query says where, and changes nothing; maybe_clean goes there.
    limit = log.size_bytes  # log + snapshots exceed it
    start = log.start_offset
    assert log.clean_target(0, retention_bytes=limit, retention_ms=-1) == s2
    assert log.start_offset == start and log.snapshots.ids() == [s1, s2]
    assert log.maybe_clean(0, retention_bytes=limit, retention_ms=-1)
    assert log.start_offset == s2.end_offset and log.snapshots.ids() == [s2]
    assert not (part(tmp_path) / snapshot_filename(s1)).exists()
    log.close()


def test_maybe_clean_walks_several_snapshots_and_keeps_the_latest(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    sids = []
    for _ in range(5):
        fill(log, 10)
        sids.append(snapshot_at(log, log.end_offset - 6))
    assert log.maybe_clean(0, retention_bytes=0, retention_ms=-1)
    assert log.snapshots.ids() == [sids[-1]] and log.start_offset == sids[-1].end_offset
    log.close()


def test_maybe_clean_time_rule(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 10)
    s1 = snapshot_at(log, 5 * 3, ts=1_000)
    fill(log, 10)
    s2 = snapshot_at(log, 15 * 3, ts=5_000)
    fill(log, 10)
    s3 = snapshot_at(log, 25 * 3, ts=9_000)
    # s1 is 1500 ms old at 2500: within 2000 ms retention: nothing.
    assert log.clean_target(2_500, retention_bytes=-1, retention_ms=2_000) is None
    # At 3500 s1 is too old: clean up to s2; s2 (ts 5000) is still young.
    assert log.maybe_clean(3_500, retention_bytes=-1, retention_ms=2_000)
    assert log.snapshots.ids() == [s2, s3] and log.start_offset == s2.end_offset
    # Much later everything but the latest goes.
    assert log.maybe_clean(100_000, retention_bytes=-1, retention_ms=2_000)
    assert log.snapshots.ids() == [s3] and log.start_offset == s3.end_offset
    assert not log.maybe_clean(10**9, retention_bytes=-1, retention_ms=2_000)
    del s1
    log.close()


# ------------------------------------------------------------------------------------------ snapshot install


def test_follower_install_empties_the_log_and_restarts_there(tmp_path: Path) -> None:
    leader_dir, follower_dir = tmp_path / "leader", tmp_path / "follower"
    leader = open_log(leader_dir)
    fill(leader, 50, epoch=3)
    sid = snapshot_at(leader, 45 * 3)
    follower = open_log(follower_dir)
    fill(follower, 4, epoch=1)  # a stale prefix
    dl = follower.snapshots.begin_download(sid)
    while dl.position < leader.snapshots.size(sid):
        dl.append(dl.position, leader.snapshots.read_chunk(sid, dl.position, 100))
    dl.finish()
    follower.reset_to_snapshot(sid)
    assert (follower.start_offset, follower.end_offset, follower.epoch_entries) == (sid.end_offset, sid.end_offset, [])
    assert segment_bases(follower_dir) == [sid.end_offset]
    follower.reset_to_snapshot(sid)  # idempotent
    # It continues with the leader's batches after the snapshot.
    rest = leader.read_from(sid.end_offset)
    follower.append(rest)
    follower.flush()
    follower.close()
    again = open_log(follower_dir)
    assert again.start_offset == sid.end_offset and again.read_all() == rest
    assert again.latest_snapshot_id == sid
    again.close()
    leader.close()


def test_crash_between_download_and_truncation_is_finished_at_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Kafka's KafkaMetadataLog.apply: truncateToLatestSnapshot at start-up."""
    leader = open_log(tmp_path / "leader")
    fill(leader, 30, epoch=4)
    sid = snapshot_at(leader, 20 * 3)
    follower = open_log(tmp_path / "follower")
    fill(follower, 6, epoch=1)
    follower.snapshots.write(sid, [[b"x"]])  # the download finished; the process died before truncating
    follower.close()
    with caplog.at_level(logging.INFO, logger="kraft_tck.reference.storage"):
        again = open_log(tmp_path / "follower")
    assert (again.start_offset, again.end_offset, again.epoch_entries) == (sid.end_offset, sid.end_offset, [])
    assert any("is behind snapshot" in r.getMessage() for r in caplog.records)
    again.close()
    leader.close()


def test_truncate_to_latest_snapshot_leaves_a_log_that_is_ahead(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 20)
    sid = snapshot_at(log, 10 * 3)
    assert not log.truncate_to_latest_snapshot()
    assert log.end_offset == 60 and log.latest_snapshot_id == sid
    log.close()


# ------------------------------------------------------------------------------------------ corrupt snapshots


def test_a_corrupt_latest_snapshot_falls_back_to_the_previous(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 40)
    s1 = snapshot_at(log, 10 * 3)
    log.delete_before_snapshot(s1)
    s2 = snapshot_at(log, 30 * 3)
    end = log.end_offset
    log.close()
    p = part(tmp_path) / snapshot_filename(s2)
    p.write_bytes(p.read_bytes()[:-7])  # torn
    again = open_log(tmp_path)
    assert again.latest_snapshot_id == s1 and again.start_offset == s1.end_offset and again.end_offset == end
    assert [q.name for q, _ in again.snapshots.quarantined] == [snapshot_filename(s2) + ".corrupt"]
    again.close()


def test_no_valid_snapshot_for_the_log_start_refuses_to_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 40)
    s1 = snapshot_at(log, 20 * 3)
    log.delete_before_snapshot(s1)
    log.close()
    p = part(tmp_path) / snapshot_filename(s1)
    data = bytearray(p.read_bytes())
    data[100] ^= 0xFF
    p.write_bytes(bytes(data))
    with pytest.raises(StorageError, match="inconsistent snapshot state") as err:
        open_log(tmp_path)
    assert "CRC mismatch" in str(err.value)
    # Nothing was deleted on the way: the bad snapshot is set aside, the log is untouched.
    assert (part(tmp_path) / (snapshot_filename(s1) + ".corrupt")).read_bytes() == bytes(data)
    assert segment_bases(tmp_path)[0] <= s1.end_offset


# ------------------------------------------------------------------------------------------ bounded


def test_index_epoch_cache_and_files_stay_bounded_over_many_cycles(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    sizes = []
    for cycle in range(60):
        fill(log, 8, epoch=3 * cycle + 1, epoch_every=3)  # three epochs per cycle: the cache would grow without trim
        snapshot_at(log, log.end_offset - 3)
        log.maybe_clean(0, retention_bytes=0, retention_ms=-1)
        files = len(list(part(tmp_path).iterdir()))
        sizes.append((log.segment_count, log.index_entry_count, log.epoch_entry_count, len(log.snapshots), files))
    late = sizes[10:]
    assert max(s[0] for s in late) <= 4
    assert max(s[1] for s in late) <= 4 * (SEGMENT // 512 + 1)
    assert max(s[2] for s in late) <= 4
    assert max(s[3] for s in late) <= 2
    assert max(s[4] for s in late) <= 2 * 4 + 2 + 2  # segments + indexes + snapshots + epoch checkpoint/quorum
    assert log.end_offset == 60 * 8 * 3
    state = (log.start_offset, log.end_offset, log.epoch_entries, log.read_all())
    log.close()
    again = open_log(tmp_path)
    assert (again.start_offset, again.end_offset, again.epoch_entries, again.read_all()) == state
    again.close()


# ------------------------------------------------------------------------------------------ ColdStore


def test_cold_reads_work_from_a_start_above_zero(tmp_path: Path) -> None:
    """``reference/log.py``'s ColdStore contract served by a cleaned LogDir: a core log rebuilt from the disk
    after cleaning (as a node does at restart) reads its released batches back from it, and both agree on
    the start and the epoch cache as they clean further."""
    disk = open_log(tmp_path)
    fill(disk, 60)
    s1 = snapshot_at(disk, 20 * 3)
    disk.delete_before_snapshot(s1)
    batches, encoded = disk.read_encoded(s1.end_offset, 1000)
    assert batches and batches[0].base_offset == s1.end_offset and len(encoded) == len(batches)
    with pytest.raises(OffsetOutOfRangeError):
        disk.read_encoded(0, 1000)

    pairs = list(disk.iter_encoded())
    core = Log([b for b, _ in pairs], [d for _, d in pairs], cold=disk, start=s1)
    assert core.start_offset == disk.start_offset == s1.end_offset
    assert [(e.epoch, e.start_offset) for e in core.epoch_cache] == [
        (e.epoch, e.start_offset) for e in disk.epoch_entries
    ]
    assert core.release(1000) > 0 and core.held_from > s1.end_offset
    assert list(core.iter_batches(s1.end_offset, chunk_bytes=700)) == disk.read_all()

    s2 = snapshot_at(disk, 45 * 3)
    core.advance_start(s2)
    assert disk.delete_before_snapshot(s2)
    assert core.start_offset == disk.start_offset
    assert [(e.epoch, e.start_offset) for e in core.epoch_cache] == [
        (e.epoch, e.start_offset) for e in disk.epoch_entries
    ]
    assert list(core.iter_batches(0, chunk_bytes=700)) == disk.read_all()
    disk.close()


def test_store_opened_alone_sees_the_same_snapshots(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 10)
    sid = snapshot_at(log, 5 * 3)
    log.close()
    assert SnapshotStore.open(part(tmp_path)).ids() == [sid]


# ------------------------------------------------------------------------------------------ crash at every step


class Crash(Exception):
    """The process died here (raised instead of the n-th durable file-system change)."""


def _crash_after(monkeypatch: pytest.MonkeyPatch, n: int) -> list[str]:
    """Make the ``n``-th rename or unlink from now raise :class:`Crash` before it happens; return the log of
    those calls (so a dry run with a large ``n`` counts them)."""
    calls: list[str] = []
    real_replace, real_unlink = os.replace, Path.unlink

    def step(what: str) -> None:
        calls.append(what)
        if len(calls) == n:
            raise Crash(what)

    def replace(src: Any, dst: Any) -> None:
        step(f"rename {Path(src).name} -> {Path(dst).name}")
        real_replace(src, dst)

    def unlink(self: Path, missing_ok: bool = False) -> None:
        step(f"unlink {self.name}")
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(Path, "unlink", unlink)
    return calls


def _epochs_of(batches: list[RecordBatch], start: int) -> list[EpochEntry]:
    out: list[EpochEntry] = []
    for b in batches:
        if b.base_offset >= start and (not out or b.partition_leader_epoch > out[-1].epoch):
            out.append(EpochEntry(b.partition_leader_epoch, b.base_offset))
    return out


def _check_consistent(d: Path, batches: list[RecordBatch], starts: set[int]) -> LogDir:
    log = open_log(d)
    assert log.start_offset in starts
    want = [b for b in batches if b.base_offset >= log.start_offset]
    assert log.read_all() == want
    assert log.epoch_entries == _epochs_of(batches, log.start_offset)
    assert log.start_offset == 0 or log.start_snapshot_id is not None
    return log


@pytest.mark.parametrize("operation", ["clean", "maybe_clean"])
def test_a_crash_at_any_step_of_cleaning_leaves_a_consistent_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    def setup(d: Path) -> tuple[LogDir, list[RecordBatch], SnapshotId, SnapshotId]:
        log = open_log(d)
        batches = fill(log, 50)
        s1 = snapshot_at(log, 12 * 3)
        s2 = snapshot_at(log, 33 * 3)
        log.delete_before_snapshot(s1)
        return log, batches, s1, s2

    def run(log: LogDir, s2: SnapshotId) -> None:
        if operation == "clean":
            log.delete_before_snapshot(s2)
        else:
            log.maybe_clean(0, retention_bytes=0, retention_ms=-1)

    log, _batches, _s1, s2 = setup(tmp_path / "dry")
    with monkeypatch.context() as m:
        steps = _crash_after(m, 10**9)
        run(log, s2)
    log.close()
    assert len(steps) >= 4, steps  # checkpoint rename, epoch checkpoint rename, segment and index unlinks, snapshot
    for n in range(1, len(steps) + 1):
        d = tmp_path / f"crash-{n}"
        log, batches, s1, s2 = setup(d)
        with monkeypatch.context() as m:
            _crash_after(m, n)
            with pytest.raises(Crash):
                run(log, s2)
        log._close_active()  # the process is gone: nothing more is flushed
        again = _check_consistent(d, batches, {s1.end_offset, s2.end_offset})
        assert s2 in again.snapshots
        # Finishing the job after the restart lands where an uninterrupted run does.
        again.delete_before_snapshot(s2)
        assert again.start_offset == s2.end_offset and again.snapshots.ids() == [s2]
        assert again.read_all() == [b for b in batches if b.base_offset >= s2.end_offset]
        again.close()


def test_a_crash_at_any_step_of_a_snapshot_install_leaves_a_consistent_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader = open_log(tmp_path / "leader")
    fill(leader, 40, epoch=5)
    sid = snapshot_at(leader, 30 * 3)
    data = leader.snapshots.path(sid).read_bytes()

    def setup(d: Path) -> tuple[LogDir, list[RecordBatch]]:
        follower = open_log(d)
        return follower, fill(follower, 12, epoch=1)  # a stale prefix, below the snapshot

    def run(follower: LogDir) -> None:
        dl = follower.snapshots.begin_download(sid)
        dl.append(0, data)
        dl.finish()
        follower.reset_to_snapshot(sid)

    follower, _ = setup(tmp_path / "dry")
    with monkeypatch.context() as m:
        steps = _crash_after(m, 10**9)
        run(follower)
    follower.close()
    for n in range(1, len(steps) + 1):
        d = tmp_path / f"crash-{n}"
        follower, batches = setup(d)
        with monkeypatch.context() as m:
            _crash_after(m, n)
            with pytest.raises(Crash):
                run(follower)
        follower._close_active()
        again = open_log(d)
        if sid in again.snapshots:  # the download was renamed in: the install is finished at open
            assert (again.start_offset, again.end_offset, again.read_all()) == (sid.end_offset, sid.end_offset, [])
        else:  # not yet: the old log is intact and no partial file is left
            assert (again.start_offset, again.read_all()) == (0, batches)
            assert not list(part(d).glob("*.part"))
        again.close()
    leader.close()


# ------------------------------------------------------------------------------------------ random histories


@pytest.mark.parametrize("seed", range(8))
def test_random_histories_match_a_model_across_restarts(tmp_path: Path, seed: int) -> None:
    """Appends, snapshots, retention, truncations above the latest snapshot, snapshot installs and restarts in a
    random order; after every step the directory (reopened on every restart) says what a plain model says."""
    rng = random.Random(seed)
    d = tmp_path / "n"

    def reopen() -> LogDir:
        return LogDir.open(d, segment_bytes=rng.choice([700, 2048, 5000]), index_interval_bytes=300, fsync=False)

    log = reopen()
    model: list[RecordBatch] = []  # every batch ever in the log at its offsets (the live ones are >= start)
    start, snaps = 0, set[SnapshotId]()
    epoch = 1
    for _ in range(60):
        op = rng.choices(["append", "snapshot", "clean", "truncate", "restart", "install"], weights=[6, 4, 4, 1, 2, 1])[
            0
        ]
        live = [b for b in model if b.base_offset >= start]
        if op == "append":
            epoch += rng.random() < 0.3
            for _k in range(rng.randint(1, 6)):
                b = data_batch(
                    log.end_offset, epoch, [bytes([rng.randrange(256)]) * rng.randint(1, 120)] * rng.randint(1, 4)
                )
                log.append([b])
                model.append(b)
            log.flush()
        elif op == "snapshot" and live:
            b = rng.choice(live)
            end = b.last_offset + 1
            sid = SnapshotId(end, b.partition_leader_epoch)
            if sid not in snaps and not any(s.end_offset == end for s in snaps):
                log.create_snapshot(sid, [[b"s"]], last_contained_log_timestamp=rng.randrange(10_000))
                snaps.add(sid)
        elif op == "clean":
            log.maybe_clean(
                rng.randrange(20_000),
                retention_bytes=rng.choice([-1, 0, 3000, 10**6]),
                retention_ms=rng.choice([-1, 0, 5000]),
            )
            start = log.start_offset
            snaps = {s for s in snaps if s.end_offset >= start}
            assert log.snapshots.ids() == sorted(snaps)
        elif op == "truncate" and live:
            floor = max([start] + [s.end_offset for s in snaps])
            cands = [b.base_offset for b in live if b.base_offset > floor]
            if cands:
                cut = rng.choice(cands)
                assert log.truncate_to(cut) == cut
                model = [b for b in model if b.base_offset < cut]
        elif op == "restart":
            log.close()
            log = reopen()
        elif op == "install":
            end = log.end_offset + rng.randint(1, 50)
            epoch += 1
            sid = SnapshotId(end, epoch)
            dl = log.snapshots.begin_download(sid)
            dl.append(0, encode_snapshot(sid, [[b"leader state"]]))
            dl.finish()
            log.reset_to_snapshot(sid)
            start, snaps, model = end, {sid}, []
        live = [b for b in model if b.base_offset >= start]
        assert log.start_offset == start, op
        assert log.read_all() == live, op
        assert log.end_offset == (live[-1].last_offset + 1 if live else start), op
        assert log.epoch_entries == _epochs_of(live, start), op
        assert log.snapshots.ids() == sorted(snaps), op
        assert start == 0 or log.start_snapshot_id is not None, op
    log.close()
