"""The active controller's broker lifecycle logic (KIP-631 as shipped; KIP-631 "Register Flow").

Pure: time is an argument, the committed registry is read, never written (the shell applies committed
records to it), and every decision comes back as records to append plus the response to send once
those records are committed. The Raft layer (``core.py``) knows nothing of this.

What the controller appends, and why (the seed's states, ``registry.py``'s table):

    ============================  ==========================================  =========================
    trigger                       record                                      state after
    ============================  ==========================================  =========================
    BrokerRegistration accepted   RegisterBrokerRecord v1, Fenced=true        Fenced
    heartbeat, caught up          UnfenceBrokerRecord                         Online
    heartbeat, WantFence          FenceBrokerRecord                           Fenced
    no heartbeat for the session  FenceBrokerRecord                           Fenced (Offline if it
    (broker.session.timeout.ms)                                               was Stopping)
    heartbeat, WantShutDown,      BrokerRegistrationChangeRecord v1,          Stopping
    while Online                  InControlledShutdown=1
    heartbeat while Stopping,     BrokerRegistrationChangeRecord v1,          Offline, ShouldShutDown
    every active broker past the  Fenced=1
    Stopping record
    heartbeat, WantShutDown,      BrokerRegistrationChangeRecord v1,          Offline, ShouldShutDown
    while Fenced                  Fenced=1, InControlledShutdown=1
    ============================  ==========================================  =========================

Kafka fences with a BrokerRegistrationChangeRecord on recent metadata versions and with
Fence/UnfenceBrokerRecord before them; the registry applies both, the reference writes the dedicated
records for fencing and the change record only where nothing else can say "controlled shutdown". With
no partitions to move, Kafka would skip Stopping; the reference keeps the seed's Stopping step and
ends it the way Kafka ends a controlled shutdown: once every active broker has reported a metadata
offset at or past the record that started it (Kafka's ``controlledShutdownOffset <= lowestActiveOffset``).

Sessions (heartbeat deadlines) are in memory, as in Kafka. A controller that becomes active gives
every registered broker that is not Offline a fresh session (Kafka resets deadlines on failover) so a
new leader does not fence the cluster it just inherited.

Answers are sent only once everything this controller has written is committed (Kafka completes each
controller write event at its offset); the shell enforces that with ``Decision.commit_offset``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kraft_tck.reference.registry import (
    CHANGE,
    FENCE,
    FENCING_FENCE,
    REGISTER,
    SHUTDOWN_IN_CONTROLLED,
    UNFENCE,
    BrokerRegistration,
    BrokerRegistry,
    BrokerState,
    encode,
)
from kraft_tck.spec.errors import Errors

Body = dict[str, Any]

BROKER_REGISTRATION, BROKER_HEARTBEAT = 62, 63
#: What the reference node serves for brokers (the versions in spec/messages/).
SERVED_API_VERSIONS: dict[int, tuple[int, int]] = {BROKER_REGISTRATION: (0, 4), BROKER_HEARTBEAT: (0, 1)}
REGISTER_BROKER_RECORD_VERSION = 1  # v1 adds InControlledShutdown; v2+ only adds ZK-migration/log-dir fields
CHANGE_RECORD_VERSION = 1


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    name: str
    version: int
    body: Body

    def value(self) -> bytes:
        return encode(self.name, self.version, self.body)


@dataclass(frozen=True, slots=True)
class Decision:
    """One request's outcome.

    ``records`` must be appended as one batch starting at ``base_offset`` (the offset the controller
    assumed; the broker epoch depends on it). ``response`` may be sent once the high watermark is at
    least ``commit_offset`` (0: at once).
    """

    response: Body
    records: tuple[MetadataRecord, ...] = ()
    base_offset: int = -1
    commit_offset: int = 0
    note: str = ""

    @property
    def error(self) -> Errors:
        return Errors(self.response.get("ErrorCode", 0))


@dataclass(slots=True)
class _Session:
    deadline_ms: int
    metadata_offset: int = -1  # the last CurrentMetadataOffset heard from the broker
    shutdown_offset: int = -1  # offset of the record that made it Stopping (Kafka's controlledShutdownOffset)


@dataclass
class Controller:
    """The broker-lifecycle half of Kafka's QuorumController, for the reference node."""

    registry: BrokerRegistry  # the committed registry, owned and advanced by the shell
    session_timeout_ms: int
    cluster_id: str | None = None
    active: bool = False
    epoch: int = -1
    _sessions: dict[int, _Session] = field(default_factory=dict)
    _pending: list[tuple[int, MetadataRecord]] = field(default_factory=list)  # appended, not yet committed

    # ------------------------------------------------------------------------------------ lifecycle

    def activate(self, now_ms: int, epoch: int, cluster_id: str | None) -> None:
        """Become the active controller of ``epoch``: fresh sessions for every broker still running."""
        self.active, self.epoch, self.cluster_id = True, epoch, cluster_id
        self._pending = []
        self._sessions = {
            b.broker_id: _Session(now_ms + self.session_timeout_ms)
            for b in self.registry.brokers()
            if b.state != BrokerState.OFFLINE
        }

    def deactivate(self) -> None:
        """Leadership lost: pending records are no longer ours to vouch for; sessions go with them."""
        self.active = False
        self._pending = []
        self._sessions = {}

    def committed(self, high_watermark: int) -> None:
        """Forget pending records the registry now holds."""
        if self._pending:  # every commit of every node: nothing to build when nothing is pending
            self._pending = [(off, rec) for off, rec in self._pending if off >= high_watermark]

    def view(self) -> BrokerRegistry:
        """The committed registry plus what this controller has appended since (Kafka's in-memory view)."""
        out = self.registry.copy()
        for offset, rec in self._pending:
            if offset >= out.next_offset:
                out.apply(offset, rec.name, rec.body)
        return out

    def next_deadline_ms(self) -> int | None:
        """When the earliest unfenced broker's session expires (None when there is nothing to watch)."""
        if not self.active:
            return None
        view = self.view()
        deadlines = [s.deadline_ms for bid, s in self._sessions.items() if _unfenced(view.get(bid))]
        return min(deadlines, default=None)

    # ------------------------------------------------------------------------------------ requests

    def handle_broker_registration(self, body: Body, now_ms: int, next_offset: int) -> Decision:
        """KIP-631 BrokerRegistration; KIP-631 "Register Flow": validate, append, answer the epoch."""
        if not self.active:
            return _registration_error(Errors.NOT_CONTROLLER, "not the active controller")
        broker_id = body["BrokerId"]
        if body["ClusterId"] != self.cluster_id:
            return _registration_error(
                Errors.INCONSISTENT_CLUSTER_ID, f"cluster id {body['ClusterId']!r} is not {self.cluster_id!r}"
            )
        if broker_id < 0:
            return _registration_error(Errors.INVALID_REGISTRATION, f"broker id {broker_id} is negative")
        listeners = body.get("Listeners") or []
        if not listeners:
            return _registration_error(Errors.INVALID_REGISTRATION, f"broker {broker_id} names no listeners")
        existing = self.view().get(broker_id)
        incarnation: uuid.UUID = body["IncarnationId"]
        if (
            existing is not None
            and existing.incarnation_id != incarnation
            and body.get("PreviousBrokerEpoch", -1) != existing.broker_epoch  # KIP-966: clean restart
            and self._live(broker_id, now_ms)
        ):
            return _registration_error(
                Errors.DUPLICATE_BROKER_REGISTRATION,
                f"broker {broker_id} is held by live incarnation {existing.incarnation_id}",
            )
        record = MetadataRecord(
            REGISTER,
            REGISTER_BROKER_RECORD_VERSION,
            {
                "BrokerId": broker_id,
                "IncarnationId": incarnation,
                "BrokerEpoch": next_offset,  # KIP-631: the broker epoch is the record's offset
                "EndPoints": [
                    {"Name": lst["Name"], "Host": lst["Host"], "Port": lst["Port"],
                     "SecurityProtocol": lst["SecurityProtocol"]}
                    for lst in listeners
                ],
                "Features": [dict(f) for f in body.get("Features") or []],
                "Rack": body.get("Rack"),
                "Fenced": True,  # KIP-631 "Register Flow": a registered broker starts fenced
                "InControlledShutdown": False,
            },
        )
        self._sessions[broker_id] = _Session(now_ms + self.session_timeout_ms)
        return self._write(
            [record],
            next_offset,
            {"ThrottleTimeMs": 0, "ErrorCode": int(Errors.NONE), "BrokerEpoch": next_offset},
            f"register broker {broker_id} epoch {next_offset}",
        )

    def handle_broker_heartbeat(self, body: Body, now_ms: int, next_offset: int) -> Decision:
        """KIP-631 BrokerHeartbeat: keep the session, move the broker through the seed's states."""
        if not self.active:
            return _heartbeat_error(Errors.NOT_CONTROLLER, "not the active controller")
        broker_id, epoch = body["BrokerId"], body["BrokerEpoch"]
        view = self.view()
        reg = view.get(broker_id)
        if reg is None:
            # Kafka answers STALE_BROKER_EPOCH ("no broker registration found"); the reference says
            # what happened, and both mean the same to a broker: register again.
            return _heartbeat_error(Errors.BROKER_ID_NOT_REGISTERED, f"broker {broker_id} is not registered")
        if epoch != reg.broker_epoch:
            return _heartbeat_error(
                Errors.STALE_BROKER_EPOCH, f"broker {broker_id} epoch {epoch}, current {reg.broker_epoch}"
            )
        offset = body["CurrentMetadataOffset"]
        session = self._sessions.get(broker_id) or _Session(0)
        session.deadline_ms = now_ms + self.session_timeout_ms
        session.metadata_offset = max(session.metadata_offset, offset)
        self._sessions[broker_id] = session
        # Kafka: caught up once the broker has replayed its own registration record.
        caught_up = offset >= reg.broker_epoch
        want_fence, want_shutdown = bool(body.get("WantFence")), bool(body.get("WantShutDown"))
        records: list[MetadataRecord] = []
        state = reg.state
        ident = {"BrokerId": broker_id, "BrokerEpoch": reg.broker_epoch}
        if state == BrokerState.FENCED:
            if want_shutdown:
                records.append(MetadataRecord(CHANGE, CHANGE_RECORD_VERSION, {
                    **ident, "Fenced": FENCING_FENCE, "InControlledShutdown": SHUTDOWN_IN_CONTROLLED}))
                state = BrokerState.OFFLINE
            elif not want_fence and caught_up:
                records.append(MetadataRecord(UNFENCE, 0, {"Id": broker_id, "Epoch": reg.broker_epoch}))
                state = BrokerState.ONLINE
        elif state == BrokerState.ONLINE:
            if want_fence and want_shutdown:
                records.append(MetadataRecord(CHANGE, CHANGE_RECORD_VERSION, {
                    **ident, "Fenced": FENCING_FENCE, "InControlledShutdown": SHUTDOWN_IN_CONTROLLED}))
                state = BrokerState.OFFLINE
            elif want_fence:
                records.append(MetadataRecord(FENCE, 0, {"Id": broker_id, "Epoch": reg.broker_epoch}))
                state = BrokerState.FENCED
            elif want_shutdown:
                records.append(MetadataRecord(CHANGE, CHANGE_RECORD_VERSION, {
                    **ident, "InControlledShutdown": SHUTDOWN_IN_CONTROLLED}))
                session.shutdown_offset = next_offset
                state = BrokerState.STOPPING
        elif state == BrokerState.STOPPING:
            if session.shutdown_offset < 0:
                # Stopping since before this controller: every active broker must reach what is written now.
                session.shutdown_offset = next_offset - 1
            if self._lowest_active_offset(view) >= session.shutdown_offset:
                records.append(MetadataRecord(CHANGE, CHANGE_RECORD_VERSION, {**ident, "Fenced": FENCING_FENCE}))
                state = BrokerState.OFFLINE
        response = {
            "ThrottleTimeMs": 0,
            "ErrorCode": int(Errors.NONE),
            "IsCaughtUp": caught_up,
            "IsFenced": state in (BrokerState.FENCED, BrokerState.OFFLINE),
            "ShouldShutDown": state == BrokerState.OFFLINE,
        }
        if state == BrokerState.OFFLINE:
            self._sessions.pop(broker_id, None)  # shut down: nobody holds this id any more
        note = f"heartbeat broker {broker_id}: {reg.state} -> {state}"
        return self._write(records, next_offset, response, note)

    def fence_expired(self, now_ms: int, next_offset: int) -> Decision | None:
        """Fence every unfenced broker whose session expired (``broker.session.timeout.ms``)."""
        if not self.active:
            return None
        view = self.view()
        records = [
            MetadataRecord(FENCE, 0, {"Id": b.broker_id, "Epoch": b.broker_epoch})
            for b in view.brokers()
            if _unfenced(b) and self._expired(b.broker_id, now_ms)
        ]
        if not records:
            return None
        ids = [r.body["Id"] for r in records]
        return self._write(records, next_offset, {}, f"session expired: fence {ids}")

    # ------------------------------------------------------------------------------------ helpers

    def _write(self, records: list[MetadataRecord], base_offset: int, response: Body, note: str) -> Decision:
        for i, rec in enumerate(records):
            self._pending.append((base_offset + i, rec))
        last_written = max((off for off, _ in self._pending), default=-1)
        return Decision(
            response,
            tuple(records),
            base_offset if records else -1,
            last_written + 1 if last_written >= 0 else 0,
            note,
        )

    def _live(self, broker_id: int, now_ms: int) -> bool:
        session = self._sessions.get(broker_id)
        return session is not None and session.deadline_ms > now_ms

    def _expired(self, broker_id: int, now_ms: int) -> bool:
        session = self._sessions.get(broker_id)
        if session is None:  # unfenced without a session cannot outlive activate(); be safe, start one
            self._sessions[broker_id] = _Session(now_ms + self.session_timeout_ms)
            return False
        return session.deadline_ms <= now_ms

    def _lowest_active_offset(self, view: BrokerRegistry) -> int:
        offsets = [
            (self._sessions[b.broker_id].metadata_offset if b.broker_id in self._sessions else -1)
            for b in view.brokers()
            if _unfenced(b)
        ]
        return min(offsets, default=-1)


def _unfenced(reg: BrokerRegistration | None) -> bool:
    return reg is not None and not reg.fenced


def _registration_error(error: Errors, note: str) -> Decision:
    return Decision({"ThrottleTimeMs": 0, "ErrorCode": int(error), "BrokerEpoch": -1}, note=note)


def _heartbeat_error(error: Errors, note: str) -> Decision:
    return Decision(
        {"ThrottleTimeMs": 0, "ErrorCode": int(error), "IsCaughtUp": False, "IsFenced": True,
         "ShouldShutDown": False},
        note=note,
    )


def error_response(api_key: int, error: Errors) -> Body:
    """A BrokerRegistration or BrokerHeartbeat response carrying only ``error``."""
    if api_key == BROKER_REGISTRATION:
        return _registration_error(error, "").response
    if api_key == BROKER_HEARTBEAT:
        return _heartbeat_error(error, "").response
    raise ValueError(f"api key {api_key} is not BrokerRegistration (62) or BrokerHeartbeat (63)")
