"""The active controller's broker lifecycle, pure: requests and time in, records and responses out.

A small harness plays the shell: it appends each decision's records at the offset the controller
chose, commits them (applies the committed log to the registry, as every node does) and only then
reads the response, which is what the node sends (KIP-631; KIP-631 "Register Flow", "Broker States").
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kraft_tck.reference.controller import (
    BROKER_HEARTBEAT,
    BROKER_REGISTRATION,
    Controller,
    Decision,
    error_response,
)
from kraft_tck.reference.registry import CHANGE, FENCE, REGISTER, UNFENCE, BrokerRegistry, BrokerState
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import RecordBatch, data_batch

CLUSTER = "Xv3eKjYRQ6qPqB1dZ2tQ7w"
TIMEOUT = 1000
INC_A, INC_B = uuid.UUID(int=1), uuid.UUID(int=2)


class Shell:
    """Appends, commits and replays like reference/node.py, without sockets."""

    def __init__(self, start_offset: int = 1) -> None:
        self.registry = BrokerRegistry()
        self.registry.next_offset = start_offset  # offset 0: the leader's LeaderChange
        self.batches: list[RecordBatch] = []
        self.end = start_offset
        self.now = 0
        self.controller = Controller(self.registry, TIMEOUT)
        self.controller.activate(self.now, 1, CLUSTER)

    def run(self, decision: Decision | None, commit: bool = True) -> Decision | None:
        if decision is None:
            return None
        if decision.records:
            assert decision.base_offset == self.end
            self.batches.append(data_batch(self.end, 1, [r.value() for r in decision.records]))
            self.end += len(decision.records)
        if commit:
            self.commit()
        return decision

    def commit(self) -> None:
        _, errors = self.registry.apply_committed(self.batches, self.end)
        assert errors == []
        self.controller.committed(self.end)

    def register(self, broker_id: int = 1, inc: uuid.UUID = INC_A, **body: Any) -> Decision:
        req = {"BrokerId": broker_id, "ClusterId": CLUSTER, "IncarnationId": inc,
               "Listeners": [{"Name": "PLAINTEXT", "Host": "h", "Port": 9092, "SecurityProtocol": 0}],
               "Features": [], "Rack": None, **body}
        d = self.run(self.controller.handle_broker_registration(req, self.now, self.end))
        assert d is not None
        return d

    def heartbeat(self, broker_id: int, epoch: int, offset: int | None = None, *, fence: bool = False,
                  shutdown: bool = False, commit: bool = True) -> Decision:
        req = {"BrokerId": broker_id, "BrokerEpoch": epoch,
               "CurrentMetadataOffset": self.end - 1 if offset is None else offset,
               "WantFence": fence, "WantShutDown": shutdown}
        d = self.run(self.controller.handle_broker_heartbeat(req, self.now, self.end), commit)
        assert d is not None
        return d

    def state(self, broker_id: int) -> BrokerState | None:
        reg = self.registry.get(broker_id)
        return None if reg is None else reg.state


def names(d: Decision) -> list[str]:
    return [r.name for r in d.records]


def online(shell: Shell, broker_id: int = 1) -> int:
    epoch = shell.register(broker_id).response["BrokerEpoch"]
    shell.heartbeat(broker_id, epoch)
    assert shell.state(broker_id) == BrokerState.ONLINE
    return int(epoch)


# ------------------------------------------------------------------------------------ registration


def test_registration_appends_a_fenced_record_and_answers_its_offset_as_epoch() -> None:
    shell = Shell(start_offset=5)
    d = shell.register(7)
    assert names(d) == [REGISTER] and d.base_offset == 5 and d.commit_offset == 6
    assert d.response == {"ThrottleTimeMs": 0, "ErrorCode": 0, "BrokerEpoch": 5}
    assert d.records[0].body["BrokerEpoch"] == 5 and d.records[0].body["Fenced"] is True
    assert shell.state(7) == BrokerState.FENCED


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ({"ClusterId": "someOtherClusterIdAAAA"}, Errors.INCONSISTENT_CLUSTER_ID),
        ({"Listeners": []}, Errors.INVALID_REGISTRATION),
        ({"BrokerId": -3}, Errors.INVALID_REGISTRATION),
    ],
    ids=["foreign cluster id", "no listeners", "negative id"],
)
def test_invalid_registrations_are_refused_without_records(body: dict[str, Any], error: Errors) -> None:
    shell = Shell()
    broker_id = body.pop("BrokerId", 1)
    d = shell.register(broker_id, **body)
    assert d.error == error and d.records == () and d.response["BrokerEpoch"] == -1 and d.commit_offset == 0


def test_duplicate_broker_id_from_another_live_incarnation_is_refused() -> None:
    shell = Shell()
    epoch = online(shell)
    d = shell.register(1, INC_B)
    assert d.error == Errors.DUPLICATE_BROKER_REGISTRATION and d.records == ()
    # The same incarnation may register again (a lost response): new record, new epoch.
    again = shell.register(1, INC_A)
    assert again.error == Errors.NONE and again.response["BrokerEpoch"] > epoch
    # Once the session is over, another incarnation may take the id.
    shell.now += TIMEOUT + 1
    shell.run(shell.controller.fence_expired(shell.now, shell.end))
    taken = shell.register(1, INC_B)
    assert taken.error == Errors.NONE and shell.registry.get(1).incarnation_id == INC_B


def test_previous_broker_epoch_lets_a_restarted_broker_back_in_at_once() -> None:
    shell = Shell()
    epoch = online(shell)
    d = shell.register(1, INC_B, PreviousBrokerEpoch=epoch)  # KIP-966: a clean restart
    assert d.error == Errors.NONE


def test_not_active_answers_not_controller() -> None:
    shell = Shell()
    shell.controller.deactivate()
    assert shell.register(1).error == Errors.NOT_CONTROLLER
    assert shell.heartbeat(1, 1).error == Errors.NOT_CONTROLLER
    assert shell.controller.fence_expired(0, shell.end) is None
    assert error_response(BROKER_REGISTRATION, Errors.NOT_CONTROLLER)["BrokerEpoch"] == -1
    assert error_response(BROKER_HEARTBEAT, Errors.NOT_CONTROLLER)["ErrorCode"] == Errors.NOT_CONTROLLER
    with pytest.raises(ValueError, match="api key 1"):
        error_response(1, Errors.NOT_CONTROLLER)


# ------------------------------------------------------------------------------------ heartbeats


def test_unknown_broker_and_stale_epoch_are_refused() -> None:
    shell = Shell()
    assert shell.heartbeat(9, 0).error == Errors.BROKER_ID_NOT_REGISTERED
    epoch = shell.register(1).response["BrokerEpoch"]
    shell.register(1)  # re-registration: the old epoch is stale now
    d = shell.heartbeat(1, epoch)
    assert d.error == Errors.STALE_BROKER_EPOCH and d.records == ()


def test_fenced_broker_is_unfenced_once_it_has_replayed_its_registration() -> None:
    shell = Shell(start_offset=3)
    epoch = shell.register(1).response["BrokerEpoch"]  # offset 3
    behind = shell.heartbeat(1, epoch, offset=2)
    assert behind.records == () and behind.response["IsCaughtUp"] is False and behind.response["IsFenced"] is True
    d = shell.heartbeat(1, epoch, offset=3)
    assert names(d) == [UNFENCE]
    assert d.response == {"ThrottleTimeMs": 0, "ErrorCode": 0, "IsCaughtUp": True, "IsFenced": False,
                          "ShouldShutDown": False}
    assert shell.state(1) == BrokerState.ONLINE
    assert shell.heartbeat(1, epoch).records == ()  # steady state: no records


def test_want_fence_keeps_or_makes_a_broker_fenced() -> None:
    shell = Shell()
    epoch = shell.register(1).response["BrokerEpoch"]
    assert shell.heartbeat(1, epoch, fence=True).records == ()
    assert shell.state(1) == BrokerState.FENCED
    shell.heartbeat(1, epoch)
    d = shell.heartbeat(1, epoch, fence=True)
    assert names(d) == [FENCE] and d.response["IsFenced"] is True and shell.state(1) == BrokerState.FENCED


def test_response_waits_for_everything_written_before_it() -> None:
    shell = Shell()
    epoch = shell.register(1).response["BrokerEpoch"]
    first = shell.heartbeat(1, epoch, commit=False)  # appends the unfence, not yet committed
    assert names(first) == [UNFENCE] and first.commit_offset == shell.end
    second = shell.heartbeat(1, epoch, commit=False)  # sees the pending unfence: nothing to add
    assert second.records == () and second.commit_offset == shell.end and second.response["IsFenced"] is False
    shell.commit()
    assert shell.heartbeat(1, epoch).commit_offset == 0  # nothing pending: answered at once


# ------------------------------------------------------------------------------------ session timeout


def test_session_timeout_fences_online_brokers_only() -> None:
    shell = Shell()
    e1 = online(shell, 1)
    shell.register(2)  # stays fenced
    shell.now += TIMEOUT // 2
    shell.heartbeat(1, e1)
    assert shell.controller.fence_expired(shell.now, shell.end) is None
    shell.now += TIMEOUT - 1
    assert shell.controller.fence_expired(shell.now, shell.end) is None  # heartbeat renewed the session
    assert shell.controller.next_deadline_ms() == shell.now + 1
    shell.now += 1
    d = shell.run(shell.controller.fence_expired(shell.now, shell.end))
    assert d is not None and names(d) == [FENCE] and d.records[0].body == {"Id": 1, "Epoch": e1}
    assert shell.state(1) == BrokerState.FENCED and shell.state(2) == BrokerState.FENCED
    assert shell.controller.fence_expired(shell.now + 10 * TIMEOUT, shell.end) is None  # nothing left to fence


def test_a_new_controller_gives_every_running_broker_a_fresh_session() -> None:
    shell = Shell()
    epoch = online(shell)
    shell.now += TIMEOUT - 10
    shell.controller.deactivate()  # failover: a new controller activates on the same committed registry
    new = Controller(shell.registry, TIMEOUT)
    new.activate(shell.now, 2, CLUSTER)
    shell.controller = new
    assert new.fence_expired(shell.now + TIMEOUT - 1, shell.end) is None  # not fenced on takeover
    assert shell.heartbeat(1, epoch).error == Errors.NONE  # it knows the broker and its epoch
    assert shell.register(1, INC_B).error == Errors.DUPLICATE_BROKER_REGISTRATION  # its session is live
    assert new.fence_expired(shell.now + TIMEOUT, shell.end) is not None


# ------------------------------------------------------------------------------------ controlled shutdown


def test_controlled_shutdown_goes_through_stopping_to_offline() -> None:
    shell = Shell()
    e1 = online(shell, 1)
    e2 = online(shell, 2)
    d = shell.heartbeat(1, e1, shutdown=True)
    assert names(d) == [CHANGE] and d.records[0].body["InControlledShutdown"] == 1
    assert shell.state(1) == BrokerState.STOPPING
    assert d.response["IsFenced"] is False and d.response["ShouldShutDown"] is False
    stop_offset = d.base_offset
    # Broker 2 has not yet seen the Stopping record: broker 1 must wait (Kafka's lowest active offset).
    shell.heartbeat(2, e2, offset=stop_offset - 1)
    waiting = shell.heartbeat(1, e1, shutdown=True)
    assert waiting.records == () and shell.state(1) == BrokerState.STOPPING
    shell.heartbeat(2, e2, offset=stop_offset)
    done = shell.heartbeat(1, e1, shutdown=True)
    assert names(done) == [CHANGE] and done.records[0].body["Fenced"] == 1
    assert done.response == {"ThrottleTimeMs": 0, "ErrorCode": 0, "IsCaughtUp": True, "IsFenced": True,
                             "ShouldShutDown": True}
    assert shell.state(1) == BrokerState.OFFLINE
    # Offline: the id is free for a new incarnation at once.
    assert shell.register(1, INC_B).error == Errors.NONE


def test_fenced_broker_asking_to_shut_down_goes_offline_at_once() -> None:
    shell = Shell()
    epoch = shell.register(1).response["BrokerEpoch"]
    d = shell.heartbeat(1, epoch, offset=-1, shutdown=True)
    assert names(d) == [CHANGE] and d.records[0].body["Fenced"] == 1 and d.records[0].body["InControlledShutdown"] == 1
    assert d.response["ShouldShutDown"] is True and shell.state(1) == BrokerState.OFFLINE


def test_stopping_broker_that_goes_silent_ends_offline() -> None:
    shell = Shell()
    epoch = online(shell)
    shell.heartbeat(1, epoch, shutdown=True)
    shell.now += TIMEOUT
    shell.run(shell.controller.fence_expired(shell.now, shell.end))
    assert shell.state(1) == BrokerState.OFFLINE


def test_stopping_across_failover_waits_for_what_the_new_controller_has_written() -> None:
    shell = Shell()
    e1 = online(shell, 1)
    shell.heartbeat(1, e1, shutdown=True)
    new = Controller(shell.registry, TIMEOUT)
    new.activate(shell.now, 2, CLUSTER)
    shell.controller = new
    first = shell.heartbeat(1, e1, offset=shell.end - 2, shutdown=True)  # behind the current log end
    assert first.records == () and shell.state(1) == BrokerState.STOPPING
    done = shell.heartbeat(1, e1, shutdown=True)
    assert done.response["ShouldShutDown"] is True and shell.state(1) == BrokerState.OFFLINE
