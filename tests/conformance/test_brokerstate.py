"""The harness's broker states (conformance/brokerstate.py), replayed from metadata records framed by the
``spec`` codec; cross-checked against the reference node's registry on the same logs (tests may import
both sides: the point is that the two are written apart and must agree)."""

from __future__ import annotations

import random
import uuid
from typing import Any

from kraft_tck.conformance.brokerstate import (
    CHANGE,
    FENCE,
    REGISTER,
    UNFENCE,
    UNREGISTER,
    BrokerState,
    broker_record,
    replay,
)
from kraft_tck.reference.registry import BrokerRegistry
from kraft_tck.spec import codec
from kraft_tck.spec.records import ControlType, RecordBatch, control_batch, data_batch


def register(bid: int, epoch: int, fenced: bool = True) -> tuple[str, int, dict[str, Any]]:
    return REGISTER, 1, {
        "BrokerId": bid, "IncarnationId": uuid.UUID(int=bid + 1), "BrokerEpoch": epoch,
        "EndPoints": [{"Name": "PLAINTEXT", "Host": "localhost", "Port": 9092 + bid, "SecurityProtocol": 0}],
        "Features": [], "Rack": None, "Fenced": fenced, "InControlledShutdown": False,
    }  # fmt: skip


def change(bid: int, epoch: int, fenced: int = 0, shutdown: int = 0) -> tuple[str, int, dict[str, Any]]:
    return CHANGE, 1, {"BrokerId": bid, "BrokerEpoch": epoch, "Fenced": fenced, "InControlledShutdown": shutdown}


def fence(bid: int, epoch: int, on: bool = True) -> tuple[str, int, dict[str, Any]]:
    return FENCE if on else UNFENCE, 0, {"Id": bid, "Epoch": epoch}


def unregister(bid: int, epoch: int) -> tuple[str, int, dict[str, Any]]:
    return UNREGISTER, 0, {"BrokerId": bid, "BrokerEpoch": epoch}


def log_of(*records: tuple[str, int, dict[str, Any]] | bytes) -> list[RecordBatch]:
    """One batch per record from offset 0 (a LeaderChange control batch first), values framed by the codec."""
    batches = [control_batch(0, 1, ControlType.LEADER_CHANGE, {"Version": 0, "LeaderId": 1, "Voters": [],
                                                               "GrantingVoters": []})]  # fmt: skip
    for i, rec in enumerate(records, start=1):
        value = rec if isinstance(rec, bytes) else codec.encode_metadata_record(*rec)
        batches.append(data_batch(i, 1, [value]))
    return batches


def test_the_register_unfence_shutdown_lifecycle() -> None:
    log = log_of(register(5, 1), change(5, 1, fenced=-1), change(5, 1, shutdown=1), change(5, 1, fenced=1),
                 unregister(5, 1))  # fmt: skip
    s = replay(log, committed=6)
    assert [(e.offset, e.record, e.state, e.broker_epoch) for e in s.history(5)] == [
        (1, REGISTER, BrokerState.FENCED, 1),
        (2, CHANGE, BrokerState.ONLINE, 1),
        (3, CHANGE, BrokerState.STOPPING, 1),
        (4, CHANGE, BrokerState.OFFLINE, 1),
        (5, UNREGISTER, BrokerState.OFFLINE, 1),
    ]
    assert s.history(5)[-1].registered is False and s.state(5) is None and not s.problems


def test_only_the_committed_prefix_counts() -> None:
    log = log_of(register(5, 1), fence(5, 1, on=False), fence(5, 1))
    assert replay(log, committed=3).state(5) == BrokerState.ONLINE
    assert replay(log, committed=4).state(5) == BrokerState.FENCED
    assert replay(log, committed=1).events == []


def test_records_a_controller_never_writes_are_problems_and_change_nothing() -> None:
    log = log_of(fence(7, 1, on=False), register(5, 2), change(5, 9, fenced=-1), change(5, 2, fenced=3),
                 register(6, 3, fenced=False))  # fmt: skip
    s = replay(log, committed=6)
    assert s.state(5) == BrokerState.FENCED and s.state(7) is None
    assert len(s.problems) == 4, s.problems
    assert "not registered" in s.problems[0] and "registered with epoch 2" in s.problems[1]
    assert "Fenced=3" in s.problems[2] and "BrokerEpoch 3, not its own offset" in s.problems[3]
    assert s.state(6) == BrokerState.ONLINE  # a registration that says unfenced is taken as written


def test_other_records_are_skipped() -> None:
    other = codec.encode_metadata_record("FeatureLevelRecord", 0, {"Name": "kraft.version", "FeatureLevel": 1})
    assert broker_record(None, other) is None
    assert broker_record(None, b"workload bytes") is None
    assert broker_record(b"key", codec.encode_metadata_record(*register(1, 1))) is None
    assert broker_record(None, codec.encode_metadata_record(*register(1, 1)))[0] == REGISTER
    s = replay(log_of(b"\x00\x01garbage", other, register(3, 3)), committed=10)
    assert [e.record for e in s.events] == [REGISTER] and not s.problems


def test_agrees_with_the_reference_registry_on_random_logs() -> None:
    rng = random.Random(631)
    for _ in range(200):
        records: list[tuple[str, int, dict[str, Any]]] = []
        epochs: dict[int, int] = {}
        for offset in range(1, 30):
            bid = rng.randrange(3)
            epoch = epochs.get(bid, offset) if rng.random() < 0.9 else rng.randrange(40)
            kind = rng.randrange(5)
            if kind == 0 or (bid not in epochs and rng.random() < 0.7):
                records.append(register(bid, offset, fenced=rng.random() < 0.8))
                epochs[bid] = offset
            elif kind == 1:
                records.append(fence(bid, epoch, on=rng.random() < 0.5))
            elif kind == 2:
                records.append(change(bid, epoch, fenced=rng.choice([-1, 0, 1]), shutdown=rng.choice([0, 1])))
            elif kind == 3:
                records.append(unregister(bid, epoch))
                epochs.pop(bid, None) if epoch == epochs.get(bid) else None
            else:
                records.append(change(bid, epoch, fenced=rng.choice([-1, 1])))
        log = log_of(*records)
        committed = rng.randrange(1, len(records) + 2)
        ours = replay(log, committed)
        theirs = BrokerRegistry()
        changes, errors = theirs.apply_committed(log, committed)
        assert [(e.offset, e.record, e.broker_id, str(e.state), e.broker_epoch, e.registered) for e in ours.events] == [
            (c.offset, c.record, c.broker_id, str(c.state), c.broker_epoch, c.registered) for c in changes
        ]
        assert len(ours.problems) == len(errors)
        for bid in range(3):
            reg = theirs.get(bid)
            assert ours.state(bid) == (None if reg is None else reg.state)
