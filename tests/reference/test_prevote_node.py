"""The node with and without KIP-996 pre-vote (``reference.quorum.pre.vote``), on real sockets.

With pre-vote the node advertises Vote 0-2 and elects through Prospective; without it, Vote 0-1 as Kafka 3.9.
A mixed quorum still elects: a prospective's pre-vote to a 3.9 node cannot be written (Vote v2 unsupported),
which Kafka 4.x turns into UNSUPPORTED_VERSION and an immediate candidacy (KafkaRaftClient.handleVoteResponse).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference.config import ConfigError, NodeConfig
from kraft_tck.reference.net import KafkaClient, RequestError
from kraft_tck.reference.node import Node
from kraft_tck.reference.procs import free_base_port
from kraft_tck.reference.storage import format_dir
from kraft_tck.spec import codec

CLUSTER = "Zx1W-0mTQzSWb8b0NoQ0Kg"
VOTE = 52


def config(tmp_path: Path, i: int, base: int, pre_vote: str | None, election_timeout_ms: int = 200) -> NodeConfig:
    quorum = ",".join(f"{n}@127.0.0.1:{base + n - 1}" for n in (1, 2, 3))
    props = {
        "node.id": str(i), "listeners": f"CONTROLLER://127.0.0.1:{base + i - 1}",
        "controller.quorum.voters": quorum, "log.dirs": str(tmp_path / f"n{i}"),
        "controller.quorum.election.timeout.ms": str(election_timeout_ms),
        "controller.quorum.fetch.timeout.ms": "1000",
        "controller.quorum.fetch.max.wait.ms": "100",
    }
    if pre_vote is not None:
        props["reference.quorum.pre.vote"] = pre_vote
    return NodeConfig.from_properties(props)


async def cluster(tmp_path: Path, pre_votes: tuple[bool, bool, bool]) -> list[Node]:
    base = free_base_port(3)
    nodes = []
    for i, pv in zip((1, 2, 3), pre_votes, strict=True):
        format_dir(tmp_path / f"n{i}", i, CLUSTER)
        nodes.append(Node(config(tmp_path, i, base, "true" if pv else "false"), fsync=False, seed=i))
    for n in nodes:
        await n.start()
    return nodes


async def wait_leader(nodes: list[Node], exclude: Node | None = None, timeout_s: float = 15) -> Node:
    for _ in range(int(timeout_s / 0.02)):
        for n in nodes:
            if n is not exclude and n.core is not None and n.core.role.name == "Leader":
                others = [m for m in nodes if m is not n and m is not exclude and m.core is not None]
                if all(m.core is not None and m.core.leader_id == n.config.node_id for m in others):
                    return n
        await asyncio.sleep(0.02)
    raise AssertionError(f"no leader within {timeout_s} s: {[n.core.role.name for n in nodes if n.core]}")


async def advertised_vote(port: int) -> tuple[int, int]:
    client = KafkaClient("127.0.0.1", port, client_id="prevote-test")
    await client.connect()
    try:
        return client.versions[VOTE]
    finally:
        await client.close()


def test_the_switch_is_one_key_with_one_line_errors(tmp_path: Path) -> None:
    base = 9000
    assert config(tmp_path, 1, base, None).pre_vote is False  # Kafka 3.9 behaviour until the catalog passes on
    assert config(tmp_path, 1, base, "TRUE").pre_vote is True
    assert config(tmp_path, 1, base, "true").to_properties()["reference.quorum.pre.vote"] == "true"
    with pytest.raises(ConfigError) as err:
        config(tmp_path, 1, base, "yes")
    assert str(err.value) == "reference.quorum.pre.vote: expected true or false, got 'yes'"


def test_pre_vote_cluster_elects_and_a_killed_leader_is_replaced_through_prospective(tmp_path: Path) -> None:
    async def main() -> tuple[list[tuple[int, int]], list[str], int, int]:
        nodes = await cluster(tmp_path, (True, True, True))
        try:
            leader = await wait_leader(nodes)
            assert all(n.server is not None for n in nodes)
            versions = [await advertised_vote(n.server.port) for n in nodes if n.server is not None]
            epoch = leader.core.epoch if leader.core else -1
            await leader.stop()
            rest = [n for n in nodes if n is not leader]
            new = await wait_leader(rest)
            return versions, [], epoch, new.core.epoch if new.core else -1
        finally:
            for n in nodes:
                await n.stop()

    versions, _, epoch, new_epoch = asyncio.run(main())
    assert versions == [(0, 2)] * 3
    # One election after the kill: the pre-vote does not add epochs (epoch + 1, or + 2 on a split vote).
    assert epoch < new_epoch <= epoch + 2


def test_a_pre_vote_node_falls_back_to_a_real_election_with_a_3_9_peer(tmp_path: Path) -> None:
    """Nodes 1 (as Kafka 3.9: Vote 0-1, slow election timer) and 3 (pre-vote) of a 3-voter quorum; node 2 is
    down. Node 3's timer runs out first: its pre-vote to node 1 cannot be written at v1, so it becomes a
    candidate at once (UNSUPPORTED_VERSION, KafkaRaftClient.handleVoteResponse) and node 1 elects it. Without
    the fallback node 3 would wait for a pre-vote majority that never comes, and node 1 would lead."""

    async def main() -> tuple[tuple[int, int], tuple[int, int], bool, int]:
        base = free_base_port(3)
        format_dir(tmp_path / "n1", 1, CLUSTER)
        format_dir(tmp_path / "n3", 3, CLUSTER)
        old = Node(config(tmp_path, 1, base, "false", election_timeout_ms=8000), fsync=False, seed=1)
        new = Node(config(tmp_path, 3, base, "true"), fsync=False, seed=3)
        nodes = [old, new]
        for n in nodes:
            await n.start()
        try:
            assert old.server is not None and new.server is not None
            old_vote, new_vote = await advertised_vote(old.server.port), await advertised_vote(new.server.port)
            # A Vote v2 to the 3.9 node: like Kafka's parser for a version it does not know, no answer.
            client = KafkaClient("127.0.0.1", old.server.port, client_id="prevote-test")
            await client.connect()
            body: dict[str, Any] = {"ClusterId": CLUSTER, "VoterId": 1, "Topics": [{
                "TopicName": "__cluster_metadata", "Partitions": [{
                    "PartitionIndex": 0, "CandidateEpoch": 0, "CandidateId": 3, "LastOffsetEpoch": 0,
                    "LastOffset": 0, "PreVote": True}]}]}
            refused = False
            try:
                await client.request(VOTE, 2, body, 2.0)
            except RequestError:
                refused = True
            finally:
                await client.close()
            leader = await wait_leader(nodes, timeout_s=6)
            return old_vote, new_vote, refused, leader.config.node_id
        finally:
            for n in nodes:
                await n.stop()

    old_vote, new_vote, refused, leader = asyncio.run(main())
    assert old_vote == (0, 1) and new_vote == (0, 2)
    assert refused, "the node run without pre-vote answered a Vote v2"
    assert leader == 3, "the pre-vote node did not fall back to a real election against a Vote v0-1 peer"
    assert codec.supported_versions(VOTE) == (0, 2)
