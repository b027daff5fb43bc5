"""The Python work on a commit's critical path, stage by stage, with warm caches and with evicted ones.

One commit of one 100-byte record in a 3-voter quorum crosses three segments of Python work (the
socket hops between them are not measured here):

* **leader, write** — ``ClientAppend`` (the core's step), then the parked Fetch's answer: core value →
  Kafka body (``wire``) → bytes (``codec``) → framed with the request's correlation id;
* **follower** — the answer's bytes → body → ``FetchResponse`` (batch decoded, CRC checked) →
  ``HandleFetchResponse`` (the core's step, which appends and asks for more) → ``FetchRequest`` → body →
  request bytes;
* **leader, fetch** — request bytes → body → ``FetchRequest`` → ``HandleFetchRequest`` (the core's step,
  which moves the high watermark: the commit).

Each stage is timed twice in the same run: back to back (warm caches, what an in-process profile sees)
and right after a write over ``--evict-mib`` MiB of memory (evicted caches, what a node process meets when
it wakes for a message on a machine where other processes ran in between: a 3-process cluster on 2
cores). The second column is nearer what the 3-process p50 pays: timers put inside the node processes of
a closed-loop run (2 cores) found these stages at 2-3× their warm time, between this table's 8 MiB
(1.6×) and 16 MiB (4×) evictions. That is why cutting warm CPU moves the in-process figures more
than the process cluster's, and why the work left is the memory a stage touches (objects, code) more
than its instructions. The stages are named as the core's handlers and the trace's events are.

Both of the node's Fetch paths run in the same run, passes alternating: the **dict** path (``codec`` to a
body dict, ``wire`` to the core's message: what a node that traces frames uses) and the **typed** path
(``typed_wire``: the core's message straight from and to bytes, what a node uses otherwise).

**Follower CPU per commit, 3 node processes** (``--processes``, on by default): what the stages above cost a
follower once sockets, the event loop, the segment file and the broker registry are added, as CPU time, not
wall-clock (a loaded machine stretches latencies, much less the CPU a process spends). A 3-process cluster
(``kraft-tck node``, no fsync, linger 0, the node's event loop) runs the closed-loop workload (one write at a
time: each commit is exactly one Fetch round per follower) and the paced 1,000 writes/s one; each follower's
user and system CPU (``/proc/<pid>/stat``) over a window, divided by the records committed in it (the high
watermark's growth, DescribeQuorum). Beside it, in the same run, its floor: the CPU an echo server process
on the same event loop spends per round trip when it reads a Fetch request and writes a Fetch response as
the node reads and writes them (one reused buffer, ``bench_cluster._BufferedEcho``) — the socket work of one
commit with no protocol at all. Rounds alternate; medians are printed. ``--baseline-tree DIR`` runs the
same rounds, interleaved, with node processes importing ``kraft_tck`` from ``DIR`` first (e.g. a copy of
another commit's ``reference/`` as ``DIR/kraft_tck/reference``, the other packages linked), for a before /
after in one run.

The process table prints each role's user and system CPU per commit, the leader's included, and with a baseline
tree a last row per workload with the change (this tree against the baseline, medians). Compare the two trees at a
rate both sustain (``--paced-rate``; the commits/s column): a node's fixed work per second (timers, the workload's
leadership poll, idle Fetch long-polls) is shared out over the commits, so a tree that commits faster in the closed
loop also shows less CPU per commit for that reason alone.

    .venv/bin/python bench/bench_commit_path.py [--quick] [--evict-mib N] [--no-processes] [--baseline-tree DIR]
        [--rounds N] [--workload both|closed|paced] [--paced-rate N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_cluster import SETTINGS, buffered_round_trips, fetch_frames  # the same frames and settings
from kraft_tck.reference import wire
from kraft_tck.reference.core import CoreConfig, KRaftCore
from kraft_tck.reference.io import ClientWrite, ElectionState, Ready, RequestReceived, ResponseReceived
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import VoteResponse
from kraft_tck.reference.procs import LocalCluster, free_base_port, imports_from
from kraft_tck.reference.typed_wire import TypedCodec
from kraft_tck.spec import codec

RECORD = b"r" * 100
VOTERS = frozenset({1, 2, 3})
VERSION = codec.supported_versions(wire.FETCH)[1]
CLIENT_ID = "raft-client-2"

# (segment, stage as printed, the name it is timed under) in critical-path order; a stage of one path
# only is marked with its path.
STAGES = [
    ("leader, write", "ClientAppend (core step)", "ClientAppend"),
    ("leader, write", "FetchResponse → body (wire)", "dict: response to body"),
    ("leader, write", "body → bytes (codec)", "dict: encode response"),
    ("leader, write", "FetchResponse → bytes (typed_wire)", "typed: encode response"),
    ("leader, write", "frame with correlation id (codec)", "frame response"),
    ("follower", "bytes → body (codec)", "dict: decode response"),
    ("follower", "body → FetchResponse (wire, batch + CRC)", "dict: body to response"),
    ("follower", "bytes → FetchResponse (typed_wire, batch + CRC)", "typed: decode response"),
    ("follower", "HandleFetchResponse (core step)", "HandleFetchResponse"),
    ("follower", "FetchRequest → body (wire)", "dict: request to body"),
    ("follower", "body → bytes (codec)", "dict: encode request"),
    ("follower", "FetchRequest → bytes (typed_wire)", "typed: encode request"),
    ("leader, fetch", "bytes → body (codec)", "dict: decode request"),
    ("leader, fetch", "body → FetchRequest (wire)", "dict: body to request"),
    ("leader, fetch", "bytes → FetchRequest (typed_wire)", "typed: decode request"),
    ("leader, fetch", "HandleFetchRequest (core step)", "HandleFetchRequest"),
]
PATHS = ("dict", "typed")


def _config(node_id: int) -> CoreConfig:
    # No trace: the benchmarked nodes run without --trace-file.
    return CoreConfig(node_id, VOTERS, "bench-cluster", emit_trace=False)


def _leader() -> KRaftCore:
    """Node 1, a candidate of epoch 1 that voted for itself, granted node 2's vote: the leader."""
    core = KRaftCore(_config(1), ElectionState(1, -1, 1), Log(()), random.Random(1), 0)
    core.step(ResponseReceived(2, VoteResponse(-1, 1, True)), 0)
    assert core.status().is_leader
    return core


class CommitPath:
    """A leader and two followers passing real bytes, one commit at a time; ``timings`` per stage."""

    def __init__(self, evict_bytes: int, typed: bool) -> None:
        codec.precompile([wire.FETCH])
        self.typed: TypedCodec | None = None
        if typed:
            self.typed = TypedCodec()
            self.typed.precompile(range(VERSION, VERSION + 1))
        self.leader = _leader()
        self.followers = {i: KRaftCore(_config(i), ElectionState(1, 1), Log(()), random.Random(i), 0)
                          for i in (2, 3)}
        self.now = 10
        self.evict = bytearray(evict_bytes)
        self.evicting = False
        self.timings: dict[str, list[int]] = defaultdict(list)
        self._requests: dict[int, tuple[bytes, int]] = {}  # follower -> (request frame, request id)
        self._request_ids: dict[int, int] = {}
        self._answers: dict[int, bytes] = {}  # follower -> framed answer to its parked Fetch
        self._shared: tuple[Any, bytes] | None = None  # (response, encoded body), as Node._apply shares it
        for i, f in self.followers.items():
            self._collect_request(i, f.tick(self.now), timed=False)
        for i in self.followers:
            self._leader_fetch(i, timed=False)  # answered at once: the LeaderChange record
        for i in self.followers:
            self._follower(i, timed=False)
        for i in self.followers:
            self._leader_fetch(i, timed=False)  # caught up: parked until the next write, the steady state
        assert not self._answers and self.leader.high_watermark == 1

    def _cold(self) -> None:
        if self.evicting:
            self.evict[::64] = b"\x01" * (len(self.evict) // 64)  # one write per cache line

    def _stage(self, name: str, timed: bool, fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter_ns()
        out = fn(*args)
        if timed:
            self.timings[name].append(time.perf_counter_ns() - t0)
        return out

    def _collect_request(self, i: int, ready: Ready, timed: bool) -> None:
        for out in ready.send:
            if self.typed is not None:
                frame = self._stage("typed: encode request", timed, self.typed.encode_request,
                                    wire.FETCH, VERSION, 7, CLIENT_ID, out.request)
            else:
                body = self._stage("dict: request to body", timed, wire.request_to_body, out.request, VERSION)
                frame = self._stage("dict: encode request", timed, codec.encode_request,
                                    wire.FETCH, VERSION, 7, CLIENT_ID, body)
            self._requests[i] = (frame, out.request_id)

    def _answer(self, ready: Ready, timed: bool) -> None:
        for rep in ready.replies:
            if self._shared is not None and self._shared[0] == rep.response:
                encoded = self._shared[1]  # the other follower's answer: encoded once (Node._last_answer)
            elif self.typed is not None:
                encoded = self._stage("typed: encode response", timed, self.typed.encode_response_body,
                                      VERSION, rep.response, {})
                self._shared = (rep.response, encoded)
            else:
                body = self._stage("dict: response to body", timed, wire.response_to_body, rep.response, VERSION)
                encoded = self._stage("dict: encode response", timed, codec.encode_response_body,
                                      wire.FETCH, VERSION, body)
                self._shared = (rep.response, encoded)
            self._answers[rep.reply_to] = self._stage("frame response", timed,
                                                      codec.frame_response, wire.FETCH, VERSION, 7, encoded)

    def _leader_fetch(self, i: int, timed: bool) -> None:
        frame, request_id = self._requests.pop(i)
        self._request_ids[i] = request_id
        self._cold()
        if self.typed is not None:
            _, req = self._stage("typed: decode request", timed, self.typed.decode_request, frame[4:])
        else:
            _, body = self._stage("dict: decode request", timed, codec.decode_request, frame[4:])
            req = self._stage("dict: body to request", timed, wire.request_from_kafka, wire.FETCH, VERSION, body)
        ready = self._stage("HandleFetchRequest", timed, self.leader.step,
                            RequestReceived(i, i, req), self.now)
        self._answer(ready, timed)

    def _follower(self, i: int, timed: bool) -> None:
        frame = self._answers.pop(i)
        self._cold()
        if self.typed is not None:
            _, resp = self._stage("typed: decode response", timed, self.typed.decode_response,
                                  wire.FETCH, VERSION, frame[4:])
        else:
            _, body = self._stage("dict: decode response", timed, codec.decode_response,
                                  wire.FETCH, VERSION, frame[4:])
            resp = self._stage("dict: body to response", timed, wire.response_from_kafka,
                               wire.FETCH, VERSION, body)
        ready = self._stage("HandleFetchResponse", timed, self.followers[i].step,
                            ResponseReceived(1, resp, self._request_ids[i]), self.now)
        self._collect_request(i, ready, timed)

    def commit(self, timed: bool = True) -> None:
        self.now += 1
        hw = self.leader.high_watermark
        self._cold()
        ready = self._stage("ClientAppend", timed, self.leader.step, ClientWrite((RECORD,)), self.now)
        self._answer(ready, timed)
        for i in self.followers:
            self._follower(i, timed)
        for i in self.followers:
            self._leader_fetch(i, timed)
        # Each round commits exactly its record, and both fetches wait parked for the next write.
        assert self.leader.high_watermark == hw + 1 and not self._answers


def measure(commits: int, evict_mib: int, passes: int) -> dict[tuple[str, bool], dict[str, float]]:
    """Median µs per stage and commit, per (path, evicted caches?): passes alternate warm and evicted and,
    within each, the two paths (in turns first); medians pooled over the passes."""
    paths = {name: CommitPath(evict_mib << 20, typed=name == "typed") for name in PATHS}
    for path in paths.values():
        for _ in range(200):
            path.commit(timed=False)
    pooled: dict[tuple[str, bool], dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for p in range(passes * 2):
        evicting = p % 2 == 1
        for name in PATHS if p % 4 < 2 else reversed(PATHS):
            path = paths[name]
            path.evicting = evicting
            path.timings.clear()
            for _ in range(commits):
                path.commit()
            for stage, values in path.timings.items():
                pooled[(name, evicting)][stage] += values
    # Each stage runs once on the critical path (the fastest follower's round; the answer's body is
    # encoded once for both followers): the median of its calls.
    return {key: {stage: statistics.median(v) / 1000 for stage, v in stages.items()}
            for key, stages in pooled.items()}


# ================================================================================================ processes

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: (label, ``kraft-tck node`` workload arguments) of the process rounds.
WORKLOADS = (("closed loop (one write at a time)", ["--closed-loop"]),
             ("paced, 1,000 writes/s", ["--throughput", "1000"]))


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of process ``pid`` so far, every thread (Linux ``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


@dataclass
class CpuRound:
    """One window of one cluster: µs of CPU per committed record, per process."""

    tree: str  # "this tree" or the baseline's
    workload: str
    commits_per_s: float
    followers: list[tuple[float, float]]  # (user, system) µs per commit, each follower
    leader: tuple[float, float]

    @property
    def follower_total(self) -> float:
        """The followers' mean CPU per commit (user + system), µs."""
        return statistics.fmean(u + k for u, k in self.followers)




async def cluster_cpu(root: Path, tree: Path | None, label: str, workload: list[str], warmup_s: float,
                      window_s: float) -> CpuRound:
    """A fresh 3-process cluster running ``workload``; CPU per committed record over ``window_s``."""
    c = LocalCluster(root, voters=3, base_port=free_base_port(3),
                     settings={**SETTINGS, "controller.quorum.append.linger.ms": 0},
                     extra_args=[*workload, "--record-size", str(len(RECORD)), "--no-fsync"])
    c.prepare()
    with imports_from(tree):
        c.start_all()
    try:
        leader = (await c.wait_for_leader(60, min_hw=2)).leader_id  # a loaded machine elects slowly
        await asyncio.sleep(warmup_s)
        q0 = await c.describe([leader], timeout_s=2)
        cpu0 = {i: cpu_seconds(p.pid) for i, p in c.procs.items()}
        await asyncio.sleep(window_s)
        q1 = await c.describe([leader], timeout_s=2)
        cpu1 = {i: cpu_seconds(p.pid) for i, p in c.procs.items()}
        if q0 is None or q1 is None or q1.leader_id != leader or q1.leader_epoch != q0.leader_epoch:
            raise RuntimeError(f"{label}: the leader changed or did not answer during the window")
        commits = max(1, q1.high_watermark - q0.high_watermark)

        def per_commit(i: int) -> tuple[float, float]:
            return ((cpu1[i][0] - cpu0[i][0]) * 1e6 / commits, (cpu1[i][1] - cpu0[i][1]) * 1e6 / commits)

        return CpuRound(label, " ".join(workload), commits / window_s,
                        [per_commit(i) for i in sorted(c.procs) if i != leader], per_commit(leader))
    finally:
        c.stop_all(signal.SIGTERM)


async def echo_cpu(n: int) -> tuple[float, float]:
    """(user, system) µs of CPU per round trip of an echo server process on the node's event loop, reading
    Fetch requests and writing Fetch responses as the node does (``bench_cluster --echo-server-buffered``)."""
    request, _ = fetch_frames()
    script = str(Path(__file__).with_name("bench_cluster.py"))
    child = await asyncio.create_subprocess_exec(sys.executable, script, "--echo-server-buffered",
                                                 "--event-loop", "auto", stdout=asyncio.subprocess.PIPE)
    try:
        assert child.stdout is not None
        port = int((await asyncio.wait_for(child.stdout.readline(), 20)).decode())
        await buffered_round_trips(port, request, n // 10)  # warm-up
        cpu0 = cpu_seconds(child.pid)
        await buffered_round_trips(port, request, n)
        cpu1 = cpu_seconds(child.pid)
        return (cpu1[0] - cpu0[0]) * 1e6 / n, (cpu1[1] - cpu0[1]) * 1e6 / n
    finally:
        child.terminate()
        await child.wait()


def _median_pair(values: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(u for u, _ in values), statistics.median(k for _, k in values)


async def processes(rounds: int, warmup_s: float, window_s: float, echo_n: int, baseline: Path | None,
                    workloads: tuple[tuple[str, list[str]], ...] = WORKLOADS) -> None:
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if baseline is not None:
        trees.append((f"baseline {baseline}", baseline))
    root = Path(tempfile.mkdtemp(prefix="bench-commit-path-"))
    results: list[CpuRound] = []
    echoes: list[tuple[float, float]] = []
    try:
        for r in range(rounds):
            echoes.append(await echo_cpu(echo_n))
            for label, workload in workloads:
                order = trees if r % 2 == 0 else list(reversed(trees))
                for name, tree in order:
                    res = await cluster_cpu(root / f"r{r}-{len(results)}", tree, name, workload, warmup_s, window_s)
                    res.workload = label
                    results.append(res)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()
    print(f"\nfollower CPU per commit, 3 node processes (no fsync, linger 0, the node's event loop), one 100-byte "
          f"record per write; median of {rounds} round(s), {window_s:g} s windows; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (2 CPUs shared with whatever else runs)")
    eu, ek = _median_pair(echoes)
    header = ["workload", "node processes", "commits/s", "follower user µs", "follower sys µs",
              "follower total µs", "÷ echo", "leader user µs", "leader sys µs", "leader total µs"]
    rows = [["echo floor (server process, per round trip)", "-", "-", f"{eu:.1f}", f"{ek:.1f}", f"{eu + ek:.1f}",
             "1.00", "-", "-", "-"]]
    for label, _ in workloads:
        medians: dict[str, tuple[float, float]] = {}
        for name, _tree in trees:
            mine = [x for x in results if x.workload == label and x.tree == name]
            fu, fk = _median_pair([f for x in mine for f in x.followers])
            lu, lk = _median_pair([x.leader for x in mine])
            total = statistics.median(x.follower_total for x in mine)
            leader = statistics.median(sum(x.leader) for x in mine)
            medians[name] = (total, leader)
            rows.append([label, name, f"{statistics.median(x.commits_per_s for x in mine):,.0f}", f"{fu:.1f}",
                         f"{fk:.1f}", f"{total:.1f}", f"{total / max(eu + ek, 1e-9):.2f}", f"{lu:.1f}", f"{lk:.1f}",
                         f"{leader:.1f}"])
        if len(trees) == 2:
            (f_new, l_new), (f_old, l_old) = medians[trees[0][0]], medians[trees[1][0]]
            rows.append([label, "this tree vs baseline", "", "", "", f"{100 * (f_new / f_old - 1):+.0f}%", "", "", "",
                         f"{100 * (l_new / l_old - 1):+.0f}%"])
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    for line in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(line, widths, strict=True))))
    print("(a follower's commit = receive one Fetch response, append, apply, send the next Fetch: the echo floor is "
          "the same two socket operations with no protocol)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer commits (a smoke run)")
    ap.add_argument("--evict-mib", type=int, default=16, help="memory written between segments (default 16)")
    ap.add_argument("--no-processes", action="store_true", help="skip the 3-process follower CPU table")
    ap.add_argument("--processes-only", action="store_true", help="only the 3-process follower CPU table")
    ap.add_argument("--baseline-tree", type=Path, default=None,
                    help="also run the process rounds with node processes importing kraft_tck from this directory")
    ap.add_argument("--rounds", type=int, default=0, help="process rounds (default 3, 1 with --quick)")
    ap.add_argument("--workload", choices=("both", "closed", "paced"), default="both",
                    help="which process workloads to run (the closed loop is one Fetch round per commit at any load; "
                         "the paced one batches more per round when a node falls behind)")
    ap.add_argument("--paced-rate", type=int, default=1000,
                    help="writes/s of the paced workload (default 1,000); a before/after compares CPU per commit "
                         "fairly only at a rate both trees sustain (the commits/s column), since a node's fixed "
                         "work per second (timers, polls) is shared out over the commits")
    args = ap.parse_args()
    if not args.processes_only:
        stages(args)
    if not args.no_processes:
        rounds, warmup_s, window_s, echo_n = (1, 1.0, 3.0, 3000) if args.quick else (3, 1.5, 6.0, 10_000)
        paced = ((f"paced, {args.paced_rate:,} writes/s", ["--throughput", str(args.paced_rate)]),)
        workloads = {"both": WORKLOADS[:1] + paced, "closed": WORKLOADS[:1], "paced": paced}[args.workload]
        asyncio.run(processes(args.rounds or rounds, warmup_s, window_s, echo_n, args.baseline_tree, workloads))


def stages(args: argparse.Namespace) -> None:
    commits, passes = (300, 1) if args.quick else (1500, 3)
    res = measure(commits, args.evict_mib, passes)
    print(f"commit path, one 100-byte record, 3 voters (2 followers), Fetch v{VERSION}: median µs per stage "
          f"({commits * passes:,} commits each way; evicted = after writing over {args.evict_mib} MiB)")
    columns = [(name, evicting) for name in PATHS for evicting in (False, True)]
    header = ["segment", "stage", *(f"{name} {'evicted' if e else 'warm'} µs" for name, e in columns)]
    rows = []
    totals: dict[str, dict[tuple[str, bool], float]] = defaultdict(lambda: defaultdict(float))
    for segment, stage, key in STAGES:
        row = [segment, stage]
        for name, evicting in columns:
            only = key.split(": ", 1)[0] if ": " in key else None
            if only not in (None, name):
                row.append("-")
                continue
            value = res[(name, evicting)][key]
            totals[segment][(name, evicting)] += value
            row.append(f"{value:.1f}")
        rows.append(row)
    for segment, by_column in totals.items():
        rows.append([segment, "(segment total)", *(f"{by_column[c]:.1f}" for c in columns)])
    path_total = {c: sum(t[c] for t in totals.values()) for c in columns}
    rows.append(["critical path", "(sum of the segments)", *(f"{path_total[c]:.1f}" for c in columns)])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    for evicting in (False, True):
        ratio = path_total[("typed", evicting)] / path_total[("dict", evicting)]
        print(f"typed / dict, critical path, {'evicted' if evicting else 'warm'}: {ratio:.2f}×")
    print("\n(sockets, disk and the event loop are not in these figures; the 3-process table has them)")


if __name__ == "__main__":
    main()
