"""The broker registry: committed records in, broker states out (KIP-631 "Broker States", KIP-631 records).

Every case is a list of (record name, body) placed at consecutive offsets from 0; the expected outcome
is each broker's (state, epoch), or the refusal (``RegistryError``) of the last record.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kraft_tck.reference.registry import (
    CHANGE,
    FENCE,
    REGISTER,
    UNFENCE,
    UNREGISTER,
    BrokerRegistry,
    BrokerState,
    RegistryError,
    decode_broker_record,
    encode,
    rebuild,
)
from kraft_tck.spec.records import ControlType, Record, RecordBatch, control_batch, data_batch

INC_A = uuid.UUID(int=0xA)
INC_B = uuid.UUID(int=0xB)
Rec = tuple[str, dict[str, Any]]


def register(broker_id: int, epoch: int, inc: uuid.UUID = INC_A, **extra: Any) -> Rec:
    return REGISTER, {"BrokerId": broker_id, "IncarnationId": inc, "BrokerEpoch": epoch,
                      "EndPoints": [{"Name": "PLAINTEXT", "Host": "h", "Port": 9092, "SecurityProtocol": 0}],
                      "Features": [], "Rack": "r1", **extra}


def fence(broker_id: int, epoch: int) -> Rec:
    return FENCE, {"Id": broker_id, "Epoch": epoch}


def unfence(broker_id: int, epoch: int) -> Rec:
    return UNFENCE, {"Id": broker_id, "Epoch": epoch}


def change(broker_id: int, epoch: int, fenced: int = 0, ics: int = 0) -> Rec:
    return CHANGE, {"BrokerId": broker_id, "BrokerEpoch": epoch, "Fenced": fenced, "InControlledShutdown": ics}


def unregister(broker_id: int, epoch: int) -> Rec:
    return UNREGISTER, {"BrokerId": broker_id, "BrokerEpoch": epoch}


def apply_all(records: list[Rec]) -> BrokerRegistry:
    reg = BrokerRegistry()
    for offset, (name, body) in enumerate(records):
        reg.apply(offset, name, body)
    return reg


def states(reg: BrokerRegistry) -> dict[int, tuple[str, int]]:
    return {b.broker_id: (str(b.state), b.broker_epoch) for b in reg.brokers()}


F, ON, S, X = (str(s) for s in (BrokerState.FENCED, BrokerState.ONLINE, BrokerState.STOPPING, BrokerState.OFFLINE))

CASES: list[tuple[str, list[Rec], dict[int, tuple[str, int]]]] = [
    ("registration starts Fenced (seed: Register Flow)", [register(1, 0)], {1: (F, 0)}),
    ("unfence makes it Online", [register(1, 0), unfence(1, 0)], {1: (ON, 0)}),
    ("fence after online", [register(1, 0), unfence(1, 0), fence(1, 0)], {1: (F, 0)}),
    ("change record unfences (-1)", [register(1, 0), change(1, 0, fenced=-1)], {1: (ON, 0)}),
    ("change record fences (1)", [register(1, 0), unfence(1, 0), change(1, 0, fenced=1)], {1: (F, 0)}),
    ("controlled shutdown: Stopping", [register(1, 0), unfence(1, 0), change(1, 0, ics=1)], {1: (S, 0)}),
    ("controlled shutdown done: Offline",
     [register(1, 0), unfence(1, 0), change(1, 0, ics=1), change(1, 0, fenced=1)], {1: (X, 0)}),
    ("stopping broker whose session expired: Offline",
     [register(1, 0), unfence(1, 0), change(1, 0, ics=1), fence(1, 0)], {1: (X, 0)}),
    ("fenced broker shutting down at once", [register(1, 0), change(1, 0, fenced=1, ics=1)], {1: (X, 0)}),
    ("change with nothing changes nothing", [register(1, 0), unfence(1, 0), change(1, 0)], {1: (ON, 0)}),
    ("re-registration: new epoch, Fenced again, shutdown flag cleared",
     [register(1, 0), unfence(1, 0), change(1, 0, ics=1), register(1, 3, INC_B)], {1: (F, 3)}),
    ("unregister removes the broker", [register(1, 0), register(2, 1), unregister(1, 0)], {2: (F, 1)}),
    ("brokers are independent",
     [register(1, 0), register(2, 1), unfence(2, 1), fence(2, 1), unfence(2, 1)], {1: (F, 0), 2: (ON, 1)}),
    ("record says Fenced=false at registration", [register(1, 0, Fenced=False)], {1: (ON, 0)}),
]


@pytest.mark.parametrize(("records", "expected"), [(r, e) for _, r, e in CASES], ids=[c[0] for c in CASES])
def test_records_in_states_out(records: list[Rec], expected: dict[int, tuple[str, int]]) -> None:
    assert states(apply_all(records)) == expected


REFUSALS: list[tuple[str, list[Rec], str]] = [
    ("fence of an unknown broker", [fence(1, 0)], "not registered"),
    ("unfence of an unknown broker", [unfence(7, 0)], "not registered"),
    ("change of an unknown broker", [change(1, 0, fenced=1)], "not registered"),
    ("unregister of an unknown broker", [unregister(1, 0)], "not registered"),
    ("fence with an old epoch", [register(1, 0), register(1, 1, INC_B), fence(1, 0)], "its epoch is 1"),
    ("unfence with a wrong epoch", [register(1, 0), unfence(1, 5)], "its epoch is 0"),
    ("unregister with a wrong epoch", [register(1, 0), unregister(1, 9)], "its epoch is 0"),
    ("registration epoch is not its offset (KIP-631)", [register(1, 4)], "says epoch 4"),
    ("negative broker id", [register(-1, 0)], "negative broker id"),
    ("fencing change out of range", [register(1, 0), change(1, 0, fenced=2)], "Fenced=2"),
    ("shutdown change out of range", [register(1, 0), change(1, 0, ics=-1)], "InControlledShutdown=-1"),
    ("not a broker record", [("TopicRecord", {})], "not a broker record"),
]


@pytest.mark.parametrize(("records", "message"), [(r, m) for _, r, m in REFUSALS], ids=[c[0] for c in REFUSALS])
def test_inconsistent_records_are_refused_and_change_nothing(records: list[Rec], message: str) -> None:
    before = apply_all(records[:-1])
    after = before.copy()
    name, body = records[-1]
    with pytest.raises(RegistryError, match=message):
        after.apply(len(records) - 1, name, body)
    assert after == before


# ------------------------------------------------------------------------------------ the log as input


def log_of(records: list[Rec], per_batch: int = 2, epoch: int = 1) -> list[RecordBatch]:
    """A log: a LeaderChange control batch at 0, a cluster-id record and workload noise, then the records
    in batches of ``per_batch``. Returns the batches; the records' offsets follow the layout."""
    batches = [control_batch(0, epoch, ControlType.LEADER_CHANGE, {"Version": 0, "LeaderId": 1, "Voters": [],
                                                                   "GrantingVoters": []})]
    batches.append(RecordBatch(1, epoch, (Record(0, b"cid", b"kraft-tck/cluster-id"),)))
    batches.append(data_batch(2, epoch, [b"x" * 10, b"\x01garbage"]))  # workload bytes, not metadata
    offset = 4
    for i in range(0, len(records), per_batch):
        chunk = records[i:i + per_batch]
        values = []
        for j, (name, body) in enumerate(chunk):
            body = dict(body)
            if name == REGISTER:
                body["BrokerEpoch"] = offset + j
            values.append(encode(name, 1 if name in (REGISTER, CHANGE) else 0, body))
        batches.append(data_batch(offset, epoch, values))
        offset += len(chunk)
    return batches


def test_non_broker_records_are_skipped() -> None:
    assert decode_broker_record(Record(0, b"x" * 5)) is None
    assert decode_broker_record(Record(0, b"v", b"key")) is None
    assert decode_broker_record(Record(0, b"\x01\x7f\x00")) is None  # framed, but an unknown record type
    name, body = register(1, 0)
    decoded = decode_broker_record(Record(0, encode(name, 1, body)))
    assert decoded is not None and decoded[0] == REGISTER and decoded[2]["BrokerId"] == 1


def test_rebuild_reads_only_the_committed_prefix() -> None:
    # offsets: 4 register(1), 5 register(2), 6 unfence(1), 7 unfence(2)
    batches = log_of([register(1, 0), register(2, 0), unfence(1, 4), unfence(2, 5)])
    assert states(rebuild(batches, 4)) == {}
    assert states(rebuild(batches, 5)) == {1: (F, 4)}
    assert states(rebuild(batches, 7)) == {1: (ON, 4), 2: (F, 5)}  # HW inside a batch
    assert states(rebuild(batches, 8)) == {1: (ON, 4), 2: (ON, 5)}
    assert rebuild(batches, 7).next_offset == 7


def test_incremental_application_equals_rebuild() -> None:
    """Restart: replaying the whole committed log gives the registry the node had built step by step."""
    records = [register(1, 0), register(2, 0), unfence(1, 4), fence(1, 4), register(3, 0), unfence(3, 8),
               change(3, 8, ics=1), change(3, 8, fenced=1), unregister(2, 5), register(1, 0, INC_B)]
    batches = log_of(records, per_batch=3)
    end = batches[-1].last_offset + 1
    live = BrokerRegistry()
    changes = []
    for hw in range(0, end + 1):  # the high watermark moves one offset at a time
        got, errors = live.apply_committed(batches, hw)
        assert errors == []
        changes.extend(got)
    assert live == rebuild(batches, end)
    assert states(live) == {1: (F, 13), 3: (X, 8)}
    assert [c.offset for c in changes] == list(range(4, end))  # one change per broker record, in order
    assert changes[8].registered is False and changes[8].broker_id == 2


def test_refused_record_in_a_log_is_skipped_unless_strict() -> None:
    batches = log_of([register(1, 0), fence(9, 0), unfence(1, 4)])
    with pytest.raises(RegistryError, match="broker 9"):
        rebuild(batches, 7)
    assert states(rebuild(batches, 7, strict=False)) == {1: (ON, 4)}


def test_a_gap_in_the_log_is_an_error() -> None:
    batches = log_of([register(1, 0)])
    with pytest.raises(RegistryError, match="gap"):
        rebuild([batches[0], batches[3]], 10)


def test_the_cheap_frame_check_skips_only_what_the_decoder_would_skip() -> None:
    """Most committed records are not broker records (the write workload, other metadata records); the
    registry looks at the frame's first two bytes before decoding. The look must never hide a broker
    record: for every value it rejects, the full decode yields no broker record either."""
    from kraft_tck.reference.registry import _may_be_broker_record
    from kraft_tck.spec import codec
    from kraft_tck.spec.errors import DecodeError

    name, body = register(1, 0)
    broker = encode(name, 0, body)
    topic = b"\x01\x02\x00\x01t"  # frame 1, api key 2 (Kafka's TopicRecord), version 0: not a broker record
    values = [broker, topic, b"x" * 100, b"\x01", b"\x02\x00\x00", b"\x01\x80\x00", b"\x81\x00\x00\x00",
              *(bytes([a, b]) + broker[2:] for a in (0, 1, 2, 0x81) for b in range(0, 256, 7))]
    assert _may_be_broker_record(broker) and not _may_be_broker_record(topic)
    assert not _may_be_broker_record(b"x" * 100)
    for value in values:
        if _may_be_broker_record(value):
            continue
        try:
            name, _, _ = codec.decode_metadata_record(value)
        except DecodeError:
            continue
        assert name not in {REGISTER, UNREGISTER, FENCE, UNFENCE, CHANGE}, value
    assert decode_broker_record(Record(0, broker)) is not None
