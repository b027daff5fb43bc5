"""The harness's own snapshot code (conformance/snapshots.py, VLog.take_snapshot / validate_fetch): what it
builds is a snapshot by Kafka's layout, what it reads catches every broken rule, and a virtual leader answers
Fetch with SnapshotId exactly where Kafka's leader does."""

from __future__ import annotations

import pytest
from kraft_tck.conformance import snapshots as S
from kraft_tck.conformance.virtual import METADATA_VERSION_VALUE, NOOP_VALUE, HarnessError, VLog
from kraft_tck.spec.records import ControlType, control_batch, data_batch, encode_batches


def test_a_built_snapshot_reads_back_whole() -> None:
    snap = S.build_snapshot(10, 3, [METADATA_VERSION_VALUE], last_timestamp=1234)
    reading = S.read_snapshot(snap.data)
    assert reading.ok, reading.problems
    assert [b.base_offset for b in reading.batches] == [0, 1, 2]
    assert {b.partition_leader_epoch for b in reading.batches} == {3}
    assert reading.header == {"Version": 0, "LastContainedLogTimestamp": 1234} and reading.footer == {"Version": 0}
    assert reading.records == {"FeatureLevelRecord": 1} and not reading.undecodable


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:], "CRC32C mismatch"),  # the CRC field of the header batch
        (lambda d: d[:70] + bytes([d[70] ^ 1]) + d[71:], "CRC32C mismatch"),  # a byte the CRC covers
        (lambda d: d[:-5], "undecodable"),  # torn in the footer batch
        (lambda d: b"", "no record batch"),
    ],
)
def test_a_damaged_snapshot_is_refused(damage: object, problem: str) -> None:
    data = S.build_snapshot(10, 3, [METADATA_VERSION_VALUE]).data
    reading = S.read_snapshot(damage(data))  # type: ignore[operator]
    assert not reading.ok and any(problem in p for p in reading.problems), reading.problems


def test_header_first_footer_last_and_increasing_offsets_are_required() -> None:
    header = control_batch(0, 3, ControlType.SNAPSHOT_HEADER, {"Version": 0, "LastContainedLogTimestamp": 0})
    footer = control_batch(2, 3, ControlType.SNAPSHOT_FOOTER, {"Version": 0})
    data = data_batch(1, 3, [NOOP_VALUE])
    no_header = S.read_snapshot(encode_batches([data, footer]))
    assert any("first record is not a SnapshotHeaderRecord" in p for p in no_header.problems)
    no_footer = S.read_snapshot(encode_batches([header, data]))
    assert any("last record is not a SnapshotFooterRecord" in p for p in no_footer.problems)
    early = control_batch(1, 3, ControlType.SNAPSHOT_FOOTER, {"Version": 0})
    late = control_batch(3, 3, ControlType.SNAPSHOT_FOOTER, {"Version": 0})
    early_footer = S.read_snapshot(encode_batches([header, early, data_batch(2, 3, [NOOP_VALUE]), late]))
    assert any("SnapshotFooterRecord at batch 1" in p for p in early_footer.problems)
    backwards = S.read_snapshot(encode_batches([header, data_batch(0, 3, [NOOP_VALUE]), footer]))
    assert any("not after the previous batch" in p for p in backwards.problems)


def test_fetch_snapshot_bodies_encode_at_both_versions() -> None:
    from kraft_tck.spec import codec

    for version in (0, 1):
        req = S.fetch_snapshot_request("cid", 2, 5, (10, 3), 83, 128)
        _, body = codec.decode_request(codec.encode_request(S.FETCH_SNAPSHOT, version, 7, "x", req)[4:])
        asked = body["Topics"][0]["Partitions"][0]
        assert (body["ClusterId"], body["MaxBytes"], asked["Position"]) == ("cid", 128, 83)
        assert S.snapshot_id_of(asked) == (10, 3)
        resp = S.fetch_snapshot_response(snapshot_id=(10, 3), leader=(2, 5), size=249, position=83, chunk=b"abc")
        _, back = codec.decode_response(S.FETCH_SNAPSHOT, version, codec.encode_response(S.FETCH_SNAPSHOT, version, 7,
                                                                                          resp)[4:])
        part = back["Topics"][0]["Partitions"][0]
        assert S.snapshot_id_of(part) == (10, 3) and S.chunk_of(part) == b"abc" and part["Position"] == 83


def harness_log() -> VLog:
    log = VLog()
    log.append_metadata(1, 3)  # LeaderChange at 0, records 1..3
    log.append_metadata(2, 2)  # LeaderChange at 4, records 5..6
    return log


def test_a_snapshot_of_the_harness_log_moves_its_start() -> None:
    log = harness_log()
    snap = log.take_snapshot(5)
    assert snap.id == (5, 2) and log.start == 5 and log.snapshot == snap
    assert [b.base_offset for b in log.read(0)] == [5, 6]  # nothing below the log start is served
    assert S.read_snapshot(snap.data).records == {"FeatureLevelRecord": 1}
    with pytest.raises(HarnessError):
        log.take_snapshot(log.committed + 1)
    log.forget_snapshot()
    assert log.start == 0 and log.snapshot is None and log.read(0)[0].base_offset == 0


def test_the_virtual_leader_answers_snapshot_id_where_kafkas_leader_does() -> None:
    # ReplicatedLog.validateOffsetAndEpoch and KafkaRaftClient.tryCompleteFetchRequest (KafkaRaftClientSnapshotTest:
    # testFetchRequestOffsetLessThanLogStart, testFetchRequestOffsetAtZero, testFetchRequestAtLogStartOffsetWith*,
    # testFetchRequestWithLastFetchedEpochLessThanOldestSnapshot)
    log = harness_log()
    assert log.validate_fetch(0, 0) == ("valid", None)  # no snapshot: from 0 on
    log.take_snapshot(5)
    assert log.validate_fetch(0, 0) == ("snapshot", (5, 2))
    assert log.validate_fetch(3, 1) == ("snapshot", (5, 2))  # below the log start
    assert log.validate_fetch(5, 1) == ("snapshot", (5, 2))  # at it, another epoch than the snapshot's
    assert log.validate_fetch(5, 2) == ("valid", None)
    assert log.validate_fetch(7, 2) == ("valid", None)
    assert log.validate_fetch(6, 1) == ("snapshot", (5, 2))  # an epoch older than the snapshot's
    assert log.validate_fetch(9, 2) == ("diverging", (2, 7))
