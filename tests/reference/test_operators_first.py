"""Operators first: a leader written to faster than it can commit keeps a bounded queue, refuses the excess with
Kafka's error, and still answers DescribeQuorum and ApiVersions.

Kafka's controller takes a write it cannot run before its deadline no further: KafkaEventQueue fails the event
with TimeoutException, which ``Errors.forException`` answers as REQUEST_TIMED_OUT (ControllerApis gives each
controller request its deadline, e.g. a BrokerHeartbeat broker.heartbeat.interval.ms / 2). The reference node
refuses at once, at a bound on the records it holds uncommitted (``Node.max_uncommitted_records``), with the same
error. Latency figures are the benchmark's (bench/bench_cluster.py, the saturation row), not asserted here."""

from __future__ import annotations

import asyncio
import gc
import itertools
import re
import signal
from pathlib import Path

import pytest
from kraft_tck.reference.broker_client import BrokerClient
from kraft_tck.reference.net import KafkaClient
from kraft_tck.reference.node import MAX_UNCOMMITTED_RECORDS, Node, WriteRefused
from kraft_tck.reference.procs import LocalCluster, free_base_port
from kraft_tck.reference.workload import GcPauses
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors

from .inprocess_cluster import leader_of, started_nodes

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

SETTINGS = {
    "controller.quorum.election.timeout.ms": 300,
    "controller.quorum.fetch.timeout.ms": 2000,
    "controller.quorum.election.backoff.max.ms": 200,
    "controller.quorum.request.timeout.ms": 500,
    "controller.quorum.fetch.max.wait.ms": 100,
    "controller.quorum.append.linger.ms": 0,
}
REFUSED = re.compile(r"(\d+) writes refused \(REQUEST_TIMED_OUT\)")



def test_a_leader_refuses_writes_past_its_bound_with_request_timed_out(tmp_path: Path) -> None:
    """Writes issued faster than the followers can fetch (in one event-loop round, so none can commit) are appended
    up to the bound; the next is refused with REQUEST_TIMED_OUT and nothing is appended for it; once the followers
    have fetched, writes are taken again."""
    bound = 50

    async def main() -> None:
        _cluster, nodes = await started_nodes(tmp_path / "c", SETTINGS)
        try:
            leader = await leader_of(nodes)
            assert leader.max_uncommitted_records == MAX_UNCOMMITTED_RECORDS  # the default
            leader.max_uncommitted_records = bound
            log_ = leader.metadata_log
            assert log_ is not None
            # No write below suspends (wait_commit=False): the loop never runs between them, so nothing commits.
            hw = leader.high_watermark
            accepted = 0
            with pytest.raises(WriteRefused) as refused:
                for _ in range(bound + 5):
                    assert (await leader.write([b"x" * 10], wait_commit=False)).accepted
                    accepted += 1
            assert refused.value.error == Errors.REQUEST_TIMED_OUT
            assert "REQUEST_TIMED_OUT" in str(refused.value)
            assert leader.high_watermark == hw, "a write committed between the writes: the test proves nothing"
            assert log_.end_offset - hw <= bound, "more records uncommitted than the bound"
            assert accepted >= bound - 1 and leader.writes_refused == 1
            end = log_.end_offset
            with pytest.raises(WriteRefused):
                await leader.write([b"y"], wait_commit=False)
            assert log_.end_offset == end, "a refused write was appended"
            # The followers fetch, the high watermark passes the queue, and writes are taken again.
            result = await asyncio.wait_for(_write_when_taken(leader), 20)
            assert result >= end
        finally:
            for n in nodes:
                await n.stop(graceful=True, grace_s=0.2)

    asyncio.run(main())


async def _write_when_taken(node: Node) -> int:
    while True:
        try:
            result = await node.write([b"z"])
        except WriteRefused:
            await asyncio.sleep(0.01)
            continue
        assert result.accepted
        return result.last_offset


def test_operators_are_answered_while_the_leader_is_flooded(tmp_path: Path) -> None:
    """Real node processes, the leader offered 200,000 records/s (several times what it commits here): every
    DescribeQuorum and ApiVersions sent to it meanwhile is answered, without an error, its high watermark never
    going back; a broker's BrokerRegistration and BrokerHeartbeats are answered NONE; the leader's uncommitted
    tail (its LogEndOffset in DescribeQuorum less the high watermark) stays within the bound; and the report
    shows the excess was refused, not queued."""
    per_write = 200  # 200,000 records/s offered as one write of 200 records a millisecond (reference/workload.py)
    c = LocalCluster(tmp_path / "flood", voters=3, base_port=free_base_port(3), settings=SETTINGS,
                     extra_args=["--throughput", str(per_write * 1000), "--record-size", "100", "--no-fsync"])
    c.prepare()
    c.start_all()
    leader_id = -1
    try:
        info = asyncio.run(c.wait_for_leader(30, min_hw=2))
        leader_id = info.leader_id
        asyncio.run(asyncio.sleep(1.0))  # the flood is on
        # A generous per-request timeout (this machine may be shared by other work): the assertion is that
        # every request is answered, in order and without an error; how fast is the benchmark's figure.
        answered = asyncio.run(_poll(c, leader_id, polls=20, timeout_s=10.0))
        leader_id = answered[-1][1]
        # The broker RPCs too: their records are not client writes and are never refused, and they wait behind at
        # most the bounded queue (Kafka's controller answers a write once the log commits it).
        broker_answers = asyncio.run(_broker_rpcs(c))
        c.kill(leader_id, signal.SIGTERM)
    finally:
        c.stop_all(signal.SIGTERM)
    assert len(answered) == 20
    assert broker_answers == [Errors.NONE] * 4, broker_answers
    # In order: epochs never go back, nor the high watermark within an epoch (an overloaded machine may see
    # a leader change; an answer from the new leader is still an answer).
    assert [e for e, *_ in answered] == sorted(e for e, *_ in answered), answered
    for (e1, _, hw1, _), (e2, _, hw2, _) in itertools.pairwise(answered):
        assert e1 != e2 or hw1 <= hw2, f"the high watermark went back in epoch {e1}: {answered}"
    assert answered[-1][2] > answered[0][2], f"nothing committed during the polls: {answered}"
    tails = [tail for _, _, hw, tail in answered if hw >= 0]  # a new leader's HW is unknown (-1) at first
    # The tail may pass the bound by one write (one is always taken when nothing waits) and the batch it lingers in.
    assert max(tails) <= MAX_UNCOMMITTED_RECORDS + 2 * per_write, f"uncommitted tails {tails}"
    # Each node's report counts the writes it refused while it led (the leader may have changed under load).
    refused = [int(m.group(1)) for i in range(1, 4)
               for m in REFUSED.finditer((c.node_dir(i) / "node.log").read_text(encoding="utf-8"))]
    assert refused and max(refused) > 0, "no leader ever refused a write: the flood did not exceed its capacity"


async def _broker_rpcs(c: LocalCluster) -> list[Errors]:
    """A broker registers and heartbeats three times (to whichever node leads): the answers' errors."""
    broker = BrokerClient(100, c.cluster_id, [("127.0.0.1", c.port(i)) for i in range(1, c.voters + 1)],
                          request_timeout_ms=10_000, fetch_metadata=False)
    errors = [(await broker.register()).error]
    for _ in range(3):
        errors.append((await broker.heartbeat()).error)
        await asyncio.sleep(0.1)
    return errors


async def _poll(c: LocalCluster, leader_id: int, polls: int, timeout_s: float) -> list[tuple[int, int, int, int]]:
    """``polls`` rounds of ApiVersions (a new connection) and DescribeQuorum to the leader (the others asked only
    when it says it no longer leads): (epoch, leader, HW, the leader's uncommitted tail) of each answer."""
    out = []
    for _ in range(polls):
        client = KafkaClient("127.0.0.1", c.port(leader_id), client_id="operator")
        await client.connect(timeout_s, negotiate=False)
        try:
            body = await client.request(codec.API_VERSIONS_KEY, 3, {"ClientSoftwareName": "operator",
                                                                    "ClientSoftwareVersion": "1"}, timeout_s)
            assert body["ErrorCode"] == Errors.NONE, body
        finally:
            await client.close()
        q = await c.describe([leader_id, *(i for i in c.alive() if i != leader_id)], timeout_s)
        assert q is not None, "DescribeQuorum unanswered by every node"
        leader_id = q.leader_id
        leader_row = next(r for r in q.voters if r.replica_id == q.leader_id)
        out.append((q.leader_epoch, q.leader_id, q.high_watermark, leader_row.log_end_offset - q.high_watermark))
        await asyncio.sleep(0.1)
    return out


def test_the_workload_report_times_the_collectors_pauses() -> None:
    """The report's GC figures come from gc.callbacks: a full collection is counted as generation 2 and timed."""
    pauses = GcPauses()
    pauses.start()
    try:
        gc.collect()
    finally:
        pauses.stop()
    assert pauses.counts[2] >= 1 and pauses.longest_ms > 0 and pauses.longest_generation in (0, 1, 2)
    assert "gen2 " in pauses.report() and "max=" in pauses.report()
    gc.collect()  # stopped: no longer counted
    assert sum(pauses.counts) == pauses.pauses.count
