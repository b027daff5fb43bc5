"""Commit latency, throughput, failover and per-batch costs of a 3-node reference cluster on loopback.

Everything is measured in one run and printed side by side with its floor, a plain asyncio echo round
trip over loopback TCP with Fetch-sized frames:

* **echo floor** — in one event loop (the floor for the in-process cluster) and to a child process (the
  floor for the process cluster), one round trip at a time;
* **paired rounds** — the p50 goal's figures: each round measures the one-at-a-time commit latency of a
  new process cluster, bracketed by the echo to a new child process right before and right after it (the
  round's floor is the p50 of both halves' round trips); the goal is judged on the median of the rounds'
  ratios. This machine's speed drifts between runs, and the two halves of a pair share the drift.
  **Placement.** The goal's rounds pin the processes (``spread_placement``): the leader alone on the first
  CPU, the followers on the others, the echo's client on the leader's CPU and its server on the first
  follower's, so that every hop of a commit and every round trip of the echo crosses CPUs, as messages
  between machines do. Left to the scheduler on a 2-CPU machine, the echo's two ends share a CPU in some
  runs and not in others (about 2× apart), and an unpinned verdict followed that, not the code; unpinned
  rounds alternate with the goal's for information. On 2 CPUs the followers share one, so the fastest
  follower's work can wait behind the other's: that is in the figure. Each round also measures, for
  information, an echo whose ends read as the node does (one reused buffer, ``asyncio.BufferedProtocol``)
  on the node processes' event loop (uvloop when installed, see ``reference/workload.py``), on the same
  CPUs: the issue's plain asyncio echo pays a fresh 256 KiB ``bytes`` per read that the node does not,
  and asyncio's Python event loop where the node runs on libuv;
* **in-process cluster** — three ``Node`` objects in this process's event loop on loopback ports. Used for
  what needs the nodes' memory: commit latency of one write at a time, a paced 1,000 writes/s run, and
  the machine-independent counts (messages = requests + responses seen by the nodes' servers, fsyncs
  from ``storage.fsync_count``) per committed batch. With all three nodes on one core, its one-at-a-time
  latency is the CPU of a whole commit (every node's share, in series): a cost figure, not a latency
  goal (its floor would be four serialized message hops, not one echo);
* **process cluster** — three real node processes (``reference/procs.py``), the way ``kraft-tck cluster``
  runs them, with the leader's workload: ``--closed-loop`` (one write at a time, each when the last one
  committed: the commit latency that compares with the echo round trip, measured the same way) and
  ``--throughput`` (one write per millisecond). Figures: committed records/s from the high watermark
  (DescribeQuorum) over a window after warm-up, and commit latency percentiles from the workload report
  the leader prints on SIGTERM, counted from the end of the warm-up (SIGUSR1 restarts them). The batched
  run is repeated for each ``controller.quorum.append.linger.ms`` in the plan: with 0 every write is its
  own batch, with a linger the leader batches the writes;
* **operators at saturation** — the paced 1,000 writes/s run beside a run offered ``SATURATION_OFFERED`` records/s,
  more than the cluster commits: the leader's bound on uncommitted records (``Node.max_uncommitted_records``)
  refuses the excess with REQUEST_TIMED_OUT, so the run is the highest rate it sustains, at a bounded queue. For
  each: DescribeQuorum answered (share, and p50/p99 of each poll: a new connection, ApiVersions, DescribeQuorum,
  as ``kraft-tck quorum`` asks), commit p50/p99/p99.9, the leader's RSS and CPU use over the window (near one CPU:
  its own work; well below, with late timers off CPU: waiting for a CPU), and from its report the refused writes,
  the collector's longest pause and the lag of its 1 ms timer. Both rows run again with Python's collector
  settings (``KRAFT_TCK_GC=python``) as the baseline of the node's (``workload.tune_gc``);
* **failover** — kill -9 the leader of a traced process cluster; the traces give the time to the
  survivors' election, to the new leader, and to the next committed client write.

Goals printed next to the figures and summed up at the end (goal, measured, verdict): p50 ≤ 2.5× echo RTT
without fsync as the median of the paired rounds' ratios, and every round ≤ 3× (issue #29: 7 of 7 in the
full plan's 7 rounds; ``--quick`` runs 3) (3 processes, one write at a time, against the echo to a child
process, both pinned across CPUs alike), p99 ≤ 5 ms at 1,000 writes/s, ≥ 50,000 committed records/s
batched. The machine-independent counts are checked against what the protocol needs: per committed batch,
one Fetch request and one Fetch response per follower (4 messages for 3 voters) and one fsync per node (3)
with fsync on, 0 without.
100-byte records throughout.

    .venv/bin/python bench/bench_cluster.py [--quick] [--dir D] [--event-loop auto|uvloop|asyncio]

``--baseline-tree DIR`` runs only the p50 goal's paired rounds and the paced 1,000 writes/s run, alternating
node processes from this tree and from ``DIR`` (``kraft_tck`` imported from there first), and prints them side by
side with each run's CPU per committed record (leader, followers), for a before/after in one run::

    git worktree add /tmp/base HEAD && mkdir -p /tmp/base-tree/kraft_tck
    for d in conformance reference spec tla traces; do ln -s /tmp/base/$d /tmp/base-tree/kraft_tck/$d; done
    .venv/bin/python bench/bench_cluster.py --quick --baseline-tree /tmp/base-tree

``--commits N`` instead runs N single-record commits on an in-process cluster (no fsync, linger 0) and
prints event-loop rounds per commit. The N commits run inside ``functools.reduce`` (a C function the
rest of the run never calls), so callgrind can count their instructions alone::

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce \
        .venv/bin/python bench/bench_cluster.py --commits 300

``--opcodes N`` runs the same N commits counting the Python opcodes each node role executes (``sys.settrace``), per
commit: in total, per event-loop callback and per function. Deterministic, so a change's effect on a commit's work
shows on a loaded machine where the latency rounds only show its noise (C code and the kernel are not counted).

``--dir`` should be on the disk you care about: fsync on a tmpfs measures nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import re
import shutil
import signal
import statistics
import struct
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import tenacity
from kraft_tck.reference import wire
from kraft_tck.reference.messages import FetchRequest, FetchResponse, LeaderIdAndEpoch
from kraft_tck.reference.node import Node, WriteLost
from kraft_tck.reference.procs import LocalCluster, free_base_port, imports_from
from kraft_tck.reference.storage import METADATA_PARTITION_DIR, new_uuid
from kraft_tck.reference.workload import EVENT_LOOPS, loop_factory, percentile
from kraft_tck.spec import codec
from kraft_tck.spec.framing import FrameSplitter, read_frame
from kraft_tck.spec.records import ATTR_CONTROL, HEADER_SIZE, LOG_OVERHEAD, data_batch
from kraft_tck.spec.trace import read_trace

RECORD = b"r" * 100
API_VERSIONS = 18

# The cluster tests' timeouts (tests/reference/test_cluster.py): failover figures depend on them.
SETTINGS: dict[str, Any] = {
    "controller.quorum.election.timeout.ms": 300,
    "controller.quorum.fetch.timeout.ms": 600,
    "controller.quorum.election.backoff.max.ms": 200,
    "controller.quorum.request.timeout.ms": 500,
    "controller.quorum.fetch.max.wait.ms": 100,
}
# The in-process runs time each write's own commit: no linger (the process runs set theirs).
IN_PROCESS_LINGER_MS = 0

# Issue #29: the median of the paired rounds' commit p50 / echo p50 within GOAL_P50_X_ECHO, and every round within
# GOAL_EVERY_ROUND_X_ECHO (7 of 7 in the full plan).
GOAL_P50_X_ECHO = 2.5
GOAL_EVERY_ROUND_X_ECHO = 3.0
GOAL_P99_MS = 5.0
GOAL_RECORDS_S = 50_000
# Operators first (the saturation row): DescribeQuorum answered in every poll, p99 within this, at saturation;
# p99.9 within this at 1,000 writes/s.
GOAL_DQ_P99_MS = 50.0
GOAL_P999_MS = 10.0
#: Offered records/s of the saturation row: well past what 3 processes on 2 CPUs commit (20,000-60,000 records/s).
SATURATION_OFFERED = 200_000
SATURATION_LINGER_MS = 5
#: DescribeQuorum polls of the process runs: this often, each given this long (a miss counts as unanswered).
POLL_S = 0.1
POLL_TIMEOUT_S = 0.5
# One Fetch request and one Fetch response per follower commit one batch (KIP-595: the leader answers the
# parked long-poll with the batch; the follower's next Fetch carries its new end offset).
EXPECTED_MESSAGES = 4.0


@dataclass(frozen=True)
class Plan:
    """How long each part runs; ``--quick`` shrinks it to about 30 s in all."""

    echo_round_trips: int
    closed_loop_writes: int
    paced_seconds: float
    warmup_seconds: float
    window_seconds: float
    batched_throughput: int  # offered records/s of the batched runs (one write per millisecond)
    batched_lingers_ms: tuple[int, ...]  # one batched run per controller.quorum.append.linger.ms
    failover_rounds: int
    paired_rounds: int  # one-at-a-time process cluster, echo to a child before and after; the goal's median
    unpinned_rounds: int  # the same, left to the scheduler (information)
    in_process_fsync_modes: tuple[bool, ...]
    max_batches: int  # in-process capacity run: this many batches of MAX_BATCH records
    process_fsync_modes: tuple[bool, ...]
    event_loop: str = "auto"  # the node processes' --event-loop, and the node-read echo's loop


MAX_BATCH = 1000
FULL = Plan(5000, 400, 3.0, 1.5, 5.0, 60_000, (0, 5, 25), 3, 7, 3, (False, True), 40, (False, True))
QUICK = Plan(2000, 200, 1.5, 1.0, 2.5, 60_000, (0, 5), 1, 3, 1, (False,), 16, (False,))


# ================================================================================================ helpers


def pct(values: list[float], q: float) -> float:
    return percentile(sorted(values), q)


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))


def stability(p: ProcessResult) -> str:
    if p.epochs <= 1 and p.leaderless < 0.05:
        return ""
    return f" (unstable: {p.epochs} epoch(s), DescribeQuorum unanswered in {p.leaderless:.0%} of polls)"


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISS"


# ================================================================================================ echo floor


def fetch_frames() -> tuple[bytes, bytes]:
    """A Fetch request and a Fetch response carrying one batch of one 100-byte record, as the node frames them."""
    version = codec.supported_versions(wire.FETCH)[1]
    req = FetchRequest(new_uuid(), 2, 1, 100, 1, max_wait_ms=100, max_bytes=8 << 20)
    resp = FetchResponse(100, (data_batch(100, 1, [RECORD]),), None, LeaderIdAndEpoch(1, 1))
    out = codec.encode_request(wire.FETCH, version, 7, "raft-client-2", wire.request_to_body(req, version))
    back = codec.encode_response(wire.FETCH, version, 7, wire.response_to_body(resp, version))
    return out, back


async def _serve_echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reply: bytes) -> None:
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        while await read_frame(reader, 1 << 20) is not None:
            writer.write(reply)
            await writer.drain()
    writer.close()


async def echo_round_trips(port: int, request: bytes, n: int) -> list[float]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    rtts = []
    for _ in range(n):
        t0 = time.perf_counter()
        writer.write(request)
        await writer.drain()
        if await read_frame(reader, 1 << 20) is None:
            raise ConnectionError("echo server closed the connection")
        rtts.append((time.perf_counter() - t0) * 1000)
    writer.close()
    return rtts[n // 10 :]  # the first round trips warm up the connection


async def echo_in_loop(request: bytes, reply: bytes, n: int) -> list[float]:
    server = await asyncio.start_server(lambda r, w: _serve_echo(r, w, reply), "127.0.0.1", 0)
    try:
        return await echo_round_trips(server.sockets[0].getsockname()[1], request, n)
    finally:
        server.close()


async def echo_cross_process(request: bytes, n: int, buffered: bool = False,
                             event_loop: str = "asyncio", cpus: tuple[int, int] | None = None) -> list[float]:
    """Round trips to an echo child process; ``buffered``: both ends read as the node does (the child on
    ``event_loop``); ``cpus``: (this process's CPU, the child's), pinned for the measurement (Linux)."""
    flag = "--echo-server-buffered" if buffered else "--echo-server"
    before = os.sched_getaffinity(0) if cpus is not None else None
    if cpus is not None:
        os.sched_setaffinity(0, {cpus[1]})  # the child inherits it
    try:
        child = await asyncio.create_subprocess_exec(sys.executable, __file__, flag, "--event-loop", event_loop,
                                                     stdout=asyncio.subprocess.PIPE)
        if cpus is not None:
            os.sched_setaffinity(0, {cpus[0]})
        try:
            assert child.stdout is not None
            port = int((await asyncio.wait_for(child.stdout.readline(), 20)).decode())
            return await (buffered_round_trips if buffered else echo_round_trips)(port, request, n)
        finally:
            child.terminate()
            await child.wait()
    finally:
        if before is not None:
            os.sched_setaffinity(0, before)


@dataclass(frozen=True)
class Placement:
    """CPUs for one measurement's processes: the cluster's leader and followers, and the echo's two ends
    (its client on the leader's CPU, its server on the first follower's). No CPUs: the scheduler's choice."""

    name: str
    leader_cpu: int | None = None
    follower_cpus: tuple[int, ...] = ()

    @property
    def echo_cpus(self) -> tuple[int, int] | None:
        return None if self.leader_cpu is None else (self.leader_cpu, self.follower_cpus[0])

    def follower_cpu(self, k: int) -> int:
        return self.follower_cpus[k % len(self.follower_cpus)]


UNPINNED = Placement("unpinned (the scheduler's placement)")


def spread_placement() -> Placement | None:
    """The p50 goal's placement: every hop of a commit crosses CPUs, as between machines, and so does
    every round trip of its echo. The leader has the first CPU to itself; the followers take the others
    (on 2 CPUs they share the second). None where processes cannot be pinned or only one CPU is allowed.

    Why pin at all: on a small machine the scheduler decides run by run whether two processes share a CPU,
    and an echo between two processes on one CPU takes about half the time of one across two, so an
    unpinned floor (and the ratio with it) follows the scheduler, not the code. Pinned alike, the echo and
    the cluster meet the same costs of crossing CPUs."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None
    followers = tuple(cpus[1:])
    where = f"CPU {followers[0]}" if len(followers) == 1 else f"CPUs {', '.join(map(str, followers))}"
    return Placement(f"spread (leader on CPU {cpus[0]}, followers on {where}; echo across the same CPUs)",
                     cpus[0], followers)


def one_cpu_echo() -> tuple[int, int] | None:
    """Both ends of the echo on one CPU (information: the lower bound of a round trip here)."""
    return (min(os.sched_getaffinity(0)),) * 2 if hasattr(os, "sched_getaffinity") else None


def node_loop_name(event_loop: str) -> str:
    """The event loop ``kraft-tck node --event-loop event_loop`` runs on here."""
    factory = loop_factory(event_loop)
    return f"{'asyncio' if factory is None else factory.__module__.split('.')[0]} (--event-loop {event_loop})"


async def node_read_echo(n: int, event_loop: str, cpus: tuple[int, int] | None = None) -> list[float]:
    """Round trips read as the node reads, both ends on the node's event loop: a child process runs the
    client (``--node-read-echo``) against its own echo child, and prints the round trips; ``cpus`` as
    for ``echo_cross_process``."""
    pinned = ["--cpus", f"{cpus[0]},{cpus[1]}"] if cpus is not None else []
    child = await asyncio.create_subprocess_exec(sys.executable, __file__, "--node-read-echo", str(n),
                                                 "--event-loop", event_loop, *pinned, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(child.communicate(), 120)
    if child.returncode != 0:
        raise RuntimeError(f"--node-read-echo child exited with {child.returncode}")
    rtts: list[float] = json.loads(out)
    return rtts


async def run_node_read_echo_client(n: int, event_loop: str, cpus: tuple[int, int] | None) -> None:
    """Child-process mode, on the node's event loop: the buffered echo to a grandchild on that loop too."""
    request, _ = fetch_frames()
    print(json.dumps(await echo_cross_process(request, n, buffered=True, event_loop=event_loop, cpus=cpus)),
          flush=True)


async def run_echo_server(buffered: bool = False) -> None:
    """Child-process mode: serve Fetch-sized echoes on an ephemeral port, print it, run until killed."""
    _, reply = fetch_frames()
    if buffered:
        server = await asyncio.get_running_loop().create_server(lambda: _BufferedEcho(reply), "127.0.0.1", 0)
    else:
        server = await asyncio.start_server(lambda r, w: _serve_echo(r, w, reply), "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


# The same echo reading as the node reads (reference/net.py): into one reused buffer, frames cut as they
# arrive. asyncio's streams (the floor above) pay a fresh 256 KiB bytes per read that the node does not.
class _BufferedEcho(asyncio.BufferedProtocol):
    """Server side: answer every whole frame with ``reply``."""

    def __init__(self, reply: bytes) -> None:
        self._frames, self._reply = FrameSplitter(), reply
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is no asyncio.Transport subclass

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._frames.buffer_updated(nbytes)
        while self._frames.next_frame() is not None:
            assert self._transport is not None
            self._transport.write(self._reply)


class _BufferedEchoClient(asyncio.BufferedProtocol):
    """Client side: ``answered`` completes when the next whole frame has arrived."""

    def __init__(self) -> None:
        self._frames = FrameSplitter()
        self.answered: asyncio.Future[None] | None = None

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._frames.buffer_updated(nbytes)
        if self._frames.next_frame() is not None and self.answered is not None and not self.answered.done():
            self.answered.set_result(None)


async def buffered_round_trips(port: int, request: bytes, n: int) -> list[float]:
    """``echo_round_trips``, reading as the node does."""
    loop = asyncio.get_running_loop()
    transport, client = await loop.create_connection(_BufferedEchoClient, "127.0.0.1", port)
    rtts = []
    for _ in range(n):
        client.answered = loop.create_future()
        t0 = time.perf_counter()
        transport.write(request)
        await asyncio.wait_for(client.answered, 10)
        rtts.append((time.perf_counter() - t0) * 1000)
    transport.close()
    return rtts[n // 10 :]  # the first round trips warm up the connection


# ================================================================================================ in-process cluster


class CountingNode(Node):
    """A ``Node`` that counts the protocol frames its server receives and sends (ApiVersions excluded:
    it is connection set-up, not protocol). Every message crosses exactly one server, so the sum over the
    nodes counts each request and each response once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frames: Counter[tuple[int, str]] = Counter()  # (api key, "recv"/"send") -> frames

    def _wants_frames(self) -> bool:
        return True  # count frames even though nothing is traced

    def _observe_server(self, direction: str, api_key: int, version: int, corr: int,
                        body: dict[str, Any], peer: str) -> None:
        if api_key != API_VERSIONS:
            self.frames[(api_key, direction)] += 1  # named in frame_counts(), off the timed path
        if self.trace is not None:
            super()._observe_server(direction, api_key, version, corr, body, peer)

    def _observe_client(self, dest: int) -> Callable[[str, int, int, int, dict[str, Any], str], None]:
        # Counting needs the servers' side only; the client side observes for the trace alone.
        return super()._observe_client(dest) if self.trace is not None else _ignore_frame

    def frame_counts(self) -> Counter[str]:
        return Counter({f"{codec.api_name(k)}.{'request' if d == 'recv' else 'response'}": n
                        for (k, d), n in self.frames.items()})


def _ignore_frame(direction: str, api_key: int, version: int, corr: int, body: dict[str, Any], peer: str) -> None:
    pass


@dataclass
class InProcessResult:
    fsync: bool
    closed_lat: list[float]
    closed_msgs: float
    closed_fsyncs: float
    closed_frames: dict[str, float]
    paced_lat: list[float]
    paced_rate: float
    paced_msgs: float
    paced_fsyncs: float
    max_records_s: float  # back-to-back batches of MAX_BATCH records, two in flight
    epochs: int  # leader epochs during the measurements (1 = the leader never changed)


def _leader(nodes: list[CountingNode]) -> CountingNode | None:
    for n in nodes:
        if n.core is not None and n.core.status().is_leader:
            return n
    return None


async def _elected(nodes: list[CountingNode], timeout_s: float, problem: str) -> CountingNode:
    """The in-process cluster's leader once its high watermark has moved off 0 (asked every 10 ms, tenacity)."""
    found: CountingNode | None = await tenacity.AsyncRetrying(
        stop=tenacity.stop_after_delay(timeout_s), wait=tenacity.wait_fixed(0.01),
        retry=tenacity.retry_if_result(lambda leader: leader is None), retry_error_callback=lambda _state: None,
    )(_committed_leader, nodes)
    if found is None:
        raise TimeoutError(problem)
    return found


async def _warm_leader(nodes: list[CountingNode], timeout_s: float, problem: str, warmup: int) -> CountingNode:
    """Start ``nodes``, wait for their leader (``_elected``) and commit ``warmup`` one-record writes on it:
    connections open, codec plans compiled, code paths hot."""
    for n in nodes:
        await n.start()
    leader = await _elected(nodes, timeout_s, problem)
    for _ in range(warmup):
        await leader.write([RECORD])
    return leader


async def _committed_leader(nodes: list[CountingNode]) -> CountingNode | None:
    leader = _leader(nodes)
    return leader if leader is not None and leader.high_watermark != 0 else None


def _counts(nodes: list[CountingNode]) -> tuple[Counter[str], int]:
    frames: Counter[str] = Counter()
    for n in nodes:
        frames.update(n.frame_counts())
    return frames, sum(n.storage.fsync_count for n in nodes if n.storage is not None)


async def in_process_cluster(root: Path, fsync: bool, plan: Plan) -> InProcessResult:
    cluster = LocalCluster(root / f"inproc-{'fsync' if fsync else 'nofsync'}", base_port=free_base_port(3),
                           settings={**SETTINGS, "controller.quorum.append.linger.ms": IN_PROCESS_LINGER_MS})
    nodes = [CountingNode(cfg, fsync=fsync, seed=cfg.node_id) for cfg in cluster.node_configs()]
    try:
        leader = await _warm_leader(nodes, 20, "in-process cluster elected no leader within 20 s", 20)
        epoch0 = leader.core.epoch if leader.core is not None else -1

        # One write at a time: the unloaded commit latency and the per-batch message/fsync cost.
        frames0, fsyncs0 = _counts(nodes)
        closed = []
        for _ in range(plan.closed_loop_writes):
            t0 = time.perf_counter()
            try:
                res = await asyncio.wait_for(leader.write([RECORD]), 10)
            except TimeoutError:
                break  # lost leadership: the write will never be acknowledged
            if not res.accepted:
                break
            closed.append((time.perf_counter() - t0) * 1000)
        frames1, fsyncs1 = _counts(nodes)
        k = max(1, len(closed))
        closed_frames = {name: (frames1[name] - frames0[name]) / k for name in sorted(frames1)}

        # Open loop, 1,000 single-record writes per second, each timed from append to commit.
        paced: list[float] = []
        tasks: list[asyncio.Task[None]] = []

        async def one() -> None:
            t0 = time.perf_counter()
            with contextlib.suppress(WriteLost):  # a leader change lost it: not a latency sample
                if (await leader.write([RECORD])).accepted:
                    paced.append((time.perf_counter() - t0) * 1000)

        rate = 1000
        start = time.monotonic()
        issued = 0
        while (now := time.monotonic()) < start + plan.paced_seconds:
            while issued < (now - start) * rate:
                tasks.append(asyncio.create_task(one()))
                issued += 1
            await asyncio.sleep(max(0.0, start + issued / rate - time.monotonic()))
        # A write whose leader lost its epoch may never be acknowledged: bound the wait, count it lost.
        _, unfinished = await asyncio.wait(tasks, timeout=10)
        for t in unfinished:
            t.cancel()
        elapsed = time.monotonic() - start
        frames2, fsyncs2 = _counts(nodes)

        # Capacity: back-to-back large batches, two in flight (closed loop, so no backlog builds up).
        values = [RECORD] * MAX_BATCH

        done = [0]

        async def batches(k: int) -> None:
            for _ in range(k):
                if (await leader.write(values)).accepted:
                    done[0] += 1

        t0 = time.perf_counter()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(batches(plan.max_batches // 2), batches(plan.max_batches // 2)), 30)
        max_records_s = done[0] * MAX_BATCH / (time.perf_counter() - t0)
        epochs = len({n.core.epoch for n in nodes if n.core is not None} | {epoch0})
        return InProcessResult(
            fsync=fsync,
            closed_lat=closed,
            closed_msgs=sum((frames1 - frames0).values()) / k,
            closed_fsyncs=(fsyncs1 - fsyncs0) / k,
            closed_frames=closed_frames,
            paced_lat=paced,
            paced_rate=len(paced) / elapsed,
            paced_msgs=sum((frames2 - frames1).values()) / max(1, len(paced)),
            paced_fsyncs=(fsyncs2 - fsyncs1) / max(1, len(paced)),
            max_records_s=max_records_s,
            epochs=epochs,
        )
    finally:
        # Graceful: a leader stopped abruptly while it holds a parked (long-poll) Fetch never finishes
        # Node.stop, because the server waits for that reply and the timer that would send it is gone.
        for n in sorted(nodes, key=lambda n: n is not _leader(nodes)):
            await n.stop(graceful=True, grace_s=0.2)


def commit_profile(root: Path, commits: int) -> None:
    """N one-at-a-time commits, the measured part inside ``functools.reduce`` (see the module docstring)."""
    loop = asyncio.new_event_loop()
    cluster = LocalCluster(root / "profile", base_port=free_base_port(3),
                           settings={**SETTINGS, "controller.quorum.append.linger.ms": IN_PROCESS_LINGER_MS})
    nodes = [Node(cfg, fsync=False, seed=cfg.node_id) for cfg in cluster.node_configs()]

    async def setup() -> Node:
        return await _warm_leader(nodes, 60, "no leader within 60 s", 20)  # generous: callgrind runs ~50x slower

    latencies: list[float] = []

    async def measure(leader: Node) -> int:
        committed = 0
        for _ in range(commits):
            t0 = time.perf_counter()
            if not (await leader.write([RECORD])).accepted:
                break
            latencies.append((time.perf_counter() - t0) * 1000)
            committed += 1
        return committed

    rounds = [0]
    run_once = loop._run_once  # type: ignore[attr-defined]

    def counting_run_once() -> None:
        rounds[0] += 1
        run_once()

    try:
        leader = loop.run_until_complete(setup())
        epoch = leader.core.epoch if leader.core is not None else -1
        loop._run_once = counting_run_once  # type: ignore[attr-defined]
        committed = functools.reduce(lambda _, __: loop.run_until_complete(measure(leader)), [0], 0)
        loop._run_once = run_once  # type: ignore[attr-defined]
        changed = leader.core is None or leader.core.epoch != epoch
        print(f"{committed} commits, {rounds[0] / max(1, committed):.2f} event-loop rounds per commit, "
              f"latency p50 {pct(latencies, 50):.3f} ms p99 {pct(latencies, 99):.3f} ms"
              + (" (the leader changed: figures are not comparable)" if changed else ""))
    finally:
        async def stop() -> None:
            for n in sorted(nodes, key=lambda n: n is not _leader(nodes)):
                await n.stop(graceful=True, grace_s=0.2)
        loop.run_until_complete(stop())
        loop.close()


class _OpcodeCounter:
    """``sys.settrace`` with opcode events: Python opcodes executed, per node role (the frame's nearest ``self`` that
    is a node or one of its servers or clients), per event-loop callback and per function. Deterministic: the same
    commits count the same on a loaded machine, where timings do not (``--opcodes``)."""

    def __init__(self, roles: dict[int, str]) -> None:
        self.roles = roles  # id(node or its KafkaServer / KafkaClient) -> "leader" / "follower"
        self.role_of: dict[int, str] = {}  # id(frame) -> role, for the frames running now
        self.callback = "?"
        self.counts: Counter[tuple[str, str, str]] = Counter()  # (role, callback, function) -> opcodes
        self.where_of: dict[int, str] = {}  # id(frame) -> its function's name, for the frames running now

    def _role(self, frame: Any) -> str:
        f = frame
        while f is not None:
            me = f.f_locals.get("self")
            if me is not None:
                role = self.roles.get(id(me)) or next(
                    (self.roles[id(o)] for o in (getattr(me, a, None) for a in ("_client", "_server", "server"))
                     if o is not None and id(o) in self.roles), None)
                if role is not None:
                    return role
            f = f.f_back
        return "event loop"

    def trace(self, frame: Any, event: str, _arg: Any) -> Any:
        if event == "call":
            frame.f_trace_opcodes = True
            back = frame.f_back
            if back is not None and back.f_code.co_name in ("_run", "_process_events"):  # a loop callback starts
                self.callback = frame.f_code.co_name
            self.role_of[id(frame)] = self._role(frame)
            code = frame.f_code
            where = f"{Path(code.co_filename).name}:{code.co_firstlineno} {code.co_name}"
            if code.co_filename == "<string>" and "self" in frame.f_locals:  # a dataclass's generated method
                where = f"{type(frame.f_locals['self']).__name__}.{code.co_name} (generated)"
            self.where_of[id(frame)] = where
        elif event == "opcode":
            self.counts[(self.role_of.get(id(frame), "event loop"), self.callback, self.where_of[id(frame)])] += 1
        return self.trace


def opcode_profile(root: Path, commits: int, top: int = 25) -> None:
    """``--opcodes N``: N one-at-a-time commits on an in-process cluster (asyncio's loop, as ``--commits``),
    counting the Python opcodes each node role runs, per commit: totals, per event-loop callback and per function.
    A change's effect on the work of a commit, free of the machine's noise (C code and the kernel are not in it)."""
    # Tracing slows the nodes down many times over: timeouts ten times the cluster tests' keep the leader leading,
    # and a long-poll that outlives a traced commit rarely (its expiry would be work no real commit does).
    slow = {k: v * 10 for k, v in SETTINGS.items()}
    cluster = LocalCluster(root / "opcodes", base_port=free_base_port(3),
                           settings={**SETTINGS, **slow, "controller.quorum.append.linger.ms": IN_PROCESS_LINGER_MS})
    nodes = [Node(cfg, fsync=False, seed=cfg.node_id) for cfg in cluster.node_configs()]
    counter = _OpcodeCounter({})

    async def measure() -> None:
        try:
            leader = await _warm_leader(nodes, 60, "no leader within 60 s", 50)
            for n in nodes:
                role = "leader" if n is leader else "follower"
                counter.roles.update({id(n): role, id(n.server): role})
                counter.roles.update({id(p.client): role for p in n._peers.values() if p.client is not None})
            epoch = leader.core.epoch if leader.core is not None else -1
            sys.settrace(counter.trace)
            try:
                for _ in range(commits):
                    await leader.write([RECORD])
            finally:
                sys.settrace(None)
            if leader.core is None or leader.core.epoch != epoch:
                print("(the leader changed during the run: the figures are not comparable)")
        finally:
            for n in sorted(nodes, key=lambda n: n is not _leader(nodes)):
                await n.stop(graceful=True, grace_s=0.2)

    asyncio.run(measure())
    by_role: Counter[str] = Counter()
    by_callback: Counter[tuple[str, str]] = Counter()
    by_function: Counter[tuple[str, str]] = Counter()
    for (role, callback, where), n in counter.counts.items():
        by_role[role] += n
        by_callback[(role, callback)] += n
        by_function[(role, where)] += n
    print(f"Python opcodes per commit ({commits} one-at-a-time commits, in-process, linger 0, no fsync; the two "
          "followers together)")
    table("per role", ["role", "opcodes"], [[r, f"{n / commits:,.0f}"] for r, n in by_role.most_common()])
    table("per role and event-loop callback (``_read_ready``: a socket's bytes; the closed loop's task: ``measure``)",
          ["role", "callback", "opcodes"],
          [[r, c, f"{n / commits:,.0f}"] for (r, c), n in by_callback.most_common(12)])
    for role in ("leader", "follower"):
        table(f"{role}: the {top} functions that run the most opcodes (self)", ["function", "opcodes"],
              [[w, f"{n / commits:,.1f}"] for (r, w), n in by_function.most_common() if r == role][:top])


# ================================================================================================ process cluster

_REPORT = re.compile(
    r"committed (?P<records>\d+) records in (?P<secs>[\d.]+)s .*?commit latency "
    r"p50=(?P<p50>\S+)ms p75=(?P<p75>\S+)ms p99=(?P<p99>\S+)ms p99\.9=(?P<p999>\S+)ms over (?P<writes>\d+) writes"
    r"(?:.*? (?P<refused>\d+) writes refused)?(?:.*? max=(?P<gcmax>[\d.]+)ms)?"
    r"(?:.*?timer lag .*?p99\.9=(?P<lag>[\d.]+)ms, \d+ over [\d.]+ms \((?P<oncpu>\d+) on CPU, (?P<offcpu>\d+) off)?"
)


@dataclass
class ProcessResult:
    fsync: bool
    label: str
    offered: int
    records_per_s: float  # high watermark growth over the measurement window
    p50: float
    p99: float
    p999: float
    writes: int  # latency samples in the leader's report
    linger_ms: int
    records_per_batch: float  # over the whole run, from a follower's segment files
    epochs: int  # leader epochs seen during the window (1 = stable)
    leaderless: float  # share of the window's polls that found no leader
    dq_ms: list[float] = dataclasses.field(default_factory=list)  # each answered DescribeQuorum poll, end to end
    rss_mib: float = float("nan")  # the leader's resident memory at the end of the window
    refused: int = 0  # writes the leader refused (REQUEST_TIMED_OUT), from its report
    gc_max_ms: float = float("nan")  # the collector's longest pause in the leader, from its report
    lag_p999_ms: float = float("nan")  # the leader's 1 ms write timer, p99.9 lateness, from its report
    late: tuple[int, int] = (0, 0)  # late firings of that timer: (the leader on CPU meanwhile, off CPU)
    # The followers' (their waits to lead, each up to 100 ms, from their reports): largest p99.9, late firings summed.
    follower_lag_p999_ms: float = float("nan")
    follower_late: tuple[int, int] = (0, 0)
    gc: str = "node"  # "node": the node's collector settings; "python": KRAFT_TCK_GC=python
    # The CPU the leader process used over the window, in CPUs (1.0 = one CPU all the time; /proc): near 1 it is
    # busy with its own work; well below, with its timers late off CPU, it waited for a CPU others had.
    leader_cpu: float = float("nan")
    # CPU (user + system, /proc) per committed record over the window, µs: the leader's, and the followers' mean.
    leader_us_per_commit: float = float("nan")
    follower_us_per_commit: float = float("nan")


def leader_report(c: LocalCluster) -> dict[str, float]:
    """The last workload report of the node that committed the most writes (the leader)."""
    best: dict[str, float] = {}
    for i in range(1, c.voters + 1):
        text = (c.node_dir(i) / "node.log").read_text(encoding="utf-8", errors="replace")
        matches = list(_REPORT.finditer(text))
        if matches:
            m = {k: float(v) for k, v in matches[-1].groupdict().items() if v is not None}
            if m["writes"] > best.get("writes", -1):
                best = m
    if not best:
        raise RuntimeError(f"no workload report in {c.base_dir}/node-*/node.log")
    return best


def follower_reports(c: LocalCluster, leader_id: int) -> list[dict[str, float]]:
    """The last workload report of every node but ``leader_id`` (their timer lag; they commit no writes)."""
    out = []
    for i in range(1, c.voters + 1):
        if i == leader_id:
            continue
        text = (c.node_dir(i) / "node.log").read_text(encoding="utf-8", errors="replace")
        matches = list(_REPORT.finditer(text))
        if matches:
            out.append({k: float(v) for k, v in matches[-1].groupdict().items() if v is not None})
    return out


def data_batch_sizes(data_dir: Path) -> tuple[int, int]:
    """(data batches, records in them) in a node's segment files, from the batch headers alone
    (RecordBatch v2: batchLength at +8, attributes at +21, lastOffsetDelta at +23)."""
    batches = records = 0
    for seg in sorted((data_dir / METADATA_PARTITION_DIR).glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + HEADER_SIZE <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            (attributes, last_delta) = struct.unpack_from(">hi", data, pos + 21)
            if not attributes & ATTR_CONTROL:
                batches += 1
                records += last_delta + 1
            pos += LOG_OVERHEAD + length
    return batches, records


def stop_leader_first(c: LocalCluster, leader_id: int) -> None:
    """SIGTERM the leader first, so its report is not spoilt by followers that are already gone."""
    if leader_id in c.procs:
        c.kill(leader_id, signal.SIGTERM)
    c.stop_all(signal.SIGTERM)


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time so far (Linux /proc), NaN where it cannot be read."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return float("nan")


def rss_mib(pid: int) -> float:
    """A process's resident memory (Linux /proc), NaN where it cannot be read."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def process_workload(root: Path, label: str, fsync: bool, throughput: int, linger_ms: int,
                           plan: Plan, placement: Placement = UNPINNED, gc: str = "node") -> ProcessResult:
    """``throughput`` records/s offered, or with 0 the closed-loop workload (one record at a time); the
    processes placed on ``placement``'s CPUs once the leader is known, before the warm-up. ``gc="python"``
    runs the nodes with Python's collector settings (``KRAFT_TCK_GC=python``, see ``workload.tune_gc``)."""
    workload = ["--throughput", str(throughput)] if throughput else ["--closed-loop"]
    c = LocalCluster(root / f"proc-{label}-linger{linger_ms}-{'fsync' if fsync else 'nofsync'}-gc{gc}", voters=3,
                     base_port=free_base_port(3),
                     settings={**SETTINGS, "controller.quorum.append.linger.ms": linger_ms},
                     extra_args=[*workload, "--record-size", str(len(RECORD)), *([] if fsync else ["--no-fsync"]),
                                 "--event-loop", plan.event_loop])
    c.prepare()
    before = os.environ.get("KRAFT_TCK_GC")
    os.environ["KRAFT_TCK_GC"] = gc  # inherited by the node processes
    try:
        c.start_all()
    finally:
        if before is None:
            os.environ.pop("KRAFT_TCK_GC", None)
        else:
            os.environ["KRAFT_TCK_GC"] = before
    leader_id = -1
    seen: list[tuple[float, int, int, int]] = []  # (time, high watermark, epoch, leader) while there is a leader
    dq_ms: list[float] = []
    polls = 0
    rss = leader_cpu = leader_cpu_s = cpu_window_s = float("nan")
    others_s: list[float] = []
    try:
        info = await c.wait_for_leader(30, min_hw=2)
        leader_id = info.leader_id
        if placement.leader_cpu is not None:
            c.pin(leader_id, {placement.leader_cpu})
            for k, follower in enumerate(i for i in sorted(c.procs) if i != leader_id):
                c.pin(follower, {placement.follower_cpu(k)})
        await asyncio.sleep(plan.warmup_seconds)
        for proc in c.procs.values():
            proc.send_signal(signal.SIGUSR1)  # the workload reports latencies from here: no warm-up in them
        # Poll through the window: an overloaded cluster may lose its leader, and the rate is then
        # measured over the part of the window that had one.
        leader_pid = c.procs[leader_id].pid
        cpu0, window0 = cpu_seconds(leader_pid), time.monotonic()
        others0 = {i: cpu_seconds(p.pid) for i, p in c.procs.items() if i != leader_id}
        end = time.monotonic() + plan.window_seconds
        while time.monotonic() < end:
            t0 = time.perf_counter()
            # The leader first, as ``kraft-tck quorum`` ends up asking it: the others only when it no longer is.
            q = await c.describe([leader_id, *(i for i in c.alive() if i != leader_id)], timeout_s=POLL_TIMEOUT_S)
            polls += 1
            if q is not None:
                dq_ms.append((time.perf_counter() - t0) * 1000)
                seen.append((time.monotonic(), q.high_watermark, q.leader_epoch, q.leader_id))
                leader_id = q.leader_id
            await asyncio.sleep(max(0.0, POLL_S - (time.perf_counter() - t0)))
        leader_cpu_s = cpu_seconds(leader_pid) - cpu0
        cpu_window_s = time.monotonic() - window0
        leader_cpu = leader_cpu_s / max(1e-9, cpu_window_s)
        others_s = [cpu_seconds(c.procs[i].pid) - t for i, t in others0.items() if i in c.procs]
        if leader_id in c.procs:
            rss = rss_mib(c.procs[leader_id].pid)
    finally:
        stop_leader_first(c, leader_id)
    rep = leader_report(c)
    others = follower_reports(c, leader_id)
    follower = next(i for i in range(1, c.voters + 1) if i != leader_id)
    n_batches, n_records = data_batch_sizes(c.data_dir(follower))
    rate = 0.0
    if len(seen) >= 2 and seen[-1][0] > seen[0][0]:
        rate = (seen[-1][1] - seen[0][1]) / (seen[-1][0] - seen[0][0])
    committed = rate * cpu_window_s  # records committed over the window the CPU times span
    return ProcessResult(
        fsync=fsync, label=label, offered=throughput, records_per_s=rate,
        p50=rep["p50"], p99=rep["p99"], p999=rep["p999"], writes=int(rep["writes"]), linger_ms=linger_ms,
        records_per_batch=n_records / max(1, n_batches),
        epochs=len({e for _, _, e, _ in seen}),
        leaderless=1 - len(seen) / max(1, polls),
        dq_ms=dq_ms, rss_mib=rss, refused=int(rep.get("refused", 0)), gc_max_ms=rep.get("gcmax", float("nan")),
        lag_p999_ms=rep.get("lag", float("nan")), gc=gc, late=(int(rep.get("oncpu", 0)), int(rep.get("offcpu", 0))),
        follower_lag_p999_ms=max((r["lag"] for r in others if "lag" in r), default=float("nan")),
        follower_late=(sum(int(r.get("oncpu", 0)) for r in others), sum(int(r.get("offcpu", 0)) for r in others)),
        leader_cpu=leader_cpu,
        leader_us_per_commit=leader_cpu_s * 1e6 / committed if committed > 0 else float("nan"),
        follower_us_per_commit=(statistics.fmean(others_s) * 1e6 / committed if committed > 0 and others_s
                                else float("nan")),
    )


# ================================================================================================ failover


@dataclass
class Failover:
    to_election_ms: float  # kill -9 -> a survivor starts an election
    to_leader_ms: float  # kill -9 -> BecomeLeader
    to_commit_ms: float  # kill -9 -> the first client write of the new epoch is committed
    elections: int  # StartElection events on the survivors before the new leader (2+ = a split vote)


def _failover_from_traces(c: LocalCluster, survivors: list[int], kill_ms: float, old_epoch: int) -> Failover:
    events = []
    for i in survivors:
        for path in c.trace_files(i):
            events.extend(read_trace(path, validate=False).events)
    events.sort(key=lambda e: (e["ts"], e["seq"]))
    after = [e for e in events if e.get("state") and e["state"]["epoch"] > old_epoch and e["ts"] >= kill_ms - 1]
    election = next(e for e in after if e["event"] == "StartElection")
    became = next(e for e in after if e["event"] == "BecomeLeader")
    mine = [e for e in after if e["node"] == became["node"] and e["state"]["epoch"] == became["state"]["epoch"]]
    append = next(e for e in mine if e["event"] == "ClientAppend")
    last_offset = append["log"]["appended"][-1]["lastOffset"]
    commit = next(e for e in mine if e["seq"] >= append["seq"] and e["state"]["highWatermark"] > last_offset)
    elections = sum(1 for e in after if e["event"] == "StartElection" and e["ts"] <= became["ts"])
    return Failover(election["ts"] - kill_ms, became["ts"] - kill_ms, commit["ts"] - kill_ms, elections)


async def failover(root: Path, plan: Plan) -> list[Failover]:
    # A light paced workload (one record every 5 ms) so that "the next committed write" comes soon
    # after the new leader, without the traces' cost distorting the timing.
    c = LocalCluster(root / "failover", voters=3, base_port=free_base_port(3), trace=True,
                     settings={**SETTINGS, "controller.quorum.append.linger.ms": 5},
                     extra_args=["--throughput", "200", "--record-size", str(len(RECORD)),
                                 "--event-loop", plan.event_loop])
    c.prepare()
    c.start_all()
    results = []
    try:
        for _ in range(plan.failover_rounds):
            info = await c.wait_for_leader(30, min_hw=2)
            await c.wait_for_leader(30, min_hw=info.high_watermark + 50)  # the writes flow
            for voter in range(1, c.voters + 1):
                await c.wait_caught_up(voter, 20, info.high_watermark)  # any survivor may win
            old = await c.wait_for_leader(5)
            kill_ms = time.time() * 1000
            c.kill(old.leader_id, signal.SIGKILL)
            await c.wait_for_leader(20, min_epoch=old.leader_epoch + 1, exclude=old.leader_id)
            await asyncio.sleep(0.5)  # the first write of the new epoch commits
            survivors = [i for i in range(1, c.voters + 1) if i != old.leader_id]
            results.append(_failover_from_traces(c, survivors, kill_ms, old.leader_epoch))
            c.start(old.leader_id)
    finally:
        c.stop_all(signal.SIGKILL)
    return results


# ================================================================================================ paired rounds


@dataclass
class Rounds:
    """Paired rounds in one placement: each a one-at-a-time process cluster bracketed by the echo."""

    placement: Placement
    echo: list[float] = dataclasses.field(default_factory=list)  # every round's echo round trips, pooled
    # (the round's echo p50, its node-read echo p50, the cluster's result)
    runs: list[tuple[float, float, ProcessResult]] = dataclasses.field(default_factory=list)

    @property
    def ratios(self) -> list[float]:
        return [p.p50 / e for e, _, p in self.runs]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def median_commit(self) -> float:
        return statistics.median(p.p50 for _, _, p in self.runs)

    @property
    def within(self) -> str:
        return "; ".join(f"{sum(r <= x for r in self.ratios)} of {len(self.runs)} rounds ≤ {x:g}×"
                         for x in (GOAL_P50_X_ECHO, GOAL_EVERY_ROUND_X_ECHO))

    @property
    def every_round_ok(self) -> bool:
        """The second half of the goal: no round above ``GOAL_EVERY_ROUND_X_ECHO``."""
        return bool(self.ratios) and max(self.ratios) <= GOAL_EVERY_ROUND_X_ECHO

    def print(self, title: str, verdicts: bool) -> None:
        rows = [[str(i), f"{e:.3f}", f"{p.p50:.3f}", f"{p.p99:.3f}", f"{p.writes:,}",
                 f"{p.p50 / e:.2f}×" + stability(p), f"{b:.3f}", f"{p.p50 / b:.2f}×"]
                for i, (e, b, p) in enumerate(self.runs, 1)]
        judged = (f" (goal: median ≤ {GOAL_P50_X_ECHO:g}×: {verdict(self.ratio <= GOAL_P50_X_ECHO)}, every round "
                  f"≤ {GOAL_EVERY_ROUND_X_ECHO:g}×: {verdict(self.every_round_ok)}; {self.within})")
        node_read = statistics.median(p.p50 / b for _, b, p in self.runs)
        rows.append(["median", f"{statistics.median(e for e, _, _ in self.runs):.3f}", f"{self.median_commit:.3f}",
                     "", "", f"{self.ratio:.2f}×" + (judged if verdicts else f" (information; {self.within})"),
                     f"{statistics.median(b for _, b, _ in self.runs):.3f}", f"{node_read:.2f}× (information)"])
        table(title, ["round", "echo p50 ms", "commit p50 ms", "commit p99 ms", "writes", "commit / echo",
                      "node-read echo p50 ms", "commit / node-read echo"], rows)


async def paired_round(root: Path, plan: Plan, rounds: Rounds, label: str, request: bytes) -> None:
    """One round: the echo before, the node-read echo, a new cluster, the echo after, all on the placement.
    The floor brackets the run (half its round trips before, half after, a new child each time), so a
    drift during the round weighs on both sides of the ratio alike."""
    cpus = rounds.placement.echo_cpus
    short = "pinned" if cpus is not None else "unpinned"
    echo = await timed(f"echo, to a child process, {short}, before ({label})",
                       echo_cross_process(request, plan.echo_round_trips // 2, cpus=cpus))
    node_read = await timed(f"echo reading as the node does, on its event loop, {short} ({label})",
                            node_read_echo(plan.echo_round_trips, plan.event_loop, cpus))
    run_r = await timed(f"process cluster, one write at a time, fsync off, {short} ({label})",
                        process_workload(root, f"closed-{short}-{len(rounds.runs) + 1}", False, 0, 0, plan,
                                         rounds.placement))
    echo += await timed(f"echo, to a child process, {short}, after ({label})",
                        echo_cross_process(request, plan.echo_round_trips // 2, cpus=cpus))
    rounds.echo += echo
    rounds.runs.append((pct(echo, 50), pct(node_read, 50), run_r))


# ======================================================================================= A/B against a baseline




async def run_ab(plan: Plan, root: Path, baseline: Path) -> None:
    """``--baseline-tree``: the p50 goal's paired rounds and the paced 1,000 writes/s run, node processes from
    this tree and from ``baseline`` in turn (the order alternating by round), side by side; nothing else."""
    request, _ = fetch_frames()
    placement = spread_placement() or UNPINNED
    trees: list[tuple[str, Path | None]] = [("this tree", None), (f"baseline {baseline}", baseline)]
    rounds = {name: Rounds(placement) for name, _ in trees}
    paced: dict[str, list[ProcessResult]] = {name: [] for name, _ in trees}
    for k in range(1, plan.paired_rounds + 1):
        for t, (name, tree) in enumerate(trees if k % 2 else trees[::-1]):
            where = root / f"tree{t if k % 2 else 1 - t}"
            with imports_from(tree):
                await paired_round(where, plan, rounds[name], f"{name}, {k}/{plan.paired_rounds}", request)
                paced[name].append(await timed(f"process cluster, paced 1,000 writes/s, fsync off ({name}, {k})",
                                               process_workload(where, f"paced-{k}", False, 1000, 0, plan)))
    print(f"A/B, {plan.paired_rounds} rounds alternating; the p50 goal's rounds on the {placement.name} placement, "
          f"the paced run unpinned; CPU per commit: user + system µs per committed record over the window")
    header = ["node processes", "commit / echo (median)",
              f"rounds ≤ {GOAL_EVERY_ROUND_X_ECHO:g}× / ≤ {GOAL_P50_X_ECHO:g}×", "commit p50 ms", "echo p50 ms",
              "paced p50 / p99 / p99.9 ms", "paced leader µs", "paced follower µs", "closed leader µs",
              "closed follower µs"]
    rows = []
    medians: dict[str, list[float]] = {}
    for name, _ in trees:
        r, ps = rounds[name], paced[name]
        closed = [p for _, _, p in r.runs]
        m = [r.ratio, r.median_commit, statistics.median(p.p50 for p in ps), statistics.median(p.p99 for p in ps),
             statistics.median(p.p999 for p in ps), statistics.median(p.leader_us_per_commit for p in ps),
             statistics.median(p.follower_us_per_commit for p in ps),
             statistics.median(p.leader_us_per_commit for p in closed),
             statistics.median(p.follower_us_per_commit for p in closed)]
        medians[name] = m
        rows.append([name, f"{m[0]:.2f}×", f"{sum(x <= GOAL_EVERY_ROUND_X_ECHO for x in r.ratios)} / "
                     f"{sum(x <= GOAL_P50_X_ECHO for x in r.ratios)} "
                     f"of {len(r.runs)}", f"{m[1]:.3f}", f"{statistics.median(e for e, _, _ in r.runs):.3f}",
                     f"{m[2]:.3f} / {m[3]:.2f} / {m[4]:.2f}", f"{m[5]:.0f}", f"{m[6]:.0f}", f"{m[7]:.0f}",
                     f"{m[8]:.0f}"])
    new, old = medians[trees[0][0]], medians[trees[1][0]]

    def change(i: int) -> str:
        return f"{100 * (new[i] / old[i] - 1):+.0f}%"

    rows.append(["this tree vs baseline", change(0), "", change(1), "", " / ".join(change(i) for i in (2, 3, 4)),
                 change(5), change(6), change(7), change(8)])
    table("medians per tree", header, rows)
    for name, _ in trees:
        rounds[name].print(f"the p50 goal's rounds, {name}", verdicts=False)


# ================================================================================================ main


async def timed(label: str, coro: Awaitable[Any]) -> Any:
    t0 = time.monotonic()
    print(f"… {label}", file=sys.stderr, flush=True)
    result = await coro
    print(f"  done in {time.monotonic() - t0:.1f}s", file=sys.stderr, flush=True)
    return result


async def run(plan: Plan, root: Path) -> None:
    started = time.monotonic()
    request, reply = fetch_frames()
    echo_loop = await timed("echo, one event loop", echo_in_loop(request, reply, plan.echo_round_trips))
    inproc: list[InProcessResult] = []
    for fsync in plan.in_process_fsync_modes:
        inproc.append(await timed(f"in-process cluster, fsync {'on' if fsync else 'off'}",
                                  in_process_cluster(root, fsync, plan)))
    # The p50 goal's figures, in paired rounds (see the module docstring: the machine's speed drifts),
    # pinned as the goal's placement says; unpinned rounds, for information, alternate with them.
    spread = spread_placement()
    goal_rounds = Rounds(spread or UNPINNED)
    unpinned = Rounds(UNPINNED) if spread is not None else goal_rounds
    for k in range(1, max(plan.paired_rounds, plan.unpinned_rounds) + 1):
        if k <= plan.paired_rounds:
            await paired_round(root, plan, goal_rounds, f"{k}/{plan.paired_rounds}", request)
        if unpinned is not goal_rounds and k <= plan.unpinned_rounds:
            await paired_round(root, plan, unpinned, f"{k}/{plan.unpinned_rounds}", request)
    one_cpu: list[float] = []
    if (cpus := one_cpu_echo()) is not None:
        one_cpu = await timed("echo, to a child process, both ends on one CPU",
                              echo_cross_process(request, plan.echo_round_trips, cpus=cpus))
    procs: list[ProcessResult] = []
    for fsync in plan.process_fsync_modes:
        if fsync:
            procs.append(await timed("process cluster, one write at a time, fsync on",
                                     process_workload(root, "closed", fsync, 0, 0, plan)))
        procs.append(await timed(f"process cluster, paced 1,000 writes/s, fsync {'on' if fsync else 'off'}",
                                 process_workload(root, "paced", fsync, 1000, 0, plan)))
        for linger in plan.batched_lingers_ms:
            procs.append(await timed(f"process cluster, batched, linger {linger} ms, fsync {'on' if fsync else 'off'}",
                                     process_workload(root, "batched", fsync, plan.batched_throughput, linger, plan)))
    # Operators first: the paced row and the saturation row, each with the node's collector settings and Python's.
    operators: list[ProcessResult] = []
    for gc in ("node", "python"):
        operators.append(await timed(f"process cluster, paced 1,000 writes/s, fsync off, gc {gc}",
                                     process_workload(root, "ops-paced", False, 1000, 0, plan, gc=gc)))
        operators.append(await timed(f"process cluster, saturation ({SATURATION_OFFERED:,} rec/s offered), gc {gc}",
                                     process_workload(root, "ops-saturation", False, SATURATION_OFFERED,
                                                      SATURATION_LINGER_MS, plan, gc=gc)))
    fails = await timed("failover (kill -9 the leader)", failover(root, plan))
    elapsed = time.monotonic() - started

    loop_p50, proc_p50 = pct(echo_loop, 50), pct(unpinned.echo, 50)
    print(f"reference cluster benchmark: 3 voters on 127.0.0.1, {len(RECORD)}-byte records, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, data in {root}")
    print("timeouts: " + ", ".join(f"{k.removeprefix('controller.quorum.')}={v}" for k, v in SETTINGS.items()))
    print(f"node processes' event loop: {node_loop_name(plan.event_loop)}; the echo floor's: asyncio")
    print(f"the p50 goal's placement: {goal_rounds.placement.name}"
          + ("" if spread is not None else " (CPUs cannot be pinned here: the goal's verdict follows the scheduler)"))
    commit_p50 = goal_rounds.median_commit
    goal_echo = pct(goal_rounds.echo, 50)
    echo_rows = [["one event loop", f"{loop_p50:.3f}", f"{pct(echo_loop, 99):.3f}", "-"],
                 [f"to a child process, {goal_rounds.placement.name} ({len(goal_rounds.runs)} children, pooled; "
                  "the goal's floor)",
                  f"{goal_echo:.3f}", f"{pct(goal_rounds.echo, 99):.3f}", f"{commit_p50 / goal_echo:.2f}×"]]
    if unpinned is not goal_rounds:
        echo_rows.append([f"to a child process, unpinned ({len(unpinned.runs)} children, pooled; information)",
                          f"{proc_p50:.3f}", f"{pct(unpinned.echo, 99):.3f}", f"{commit_p50 / proc_p50:.2f}×"])
    if one_cpu:
        echo_rows.append(["to a child process, both ends on one CPU (information)", f"{pct(one_cpu, 50):.3f}",
                          f"{pct(one_cpu, 99):.3f}", f"{commit_p50 / pct(one_cpu, 50):.2f}×"])
    table(f"echo floor (asyncio, loopback TCP, {len(request)} B Fetch request out, {len(reply)} B Fetch response "
          "back); the last column: the goal rounds' median commit p50 over this p50 (the goal's ratio is per round, "
          "below)", ["where", "p50 ms", "p99 ms", "commit p50 / this"], echo_rows)
    goal_rounds.print(f"p50 commit latency against the echo, the goal's rounds: {goal_rounds.placement.name}; 3 "
                      "node processes, one write at a time, fsync off (each round: the echo to a new child process, "
                      "the echo reading as the node does on its event loop, a new cluster, the echo again; all on the "
                      "placement's CPUs)", verdicts=True)
    if unpinned is not goal_rounds:
        unpinned.print("the same, unpinned (information: left to the scheduler, the echo's two ends share a CPU in "
                       "some rounds and not in others, and the ratio moves with it)", verdicts=False)

    rows = []
    for r in inproc:
        f = "on" if r.fsync else "off"
        p50 = pct(r.closed_lat, 50)
        rows.append([f, "one at a time", f"{p50:.3f}", f"{pct(r.closed_lat, 99):.3f}",
                     f"{p50 / loop_p50:.1f}×", "(CPU of a commit, all nodes in series)"])
        p50, p99 = pct(r.paced_lat, 50), pct(r.paced_lat, 99)
        rows.append([f, f"paced ({r.paced_rate:,.0f}/s)", f"{p50:.3f}", f"{p99:.3f}", f"{p50 / loop_p50:.1f}×",
                     f"p99 ≤ {GOAL_P99_MS:g}: {verdict(p99 <= GOAL_P99_MS)}"])
    table("commit latency, in-process cluster (3 Nodes in one event loop), append on the leader → HW past it",
          ["fsync", "writes", "p50 ms", "p99 ms", "p50/echo", "goal"], rows)

    rows = []
    for r in inproc:
        want_fsyncs = 3.0 if r.fsync else 0.0
        check = verdict(abs(r.closed_msgs - EXPECTED_MESSAGES) < 0.05 and abs(r.closed_fsyncs - want_fsyncs) < 0.05)
        rows.append(["on" if r.fsync else "off", "one at a time", f"{r.closed_msgs:.2f}", f"{r.closed_fsyncs:.2f}",
                     f"{EXPECTED_MESSAGES:.0f} / {want_fsyncs:.0f}: {check}"])
        rows.append(["on" if r.fsync else "off", "paced 1,000/s", f"{r.paced_msgs:.2f}", f"{r.paced_fsyncs:.2f}",
                     "(writes share fetch rounds)"])
    table("per committed batch, machine-independent (in-process; messages = requests + responses, all nodes)",
          ["fsync", "writes", "messages", "fsyncs", "protocol needs (msgs / fsyncs)"], rows)
    rows = [["on" if r.fsync else "off", f"{r.max_records_s:,.0f}",
             f"≥ {GOAL_RECORDS_S:,}: {verdict(r.max_records_s >= GOAL_RECORDS_S)}"] for r in inproc]
    table(f"capacity, in-process (batches of {MAX_BATCH:,} records back to back, 2 in flight, all nodes on one core)",
          ["fsync", "committed rec/s", "goal"], rows)
    first = inproc[0]
    for r in inproc:
        if r.epochs > 1:
            print(f"  fsync {'on' if r.fsync else 'off'}: the leader changed during the run ({r.epochs} epochs): "
                  "the single event loop starved the check-quorum and fetch timers")
    print("  one at a time, by kind: " + ", ".join(f"{k} {v:.2f}" for k, v in first.closed_frames.items() if v))

    rows = []
    for p in procs:
        if p.label == "closed":
            offered = "one write at a time, 1 record"
            goal = f"p50 {p.p50 / proc_p50:.1f}× echo"
        elif p.label == "paced":
            offered = "1,000 writes/s, 1 record each"
            goal = f"p99 ≤ {GOAL_P99_MS:g}: {verdict(p.p99 <= GOAL_P99_MS)}; p50 {p.p50 / proc_p50:.1f}× echo"
        else:
            per = max(1, round(p.offered / 1000))
            offered = f"{p.offered:,} rec/s, {per:,} per write"
            goal = f"≥ {GOAL_RECORDS_S:,} rec/s: {verdict(p.records_per_s >= GOAL_RECORDS_S)}"
        rows.append(["on" if p.fsync else "off", offered, str(p.linger_ms), f"{p.records_per_batch:,.0f}",
                     f"{p.records_per_s:,.0f}", f"{p.p50:.3f}", f"{p.p99:.2f}", f"{p.p999:.2f}", f"{p.writes:,}",
                     goal + stability(p)])
    table("process cluster (3 node processes; --closed-loop workload, or --throughput with one write per ms; records/s "
          f"from the HW over {plan.window_seconds:g} s, latency per write from the leader's report)",
          ["fsync", "offered", "linger ms", "rec/batch", "committed rec/s", "p50 ms", "p99 ms", "p99.9 ms", "writes",
           "goal"], rows)

    # Goals against the figures that decide them, in one place.
    closed = next(r for r in inproc if not r.fsync)
    paced_proc = [p for p in procs if p.label == "paced" and not p.fsync]
    batched = [p for p in procs if p.label == "batched" and not p.fsync]
    where = "pinned across CPUs" if spread is not None else "unpinned"
    n_rounds = len(goal_rounds.runs)
    worst = max(goal_rounds.ratios, default=float("nan"))
    rows = [[f"p50 commit latency ≤ {GOAL_P50_X_ECHO:g}× echo, no fsync (3 processes, one at a time, {where}; median "
             f"of {n_rounds} rounds)", f"≤ {GOAL_P50_X_ECHO:g}×",
             f"{goal_rounds.ratio:.2f}× ({goal_rounds.within})", verdict(goal_rounds.ratio <= GOAL_P50_X_ECHO)],
            [f"{n_rounds} of {n_rounds} rounds ≤ {GOAL_EVERY_ROUND_X_ECHO:g}× echo (the same rounds; issue #29 asks "
             "7 of 7: the full plan)", f"every round ≤ {GOAL_EVERY_ROUND_X_ECHO:g}×",
             f"{sum(r <= GOAL_EVERY_ROUND_X_ECHO for r in goal_rounds.ratios)} of {n_rounds} (worst {worst:.2f}×)",
             verdict(goal_rounds.every_round_ok)]]
    rows += [["p99 ≤ 5 ms at 1,000 writes/s (in-process)", f"≤ {GOAL_P99_MS:g} ms",
              f"{pct(closed.paced_lat, 99):.2f} ms", verdict(pct(closed.paced_lat, 99) <= GOAL_P99_MS)]]
    rows += [["p99 ≤ 5 ms at 1,000 writes/s (3 processes)", f"≤ {GOAL_P99_MS:g} ms", f"{p.p99:.2f} ms",
              verdict(p.p99 <= GOAL_P99_MS)] for p in paced_proc]
    rows.append(["≥ 50,000 committed rec/s batched (in-process)", f"≥ {GOAL_RECORDS_S:,}",
                 f"{closed.max_records_s:,.0f}", verdict(closed.max_records_s >= GOAL_RECORDS_S)])
    rows += [[f"≥ 50,000 committed rec/s batched (3 processes, linger {p.linger_ms} ms)", f"≥ {GOAL_RECORDS_S:,}",
              f"{p.records_per_s:,.0f}", verdict(p.records_per_s >= GOAL_RECORDS_S)] for p in batched]
    rows_goals = rows
    # Operators first: the saturation row beside the 1,000 writes/s row and the echo floor, all from this run.
    rows = [["echo floor, to a child process (pooled, this run)", "-", "-", "-", "-", "-", "-",
             f"{proc_p50:.3f} / {pct(unpinned.echo, 99):.3f}", "-", "-", "-", "-", "-", "-", "-", "-", "-"]]
    for p in operators:
        offered = "1,000 writes/s" if p.offered == 1000 else f"{p.offered:,} rec/s (saturation)"
        dq = (f"{pct(p.dq_ms, 50):.1f}", f"{pct(p.dq_ms, 99):.1f}") if p.dq_ms else ("-", "-")
        rows.append([offered, "node" if p.gc == "node" else "Python's (baseline)", f"{p.records_per_s:,.0f}",
                     f"{p.refused:,}", f"{p.leaderless:.0%}", dq[0], dq[1], f"{p.p50:.3f} / {p.p99:.2f}",
                     f"{p.p999:.2f}", f"{p.rss_mib:.0f}", f"{p.leader_cpu:.2f}",
                     f"{p.gc_max_ms:.2f}" if p.gc_max_ms == p.gc_max_ms else "none", f"{p.lag_p999_ms:.2f}",
                     f"{p.late[0]} / {p.late[1]}", f"{p.follower_lag_p999_ms:.2f}",
                     f"{p.follower_late[0]} / {p.follower_late[1]}", stability(p).strip()])
    table(f"operators first (3 node processes, fsync off, unpinned; DescribeQuorum polled every {POLL_S:g} s on a new "
          f"connection with ApiVersions, {POLL_TIMEOUT_S:g} s allowed; the saturation row offers more than the "
          "cluster commits and the leader refuses the excess with REQUEST_TIMED_OUT)",
          ["offered", "gc settings", "committed rec/s", "refused writes", "DQ unanswered", "DQ p50 ms", "DQ p99 ms",
           "commit p50 / p99 ms", "commit p99.9 ms", "leader RSS MiB", "leader CPUs", "gc max pause ms",
           "timer lag p99.9 ms", "late timer on / off CPU", "followers' timer lag p99.9 ms",
           "followers' late on / off CPU", "note"],
          rows)
    sat = next(p for p in operators if p.gc == "node" and p.offered == SATURATION_OFFERED)
    paced_ops = next(p for p in operators if p.gc == "node" and p.offered == 1000)
    sat_dq99 = pct(sat.dq_ms, 99) if sat.dq_ms else float("inf")
    rows = [["DescribeQuorum answered in 100% of polls at saturation", "100%", f"{1 - sat.leaderless:.0%}",
             verdict(sat.leaderless == 0)],
            [f"DescribeQuorum p99 ≤ {GOAL_DQ_P99_MS:g} ms at saturation", f"≤ {GOAL_DQ_P99_MS:g} ms",
             f"{sat_dq99:.1f} ms", verdict(sat_dq99 <= GOAL_DQ_P99_MS)],
            [f"p99.9 ≤ {GOAL_P999_MS:g} ms at 1,000 writes/s (3 processes)", f"≤ {GOAL_P999_MS:g} ms",
             f"{paced_ops.p999:.2f} ms", verdict(paced_ops.p999 <= GOAL_P999_MS)]]
    table("goals: operators first", ["goal", "target", "measured", "verdict"], rows)
    table("goals (no fsync)", ["goal", "target", "measured", "verdict"], rows_goals)

    rows = [[str(i + 1), f"{f.to_election_ms:.0f}", f"{f.to_leader_ms:.0f}", f"{f.to_commit_ms:.0f}",
             str(f.elections)] for i, f in enumerate(fails)]
    if len(fails) > 1:
        rows.append(["median", *(f"{statistics.median(getattr(f, a) for f in fails):.0f}"
                                 for a in ("to_election_ms", "to_leader_ms", "to_commit_ms")), "-"])
    table("failover: kill -9 the leader (process cluster, fsync on, traces) → ms until …",
          ["round", "election starts", "new leader", "next committed write", "elections"], rows)
    fetch_ms = SETTINGS["controller.quorum.fetch.timeout.ms"]
    print(f"\n(followers notice the silence after fetch.timeout.ms={fetch_ms}; whole run {elapsed:.0f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a ~30 s version with shorter windows")
    parser.add_argument("--dir", type=Path, default=None, help="where to create the data dirs (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the data dirs and node logs")
    parser.add_argument("--commits", type=int, default=0, metavar="N",
                        help="only run N one-at-a-time in-process commits (for callgrind, see above)")
    parser.add_argument("--opcodes", type=int, default=0, metavar="N",
                        help="only run N one-at-a-time in-process commits counting Python opcodes per node role")
    parser.add_argument("--top", type=int, default=25, metavar="K",
                        help="with --opcodes: list the K functions that run the most opcodes per role (default 25)")
    parser.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--echo-server-buffered", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--event-loop", choices=EVENT_LOOPS, default="auto",
                        help="the node processes' event loop (kraft-tck node --event-loop); default auto")
    parser.add_argument("--baseline-tree", type=Path, default=None, metavar="DIR",
                        help="A/B only: the p50 goal's paired rounds and the paced 1,000 writes/s run, alternating "
                             "node processes from this tree and from DIR (kraft_tck imported from DIR first: e.g. "
                             "DIR/kraft_tck/{reference,spec,...} linked to a `git worktree` of the baseline)")
    parser.add_argument("--node-read-echo", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--cpus", default=None, help=argparse.SUPPRESS)  # the node-read echo's placement
    args = parser.parse_args()
    if args.echo_server:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run_echo_server())
        return
    if args.echo_server_buffered or args.node_read_echo:  # the node-read echo: on the node's event loop
        with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=loop_factory(args.event_loop)) as r:
            cpus = cast(tuple[int, int], tuple(int(c) for c in args.cpus.split(","))) if args.cpus else None
            r.run(run_node_read_echo_client(args.node_read_echo, args.event_loop, cpus) if args.node_read_echo
                  else run_echo_server(buffered=True))
        return
    parent = args.dir.resolve() if args.dir else None
    if parent:
        parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-cluster-", dir=parent))
    try:
        if args.commits:
            commit_profile(root, args.commits)
        elif args.opcodes:
            opcode_profile(root, args.opcodes, args.top)
        elif args.baseline_tree is not None:
            plan = dataclasses.replace(QUICK if args.quick else FULL, event_loop=args.event_loop)
            asyncio.run(run_ab(plan, root, args.baseline_tree.resolve()))
        else:
            asyncio.run(run(dataclasses.replace(QUICK if args.quick else FULL, event_loop=args.event_loop), root))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
