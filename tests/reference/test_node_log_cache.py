"""The node keeps only the newest ``reference.log.cache.bytes`` of its log in memory (reference/log.py):
a follower that fell behind catches up from batches the leader reads back from its segment files, and a
restarted node rebuilds its log without holding all of it. Real nodes, sockets and files."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kraft_tck.reference.node import Node
from kraft_tck.reference.procs import LocalCluster, free_base_port

pytestmark = pytest.mark.timeout(90)

CACHE = 2048
SETTINGS = {"controller.quorum.election.timeout.ms": 300, "controller.quorum.fetch.timeout.ms": 2000,
            "controller.quorum.fetch.max.wait.ms": 100, "controller.quorum.append.linger.ms": 0,
            "reference.log.cache.bytes": CACHE}


async def wait_for(what: str, cond: object, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def test_a_lagging_follower_catches_up_from_batches_the_leader_released(tmp_path: Path) -> None:
    async def main() -> None:
        cluster = LocalCluster(tmp_path / "c", base_port=free_base_port(3), settings=dict(SETTINGS))
        configs = {cfg.node_id: cfg for cfg in cluster.node_configs()}
        nodes = {i: Node(cfg, fsync=True, seed=i) for i, cfg in configs.items()}
        for n in nodes.values():
            await n.start()
        try:
            await wait_for("a leader", lambda: any(n.core and n.core.role.name == "Leader" and n.high_watermark
                                                   for n in nodes.values()))
            leader = next(n for n in nodes.values() if n.core and n.core.role.name == "Leader")
            lagging = next(i for i, n in nodes.items() if n is not leader)
            await nodes[lagging].stop(graceful=True, grace_s=0.2)
            for k in range(200):  # committed by the leader and the other follower
                await leader.write([b"record-%03d-" % k + b"x" * 80])
            assert leader.core is not None
            log = leader.core.log
            written = sum(len(log.encoded_at(i)) for i in range(len(log)))
            assert written > 10 * CACHE
            assert 0 < log.held_bytes <= 2 * CACHE + 200 and log.held_from > 0, "the leader kept it all"

            # The lagging follower restarts (streaming its short log through the cache) and fetches
            # from where it stopped: offsets the leader no longer holds in memory.
            behind = Node(configs[lagging], fsync=True, seed=lagging)
            nodes[lagging] = behind
            await behind.start()
            await wait_for("the follower to catch up",
                           lambda: behind.core is not None and behind.core.log.end_offset == log.end_offset)
            assert behind.storage is not None and leader.storage is not None
            assert behind.storage.read_all() == leader.storage.read_all()
            assert behind.core is not None and behind.core.log.held_bytes <= 2 * CACHE + 200
        finally:
            for n in nodes.values():
                await n.stop(graceful=True, grace_s=0.2)
        # What the follower held when it stopped: the leader's log, and a LeaderChange more when the two nodes
        # still running after the leader's graceful stop (it resigns first) elected one of them meanwhile.
        assert behind.core is not None
        held = behind.core.log
        extra = held.batches[len(log.batches):]
        assert held.batches[:len(log.batches)] == log.batches and len(extra) <= 1 and all(b.is_control for b in extra)

        # A restart rebuilds the log from the segment files holding no more than the cache.
        again = Node(configs[lagging], fsync=True, seed=lagging)
        await again.start()
        try:
            assert again.core is not None
            assert again.core.log.end_offset == held.end_offset
            assert again.core.log.held_bytes <= 2 * CACHE + 200 and again.core.log.held_from > 0
            assert again.core.log.batches == held.batches
        finally:
            await again.stop(graceful=False)

    asyncio.run(main())
