"""The broker driver: KIP-631 broker registration and heartbeats on top of the Raft core, for every shell.

One copy of the glue between the metadata log and the broker controller (``controller.py``) over the
committed registry (``registry.py``). Both shells, the node (``node.py``) and the simulator
(``kraft_tck.traces.sim``), feed it the same inputs and act on what it returns:

    ==========================================  ===============================================================
    the shell tells it                          it answers
    ==========================================  ===============================================================
    ``commit(hw, read, epoch_of)``              registry changes (one ``BrokerEvent`` each), refused records,
                                                the broker answers whose records are now committed
    ``leadership(status, now)``                 whether this node became / stopped being the active
                                                controller; waiting answers turned NOT_CONTROLLER
    ``decide(api_key, body, now, status)``      a ``Decision``: records to append as one batch, the answer
    ``appended(decision, result, token, ...)``  the answer now, or later from ``commit`` / ``leadership``
    ``expire(now, status)``                     a ``Decision`` fencing brokers whose session expired
    ``snapshot_records()``                      the registry as a snapshot's records (KIP-630 CreateSnapshot)
    ``load_snapshot(end, records)``             the registry of a loaded or installed snapshot, in place
    ==========================================  ===============================================================

``SnapshotTrigger`` (below) decides when a node snapshots, from what ``commit`` reports (``Committed.bytes``,
``Committed.aligned``) and the time: the same rule for the node and the simulator.

Pure: no clock, no I/O, no core. Time, the core's status (``io.CoreStatus``) and reads of the log come in as
arguments; the shell appends the decision's records (a ``ClientWrite``) and sends the answers.

The rules, with Kafka as the authority:

- The active controller is the Raft leader whose epoch has committed an entry and whose registry has
  replayed the whole committed log (Kafka's QuorumController claims leadership only after replaying up to
  the leader's committed offset: ``QuorumMetaLogListener.handleLeaderChange`` / ``claim``).
- A decision's records are written at the leader's *next append offset*, past records the leader still
  holds back (Kafka's ``OffsetControlManager.nextWriteOffset``, advanced by ``handleScheduleAppend`` at
  each scheduled append, not at each commit); the broker epoch is that offset (KIP-631 "Register Flow").
- An answer leaves once everything it depends on is committed in the epoch it was written in (Kafka
  completes a controller write event at its offset, ``deferredEventQueue.completeUpTo``); if the records
  were lost to a new leader (same offset, other epoch: Raft's Log Matching) or leadership ended first,
  the broker is told NOT_CONTROLLER and asks again.
- A committed record the registry refuses is a fatal fault on a controller (a voter): Kafka's
  ``QuorumController`` replays committed records and calls its ``fatalFaultHandler`` when one fails
  ("Unable to apply ... record ... on standby controller"). ``commit`` reports such records; the shells
  stop on them (``Committed.fatal``). An observer, like Kafka's brokers (``MetadataLoader``'s non-fatal
  fault handler), logs them and goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kraft_tck.reference.controller import BROKER_REGISTRATION, Controller, Decision, error_response
from kraft_tck.reference.io import ClientAppendResult, CoreStatus
from kraft_tck.reference.registry import BrokerChange, BrokerRegistry, RegistryError
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import HEADER_SIZE, Record, RecordBatch

Body = dict[str, Any]
#: How the driver reads a log: ``read(from, until)``, the batches holding an offset in ``[from, until)`` in order,
#: each with its encoded size (RecordBatch v2 bytes): the node's ``Log.iter_sized``, whose log keeps the bytes, or
#: ``sized(batches_from)`` over a log that keeps records only.
SizedBatchesFrom = Callable[[int, int], Iterable[tuple[RecordBatch, int]]]
#: A log's batches from the one holding an offset on (``sized`` adds their sizes).
BatchesFrom = Callable[[int], Iterable[RecordBatch]]
#: The epoch of the record at an offset.
EpochOf = Callable[[int], int]


@dataclass(frozen=True, slots=True)
class BrokerAnswer:
    """The response to send for the request the shell named ``token``."""

    token: object
    response: Body


@dataclass(slots=True)
class Committed:
    """What newly committed records did: registry changes in log order, refused records, released answers.
    ``fatal``: a refused record on a voter (see the module docstring): the shell stops. One per commit on every
    node, read once by the shell: slotted, not frozen (a frozen dataclass's __init__ sets each field through
    object.__setattr__)."""

    changes: tuple[BrokerChange, ...] = ()
    errors: tuple[RegistryError, ...] = ()
    answers: tuple[BrokerAnswer, ...] = ()
    fatal: bool = False
    #: The size (RecordBatch v2 bytes) of the batches this commit applied whole: what Kafka's SnapshotGenerator
    #: counts towards metadata.log.max.record.bytes.between.snapshots (LogDeltaManifest.numBytes).
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class LeadershipChange:
    """``activated``: this node just became the active controller (of ``epoch``); ``deactivated``: it just
    stopped being it, and ``answers`` are the waiting requests, now NOT_CONTROLLER."""

    activated: bool = False
    deactivated: bool = False
    answers: tuple[BrokerAnswer, ...] = ()


NO_CHANGE = LeadershipChange()


@dataclass(slots=True)
class _Waiter:
    last_offset: int  # the answer waits until the high watermark passes it
    epoch: int  # ... with this epoch still at that offset
    token: object
    api_key: int
    response: Body


@dataclass
class BrokerDriver:
    """The broker half of one node: its committed registry, the controller logic, the answers waiting for
    their records to commit. Volatile, like Kafka's: a restarted node starts a new driver and replays."""

    session_timeout_ms: int
    is_voter: bool = True
    registry: BrokerRegistry = field(default_factory=BrokerRegistry)
    controller_class: type[Controller] = Controller  # tests inject a faulty controller here
    controller: Controller = field(init=False)
    _waiters: list[_Waiter] = field(default_factory=list)
    #: Whether ``applied_offset`` is a batch boundary (a snapshot may end only there, Kafka's isOffsetBatchAligned).
    applied_aligned: bool = True
    #: The largest timestamp of the batches applied (a snapshot's LastContainedLogTimestamp, which
    #: metadata.max.retention.ms measures).
    applied_timestamp: int = 0

    def __post_init__(self) -> None:
        self.controller = self.controller_class(self.registry, self.session_timeout_ms)

    @property
    def active(self) -> bool:
        return self.controller.active

    @property
    def waiting(self) -> int:
        """How many answers wait for their records to commit."""
        return len(self._waiters)

    # ------------------------------------------------------------------------------------ log and leadership

    def commit(self, high_watermark: int, read: SizedBatchesFrom, epoch_of: EpochOf) -> Committed:
        """The high watermark moved: apply newly committed records, release the answers they complete. ``read``
        gives the committed batches with their encoded sizes (``SizedBatchesFrom``): every node calls this on every
        commit, and a log that keeps the bytes (the node's) does not recompute the sizes."""
        registry, controller = self.registry, self.controller
        changes: list[BrokerChange] = []
        errors: list[RegistryError] = []
        applied_bytes = 0  # the size of the batches applied whole
        if registry.next_offset < high_watermark:
            applied_end = timestamp = 0  # the end offset of the last batch applied whole (0: none), their max time
            # Read as far as the registry applies: the log may hold more than the committed prefix. Each batch the
            # registry is about to finish applying is counted first (``registry.next_offset``: where it stands).
            for batch, size in read(registry.next_offset, high_watermark):
                if batch.base_offset >= high_watermark:
                    break
                last = batch.last_offset
                if registry.next_offset <= last < high_watermark:
                    applied_bytes += size
                    applied_end = last + 1
                    if batch.max_timestamp > timestamp:
                        timestamp = batch.max_timestamp
                registry.apply_batch(batch, high_watermark, changes, errors)
            controller.committed(high_watermark)
            if applied_end:
                self.applied_aligned = applied_end == registry.next_offset
                if timestamp > self.applied_timestamp:
                    self.applied_timestamp = timestamp
            else:
                self.applied_aligned = False  # only part of a batch: the applied offset is inside it
        answers = self._release(high_watermark, epoch_of) if self._waiters else ()
        if not changes and not errors and not answers:
            # Nearly every commit: only bytes applied (or nothing at all).
            return Committed(bytes=applied_bytes) if applied_bytes else _NOTHING_COMMITTED
        return Committed(tuple(changes), tuple(errors), answers, bool(errors) and self.is_voter, applied_bytes)

    @property
    def applied_offset(self) -> int:
        """Every committed record below this offset is in the registry (a snapshot taken now ends here)."""
        return self.registry.next_offset

    def snapshot_records(self) -> list[tuple[bytes | None, bytes]]:
        """The registry as a snapshot's records, ending at ``applied_offset`` (registry.py)."""
        return self.registry.snapshot_records()

    def load_snapshot(self, end_offset: int, records: Iterable[Record]) -> None:
        """Replace the registry by a snapshot's (a restart from it, or a follower's install). Raises
        ``RegistryError`` (registry unchanged) when a record does not apply. The controller holds the same
        registry object, so it is replaced in place; a node installing a snapshot is not the active controller."""
        self.registry.replace_with(BrokerRegistry.from_snapshot(end_offset, records))
        self.controller.committed(end_offset)
        self.applied_aligned = True

    def leadership(self, status: CoreStatus, now_ms: int, *, stopping: bool = False) -> LeadershipChange:
        """After every step: is this node the active controller (see the module docstring)?"""
        controller = self.controller
        if (
            not stopping
            and status.is_leader
            and status.high_watermark > status.epoch_start_offset
            and self.registry.next_offset >= status.high_watermark
        ):
            if not controller.active or controller.epoch != status.epoch:
                controller.activate(now_ms, status.epoch, status.cluster_id)
                return LeadershipChange(activated=True)
            return NO_CHANGE
        if controller.active:
            return LeadershipChange(deactivated=True, answers=self._deactivate())
        return NO_CHANGE

    # ------------------------------------------------------------------------------------ requests

    def decide(self, api_key: int, body: Body, now_ms: int, status: CoreStatus) -> Decision:
        """A BrokerRegistration or BrokerHeartbeat request: the controller's decision, written (if at all)
        at the leader's next append offset."""
        if api_key == BROKER_REGISTRATION:
            return self.controller.handle_broker_registration(body, now_ms, status.next_append_offset)
        return self.controller.handle_broker_heartbeat(body, now_ms, status.next_append_offset)

    def expire(self, now_ms: int, status: CoreStatus) -> Decision | None:
        """KIP-631: fence the brokers that sent no heartbeat within ``broker.session.timeout.ms``."""
        return self.controller.fence_expired(now_ms, status.next_append_offset)

    def appended(
        self,
        decision: Decision,
        result: ClientAppendResult | None,
        token: object,
        api_key: int,
        high_watermark: int,
        epoch_of: EpochOf,
    ) -> tuple[LeadershipChange, BrokerAnswer | None]:
        """The shell appended ``decision.records`` (``result``: the core's answer to that ClientWrite; None
        when there was nothing to append). Returns whether that ended this controller's leadership, and the
        answer to send now for ``token`` (None: it waits, or ``token`` is None, a decision nobody asked for).

        A refused append, or one that landed elsewhere than the decision assumed, means this node is not
        (or no longer) the controller it thought it was: it steps down and the broker hears NOT_CONTROLLER.
        """
        controller = self.controller
        epoch = controller.epoch
        if decision.records:
            if result is None or not result.accepted or result.base_offset != decision.base_offset:
                change = LeadershipChange(deactivated=True, answers=self._deactivate()) if controller.active \
                    else NO_CHANGE
                return change, self._not_controller(token, api_key)
            epoch = result.epoch
        last = decision.commit_offset - 1
        if last < 0:
            return NO_CHANGE, self._answer(token, decision.response)
        if high_watermark <= last:
            if token is not None:
                self._waiters.append(_Waiter(last, epoch, token, api_key, decision.response))
            return NO_CHANGE, None
        # Log Matching: the same offset in the same epoch is the very entry this controller appended.
        if epoch_of(last) == epoch:
            return NO_CHANGE, self._answer(token, decision.response)
        return NO_CHANGE, self._not_controller(token, api_key)

    def forget(self, token: object) -> None:
        """The shell gave up on ``token``'s answer (its own deadline): drop it."""
        self._waiters = [w for w in self._waiters if w.token != token]

    def stop(self) -> tuple[BrokerAnswer, ...]:
        """The node stops: every waiting answer is NOT_CONTROLLER."""
        return self._fail_waiters()

    # ------------------------------------------------------------------------------------ helpers

    def _release(self, high_watermark: int, epoch_of: EpochOf) -> tuple[BrokerAnswer, ...]:
        keep: list[_Waiter] = []
        out: list[BrokerAnswer] = []
        for w in self._waiters:
            if high_watermark > w.last_offset:
                # Log Matching: the same offset in the same epoch is the very entry this controller appended.
                ok = epoch_of(w.last_offset) == w.epoch
                response = w.response if ok else error_response(w.api_key, Errors.NOT_CONTROLLER)
                out.append(BrokerAnswer(w.token, response))
            else:
                keep.append(w)
        self._waiters = keep
        return tuple(out)

    def _deactivate(self) -> tuple[BrokerAnswer, ...]:
        self.controller.deactivate()
        return self._fail_waiters()

    def _fail_waiters(self) -> tuple[BrokerAnswer, ...]:
        waiters, self._waiters = self._waiters, []
        return tuple(BrokerAnswer(w.token, error_response(w.api_key, Errors.NOT_CONTROLLER)) for w in waiters)

    @staticmethod
    def _answer(token: object, response: Body) -> BrokerAnswer | None:
        return None if token is None else BrokerAnswer(token, response)

    @staticmethod
    def _not_controller(token: object, api_key: int) -> BrokerAnswer | None:
        return None if token is None else BrokerAnswer(token, error_response(api_key, Errors.NOT_CONTROLLER))


_NOTHING_COMMITTED = Committed()


def sized(batches_from: BatchesFrom) -> SizedBatchesFrom:
    """A ``SizedBatchesFrom`` over a log that keeps records only (the simulator's, tests'): the sizes are computed
    from the records (``batch_size``), and the read stops at the first batch at or past ``until``."""

    def read(start: int, until: int) -> Iterable[tuple[RecordBatch, int]]:
        for batch in batches_from(start):
            if batch.base_offset >= until:
                return
            yield batch, batch_size(batch)

    return read


def batch_size(batch: RecordBatch) -> int:
    """The RecordBatch v2 size of ``batch`` in bytes (header and records, as on disk), without encoding it."""
    size = HEADER_SIZE
    for rec in batch.records:
        body = 1 + _varint_len(rec.timestamp_delta) + _varint_len(rec.offset_delta)  # attributes, deltas
        for part in (rec.key, rec.value):
            body += _varint_len(-1) if part is None else _varint_len(len(part)) + len(part)
        body += _varint_len(len(rec.headers))
        for hkey, hvalue in rec.headers:
            raw = hkey.encode()
            body += _varint_len(len(raw)) + len(raw)
            body += _varint_len(-1) if hvalue is None else _varint_len(len(hvalue)) + len(hvalue)
        size += _varint_len(body) + body
    return size


def _varint_len(value: int) -> int:
    """Bytes of ``value`` as a zig-zag varint (Kafka's ByteUtils.sizeOfVarint)."""
    zigzag = (value << 1) ^ (value >> 63)
    n = 1
    while zigzag >= 0x80:
        zigzag >>= 7
        n += 1
    return n


@dataclass
class SnapshotTrigger:
    """When to snapshot (KIP-630), as Kafka's ``SnapshotGenerator``: once the committed bytes applied since the
    latest snapshot reach ``max_new_record_bytes`` (metadata.log.max.record.bytes.between.snapshots), or once
    ``max_interval_ms`` (metadata.log.max.snapshot.interval.ms; 0 turns it off) has passed since the latest
    snapshot with committed records not in it. Only at a batch boundary (Kafka's ``isOffsetBatchAligned``),
    and never at or below the latest snapshot. Pure: the shell reports commits and snapshots, asks ``due``.

    Kafka looks at the time only when a commit arrives (``publishLogDelta``), where its active controller writes
    a no-op record every 500 ms; this node writes none, so shells also ask ``due`` on a timer.
    """

    max_new_record_bytes: int
    max_interval_ms: int
    last_snapshot_offset: int = 0  # the end offset of the latest snapshot (0: none)
    last_snapshot_ms: int = 0  # when it was taken or loaded (or the node started)
    bytes_since: int = 0  # committed bytes applied since then
    applied_offset: int = 0  # where the state machine stands
    aligned: bool = True  # applied_offset is a batch boundary

    def committed(self, nbytes: int, applied_offset: int, aligned: bool) -> None:
        """Records up to ``applied_offset`` (a batch boundary when ``aligned``) are applied; ``nbytes`` new."""
        self.bytes_since += nbytes
        self.applied_offset = applied_offset
        self.aligned = aligned

    def due(self, now_ms: int) -> str | None:
        """Why a snapshot at ``applied_offset`` is due now (Kafka's log line), or None."""
        if not self.aligned or self.applied_offset <= self.last_snapshot_offset:
            return None
        if self.bytes_since >= self.max_new_record_bytes:
            return f"we have replayed at least {self.max_new_record_bytes} bytes"
        if self.max_interval_ms and now_ms - self.last_snapshot_ms >= self.max_interval_ms:
            return f"we have waited at least {self.max_interval_ms} ms"
        return None

    def next_check_ms(self) -> int | None:
        """When the time rule could next fire (None: it cannot until a commit)."""
        if not self.max_interval_ms or self.applied_offset <= self.last_snapshot_offset:
            return None
        return self.last_snapshot_ms + self.max_interval_ms

    def snapshotted(self, end_offset: int, now_ms: int) -> None:
        """A snapshot ending at ``end_offset`` was taken, loaded at start-up or installed from the leader: the
        counters start again (Kafka's resetSnapshotCounters, publishSnapshot)."""
        self.last_snapshot_offset = max(self.last_snapshot_offset, end_offset)
        self.applied_offset = max(self.applied_offset, end_offset)
        self.last_snapshot_ms = now_ms
        self.bytes_since = 0

