"""The leader's shell encodes a Fetch answer once for every follower that asks for the same records: the
second follower to fetch from an offset gets the bytes the first one got (KIP-595 "Fetch Request
Handling": each voter fetches the same new batch), framed with its own correlation id."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kraft_tck.reference import wire
from kraft_tck.reference.messages import FetchRequest
from kraft_tck.reference.net import EncodedAnswer, ServerRequest
from kraft_tck.reference.node import Node
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.spec import codec

pytestmark = pytest.mark.timeout(60)

FETCH_VERSION = codec.supported_versions(wire.FETCH)[1]
FAST = {"controller.quorum.election.timeout.ms": 300, "controller.quorum.fetch.timeout.ms": 2000,
        "controller.quorum.fetch.max.wait.ms": 100}


async def start_nodes(root: Path, traced: frozenset[int] = frozenset()) -> tuple[LocalCluster, list[Node]]:
    """Three started ``Node``s in this event loop on loopback ports (those in ``traced`` write a trace);
    then ``leading`` waits for their leader. Also used by test_typed_wire.py."""
    cluster = LocalCluster(root, base_port=free_base_port(3), settings=dict(FAST))
    nodes = [Node(cfg, fsync=False, seed=cfg.node_id,
                  trace_file=root / f"node-{cfg.node_id}.ndjson" if cfg.node_id in traced else None)
             for cfg in cluster.node_configs()]
    for n in nodes:
        await n.start()
    return cluster, nodes


async def leading(nodes: list[Node], timeout_s: float = 20) -> Node:
    """The leader, once it has committed its epoch's first record."""
    deadline = time.monotonic() + timeout_s
    while (leader := next((n for n in nodes if n.core is not None and n.core.role.name == "Leader"),
                          None)) is None or leader.high_watermark == 0:
        assert time.monotonic() < deadline, f"no leader within {timeout_s} s"
        await asyncio.sleep(0.01)
    return leader


def _fetch(leader: Node, replica: int, offset: int, last_epoch: int, corr: int) -> ServerRequest:
    assert leader.core is not None
    req = FetchRequest(leader.core.cluster_id, replica, leader.core.epoch, offset, last_epoch, max_wait_ms=0)
    return ServerRequest(wire.FETCH, FETCH_VERSION, corr, f"raft-client-{replica}",
                   wire.request_to_body(req, FETCH_VERSION), "test")


def test_followers_fetching_the_same_records_share_one_encoding(tmp_path: Path) -> None:
    async def main() -> None:
        _, nodes = await start_nodes(tmp_path / "c")
        try:
            leader = await leading(nodes)
            for k in range(3):
                await leader.write([b"v%d" % k])
            # Two followers' fetches from the log start, answered at once in two separate steps.
            first = leader._handle(_fetch(leader, 2, 0, 0, 101))
            second = leader._handle(_fetch(leader, 3, 0, 0, 102))
            assert isinstance(first, EncodedAnswer) and isinstance(second, EncodedAnswer)
            assert second is first, "the same records were encoded twice"
            _, body = codec.decode_response(wire.FETCH, FETCH_VERSION, codec.frame_response(
                wire.FETCH, FETCH_VERSION, 7, first.encoded)[4:])
            (part,) = body["Responses"][0]["Partitions"]
            assert part["Records"], "the shared answer carries the records"
            # Another offset is another answer.
            other = leader._handle(_fetch(leader, 2, 1, leader.core.epoch if leader.core else -1, 103))
            assert isinstance(other, EncodedAnswer) and other is not first and other.encoded != first.encoded
        finally:
            for n in nodes:
                await n.stop(graceful=True, grace_s=0.2)

    asyncio.run(main())
