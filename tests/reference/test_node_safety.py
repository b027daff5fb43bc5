"""The shell refuses, loudly, a peer's message that would break safety, and halts, as Kafka's raft thread
fails there (KIP-595 "Fetch Response Handling" 2: a follower never truncates below its high watermark;
KafkaRaftClient.handleFetchResponse throws)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from kraft_tck.reference.config import NodeConfig
from kraft_tck.reference.core import SafetyViolation
from kraft_tck.reference.io import RequestReceived, ResponseReceived
from kraft_tck.reference.messages import BeginQuorumEpochRequest, FetchResponse, LeaderIdAndEpoch
from kraft_tck.reference.node import Node
from kraft_tck.reference.storage import format_dir
from kraft_tck.spec.records import data_batch

CID = "Zx1W-0mTQzSWb8b0NoQ0Kg"


def test_divergence_below_the_high_watermark_is_refused_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        format_dir(tmp_path / "data", 2, CID)
        cfg = NodeConfig.from_properties({
            "node.id": "2", "listeners": "CONTROLLER://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
            "controller.quorum.voters": "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3",
        })
        node = Node(cfg)
        await node.start()
        try:
            node._step(RequestReceived(1, None, BeginQuorumEpochRequest(CID, 1, 3)))
            assert node.core is not None and node.core.state_snapshot()["role"] == "Follower"
            fetch = node.core._inflight[1]
            batches = tuple(data_batch(i, 3, [b"v%d" % i]) for i in range(4))
            node._step(ResponseReceived(1, FetchResponse(3, batches, None, LeaderIdAndEpoch(1, 3)), fetch))
            assert node.high_watermark == 3 and node.core.log.end_offset == 4
            refetch = node.core._inflight[1]
            with caplog.at_level(logging.ERROR, logger="kraft_tck.reference.node"):
                node._step(ResponseReceived(1, FetchResponse(3, (), (2, 1), LeaderIdAndEpoch(1, 3)), refetch))
            assert node.safety_refusals == 1
            assert node.core.log.end_offset == 4 and node.storage is not None and node.storage.end_offset == 4
            assert "SAFETY" in caplog.text and "high watermark" in caplog.text
            assert node.halted.is_set() and isinstance(node.failure, SafetyViolation)
            assert node.halt_reason == "safety violation"  # what `kraft-tck node` exits with, not a disk fault
            assert node._step(ResponseReceived(1, FetchResponse(3, (), None, LeaderIdAndEpoch(1, 3)))).send == []
        finally:
            await node.stop(graceful=False)

    asyncio.run(main())


def test_a_write_counts_as_committed_only_while_its_own_entry_is_there() -> None:
    """Log matching (KIP-595 follows Raft): the high watermark passing an offset commits *our* write only
    if that offset still holds our epoch's record; after a leader change it may hold another's."""
    from kraft_tck.reference.log import Log
    from kraft_tck.reference.node import commit_outcome

    log = Log([data_batch(0, 1, [b"a"]), data_batch(1, 2, [b"ours"])])
    assert commit_outcome(log, 1, 1, 2) == "pending"
    assert commit_outcome(log, 2, 1, 2) == "committed"
    log.truncate_to(1)
    assert commit_outcome(log, 1, 1, 2) == "lost"  # truncated away
    log.append([data_batch(1, 3, [b"theirs"])])
    assert commit_outcome(log, 2, 1, 2) == "lost"  # same offset, another epoch's record


def test_abrupt_stop_returns_while_a_fetch_is_parked(tmp_path: Path) -> None:
    """A leader holding a long-poll Fetch (KIP-595: up to MaxWaitMs) must still stop promptly."""
    from kraft_tck.reference import wire
    from kraft_tck.reference.messages import FetchRequest
    from kraft_tck.reference.net import KafkaClient

    async def main() -> float:
        format_dir(tmp_path / "data", 1, CID)
        cfg = NodeConfig.from_properties({
            "node.id": "1", "listeners": "CONTROLLER://127.0.0.1:0", "log.dirs": str(tmp_path / "data"),
            "controller.quorum.voters": "1@127.0.0.1:1", "controller.quorum.election.timeout.ms": "100",
        })
        node = Node(cfg)
        await node.start()
        while node.core is None or node.core.state_snapshot()["role"] != "Leader" or node.high_watermark < 1:
            await asyncio.sleep(0.01)
        assert node.server is not None
        client = KafkaClient("127.0.0.1", node.server.port)
        await client.connect()
        epoch, end = node.core.epoch, node.core.log.end_offset
        body = wire.request_to_body(FetchRequest(CID, 7, epoch, end, epoch, max_wait_ms=30_000), 13)
        parked = asyncio.ensure_future(client.request(wire.FETCH, 13, body, 60))
        await asyncio.sleep(0.2)
        assert not parked.done() and node.core._parked  # an observer's caught-up fetch is parked
        t0 = asyncio.get_running_loop().time()
        await asyncio.wait_for(node.stop(graceful=False), 5)
        took = asyncio.get_running_loop().time() - t0
        parked.cancel()
        await client.close()
        return took

    assert asyncio.run(main()) < 2.0
