"""The state machine's snapshot (KIP-630): the registry written as metadata records and read back, and the rule
that decides when a node snapshots.

A snapshot at offset N must hold exactly the state of the committed log replayed to N (KIP-630 "Snapshot
Format": "the state of the replicated state machine at ... offset"), so every test here compares a registry
rebuilt from a snapshot with the one the log gives, after fencing, controlled shutdown, unregistration and
re-registration, and checks that replaying the rest of the log on top of the snapshot lands where the whole
log does. The trigger follows Kafka's ``SnapshotGenerator.publishLogDelta``.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from kraft_tck.reference.broker_driver import BrokerDriver, SnapshotTrigger, batch_size, sized
from kraft_tck.reference.core import CLUSTER_ID_KEY
from kraft_tck.reference.io import CoreStatus
from kraft_tck.reference.registry import (
    CHANGE,
    FEATURE_LEVEL,
    FENCE,
    REGISTER,
    UNFENCE,
    UNREGISTER,
    BrokerRegistry,
    BrokerState,
    RegistryError,
    encode,
    rebuild,
)
from kraft_tck.spec import codec
from kraft_tck.spec.records import ControlType, Record, RecordBatch, control_batch, data_batch, encode_batch

INC_A = uuid.UUID(int=0xA)
INC_B = uuid.UUID(int=0xB)
Rec = tuple[str, dict[str, Any]]


def register(broker_id: int, epoch: int, inc: uuid.UUID = INC_A) -> Rec:
    return REGISTER, {"BrokerId": broker_id, "IncarnationId": inc, "BrokerEpoch": epoch,
                      "EndPoints": [{"Name": "PLAINTEXT", "Host": f"b{broker_id}", "Port": 9092 + broker_id,
                                     "SecurityProtocol": 0}],
                      "Features": [], "Rack": None if broker_id % 2 else "r1"}


def feature(name: str, level: int) -> Rec:
    return FEATURE_LEVEL, {"Name": name, "FeatureLevel": level}


def value(rec: Rec) -> bytes:
    name, body = rec
    if name == FEATURE_LEVEL:
        return codec.encode_metadata_record(name, 0, body)
    return encode(name, 1 if name in (REGISTER, CHANGE) else 0, body)


def a_log() -> tuple[list[RecordBatch], list[int]]:
    """A log of every kind of record the registry keeps, and its batch boundaries.

    offset 0 leader change (control), 1 the cluster-id record, 2 metadata.version, 3.. broker records."""
    batches: list[RecordBatch] = [control_batch(0, 1, ControlType.LEADER_CHANGE,
                                                {"Version": 0, "LeaderId": 1, "Voters": [], "GrantingVoters": []})]
    batches.append(RecordBatch(1, 1, (Record(0, b"cluster-AAAA", CLUSTER_ID_KEY),)))
    # Offsets from 2 on; broker epochs are the offsets of their RegisterBrokerRecord.
    plan: list[list[Rec]] = [
        [feature("metadata.version", 7)],                       # 2
        [register(1, 3), register(2, 4)],                       # 3, 4
        [(UNFENCE, {"Id": 1, "Epoch": 3}), register(3, 6)],     # 5, 6
        [(UNFENCE, {"Id": 3, "Epoch": 6}), feature("x.feature", 2)],  # 7, 8
        [(CHANGE, {"BrokerId": 3, "BrokerEpoch": 6, "InControlledShutdown": 1})],   # 9: Stopping
        [(FENCE, {"Id": 1, "Epoch": 3})],                       # 10
        [(CHANGE, {"BrokerId": 3, "BrokerEpoch": 6, "Fenced": 1})],  # 11: Offline
        [(UNREGISTER, {"BrokerId": 2, "BrokerEpoch": 4}), feature("x.feature", 0)],  # 12, 13
        [register(1, 14, INC_B)],                               # 14: re-registered, Fenced
    ]
    offset = 2
    for entry in plan:
        batches.append(data_batch(offset, 2, [value(r) for r in entry]))
        offset += len(entry)
    batches.append(data_batch(offset, 2, [b"workload" * 4] * 3))  # not metadata: skipped by the registry
    bounds = [b.last_offset + 1 for b in batches]
    return batches, bounds


def snapshot_of(reg: BrokerRegistry) -> list[Record]:
    """The registry's snapshot records as a snapshot reader hands them over (offset deltas from 0)."""
    return [Record(i, v, k) for i, (k, v) in enumerate(reg.snapshot_records())]


def test_the_log_used_here_reaches_every_broker_state() -> None:
    batches, bounds = a_log()
    reg = rebuild(batches, bounds[-1])
    assert {b.broker_id: b.state for b in reg} == {1: BrokerState.FENCED, 3: BrokerState.OFFLINE}
    assert reg.get(1) is not None and reg.get(1).incarnation_id == INC_B
    assert rebuild(batches, 10).get(3).state == BrokerState.STOPPING
    assert reg.features == {"metadata.version": 7} and reg.cluster_id == "cluster-AAAA"
    assert rebuild(batches, 9).features == {"metadata.version": 7, "x.feature": 2}


def test_a_snapshot_at_every_batch_boundary_rebuilds_the_same_state() -> None:
    batches, bounds = a_log()
    for end in [0, *bounds]:
        from_log = rebuild(batches, end)
        from_snapshot = BrokerRegistry.from_snapshot(end, snapshot_of(from_log))
        assert from_snapshot == from_log, end
        assert from_snapshot.next_offset == end


def test_the_log_after_a_snapshot_lands_where_the_whole_log_does() -> None:
    """Restart from a snapshot, then the log after it (and a follower's install, then its fetches)."""
    batches, bounds = a_log()
    whole = rebuild(batches, bounds[-1])
    for end in bounds:
        reg = BrokerRegistry.from_snapshot(end, snapshot_of(rebuild(batches, end)))
        _changes, errors = reg.apply_committed([b for b in batches if b.base_offset >= end], bounds[-1])
        assert errors == [] and reg == whole, end


def test_snapshot_records_are_the_logs_records() -> None:
    """Features first (metadata.version leading, as Kafka's MetadataImage.write), the cluster-id record with its
    key, then one RegisterBrokerRecord per broker carrying its state; nothing else."""
    batches, _bounds = a_log()
    reg = rebuild(batches, 10)
    records = reg.snapshot_records()
    decoded = [(k, codec.decode_metadata_record(v) if k is None else v) for k, v in records]
    assert decoded[0] == (None, (FEATURE_LEVEL, 0, {"Name": "metadata.version", "FeatureLevel": 7}))
    assert decoded[1] == (None, (FEATURE_LEVEL, 0, {"Name": "x.feature", "FeatureLevel": 2}))
    assert decoded[2] == (CLUSTER_ID_KEY, b"cluster-AAAA")
    brokers = [d[1] for d in decoded[3:]]
    assert [(n, v) for n, v, _ in brokers] == [(REGISTER, 1)] * 3
    by_id = {b["BrokerId"]: b for _, _, b in brokers}
    assert by_id[1]["Fenced"] is False and by_id[1]["BrokerEpoch"] == 3
    assert by_id[2]["Fenced"] is True and by_id[2]["Rack"] == "r1"
    assert by_id[3]["InControlledShutdown"] is True and by_id[3]["Fenced"] is False  # Stopping


def test_an_empty_state_has_an_empty_snapshot() -> None:
    assert BrokerRegistry().snapshot_records() == []
    assert BrokerRegistry.from_snapshot(0, []) == BrokerRegistry()


def test_a_snapshot_from_another_implementation_may_hold_other_records() -> None:
    """Records the registry does not keep (NoOpRecord, the workload) are skipped, as in the log; broker records
    other than registrations apply on top, in order."""
    noop = codec.encode_metadata_record("NoOpRecord", 0, {})
    records = [Record(0, noop), Record(1, b"workload"), Record(2, value(register(5, 40))),
               Record(3, value((UNFENCE, {"Id": 5, "Epoch": 40})))]
    reg = BrokerRegistry.from_snapshot(60, records)
    assert reg.get(5) is not None and reg.get(5).state == BrokerState.ONLINE
    assert reg.next_offset == 60


def test_a_snapshot_record_that_does_not_apply_is_refused() -> None:
    with pytest.raises(RegistryError, match="broker 9"):
        BrokerRegistry.from_snapshot(10, [Record(0, value((FENCE, {"Id": 9, "Epoch": 1})))])


def test_loading_a_snapshot_replaces_the_drivers_registry_in_place() -> None:
    """The controller holds the registry object: a load must not leave it reading the old one."""
    batches, bounds = a_log()
    driver = BrokerDriver(9000)
    driver.commit(5, sized(lambda o: [b for b in batches if b.last_offset >= o]), lambda o: 2)
    held = driver.controller.registry
    driver.load_snapshot(bounds[-1], snapshot_of(rebuild(batches, bounds[-1])))
    assert driver.registry is held and driver.controller.registry is held
    assert driver.applied_offset == bounds[-1] and held == rebuild(batches, bounds[-1])
    # ... and the registry then goes on from the snapshot's end, as after a follower's install.
    more = data_batch(bounds[-1], 3, [value(register(7, bounds[-1]))])
    driver.commit(bounds[-1] + 1, sized(lambda o: [more]), lambda o: 3)
    assert driver.registry.get(7) is not None


def test_committed_bytes_are_the_applied_batches_sizes() -> None:
    """What counts towards metadata.log.max.record.bytes.between.snapshots: each batch once, when applied whole."""
    batches, bounds = a_log()
    driver = BrokerDriver(9000)
    status = CoreStatus(1, "Follower", 2, 2, -1, bounds[-1], 0, bounds[-1], -1, None)
    assert status.is_leader is False
    seen = 0
    for hw in range(0, bounds[-1] + 1):
        done = driver.commit(hw, sized(lambda o: [b for b in batches if b.last_offset >= o]), lambda o: 2)
        seen += done.bytes
        whole = [b for b in batches if b.last_offset < hw]
        assert seen == sum(len(encode_batch(b)) for b in whole), hw
        if hw:  # a snapshot may end here only at a batch boundary
            assert driver.applied_aligned == (hw in bounds), hw
    assert all(batch_size(b) == len(encode_batch(b)) for b in batches)


# ---------------------------------------------------------------------------------------------- the trigger

def test_bytes_trigger_at_a_batch_boundary_only() -> None:
    t = SnapshotTrigger(max_new_record_bytes=1000, max_interval_ms=0)
    t.committed(999, 10, aligned=True)
    assert t.due(0) is None
    t.committed(1, 12, aligned=False)  # enough bytes, but the applied offset is inside a batch
    assert t.due(0) is None
    t.committed(0, 13, aligned=True)
    assert t.due(0) == "we have replayed at least 1000 bytes"
    t.snapshotted(13, 5)
    assert t.due(5) is None and t.bytes_since == 0 and t.last_snapshot_offset == 13


def test_time_trigger_needs_committed_data_not_in_the_latest_snapshot() -> None:
    t = SnapshotTrigger(max_new_record_bytes=10**9, max_interval_ms=1000, last_snapshot_ms=0)
    assert t.due(5000) is None and t.next_check_ms() is None  # nothing committed: nothing to snapshot
    t.committed(10, 3, aligned=True)
    assert t.next_check_ms() == 1000
    assert t.due(999) is None
    assert t.due(1000) == "we have waited at least 1000 ms"
    t.snapshotted(3, 1000)
    assert t.due(10_000) is None  # the snapshot holds everything committed


def test_time_trigger_off_at_zero() -> None:
    t = SnapshotTrigger(max_new_record_bytes=10**9, max_interval_ms=0)
    t.committed(10, 3, aligned=True)
    assert t.due(10**12) is None and t.next_check_ms() is None


def test_an_installed_or_loaded_snapshot_resets_the_counters_and_is_never_snapshotted_again() -> None:
    t = SnapshotTrigger(max_new_record_bytes=100, max_interval_ms=0)
    t.committed(500, 20, aligned=True)
    t.snapshotted(50, 7)  # a follower installed the leader's snapshot ending at 50
    assert t.applied_offset == 50 and t.due(7) is None
    t.committed(100, 50, aligned=True)  # bytes, but nothing past the snapshot
    assert t.due(7) is None
    t.committed(0, 51, aligned=True)
    assert t.due(7) is not None


# ---------------------------------------------------------------------------------------------- the settings

BASE = {"node.id": "1", "listeners": "CONTROLLER://127.0.0.1:9093", "controller.quorum.voters": "1@127.0.0.1:9093",
        "log.dirs": "/tmp/x"}


def test_snapshot_settings_have_kafkas_names_and_defaults() -> None:
    """KRaftConfigs (Kafka 4.0-SNAPSHOT): 20 MiB between snapshots, 1 hour, 1 GiB segments, 100 MiB and 7 days."""
    from kraft_tck.reference.config import NodeConfig

    cfg = NodeConfig.from_properties(BASE)
    assert (cfg.snapshot_max_new_record_bytes, cfg.snapshot_max_interval_ms, cfg.log_segment_bytes,
            cfg.retention_max_bytes, cfg.retention_ms) == (20 * 1024 * 1024, 3_600_000, 1 << 30, 100 * 1024 * 1024,
                                                           604_800_000)
    props = cfg.to_properties()
    assert props["metadata.log.max.record.bytes.between.snapshots"] == str(20 * 1024 * 1024)
    assert NodeConfig.from_properties(props) == cfg


@pytest.mark.parametrize(("key", "good", "bad"), [
    ("metadata.log.max.record.bytes.between.snapshots", ["1", str(2**40)], ["0", "x"]),  # LONG, atLeast(1)
    ("metadata.log.max.snapshot.interval.ms", ["0", str(2**40)], ["-1"]),  # LONG, atLeast(0); 0 = off
    ("metadata.log.segment.bytes", ["12", "1024", str(2**31 - 1)], ["11", str(2**31)]),  # INT, atLeast(LOG_OVERHEAD)
    ("metadata.max.retention.bytes", ["-1", "0", str(2**62)], ["1e6", str(2**63)]),  # LONG, no validator
    ("metadata.max.retention.ms", ["-1", "0", str(2**62)], ["soon"]),
])
def test_snapshot_settings_ranges(key: str, good: list[str], bad: list[str]) -> None:
    from kraft_tck.reference.config import ConfigError, NodeConfig

    for value in good:
        NodeConfig.from_properties({**BASE, key: value})
    for value in bad:
        with pytest.raises(ConfigError, match=re.escape(key)):
            NodeConfig.from_properties({**BASE, key: value})
