"""Snapshot files (KIP-630) on real files with fsync: Kafka's names and format, validation, the store.

Format and names as Kafka's ``Snapshots`` / ``RecordsSnapshotWriter``: ``<end offset, 20 digits>-<epoch, 10
digits>.checkpoint``, a SnapshotHeaderRecord control batch first, a SnapshotFooterRecord control batch last.
Every kind of damage must be caught at open and the previous valid snapshot used; the bad file is set aside,
never deleted. FetchSnapshot chunks (``read_chunk``) and a follower's download (``begin_download``) are checked
byte for byte.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from kraft_tck.reference import snapshot as snap
from kraft_tck.reference.messages import SnapshotId
from kraft_tck.reference.snapshot import (
    DownloadPositionError,
    PositionOutOfRangeError,
    SnapshotExistsError,
    SnapshotNotFoundError,
    SnapshotStore,
    decode_snapshot,
    encode_snapshot,
    parse_snapshot_filename,
    snapshot_filename,
)
from kraft_tck.reference.storage import CorruptFileError
from kraft_tck.spec.records import ControlType, decode_batches, decode_control, encode_batch

LOGGER = "kraft_tck.reference.snapshot"


def content(n_batches: int, per_batch: int = 5, tag: int = 0) -> list[list[bytes | tuple[bytes | None, bytes]]]:
    """``n_batches`` data batches; every third record keyed (as the cluster-id record is)."""
    out: list[list[bytes | tuple[bytes | None, bytes]]] = []
    for b in range(n_batches):
        batch: list[bytes | tuple[bytes | None, bytes]] = []
        for r in range(per_batch):
            value = f"t{tag}-b{b}-r{r}-".encode() * 3
            batch.append((f"k{b}.{r}".encode(), value) if r % 3 == 0 else value)
        out.append(batch)
    return out


def flat(batches: list[list[bytes | tuple[bytes | None, bytes]]]) -> list[tuple[bytes | None, bytes]]:
    return [item if isinstance(item, tuple) else (None, item) for b in batches for item in b]


def store_at(tmp_path: Path) -> SnapshotStore:
    return SnapshotStore.open(tmp_path / "part")


# ------------------------------------------------------------------------------------------ names and format


def test_names_are_kafkas() -> None:
    sid = SnapshotId(4711, 3)
    assert snapshot_filename(sid) == "00000000000000004711-0000000003.checkpoint"
    assert parse_snapshot_filename("00000000000000004711-0000000003.checkpoint") == (sid, "checkpoint")
    # Kafka's temp files are "<id>-<random>.checkpoint.part" (Files.createTempFile); ours are "<id>.checkpoint.part".
    assert parse_snapshot_filename("00000000000000004711-0000000003-8812.checkpoint.part") == (sid, "part")
    assert parse_snapshot_filename("00000000000000004711-0000000003.checkpoint.part") == (sid, "part")
    assert parse_snapshot_filename("00000000000000004711-0000000003.checkpoint.deleted") == (sid, "deleted")
    assert parse_snapshot_filename("4711-3.checkpoint") is None
    assert parse_snapshot_filename("00000000000000004711.log") is None
    assert parse_snapshot_filename("00000000000000004711-0000000003.checkpoint.corrupt") is None


def test_round_trip_many_batches(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    sid = SnapshotId(123_456, 7)
    batches = content(300, per_batch=4)
    written = store.write(sid, batches, last_contained_log_timestamp=1_700_000_000_123, timestamp_ms=42)
    path = store.path(sid)
    assert path.name == "00000000000000123456-0000000007.checkpoint"
    assert not list(path.parent.glob("*.part"))
    assert written.size_bytes == path.stat().st_size == store.size(sid)

    # The file is what Kafka's RecordsSnapshotWriter produces: header batch at offset 0, data, footer; all in
    # the snapshot's epoch, offsets contiguous.
    raw = decode_batches(path.read_bytes())
    assert len(raw) == 302
    assert raw[0].is_control and decode_control(raw[0].records[0]) == (
        ControlType.SNAPSHOT_HEADER,
        {"Version": 0, "LastContainedLogTimestamp": 1_700_000_000_123},
    )
    assert raw[-1].is_control and decode_control(raw[-1].records[0])[0] is ControlType.SNAPSHOT_FOOTER
    assert {b.partition_leader_epoch for b in raw} == {7}
    expected = 0
    for b in raw:
        assert b.base_offset == expected
        expected = b.last_offset + 1
    assert path.read_bytes() == encode_snapshot(
        sid, batches, last_contained_log_timestamp=1_700_000_000_123, timestamp_ms=42
    )

    reopened = store_at(tmp_path)
    assert reopened.ids() == [sid] and reopened.latest() == sid
    got = reopened.read(sid)
    assert got.snapshot_id == sid
    assert got.last_contained_log_timestamp == 1_700_000_000_123
    assert got.record_count == 1200
    assert [(r.key, r.value) for b in got.batches for r in b.records] == flat(batches)
    assert list(got.values()) == [v for _k, v in flat(batches)]
    assert reopened.last_contained_log_timestamp(sid) == 1_700_000_000_123


def test_streaming_writer_equals_one_shot(tmp_path: Path) -> None:
    a, b = SnapshotStore.open(tmp_path / "a"), SnapshotStore.open(tmp_path / "b")
    sid = SnapshotId(10, 2)
    batches = content(7)
    a.write(sid, batches)
    with b.create(sid) as w:
        for values in batches:
            w.append(values)
        assert b.latest() is None  # not a snapshot until frozen
        w.freeze()
    assert a.path(sid).read_bytes() == b.path(sid).read_bytes()
    with pytest.raises(SnapshotExistsError):
        b.write(sid, batches)


def test_an_unfrozen_writer_leaves_nothing(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    with store.create(SnapshotId(5, 1)) as w:
        w.append([b"x"])
    assert list((tmp_path / "part").iterdir()) == []
    assert store.ids() == []


def test_empty_snapshot_has_header_and_footer_only(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    s = store.write(SnapshotId(0, 0), [])
    assert s.batches == () and s.record_count == 0
    assert len(decode_batches(store.path(SnapshotId(0, 0)).read_bytes())) == 2


# ------------------------------------------------------------------------------------------ corruption


def _good_pair(tmp_path: Path) -> tuple[SnapshotStore, SnapshotId, SnapshotId]:
    store = store_at(tmp_path)
    older, newer = SnapshotId(100, 2), SnapshotId(250, 3)
    store.write(older, content(20, tag=1))
    store.write(newer, content(20, tag=2))
    return store, older, newer


def _flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x5A
    path.write_bytes(bytes(data))


def _batch_starts(path: Path) -> list[int]:
    data, pos, out = path.read_bytes(), 0, []
    while pos < len(data):
        out.append(pos)
        pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
    return out


DAMAGE = {
    "truncated mid-batch": (
        lambda p: p.write_bytes(p.read_bytes()[: _batch_starts(p)[10] + 30]),
        "torn",
    ),
    "truncated after a whole batch": (
        lambda p: p.write_bytes(p.read_bytes()[: _batch_starts(p)[10]]),
        "missing footer",
    ),
    "flipped byte in a data batch": (lambda p: _flip(p, _batch_starts(p)[5] + 70), "CRC mismatch"),
    "flipped byte in the header batch": (lambda p: _flip(p, 65), "CRC mismatch"),
    "flipped byte in the footer batch": (lambda p: _flip(p, p.stat().st_size - 3), "CRC mismatch"),
    "flipped length field": (lambda p: _flip(p, _batch_starts(p)[3] + 10), "torn"),
    "zero-filled tail": (
        lambda p: p.write_bytes(p.read_bytes()[: _batch_starts(p)[-3]] + bytes(500)),
        "malformed batch",
    ),
    "missing footer": (
        lambda p: p.write_bytes(p.read_bytes()[: _batch_starts(p)[-1]]),
        "missing footer",
    ),
    "missing header": (
        lambda p: p.write_bytes(p.read_bytes()[_batch_starts(p)[1] :]),
        "missing header",
    ),
    "header replaced by a data batch": (
        lambda p: p.write_bytes(
            encode_batch(snap.data_batch_at(SnapshotId(250, 3), 0, [b"not a header"]))
            + p.read_bytes()[_batch_starts(p)[1] :]
        ),
        "missing header",
    ),
    "bytes after the footer": (lambda p: p.write_bytes(p.read_bytes() + b"\x00\x01"), "after the SnapshotFooterRecord"),
    "empty file": (lambda p: p.write_bytes(b""), "empty file"),
    "wrong epoch in the name": (
        lambda p: p.rename(p.with_name(snapshot_filename(SnapshotId(250, 4)))),
        "is not the epoch 4 in the file name",
    ),
    "malformed name": (lambda p: p.rename(p.with_name("250-3.checkpoint")), "the name is not"),
}


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damage_is_detected_and_the_previous_snapshot_used(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    damage, problem = DAMAGE[kind]
    store, older, newer = _good_pair(tmp_path)
    path = store.path(newer)
    damage(path)
    bad_files = [p for p in path.parent.iterdir() if p.name != snapshot_filename(older)]
    assert len(bad_files) == 1
    bad_bytes = bad_files[0].read_bytes()

    with caplog.at_level(logging.ERROR, logger=LOGGER):
        reopened = store_at(tmp_path)
    assert reopened.latest() == older and reopened.ids() == [older]
    assert len(reopened.quarantined) == 1
    kept, reason = reopened.quarantined[0]
    assert problem in reason
    # Nothing is lost: the bad file is set aside, byte for byte, under a name Kafka ignores.
    assert kept.name == bad_files[0].name + ".corrupt" and kept.read_bytes() == bad_bytes
    assert parse_snapshot_filename(kept.name) is None
    assert any("corrupt snapshot" in r.getMessage() and bad_files[0].name in r.getMessage() for r in caplog.records)
    assert reopened.read(older).record_count == 100
    # Opening again changes nothing more (the .corrupt file is left alone).
    again = store_at(tmp_path)
    assert again.ids() == [older] and again.quarantined == [] and kept.exists()


def test_decode_names_the_file_and_the_problem(tmp_path: Path) -> None:
    sid = SnapshotId(9, 1)
    data = encode_snapshot(sid, content(3))
    where = tmp_path / snapshot_filename(sid)
    with pytest.raises(CorruptFileError) as err:
        decode_snapshot(where, data[:-5], sid)
    assert str(where) in str(err.value) and "torn" in err.value.problem


def test_a_second_quarantine_of_the_same_name_keeps_both(tmp_path: Path) -> None:
    store, _older, newer = _good_pair(tmp_path)
    _flip(store.path(newer), 80)
    second = store_at(tmp_path)
    second.write(newer, content(1))  # the id is free again: written anew, then damaged again
    _flip(second.path(newer), 80)
    third = store_at(tmp_path)
    names = sorted(p.name for p in (tmp_path / "part").iterdir())
    assert snapshot_filename(newer) + ".corrupt" in names and snapshot_filename(newer) + ".corrupt.1" in names
    assert len(third.quarantined) == 1


def test_damage_after_open_is_caught_on_read(tmp_path: Path) -> None:
    store, older, newer = _good_pair(tmp_path)
    _flip(store.path(newer), 200)
    with pytest.raises(CorruptFileError, match="CRC mismatch"):
        store.read(newer)
    assert store.ids() == [older]
    assert (tmp_path / "part" / (snapshot_filename(newer) + ".corrupt")).exists()
    with pytest.raises(SnapshotNotFoundError):
        store.read(newer)


# ------------------------------------------------------------------------------------------ crash leftovers


def test_part_files_from_a_crash_are_removed_at_open(tmp_path: Path) -> None:
    store, older, newer = _good_pair(tmp_path)
    d = tmp_path / "part"
    # A writer killed before freeze (no abort: the process died), a download cut short, Kafka's temp name,
    # and a Kafka ".deleted" leftover.
    w = store.create(SnapshotId(400, 3))
    w.append([b"half"])
    dl = store.begin_download(SnapshotId(500, 4))
    dl.append(0, b"some bytes")
    (d / "00000000000000000600-0000000004-123456.checkpoint.part").write_bytes(b"kafka temp")
    (d / (snapshot_filename(SnapshotId(50, 1)) + ".deleted")).write_bytes(b"old")
    (d / "unrelated.txt").write_bytes(b"left alone")

    reopened = store_at(tmp_path)
    assert reopened.ids() == [older, newer]
    assert sorted(p.name for p in d.iterdir()) == sorted(
        [snapshot_filename(older), snapshot_filename(newer), "unrelated.txt"]
    )
    assert reopened.quarantined == []


# ------------------------------------------------------------------------------------------ FetchSnapshot chunks


@pytest.mark.parametrize("chunk", [1, 7, 61, 100, 4096, 1 << 20])
def test_read_chunk_reproduces_the_file(tmp_path: Path, chunk: int) -> None:
    store = store_at(tmp_path)
    sid = SnapshotId(77, 5)
    store.write(sid, content(40))
    whole = store.path(sid).read_bytes()
    got, position = bytearray(), 0
    while position < store.size(sid):
        piece = store.read_chunk(sid, position, chunk)
        assert 0 < len(piece) <= chunk
        got += piece
        position += len(piece)
    assert bytes(got) == whole


def test_read_chunk_errors(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    sid = SnapshotId(77, 5)
    store.write(sid, content(2))
    size = store.size(sid)
    for bad in (-1, size, size + 10):
        with pytest.raises(PositionOutOfRangeError):
            store.read_chunk(sid, bad, 10)
    assert store.read_chunk(sid, size - 1, 10) == store.path(sid).read_bytes()[-1:]
    with pytest.raises(SnapshotNotFoundError):
        store.read_chunk(SnapshotId(77, 4), 0, 10)
    with pytest.raises(SnapshotNotFoundError):
        store.size(SnapshotId(1, 1))


# ------------------------------------------------------------------------------------------ download


def _download(src: SnapshotStore, dst: SnapshotStore, sid: SnapshotId, chunk: int) -> snap.SnapshotDownload:
    dl = dst.begin_download(sid)
    while dl.position < src.size(sid):
        dl.append(dl.position, src.read_chunk(sid, dl.position, chunk))
    return dl


def test_download_copies_byte_for_byte(tmp_path: Path) -> None:
    leader, follower = SnapshotStore.open(tmp_path / "l"), SnapshotStore.open(tmp_path / "f")
    sid = SnapshotId(1000, 9)
    leader.write(sid, content(50))
    dl = _download(leader, follower, sid, 333)
    assert follower.ids() == []  # not before finish
    got = dl.finish()
    assert follower.ids() == [sid] and got.record_count == 250
    assert follower.path(sid).read_bytes() == leader.path(sid).read_bytes()
    assert not list((tmp_path / "f").glob("*.part"))
    assert SnapshotStore.open(tmp_path / "f").ids() == [sid]
    with pytest.raises(SnapshotExistsError):
        follower.begin_download(sid)


def test_download_refuses_a_gap_and_a_repeat(tmp_path: Path) -> None:
    leader, follower = SnapshotStore.open(tmp_path / "l"), SnapshotStore.open(tmp_path / "f")
    sid = SnapshotId(1000, 9)
    leader.write(sid, content(5))
    dl = follower.begin_download(sid)
    dl.append(0, leader.read_chunk(sid, 0, 100))
    with pytest.raises(DownloadPositionError, match="position 150"):
        dl.append(150, leader.read_chunk(sid, 150, 100))
    with pytest.raises(DownloadPositionError, match="position 0"):
        dl.append(0, leader.read_chunk(sid, 0, 100))
    assert dl.position == 100 and dl.part_path.stat().st_size == 100
    while dl.position < leader.size(sid):
        dl.append(dl.position, leader.read_chunk(sid, dl.position, 100))
    dl.finish()
    assert follower.path(sid).read_bytes() == leader.path(sid).read_bytes()


@pytest.mark.parametrize("damage", ["flip", "short"])
def test_download_refuses_a_bad_final_file(tmp_path: Path, damage: str) -> None:
    leader, follower = SnapshotStore.open(tmp_path / "l"), SnapshotStore.open(tmp_path / "f")
    sid = SnapshotId(1000, 9)
    leader.write(sid, content(10))
    data = bytearray(leader.path(sid).read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 1
    else:
        del data[-20:]
    dl = follower.begin_download(sid)
    dl.append(0, bytes(data))
    with pytest.raises(CorruptFileError) as err:
        dl.finish()
    assert str(dl.part_path) in str(err.value)
    assert follower.ids() == [] and list((tmp_path / "f").iterdir()) == []
    # A fresh download of the same id then works.
    _download(leader, follower, sid, 1000).finish()
    assert follower.ids() == [sid]


def test_download_abort_and_restart_from_zero(tmp_path: Path) -> None:
    leader, follower = SnapshotStore.open(tmp_path / "l"), SnapshotStore.open(tmp_path / "f")
    sid = SnapshotId(1000, 9)
    leader.write(sid, content(10))
    dl = follower.begin_download(sid)
    dl.append(0, b"garbage that will be replaced")
    dl.abort()
    assert list((tmp_path / "f").iterdir()) == []
    dl = follower.begin_download(sid)
    dl.append(0, b"garbage again")
    # Position 0 again (the core's WriteSnapshotChunk at 0 replaces the part file): begin_download truncates.
    dl2 = _download(leader, follower, sid, 64)
    dl2.finish()
    assert follower.path(sid).read_bytes() == leader.path(sid).read_bytes()
    dl.abort()  # the stale handle's abort cannot remove the finished snapshot
    assert follower.path(sid).exists()


def test_fsync_is_really_done(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    store = store_at(tmp_path)
    store.write(SnapshotId(3, 1), content(1))
    assert len(synced) >= 2  # the file before the rename, the directory after it
    assert store.fsync_count == 2
