"""Running a node process: signals, and the optional steady write workload (like Kafka's TestRaftServer).

The workload offers ``throughput`` records/s of ``record_size`` bytes on whichever node is leader, as
one write every millisecond (or one single-record write every ``1/throughput`` s below 1,000 records/s).
The leader's ``controller.quorum.append.linger.ms`` decides how those writes become batches. Or, closed
loop, it writes one record at a time, each as soon as the last one committed: commit latency with no
queueing and no idle time between writes, the way an echo benchmark measures a round trip. It reports
committed throughput and commit latency (write on the leader → high watermark past it) percentiles,
counted from the node's leadership or from the last SIGUSR1 (so that a benchmark leaves its warm-up out).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kraft_tck.reference.config import NodeConfig
from kraft_tck.reference.histogram import LatencyHistogram
from kraft_tck.reference.net import install_log_escaping
from kraft_tck.reference.node import Node, NodeHalted, StartupError, WriteLost

log = logging.getLogger("kraft_tck.reference.workload")

#: ``--event-loop`` choices: uvloop when it is installed, or the one named.
EVENT_LOOPS = ("auto", "uvloop", "asyncio")


def loop_factory(event_loop: str = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event loop a node process runs on (None: asyncio's default). uvloop, when installed, runs the
    same code with libuv's loop and transports in C: each message's event-loop work costs less, and a
    commit crosses four messages. Plain asyncio is the fallback and what in-process tests use."""
    if event_loop not in EVENT_LOOPS:
        raise ValueError(f"event loop {event_loop!r}: expected one of {', '.join(EVENT_LOOPS)}")
    if event_loop == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if event_loop == "uvloop":
            raise RuntimeError("--event-loop uvloop: uvloop is not installed (pip install uvloop), "
                               "or run with --event-loop asyncio") from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (q in [0, 100])."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[rank]


WRITE_INTERVAL_S = 0.001
# Backpressure: an over-offered leader should run at capacity, not drown in uncommitted writes. At one
# write per millisecond this covers Kafka's 25 ms linger plus a commit of a few tens of ms, and bounds
# the queue (and so the latency) of an overloaded leader to about that.
MAX_INFLIGHT_WRITES = 64
#: How often a node that is not the leader looks whether it has become one.
LEADERSHIP_POLL_S = 0.01


@dataclass
class WorkloadStats:
    committed_records: int = 0
    lost_writes: int = 0  # accepted, then truncated by a leader change before committing
    latencies: LatencyHistogram = field(default_factory=LatencyHistogram)  # bounded, however long the run
    leader_since: float | None = None

    def reset(self) -> None:
        """Count afresh from now (SIGUSR1); a write in flight is counted when it commits."""
        self.committed_records = self.lost_writes = 0
        self.latencies = LatencyHistogram()
        if self.leader_since is not None:
            self.leader_since = time.monotonic()

    def report(self) -> str:
        elapsed = max(1e-9, time.monotonic() - (self.leader_since or time.monotonic()))
        lat = self.latencies
        ps = " ".join(f"p{q:g}={lat.percentile(q):.3f}ms" for q in (50, 75, 99, 99.9))
        return (f"committed {self.committed_records} records in {elapsed:.1f}s "
                f"({self.committed_records / elapsed:,.0f} records/s); commit latency {ps} over {lat.count} writes; "
                f"{self.lost_writes} writes lost to leader changes")


async def write_workload(node: Node, throughput: int, record_size: int, stats: WorkloadStats,
                         stop: asyncio.Event, closed_loop: bool = False) -> None:
    """Offer ``throughput`` records/s; with ``closed_loop`` one record at a time instead (throughput unused)."""
    per_write = 1 if closed_loop else max(1, round(throughput * WRITE_INTERVAL_S))
    interval_s = 0.0 if closed_loop else per_write / throughput
    payload = b"x" * record_size
    inflight: set[asyncio.Task[bool]] = set()

    async def one_write() -> bool:
        """One write, waited for until committed; False if the node refused it (not the leader)."""
        t0 = time.perf_counter()
        try:
            result = await node.write([payload] * per_write, wait_commit=True)
        except WriteLost:
            stats.lost_writes += 1
            return True
        except NodeHalted:
            return False  # the process is stopping (run_node reports why)
        if result.accepted:
            stats.latencies.record((time.perf_counter() - t0) * 1000)
            stats.committed_records += per_write
        return result.accepted

    next_at = time.monotonic()
    while not stop.is_set():
        leading = node.core is not None and node.core.status().is_leader
        if leading and stats.leader_since is None:
            stats.leader_since = time.monotonic()  # throughput counts from leadership, not process start
        if not leading:
            # A follower only waits to lead: waking every write interval would cost it CPU (and the leader,
            # on a small machine) for nothing.
            await asyncio.sleep(LEADERSHIP_POLL_S)
            next_at = time.monotonic()
            continue
        if closed_loop:
            if not await one_write():
                await asyncio.sleep(LEADERSHIP_POLL_S)  # refused without awaiting: never spin the loop
            else:
                # The only voter commits a write in the step that appends it, so awaiting it never
                # suspends: yield once per write, or the loop would serve nothing else (SIGTERM included).
                await asyncio.sleep(0)
            continue
        if len(inflight) < MAX_INFLIGHT_WRITES:
            task = asyncio.create_task(one_write())
            inflight.add(task)
            task.add_done_callback(inflight.discard)
        next_at += interval_s
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    for task in inflight:
        task.cancel()


async def run_node(cfg: NodeConfig, *, trace_file: str | None, throughput: int, record_size: int,
                   fsync: bool = True, closed_loop: bool = False) -> None:
    # Peers choose some of what is logged (topic names, client ids): escape control characters so that
    # none can forge a log line.
    install_log_escaping()
    node = Node(cfg, trace_file=trace_file, fsync=fsync)
    try:
        await node.start()
    except StartupError as exc:
        raise SystemExit(f"kraft-tck node: {exc}") from exc
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    log.info("node %d runs on %s", cfg.node_id, type(loop).__module__ + "." + type(loop).__name__)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # A node that halts (a failed log directory, a safety violation) ends the process, naming why.
    halted = asyncio.ensure_future(node.halted.wait())
    halted.add_done_callback(lambda _: stop.set())
    stats = WorkloadStats()
    loop.add_signal_handler(signal.SIGUSR1, stats.reset)
    workload = None
    writing = throughput > 0 or closed_loop
    if writing:
        workload = asyncio.create_task(write_workload(node, throughput, record_size, stats, stop, closed_loop))
    reporter_every = 5.0
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), reporter_every)
            if writing and stats.latencies.count:
                print(stats.report(), file=sys.stderr, flush=True)
    finally:
        if workload is not None:
            if closed_loop:
                workload.cancel()  # its one write may wait for a commit that never comes (no quorum left)
            with contextlib.suppress(asyncio.CancelledError):
                await workload
            print(stats.report(), flush=True)
        halted.cancel()
        await node.stop(graceful=node.failure is None)
    if node.failure is not None:
        raise SystemExit(f"kraft-tck node: node {cfg.node_id} halted: {node.halt_reason}: {node.failure}")
