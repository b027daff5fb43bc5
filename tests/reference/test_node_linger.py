"""``controller.quorum.append.linger.ms`` on real nodes: three ``Node`` shells on loopback sockets with
real data directories. Writes issued together reach the followers' segment files as one batch when the
leader lingers, and as one batch per write when it does not (Kafka's BatchAccumulator behaviour; the
core's table tests are in test_core_linger.py)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kraft_tck.reference.node import Node
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.storage import LogDir

pytestmark = pytest.mark.timeout(60)

WRITES = 20


async def batches_for_writes(root: Path, linger_ms: int) -> tuple[int, int]:
    """Issue WRITES single-record writes in one go on the leader; wait until all are committed; return
    (batches holding them, records) as a follower's segment files have them after the nodes stopped."""
    cluster = LocalCluster(root / f"linger{linger_ms}", base_port=free_base_port(3), settings={
        "controller.quorum.append.linger.ms": linger_ms, "controller.quorum.election.timeout.ms": 300,
        "controller.quorum.fetch.timeout.ms": 2000, "controller.quorum.fetch.max.wait.ms": 100,
    })
    nodes = [Node(cfg, fsync=False, seed=cfg.node_id) for cfg in cluster.node_configs()]
    for n in nodes:
        await n.start()
    try:
        deadline = time.monotonic() + 20
        while True:
            leader = next((n for n in nodes if n.core is not None and n.core.role.name == "Leader"), None)
            if leader is not None and leader.high_watermark > 0:
                break
            assert time.monotonic() < deadline, "no leader within 20 s"
            await asyncio.sleep(0.01)
        results = await asyncio.wait_for(
            asyncio.gather(*(leader.write([b"w%02d" % k]) for k in range(WRITES))), 20
        )
        assert all(r.accepted for r in results)
        first, last = results[0].base_offset, results[-1].last_offset
        assert last - first + 1 == WRITES  # every write got the next offset, in order
        follower = next(n for n in nodes if n is not leader)
        while follower.core is not None and follower.core.log.end_offset <= last:
            assert time.monotonic() < deadline + 20, "the follower never caught up"
            await asyncio.sleep(0.01)
        follower_dir = follower.config.log_dir
    finally:
        for n in nodes:
            await n.stop(graceful=True, grace_s=0.2)
    with LogDir.open(follower_dir, fsync=False) as d:
        held = [b for b in d.read_all() if not b.is_control and first <= b.base_offset <= last]
    values = [r.value for b in held for r in b.records]
    assert values == [b"w%02d" % k for k in range(WRITES)]  # all there, in write order
    return len(held), len(values)


def test_writes_issued_together_share_a_batch_only_with_linger(tmp_path: Path) -> None:
    async def main() -> tuple[tuple[int, int], tuple[int, int]]:
        return await batches_for_writes(tmp_path, 0), await batches_for_writes(tmp_path, 200)

    without, lingering = asyncio.run(main())
    assert without == (WRITES, WRITES)  # linger 0: each write is appended at once, as its own batch
    # linger 200 ms: the writes were all issued before the linger ended, so they share one batch.
    assert lingering == (1, WRITES)


def test_a_started_node_has_generated_the_codec_of_what_it_serves(tmp_path: Path) -> None:
    """Node.start generates the served APIs' frame functions before it listens (made by the first
    request instead, each was a stall of milliseconds that writes queued behind: bench_cluster p99.9)."""
    from kraft_tck.reference import controller, wire
    from kraft_tck.spec import codec

    served = [*wire.SERVED_API_VERSIONS, *controller.SERVED_API_VERSIONS, codec.API_VERSIONS_KEY]
    for frames in (codec._REQUEST_ENCODERS, codec._RESPONSE_ENCODERS, codec._REQUEST_DECODERS,
                   codec._RESPONSE_DECODERS):
        frames.clear()

    async def main() -> None:
        cluster = LocalCluster(tmp_path / "c", base_port=free_base_port(1), voters=1)
        node = Node(cluster.node_configs()[0], fsync=False, seed=1)
        await node.start()
        await node.stop(graceful=True, grace_s=0.2)

    asyncio.run(main())
    for api_key in served:
        newest = (api_key, codec.supported_versions(api_key)[1])
        assert newest in codec._REQUEST_DECODERS and newest in codec._RESPONSE_ENCODERS, codec.api_name(api_key)
