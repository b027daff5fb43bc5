"""The broker registry: a pure function of the committed metadata log (KIP-631 as shipped).

Every node — leader, follower or observer, and any tool that reads the log — replays the same
committed records into this object and so holds the same registry. Nothing here reads a clock: a
broker's state is decided by records alone, so ``rebuild(log)`` after a restart equals the registry
the node had before it.

Global broker states, as the registration proposal defines them (KIP-631 "Broker States"), and the
record fields Kafka's ``BrokerRegistration`` keeps for them:

    ============  =======  ======================  =====================================================
    state         fenced   in controlled shutdown  meaning (KIP-631 "Broker States")
    ============  =======  ======================  =====================================================
    Fenced        true     false                   registered, catching up or lost contact
    Online        false    false                   caught up; serves clients
    Stopping      false    true                    asked to shut down; still running
    Offline       true     true                    controlled shutdown granted; the process is gone
    ============  =======  ======================  =====================================================

A ``RegisterBrokerRecord`` (re)creates a registration with a new broker epoch — the record's own
offset — and Fenced, as "Register Flow" says a starting broker is. ``FenceBrokerRecord`` /
``UnfenceBrokerRecord`` flip ``fenced``; ``BrokerRegistrationChangeRecord`` carries Kafka's
fencing change (-1 unfence, 0 none, 1 fence) and in-controlled-shutdown change (0 none, 1 set);
``UnregisterBrokerRecord`` removes the registration. Like Kafka's replay, a record naming a broker
that is not registered, or an epoch that is not the broker's current one, is refused
(``RegistryError``): the controller never writes one, so seeing one means the log is not ours to trust.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from kraft_tck.spec import codec
from kraft_tck.spec.errors import DecodeError
from kraft_tck.spec.records import Record, RecordBatch

Body = dict[str, Any]

REGISTER = "RegisterBrokerRecord"
UNREGISTER = "UnregisterBrokerRecord"
FENCE = "FenceBrokerRecord"
UNFENCE = "UnfenceBrokerRecord"
CHANGE = "BrokerRegistrationChangeRecord"
BROKER_RECORDS = frozenset({REGISTER, UNREGISTER, FENCE, UNFENCE, CHANGE})

# BrokerRegistrationChangeRecord field values (Kafka's BrokerRegistrationFencingChange and
# BrokerRegistrationInControlledShutdownChange).
FENCING_UNFENCE, FENCING_NONE, FENCING_FENCE = -1, 0, 1
SHUTDOWN_NONE, SHUTDOWN_IN_CONTROLLED = 0, 1


class BrokerState(enum.StrEnum):
    """The seed's four global broker states (KIP-631 "Broker States")."""

    FENCED = "Fenced"
    ONLINE = "Online"
    STOPPING = "Stopping"
    OFFLINE = "Offline"


class RegistryError(ValueError):
    """A committed record the registry cannot apply; the message names the offset and the reason."""


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """One broker as the committed log describes it."""

    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int  # the offset of its RegisterBrokerRecord (KIP-631)
    listeners: tuple[Listener, ...]
    rack: str | None
    fenced: bool = True
    in_controlled_shutdown: bool = False

    @property
    def state(self) -> BrokerState:
        if self.in_controlled_shutdown:
            return BrokerState.OFFLINE if self.fenced else BrokerState.STOPPING
        return BrokerState.FENCED if self.fenced else BrokerState.ONLINE

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerId": self.broker_id,
            "state": str(self.state),
            "brokerEpoch": self.broker_epoch,
            "incarnationId": str(self.incarnation_id),
            "listeners": [str(listener) for listener in self.listeners],
            "rack": self.rack,
        }


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """What one applied record did: the trace's ``BrokerEvent`` payload.

    ``registered`` is False after an UnregisterBrokerRecord (the state is then reported as Offline:
    the seed has no fifth state for a broker the cluster forgot).
    """

    offset: int
    record: str
    broker_id: int
    state: BrokerState
    broker_epoch: int
    registered: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerId": self.broker_id,
            "state": str(self.state),
            "brokerEpoch": self.broker_epoch,
            "record": self.record,
            "offset": self.offset,
            "registered": self.registered,
        }


def decode_broker_record(record: Record) -> tuple[str, int, Body] | None:
    """The broker record in ``record``, or None when it is not one.

    Metadata records have a null key and a framed value (frame version, type, version, body). The log
    also carries records that are not metadata records — the cluster-id record (keyed) and the node's
    write workload (arbitrary bytes) — and metadata records of other types; all of them are skipped.
    """
    if record.key is not None or not record.value:
        return None
    if not _may_be_broker_record(record.value):
        return None
    try:
        name, version, body = codec.decode_metadata_record(record.value)
    except DecodeError:
        return None
    return (name, version, body) if name in BROKER_RECORDS else None


# The metadata-record api keys of the broker records (the second uvarint of the frame).
_BROKER_RECORD_KEYS = frozenset(codec.message_def(name).api_key for name in BROKER_RECORDS)


def _may_be_broker_record(value: bytes) -> bool:
    """A cheap look at the frame before decoding: most committed records (the write workload, other
    metadata records) are not broker records, and a failed decode raises. Exact: every value this
    rejects would decode to something other than a broker record, or not at all."""
    if len(value) < 2 or value[1] & 0x80:
        return True  # a short value, or a multi-byte key: let the decoder decide
    if value[0] == 1:  # frame version 1 as a one-byte uvarint (a multi-byte form has its high bit set)
        return value[1] in _BROKER_RECORD_KEYS
    return bool(value[0] & 0x80)


class BrokerRegistry:
    """Brokers by id, and ``next_offset``: every committed record below it has been applied."""

    def __init__(self) -> None:
        self._brokers: dict[int, BrokerRegistration] = {}
        self.next_offset = 0

    # ------------------------------------------------------------------------------------ queries

    def get(self, broker_id: int) -> BrokerRegistration | None:
        return self._brokers.get(broker_id)

    def brokers(self) -> list[BrokerRegistration]:
        return [self._brokers[i] for i in sorted(self._brokers)]

    def __iter__(self) -> Iterator[BrokerRegistration]:
        return iter(self.brokers())

    def __len__(self) -> int:
        return len(self._brokers)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BrokerRegistry):
            return NotImplemented
        return self._brokers == other._brokers and self.next_offset == other.next_offset

    __hash__ = None  # type: ignore[assignment]  # mutable

    def copy(self) -> BrokerRegistry:
        out = BrokerRegistry()
        out._brokers = dict(self._brokers)
        out.next_offset = self.next_offset
        return out

    def to_json(self) -> list[dict[str, Any]]:
        return [b.to_json() for b in self.brokers()]

    # ------------------------------------------------------------------------------------ changes

    def apply(self, offset: int, name: str, body: Body) -> BrokerChange:
        """Apply one broker record found at ``offset``. Raises ``RegistryError`` (registry unchanged)."""
        if name == REGISTER:
            return self._register(offset, body)
        if name == UNREGISTER:
            reg = self._current(offset, name, body["BrokerId"], body["BrokerEpoch"])
            del self._brokers[reg.broker_id]
            return BrokerChange(offset, name, reg.broker_id, BrokerState.OFFLINE, reg.broker_epoch, False)
        if name in (FENCE, UNFENCE):
            reg = self._current(offset, name, body["Id"], body["Epoch"])
            return self._put(offset, name, replace(reg, fenced=name == FENCE))
        if name == CHANGE:
            reg = self._current(offset, name, body["BrokerId"], body["BrokerEpoch"])
            fencing = body.get("Fenced", FENCING_NONE)
            shutdown = body.get("InControlledShutdown", SHUTDOWN_NONE)
            if fencing not in (FENCING_UNFENCE, FENCING_NONE, FENCING_FENCE):
                raise RegistryError(f"offset {offset}: {name} Fenced={fencing} is not -1, 0 or 1")
            if shutdown not in (SHUTDOWN_NONE, SHUTDOWN_IN_CONTROLLED):
                raise RegistryError(f"offset {offset}: {name} InControlledShutdown={shutdown} is not 0 or 1")
            fenced = reg.fenced if fencing == FENCING_NONE else fencing == FENCING_FENCE
            ics = reg.in_controlled_shutdown or shutdown == SHUTDOWN_IN_CONTROLLED
            return self._put(offset, name, replace(reg, fenced=fenced, in_controlled_shutdown=ics))
        raise RegistryError(f"offset {offset}: {name} is not a broker record")

    def apply_committed(
        self, batches: Iterable[RecordBatch], high_watermark: int
    ) -> tuple[list[BrokerChange], list[RegistryError]]:
        """Apply every broker record in ``[next_offset, high_watermark)`` found in ``batches``.

        ``batches`` may start before ``next_offset`` (already applied records are skipped) and run past
        the high watermark (uncommitted records are left for later). A refused record is reported and
        skipped — deterministically, so every node still agrees — and does not stop the replay.
        """
        changes: list[BrokerChange] = []
        errors: list[RegistryError] = []
        for batch in batches:
            if batch.base_offset >= high_watermark:
                break
            if batch.last_offset < self.next_offset:
                continue
            if batch.base_offset > self.next_offset:
                raise RegistryError(
                    f"gap in the log: next offset to apply is {self.next_offset}, batch starts at "
                    f"{batch.base_offset}"
                )
            if not batch.is_control:
                for rec in batch.records:
                    offset = batch.base_offset + rec.offset_delta
                    if offset < self.next_offset or offset >= high_watermark:
                        continue
                    decoded = decode_broker_record(rec)
                    if decoded is None:
                        continue
                    try:
                        changes.append(self.apply(offset, decoded[0], decoded[2]))
                    except RegistryError as exc:
                        errors.append(exc)
            self.next_offset = min(batch.last_offset + 1, high_watermark)
        return changes, errors

    # ------------------------------------------------------------------------------------ helpers

    def _register(self, offset: int, body: Body) -> BrokerChange:
        broker_id, epoch = body["BrokerId"], body["BrokerEpoch"]
        if broker_id < 0:
            raise RegistryError(f"offset {offset}: {REGISTER} for negative broker id {broker_id}")
        if epoch != offset:
            # KIP-631: the broker epoch is the offset of the registration record.
            raise RegistryError(f"offset {offset}: {REGISTER} for broker {broker_id} says epoch {epoch}")
        reg = BrokerRegistration(
            broker_id=broker_id,
            incarnation_id=body["IncarnationId"],
            broker_epoch=epoch,
            listeners=tuple(
                Listener(e["Name"], e["Host"], e["Port"], e["SecurityProtocol"]) for e in body["EndPoints"]
            ),
            rack=body.get("Rack"),
            fenced=body.get("Fenced", True),
            in_controlled_shutdown=body.get("InControlledShutdown", False),
        )
        return self._put(offset, REGISTER, reg)

    def _current(self, offset: int, name: str, broker_id: int, epoch: int) -> BrokerRegistration:
        reg = self._brokers.get(broker_id)
        if reg is None:
            raise RegistryError(f"offset {offset}: {name} for broker {broker_id}, which is not registered")
        if reg.broker_epoch != epoch:
            raise RegistryError(
                f"offset {offset}: {name} for broker {broker_id} epoch {epoch}, but its epoch is {reg.broker_epoch}"
            )
        return reg

    def _put(self, offset: int, name: str, reg: BrokerRegistration) -> BrokerChange:
        self._brokers[reg.broker_id] = reg
        return BrokerChange(offset, name, reg.broker_id, reg.state, reg.broker_epoch)


def rebuild(batches: Iterable[RecordBatch], high_watermark: int, *, strict: bool = True) -> BrokerRegistry:
    """The registry of the committed prefix ``[0, high_watermark)`` of a log (restart, tools, checks).

    ``strict`` raises the first ``RegistryError``; otherwise refused records are skipped as the node does.
    """
    registry = BrokerRegistry()
    _, errors = registry.apply_committed(batches, high_watermark)
    if strict and errors:
        raise errors[0]
    return registry


def encode(name: str, version: int, body: Body) -> bytes:
    """A broker record as a metadata-record value (the codec's framing); ``name`` must be a broker record."""
    if name not in BROKER_RECORDS:
        raise ValueError(f"{name} is not a broker record (expected one of {sorted(BROKER_RECORDS)})")
    return codec.encode_metadata_record(name, version, body)
