"""What a leader does first when a client write commits, on three ``Node`` shells on loopback sockets.

The writer resumes before the registry catches up with the high watermark (``Node._catch_up``: the catch-up is
queued behind the writer's wake-up, off the commit's latency), and the lag changes nothing the controller decides:
the node stays the active controller throughout, the registry is at the high watermark before anything else runs,
and a broker's registration is answered only once its record is in the registry.

One follower is stopped first, so that each commit comes from one Fetch and nothing else of the leader runs between
the commit's step and the writer's wake-up (with both followers, the second one's Fetch, read in the same loop turn,
steps the leader first, and a step catches the registry up before it runs)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference.broker_client import BrokerClient
from kraft_tck.reference.broker_driver import BrokerAnswer, LeadershipChange
from kraft_tck.reference.io import CoreStatus
from kraft_tck.reference.node import Node
from kraft_tck.spec.errors import Errors

from .inprocess_cluster import leader_of, started_nodes

pytestmark = pytest.mark.timeout(60)

# Long timeouts: a leadership change (which rightly moves the controller) is unlikely on a loaded machine.
SETTINGS = {"controller.quorum.election.timeout.ms": 1000, "controller.quorum.fetch.timeout.ms": 3000,
            "controller.quorum.fetch.max.wait.ms": 500, "controller.quorum.election.backoff.max.ms": 200,
            "broker.session.timeout.ms": 5000}


async def _leader_with_one_follower(tmp_path: Path) -> tuple[Any, list[Node], Node]:
    cluster, nodes = await started_nodes(tmp_path / "c", SETTINGS)
    leader = await leader_of(nodes)
    await next(n for n in nodes if n is not leader).stop(graceful=False)
    for k in range(5):  # the controller activates on the epoch's first commit; the stopped follower is noticed
        await asyncio.wait_for(leader.write([b"warm-up %d" % k]), 10)
    assert leader.is_leader and leader.brokers.active
    return cluster, nodes, leader


def _record_leadership(leader: Node) -> list[LeadershipChange]:
    """Every controller change ``_sync_controller`` makes on ``leader`` from now on."""
    changes: list[LeadershipChange] = []
    decide = leader.brokers.leadership

    def recording(status: CoreStatus, now_ms: int, *, stopping: bool = False) -> LeadershipChange:
        change = decide(status, now_ms, stopping=stopping)
        if change.activated or change.deactivated:
            changes.append(change)
        return change

    leader.brokers.leadership = recording  # type: ignore[method-assign]
    return changes


def test_a_writer_resumes_before_the_registry_catches_up_and_the_controller_stays_active(tmp_path: Path) -> None:
    async def run() -> None:
        _cluster, nodes, leader = await _leader_with_one_follower(tmp_path)
        try:
            epoch = leader.brokers.controller.epoch
            changes = _record_leadership(leader)
            lagged = 0
            for k in range(20):
                result = await leader.write([b"w%d" % k])  # awaited directly: resumed by the commit's step
                assert result.accepted and leader.high_watermark > result.last_offset
                # The writer runs first: the registry has not applied the write yet, and the controller, which
                # would have stepped down on a registry behind the high watermark, has not been asked.
                lagged += leader.brokers.applied_offset < leader.high_watermark
                assert leader.brokers.active
                await asyncio.sleep(0)  # the queued catch-up
                assert leader.brokers.applied_offset == leader.high_watermark
            if not leader.is_leader:
                pytest.skip("the leader changed during the run (a loaded machine): nothing to judge")
            assert lagged >= 15, f"the writer resumed before the registry's catch-up in {lagged} of 20 commits"
            assert changes == [], f"the controller changed while the registry caught up: {changes}"
            assert leader.brokers.active and leader.brokers.controller.epoch == epoch
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(run())


def test_a_registration_during_writes_is_answered_once_its_record_is_in_the_registry(tmp_path: Path) -> None:
    async def run() -> None:
        cluster, nodes, leader = await _leader_with_one_follower(tmp_path)
        assert leader.core is not None and leader.core.cluster_id
        delivered: list[tuple[dict[str, Any], Any, int, int]] = []  # (response, registry entry, applied, hw)
        deliver = leader._deliver

        def recording(answers: tuple[BrokerAnswer, ...]) -> None:
            for a in answers:
                delivered.append((a.response, leader.brokers.registry.get(101), leader.brokers.applied_offset,
                                  leader.high_watermark))
            deliver(answers)

        leader._deliver = recording  # type: ignore[method-assign]
        stop = asyncio.Event()

        async def writes() -> int:
            n = 0
            while not stop.is_set():
                await leader.write([b"load %d" % n])
                n += 1
            return n

        writer = asyncio.create_task(writes())
        client = BrokerClient(101, leader.core.cluster_id, [("127.0.0.1", cluster.port(leader.config.node_id))],
                              fetch_metadata=False)
        try:
            changes = _record_leadership(leader)
            await asyncio.sleep(0.05)  # the writes under way
            reg = await asyncio.wait_for(client.register(), 10)
            hb = await asyncio.wait_for(client.heartbeat(), 10)
            stop.set()
            assert await asyncio.wait_for(writer, 10) > 0
            if not leader.is_leader:
                pytest.skip("the leader changed during the run (a loaded machine): nothing to judge")
            assert reg.error == Errors.NONE and hb.error == Errors.NONE
            answered = [d for d in delivered if d[0].get("BrokerEpoch") == reg.broker_epoch]
            assert answered, "the registration was not answered from a commit"
            _response, entry, applied, hw = answered[0]
            # Its record (at the broker epoch's offset) committed and replayed before the answer left.
            assert entry is not None and entry.broker_epoch == reg.broker_epoch
            assert applied == hw > reg.broker_epoch
            assert changes == [] and leader.brokers.active
        finally:
            stop.set()
            writer.cancel()
            await client.stop()
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(run())


def test_a_leader_stopped_as_its_writer_resumes_still_applies_the_commit(tmp_path: Path) -> None:
    async def run() -> None:
        _cluster, nodes, leader = await _leader_with_one_follower(tmp_path)
        try:
            await leader.write([b"last"])
            if leader.brokers.applied_offset == leader.high_watermark:
                pytest.skip("the registry caught up before the writer resumed: nothing to judge")
            await leader.stop(graceful=False)  # the queued catch-up has not run yet
            assert leader.brokers.applied_offset == leader.high_watermark
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(run())
