"""Durable storage on real files: segments, offset index, epoch checkpoint, state files, recovery.

Everything here writes to a real temporary directory with fsync on (the default), reopens the directory
as a restarted node would, and checks what survived.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraft_tck.reference import storage
from kraft_tck.reference.storage import (
    CorruptFileError,
    EpochEntry,
    FormatError,
    LogDir,
    MetaProperties,
    QuorumStateData,
    StorageError,
)
from kraft_tck.spec.records import RecordBatch, data_batch, decode_batch, encode_batch

LOGGER = "kraft_tck.reference.storage"
REPO = Path(__file__).resolve().parents[2]


def part(d: Path) -> Path:
    return d / storage.METADATA_PARTITION_DIR


def fill(log: LogDir, n_batches: int, records_per_batch: int = 3, epoch_every: int = 10) -> list[RecordBatch]:
    """Append and flush ``n_batches`` batches of 100-byte values; the epoch continues from the log's last
    (1 when empty) and grows every ``epoch_every`` batches."""
    first_epoch = log.epoch_entries[-1].epoch if log.epoch_entries else 1
    out = []
    for i in range(n_batches):
        b = data_batch(
            log.end_offset,
            first_epoch + i // epoch_every,
            [bytes([i % 256]) * 100 for _ in range(records_per_batch)],
        )
        log.append([b])
        out.append(b)
    log.flush()
    return out


def batch_positions(path: Path) -> list[int]:
    data = path.read_bytes()
    positions, pos = [], 0
    while pos < len(data):
        positions.append(pos)
        _, pos = decode_batch(data, pos)
    return positions


def epochs_of(batches: list[RecordBatch]) -> list[EpochEntry]:
    out: list[EpochEntry] = []
    for b in batches:
        if not out or b.partition_leader_epoch > out[-1].epoch:
            out.append(EpochEntry(b.partition_leader_epoch, b.base_offset))
    return out


def checkpoint_on_disk(d: Path) -> list[EpochEntry]:
    path = part(d) / storage.EPOCH_CHECKPOINT
    return storage.parse_epoch_checkpoint(path, path.read_text())


def segment_files(d: Path) -> list[str]:
    return sorted(p.name for p in part(d).glob("*.log"))


# ---------------------------------------------------------------------------------------------- round trip


def test_append_reopen_round_trip_across_segment_rolls(tmp_path: Path) -> None:
    with LogDir.open(tmp_path, segment_bytes=2048, index_interval_bytes=512) as log:
        written = fill(log, 40)
        assert log.end_offset == 120
    names = segment_files(tmp_path)
    assert len(names) > 3, "2 KiB segments must have rolled"
    # Each segment is named by the base offset of its first batch and stays within segment.bytes.
    for name in names:
        f = part(tmp_path) / name
        first, _ = decode_batch(f.read_bytes())
        assert name == f"{first.base_offset:020d}.log"
        assert f.stat().st_size <= 2048
        assert (part(tmp_path) / name.replace(".log", ".index")).exists()
    with LogDir.open(tmp_path, segment_bytes=2048, index_interval_bytes=512) as log:
        assert log.read_all() == written
        assert log.end_offset == 120
        assert log.epoch_entries == epochs_of(written) == checkpoint_on_disk(tmp_path)
        # The log continues at the recovered end offset.
        more = fill(log, 2)
        assert more[0].base_offset == 120
    with LogDir.open(tmp_path) as log:
        assert log.read_all() == written + more


def test_multi_batch_append_spans_rolls_and_index_matches_rebuild(tmp_path: Path) -> None:
    with LogDir.open(tmp_path, segment_bytes=1500, index_interval_bytes=400) as log:
        batches, off = [], 0
        for i in range(25):
            b = data_batch(off, 1 + i // 5, [b"v" * 100, b"w" * 100])
            batches.append(b)
            off = b.last_offset + 1
        log.append(batches)
        log.flush()
    index_files = {p.name: p.read_bytes() for p in part(tmp_path).glob("*.index")}
    assert any(index_files.values()), "some index entries must exist at a 400-byte interval"
    for p in part(tmp_path).glob("*.index"):
        p.unlink()
    with LogDir.open(tmp_path, segment_bytes=1500, index_interval_bytes=400) as log:
        assert log.read_all() == batches
    # The index written while appending is exactly the one recovery computes from the segments.
    assert {p.name: p.read_bytes() for p in part(tmp_path).glob("*.index")} == index_files


def test_append_refuses_gaps_overlaps_lower_epochs_and_writes_nothing(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as log:
        fill(log, 2, epoch_every=1)  # offsets 0..5, epochs 1, 2
        size = (part(tmp_path) / "00000000000000000000.log").stat().st_size
        with pytest.raises(StorageError, match="base offset 7 is not the log end offset 6"):
            log.append([data_batch(7, 2, [b"x"])])
        with pytest.raises(StorageError, match="base offset 5 is not the log end offset 6"):
            log.append([data_batch(5, 2, [b"x"])])
        with pytest.raises(StorageError, match="leader epoch 1, below the log's last epoch 2"):
            log.append([data_batch(6, 1, [b"x"])])
        # A bad batch after a good one refuses the whole call.
        with pytest.raises(StorageError, match="base offset 9"):
            log.append([data_batch(6, 2, [b"x"]), data_batch(9, 2, [b"y"])])
        assert log.end_offset == 6
        assert (part(tmp_path) / "00000000000000000000.log").stat().st_size == size


def test_read_from_uses_index_and_returns_suffix(tmp_path: Path) -> None:
    with LogDir.open(tmp_path, segment_bytes=4096, index_interval_bytes=300) as log:
        written = fill(log, 30)
        for offset in (0, 1, 44, 45, 46, 89):
            got = log.read_from(offset)
            assert got == [b for b in written if b.last_offset >= offset]
        assert log.read_from(90) == []


def test_read_encoded_returns_whole_batches_up_to_max_bytes_across_segments(tmp_path: Path) -> None:
    """The cold reads of reference/log.py: Kafka's Fetch read (the batch holding the offset, then whole
    batches up to max_bytes, at least one), with the bytes as stored, across segment rolls."""
    with LogDir.open(tmp_path, segment_bytes=4096, index_interval_bytes=300) as log:
        written = fill(log, 30)
        size = len(encode_batch(written[0]))  # every batch here has the same encoded size
        assert log.segment_count == 3
        for offset in (0, 1, 44, 45, 46, 89):
            for n in (1, 2, 7, 30):
                batches, encoded = log.read_encoded(offset, n * size)
                first = offset // 3
                assert batches == written[first : first + n]
                assert encoded == [encode_batch(b) for b in batches]
        assert log.read_encoded(0, 0)[0] == written[:1]  # at least one batch
        assert log.read_encoded(90, 1 << 20) == ([], [])


def test_a_segment_damaged_after_open_is_named_with_the_position_when_read(tmp_path: Path) -> None:
    """Open checks every batch; damage done later (the disk, another writer) surfaces at the next read of
    those bytes (a lagging follower's Fetch served from the segment files) as an error naming file and
    position, never as bytes sent on."""
    with LogDir.open(tmp_path) as log:
        written = fill(log, 10)
        seg = part(tmp_path) / "00000000000000000000.log"
        third = batch_positions(seg)[3]
        with open(seg, "r+b") as fh:
            fh.seek(third + 70)  # inside the records: the CRC no longer matches
            fh.write(b"\xff")
        assert log.read_encoded(0, len(encode_batch(written[0])) * 3)[0] == written[:3]  # before it: fine
        with pytest.raises(storage.CorruptFileError, match=rf"{seg.name}: the batch at position {third} no longer"):
            log.read_encoded(0, 1 << 20)
        # A damaged length field: finding an offset past it stops with the position, never loops in place.
        with open(seg, "r+b") as fh:
            fh.seek(third + 8)
            fh.write(struct.pack(">i", -12))
        with pytest.raises(storage.CorruptFileError, match=rf"position {third} has length -12"):
            log.read_encoded(written[5].base_offset, 1 << 20)


def test_flush_fsyncs_once_per_flush_and_not_when_disabled(tmp_path: Path) -> None:
    with LogDir.open(tmp_path / "a") as log:
        log.append([data_batch(0, 1, [b"x"])])  # first batch of epoch 1: checkpoint write (2 fsyncs)
        before = log.fsync_count
        log.append([data_batch(1, 1, [b"y"])])
        log.flush()
        assert log.fsync_count == before + 1
        log.flush()  # nothing new: no fsync
        assert log.fsync_count == before + 1
    with LogDir.open(tmp_path / "b", fsync=False) as log:
        fill(log, 5)
        log.truncate_to(3)
        log.write_quorum_state(QuorumStateData(leader_epoch=1))
        assert log.fsync_count == 0


# ---------------------------------------------------------------------------------------------- truncation


@pytest.mark.parametrize("cut", [0, 3, 27, 30, 33, 60, 61, 89])
def test_truncate_to_is_durable_across_reopen(tmp_path: Path, cut: int) -> None:
    # KIP-595 Fetch Response Handling step 2: offsets ≥ the truncation offset are gone, also after restart.
    with LogDir.open(tmp_path, segment_bytes=2048, index_interval_bytes=256) as log:
        written = fill(log, 30, epoch_every=7)  # 90 records in 3-record batches, epochs 1..5
        n_segments = log.segment_count
        new_end = log.truncate_to(cut)
    kept = [b for b in written if b.last_offset < cut]
    # Truncation drops whole batches (Kafka's rule): a cut inside a batch goes back to its base offset.
    assert new_end == (kept[-1].last_offset + 1 if kept else 0)
    assert new_end == cut - cut % 3
    with LogDir.open(tmp_path, segment_bytes=2048, index_interval_bytes=256) as log:
        assert log.read_all() == kept
        assert log.end_offset == new_end
        assert log.epoch_entries == epochs_of(kept) == checkpoint_on_disk(tmp_path)
        assert log.segment_count <= n_segments
        # Every remaining segment starts where its name says; only the last may be empty.
        names = segment_files(tmp_path)
        for i, name in enumerate(names):
            data = (part(tmp_path) / name).read_bytes()
            if data:
                assert name == f"{decode_batch(data)[0].base_offset:020d}.log"
            else:
                assert i == len(names) - 1 and int(name[:20]) == new_end
        appended = fill(log, 1, epoch_every=1)
    with LogDir.open(tmp_path) as log:
        assert log.read_all() == kept + appended


def test_truncate_across_segments_deletes_later_segments_and_fixes_checkpoint(tmp_path: Path) -> None:
    with LogDir.open(tmp_path, segment_bytes=1024) as log:
        written = fill(log, 20, epoch_every=4)
        before = segment_files(tmp_path)
        assert len(before) >= 4
        assert log.truncate_to(12) == 12
    # Offset 12 starts a segment (two ~390-byte batches per 1 KiB segment): it and all later ones go.
    kept_names = [n for n in before if int(n[:20]) < 12]
    assert segment_files(tmp_path) == kept_names and len(kept_names) == 2
    assert sorted(p.name for p in part(tmp_path).glob("*.index")) == [n[:20] + ".index" for n in kept_names]
    # Epoch 1 covers batches 0..3 (offsets 0..11); epoch 2 started at 12 and is gone.
    assert checkpoint_on_disk(tmp_path) == [EpochEntry(1, 0)]
    assert (part(tmp_path) / storage.EPOCH_CHECKPOINT).read_text() == "0\n1\n1 0\n"
    with LogDir.open(tmp_path) as log:
        assert log.read_all() == written[:4]


def test_truncate_at_or_beyond_end_is_noop_and_below_start_refused(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as log:
        fill(log, 2)
        assert log.truncate_to(6) == 6
        assert log.truncate_to(100) == 6
        with pytest.raises(StorageError, match="below the log start offset"):
            log.truncate_to(-1)


# ---------------------------------------------------------------------------------------------- recovery


def test_torn_tail_is_truncated_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with LogDir.open(tmp_path) as log:
        written = fill(log, 5)
    seg = part(tmp_path) / "00000000000000000000.log"
    last_pos = batch_positions(seg)[-1]
    with open(seg, "r+b") as fh:
        fh.truncate(last_pos + 30)  # a crash in the middle of writing the last batch
    with caplog.at_level(logging.INFO, logger=LOGGER), LogDir.open(tmp_path) as log:
        assert log.read_all() == written[:-1]
        assert log.end_offset == written[-1].base_offset
    assert seg.stat().st_size == last_pos
    [rec] = [r for r in caplog.records if "truncating the log" in r.getMessage()]
    assert rec.levelno == logging.WARNING
    msg = rec.getMessage()
    assert str(seg) in msg and f"at byte {last_pos}" in msg and f"(offset {written[-1].base_offset})" in msg
    assert "torn" in msg


def test_corrupt_tail_crc_is_truncated_naming_both_crcs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with LogDir.open(tmp_path) as log:
        written = fill(log, 5)
    seg = part(tmp_path) / "00000000000000000000.log"
    last_pos = batch_positions(seg)[-1]
    data = bytearray(seg.read_bytes())
    data[last_pos + 70] ^= 0x04  # one bit inside the last batch's records
    seg.write_bytes(bytes(data))
    stored_crc = struct.unpack_from(">I", data, last_pos + 17)[0]
    with caplog.at_level(logging.INFO, logger=LOGGER), LogDir.open(tmp_path) as log:
        assert log.read_all() == written[:-1]
    [rec] = [r for r in caplog.records if "truncating the log" in r.getMessage()]
    assert rec.levelno == logging.WARNING
    msg = rec.getMessage()
    assert "CRC mismatch" in msg and f"expected {stored_crc:#010x}" in msg and "actual 0x" in msg
    assert f"at byte {last_pos}" in msg and f"(offset {written[-1].base_offset})" in msg
    assert seg.stat().st_size == last_pos


def test_zero_filled_tail_is_a_torn_tail_not_data_loss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with LogDir.open(tmp_path) as log:
        written = fill(log, 3)
    seg = part(tmp_path) / "00000000000000000000.log"
    size = seg.stat().st_size
    with open(seg, "ab") as fh:
        fh.write(bytes(700))  # the file grew but its blocks were never written
    with caplog.at_level(logging.INFO, logger=LOGGER), LogDir.open(tmp_path) as log:
        assert log.read_all() == written
    assert seg.stat().st_size == size
    [rec] = [r for r in caplog.records if "truncating the log" in r.getMessage()]
    assert rec.levelno == logging.WARNING and "zero-filled tail of 700 bytes" in rec.getMessage()


def test_corruption_mid_log_cuts_there_and_logs_data_loss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with LogDir.open(tmp_path, segment_bytes=1024) as log:
        written = fill(log, 12, epoch_every=2)
    first_seg = part(tmp_path) / segment_files(tmp_path)[0]
    positions = batch_positions(first_seg)
    data = bytearray(first_seg.read_bytes())
    data[positions[1] + 70] ^= 0x01  # the second batch; valid batches follow in this and later segments
    first_seg.write_bytes(bytes(data))
    with caplog.at_level(logging.INFO, logger=LOGGER), LogDir.open(tmp_path, segment_bytes=1024) as log:
        assert log.read_all() == written[:1]
        assert log.epoch_entries == [EpochEntry(1, 0)] == checkpoint_on_disk(tmp_path)
    [rec] = [r for r in caplog.records if "DATA LOSS" in r.getMessage()]
    assert rec.levelno == logging.ERROR
    assert f"at byte {positions[1]} (offset 3)" in rec.getMessage() and "CRC mismatch" in rec.getMessage()
    assert segment_files(tmp_path) == [first_seg.name]


def test_missing_middle_segment_is_a_gap_cut_with_data_loss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with LogDir.open(tmp_path, segment_bytes=1024) as log:
        written = fill(log, 12)
    names = segment_files(tmp_path)
    (part(tmp_path) / names[1]).unlink()
    with caplog.at_level(logging.INFO, logger=LOGGER), LogDir.open(tmp_path, segment_bytes=1024) as log:
        kept = log.read_all()
    assert kept == [b for b in written if b.last_offset < int(names[1][:20])]
    assert any(
        r.levelno == logging.ERROR and "does not start at offset" in r.getMessage() for r in caplog.records
    )
    assert segment_files(tmp_path) == names[:1]


def test_index_rebuilt_when_deleted_or_corrupt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with LogDir.open(tmp_path, index_interval_bytes=300) as log:
        written = fill(log, 20)
    index = part(tmp_path) / "00000000000000000000.index"
    original = index.read_bytes()
    assert len(original) % 8 == 0 and len(original) // 8 >= 5
    # Entries: relative last offset of a batch → position where that batch starts (Kafka's layout).
    positions = batch_positions(part(tmp_path) / "00000000000000000000.log")
    for i in range(0, len(original), 8):
        rel, pos = struct.unpack_from(">ii", original, i)
        assert pos in positions
        assert written[positions.index(pos)].last_offset == rel

    index.unlink()
    with caplog.at_level(logging.INFO, logger=LOGGER), LogDir.open(tmp_path, index_interval_bytes=300) as log:
        assert log.read_from(31) == [b for b in written if b.last_offset >= 31]
    assert index.read_bytes() == original
    assert any("offset index missing" in r.getMessage() for r in caplog.records)

    caplog.clear()
    index.write_bytes(b"\x7f" * 13)
    with caplog.at_level(logging.INFO, logger=LOGGER), LogDir.open(tmp_path, index_interval_bytes=300):
        pass
    assert index.read_bytes() == original
    assert any(r.levelno == logging.WARNING and "does not match" in r.getMessage() for r in caplog.records)


def test_index_after_truncate_and_more_appends_equals_rebuild(tmp_path: Path) -> None:
    # After a cut, the next index entry must come index.interval.bytes after the last kept entry's
    # batch, exactly where a rebuild from the segment would put it.
    with LogDir.open(tmp_path, index_interval_bytes=1000) as log:
        fill(log, 20, records_per_batch=2)
        log.truncate_to(27)
        fill(log, 10, records_per_batch=2)
    index = part(tmp_path) / "00000000000000000000.index"
    incremental = index.read_bytes()
    index.unlink()
    with LogDir.open(tmp_path, index_interval_bytes=1000):
        pass
    assert index.read_bytes() == incremental


def test_epoch_checkpoint_rebuilt_from_log_when_missing_or_wrong(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as log:
        written = fill(log, 6, epoch_every=2)
    path = part(tmp_path) / storage.EPOCH_CHECKPOINT
    assert path.read_text() == "0\n3\n1 0\n2 6\n3 12\n"
    for bad in (None, "garbage", "0\n5\n1 0\n"):
        if bad is None:
            path.unlink()
        else:
            path.write_text(bad)
        with LogDir.open(tmp_path) as log:
            assert log.epoch_entries == epochs_of(written)
        assert path.read_text() == "0\n3\n1 0\n2 6\n3 12\n"


# ---------------------------------------------------------------------------------------------- atomic writes


def test_atomic_writes_leave_no_temp_files(tmp_path: Path) -> None:
    storage.format_dir(tmp_path, 1, "abc")
    with LogDir.open(tmp_path) as log:
        fill(log, 3)
        log.write_quorum_state(QuorumStateData(leader_epoch=3, voted_id=2))
        log.truncate_to(3)
    leftovers = [p for p in tmp_path.rglob("*") if p.name.endswith(storage.TMP_SUFFIX)]
    assert leftovers == []


def test_crash_before_rename_keeps_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with LogDir.open(tmp_path) as log:
        log.write_quorum_state(QuorumStateData(leader_epoch=4, voted_id=1))
        old = (part(tmp_path) / storage.QUORUM_STATE).read_bytes()

        def crash(src: object, dst: object) -> None:
            raise OSError("simulated crash before rename")

        monkeypatch.setattr(os, "replace", crash)
        with pytest.raises(OSError, match="simulated crash"):
            log.write_quorum_state(QuorumStateData(leader_epoch=5, voted_id=2))
        monkeypatch.undo()
        assert (part(tmp_path) / storage.QUORUM_STATE).read_bytes() == old
        assert not list(part(tmp_path).glob("*.tmp"))
        assert log.read_quorum_state() == QuorumStateData(leader_epoch=4, voted_id=1)


def test_stale_temp_file_from_a_crash_is_removed_at_open(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as log:
        log.write_quorum_state(QuorumStateData(leader_epoch=2))
    stale = part(tmp_path) / (storage.QUORUM_STATE + storage.TMP_SUFFIX)
    stale.write_text('{"half": ')
    with LogDir.open(tmp_path) as log:
        assert log.read_quorum_state() == QuorumStateData(leader_epoch=2)
    assert not stale.exists()


# ---------------------------------------------------------------------------------------------- quorum-state


def kafka_quorum_state_fields() -> list[str]:
    """Version-0 field names of Kafka's QuorumStateData, as its JSON converter spells them (camelCase)."""
    for base in (REPO / "spec" / "messages", REPO.parent / "shared" / "reference" / "kafka-messages"):
        path = base / "QuorumStateData.json"
        if path.exists():
            text = "\n".join(
                line for line in path.read_text().splitlines() if not line.lstrip().startswith("//")
            )
            fields = json.loads(text)["fields"]
            names = [f["name"] for f in fields if f["versions"] in ("0", "0+")]
            return [n[0].lower() + n[1:] for n in names]
    raise AssertionError(
        "QuorumStateData.json not found in spec/messages or ../shared/reference/kafka-messages"
    )


def test_quorum_state_json_uses_kafkas_field_names(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as log:
        state = QuorumStateData(leader_epoch=7, leader_id=2, voted_id=2, current_voters=(1, 2, 3))
        log.write_quorum_state(state)
        raw = (part(tmp_path) / storage.QUORUM_STATE).read_text()
        doc = json.loads(raw)
        assert list(doc) == [*kafka_quorum_state_fields(), "data_version"]
        assert doc == {
            "clusterId": "",
            "leaderId": 2,
            "leaderEpoch": 7,
            "votedId": 2,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}],
            "data_version": 0,
        }
        assert " " not in raw  # compact, as Kafka writes it
        assert log.read_quorum_state() == state
    with LogDir.open(tmp_path) as log:  # and it survives a restart
        assert log.read_quorum_state() == state


def test_quorum_state_missing_is_none_and_kafka_v1_is_read(tmp_path: Path) -> None:
    with LogDir.open(tmp_path) as log:
        assert log.read_quorum_state() is None
        (part(tmp_path) / storage.QUORUM_STATE).write_text(
            '{"leaderId":3,"leaderEpoch":9,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
        )
        st_ = log.read_quorum_state()
        assert st_ == QuorumStateData(
            leader_epoch=9, leader_id=3, current_voters=None, voted_directory_id="AAAAAAAAAAAAAAAAAAAAAA"
        )
        log.write_quorum_state(st_)
        assert json.loads((part(tmp_path) / storage.QUORUM_STATE).read_text())["data_version"] == 1


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"leaderId": 1,', "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"leaderId":1,"leaderEpoch":2,"votedId":-1}', "missing field 'data_version'"),
        ('{"leaderEpoch":"2","data_version":0}', "field 'leaderEpoch' must be an integer"),
        ('{"leaderEpoch":2,"data_version":7}', "'data_version' must be 0 or 1, got 7"),
        ('{"leaderEpoch":2,"currentVoters":[1,2],"data_version":0}', "'currentVoters' must be a list of"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_bad_quorum_state_is_a_clear_error(tmp_path: Path, content: str | bytes, problem: str) -> None:
    path = tmp_path / storage.QUORUM_STATE
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(CorruptFileError) as info:
        storage.read_quorum_state_file(path)
    assert str(path) in str(info.value) and problem in str(info.value)
    # No chained JSONDecodeError/UnicodeDecodeError traceback under the message.
    assert info.value.__cause__ is None
    assert info.value.__context__ is None or info.value.__suppress_context__


# ------------------------------------------------------------------------------------------ meta.properties


def test_format_writes_kafka_meta_properties(tmp_path: Path) -> None:
    meta = storage.format(tmp_path / "d", node_id=3, cluster_id="MkU3OEVBNTcwNTJENDM2Qk")
    text = (tmp_path / "d" / "meta.properties").read_text()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == [
        "cluster.id=MkU3OEVBNTcwNTJENDM2Qk",
        f"directory.id={meta.directory_id}",
        "node.id=3",
        "version=1",
    ]
    assert meta.directory_id is not None and len(meta.directory_id) == 22  # Kafka Uuid string form
    with LogDir.open(tmp_path / "d") as log:
        assert log.read_meta() == meta == MetaProperties(3, "MkU3OEVBNTcwNTJENDM2Qk", meta.directory_id)


def test_format_refuses_another_cluster_or_node_and_is_idempotent(tmp_path: Path) -> None:
    first = storage.format_dir(tmp_path, 1, "clusterA")
    before = (tmp_path / "meta.properties").read_bytes()
    with pytest.raises(FormatError, match=r"already formatted for cluster.id 'clusterA'.*'clusterB'"):
        storage.format_dir(tmp_path, 1, "clusterB")
    with pytest.raises(
        FormatError, match=re.escape("already formatted for node.id 1; refusing to re-format for node.id 2")
    ):
        storage.format_dir(tmp_path, 2, "clusterA")
    assert storage.format_dir(tmp_path, 1, "clusterA") == first
    assert (tmp_path / "meta.properties").read_bytes() == before
    with pytest.raises(FormatError, match="cluster id 'has space'"):
        storage.format_dir(tmp_path / "x", 1, "has space")


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("node.id=1\ncluster.id=abc\n", "expected version=1"),
        ("version=0\nbroker.id=1\ncluster.id=abc\n", "expected version=1"),
        ("version=1\nnode.id=one\ncluster.id=abc\n", "expected node.id=<non-negative integer>, got 'one'"),
        ("version=1\nnode.id=1\n", "expected cluster.id="),
        ("version=1\nnode.id=1\ncluster.id=abc\\u12\n", "malformed \\uXXXX escape"),
    ],
)
def test_bad_meta_properties_is_a_clear_error(tmp_path: Path, content: str, problem: str) -> None:
    (tmp_path / "meta.properties").write_text(content)
    with pytest.raises(CorruptFileError) as info:
        storage.read_meta_file(tmp_path / "meta.properties")
    assert str(tmp_path / "meta.properties") in str(info.value) and problem in str(info.value)
    with pytest.raises(CorruptFileError):  # format reads it too and must not overwrite it
        storage.format_dir(tmp_path, 1, "abc")


def test_new_uuid_is_kafka_uuid_form() -> None:
    ids = {storage.new_uuid() for _ in range(50)}
    assert len(ids) == 50
    assert all(len(i) == 22 and all(c.isalnum() or c in "-_" for c in i) for i in ids)


# ---------------------------------------------------------------------------------------------- model test

SEGMENT_BYTES = 700  # small, so random runs roll and cut across segments
INDEX_INTERVAL = 400  # several batches per index entry, so cuts land between entries

op = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4), st.integers(0, 2), st.integers(1, 120)),
    st.tuples(st.just("truncate"), st.integers(0, 100)),
    st.tuples(st.just("reopen")),
    st.tuples(st.just("crash_tail"), st.integers(1, 40)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=25))
def test_random_appends_truncates_reopens_match_model(ops: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        log = LogDir.open(d, segment_bytes=SEGMENT_BYTES, index_interval_bytes=INDEX_INTERVAL)
        model: list[RecordBatch] = []
        try:
            for step in ops:
                kind = step[0]
                if kind == "append":
                    _, n, epoch_bump, size = step
                    epoch = (model[-1].partition_leader_epoch if model else 0) + epoch_bump
                    end = model[-1].last_offset + 1 if model else 0
                    b = data_batch(end, epoch, [bytes([len(model) % 256]) * size] * n)
                    log.append([b])
                    log.flush()
                    model.append(b)
                elif kind == "truncate":
                    new_end = log.truncate_to(step[1])
                    model = [b for b in model if b.last_offset < step[1]]
                    assert new_end == (model[-1].last_offset + 1 if model else 0)
                elif kind == "reopen":
                    log.close()
                    log = LogDir.open(d, segment_bytes=SEGMENT_BYTES, index_interval_bytes=INDEX_INTERVAL)
                elif kind == "crash_tail" and model:
                    # Half-written unflushed batch after the durable log: recovery must drop exactly it.
                    log.close()
                    active = sorted(part(d).glob("*.log"))[-1]
                    junk = encode_batch(data_batch(model[-1].last_offset + 1, 99, [b"z" * 50]))
                    with open(active, "ab") as fh:
                        fh.write(junk[: min(step[1], len(junk) - 1)])
                    log = LogDir.open(d, segment_bytes=SEGMENT_BYTES, index_interval_bytes=INDEX_INTERVAL)
                assert log.end_offset == (model[-1].last_offset + 1 if model else 0)
            log.close()
            # The index and checkpoint kept up incrementally (appends, rolls, truncations) must equal what
            # recovery recomputes from the segments, which would otherwise rewrite them.
            derived = {p.name: p.read_bytes() for p in part(d).iterdir() if not p.name.endswith(".log")}
            log = LogDir.open(d, segment_bytes=SEGMENT_BYTES, index_interval_bytes=INDEX_INTERVAL)
            assert {
                p.name: p.read_bytes() for p in part(d).iterdir() if not p.name.endswith(".log")
            } == derived
            assert log.read_all() == model
            assert log.epoch_entries == epochs_of(model) == checkpoint_on_disk(d)
        finally:
            log.close()


def test_append_writes_the_given_bytes_and_reads_them_back(tmp_path: Path) -> None:
    """The node hands storage each batch's bytes as the core's log keeps them (encoded once on the leader,
    as received on a follower); they go to the segment unchanged and come back at start-up."""
    batches = [data_batch(0, 1, [b"a", b"b"]), data_batch(2, 1, [b"c"])]
    # Bytes the storage could not have produced from ``batches`` (another timestamp): proof it writes them.
    stamped = [data_batch(b.base_offset, 1, [r.value or b"" for r in b.records], timestamp=77) for b in batches]
    given = [encode_batch(b) for b in stamped]
    with LogDir.open(tmp_path) as log:
        log.append(batches, given)
        log.flush()
        with pytest.raises(StorageError, match="encoded forms"):
            log.append([data_batch(3, 1, [b"d"])], [])
    assert (part(tmp_path) / "00000000000000000000.log").read_bytes() == b"".join(given)
    with LogDir.open(tmp_path) as log:
        assert list(log.iter_encoded()) == list(zip(stamped, given, strict=True))


def test_one_batch_appends_with_bytes_write_what_a_whole_list_writes(tmp_path: Path) -> None:
    """A commit hands storage one batch with its bytes (``LogDir._append_one``): across segment rolls, index
    entries and epoch changes, the files, index and checkpoint are those of the same batches in one call, and
    a bad single batch is refused as ``append`` refuses it, with nothing written."""
    batches, off = [], 0
    for i in range(40):
        b = data_batch(off, 1 + i // 7, [b"v" * 100, b"w" * 60])
        batches.append(b)
        off = b.last_offset + 1
    one, whole = tmp_path / "one", tmp_path / "whole"
    with LogDir.open(one, segment_bytes=1500, index_interval_bytes=400) as log:
        for b in batches:
            log.append((b,), (encode_batch(b),))
        log.flush()
        assert log.end_offset == off and log.epoch_entries == epochs_of(batches)
        size = (part(one) / segment_files(one)[-1]).stat().st_size
        for bad, problem in [(data_batch(off + 1, 6, [b"x"]), f"base offset {off + 1} is not the log end"),
                             (data_batch(off, 5, [b"x"]), "leader epoch 5, below the log's last epoch 6"),
                             (dataclasses.replace(data_batch(off, 6, [b"x"]), records=()), "has no records")]:
            with pytest.raises(StorageError, match=problem):
                log.append((bad,), (encode_batch(bad) if bad.records else b"",))
        assert log.end_offset == off and (part(one) / segment_files(one)[-1]).stat().st_size == size
    with LogDir.open(whole, segment_bytes=1500, index_interval_bytes=400) as log:
        log.append(batches)
        log.flush()
    files = sorted(p.name for p in part(whole).iterdir())
    assert len(segment_files(whole)) > 3 and sorted(p.name for p in part(one).iterdir()) == files
    for name in files:
        assert (part(one) / name).read_bytes() == (part(whole) / name).read_bytes(), name
    with LogDir.open(one, segment_bytes=1500, index_interval_bytes=400) as log:
        assert log.read_all() == batches and log.epoch_entries == epochs_of(batches) == checkpoint_on_disk(one)


@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_one_batch_appends_index_a_batch_that_reaches_the_interval_exactly(tmp_path: Path, extra: int) -> None:
    """``append``'s one-batch path writes no index entry only while the bytes since the last one stay below
    index.interval.bytes: a batch that reaches it exactly is indexed (``_note_batch``'s ``>=``), as in one call."""
    batches, off = [], 0
    for i in range(9):
        b = data_batch(off, 1, [bytes([i]) * 50])
        batches.append(b)
        off = b.last_offset + 1
    size = len(encode_batch(batches[0]))
    assert {len(encode_batch(b)) for b in batches} == {size}
    interval = 3 * size + extra
    one, whole = tmp_path / "one", tmp_path / "whole"
    with LogDir.open(one, index_interval_bytes=interval) as log:
        for b in batches:
            log.append((b,), (encode_batch(b),))
        log.flush()
        entries = log.index_entry_count
    with LogDir.open(whole, index_interval_bytes=interval) as log:
        log.append(batches)
        log.flush()
        assert log.index_entry_count == entries == (3 if extra <= 0 else 2)
    for name in sorted(p.name for p in part(whole).iterdir()):
        assert (part(one) / name).read_bytes() == (part(whole) / name).read_bytes(), name
