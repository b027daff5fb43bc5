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

    .venv/bin/python bench/bench_commit_path.py [--quick] [--evict-mib N]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from kraft_tck.reference import wire
from kraft_tck.reference.core import CoreConfig, KRaftCore
from kraft_tck.reference.io import ClientWrite, QuorumStateSnapshot, Ready, RequestReceived, ResponseReceived
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import VoteResponse
from kraft_tck.reference.roles import Leader
from kraft_tck.spec import codec

RECORD = b"r" * 100
VOTERS = frozenset({1, 2, 3})
VERSION = codec.supported_versions(wire.FETCH)[1]
CLIENT_ID = "raft-client-2"

# (segment, stage as printed, the name it is timed under) in critical-path order.
STAGES = [
    ("leader, write", "ClientAppend (core step)", "ClientAppend"),
    ("leader, write", "FetchResponse → body (wire)", "response to body"),
    ("leader, write", "body → bytes (codec)", "encode response"),
    ("leader, write", "frame with correlation id (codec)", "frame response"),
    ("follower", "bytes → body (codec)", "decode response"),
    ("follower", "body → FetchResponse (wire, batch + CRC)", "body to response"),
    ("follower", "HandleFetchResponse (core step)", "HandleFetchResponse"),
    ("follower", "FetchRequest → body (wire)", "request to body"),
    ("follower", "body → bytes (codec)", "encode request"),
    ("leader, fetch", "bytes → body (codec)", "decode request"),
    ("leader, fetch", "body → FetchRequest (wire)", "body to request"),
    ("leader, fetch", "HandleFetchRequest (core step)", "HandleFetchRequest"),
]


def _config(node_id: int) -> CoreConfig:
    # No trace: the benchmarked nodes run without --trace-file.
    return CoreConfig(node_id, VOTERS, "bench-cluster", emit_trace=False)


def _leader() -> KRaftCore:
    """Node 1, a candidate of epoch 1 that voted for itself, granted node 2's vote: the leader."""
    core = KRaftCore(_config(1), QuorumStateSnapshot(1, -1, 1), Log(()), random.Random(1), 0)
    core.step(ResponseReceived(2, VoteResponse(-1, 1, True)), 0)
    assert isinstance(core.role, Leader)
    return core


class CommitPath:
    """A leader and two followers passing real bytes, one commit at a time; ``timings`` per stage."""

    def __init__(self, evict_bytes: int) -> None:
        codec.precompile([wire.FETCH])
        self.leader = _leader()
        self.followers = {i: KRaftCore(_config(i), QuorumStateSnapshot(1, 1), Log(()), random.Random(i), 0)
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
            body = self._stage("request to body", timed, wire.request_to_body, out.request, VERSION)
            frame = self._stage("encode request", timed, codec.encode_request,
                                wire.FETCH, VERSION, 7, CLIENT_ID, body)
            self._requests[i] = (frame, out.request_id)

    def _answer(self, ready: Ready, timed: bool) -> None:
        for rep in ready.replies:
            if self._shared is not None and self._shared[0] == rep.response:
                encoded = self._shared[1]  # the other follower's answer: encoded once (Node._last_answer)
            else:
                body = self._stage("response to body", timed, wire.response_to_body, rep.response, VERSION)
                encoded = self._stage("encode response", timed, codec.encode_response_body,
                                      wire.FETCH, VERSION, body)
                self._shared = (rep.response, encoded)
            self._answers[rep.reply_to] = self._stage("frame response", timed,
                                                      codec.frame_response, wire.FETCH, VERSION, 7, encoded)

    def _leader_fetch(self, i: int, timed: bool) -> None:
        frame, request_id = self._requests.pop(i)
        self._request_ids[i] = request_id
        self._cold()
        _, body = self._stage("decode request", timed, codec.decode_request, frame[4:])
        req = self._stage("body to request", timed, wire.request_from_kafka, wire.FETCH, VERSION, body)
        ready = self._stage("HandleFetchRequest", timed, self.leader.step,
                            RequestReceived(i, i, req), self.now)
        self._answer(ready, timed)

    def _follower(self, i: int, timed: bool) -> None:
        frame = self._answers.pop(i)
        self._cold()
        _, body = self._stage("decode response", timed, codec.decode_response,
                              wire.FETCH, VERSION, frame[4:])
        resp = self._stage("body to response", timed, wire.response_from_kafka,
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


def measure(commits: int, evict_mib: int, passes: int) -> dict[bool, dict[str, float]]:
    """Median µs per stage and commit, warm (False) and evicted (True): passes alternate, medians pooled."""
    path = CommitPath(evict_mib << 20)
    for _ in range(200):
        path.commit(timed=False)
    pooled: dict[bool, dict[str, list[int]]] = {False: defaultdict(list), True: defaultdict(list)}
    for p in range(passes * 2):
        path.evicting = p % 2 == 1
        path.timings.clear()
        for _ in range(commits):
            path.commit()
        for name, values in path.timings.items():
            pooled[path.evicting][name] += values
    # Each stage runs once on the critical path (the fastest follower's round; the answer's body is
    # encoded once for both followers): the median of its calls.
    return {evicting: {name: statistics.median(v) / 1000 for name, v in stages.items()}
            for evicting, stages in pooled.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer commits (a smoke run)")
    ap.add_argument("--evict-mib", type=int, default=16, help="memory written between segments (default 16)")
    args = ap.parse_args()
    commits, passes = (300, 1) if args.quick else (1500, 3)
    res = measure(commits, args.evict_mib, passes)
    print(f"commit path, one 100-byte record, 3 voters (2 followers), Fetch v{VERSION}: median µs per stage "
          f"({commits * passes:,} commits each way)")
    header = ["segment", "stage", "warm µs", f"caches evicted ({args.evict_mib} MiB) µs", "evicted / warm"]
    rows = []
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for segment, stage, key in STAGES:
        warm, cold = res[False][key], res[True][key]
        totals[segment][0] += warm
        totals[segment][1] += cold
        rows.append([segment, stage, f"{warm:.1f}", f"{cold:.1f}", f"{cold / warm:.1f}×" if warm else "-"])
    for segment, (warm, cold) in totals.items():
        rows.append([segment, "(segment total)", f"{warm:.1f}", f"{cold:.1f}", f"{cold / warm:.1f}×"])
    warm_all = sum(w for w, _ in totals.values())
    cold_all = sum(c for _, c in totals.values())
    rows.append(["critical path", "(sum of the segments)", f"{warm_all:.1f}", f"{cold_all:.1f}",
                 f"{cold_all / warm_all:.1f}×"])
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    print("\n(sockets, disk and the event loop are not in these figures)")


if __name__ == "__main__":
    main()
