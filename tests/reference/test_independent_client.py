"""An independent client reads the node: kafka-python's own protocol classes build the requests and decode
the node's ApiVersions and DescribeQuorum answers (issue 3 "Independent client"). Real socket, real
files; the node is a single-voter quorum, so it elects itself (KIP-595) and answers as leader."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference.config import NodeConfig
from kraft_tck.reference.node import Node
from kraft_tck.reference.storage import format_dir
from kraft_tck.reference.wire import SERVED_API_VERSIONS

api_versions = pytest.importorskip("kafka.protocol.metadata.api_versions", reason="pip install kafka-python")
from kafka.protocol.admin.cluster import DescribeQuorumRequest, DescribeQuorumResponse  # noqa: E402


async def roundtrip(port: int, frame: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(frame)
    await writer.drain()
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    payload = await reader.readexactly(size)
    writer.close()
    return payload


async def single_voter(tmp_path: Path) -> Node:
    format_dir(tmp_path / "data", 1, "Zx1W-0mTQzSWb8b0NoQ0Kg")
    cfg = NodeConfig.from_properties({
        "node.id": "1", "listeners": "CONTROLLER://127.0.0.1:0", "controller.quorum.voters": "1@127.0.0.1:1",
        "log.dirs": str(tmp_path / "data"), "controller.quorum.election.timeout.ms": "100",
    })
    node = Node(cfg)
    await node.start()
    for _ in range(100):
        if node.core is not None and node.core.state_snapshot()["role"] == "Leader":
            return node
        await asyncio.sleep(0.02)
    await node.stop()
    raise AssertionError("a single voter did not elect itself")


def test_kafka_python_reads_api_versions_and_describe_quorum(tmp_path: Path) -> None:
    async def main() -> list[Any]:
        node = await single_voter(tmp_path)
        assert node.server is not None
        port = node.server.port
        out = []
        try:
            req = api_versions.ApiVersionsRequest(version=3, client_software_name="kafka-python",
                                                  client_software_version="3")
            req.with_header(correlation_id=11, client_id="independent")
            payload = await roundtrip(port, bytes(req.encode(header=True, framed=True)))
            out.append(api_versions.ApiVersionsResponse.decode(payload, version=3, header=True))
            for version in (0, 1, 2):
                dq = DescribeQuorumRequest(version=version, topics=[DescribeQuorumRequest.TopicData(
                    topic_name="__cluster_metadata",
                    partitions=[DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])])
                dq.with_header(correlation_id=20 + version, client_id="independent")
                payload = await roundtrip(port, bytes(dq.encode(header=True, framed=True)))
                out.append(DescribeQuorumResponse.decode(payload, version=version, header=True))
        finally:
            await node.stop()
        return out

    versions, *describes = asyncio.run(main())
    assert versions.header.correlation_id == 11 and versions.error_code == 0
    advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    for key, rng in SERVED_API_VERSIONS.items():
        assert advertised[key] == rng
    for version, resp in enumerate(describes):
        assert resp.header.correlation_id == 20 + version
        part = resp.topics[0].partitions[0]
        assert resp.error_code == 0 and part.error_code == 0
        assert part.leader_id == 1 and part.leader_epoch >= 1
        assert [v.replica_id for v in part.current_voters] == [1]
        # The leader's LeaderChange record is committed by the single voter itself (KIP-595 HW rule).
        assert part.high_watermark >= 1 and part.current_voters[0].log_end_offset >= 1
        if version >= 1:  # KIP-836 timestamps
            assert part.current_voters[0].last_caught_up_timestamp > 0
