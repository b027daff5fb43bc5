"""An independent client reads the node: kafka-python's own protocol classes build the requests and decode
the node's ApiVersions and DescribeQuorum answers. Real socket, real
files; the node is a single-voter quorum, so it elects itself (KIP-595) and answers as leader."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference import wire
from kraft_tck.reference.config import PRE_VOTE_DEFAULT, NodeConfig
from kraft_tck.reference.messages import FetchRequest
from kraft_tck.reference.node import Node
from kraft_tck.reference.procs import free_base_port
from kraft_tck.reference.storage import format_dir
from kraft_tck.reference.wire import SERVED_API_VERSIONS
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors

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
        # Vote: 0-2 with pre-vote (KIP-996, Kafka 4.x), 0-1 without (reference.quorum.pre.vote, Kafka 3.9)
        assert advertised[key] == (rng if key != 52 or PRE_VOTE_DEFAULT else (0, 1))
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


async def three_voters(tmp_path: Path) -> tuple[list[Node], Node, Node]:
    """A 3-voter in-process cluster on real ports; returns (nodes, leader, a follower)."""
    base = free_base_port(3)
    quorum = ",".join(f"{i}@127.0.0.1:{base + i - 1}" for i in (1, 2, 3))
    nodes = []
    for i in (1, 2, 3):
        format_dir(tmp_path / f"n{i}", i, "Zx1W-0mTQzSWb8b0NoQ0Kg")
        cfg = NodeConfig.from_properties({
            "node.id": str(i), "listeners": f"CONTROLLER://127.0.0.1:{base + i - 1}",
            "controller.quorum.voters": quorum, "log.dirs": str(tmp_path / f"n{i}"),
            "controller.quorum.election.timeout.ms": "200", "controller.quorum.fetch.timeout.ms": "2000",
            "controller.quorum.fetch.max.wait.ms": "100",
        })
        nodes.append(Node(cfg, fsync=False, seed=i))
    for n in nodes:
        await n.start()
    for _ in range(500):
        roles = {n: n.core.role.name for n in nodes if n.core is not None}
        leader = next((n for n, r in roles.items() if r == "Leader"), None)
        follower = next((n for n, r in roles.items() if r == "Follower" and leader is not None
                         and n.core is not None and n.core.leader_id == leader.config.node_id), None)
        if leader is not None and follower is not None:
            return nodes, leader, follower
        await asyncio.sleep(0.02)
    for n in nodes:
        await n.stop()
    raise AssertionError("no leader with a follower within 10 s")


def test_a_follower_names_the_leader_endpoint_to_kafka_python(tmp_path: Path) -> None:
    """A follower answers DescribeQuorum v2 and Fetch v17 with NOT_LEADER_OR_FOLLOWER (KIP-595 "DescribeQuorum
    Request Handling" / "Fetch Request Handling" step 2). Fetch names the leader's id, epoch and where it
    listens (``NodeEndpoints``), so a client can go there; DescribeQuorum answers as Kafka does
    (``DescribeQuorumResponse.singletonErrorResponse``: the error and its message, LeaderId/LeaderEpoch 0,
    no ``Nodes``), not with the KIP's leader hint."""
    from kafka.protocol.consumer.fetch import FetchResponse

    async def main() -> tuple[Any, Any, int, int, int]:
        nodes, leader, follower = await three_voters(tmp_path)
        try:
            assert follower.server is not None and leader.server is not None and follower.core is not None
            dq = DescribeQuorumRequest(version=2, topics=[DescribeQuorumRequest.TopicData(
                topic_name="__cluster_metadata",
                partitions=[DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])])
            dq.with_header(correlation_id=31, client_id="independent")
            payload = await roundtrip(follower.server.port, bytes(dq.encode(header=True, framed=True)))
            describe = DescribeQuorumResponse.decode(payload, version=2, header=True)
            # The Fetch request comes from this project's codec; the answer is decoded by kafka-python alone.
            epoch = follower.core.epoch
            fetch = FetchRequest("Zx1W-0mTQzSWb8b0NoQ0Kg", 7, epoch, 0, 0, max_wait_ms=0, max_bytes=1 << 20)
            frame = codec.encode_request(wire.FETCH, 17, 32, "independent", wire.request_to_body(fetch, 17))
            fetched = FetchResponse.decode(await roundtrip(follower.server.port, frame), version=17, header=True)
            return describe, fetched, leader.config.node_id, leader.server.port, epoch
        finally:
            for n in nodes:
                await n.stop()

    describe, fetched, leader_id, leader_port, epoch = asyncio.run(main())
    part = describe.topics[0].partitions[0]
    assert describe.error_code == 0 and part.error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert (part.leader_id, part.leader_epoch, part.high_watermark) == (0, 0, 0)
    assert part.error_message == Errors.NOT_LEADER_OR_FOLLOWER.message
    assert list(describe.nodes) == []
    fpart = fetched.responses[0].partitions[0]
    assert fetched.error_code == 0 and fpart.error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert (fpart.current_leader.leader_id, fpart.current_leader.leader_epoch) == (leader_id, epoch)
    assert [(e.node_id, e.host, e.port) for e in fetched.node_endpoints] == [(leader_id, "127.0.0.1", leader_port)]
