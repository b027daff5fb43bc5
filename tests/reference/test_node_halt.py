"""Fail-stop on a failed log directory: a leader whose segment file is damaged while it runs halts when a
lagging follower's Fetch makes it read the damaged batch back, instead of serving it. The process exits
non-zero naming the file and position, and the other voters elect a new leader and carry on.

Real node processes, sockets and files. ``reference.log.cache.bytes=0`` makes every node release each
batch once it is written, so the follower's catch-up is served from the segment files.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.storage import METADATA_PARTITION_DIR, LogDir
from kraft_tck.spec.records import decode_batch

from tests.reference.test_workload import SETTINGS as FAST

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

# Short timeouts (as the workload tests use) and no log cache.
SETTINGS = {**FAST, "controller.quorum.append.linger.ms": 25, "reference.log.cache.bytes": 0}


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_a_leader_whose_segment_was_damaged_halts_instead_of_serving_it(tmp_path: Path) -> None:
    c = LocalCluster(tmp_path / "cluster", voters=3, base_port=free_base_port(3), settings=dict(SETTINGS),
                     extra_args=["--throughput", "300", "--record-size", "100"])
    c.prepare()
    c.start_all()
    try:
        info = run(c.wait_for_leader(30, min_hw=20))
        leader = info.leader_id
        lagging = next(i for i in (1, 2, 3) if i != leader)
        c.kill(lagging, signal.SIGKILL)
        with LogDir.open(c.data_dir(lagging)) as d:
            lagging_end = d.end_offset
        run(c.wait_for_leader(30, min_hw=lagging_end + 150))  # committed by the leader and the other voter

        # Damage a batch past the lagging follower's end in the running leader's segment file.
        seg = c.data_dir(leader) / METADATA_PARTITION_DIR / "00000000000000000000.log"
        data = seg.read_bytes()
        pos = 0
        while True:
            batch, nxt = decode_batch(data, pos)
            if batch.base_offset > lagging_end + 20:
                break
            pos = nxt
        with open(seg, "r+b") as fh:
            fh.seek(nxt - 3)  # inside its last record: the batch's CRC no longer matches
            fh.write(bytes([data[nxt - 3] ^ 0xFF]))

        c.start(lagging)  # it fetches from its end: the leader reads the damaged batch back
        proc = c.procs[leader]
        deadline = time.monotonic() + 30
        while proc.poll() is None:
            assert time.monotonic() < deadline, "the leader kept running on a damaged segment"
            time.sleep(0.05)
        assert proc.returncode == 1
        out = (c.node_dir(leader) / "node.log").read_text(encoding="utf-8", errors="replace")
        assert f"node {leader} halts: its log directory failed" in out
        assert f"{seg}: the batch at position {pos} no longer reads" in out, out[-3000:]

        # The other two voters go on: a new leader of a higher epoch, which the lagging one catches up to.
        new = run(c.wait_for_leader(30, min_epoch=info.leader_epoch + 1, exclude=leader))
        assert new.leader_id != leader
        run(c.wait_caught_up(lagging, 30, lagging_end + 150))
    finally:
        c.stop_all(signal.SIGKILL)


def test_a_refused_disk_write_halts_the_node_before_anything_is_announced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment write the disk refuses (ENOSPC here, injected at ``os.write`` for the active segment's file:
    ``LogDir.append``'s one-batch path and ``LogDir._write`` both write through it) halts the node: the write is
    not acknowledged, the node takes no more, and a restart finds the log as it was before the refused write."""
    import errno

    from kraft_tck.reference.node import Node, NodeHalted

    async def main() -> None:
        c = LocalCluster(tmp_path / "one", voters=1, base_port=free_base_port(1),
                         settings={"controller.quorum.append.linger.ms": 0})
        (cfg,) = c.node_configs()
        node = Node(cfg, fsync=True, seed=1)
        await node.start()
        try:
            while node.high_watermark == 0:
                await asyncio.sleep(0.01)
            await node.write([b"before"])
            assert node.core is not None
            end = node.core.log.end_offset

            storage = node.storage
            assert storage is not None
            segment_fd, write = storage._fd, os.write

            def refuse(fd: int, data: bytes) -> int:
                if fd == segment_fd:
                    raise OSError(errno.ENOSPC, "No space left on device")
                return write(fd, data)

            with monkeypatch.context() as m:
                m.setattr(os, "write", refuse)
                with pytest.raises(NodeHalted, match="No space left on device"):
                    await node.write([b"refused"])
            assert node.halted.is_set() and isinstance(node.failure, OSError)
            assert node.halt_reason == "its log directory failed"
            assert node.high_watermark == end, "the refused write was acknowledged"
            with pytest.raises(NodeHalted):
                await node.write([b"after"])
        finally:
            await node.stop()
        again = Node(cfg, fsync=True, seed=1)
        await again.start()
        try:
            # The log as it was, plus the LeaderChange of a new epoch: the only voter leads as it starts
            # (Kafka's KafkaRaftClient.initialize).
            assert again.core is not None and again.core.log.end_offset == end + 1
            assert again.core.log.batches[-1].is_control and again.core.log.batches[-1].base_offset == end
            assert [r.value for b in again.core.log.batches for r in b.records if not b.is_control] == [b"before"]
        finally:
            await again.stop()

    asyncio.run(main())
