"""A leader's parked Fetches are answered once its new batch is written, before the fsync that makes it durable, as
Kafka's leader does (KafkaRaftClient.flushLeaderLog: "We update the end offset before flushing so that parked fetches
can return sooner"): with fsync on, the leader's fsync overlaps the followers' fetch round. Only when the answer claims
nothing durable of the step: the only voter, which commits the batch it appends in the same step, answers after the
fsync (reference/node.py ``_fetch_answers_lead_the_fsync``). Real sockets, real files with fsync."""

from __future__ import annotations

import asyncio
import select
import socket
import struct
from pathlib import Path

import pytest
from kraft_tck.reference import wire
from kraft_tck.reference.messages import FetchRequest
from kraft_tck.reference.node import Node
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.spec import codec

from .inprocess_cluster import leader_of

pytestmark = pytest.mark.timeout(60)

FETCH_VERSION = codec.supported_versions(wire.FETCH)[1]
FAST = {"controller.quorum.election.timeout.ms": 300, "controller.quorum.fetch.timeout.ms": 2000,
        "controller.quorum.fetch.max.wait.ms": 100}
OBSERVER = 99


def _observer_fetch(leader: Node) -> socket.socket:
    """A plain socket holding an observer's long-poll (5 s) at the leader's log end."""
    core = leader.core
    assert core is not None
    req = FetchRequest(core.cluster_id, OBSERVER, core.epoch, core.next_append_offset, core.last_epoch,
                       max_wait_ms=5000)
    sock = socket.create_connection(("127.0.0.1", leader.server.port))
    sock.sendall(codec.encode_request(wire.FETCH, FETCH_VERSION, 7, f"observer-{OBSERVER}",
                                      wire.request_to_body(req, FETCH_VERSION)))
    return sock


def _readable(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


def _read_answer(sock: socket.socket) -> dict:
    sock.settimeout(5)
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        assert chunk, "the leader closed the connection"
        data += chunk
    _corr, body = codec.decode_response(wire.FETCH, FETCH_VERSION, data[4:])
    (part,) = body["Responses"][0]["Partitions"]
    return part


async def _answer_at_fsync(root: Path, voters: int) -> tuple[list[bool], dict, int]:
    """Start ``voters`` nodes with fsync on; park an observer's fetch at the leader; write one record. Returns, for
    each of the leader's log fsyncs during that write, whether the observer's answer was already in its socket; the
    answer; and the high watermark before the write."""
    cluster = LocalCluster(root, voters=voters, base_port=free_base_port(voters), settings=dict(FAST))
    nodes = [Node(cfg, fsync=True, seed=cfg.node_id) for cfg in cluster.node_configs()]
    for n in nodes:
        await n.start()
    sock = None
    try:
        leader = await leader_of(nodes)
        sock = _observer_fetch(leader)
        await asyncio.sleep(0.2)  # read and parked by the leader
        assert not _readable(sock), "the observer's fetch at the log end was answered at once, not parked"
        storage = leader.storage
        assert storage is not None
        seen: list[bool] = []
        fsync = storage._fsync

        def watched(fd: int) -> None:
            seen.append(_readable(sock))
            fsync(fd)

        storage._fsync = watched  # type: ignore[method-assign]
        hw = leader.high_watermark
        await leader.write([b"payload"], wait_commit=False)
        await asyncio.sleep(0.2)  # the answer in the socket (and, with 3 voters, the batch committed)
        storage._fsync = fsync  # type: ignore[method-assign]
        return seen, _read_answer(sock), hw
    finally:
        if sock is not None:
            sock.close()
        for n in nodes:
            await n.stop(graceful=True, grace_s=0.2)


def test_a_leader_answers_parked_fetches_before_its_fsync(tmp_path: Path) -> None:
    seen, part, hw = asyncio.run(_answer_at_fsync(tmp_path / "c", voters=3))
    assert seen, "the write did not fsync the leader's log"
    assert seen[0], "the parked fetch was answered only after the leader's fsync (KafkaRaftClient.flushLeaderLog)"
    assert part["Records"], "the answer carries the new batch"
    # It claims nothing of the batch durable: the high watermark it names is the one before the write.
    assert part["HighWatermark"] == hw


def test_the_only_voter_answers_after_its_fsync(tmp_path: Path) -> None:
    """The only voter commits the batch it appends in the same step; an answer naming that high watermark waits for
    the fsync."""
    seen, part, hw = asyncio.run(_answer_at_fsync(tmp_path / "c", voters=1))
    assert seen == [False], f"the answer left before the only voter's fsync: {seen}"
    assert part["Records"] and part["HighWatermark"] > hw
