"""KIP-853 on disk: the bootstrap checkpoint ``00000000000000000000-0000000000.checkpoint`` (read, checked, never a
snapshot of the log), snapshots whose header batch carries KRaftVersionRecord/VotersRecord, and quorum-state v1.

Kafka: ``Formatter.writeDynamicQuorumSnapshot``, ``Snapshots.BOOTSTRAP_SNAPSHOT_ID`` (kept out of Fetch and
FetchSnapshot: ``KafkaRaftClientSnapshotTest.testFetchSnapshotRequestBootstrapSnapshot``,
``KafkaRaftClientReconfigTest.testBootstrapCheckpointIsNotReturnedOnFetch``), ``RecordsSnapshotWriter.Builder``
(``setKraftVersion``/``setVoterSet``), ``FileQuorumStateStore.writeElectionState``
(``KRaftVersion.quorumStateVersion``).
Real files throughout.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from kraft_tck.reference.bootstrap import (
    BOOTSTRAP_CHECKPOINT,
    METADATA_PARTITION_DIR,
    BootstrapError,
    DynamicVoter,
    dynamic_quorum_snapshot,
    read_bootstrap_checkpoint,
    read_bootstrap_voters,
    write_dynamic_quorum_snapshot,
)
from kraft_tck.reference.messages import SnapshotId
from kraft_tck.reference.snapshot import (
    BOOTSTRAP_SNAPSHOT_ID,
    SnapshotNotFoundError,
    SnapshotStore,
    decode_snapshot,
    encode_snapshot,
)
from kraft_tck.reference.storage import ZERO_UUID_STRING, LogDir, QuorumStateData, read_quorum_state_file
from kraft_tck.spec.records import ControlType, RecordBatch, decode_batches, decode_control, encode_batches

DIR_A, DIR_B, DIR_C = "wZoXPqWoSu6F6c8MkmdyAg", "_KWDkTahTVaiVVVTaugNew", "J8aAPcfLQt2bqs1JT_rMgQ"
VOTERS = [DynamicVoter(1, "localhost", 9093, DIR_A), DynamicVoter(2, "::1", 9094, DIR_B),
          DynamicVoter(3, "host-c", 9095, DIR_C)]


def formatted(tmp_path: Path, voters: list[DynamicVoter] = VOTERS) -> Path:
    data = tmp_path / "data"
    write_dynamic_quorum_snapshot(data, voters, "CONTROLLER")
    return data


def bootstrap_file(data: Path) -> Path:
    return data / METADATA_PARTITION_DIR / BOOTSTRAP_CHECKPOINT


def voters_body(ids: tuple[int, ...] = (1, 2)) -> dict[str, object]:
    dirs = {1: DIR_A, 2: DIR_B, 3: DIR_C}
    import base64

    return {"Version": 0, "Voters": [
        {"VoterId": i, "VoterDirectoryId": uuid.UUID(bytes=base64.urlsafe_b64decode(dirs[i] + "==")),
         "Endpoints": [{"Name": "CONTROLLER", "Host": "127.0.0.1", "Port": 9090 + i}],
         "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}} for i in ids]}


# ------------------------------------------------------------------------------------------ the bootstrap checkpoint


def test_read_bootstrap_voters_gives_the_initial_set(tmp_path: Path) -> None:
    """KafkaRaftClientReconfigTest.testFollowerReadsKRaftBootstrapRecords: the voter set of the (0, 0) checkpoint."""
    data = formatted(tmp_path)
    found = read_bootstrap_checkpoint(data)
    assert found is not None and found.kraft_version == 1
    voters = read_bootstrap_voters(data)
    assert voters is not None and sorted(voters.ids()) == [1, 2, 3]
    node = voters.node(2)
    assert node is not None and node.key.directory_id == DIR_B
    assert [(e.name, e.host, e.port) for e in node.endpoints] == [("CONTROLLER", "::1", 9094)]
    assert (node.kraft_min, node.kraft_max) == (0, 1)
    assert read_bootstrap_voters(tmp_path / "nothing-here") is None


def _rewrite(path: Path, batches: list[RecordBatch]) -> None:
    path.write_bytes(encode_batches(batches))


@pytest.mark.parametrize(("damage", "problem"), [
    ("truncate", "not a valid bootstrap checkpoint: torn"),
    ("flip", "not a valid bootstrap checkpoint: CRC mismatch"),
    ("no-voters", "has no VotersRecord"),
    ("kraft-0", "has no KRaftVersionRecord with kraft.version 1"),
    ("data", "holds 1 data record(s)"),
])
def test_a_bad_bootstrap_checkpoint_is_refused_naming_the_file(tmp_path: Path, damage: str, problem: str) -> None:
    data = formatted(tmp_path)
    path = bootstrap_file(data)
    raw = path.read_bytes()
    batches = decode_batches(raw)
    header, footer = batches
    if damage == "truncate":
        path.write_bytes(raw[:-5])
    elif damage == "flip":
        path.write_bytes(raw[:70] + bytes([raw[70] ^ 0xFF]) + raw[71:])
    elif damage == "no-voters":
        _rewrite(path, [RecordBatch(0, 0, header.records[:2], is_control=True),
                        RecordBatch(2, 0, footer.records, is_control=True)])
    elif damage == "kraft-0":
        _rewrite(path, [RecordBatch(0, 0, header.records[:1], is_control=True),
                        RecordBatch(1, 0, footer.records, is_control=True)])
    else:
        from kraft_tck.spec.records import data_batch

        _rewrite(path, [header, data_batch(3, 0, [b"x"]), RecordBatch(4, 0, footer.records, is_control=True)])
    with pytest.raises(BootstrapError) as info:
        read_bootstrap_voters(data)
    assert str(info.value).startswith(f"{path}: ") and problem in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


def test_the_snapshot_store_never_lists_serves_or_cleans_the_bootstrap_checkpoint(tmp_path: Path) -> None:
    """Snapshots.BOOTSTRAP_SNAPSHOT_ID is not the log's: not the latest snapshot (so no Fetch answer names it), not
    served by FetchSnapshot (SNAPSHOT_NOT_FOUND), not deleted by cleaning, not set aside when this store cannot
    read it."""
    data = formatted(tmp_path)
    path = bootstrap_file(data)
    before = path.read_bytes()
    with LogDir.open(data, fsync=False) as log:
        store = log.snapshots
        assert store.ids() == [] and store.latest() is None and BOOTSTRAP_SNAPSHOT_ID not in store
        assert log.latest_snapshot_id is None
        with pytest.raises(SnapshotNotFoundError):
            store.read_chunk(BOOTSTRAP_SNAPSHOT_ID, 0, 100)
        with pytest.raises(SnapshotNotFoundError):
            store.read(BOOTSTRAP_SNAPSHOT_ID)
        from kraft_tck.spec.records import data_batch

        log.append([data_batch(0, 1, [b"a", b"b"]), data_batch(2, 1, [b"c"])])
        sid = SnapshotId(3, 1)
        log.create_snapshot(sid, [[b"state"]], kraft_version=1, voters=voters_body((1, 2, 3)))
        assert store.ids() == [sid]
        assert log.delete_before_snapshot(sid) and log.start_offset == 3
        assert store.ids() == [sid]
    assert path.read_bytes() == before  # cleaning went past it: still there, unchanged
    path.write_bytes(before[:-3])  # damaged: the store leaves it alone (bootstrap.py refuses it by name)
    again = SnapshotStore.open(data / METADATA_PARTITION_DIR, fsync=False)
    assert again.quarantined == [] and again.ids() == [sid] and path.exists()


def test_a_real_snapshot_named_0_0_is_not_written_over_the_bootstrap_checkpoint(tmp_path: Path) -> None:
    data = formatted(tmp_path)
    before = bootstrap_file(data).read_bytes()
    store = SnapshotStore.open(data / METADATA_PARTITION_DIR, fsync=False)
    from kraft_tck.reference.snapshot import SnapshotExistsError

    with pytest.raises(SnapshotExistsError):
        store.write(BOOTSTRAP_SNAPSHOT_ID, [])
    assert bootstrap_file(data).read_bytes() == before and store.ids() == []


# ---------------------------------------------------------------------------------------------- snapshot header


def header_types(data: bytes) -> list[ControlType]:
    first = decode_batches(data)[0]
    return [decode_control(r)[0] for r in first.records]


def test_snapshot_header_batch_carries_kraft_version_and_voters(tmp_path: Path) -> None:
    """RecordsSnapshotWriter.Builder.build: SnapshotHeader, then KRaftVersion (kraft.version >= 1) and Voters (when a
    set is given) in the same control batch; the data records follow at the next offset; the reader returns both."""
    store = SnapshotStore.open(tmp_path / "p", fsync=False)
    sid = SnapshotId(10, 2)
    written = store.write(sid, [[b"r1", b"r2"]], kraft_version=1, voters=voters_body((1, 2)))
    raw = store.path(sid).read_bytes()
    assert header_types(raw) == [ControlType.SNAPSHOT_HEADER, ControlType.KRAFT_VERSION, ControlType.KRAFT_VOTERS]
    assert [b.base_offset for b in decode_batches(raw)] == [0, 3, 5]
    snap = store.read(sid)
    assert snap.kraft_version == 1 and written.kraft_version == 1
    assert snap.voters is not None and sorted(snap.voters.ids()) == [1, 2]
    assert list(snap.values()) == [b"r1", b"r2"]
    only_version = encode_snapshot(SnapshotId(4, 1), [[b"x"]], kraft_version=1)
    assert header_types(only_version) == [ControlType.SNAPSHOT_HEADER, ControlType.KRAFT_VERSION]
    assert decode_snapshot(tmp_path / "x", only_version, SnapshotId(4, 1)).voters is None


def test_a_kraft_version_0_snapshot_is_what_it_was(tmp_path: Path) -> None:
    """kraft.version 0 (the static quorum): only the SnapshotHeaderRecord, byte for byte as before KIP-853; a voter
    set with kraft.version 0 is refused as Kafka's builder refuses it."""
    plain = encode_snapshot(SnapshotId(4, 1), [[b"x"]], last_contained_log_timestamp=7, timestamp_ms=9)
    assert header_types(plain) == [ControlType.SNAPSHOT_HEADER]
    snap = decode_snapshot(tmp_path / "x", plain, SnapshotId(4, 1))
    assert (snap.kraft_version, snap.voters) == (0, None)
    with pytest.raises(ValueError, match=r"not expected when the kraft\.version is 0"):
        encode_snapshot(SnapshotId(4, 1), [], voters=voters_body())
    store = SnapshotStore.open(tmp_path / "p", fsync=False)
    with pytest.raises(ValueError):
        store.write(SnapshotId(4, 1), [], voters=voters_body())
    assert list((tmp_path / "p").iterdir()) == []  # refused before any file


def test_the_bootstrap_checkpoint_bytes_are_a_snapshot_the_reader_accepts() -> None:
    raw = dynamic_quorum_snapshot(VOTERS, "CONTROLLER", timestamp_ms=1234)
    snap = decode_snapshot(Path("boot"), raw, BOOTSTRAP_SNAPSHOT_ID)
    assert snap.last_contained_log_timestamp == 1234 and snap.batches == () and snap.kraft_version == 1
    assert snap.voters is not None and sorted(snap.voters.ids()) == [1, 2, 3]


# ---------------------------------------------------------------------------------------------- quorum-state v1


def test_quorum_state_is_written_at_the_kraft_version(tmp_path: Path) -> None:
    """FileQuorumStateStore.writeElectionState: data_version = kraft.version; v1 carries votedDirectoryId (the zero
    Uuid when the vote has none, ElectionState.toQuorumStateData) and no currentVoters."""
    from kraft_tck.reference.io import ElectionState

    with LogDir.open(tmp_path, fsync=False) as log:
        path = log.partition_dir / "quorum-state"
        voted = ElectionState(leader_epoch=5, leader_id=-1, voted_id=2, voted_directory_id=DIR_B)
        log.write_quorum_state(QuorumStateData.from_election(voted, kraft_version=1))
        assert json.loads(path.read_text()) == {"leaderId": -1, "leaderEpoch": 5, "votedId": 2,
                                                "votedDirectoryId": DIR_B, "data_version": 1}
        back = read_quorum_state_file(path)
        assert back is not None and back.voted_directory == DIR_B and back.voted_id == 2
        leader = ElectionState(leader_epoch=6, leader_id=1, voted_id=-1)
        log.write_quorum_state(QuorumStateData.from_election(leader, kraft_version=1))
        assert json.loads(path.read_text())["votedDirectoryId"] == ZERO_UUID_STRING
        back = read_quorum_state_file(path)
        assert back is not None and back.voted_directory is None
        log.write_quorum_state(QuorumStateData.from_election(voted, kraft_version=0, current_voters=(1, 2, 3)))
        doc = json.loads(path.read_text())
        assert doc["data_version"] == 0 and "votedDirectoryId" not in doc
        assert doc["currentVoters"] == [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}]
