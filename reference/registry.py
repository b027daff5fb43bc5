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

Besides the brokers, the registry keeps the rest of the node's metadata state that the committed log
holds: the finalized feature levels (``FeatureLevelRecord``; level 0 removes the feature, as Kafka's
``FeatureControlManager.replay``) and the bootstrapped cluster id (the first committed cluster-id record,
``core.CLUSTER_ID_KEY``, the one the core adopts).

Snapshots (KIP-630): ``snapshot_records`` is that state written as the same records the log holds (Kafka's
``MetadataImage.write``: features first, then the cluster, one ``RegisterBrokerRecord`` per broker carrying
its ``Fenced`` and ``InControlledShutdown`` state, as Kafka's ``BrokerRegistration.toRecord``), and
``from_snapshot`` rebuilds exactly that state from them: the registry of a snapshot at offset N equals the
registry of the log replayed to N.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from kraft_tck.reference.core import CLUSTER_ID_KEY
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
FEATURE_LEVEL = "FeatureLevelRecord"
#: Every metadata record the registry applies.
STATE_RECORDS = BROKER_RECORDS | {FEATURE_LEVEL}
#: The feature Kafka writes first (MetadataImage.write: the features image, metadata.version leading).
METADATA_VERSION = "metadata.version"
#: The RegisterBrokerRecord version of snapshots: v1 has InControlledShutdown (as the controller writes).
SNAPSHOT_REGISTER_VERSION = 1

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
    decoded = decode_state_record(record)
    return decoded if decoded is not None and decoded[0] in BROKER_RECORDS else None


def decode_state_record(record: Record) -> tuple[str, int, Body] | None:
    """The broker or feature-level record in ``record`` (the records the registry applies), or None."""
    if record.key is not None or not record.value:
        return None
    if not _may_be_broker_record(record.value):
        return None
    try:
        name, version, body = codec.decode_metadata_record(record.value)
    except DecodeError:
        return None
    return (name, version, body) if name in STATE_RECORDS else None


# The metadata-record api keys of the records the registry applies (the second uvarint of the frame).
_BROKER_RECORD_KEYS = frozenset(codec.message_def(name).api_key for name in STATE_RECORDS)


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
    """Brokers by id, the finalized feature levels, the bootstrapped cluster id, and ``next_offset``: every
    committed record below it has been applied."""

    def __init__(self) -> None:
        self._brokers: dict[int, BrokerRegistration] = {}
        self.features: dict[str, int] = {}
        self.cluster_id: str | None = None
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
        return (self._brokers == other._brokers and self.next_offset == other.next_offset
                and self.features == other.features and self.cluster_id == other.cluster_id)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def copy(self) -> BrokerRegistry:
        out = BrokerRegistry()
        out.replace_with(self)
        return out

    def replace_with(self, other: BrokerRegistry) -> None:
        """Become a copy of ``other``, in place (the controller holds this object): a loaded snapshot."""
        self._brokers = dict(other._brokers)
        self.features = dict(other.features)
        self.cluster_id = other.cluster_id
        self.next_offset = other.next_offset

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
            self.apply_batch(batch, high_watermark, changes, errors)
        return changes, errors

    def apply_batch(self, batch: RecordBatch, high_watermark: int, changes: list[BrokerChange],
                    errors: list[RegistryError]) -> None:
        """``apply_committed`` of one batch starting below ``high_watermark`` (the shell's commit path calls it
        batch by batch, without a generator in between): its changes and refusals are added to the lists."""
        last, base, next_offset = batch.last_offset, batch.base_offset, self.next_offset
        if last < next_offset:
            return
        if base > next_offset:
            raise RegistryError(
                f"gap in the log: next offset to apply is {next_offset}, batch starts at {base}"
            )
        if not batch.is_control:
            for rec in batch.records:
                offset = base + rec.offset_delta
                if offset < next_offset or offset >= high_watermark:
                    continue
                value = rec.value
                if rec.key is None and not (value and _may_be_broker_record(value)):
                    continue  # ``decode_state_record``'s first look, one call: most committed records are not ours
                decoded = self._state_record(rec)
                if decoded is None:
                    continue
                if decoded[0] == FEATURE_LEVEL:
                    self._apply_feature_level(decoded[2])
                    continue
                try:
                    changes.append(self.apply(offset, decoded[0], decoded[2]))
                except RegistryError as exc:
                    errors.append(exc)
        self.next_offset = min(last + 1, high_watermark)

    # ------------------------------------------------------------------------------------ snapshots

    def snapshot_records(self) -> list[tuple[bytes | None, bytes]]:
        """The state as ``(key, value)`` records, in the order a snapshot holds them (see the module
        docstring): feature levels (metadata.version first), the cluster-id record, the brokers by id."""
        out: list[tuple[bytes | None, bytes]] = []
        for name in sorted(self.features, key=lambda n: (n != METADATA_VERSION, n)):
            body = {"Name": name, "FeatureLevel": self.features[name]}
            out.append((None, codec.encode_metadata_record(FEATURE_LEVEL, 0, body)))
        if self.cluster_id is not None:
            out.append((CLUSTER_ID_KEY, self.cluster_id.encode()))
        for reg in self.brokers():
            body = {
                "BrokerId": reg.broker_id,
                "IncarnationId": reg.incarnation_id,
                "BrokerEpoch": reg.broker_epoch,
                "EndPoints": [{"Name": lst.name, "Host": lst.host, "Port": lst.port,
                               "SecurityProtocol": lst.security_protocol} for lst in reg.listeners],
                "Features": [],
                "Rack": reg.rack,
                "Fenced": reg.fenced,
                "InControlledShutdown": reg.in_controlled_shutdown,
            }
            out.append((None, codec.encode_metadata_record(REGISTER, SNAPSHOT_REGISTER_VERSION, body)))
        return out

    @classmethod
    def from_snapshot(cls, end_offset: int, records: Iterable[Record]) -> BrokerRegistry:
        """The registry a snapshot ending at ``end_offset`` holds (its data records, control records left out
        by the reader). A ``RegisterBrokerRecord`` here is a registration as it stands, with its own epoch
        (not the record's offset) and its fencing state; the other broker records apply as in the log, for a
        snapshot written by another implementation. Records the registry does not know are skipped, as in
        the log. Raises ``RegistryError`` for a record that does not apply."""
        out = cls()
        for rec in records:
            decoded = out._state_record(rec)
            if decoded is None:
                continue
            name, _, body = decoded
            if name == FEATURE_LEVEL:
                out._apply_feature_level(body)
            elif name == REGISTER:
                out._put(end_offset, name, _registration(end_offset, body))
            else:
                out.apply(end_offset, name, body)
        out.next_offset = end_offset
        return out

    # ------------------------------------------------------------------------------------ helpers

    def _register(self, offset: int, body: Body) -> BrokerChange:
        broker_id, epoch = body["BrokerId"], body["BrokerEpoch"]
        if epoch != offset and broker_id >= 0:
            # KIP-631: the broker epoch is the offset of the registration record.
            raise RegistryError(f"offset {offset}: {REGISTER} for broker {broker_id} says epoch {epoch}")
        return self._put(offset, REGISTER, _registration(offset, body))

    def _state_record(self, rec: Record) -> tuple[str, int, Body] | None:
        """A data record's (name, version, body) for the registry; None for a keyed record (the cluster id's,
        noted) and for a record the registry does not know."""
        if rec.key is not None:
            self._note_cluster_id(rec)
            return None
        return decode_state_record(rec)

    def _note_cluster_id(self, rec: Record) -> None:
        """The first committed cluster-id record is the cluster's id (the core adopts the same one)."""
        if rec.key == CLUSTER_ID_KEY and rec.value is not None and self.cluster_id is None:
            self.cluster_id = rec.value.decode("utf-8", "replace")

    def _apply_feature_level(self, body: Body) -> None:
        if body["FeatureLevel"] == 0:
            self.features.pop(body["Name"], None)  # Kafka's FeatureControlManager.replay: level 0 removes it
        else:
            self.features[body["Name"]] = body["FeatureLevel"]

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


def _registration(offset: int, body: Body) -> BrokerRegistration:
    broker_id = body["BrokerId"]
    if broker_id < 0:
        raise RegistryError(f"offset {offset}: {REGISTER} for negative broker id {broker_id}")
    return BrokerRegistration(
        broker_id=broker_id,
        incarnation_id=body["IncarnationId"],
        broker_epoch=body["BrokerEpoch"],
        listeners=tuple(
            Listener(e["Name"], e["Host"], e["Port"], e["SecurityProtocol"]) for e in body["EndPoints"]
        ),
        rack=body.get("Rack"),
        fenced=body.get("Fenced", True),
        in_controlled_shutdown=body.get("InControlledShutdown", False),
    )


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
