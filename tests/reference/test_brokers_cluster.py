"""Brokers against a real 3-process reference quorum (KIP-631 "Register Flow").

The broker is ``reference/broker_client.py``, speaking only the wire protocol. What a test asserts
about the cluster it reads from the wire (heartbeat answers, the committed log fetched from the
leader), the CLI, or the traces each node wrote (which TLC validates, merged) — never from a node's memory.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference.broker_client import BrokerClient, Endpoint, read_registry
from kraft_tck.reference.procs import LocalCluster
from kraft_tck.reference.registry import BrokerRegistry, BrokerState
from kraft_tck.spec.trace import read_trace

from tests.reference.test_cluster import FAILOVER_BOUND_S, SETTINGS, assert_traces_validate, free_base_port

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

SESSION_MS, HEARTBEAT_MS = 1200, 150
BROKER_SETTINGS = {**SETTINGS, "broker.session.timeout.ms": SESSION_MS}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "cluster", voters=3, base_port=free_base_port(3), settings=dict(BROKER_SETTINGS),
                     trace=True)
    c.prepare()
    c.start_all()
    yield c
    c.stop_all(signal.SIGKILL)


def endpoints(c: LocalCluster, exclude: int | None = None) -> list[Endpoint]:
    return [("127.0.0.1", c.port(i)) for i in range(1, c.voters + 1) if i != exclude]


def broker(c: LocalCluster, broker_id: int) -> BrokerClient:
    # Broker ids apart from the voters' node ids: a broker fetches the log as an observer under its id.
    return BrokerClient(broker_id, c.cluster_id, endpoints(c), heartbeat_interval_ms=HEARTBEAT_MS,
                        request_timeout_ms=1000)


def states(reg: BrokerRegistry) -> dict[int, tuple[BrokerState, int]]:
    return {b.broker_id: (b.state, b.broker_epoch) for b in reg.brokers()}


async def registry_via(c: LocalCluster, exclude: int | None = None) -> BrokerRegistry:
    reg, _ = await read_registry(endpoints(c, exclude), timeout_s=3)
    return reg


async def wait_registry(c: LocalCluster, want: dict[int, BrokerState], timeout_s: float,
                        exclude: int | None = None) -> BrokerRegistry:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            reg = await registry_via(c, exclude)
        except Exception as exc:  # no leader for a moment: ask again
            last = exc
        else:
            last = states(reg)
            if all(reg.get(i) is not None and reg.get(i).state == s for i, s in want.items()):
                return reg
        await asyncio.sleep(0.05)
    raise TimeoutError(f"registry never showed {want} within {timeout_s}s; last: {last}")


def broker_events(c: LocalCluster) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for node_id in range(1, c.voters + 1):
        out[node_id] = [e["broker"] for p in c.trace_files(node_id) for e in read_trace(p).events
                        if e.get("event") == "BrokerEvent"]
    return out


def test_broker_stays_registered_across_controller_failover(cluster: LocalCluster) -> None:
    async def scenario() -> tuple[int, int, str]:
        await cluster.wait_for_leader(15, min_hw=1)
        b = broker(cluster, 101)
        await b.start()
        try:
            # Seed 002 "Register Flow": registered Fenced, caught up, then Online — as the log says.
            await b.wait_until(lambda: b.state_in_log() == BrokerState.ONLINE, 10)
            assert b.states_seen[:2] == [BrokerState.FENCED, BrokerState.ONLINE]
            # The heartbeat answers agree with the log (the answer may trail the log by one interval).
            await b.wait_until(lambda: b.last_heartbeat is not None and not b.last_heartbeat.is_fenced
                               and b.last_heartbeat.is_caught_up, 2)
            epoch = b.broker_epoch
            info = await cluster.wait_for_leader(5)
            cluster.kill(info.leader_id, signal.SIGKILL)
            await cluster.wait_for_leader(FAILOVER_BOUND_S, min_epoch=info.leader_epoch + 1, exclude=info.leader_id)
            # The new controller knows the broker, its epoch and its state, and keeps its session alive:
            # well past one session timeout after the failover the broker is still Online, same epoch.
            await asyncio.sleep(2 * SESSION_MS / 1000)
            reg = await wait_registry(cluster, {101: BrokerState.ONLINE}, 5, exclude=info.leader_id)
            hb = await b.heartbeat()
            assert hb.error == 0 and hb.is_fenced is False
            assert b.broker_epoch == epoch and reg.get(101).broker_epoch == epoch
            # The CLI lists the broker with state and epoch (describe --brokers). It runs while
            # the broker still heartbeats: on a loaded machine the CLI's start-up alone can outlast a
            # session timeout, and a fenced broker would be the right answer then.
            cli = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kraft_tck.reference.cli", "quorum", "--bootstrap-controller",
                ",".join(f"{h}:{p}" for h, p in endpoints(cluster, info.leader_id)), "describe", "--brokers",
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            stdout, stderr = await asyncio.wait_for(cli.communicate(), 30)
            assert cli.returncode == 0, stderr.decode()
            return epoch, info.leader_id, stdout.decode()
        finally:
            await b.stop()

    epoch, old_leader, out = asyncio.run(scenario())
    row = next(line.split() for line in out.splitlines() if line.startswith("101 "))
    assert row[1] == "Online" and row[2] == str(epoch), out
    # Every node applied the same committed records; the pipeline's rule holds on each: no broker is
    # Online without a committed registration before it, of the same epoch.
    events = broker_events(cluster)
    for node_id, evs in events.items():
        registered: set[tuple[int, int]] = set()
        for ev in evs:
            if ev["record"] == "RegisterBrokerRecord":
                registered.add((ev["brokerId"], ev["brokerEpoch"]))
            if ev["state"] == "Online":
                assert (ev["brokerId"], ev["brokerEpoch"]) in registered, f"node {node_id}: {ev}"
    # The survivors' traces (the killed leader's may have lost its unflushed tail) show the broker Online.
    survivors = [evs for node_id, evs in events.items() if node_id != old_leader]
    assert all(any(e["state"] == "Online" and e["brokerEpoch"] == epoch for e in evs) for evs in survivors), events
    cluster.stop_all(signal.SIGTERM)
    assert_traces_validate(cluster)


def test_silent_broker_is_fenced_after_the_session_timeout(cluster: LocalCluster) -> None:
    async def scenario() -> None:
        await cluster.wait_for_leader(15, min_hw=1)
        alive, silent = broker(cluster, 101), broker(cluster, 102)
        await alive.start()
        await silent.start()
        try:
            await wait_registry(cluster, {101: BrokerState.ONLINE, 102: BrokerState.ONLINE}, 10)
            await silent.stop()  # to the controller: a crashed broker
            stopped = time.monotonic()
            reg = await wait_registry(cluster, {102: BrokerState.FENCED}, SESSION_MS / 1000 + 5)
            elapsed = time.monotonic() - stopped
            # Not before the session could have expired (its last heartbeat was at most one interval ago).
            assert elapsed >= (SESSION_MS - HEARTBEAT_MS) / 1000 - 0.05, elapsed
            assert reg.get(101).state == BrokerState.ONLINE
            # The epoch is unchanged: a fenced broker is the same registration, not a new one.
            assert reg.get(102).broker_epoch == silent.broker_epoch
        finally:
            await alive.stop()

    asyncio.run(scenario())
    cluster.stop_all(signal.SIGTERM)
    assert_traces_validate(cluster)


def test_controlled_shutdown_then_restart_rebuilds_the_registry(cluster: LocalCluster) -> None:
    async def scenario() -> dict[int, tuple[BrokerState, int]]:
        await cluster.wait_for_leader(15, min_hw=1)
        b1, b2 = broker(cluster, 101), broker(cluster, 102)
        await b1.start()
        await b2.start()
        try:
            await wait_registry(cluster, {101: BrokerState.ONLINE, 102: BrokerState.ONLINE}, 10)
            await b1.controlled_shutdown(10)
            # Seed 002 "Broker States": Stopping, then Offline once the controller says so.
            await b2.wait_until(lambda: b2.registry.get(101) is not None
                                and b2.registry.get(101).state == BrokerState.OFFLINE, 5)
            # (b1 may or may not replay its own Offline record before it stops.)
            assert b1.states_seen[:3] == [BrokerState.FENCED, BrokerState.ONLINE, BrokerState.STOPPING]
            assert b1.states_seen[3:] in ([], [BrokerState.OFFLINE])
            reg = await wait_registry(cluster, {101: BrokerState.OFFLINE, 102: BrokerState.ONLINE}, 5)
            return states(reg)
        finally:
            await b2.stop()
            await b1.stop()

    before = asyncio.run(scenario())
    # Restart every node: the registry comes back from the log alone (a pure function of it).
    cluster.stop_all(signal.SIGKILL)
    cluster.start_all()

    async def after() -> dict[int, tuple[BrokerState, int]]:
        await cluster.wait_for_leader(15, min_hw=1)
        # 102 stopped heartbeating with the restart; it may be fenced by now, but never lost.
        reg = await wait_registry(cluster, {101: BrokerState.OFFLINE}, 10)
        return states(reg)

    got = asyncio.run(after())
    assert got[101] == before[101]
    assert got[102][1] == before[102][1] and got[102][0] in (BrokerState.ONLINE, BrokerState.FENCED)
    cluster.stop_all(signal.SIGTERM)
    assert_traces_validate(cluster)
