"""Real processes, real sockets, real files: a dynamic quorum (KIP-853) grown from one controller to three.

Node 1 is formatted ``kraft-tck format --standalone`` (the bootstrap checkpoint names it the only voter,
kraft.version 1); nodes 2 and 3 are formatted ``--no-initial-controllers`` and find the quorum through
``controller.quorum.bootstrap.servers``. ``kraft-tck quorum add-controller`` (AddRaftVoter) makes them voters, as
Kafka's ``kafka-metadata-quorum add-controller`` does (KIP-853 "AddVoter", Kafka's AddVoterHandler). The grown
quorum must then survive the crash of any one node (kill -9), and ``remove-controller`` of the leader must hand the
leadership over (KIP-853 "RemoveVoter": the leader resigns once the VotersRecord without it commits, Kafka's
RemoveVoterHandler.highWatermarkUpdated, KafkaRaftClientReconfigTest.testRemoveVoterIsLeader). A static quorum
(controller.quorum.voters, kraft.version 0) refuses AddRaftVoter with UNSUPPORTED_VERSION
(KafkaRaftClientReconfigTest.testAddVoterWithKraftVersion0).

Checks read DescribeQuorum answers and the command line's output, never the nodes' memory.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference.config import render_properties
from kraft_tck.reference.net import KafkaClient
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.quorum_client import QuorumInfo, kafka_uuid
from kraft_tck.reference.snapshot import BOOTSTRAP_SNAPSHOT_ID, decode_snapshot, parse_snapshot_filename
from kraft_tck.reference.storage import LogDir, StorageError, format_dir, new_uuid
from kraft_tck.reference.wire import directory_uuid
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import ControlType, decode_control

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

ELECTION_MS, FETCH_MS, BACKOFF_MS = 300, 600, 200
SETTINGS = {
    "controller.quorum.election.timeout.ms": ELECTION_MS,
    "controller.quorum.fetch.timeout.ms": FETCH_MS,
    "controller.quorum.election.backoff.max.ms": BACKOFF_MS,
    # AddRaftVoter's whole operation (ApiVersions probe, then the commit of the new VotersRecord) must finish
    # within the leader's request timeout (Kafka's AddVoterHandler: the probe's remaining request time).
    "controller.quorum.request.timeout.ms": 1000,
    "controller.quorum.fetch.max.wait.ms": 100,
}
WAIT_S = 30  # generous: 7 processes share 2 cores while these run


@pytest.fixture
def dynamic(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(tmp_path / "cluster", voters=3, base_port=free_base_port(3), settings=dict(SETTINGS),
                     quorum="dynamic", extra_args=["--throughput", "200", "--record-size", "100"])
    c.prepare()
    yield c
    c.stop_all(signal.SIGKILL)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def voter_keys(info: QuorumInfo) -> dict[int, str]:
    """DescribeQuorum v2's voters: id -> ReplicaDirectoryId (Kafka's Uuid string)."""
    return {r.replica_id: kafka_uuid(r.directory_id) for r in info.voters}


def wait_for(c: LocalCluster, what: str, test: Any, timeout_s: float = WAIT_S) -> QuorumInfo:
    """DescribeQuorum from the live nodes until ``test(info)`` holds; the last answer in the failure otherwise."""
    deadline = time.monotonic() + timeout_s
    last: QuorumInfo | None = None
    while time.monotonic() < deadline:
        info = run(c.describe())
        if info is not None:
            last = info
            if test(info):
                return info
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout_s}s; last DescribeQuorum: {last}")


def add_controller(c: LocalCluster, node_id: int) -> QuorumInfo:
    """``kraft-tck quorum add-controller`` of ``node_id``, then DescribeQuorum naming it a voter with its directory id.

    The leader refuses a joiner that has not fetched up to its log end yet (REQUEST_TIMED_OUT, Kafka's
    LeaderState.isReplicaCaughtUp), as it does while another change is uncommitted: an operator asks again. A
    REQUEST_TIMED_OUT after the VotersRecord was appended leaves the voter added (KafkaRaftClientReconfigTest.
    testAddVoterTimeout), so DescribeQuorum decides, not the exit status alone."""
    dir_id = c.directory_id(node_id)
    assert dir_id, f"node {node_id}'s meta.properties has no directory.id"
    deadline = time.monotonic() + WAIT_S
    outputs = []
    while True:
        done = c.add_controller(node_id)
        outputs.append(f"exit {done.returncode}: {done.stdout.strip()} {done.stderr.strip()}")
        if done.returncode == 0:
            assert f"Added controller {node_id} with directory id {dir_id}" in done.stdout, done.stdout
            break
        info = run(c.describe())
        if info is not None and voter_keys(info).get(node_id) == dir_id:
            break
        assert done.returncode == 1 and "UNSUPPORTED_VERSION" not in done.stdout + done.stderr, outputs
        if time.monotonic() > deadline:
            raise AssertionError(f"add-controller {node_id} never succeeded: {outputs}")
        time.sleep(0.5)
    return wait_for(c, f"node {node_id} a voter with directory id {dir_id}",
                    lambda i: voter_keys(i).get(node_id) == dir_id)


def grow_to_three(c: LocalCluster, joiners_after_offset: int = 0) -> QuorumInfo:
    """Start the standalone controller and the two joiners (once the leader has committed past
    ``joiners_after_offset``); add both (KIP-853 "Bootstrapping" then "AddVoter")."""
    c.start(1)
    first = wait_for(c, "node 1 leads alone", lambda i: i.leader_id == 1 and i.high_watermark > joiners_after_offset)
    assert voter_keys(first) == {1: c.directory_id(1)}, "format --standalone: node 1 is the only voter"
    c.start(2)
    c.start(3)
    for node_id in (2, 3):
        # The joiner fetches from its bootstrap server as an observer before it is added.
        wait_for(c, f"node {node_id} an observer of the leader", lambda i, n=node_id: n in {
            r.replica_id for r in i.observers})
        add_controller(c, node_id)
    info = wait_for(c, "three voters", lambda i: len(i.voters) == 3)
    assert voter_keys(info) == {i: c.directory_id(i) for i in (1, 2, 3)}
    # Adding voters costs no leadership (KafkaRaftClientReconfigTest.testAddVoter: the leader stays, answers NONE). A
    # sole voter's check-quorum timer must restart while it is alone (LeaderState.timeUntilCheckQuorumExpires), or
    # it resigns the moment the set grows to two, before the new voter could fetch.
    assert (info.leader_id, info.leader_epoch) == (1, first.leader_epoch), (first, info)
    # DescribeQuorum v2 Nodes: the voters' listeners, as the VotersRecord holds them.
    assert info.nodes == {i: (("CONTROLLER", "127.0.0.1", c.port(i)),) for i in (1, 2, 3)}, info.nodes
    return info


def commits_after(c: LocalCluster, before: QuorumInfo, survivors: set[int], new_leader: bool) -> QuorumInfo:
    """A leader among ``survivors`` whose high watermark passes ``before``'s: the workload's writes commit."""
    min_epoch = before.leader_epoch + 1 if new_leader else before.leader_epoch
    return wait_for(
        c, f"a leader among {sorted(survivors)} committing past offset {before.high_watermark}",
        lambda i: i.leader_id in survivors and i.leader_epoch >= min_epoch and i.high_watermark > before.high_watermark,
        timeout_s=WAIT_S)


def test_standalone_grows_to_three_voters_that_survive_any_one_crash(dynamic: LocalCluster) -> None:
    c = dynamic
    grow_to_three(c)
    # Each node in turn (the leader first, then a follower, then the last one whatever its role); the other two must
    # keep committing.
    untouched = {1, 2, 3}
    for round_ in range(3):
        before = wait_for(c, "a leader of three voters", lambda i: len(i.voters) == 3 and i.high_watermark > 0)
        victim = before.leader_id if round_ == 0 else min(untouched - {before.leader_id} or untouched)
        untouched.discard(victim)
        was_leader = before.leader_id == victim
        c.kill(victim, signal.SIGKILL)
        started = time.monotonic()
        after = commits_after(c, before, {1, 2, 3} - {victim}, new_leader=was_leader)
        took = time.monotonic() - started
        assert set(voter_keys(after)) == {1, 2, 3}, "a crash changes no voter set"
        print(f"killed {'leader' if was_leader else 'follower'} {victim}: leader {after.leader_id} epoch "
              f"{after.leader_epoch} commits past {before.high_watermark} after {took:.1f}s")
        # Back again from its own files: the voter set comes from the log and the bootstrap checkpoint.
        c.start(victim)
        wait_for(c, f"node {victim} caught up again", lambda i, v=victim, hw=after.high_watermark: any(
            r.replica_id == v and r.log_end_offset >= hw for r in i.voters))


def test_removing_the_leader_hands_leadership_to_the_remaining_voters(dynamic: LocalCluster) -> None:
    c = dynamic
    info = grow_to_three(c)
    old = info.leader_id
    dir_id = c.directory_id(old)
    done = c.remove_controller(old)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert f"Removed  KRaft controller {old} with directory id {dir_id}" in done.stdout, done.stdout
    remaining = {1, 2, 3} - {old}
    after = wait_for(c, f"a new leader among {sorted(remaining)}", lambda i: i.leader_id in remaining
                     and set(voter_keys(i)) == remaining and i.high_watermark > info.high_watermark)
    assert after.leader_epoch > info.leader_epoch
    assert voter_keys(after) == {i: c.directory_id(i) for i in remaining}
    # The old leader stays up as an observer: it fetches from the new leader (KIP-853 "RemoveVoter").
    assert old in c.alive()
    wait_for(c, f"node {old} an observer", lambda i: old in {r.replica_id for r in i.observers})
    # Writes keep committing with the two remaining voters.
    commits_after(c, after, remaining, new_leader=False)


def test_a_voter_restarted_on_another_port_updates_its_endpoint(dynamic: LocalCluster) -> None:
    """KIP-853 "UpdateVoter": a follower whose entry in the voter set differs from its own listeners sends
    UpdateRaftVoter (Kafka's pollFollowerAsVoter, every 3 x fetch timeout); the leader appends a VotersRecord with
    the new endpoint, and every node then reaches the voter at its new address."""
    c = dynamic
    info = grow_to_three(c)
    mover = next(i for i in (2, 3) if i != info.leader_id)
    old_port, new_port = c.port(mover), free_base_port(1)
    c.kill(mover, signal.SIGKILL)
    cfg = c.config_path(mover)
    cfg.write_text(cfg.read_text(encoding="utf-8").replace(f"CONTROLLER://127.0.0.1:{old_port}",
                                                           f"CONTROLLER://127.0.0.1:{new_port}"), encoding="utf-8")
    c.moved_ports[mover] = new_port
    c.start(mover)
    moved = wait_for(c, f"node {mover}'s new endpoint in the voter set, and node {mover} caught up",
                     lambda i: i.nodes.get(mover) == (("CONTROLLER", "127.0.0.1", new_port),) and any(
                         r.replica_id == mover and r.log_end_offset >= info.high_watermark for r in i.voters))
    assert voter_keys(moved) == {i: c.directory_id(i) for i in (1, 2, 3)}, "an update changes no voter key"
    # Without the leader, the moved voter and the other one elect a leader and commit: they reach each other at the
    # addresses the voter set now holds.
    c.kill(moved.leader_id, signal.SIGKILL)
    after = commits_after(c, moved, {1, 2, 3} - {moved.leader_id}, new_leader=True)
    assert after.nodes.get(mover) == (("CONTROLLER", "127.0.0.1", new_port),)


async def _add_raft_voter(host: str, port: int, body: dict[str, Any]) -> dict[str, Any]:
    client = KafkaClient(host, port, client_id="test-add-raft-voter")
    await client.connect(timeout_s=5)
    try:
        assert 80 in client.versions, "the node advertises AddRaftVoter (api key 80) in ApiVersions"
        answer: dict[str, Any] = await client.request(80, 0, body, 5)
        return answer
    finally:
        await client.close()


def test_static_quorum_refuses_add_raft_voter_with_unsupported_version(tmp_path: Path) -> None:
    c = LocalCluster(tmp_path / "static", voters=3, base_port=free_base_port(4), settings=dict(SETTINGS))
    cid = c.prepare()
    # A fourth controller's files, for add-controller's --command-config (it is never started).
    joiner_dir = tmp_path / "joiner"
    joiner_port = c.port(4)
    format_dir(joiner_dir / "data", 4, cid)
    joiner_cfg = joiner_dir / "server.properties"
    joiner_cfg.write_text(render_properties({
        "process.roles": "controller", "node.id": 4, "listeners": f"CONTROLLER://127.0.0.1:{joiner_port}",
        "controller.listener.names": "CONTROLLER", "controller.quorum.bootstrap.servers": f"127.0.0.1:{c.port(1)}",
        "log.dirs": joiner_dir / "data"}), encoding="utf-8")
    try:
        c.start_all()
        info = run(c.wait_for_leader(WAIT_S, min_hw=1))
        leader_port = c.port(info.leader_id)
        answer = run(_add_raft_voter("127.0.0.1", leader_port, {
            "ClusterId": cid, "TimeoutMs": 5000, "VoterId": 4, "VoterDirectoryId": directory_uuid(new_uuid()),
            "Listeners": [{"Name": "CONTROLLER", "Host": "127.0.0.1", "Port": joiner_port}]}))
        assert answer["ErrorCode"] == Errors.UNSUPPORTED_VERSION, answer
        # The command line says so too, and fails.
        done = c.quorum_command("add-controller", command_config=joiner_cfg)
        assert done.returncode != 0, done.stdout
        assert "UNSUPPORTED_VERSION" in done.stdout + done.stderr, (done.stdout, done.stderr)
        after = run(c.wait_for_leader(WAIT_S))
        assert {r.replica_id for r in after.voters} == {1, 2, 3}, "the static voter set is unchanged"
    finally:
        c.stop_all(signal.SIGKILL)


def snapshot_voters(c: LocalCluster, node_id: int) -> list[tuple[int, int, dict[int, str | None]]]:
    """(end offset, kraft.version, voter id -> directory id) of each snapshot file of a running node (not the
    bootstrap checkpoint); a file renamed or deleted while being read is left out."""
    out = []
    for path in sorted((c.data_dir(node_id) / "__cluster_metadata-0").glob("*.checkpoint")):
        parsed = parse_snapshot_filename(path.name)
        if parsed is None or parsed[0] == BOOTSTRAP_SNAPSHOT_ID:
            continue
        try:
            snap = decode_snapshot(path, path.read_bytes(), parsed[0])
        except (OSError, StorageError):
            continue
        keys = {n.key.id: n.key.directory_id for n in snap.voters.nodes} if snap.voters is not None else {}
        out.append((parsed[0].end_offset, snap.kraft_version, keys))
    return out


def voters_records_in_log(log_dir: LogDir) -> int:
    """How many VotersRecords the log holds from its start offset on."""
    return sum(1 for batch in log_dir.read_all() if batch.is_control for rec in batch.records
               if decode_control(rec)[0] == ControlType.KRAFT_VOTERS)


def test_voter_set_survives_log_cleaning_in_snapshots_and_restarts(tmp_path: Path) -> None:
    """Snapshots carry the voter set (KIP-853: the header batch's KRaftVersionRecord and VotersRecord, Kafka's
    KafkaRaftClient.createSnapshot with voterSetAtOffset); joiners that fetch the leader's snapshot (its log was
    cleaned before they started) and nodes restarted from a cleaned log know the voters from it."""
    settings = {**SETTINGS, "metadata.log.max.record.bytes.between.snapshots": 16384,
                "metadata.log.segment.bytes": 4096, "metadata.max.retention.bytes": 0,
                "metadata.max.retention.ms": -1}
    c = LocalCluster(tmp_path / "cluster", voters=3, base_port=free_base_port(3), settings=settings,
                     quorum="dynamic", extra_args=["--throughput", "200", "--record-size", "100"])
    c.prepare()
    try:
        # The leader snapshots and cleans its log before the joiners start: they begin from its snapshot.
        grow_to_three(c, joiners_after_offset=400)
        keys = {i: c.directory_id(i) for i in (1, 2, 3)}

        def three_voters_everywhere() -> bool:
            snaps = {i: snapshot_voters(c, i) for i in (1, 2, 3)}
            return all(s and all(kv == 1 and v == keys for _, kv, v in s) for s in snaps.values())

        deadline = time.monotonic() + WAIT_S
        while not three_voters_everywhere():
            assert time.monotonic() < deadline, {i: snapshot_voters(c, i) for i in (1, 2, 3)}
            time.sleep(0.2)
        before = run(c.wait_for_leader(WAIT_S))
        for i in (1, 2, 3):
            c.kill(i, signal.SIGKILL)
        only_in_snapshot = []
        for i in (1, 2, 3):
            with LogDir.open(c.data_dir(i)) as d:
                start = d.start_snapshot_id
                assert start is not None and d.start_offset > 0, f"node {i}: the log was never cleaned"
                snap = d.snapshots.read(start)
                assert snap.kraft_version == 1
                assert snap.voters is not None and {n.key.id: n.key.directory_id for n in snap.voters.nodes} == keys
                if voters_records_in_log(d) == 0:
                    only_in_snapshot.append(i)
        assert only_in_snapshot, "every node still holds a VotersRecord in its log: the snapshots were not needed"
        c.start_all()
        info = wait_for(c, "three voters again after the restart", lambda i: voter_keys(i) == keys
                        and i.high_watermark > before.high_watermark)
        # Nodes 2 and 3 know they are voters from the snapshot alone (they have no bootstrap checkpoint): without
        # node 1 they elect a leader and commit.
        c.kill(1, signal.SIGKILL)
        commits_after(c, info, {2, 3}, new_leader=info.leader_id == 1)
    finally:
        c.stop_all(signal.SIGKILL)
