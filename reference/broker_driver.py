"""The broker driver: KIP-631 broker registration and heartbeats on top of the Raft core, for every shell.

One copy of the glue between the metadata log and the broker controller (``controller.py``) over the
committed registry (``registry.py``). Both shells, the node (``node.py``) and the simulator
(``kraft_tck.traces.sim``), feed it the same inputs and act on what it returns:

    ==========================================  ===============================================================
    the shell tells it                          it answers
    ==========================================  ===============================================================
    ``commit(hw, batches, epoch_of)``           registry changes (one ``BrokerEvent`` each), refused records,
                                                the broker answers whose records are now committed
    ``leadership(status, now)``                 whether this node became / stopped being the active
                                                controller; waiting answers turned NOT_CONTROLLER
    ``decide(api_key, body, now, status)``      a ``Decision``: records to append as one batch, the answer
    ``appended(decision, result, token, ...)``  the answer now, or later from ``commit`` / ``leadership``
    ``expire(now, status)``                     a ``Decision`` fencing brokers whose session expired
    ==========================================  ===============================================================

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
from kraft_tck.spec.records import RecordBatch

Body = dict[str, Any]
#: Reads of the node's log: batches from an offset on, and the epoch of the record at an offset.
BatchesFrom = Callable[[int], Iterable[RecordBatch]]
EpochOf = Callable[[int], int]


@dataclass(frozen=True, slots=True)
class BrokerAnswer:
    """The response to send for the request the shell named ``token``."""

    token: object
    response: Body


@dataclass(frozen=True, slots=True)
class Committed:
    """What newly committed records did: registry changes in log order, refused records, released answers.
    ``fatal``: a refused record on a voter (see the module docstring): the shell stops."""

    changes: tuple[BrokerChange, ...] = ()
    errors: tuple[RegistryError, ...] = ()
    answers: tuple[BrokerAnswer, ...] = ()
    fatal: bool = False


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

    def commit(self, high_watermark: int, batches_from: BatchesFrom, epoch_of: EpochOf) -> Committed:
        """The high watermark moved: apply newly committed records, release the answers they complete."""
        registry, controller = self.registry, self.controller
        changes: list[BrokerChange] = []
        errors: list[RegistryError] = []
        if registry.next_offset < high_watermark:
            # Read as far as the registry applies: the log may hold more than the committed prefix.
            changes, errors = registry.apply_committed(batches_from(registry.next_offset), high_watermark)
            controller.committed(high_watermark)
        answers = self._release(high_watermark, epoch_of) if self._waiters else ()
        if not changes and not errors and not answers:
            return _NOTHING_COMMITTED
        return Committed(tuple(changes), tuple(errors), answers, bool(errors) and self.is_voter)

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
