"""Running a node process: signals, and the optional steady write workload (like Kafka's TestRaftServer).

The workload offers ``throughput`` records/s of ``record_size`` bytes on whichever node is leader, as
one write every millisecond (or one single-record write every ``1/throughput`` s below 1,000 records/s).
The leader's ``controller.quorum.append.linger.ms`` decides how those writes become batches. Or, closed
loop, it writes one record at a time, each as soon as the last one committed: commit latency with no
queueing and no idle time between writes, the way an echo benchmark measures a round trip. It reports
committed throughput and commit latency (write on the leader → high watermark past it) percentiles,
counted from the node's leadership or from the last SIGUSR1 (so that a benchmark leaves its warm-up out).

The node bounds what it holds uncommitted (``Node.max_uncommitted_records``): a write offered past that is
refused with REQUEST_TIMED_OUT (``node.WriteRefused``) and counted, not queued, so an over-offered leader runs at
capacity with a bounded queue. The report also says what the tails are made of, measured in the same process:
the garbage collector's pauses (``gc.callbacks``), and how late the workload's own 1 ms timer fired (event-loop
lag: whatever held the loop — a disk write, a snapshot, a collection, or the CPU given to another process).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kraft_tck.reference.config import NodeConfig
from kraft_tck.reference.histogram import LatencyHistogram
from kraft_tck.reference.net import install_log_escaping
from kraft_tck.reference.node import Node, NodeHalted, StartupError, WriteLost, WriteRefused

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
#: A write timer firing this late (ms) is counted and classified (``WorkloadStats.late_on_cpu``).
LATE_MS = 5.0
# Backpressure is the node's (``Node.max_uncommitted_records``: a write past it is refused at once). This only
# bounds the workload's own tasks should the node take writes faster than they end: a write per millisecond for
# 4 s.
MAX_INFLIGHT_WRITES = 4096
#: The collector's settings for a node process (``tune_gc``); ``KRAFT_TCK_GC=python`` keeps Python's own
#: (700, 10, 10), for a side-by-side comparison (bench/bench_cluster.py).
#: A young generation of 5,000 objects: each collection pauses the loop for about 0.5-1 ms of CPU, where 50,000
#: took 8-13 ms (the workload's report), as long as a commit's tail at 1,000 writes/s (a pause delays every write
#: arriving during it). A full collection still needs 5,000 x 20 x 1,000 = 100 million allocations, as with the
#: former (50,000, 20, 100).
GC_THRESHOLDS = (5_000, 20, 1_000)
#: A node that is not the leader waits to become one (``Node.wait_leading``: woken by the step that makes it leader),
#: at most this long at a time: each wait that runs out times the loop's lag (``_timed_wait_leading``).
LEADERSHIP_WAIT_S = 0.1
#: How early the event loop may fire a timer (its clock's resolution; asyncio's is at most 1 ms).
TIMER_RESOLUTION_S = 0.001
#: How long the closed loop pauses after a write the node did not take (never spin the loop).
REFUSED_PAUSE_S = 0.01


@dataclass
class WorkloadStats:
    committed_records: int = 0
    lost_writes: int = 0  # accepted, then truncated by a leader change before committing
    refused_writes: int = 0  # refused by the leader's bound on uncommitted records (REQUEST_TIMED_OUT)
    latencies: LatencyHistogram = field(default_factory=LatencyHistogram)  # bounded, however long the run
    # How much later than asked each of the workload's timed waits ended (the leader's 1 ms write timer, a
    # follower's leadership poll): the event loop's lag (not measured by the closed-loop workload).
    timer_lag: LatencyHistogram = field(default_factory=LatencyHistogram)
    # Timer firings later than LATE_MS, split by where the time went: this process ran for most of it (its own
    # work: a step, a collection, a disk write) or it did not (the CPU went to another process, or a system call
    # blocked), by the process's CPU clock over the same interval.
    late_on_cpu: int = 0
    late_off_cpu: int = 0
    late_on_cpu_max_ms: float = 0.0  # the longest of the on-CPU ones
    gc: GcPauses = field(default_factory=lambda: GcPauses())
    leader_since: float | None = None

    def reset(self) -> None:
        """Count afresh from now (SIGUSR1); a write in flight is counted when it commits."""
        self.committed_records = self.lost_writes = self.refused_writes = self.late_on_cpu = self.late_off_cpu = 0
        self.late_on_cpu_max_ms = 0.0
        self.latencies = LatencyHistogram()
        self.timer_lag = LatencyHistogram()
        self.gc.reset()
        if self.leader_since is not None:
            self.leader_since = time.monotonic()

    def report(self) -> str:
        elapsed = max(1e-9, time.monotonic() - (self.leader_since or time.monotonic()))
        lat = self.latencies
        ps = " ".join(f"p{q:g}={lat.percentile(q):.3f}ms" for q in (50, 75, 99, 99.9))
        lag = self.timer_lag
        lags = " ".join(f"p{q:g}={lag.percentile(q):.3f}ms" for q in (50, 99, 99.9)) if lag.count else "n/a"
        return (f"committed {self.committed_records} records in {elapsed:.1f}s "
                f"({self.committed_records / elapsed:,.0f} records/s); commit latency {ps} over {lat.count} writes; "
                f"{self.lost_writes} writes lost to leader changes; {self.refused_writes} writes refused "
                f"(REQUEST_TIMED_OUT); {self.gc.report()}; timer lag {lags}, {self.late_on_cpu + self.late_off_cpu} "
                f"over {LATE_MS:g}ms ({self.late_on_cpu} on CPU, {self.late_off_cpu} off CPU; the longest on CPU "
                f"{self.late_on_cpu_max_ms:.1f}ms)")


class GcPauses:
    """The garbage collector's pauses in this process, timed by ``gc.callbacks`` (installed by ``start``)."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]  # collections by generation
        self.pauses = LatencyHistogram()
        self.longest_ms = 0.0
        self.longest_cpu_ms = 0.0  # of which this process ran (the rest: the CPU went elsewhere meanwhile)
        self.longest_generation = -1
        self._started = self._started_cpu = 0.0

    def reset(self) -> None:
        self.counts = [0, 0, 0]
        self.pauses = LatencyHistogram()
        self.longest_ms, self.longest_cpu_ms, self.longest_generation = 0.0, 0.0, -1

    def start(self) -> None:
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def stop(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started, self._started_cpu = time.perf_counter(), time.process_time()
            return
        ms = (time.perf_counter() - self._started) * 1000
        cpu_ms = (time.process_time() - self._started_cpu) * 1000
        generation = info.get("generation", 0)
        self.counts[min(2, max(0, generation))] += 1
        self.pauses.record(ms)
        if ms > self.longest_ms:
            self.longest_ms, self.longest_cpu_ms, self.longest_generation = ms, cpu_ms, generation

    def report(self) -> str:
        total = sum(self.counts)
        if not total:
            return "gc 0 collections"
        return (f"gc {total} collections (gen0 {self.counts[0]}, gen1 {self.counts[1]}, gen2 {self.counts[2]}), "
                f"pause p99={self.pauses.percentile(99):.3f}ms max={self.longest_ms:.3f}ms "
                f"(gen{self.longest_generation}, {self.longest_cpu_ms:.3f}ms on CPU)")


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
        except WriteRefused:
            stats.refused_writes += 1  # the leader's queue is full: offered load past its capacity
            return True
        except NodeHalted:
            return False  # the process is stopping (run_node reports why)
        if result.accepted:
            stats.latencies.record((time.perf_counter() - t0) * 1000)
            stats.committed_records += per_write
        return result.accepted

    next_at = time.monotonic()
    while not stop.is_set():
        leading = node.is_leader
        if leading and stats.leader_since is None:
            stats.leader_since = time.monotonic()  # throughput counts from leadership, not process start
        if not leading:
            # A follower only waits to lead, woken by the step that makes it leader: a polling timer cost each
            # follower a wake-up every 10 ms (about 5 µs of its CPU per commit at 1,000 writes/s, on the CPU the
            # followers share). Waits that run out are timed: a follower's stalls are in commit latency.
            await _timed_wait_leading(node, LEADERSHIP_WAIT_S, stats)
            next_at = time.monotonic()
            continue
        if closed_loop:
            if not await one_write():
                await asyncio.sleep(REFUSED_PAUSE_S)  # refused without awaiting: never spin the loop
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
        await _timed_sleep(max(0.0, next_at - time.monotonic()), stats)
    for task in inflight:
        task.cancel()


async def _timed_sleep(wait_s: float, stats: WorkloadStats) -> None:
    """Sleep ``wait_s``; record how much later than that the loop woke us, and whether this process had the
    CPU meanwhile (``WorkloadStats.late_on_cpu``)."""
    slept_at, cpu_at = time.monotonic(), time.process_time()
    await asyncio.sleep(wait_s)
    _record_lag(stats, slept_at, cpu_at, wait_s)


async def _timed_wait_leading(node: Node, wait_s: float, stats: WorkloadStats) -> None:
    """Wait until ``node`` leads, at most ``wait_s``; a wait that ran out is timed as ``_timed_sleep``'s are."""
    slept_at, cpu_at = time.monotonic(), time.process_time()
    # False also when the node stopped first: only a wait that ran its time is a timer's firing.
    if not await node.wait_leading(wait_s) and time.monotonic() - slept_at >= wait_s - TIMER_RESOLUTION_S:
        _record_lag(stats, slept_at, cpu_at, wait_s)


def _record_lag(stats: WorkloadStats, slept_at: float, cpu_at: float, wait_s: float) -> None:
    """A timer of ``wait_s`` set at ``slept_at`` (``cpu_at``: the process's CPU time then) has just fired."""
    woke = time.monotonic()
    lag_ms = (woke - slept_at - wait_s) * 1000  # this wait's overshoot, not a schedule's backlog
    stats.timer_lag.record(lag_ms)
    if lag_ms > LATE_MS:
        if time.process_time() - cpu_at > (woke - slept_at) / 2:
            stats.late_on_cpu += 1
            stats.late_on_cpu_max_ms = max(stats.late_on_cpu_max_ms, lag_ms)
        else:
            stats.late_off_cpu += 1


def tune_gc() -> str:
    """Set the collector up for a long-running node; returns what was done, for the log.

    Measured (the workload's report: ``gc.callbacks`` pause times): with Python's thresholds an over-offered
    leader collected generation 2 every few seconds, each pass walking every object the log cache and the
    codec hold, and those pauses were its longest event-loop stalls. ``gc.freeze()`` moves what start-up made
    (modules, the codec's compiled plans, the registry) out of every later collection, and a high last threshold
    makes full collections rare; nearly all of the node's garbage is freed by reference counts, not by the
    collector. The young generation stays small (``GC_THRESHOLDS``): a collection's pause grows with it, and at
    1,000 writes/s a 50,000-object one (8-12 ms) was the commit tail's own share."""
    if os.environ.get("KRAFT_TCK_GC", "") == "python":
        return "gc: Python's defaults"
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    return f"gc: start-up objects frozen ({gc.get_freeze_count()}), thresholds {GC_THRESHOLDS}"


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
    log.info("node %d runs on %s; %s", cfg.node_id, type(loop).__module__ + "." + type(loop).__name__, tune_gc())
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # A node that halts (a failed log directory, a safety violation) ends the process, naming why.
    halted = asyncio.ensure_future(node.halted.wait())
    halted.add_done_callback(lambda _: stop.set())
    stats = WorkloadStats()
    stats.gc.start()
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
            if closed_loop or not node.is_leader:
                # Closed loop: its one write may wait for a commit that never comes (no quorum left). A follower's
                # workload only waits to lead (up to ``LEADERSHIP_WAIT_S``): nothing of it to finish.
                workload.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await workload
            print(stats.report(), flush=True)
        stats.gc.stop()
        halted.cancel()
        await node.stop(graceful=node.failure is None)
    if node.failure is not None:
        raise SystemExit(f"kraft-tck node: node {cfg.node_id} halted: {node.halt_reason}: {node.failure}")
