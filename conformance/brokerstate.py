"""Broker states as the harness reads them from the committed metadata log it mirrored (KIP-631).

The harness judges the target's broker registration (conformance/test_brokers.py) by what the target
*committed*: the metadata records in the log the virtual followers fetched. This module replays those
records on its own, with the ``spec`` codec and the record definitions in ``spec/messages`` — not with the
reference node's registry, so a registry bug in the reference node can fail a broker case.

KIP-631 "Broker States" and the records that move a broker between them, as Kafka replays them
(``ClusterControlManager.replay`` for each record type, ``BrokerRegistration.fenced`` and
``inControlledShutdown``):

* ``RegisterBrokerRecord`` (re)registers a broker with the record's ``BrokerEpoch`` (KIP-631: the offset
  of the registration record) and its ``Fenced`` / ``InControlledShutdown`` fields (defaults: fenced, not
  shutting down);
* ``FenceBrokerRecord`` / ``UnfenceBrokerRecord`` set fenced / unfenced;
* ``BrokerRegistrationChangeRecord`` carries ``Fenced`` (-1 unfence, 0 unchanged, 1 fence — Kafka's
  ``BrokerRegistrationFencingChange``) and ``InControlledShutdown`` (0 unchanged, 1 set — Kafka's
  ``BrokerRegistrationInControlledShutdownChange``);
* ``UnregisterBrokerRecord`` removes the broker.

A broker's state is then Fenced (fenced, not shutting down), Online (unfenced), Stopping (in controlled
shutdown, still unfenced) or Offline (in controlled shutdown and fenced; also what an unregistered broker is
reported as). A record for a broker that is not registered, or with an epoch that is not its current one, is
one a correct controller never writes: it is reported as a problem and changes nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kraft_tck.spec import codec
from kraft_tck.spec.errors import DecodeError
from kraft_tck.spec.records import RecordBatch

REGISTER = "RegisterBrokerRecord"
UNREGISTER = "UnregisterBrokerRecord"
FENCE = "FenceBrokerRecord"
UNFENCE = "UnfenceBrokerRecord"
CHANGE = "BrokerRegistrationChangeRecord"
BROKER_RECORDS = (REGISTER, UNREGISTER, FENCE, UNFENCE, CHANGE)


class BrokerState(enum.StrEnum):
    """KIP-631 "Broker States"."""

    FENCED = "Fenced"
    ONLINE = "Online"
    STOPPING = "Stopping"
    OFFLINE = "Offline"


def state_of(fenced: bool, in_controlled_shutdown: bool) -> BrokerState:
    if in_controlled_shutdown:
        return BrokerState.OFFLINE if fenced else BrokerState.STOPPING
    return BrokerState.FENCED if fenced else BrokerState.ONLINE


@dataclass(frozen=True)
class BrokerEvent:
    """One committed broker record and the state it left its broker in."""

    offset: int
    record: str
    broker_id: int
    state: BrokerState
    broker_epoch: int
    registered: bool = True


@dataclass
class _Broker:
    epoch: int
    fenced: bool
    shutting_down: bool


class BrokerStates:
    """The brokers of a committed metadata log, replayed record by record."""

    def __init__(self) -> None:
        self._brokers: dict[int, _Broker] = {}
        #: every broker record applied, in log order
        self.events: list[BrokerEvent] = []
        #: records a correct controller never commits (unknown broker, stale epoch, bad field value)
        self.problems: list[str] = []

    def state(self, broker_id: int) -> BrokerState | None:
        b = self._brokers.get(broker_id)
        return None if b is None else state_of(b.fenced, b.shutting_down)

    def epoch(self, broker_id: int) -> int | None:
        b = self._brokers.get(broker_id)
        return None if b is None else b.epoch

    def history(self, broker_id: int) -> list[BrokerEvent]:
        return [e for e in self.events if e.broker_id == broker_id]

    def replay(self, batches: Iterable[RecordBatch], committed: int) -> BrokerStates:
        """Apply the broker records of every data batch below ``committed`` (the log's high watermark)."""
        for batch in batches:
            if batch.is_control:
                continue
            for rec in batch.records:
                offset = batch.base_offset + rec.offset_delta
                if offset >= committed:
                    return self
                found = broker_record(rec.key, rec.value)
                if found is not None:
                    self.apply(offset, found[0], found[1])
        return self

    def apply(self, offset: int, name: str, body: dict[str, Any]) -> None:
        if name == REGISTER:
            bid, epoch = int(body["BrokerId"]), int(body["BrokerEpoch"])
            if epoch != offset:
                self.problems.append(
                    f"offset {offset}: {name} for broker {bid} has BrokerEpoch {epoch}, not its own offset"
                )
            new = _Broker(epoch, bool(body.get("Fenced", True)), bool(body.get("InControlledShutdown", False)))
            self._brokers[bid] = new
            self._event(offset, name, bid, new)
            return
        if name in (FENCE, UNFENCE):
            bid, epoch = int(body["Id"]), int(body["Epoch"])
        else:
            bid, epoch = int(body["BrokerId"]), int(body["BrokerEpoch"])
        b = self._brokers.get(bid)
        if b is None or b.epoch != epoch:
            now = "not registered" if b is None else f"registered with epoch {b.epoch}"
            self.problems.append(f"offset {offset}: {name} for broker {bid} epoch {epoch}, which is {now}")
            return
        if name == UNREGISTER:
            del self._brokers[bid]
            self.events.append(BrokerEvent(offset, name, bid, BrokerState.OFFLINE, epoch, registered=False))
            return
        if name == FENCE:
            b.fenced = True
        elif name == UNFENCE:
            b.fenced = False
        else:
            fencing, shutdown = int(body.get("Fenced", 0)), int(body.get("InControlledShutdown", 0))
            if fencing not in (-1, 0, 1) or shutdown not in (0, 1):
                self.problems.append(
                    f"offset {offset}: {name} for broker {bid} has Fenced={fencing}, InControlledShutdown={shutdown}"
                )
                return
            if fencing:
                b.fenced = fencing == 1
            if shutdown:
                b.shutting_down = True
        self._event(offset, name, bid, b)

    def _event(self, offset: int, name: str, bid: int, b: _Broker) -> None:
        self.events.append(BrokerEvent(offset, name, bid, state_of(b.fenced, b.shutting_down), b.epoch))


def broker_record(key: bytes | None, value: bytes | None) -> tuple[str, dict[str, Any]] | None:
    """(record name, body) when a log record's value is a broker metadata record; None for anything else
    (the keyed cluster-id record, a write workload's bytes, other metadata records)."""
    if key is not None or not value:
        return None
    try:
        name, _version, body = codec.decode_metadata_record(value)
    except DecodeError:
        return None
    return (name, body) if name in BROKER_RECORDS else None


def replay(batches: Iterable[RecordBatch], committed: int) -> BrokerStates:
    """The broker states of the committed prefix ``[0, committed)`` of a log."""
    return BrokerStates().replay(batches, committed)
