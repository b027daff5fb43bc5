"""The shell's view of leadership, on three ``Node`` shells on loopback sockets.

``Node.wait_leading``: the write workload of a node that follows waits on it instead of polling; a follower's wait
runs out when nothing changes, and ends in the step that makes the node leader, long before its timeout, once the
leader stops. ``_sync_controller``: a leader's commits (the high watermark and the registry moving together) build
no ``core.status()``, while the node stays the active controller."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference.node import Node

from .inprocess_cluster import leader_of, started_nodes

pytestmark = pytest.mark.timeout(60)

SETTINGS = {"controller.quorum.election.timeout.ms": 300, "controller.quorum.fetch.timeout.ms": 600,
            "controller.quorum.fetch.max.wait.ms": 100, "controller.quorum.election.backoff.max.ms": 200}



def test_a_follower_waits_until_it_leads_without_polling(tmp_path: Path) -> None:
    async def run() -> None:
        _cluster, nodes = await started_nodes(tmp_path / "c", SETTINGS)
        try:
            leader = await leader_of(nodes)
            assert await leader.wait_leading(5) is True  # a leader's wait is over at once
            followers = [n for n in nodes if n is not leader]
            t0 = time.monotonic()
            assert await followers[0].wait_leading(0.05) is False  # nothing changed: the wait runs out
            assert time.monotonic() - t0 < 1
            assert not followers[0]._leading_waiters  # a wait that ran out leaves nothing behind
            # Both followers wait far longer than an election takes; the leader goes away.
            waits = [f.wait_leading(30) for f in followers]
            t0 = time.monotonic()
            await leader.stop(graceful=False)
            done, _ = await asyncio.wait(waits, timeout=20, return_when=asyncio.FIRST_COMPLETED)
            assert done, "no follower's wait ended within 20 s of the leader stopping"
            assert time.monotonic() - t0 < 20
            winner = next(f for f, w in zip(followers, waits, strict=True) if w in done)
            assert next(iter(done)).result() is True and winner.is_leader  # woken by its own election
            for f in followers:
                await f.stop(graceful=False)
            assert all(w.done() for w in waits)  # the other follower's wait ends with its node
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(run())


async def _statuses_for_commits(leader: Node, commits: int) -> tuple[int, bool]:
    """(statuses ``_sync_controller`` built during ``commits`` one-at-a-time writes, whether the leader kept its
    epoch throughout)."""
    core = leader.core
    assert core is not None
    built = 0
    status = core.status

    def counting_status() -> Any:
        nonlocal built
        # The steps' leadership check (a broker session timer also reads the status, on its own schedule).
        built += sys._getframe(1).f_code.co_name == "_sync_controller"
        return status()

    epoch0 = core.epoch
    core.status = counting_status
    try:
        for k in range(commits):
            assert (await asyncio.wait_for(leader.write([b"w%d" % k]), 10)).accepted
    finally:
        del core.status  # the class's method again
    return built, core.epoch == epoch0 and leader.is_leader


def test_a_leaders_commits_build_no_status_and_it_stays_the_active_controller(tmp_path: Path) -> None:
    async def run() -> None:
        # Long timeouts: a leadership change (which rightly builds statuses) is unlikely on a loaded machine.
        settings = {**SETTINGS, "controller.quorum.election.timeout.ms": 1000,
                    "controller.quorum.fetch.timeout.ms": 3000}
        _cluster, nodes = await started_nodes(tmp_path / "c", settings)
        try:
            for _attempt in range(3):  # a run whose leader changed proves nothing: try again
                leader = await leader_of(nodes)
                for _ in range(5):  # the controller activates on the epoch's first commit
                    await asyncio.wait_for(leader.write([b"warm-up"]), 10)
                hw0 = leader.high_watermark
                built, stable = await _statuses_for_commits(leader, 20)
                if stable:
                    assert leader.high_watermark >= hw0 + 20
                    assert built == 0, f"{built} statuses built for 20 commits in one epoch"
                    assert leader.brokers.active and leader.brokers.applied_offset == leader.high_watermark
                    return
            raise AssertionError("the leader changed during every attempt")
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(run())
