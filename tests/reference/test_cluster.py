"""Real processes, real sockets, real files: the reference node as a 3-voter cluster (KIP-595).

Every node is an OS process; kill -9 is a real crash. Checks read the data directories and the traces
each incarnation wrote, never the nodes' memory.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.storage import LogDir
from kraft_tck.spec.records import batch_digest
from kraft_tck.spec.trace import read_trace
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_merge import merge_node_traces
from kraft_tck.tla.trace_validate import validate_trace

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

ELECTION_MS, FETCH_MS, BACKOFF_MS = 300, 600, 200
SETTINGS = {
    "controller.quorum.election.timeout.ms": ELECTION_MS,
    "controller.quorum.fetch.timeout.ms": FETCH_MS,
    "controller.quorum.election.backoff.max.ms": BACKOFF_MS,
    "controller.quorum.request.timeout.ms": 500,
    "controller.quorum.fetch.max.wait.ms": 100,
}
# A new leader needs: followers notice the silence (fetch timeout), one election timeout with jitter,
# possibly one lost round (backoff + another election). Slack covers process scheduling on 2 cores.
FAILOVER_BOUND_S = (FETCH_MS + 2 * ELECTION_MS + BACKOFF_MS) / 1000 + 2.0
# Liveness is not what the crash-safety test checks (the failover test bounds it). On an oversubscribed
# 2-core machine, kill -9 rounds under the write workload can cost many election rounds, so its waits for a
# leader are generous.
LEADER_WAIT_S = 45


@pytest.fixture
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    settings = {**SETTINGS, **getattr(request, "param", {})}  # a test's own settings, if parametrized
    c = LocalCluster(tmp_path / "cluster", voters=3, base_port=free_base_port(3), settings=settings,
                     trace=True, extra_args=["--throughput", "400", "--record-size", "100"])
    c.prepare()
    yield c
    c.stop_all(signal.SIGKILL)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def disk_log(c: LocalCluster, node_id: int) -> list:  # type: ignore[type-arg]
    with LogDir.open(c.data_dir(node_id)) as d:
        return d.read_all()


def by_offset(batches: list) -> dict[int, tuple[int, int, str]]:  # type: ignore[type-arg]
    return {b.base_offset: (b.last_offset, b.partition_leader_epoch, batch_digest(b)) for b in batches}


def committed_prefix(batches: list, hw: int) -> list[tuple[int, int, int, str]]:  # type: ignore[type-arg]
    return [(b.base_offset, b.last_offset, b.partition_leader_epoch, batch_digest(b))
            for b in batches if b.last_offset < hw]


def trace_events(c: LocalCluster) -> list[dict]:  # type: ignore[type-arg]
    events = []
    for node_id in range(1, c.voters + 1):
        for path in c.trace_files(node_id):
            trace = read_trace(path)
            # A kill -9 may tear the last line; everything before it must be valid.
            assert all(b.line == trace.lines for b in trace.bad), f"{path}: invalid lines {trace.bad}"
            events.extend(trace.events)
    return events


def assert_election_safety_and_vote_once(events: list[dict]) -> None:  # type: ignore[type-arg]
    """KIP-595: at most one leader per epoch; a voter grants one vote per epoch, also across restarts."""
    leaders: dict[int, set[int]] = defaultdict(set)
    votes: dict[tuple[int, int], set[int]] = defaultdict(set)
    for e in events:
        st = e.get("state")
        if not st:
            continue
        if st["role"] == "Leader":
            leaders[st["epoch"]].add(e["node"])
        if st["votedId"] >= 0:
            votes[(e["node"], st["epoch"])].add(st["votedId"])
    assert {ep: ns for ep, ns in leaders.items() if len(ns) > 1} == {}, "two leaders in one epoch"
    assert {k: v for k, v in votes.items() if len(v) > 1} == {}, "two votes in one epoch"


def assert_traces_validate(c: LocalCluster) -> None:
    """The nodes' traces, every incarnation merged into one trace of the cluster, are a behaviour of
    tla/KRaft.tla (TLC). Killed incarnations end wherever kill -9 struck them."""
    why = tlc_unavailable_reason()
    if why is not None:
        pytest.skip(f"trace validation needs TLC: {why}")
    files = [p for node_id in range(1, c.voters + 1) for p in c.trace_files(node_id)]
    merged = merge_node_traces(files, c.base_dir / "merged-trace.ndjson")
    verdict = validate_trace(merged, timeout=600)
    assert verdict.status == "PASS", (verdict.reason, verdict.failed_event)
    assert verdict.events > 0


def test_three_nodes_elect_one_leader_and_commit_identical_records(cluster: LocalCluster) -> None:
    cluster.start_all()
    info = run(cluster.wait_for_leader(15, min_hw=200))
    assert info.leader_id in (1, 2, 3)
    assert {r.replica_id for r in info.voters} == {1, 2, 3}
    cluster.stop_all(signal.SIGTERM)
    logs = {i: disk_log(cluster, i) for i in (1, 2, 3)}
    prefixes = {i: committed_prefix(logs[i], info.high_watermark) for i in logs}
    assert prefixes[1] and prefixes[1] == prefixes[2] == prefixes[3]
    # The first batch of the leader's epoch is its LeaderChange control record (KIP-595 "Vote Response Handling").
    first_of_epoch = next(b for b in logs[info.leader_id] if b.partition_leader_epoch == info.leader_epoch)
    assert first_of_epoch.is_control
    assert_election_safety_and_vote_once(trace_events(cluster))
    assert_traces_validate(cluster)


def test_kill_leader_elects_a_new_leader_and_old_leader_rejoins_as_follower(cluster: LocalCluster) -> None:
    cluster.start_all()
    before = run(cluster.wait_for_leader(15, min_hw=50))
    old = before.leader_id
    cluster.kill(old, signal.SIGKILL)
    t0 = time.monotonic()
    after = run(cluster.wait_for_leader(FAILOVER_BOUND_S + 5, min_epoch=before.leader_epoch + 1, exclude=old))
    failover_s = time.monotonic() - t0
    assert after.leader_id != old and after.leader_epoch > before.leader_epoch
    assert failover_s < FAILOVER_BOUND_S, f"failover took {failover_s:.2f}s, bound {FAILOVER_BOUND_S:.2f}s"
    cluster.start(old)
    # The old leader must come back as a follower of the new epoch and catch up.
    caught_up = run(cluster.wait_caught_up(old, 20, after.high_watermark + 100))
    assert caught_up.leader_epoch >= after.leader_epoch
    cluster.stop_all(signal.SIGTERM)
    logs = {i: disk_log(cluster, i) for i in (1, 2, 3)}
    final_hw = min(max((b.last_offset + 1 for b in lg), default=0) for lg in logs.values())
    # After convergence every log holds the same records below the smallest log end: the old leader's
    # uncommitted tail (if it had one) was truncated (KIP-595 "Fetch Response Handling" 2).
    prefixes = {i: committed_prefix(logs[i], final_hw) for i in logs}
    assert prefixes[old] == prefixes[after.leader_id]
    assert_election_safety_and_vote_once(trace_events(cluster))
    old_roles = [e["state"]["role"] for e in trace_events(cluster)
                 if e["node"] == old and e.get("state") and e["state"]["epoch"] >= after.leader_epoch]
    assert "Follower" in old_roles and "Leader" not in old_roles[:1]
    assert_traces_validate(cluster)


def test_restarted_voter_keeps_its_epoch_and_vote(cluster: LocalCluster) -> None:
    cluster.start_all()
    info = run(cluster.wait_for_leader(15, min_hw=20))
    follower = next(i for i in (1, 2, 3) if i != info.leader_id)
    # Two voters suffice for a leader; make sure this one is up and following before crashing it.
    info = run(cluster.wait_caught_up(follower, 30, info.high_watermark))
    cluster.kill(follower, signal.SIGKILL)
    with LogDir.open(cluster.data_dir(follower)) as d:
        qs = d.read_quorum_state()
    assert qs is not None and qs.leader_epoch == info.leader_epoch
    cluster.start(follower)
    run(cluster.wait_caught_up(follower, 20, info.high_watermark + 50))
    cluster.stop_all(signal.SIGTERM)
    restart = next(e for e in read_trace(cluster.trace_files(follower)[-1]).events if e["event"] == "Restart")
    # KIP-595 "Persistence": epoch and vote survive the crash.
    assert restart["state"]["epoch"] == qs.leader_epoch
    assert restart["state"]["votedId"] == qs.voted_id
    assert_traces_validate(cluster)


@pytest.mark.slow
@pytest.mark.parametrize("cluster", [{}, {"reference.log.cache.bytes": 0}], indirect=True,
                         ids=["log held in memory", "log read back from the segment files"])
def test_crash_safety_under_random_kill_9(cluster: LocalCluster) -> None:
    """Kill -9 random nodes at random moments during a write workload, many rounds: no committed record is
    ever lost or changed, and no two leaders share an epoch. Run twice: with the default log cache (the
    whole log of this test stays in memory) and with none, where every node releases each batch once it
    is written and serves every Fetch, and rebuilds its log at restart, from its segment files."""
    rng = random.Random(20261121)
    cluster.start_all()
    run(cluster.wait_for_leader(15, min_hw=20))
    committed: dict[int, tuple[int, int, str]] = {}  # base offset -> (last offset, epoch, digest), as seen committed
    for _ in range(8):
        info = run(cluster.wait_for_leader(LEADER_WAIT_S))
        # Snapshot what is committed right now from a node that holds it.
        with LogDir.open(cluster.data_dir(info.leader_id)) as d:
            for base, entry in by_offset(d.read_all()).items():
                if entry[0] < info.high_watermark:
                    assert committed.setdefault(base, entry) == entry, f"committed batch at {base} changed"
        victim = rng.choice(cluster.alive())
        run(asyncio.sleep(rng.uniform(0.05, 0.6)))
        cluster.kill(victim, signal.SIGKILL)
        run(asyncio.sleep(rng.uniform(0.1, 0.8)))
        cluster.start(victim)
    target = max((e[0] for e in committed.values()), default=0) + 1
    final = run(cluster.wait_for_leader(LEADER_WAIT_S, min_hw=target))
    for node_id in (1, 2, 3):
        run(cluster.wait_caught_up(node_id, 20, final.high_watermark))
    cluster.stop_all(signal.SIGTERM)
    for node_id in (1, 2, 3):
        log = by_offset(disk_log(cluster, node_id))
        for base, entry in committed.items():
            if entry[0] < final.high_watermark:
                assert log.get(base) == entry, f"node {node_id}: committed batch at offset {base} lost or changed"
    assert_election_safety_and_vote_once(trace_events(cluster))
    assert_traces_validate(cluster)


def allowed_cpus(pid: int) -> dict[int, set[int]]:
    """Every thread of ``pid`` → the CPUs the kernel lets it run on."""
    return {int(t.name): os.sched_getaffinity(int(t.name)) for t in Path(f"/proc/{pid}/task").iterdir()}


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="pinning needs Linux (sched_setaffinity) and at least 2 CPUs allowed to this process")
def test_pin_places_every_thread_of_a_node_process_and_the_cluster_still_commits(cluster: LocalCluster) -> None:
    """bench_cluster's placements (the p50 goal's echo and cluster on the same CPUs) rest on this."""
    first, last = min(os.sched_getaffinity(0)), max(os.sched_getaffinity(0))
    cluster.start_all()
    info = run(cluster.wait_for_leader(15, min_hw=20))
    followers = [i for i in (1, 2, 3) if i != info.leader_id]
    cluster.pin(info.leader_id, {first})
    for i in followers:
        cluster.pin(i, {last})
    for i, want in [(info.leader_id, {first}), *((i, {last}) for i in followers)]:
        threads = allowed_cpus(cluster.procs[i].pid)
        assert len(threads) >= 1 and all(cpus == want for cpus in threads.values()), (i, threads)
    # Pinned, the quorum keeps its leader and goes on committing.
    after = run(cluster.wait_for_leader(15, min_hw=info.high_watermark + 200))
    assert (after.leader_id, after.leader_epoch) == (info.leader_id, info.leader_epoch)
