"""The shell refuses, loudly, a peer's message that would break safety, and keeps serving (KIP-595 "Fetch
Response Handling" 2: a follower never truncates below its high watermark)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from kraft_tck.reference.config import NodeConfig
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
        finally:
            await node.stop(graceful=False)

    asyncio.run(main())
