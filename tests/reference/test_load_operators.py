"""Operators first: a DescribeQuorum that reaches the leader during a flood of client writes is answered after at
most a slice of them, not after the whole flood.

The node hands the core at most ``APPEND_SLICE_WRITES`` client writes per event-loop turn; the rest wait in the
shell's append queue, in order, and the loop reads its sockets between slices. (Kafka keeps the two apart with
threads: the raft thread answers DescribeQuorum from its message queue, KafkaRaftClient.handle/poll and
handleDescribeQuorumRequest, while controller writes reach its BatchAccumulator from the controller thread.)
Counts and order are asserted, never a latency: the latency goal is the benchmark's (bench/bench_cluster.py, the
"operators first" table). Real sockets: three in-process nodes on loopback, the operator framed by
``net.KafkaClient``."""

from __future__ import annotations

import asyncio
import select
import time
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference import quorum_client
from kraft_tck.reference.net import KafkaClient
from kraft_tck.reference.node import APPEND_SLICE_WRITES

from .inprocess_cluster import leader_of, started_nodes

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(120)]

SETTINGS = {
    "controller.quorum.election.timeout.ms": 300,
    "controller.quorum.fetch.timeout.ms": 2000,
    "controller.quorum.election.backoff.max.ms": 200,
    "controller.quorum.request.timeout.ms": 500,
    "controller.quorum.fetch.max.wait.ms": 100,
    # Each write is appended in the step that takes it: the leader's LogEndOffset counts the writes taken.
    "controller.quorum.append.linger.ms": 0,
}
FLOOD = 20 * APPEND_SLICE_WRITES



def test_describe_quorum_waits_behind_one_slice_of_a_write_flood_not_the_flood(tmp_path: Path) -> None:
    """The operator's DescribeQuorum is on the leader's socket when a flood of single-record writes is issued (all
    in one event-loop turn, as many writers, or many brokers' requests read in one poll, would issue them). The
    answer's LogEndOffset for the leader says how many of the flood the core had taken when it answered: at most
    two slices (the turn's own and one drained), with most of the flood still queued; every write is then taken, in
    the order issued, and commits."""

    async def main() -> None:
        cluster, nodes = await started_nodes(tmp_path / "c", SETTINGS)
        operator: KafkaClient | None = None
        try:
            leader = await leader_of(nodes)
            leader.max_uncommitted_records = 10 * FLOOD  # the flood is not refused: this is about order, not bounds
            assert leader.metadata_log is not None
            operator = KafkaClient("127.0.0.1", cluster.port(leader.config.node_id), client_id="operator")
            await operator.connect()
            version = operator.best_version(quorum_client.DESCRIBE_QUORUM)
            base = leader.metadata_log.end_offset
            slices0 = leader.append_slices
            # The request is written to the socket first; the writers start in the next turn, before the loop polls
            # the socket: without slices, the whole flood is appended before the request is even read.
            answer = operator.send(quorum_client.DESCRIBE_QUORUM, version, quorum_client.request_body(), 30)
            writes = [asyncio.create_task(leader.write([b"w%d" % i], wait_commit=False)) for i in range(FLOOD)]
            body = await answer
            queued_when_answered = sum(not w.done() for w in writes)
            results = await asyncio.wait_for(asyncio.gather(*writes), 60)

            info = quorum_client.parse_response(body, version)
            assert info.leader_id == leader.config.node_id
            row = next(r for r in info.voters if r.replica_id == leader.config.node_id)
            taken = row.log_end_offset - base
            assert 0 <= taken <= 2 * APPEND_SLICE_WRITES, (
                f"DescribeQuorum was answered after {taken} of {FLOOD} flood writes were appended: it waited behind "
                f"more than a slice ({APPEND_SLICE_WRITES})")
            assert queued_when_answered >= FLOOD - 2 * APPEND_SLICE_WRITES, queued_when_answered
            # Every write taken, in the order issued (the queue is first in, first out), in several slices.
            assert all(r.accepted for r in results)
            assert [r.base_offset for r in results] == list(range(base, base + FLOOD))
            assert leader.append_slices - slices0 >= FLOOD // APPEND_SLICE_WRITES - 1
            # And it all commits (the queue only orders the writes; replication is unchanged).
            last = results[-1].last_offset
            deadline = time.monotonic() + 20
            while leader.high_watermark <= last:
                assert time.monotonic() < deadline, f"HW {leader.high_watermark} never passed {last}"
                await asyncio.sleep(0.01)
        finally:
            if operator is not None:
                await operator.close()
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(main())


def test_queued_writes_count_against_the_bound_and_fail_when_the_node_stops(tmp_path: Path) -> None:
    """Writes waiting in the append queue count as uncommitted: past ``max_uncommitted_records`` the next write is
    refused at once (REQUEST_TIMED_OUT), nothing appended for it. A node that stops fails the writes still queued
    (never appended) instead of leaving them waiting."""

    from kraft_tck.reference.node import WriteRefused
    from kraft_tck.spec.errors import Errors

    async def main() -> None:
        _cluster, nodes = await started_nodes(tmp_path / "c", SETTINGS)
        try:
            leader = await leader_of(nodes)
            bound = 4 * APPEND_SLICE_WRITES
            leader.max_uncommitted_records = bound
            assert leader.metadata_log is not None
            base = leader.metadata_log.end_offset
            # Issued in one turn: a slice is taken at once, the rest is queued, and queued records count.
            writes = [asyncio.create_task(leader.write([b"q"], wait_commit=False)) for _ in range(bound)]
            await asyncio.sleep(0)  # the writers run: one slice appended, the rest queued
            assert leader.metadata_log.end_offset - base <= APPEND_SLICE_WRITES
            with pytest.raises(WriteRefused) as refused:
                await leader.write([b"over"], wait_commit=False)
            assert refused.value.error == Errors.REQUEST_TIMED_OUT
            stopping = asyncio.create_task(leader.stop(graceful=False))
            outcomes = await asyncio.gather(*writes, return_exceptions=True)
            await stopping
            failed = [o for o in outcomes if isinstance(o, BaseException)]
            taken = [o for o in outcomes if not isinstance(o, BaseException)]
            assert failed, "no write was still queued when the node stopped"
            assert all(isinstance(o, RuntimeError) and "stopped" in str(o) for o in failed), failed
            assert leader.metadata_log.end_offset - base == len(taken) < bound
        finally:
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(main())



def test_describe_quorum_is_answered_before_the_disk_write_its_step_triggers(tmp_path: Path) -> None:
    """A DescribeQuorum read after the linger time has passed is the step that appends the linger's batch (the core
    handles the input, then fires its timers). Its answer describes the state before that batch, all of it on disk
    already, so the node writes it before the batch: when the batch reaches the log directory, the answer is
    already readable on the operator's socket (a real socket, looked at with select)."""
    settings = {**SETTINGS, "controller.quorum.append.linger.ms": 200}

    async def main() -> None:
        cluster, nodes = await started_nodes(tmp_path / "c", settings)
        operator: KafkaClient | None = None
        try:
            leader = await leader_of(nodes)
            storage, log_, server = leader.storage, leader.metadata_log, leader.server
            assert storage is not None and log_ is not None and server is not None
            operator = KafkaClient("127.0.0.1", cluster.port(leader.config.node_id), client_id="operator")
            await operator.connect()
            version = operator.best_version(quorum_client.DESCRIBE_QUORUM)
            sock = operator._transport.get_extra_info("socket") if operator._transport is not None else None
            assert sock is not None
            in_describe = [False]
            seen: list[bool] = []  # per append inside a DescribeQuorum's step: was its answer on the socket?
            handle, append = server._handler, storage.append

            def handle_spy(req: Any) -> Any:
                in_describe[0] = req.api_key == quorum_client.DESCRIBE_QUORUM
                try:
                    return handle(req)
                finally:
                    in_describe[0] = False

            def append_spy(*args: Any, **kwargs: Any) -> Any:
                if in_describe[0]:
                    seen.append(bool(select.select([sock], [], [], 0)[0]))
                return append(*args, **kwargs)

            server._handler = handle_spy
            storage.append = append_spy
            for _ in range(10):  # a follower's request read first in the same poll may append the batch: again
                end = log_.end_offset
                result = await leader.write([b"lingering"], wait_commit=False)
                assert result.accepted and log_.end_offset == end, "the write was not held back"
                answer = operator.send(quorum_client.DESCRIBE_QUORUM, version, quorum_client.request_body(), 30)
                time.sleep(0.3)  # the loop is held past the linger time: the tick that would append has not fired
                info = quorum_client.parse_response(await answer, version)
                if seen:
                    row = next(r for r in info.voters if r.replica_id == leader.config.node_id)
                    assert row.log_end_offset == end, "the answer describes the log after the batch"
                    break
            assert seen, "no DescribeQuorum step ever appended the linger's batch: the test proves nothing"
            assert all(seen), "the batch was written before the DescribeQuorum answer"
        finally:
            if operator is not None:
                await operator.close()
            for n in nodes:
                await n.stop(graceful=False)

    asyncio.run(main())
