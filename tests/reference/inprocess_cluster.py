"""Three reference nodes in this process, on loopback (tests of the shell under load): start them, find the leader."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from kraft_tck.reference.node import Node
from kraft_tck.reference.procs import LocalCluster, free_base_port


async def started_nodes(root: Path, settings: dict[str, Any]) -> tuple[LocalCluster, list[Node]]:
    """A 3-voter cluster under ``root`` with ``settings`` and its nodes, started (no fsync; the caller stops them)."""
    cluster = LocalCluster(root, base_port=free_base_port(3), settings=settings)
    nodes = [Node(cfg, fsync=False, seed=cfg.node_id) for cfg in cluster.node_configs()]
    for n in nodes:
        await n.start()
    return cluster, nodes


async def leader_of(nodes: list[Node], timeout_s: float = 20) -> Node:
    """The node that leads and has committed its epoch's first record (fails after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        leader = next((n for n in nodes if n.is_leader and n.high_watermark > 0), None)
        if leader is not None:
            return leader
        assert time.monotonic() < deadline, f"no leader within {timeout_s} s"
        await asyncio.sleep(0.01)
