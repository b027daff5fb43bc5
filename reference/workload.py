"""Running a node process: signals, and the optional steady write workload (like Kafka's TestRaftServer).

The workload writes ``throughput`` records/s of ``record_size`` bytes on whichever node is leader, in
one batch per ``controller.quorum.append.linger.ms``, and reports committed throughput and commit latency
(append on the leader → high watermark past the batch) percentiles.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from dataclasses import dataclass, field

from kraft_tck.reference.config import NodeConfig
from kraft_tck.reference.node import Node, StartupError, WriteLost

log = logging.getLogger("kraft_tck.reference.workload")


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (q in [0, 100])."""
    if not sorted_values:
        return float("nan")
    rank = max(0, min(len(sorted_values) - 1, round(q / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[rank]


MAX_INFLIGHT_BATCHES = 8


@dataclass
class WorkloadStats:
    committed_records: int = 0
    lost_batches: int = 0  # appended, then truncated by a leader change before committing
    latencies_ms: list[float] = field(default_factory=list)
    leader_since: float | None = None

    def report(self) -> str:
        elapsed = max(1e-9, time.monotonic() - (self.leader_since or time.monotonic()))
        lat = sorted(self.latencies_ms)
        ps = " ".join(f"p{q:g}={percentile(lat, q):.2f}ms" for q in (50, 75, 99, 99.9))
        return (f"committed {self.committed_records} records in {elapsed:.1f}s "
                f"({self.committed_records / elapsed:,.0f} records/s); commit latency {ps} over {len(lat)} batches; "
                f"{self.lost_batches} batches lost to leader changes")


async def write_workload(node: Node, throughput: int, record_size: int, stats: WorkloadStats,
                         stop: asyncio.Event) -> None:
    linger_s = max(0.001, node.config.append_linger_ms / 1000)
    per_batch = max(1, round(throughput * linger_s))
    payload = b"x" * record_size
    inflight: set[asyncio.Task[None]] = set()

    async def one_batch() -> None:
        t0 = time.perf_counter()
        try:
            result = await node.write([payload] * per_batch, wait_commit=True)
        except WriteLost:
            stats.lost_batches += 1
            return
        if result.accepted:
            stats.latencies_ms.append((time.perf_counter() - t0) * 1000)
            stats.committed_records += per_batch

    next_at = time.monotonic()
    while not stop.is_set():
        leading = node.core is not None and node.core.state_snapshot()["role"] == "Leader"
        if leading and stats.leader_since is None:
            stats.leader_since = time.monotonic()  # throughput counts from leadership, not process start
        # Backpressure: an over-offered leader should run at capacity, not drown in uncommitted batches.
        if leading and len(inflight) < MAX_INFLIGHT_BATCHES:
            task = asyncio.create_task(one_batch())
            inflight.add(task)
            task.add_done_callback(inflight.discard)
        next_at += linger_s
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    for task in inflight:
        task.cancel()


async def run_node(cfg: NodeConfig, *, trace_file: str | None, throughput: int, record_size: int,
                   fsync: bool = True) -> None:
    node = Node(cfg, trace_file=trace_file, fsync=fsync)
    try:
        await node.start()
    except StartupError as exc:
        raise SystemExit(f"kraft-tck node: {exc}") from exc
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stats = WorkloadStats()
    workload = None
    if throughput > 0:
        workload = asyncio.create_task(write_workload(node, throughput, record_size, stats, stop))
    reporter_every = 5.0
    try:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), reporter_every)
            if throughput > 0 and stats.latencies_ms:
                print(stats.report(), file=sys.stderr, flush=True)
    finally:
        if workload is not None:
            await workload
            print(stats.report(), flush=True)
        await node.stop(graceful=True)
