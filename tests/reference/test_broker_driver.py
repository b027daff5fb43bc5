"""The broker driver (reference/broker_driver.py), pure: the one copy of the broker glue that the node process and
the simulator both drive. A small log plays the Raft core: decisions' records are appended where the core
would put them, the high watermark is moved by hand, and the driver's answers are read back.

Plus the node-level consequence of Kafka's rule for a committed record that does not replay: a voter halts
(Kafka's QuorumController hands it to its fatal fault handler).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference.broker_driver import BrokerAnswer, BrokerDriver, sized
from kraft_tck.reference.controller import BROKER_HEARTBEAT, BROKER_REGISTRATION, Decision
from kraft_tck.reference.io import ClientAppendResult, CoreStatus
from kraft_tck.reference.node import Node, NodeHalted
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.registry import FENCE, REGISTER, BrokerState, RegistryError, encode
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import RecordBatch, data_batch

CLUSTER = "Xv3eKjYRQ6qPqB1dZ2tQ7w"
SESSION_MS = 1000
EPOCH = 3


def status(*, leader: bool = True, hw: int = 1, end: int = 1, next_append: int | None = None,
           epoch: int = EPOCH, epoch_start: int = 0) -> CoreStatus:
    return CoreStatus(
        node_id=1, role="Leader" if leader else "Follower", epoch=epoch, leader_id=1 if leader else 2,
        voted_id=1, log_end_offset=end, high_watermark=hw,
        next_append_offset=end if next_append is None else next_append,
        epoch_start_offset=epoch_start if leader else -1, cluster_id=CLUSTER,
    )


def registration(broker_id: int = 100) -> dict[str, Any]:
    return {"BrokerId": broker_id, "ClusterId": CLUSTER, "IncarnationId": uuid.UUID(int=broker_id),
            "Listeners": [{"Name": "PLAINTEXT", "Host": "h", "Port": 9092, "SecurityProtocol": 0}],
            "Features": [], "Rack": None}


class FakeLog:
    """The node's log as the driver reads it: batches from an offset, the epoch at an offset."""

    def __init__(self) -> None:
        self.batches: list[RecordBatch] = [data_batch(0, EPOCH, [b"leader-change"])]

    @property
    def end(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else 0

    def append(self, decision: Decision, epoch: int = EPOCH) -> ClientAppendResult:
        base = self.end
        self.batches.append(data_batch(base, epoch, [r.value() for r in decision.records]))
        return ClientAppendResult(True, base, base + len(decision.records) - 1, epoch)

    def batches_from(self, offset: int) -> list[RecordBatch]:
        return [b for b in self.batches if b.last_offset >= offset]

    def epoch_of(self, offset: int) -> int:
        return next((b.partition_leader_epoch for b in self.batches if b.base_offset <= offset <= b.last_offset), -1)


def active_driver(log: FakeLog, *, is_voter: bool = True) -> BrokerDriver:
    driver = BrokerDriver(SESSION_MS, is_voter=is_voter)
    driver.commit(1, sized(log.batches_from), log.epoch_of)
    change = driver.leadership(status(hw=1, end=1), now_ms=0)
    assert change.activated and driver.active
    return driver


def test_a_leader_becomes_the_active_controller_only_once_an_entry_of_its_epoch_is_committed() -> None:
    """The controller claims leadership after the registry replayed the whole committed log, and the Raft
    leader's high watermark is known (past its epoch start offset: KIP-595 "Leader Election")."""
    log = FakeLog()
    driver = BrokerDriver(SESSION_MS)
    assert not driver.leadership(status(hw=0, end=1, epoch_start=0), 0).activated  # HW not yet past the start
    assert not driver.leadership(status(hw=1, end=1, epoch_start=0), 0).activated  # registry not replayed yet
    driver.commit(1, sized(log.batches_from), log.epoch_of)
    assert driver.leadership(status(hw=1, end=1, epoch_start=0), 0).activated
    assert driver.leadership(status(hw=1, end=1, epoch_start=0), 5) == driver.leadership(status(), 5)  # no change
    assert not driver.leadership(status(hw=1), 0, stopping=True).activated
    assert not driver.active  # a stopping node leaves


def test_records_are_written_at_the_next_append_offset_past_held_back_writes() -> None:
    """KIP-631 "Register Flow": the broker epoch is the offset of the registration record. Kafka computes
    it from the controller's next write offset (OffsetControlManager.nextWriteOffset), which counts records
    handed to Raft but not yet in the log: with client writes lingering in the leader's batch
    (controller.quorum.append.linger.ms), that is past the log end."""
    log = FakeLog()
    driver = active_driver(log)
    decision = driver.decide(BROKER_REGISTRATION, registration(), 0, status(end=1, next_append=4))
    assert decision.base_offset == 4
    assert decision.records[0].name == REGISTER and decision.records[0].body["BrokerEpoch"] == 4
    assert decision.response["BrokerEpoch"] == 4


def test_an_answer_waits_for_its_records_to_commit_in_its_epoch() -> None:
    log = FakeLog()
    driver = active_driver(log)
    decision = driver.decide(BROKER_REGISTRATION, registration(), 0, status(end=log.end))
    result = log.append(decision)
    change, answer = driver.appended(decision, result, "req-1", BROKER_REGISTRATION, 1, log.epoch_of)
    assert answer is None and not change.deactivated and driver.waiting == 1
    assert driver.commit(1, sized(log.batches_from), log.epoch_of).answers == ()  # not committed yet
    done = driver.commit(log.end, sized(log.batches_from), log.epoch_of)
    assert done.answers == (BrokerAnswer("req-1", decision.response),)
    assert [(c.record, c.state) for c in done.changes] == [(REGISTER, BrokerState.FENCED)]
    assert driver.waiting == 0 and not done.fatal


def test_records_lost_to_a_new_leader_answer_not_controller() -> None:
    """Raft's Log Matching: the same offset with another epoch is another entry; the broker's records were
    truncated away, and it hears NOT_CONTROLLER (it asks the new controller)."""
    log = FakeLog()
    driver = active_driver(log)
    decision = driver.decide(BROKER_REGISTRATION, registration(), 0, status(end=log.end))
    driver.appended(decision, log.append(decision), "req-1", BROKER_REGISTRATION, 1, log.epoch_of)
    log.batches[-1] = data_batch(1, EPOCH + 1, [b"the new leader's record"])  # truncated and replaced
    done = driver.commit(log.end, sized(log.batches_from), log.epoch_of)
    (answer,) = done.answers
    assert answer.token == "req-1" and answer.response["ErrorCode"] == Errors.NOT_CONTROLLER


def test_leaving_leadership_fails_every_waiting_answer() -> None:
    log = FakeLog()
    driver = active_driver(log)
    decision = driver.decide(BROKER_REGISTRATION, registration(), 0, status(end=log.end))
    driver.appended(decision, log.append(decision), "req-1", BROKER_REGISTRATION, 1, log.epoch_of)
    change = driver.leadership(status(leader=False), 10)
    assert change.deactivated and not driver.active and driver.waiting == 0
    assert [(a.token, a.response["ErrorCode"]) for a in change.answers] == [("req-1", Errors.NOT_CONTROLLER)]


def test_a_refused_append_steps_the_controller_down() -> None:
    """The core refused the append (no longer leader) or put it elsewhere than the decision assumed: this
    node is not the controller it thought it was."""
    log = FakeLog()
    driver = active_driver(log)
    decision = driver.decide(BROKER_REGISTRATION, registration(), 0, status(end=log.end))
    change, answer = driver.appended(decision, ClientAppendResult(False, leader_id=2), "r", BROKER_REGISTRATION,
                                     1, log.epoch_of)
    assert change.deactivated and not driver.active
    assert answer is not None and answer.response["ErrorCode"] == Errors.NOT_CONTROLLER
    driver = active_driver(FakeLog())
    decision = driver.decide(BROKER_REGISTRATION, registration(), 0, status(end=1))
    moved = ClientAppendResult(True, decision.base_offset + 1, decision.base_offset + 1, EPOCH)
    assert driver.appended(decision, moved, "r", BROKER_REGISTRATION, 1, log.epoch_of)[0].deactivated


def test_a_heartbeat_of_an_unknown_broker_is_answered_at_once() -> None:
    driver = active_driver(FakeLog())
    body = {"BrokerId": 7, "BrokerEpoch": 5, "CurrentMetadataOffset": 0, "WantFence": False, "WantShutDown": False}
    decision = driver.decide(BROKER_HEARTBEAT, body, 0, status())
    _, answer = driver.appended(decision, None, "hb", BROKER_HEARTBEAT, 1, FakeLog().epoch_of)
    assert answer is not None and answer.response["ErrorCode"] == Errors.BROKER_ID_NOT_REGISTERED


def test_expired_sessions_are_fenced_and_nobody_is_answered() -> None:
    log = FakeLog()
    driver = active_driver(log)
    decision = driver.decide(BROKER_REGISTRATION, registration(), 0, status(end=log.end))
    driver.appended(decision, log.append(decision), "reg", BROKER_REGISTRATION, 1, log.epoch_of)
    driver.commit(log.end, sized(log.batches_from), log.epoch_of)
    epoch = decision.base_offset
    heartbeat = {"BrokerId": 100, "BrokerEpoch": epoch, "CurrentMetadataOffset": log.end, "WantFence": False,
                 "WantShutDown": False}
    decision = driver.decide(BROKER_HEARTBEAT, heartbeat, 10, status(end=log.end, hw=log.end))
    driver.appended(decision, log.append(decision), "hb", BROKER_HEARTBEAT, log.end - 1, log.epoch_of)
    driver.commit(log.end, sized(log.batches_from), log.epoch_of)
    assert driver.registry.get(100).state == BrokerState.ONLINE
    assert driver.expire(10 + SESSION_MS - 1, status(end=log.end)) is None
    fence = driver.expire(10 + SESSION_MS + 1, status(end=log.end))
    assert fence is not None and [r.name for r in fence.records] == [FENCE]
    _, answer = driver.appended(fence, log.append(fence), None, 0, log.end - 1, log.epoch_of)
    assert answer is None and driver.waiting == 0


@pytest.mark.parametrize("is_voter", [True, False])
def test_a_committed_record_the_registry_refuses_is_fatal_on_a_voter_only(is_voter: bool) -> None:
    """Kafka's QuorumController replays every committed record on a controller and hands a failure to its
    fatal fault handler; brokers' metadata loading (MetadataLoader) reports it and goes on."""
    log = FakeLog()
    driver = BrokerDriver(SESSION_MS, is_voter=is_voter)
    log.batches.append(data_batch(1, EPOCH, [encode(FENCE, 0, {"Id": 9, "Epoch": 1})]))
    done = driver.commit(log.end, sized(log.batches_from), log.epoch_of)
    assert len(done.errors) == 1 and isinstance(done.errors[0], RegistryError) and "broker 9" in str(done.errors[0])
    assert done.fatal is is_voter
    assert driver.registry.next_offset == log.end  # skipped, deterministically: every node agrees


def test_a_voter_halts_on_a_committed_record_its_registry_refuses(tmp_path: Path) -> None:
    """Real node, sockets and files: a FenceBrokerRecord for a broker nobody registered reaches the log (a
    client write) and commits; the single voter halts instead of serving a registry that is not the log's."""

    async def scenario() -> None:
        cluster = LocalCluster(tmp_path / "c", voters=1, base_port=free_base_port(1), settings={
            "controller.quorum.election.timeout.ms": 300, "controller.quorum.fetch.timeout.ms": 2000})
        (cfg,) = cluster.node_configs()
        node = Node(cfg, fsync=False, seed=1)
        await node.start()
        try:
            deadline = time.monotonic() + 20
            while node.core is None or not node.core.status().is_leader or node.high_watermark == 0:
                assert time.monotonic() < deadline, "no leader within 20 s"
                await asyncio.sleep(0.01)
            await asyncio.wait_for(node.write([encode(FENCE, 0, {"Id": 9, "Epoch": 1})]), 10)  # it did commit
            await asyncio.wait_for(node.halted.wait(), 10)
            assert isinstance(node.failure, RegistryError) and "broker 9" in str(node.failure)
            with pytest.raises(NodeHalted, match="committed metadata record cannot be applied"):
                await node.write([b"after the halt"])
        finally:
            await node.stop(graceful=False)

    asyncio.run(scenario())
