"""A broker heartbeat the controller cannot complete in time is answered as Kafka answers it: REQUEST_TIMED_OUT at
broker.heartbeat.interval.ms / 2, not NOT_CONTROLLER after the session timeout.

Kafka: ControllerApis.handleBrokerHeartBeatRequest gives the heartbeat's controller event a deadline of half the
heartbeat interval; an event not done by then fails with TimeoutException, which Errors.forException answers as
REQUEST_TIMED_OUT (QuorumController.processBrokerHeartbeat, ReplicationControlManager.processExpiredBrokerHeartbeat
keeps the broker's session). NOT_CONTROLLER would send the broker looking for another controller while this one
still is the controller. Real sockets: three in-process nodes on loopback, the broker's requests framed by
``net.KafkaClient``."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference.controller import BROKER_HEARTBEAT, BROKER_REGISTRATION
from kraft_tck.reference.net import KafkaClient
from kraft_tck.reference.node import Node
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.spec.errors import Errors

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

HEARTBEAT_INTERVAL_MS = 600
SESSION_MS = 20_000  # far longer than the heartbeat's deadline: an answer at the session timeout is the old bug
SETTINGS = {
    "controller.quorum.election.timeout.ms": 300,
    # The leader must stay leader while its followers are stopped (check-quorum resigns after 1.5 fetch timeouts).
    "controller.quorum.fetch.timeout.ms": 30_000,
    "controller.quorum.election.backoff.max.ms": 200,
    "controller.quorum.request.timeout.ms": 500,
    "controller.quorum.fetch.max.wait.ms": 100,
    "controller.quorum.append.linger.ms": 0,
    "broker.session.timeout.ms": SESSION_MS,
    "broker.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
}
BROKER_ID = 101


async def _active_controller(nodes: list[Node], timeout_s: float = 20) -> Node:
    deadline = time.monotonic() + timeout_s
    while True:
        leader = next((n for n in nodes if n.core is not None and n.core.status().is_leader and n.brokers.active),
                      None)
        if leader is not None:
            return leader
        assert time.monotonic() < deadline, f"no active controller within {timeout_s} s"
        await asyncio.sleep(0.01)


def _registration(cluster_id: str) -> dict[str, Any]:
    return {"BrokerId": BROKER_ID, "ClusterId": cluster_id, "IncarnationId": uuid.uuid4(),
            "Listeners": [{"Name": "PLAINTEXT", "Host": "127.0.0.1", "Port": 29101, "SecurityProtocol": 0}],
            "Features": []}


def _heartbeat(epoch: int, offset: int) -> dict[str, Any]:
    return {"BrokerId": BROKER_ID, "BrokerEpoch": epoch, "CurrentMetadataOffset": offset,
            "WantFence": False, "WantShutDown": False}


def test_a_heartbeat_whose_records_cannot_commit_times_out_at_half_the_interval(tmp_path: Path) -> None:
    """Registered while the quorum commits; then both followers stop, and the next heartbeat (caught up, so the
    controller appends an UnfenceBrokerRecord that can no longer commit) is answered REQUEST_TIMED_OUT after
    about half the heartbeat interval, by the same leader; a heartbeat once the followers are back is answered
    NONE, the broker unfenced (its session was never dropped)."""

    async def main() -> None:
        cluster = LocalCluster(tmp_path / "c", base_port=free_base_port(3), settings=SETTINGS)
        configs = cluster.node_configs()
        assert configs[0].broker_heartbeat_interval_ms == HEARTBEAT_INTERVAL_MS
        nodes = [Node(cfg, fsync=False, seed=cfg.node_id) for cfg in configs]
        for n in nodes:
            await n.start()
        client: KafkaClient | None = None
        try:
            leader = await _active_controller(nodes)
            assert leader.core is not None
            epoch0 = leader.core.epoch
            client = KafkaClient("127.0.0.1", cluster.port(leader.config.node_id))
            await client.connect()
            reg = await client.request(BROKER_REGISTRATION, client.best_version(BROKER_REGISTRATION),
                                       _registration(cluster.cluster_id), 10)
            assert reg["ErrorCode"] == Errors.NONE, reg
            broker_epoch = reg["BrokerEpoch"]

            followers = [n for n in nodes if n is not leader]
            for n in followers:
                await n.stop(graceful=False)
            hw = leader.high_watermark
            version = client.best_version(BROKER_HEARTBEAT)
            t0 = time.monotonic()
            hb = await client.request(BROKER_HEARTBEAT, version, _heartbeat(broker_epoch, hw), 10)
            waited_ms = (time.monotonic() - t0) * 1000
            assert hb["ErrorCode"] == Errors.REQUEST_TIMED_OUT, hb
            assert leader.high_watermark == hw, "the heartbeat's record committed: the test proves nothing"
            assert leader.metadata_log is not None and leader.metadata_log.end_offset > hw, "nothing was appended"
            # Half the interval (300 ms), not the session timeout (20 s); generous above for a loaded machine.
            assert HEARTBEAT_INTERVAL_MS / 2 - 5 <= waited_ms < SESSION_MS / 4, waited_ms
            assert leader.core.status().is_leader and leader.core.epoch == epoch0 and leader.brokers.active

            # The followers come back: the pending records commit and the next heartbeat is answered.
            restarted = [Node(cfg, fsync=False, seed=cfg.node_id + 10) for cfg in configs
                         if cfg.node_id != leader.config.node_id]
            for n in restarted:
                await n.start()
            nodes[:] = [leader, *restarted]
            deadline = time.monotonic() + 20
            while True:
                hb = await client.request(BROKER_HEARTBEAT, version, _heartbeat(broker_epoch, leader.high_watermark),
                                          10)
                if hb["ErrorCode"] == Errors.NONE and not hb["IsFenced"]:
                    break
                assert hb["ErrorCode"] in (Errors.NONE, Errors.REQUEST_TIMED_OUT), hb
                assert time.monotonic() < deadline, f"the broker was never unfenced: {hb}"
                await asyncio.sleep(0.05)
            assert leader.core.epoch == epoch0, "the leader changed: the session survived a failover, not a timeout"
        finally:
            if client is not None:
                await client.close()
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(main())
