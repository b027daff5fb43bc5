"""The metadata reader (``describe --brokers``, the broker client) after the leader snapshotted and cleaned its log.

KIP-630: a Fetch below the leader's log start (or from 0 while a snapshot exists) is answered with a SnapshotId
and no records. The reader must do what Kafka's followers and observers do (``KafkaRaftClient.handleFetchResponse``
then ``handleFetchSnapshotResponse``): FetchSnapshot from Position 0 until Size, validate the snapshot, rebuild the
registry from it and fetch the log from its end offset. Before that, a reader fetching from offset 0 got no records
and the tool timed out (or a broker never caught up). Errors: SNAPSHOT_NOT_FOUND (a newer snapshot replaced it)
starts again from a Fetch; POSITION_OUT_OF_RANGE and a corrupt snapshot are one clear error, never a wrong registry;
a running broker retries.

Real sockets and files throughout: node processes and the CLI as a subprocess for ``describe --brokers``;
in-process nodes where a test must act on the leader between two chunks.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kraft_tck.reference import snapshot as disk_snapshot
from kraft_tck.reference.broker_client import BrokerClient, BrokerError, Endpoint, MetadataReader, read_registry
from kraft_tck.reference.messages import FetchSnapshotResponse, SnapshotId
from kraft_tck.reference.net import KafkaClient
from kraft_tck.reference.node import Node
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.registry import BrokerRegistry, BrokerState

from tests.reference.test_node_snapshot import SETTINGS, brokers_in_every_state, leading, start, wait_for, write

pytestmark = pytest.mark.timeout(150)

EXPECTED = {101: BrokerState.ONLINE, 102: BrokerState.FENCED, 103: BrokerState.OFFLINE}


def states(reg: BrokerRegistry) -> dict[int, BrokerState]:
    return {b.broker_id: b.state for b in reg.brokers()}


def endpoints_of(cluster: LocalCluster, ids: list[int] | None = None) -> list[Endpoint]:
    return [("127.0.0.1", cluster.port(i)) for i in (ids or range(1, cluster.voters + 1))]


async def cleaned_leader(cluster: LocalCluster, nodes: dict[int, Node]) -> Node:
    """A leader with brokers 101 (Online), 102 (Fenced), 103 (Offline) whose log no longer starts at 0, and whose
    latest snapshot holds the three brokers."""
    leader = await leading(nodes)
    await brokers_in_every_state(cluster, nodes)
    await write(leader, 200)

    def ready() -> bool:
        st = leader.storage
        if st is None or st.start_offset == 0 or st.snapshots.latest() is None:
            return False
        latest = st.snapshots.latest()
        assert latest is not None
        snap = st.snapshots.read(latest)
        reg = BrokerRegistry.from_snapshot(latest.end_offset, (r for b in snap.batches for r in b.records))
        return states(reg) == EXPECTED

    await wait_for("the leader to snapshot the brokers and clean its log", ready)
    return leader


async def stop_all(nodes: dict[int, Node]) -> None:
    for n in nodes.values():
        await n.stop(graceful=False)


def test_the_reader_goes_through_fetch_snapshot_and_gets_the_leader_s_registry(tmp_path: Path) -> None:
    """In chunks of 64 bytes: several FetchSnapshot answers, one snapshot loaded, then the log after it; the
    registry equals the leader's (brokers, cluster id and feature levels alike)."""
    async def main() -> None:
        cluster = LocalCluster(tmp_path / "c", base_port=free_base_port(3), settings=dict(SETTINGS))
        nodes = await start(cluster)
        try:
            leader = await cleaned_leader(cluster, nodes)
            assert leader.storage is not None
            reader = MetadataReader(snapshot_max_bytes=64)
            reg, info = await read_registry(endpoints_of(cluster), timeout_s=10, reader=reader)
            assert info.leader_id == leader.config.node_id
            assert len(reader.snapshots_loaded) == 1, "the reader did not load the leader's snapshot"
            sid = reader.snapshots_loaded[0]
            size = leader.storage.snapshots.size(sid) if sid in leader.storage.snapshots else None
            assert reader.snapshot_chunks >= 2 and (size is None or reader.snapshot_chunks == -(-size // 64))
            assert reg.next_offset >= sid.end_offset >= leader.storage.start_offset > 0
            assert states(reg) == EXPECTED
            await wait_for("the leader's registry to be at least as far", lambda: leader.brokers.registry.next_offset
                           >= reg.next_offset)
            assert reg.brokers() == leader.brokers.registry.brokers()
            assert reg.cluster_id == leader.brokers.registry.cluster_id
            assert reg.features == leader.brokers.registry.features
        finally:
            await stop_all(nodes)

    asyncio.run(main())


class DroppedMidway(MetadataReader):
    """After the first chunk of its first download, makes the leader write until it has a newer snapshot and has
    deleted this one: the next chunk is answered SNAPSHOT_NOT_FOUND."""

    leader: Node | None = None
    first: SnapshotId | None = None

    async def fetch_snapshot_chunk(self, client: KafkaClient, leader_epoch: int, sid: SnapshotId, position: int,
                                   timeout_s: float) -> FetchSnapshotResponse:
        if self.first is None and position > 0:
            self.first = sid
            leader = self.leader
            assert leader is not None and leader.storage is not None
            for _ in range(20):
                if sid not in leader.storage.snapshots:
                    break
                await write(leader, 40, tag=b"more")
                await asyncio.sleep(0.05)
            assert sid not in leader.storage.snapshots, "the leader kept the snapshot being downloaded"
        return await super().fetch_snapshot_chunk(client, leader_epoch, sid, position, timeout_s)


def test_snapshot_not_found_midway_starts_again_from_a_fetch(tmp_path: Path) -> None:
    """Kafka's handleFetchSnapshotResponse: SNAPSHOT_NOT_FOUND drops the download and the next request is a Fetch,
    which names the newer snapshot; the registry is that snapshot's plus the log after it."""
    async def main() -> None:
        cluster = LocalCluster(tmp_path / "c", base_port=free_base_port(3), settings=dict(SETTINGS))
        nodes = await start(cluster)
        try:
            leader = await cleaned_leader(cluster, nodes)
            reader = DroppedMidway(snapshot_max_bytes=64)
            reader.leader = leader
            reg, _ = await read_registry(endpoints_of(cluster), timeout_s=30, reader=reader)
            assert reader.first is not None
            assert reader.snapshot_restarts >= 1
            assert reader.snapshots_loaded and reader.snapshots_loaded[0] != reader.first
            assert reader.snapshots_loaded[0].end_offset > reader.first.end_offset
            assert states(reg) == EXPECTED
            assert reg.brokers() == leader.brokers.registry.brokers()
        finally:
            await stop_all(nodes)

    asyncio.run(main())


class Corrupting(MetadataReader):
    """Flips the last byte of the second 64-byte chunk of its first ``times`` downloads (the whole-file check
    catches it: a CRC mismatch of the first data batch)."""

    times = 1
    corrupted = 0

    async def fetch_snapshot_chunk(self, client: KafkaClient, leader_epoch: int, sid: SnapshotId, position: int,
                                   timeout_s: float) -> FetchSnapshotResponse:
        resp = await super().fetch_snapshot_chunk(client, leader_epoch, sid, position, timeout_s)
        if position == self.snapshot_max_bytes and self.corrupted < self.times and resp.records:
            self.corrupted += 1
            data = bytearray(resp.records)
            data[-1] ^= 0xFF  # byte 127: inside the first data batch's records, under its CRC
            resp.records = bytes(data)
        return resp


class OutOfRange(MetadataReader):
    """Asks for its second chunk past the snapshot's end: the leader answers POSITION_OUT_OF_RANGE."""

    async def fetch_snapshot_chunk(self, client: KafkaClient, leader_epoch: int, sid: SnapshotId, position: int,
                                   timeout_s: float) -> FetchSnapshotResponse:
        return await super().fetch_snapshot_chunk(client, leader_epoch, sid, position and 10**6, timeout_s)


def test_a_corrupt_snapshot_or_a_bad_position_is_one_clear_error_and_no_registry(tmp_path: Path) -> None:
    async def main() -> None:
        cluster = LocalCluster(tmp_path / "c", base_port=free_base_port(3), settings=dict(SETTINGS))
        nodes = await start(cluster)
        try:
            await cleaned_leader(cluster, nodes)
            corrupting = Corrupting(snapshot_max_bytes=64)
            with pytest.raises(BrokerError) as err:
                await read_registry(endpoints_of(cluster), timeout_s=10, reader=corrupting)
            text = str(err.value)
            assert corrupting.corrupted == 1
            assert "\n" not in text and "is not a valid snapshot" in text and "CRC mismatch" in text, text
            assert len(corrupting.registry) == 0 and corrupting.registry.next_offset == 0
            assert not corrupting.snapshots_loaded

            out_of_range = OutOfRange(snapshot_max_bytes=64)
            with pytest.raises(BrokerError, match="POSITION_OUT_OF_RANGE") as err:
                await read_registry(endpoints_of(cluster), timeout_s=10, reader=out_of_range)
            assert "\n" not in str(err.value)
            assert len(out_of_range.registry) == 0 and out_of_range.registry.next_offset == 0

            # The same reader, undisturbed, reads it all.
            reg, _ = await read_registry(endpoints_of(cluster), timeout_s=10)
            assert states(reg) == EXPECTED
        finally:
            await stop_all(nodes)

    asyncio.run(main())


def test_a_broker_started_after_the_cleaning_loads_the_snapshot_retries_a_corrupt_one_and_goes_online(
        tmp_path: Path) -> None:
    """KIP-631 "Register Flow" on a cleaned log: the controller unfences a broker once its CurrentMetadataOffset
    passes its registration; a broker that could not read the log from 0 would stay Fenced. Its first download
    arrives corrupt: the broker drops it and fetches again (never applies it)."""
    async def main() -> None:
        cluster = LocalCluster(tmp_path / "c", base_port=free_base_port(3), settings=dict(SETTINGS))
        nodes = await start(cluster)
        try:
            leader = await cleaned_leader(cluster, nodes)
            b = BrokerClient(104, cluster.cluster_id, endpoints_of(cluster), heartbeat_interval_ms=100,
                             request_timeout_ms=1000)
            reader = Corrupting(replica_id=104, cluster_id=cluster.cluster_id, snapshot_max_bytes=64)
            reader.on_change = b._note_change
            b.reader = reader
            await b.start()
            try:
                await b.wait_until(lambda: b.state_in_log() == BrokerState.ONLINE, 30)
                assert reader.corrupted == 1 and reader.snapshots_loaded
                assert b.metadata_offset >= b.broker_epoch
                await wait_for("the broker's registry to be the leader's", lambda: b.registry.brokers()
                               == leader.brokers.registry.brokers())
                assert states(b.registry) == {**EXPECTED, 104: BrokerState.ONLINE}
            finally:
                await b.stop()
        finally:
            await stop_all(nodes)

    asyncio.run(main())


@pytest.mark.cluster
def test_describe_brokers_on_a_cleaned_process_cluster_lists_the_leader_s_brokers(tmp_path: Path) -> None:
    """Node processes writing all along (--throughput), snapshotting and cleaning: ``kraft-tck quorum describe
    --brokers`` (a subprocess, bootstrapped from one follower) lists the brokers, states and epochs the leader's
    latest snapshot file holds."""
    settings = {**SETTINGS, "metadata.log.max.record.bytes.between.snapshots": 16384,
                "metadata.log.segment.bytes": 8192}
    cluster = LocalCluster(tmp_path / "c", base_port=free_base_port(3), settings=settings,
                           extra_args=["--throughput", "200", "--record-size", "100"])
    cluster.prepare()
    cluster.start_all()
    try:
        async def main() -> tuple[dict[int, int], BrokerRegistry, subprocess.CompletedProcess[bytes]]:
            await cluster.wait_for_leader(30, min_hw=2)
            epochs: dict[int, int] = {}
            for broker_id in (101, 102, 103):
                b = BrokerClient(broker_id, cluster.cluster_id, endpoints_of(cluster), request_timeout_ms=2000)
                try:
                    assert (await b.register()).error == 0
                    epochs[broker_id] = b.broker_epoch
                    if broker_id == 101:
                        assert not (await b.heartbeat(metadata_offset=10**9)).is_fenced
                    if broker_id == 103:
                        assert (await b.heartbeat(want_shutdown=True, metadata_offset=10**9)).should_shut_down
                finally:
                    await b.stop()
            leader_id = (await cluster.wait_for_leader(10)).leader_id
            part = cluster.data_dir(leader_id) / "__cluster_metadata-0"

            def snapshot_registry() -> BrokerRegistry | None:
                """The registry of the leader's latest snapshot file, once its log no longer starts at 0."""
                if (part / "00000000000000000000.log").exists():
                    return None
                ids = sorted(parsed[0] for p in part.iterdir()
                             if (parsed := disk_snapshot.parse_snapshot_filename(p.name)) and parsed[1] == "checkpoint")
                for sid in reversed(ids):
                    try:
                        data = (part / disk_snapshot.snapshot_filename(sid)).read_bytes()
                    except FileNotFoundError:
                        continue  # cleaned just now
                    snap = disk_snapshot.decode_snapshot(part, data, sid)
                    reg = BrokerRegistry.from_snapshot(sid.end_offset, (r for b in snap.batches for r in b.records))
                    return reg if states(reg) == EXPECTED else None
                return None

            await wait_for("the leader to clean past the brokers' records", lambda: snapshot_registry() is not None,
                           timeout_s=60)
            leader_reg = snapshot_registry()
            assert leader_reg is not None
            follower = next(i for i in (1, 2, 3) if i != leader_id)
            cli = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kraft_tck.reference.cli", "quorum", "--bootstrap-controller",
                f"127.0.0.1:{cluster.port(follower)}", "describe", "--brokers",
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            stdout, stderr = await asyncio.wait_for(cli.communicate(), 60)
            assert cli.returncode is not None
            return epochs, leader_reg, subprocess.CompletedProcess([], cli.returncode, stdout, stderr)

        epochs, leader_reg, done = asyncio.run(main())
    finally:
        cluster.stop_all(signal.SIGKILL)
    out = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["BrokerId", "State", "BrokerEpoch"], out
    rows = {int(cells[0]): (cells[1], int(cells[2])) for cells in (line.split() for line in lines[1:])}
    assert rows == {b.broker_id: (str(b.state), b.broker_epoch) for b in leader_reg.brokers()}, out
    assert rows == {i: (str(EXPECTED[i]), epochs[i]) for i in EXPECTED}, out
