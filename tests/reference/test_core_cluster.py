"""Three pure cores wired together by hand: messages are delivered in order, time jumps to the next
deadline. A leader is elected, client records are committed, and every log ends up identical; the trace
events validate against spec/trace.schema.json (with seq added, as the trace writer does)."""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import jsonschema
from kraft_tck.reference.core import CoreConfig, KRaftCore
from kraft_tck.reference.io import (
    ClientWrite,
    ElectionState,
    Input,
    Ready,
    RequestReceived,
    ResponseReceived,
)
from kraft_tck.reference.log import Log
from kraft_tck.reference.roles import Leader
from kraft_tck.spec.trace import schema as trace_schema

VOTERS = frozenset({1, 2, 3})
SCHEMA = trace_schema()  # the one loader of spec/trace.schema.json


class Cluster:
    def __init__(self, seed: int, cluster_id: str | None = "cid") -> None:
        self.now = 0
        self.cores = {
            n: KRaftCore(
                CoreConfig(
                    n,
                    VOTERS,
                    cluster_id,
                    election_timeout_ms=300,
                    fetch_timeout_ms=600,
                    request_timeout_ms=400,
                    fetch_max_wait_ms=100,
                ),
                ElectionState(),
                Log(),
                random.Random(seed * 10 + n),
                0,
            )
            for n in VOTERS
        }
        self.inbox: deque[tuple[int, Input]] = deque()
        self.deadlines = {n: c.tick(0).next_deadline_ms for n, c in self.cores.items()}
        self.trace: list[dict[str, Any]] = []
        self.persisted: dict[int, ElectionState] = {}

    def apply(self, node: int, ready: Ready) -> None:
        # The shell's order: persist and log first, then messages.
        if ready.persist is not None:
            self.persisted[node] = ready.persist
        for out in ready.send:
            self.inbox.append((out.dest_id, RequestReceived(node, (node, out.dest_id), out.request)))
        for rep in ready.replies:
            asker, _ = rep.reply_to
            self.inbox.append((asker, ResponseReceived(node, rep.response)))
        self.trace.extend(ready.trace)
        self.deadlines[node] = ready.next_deadline_ms

    def step(self, node: int, inp: Input) -> Ready:
        ready = self.cores[node].step(inp, self.now)
        self.apply(node, ready)
        return ready

    def run_until(self, done: Any, limit_ms: int = 20_000) -> None:
        while not done():
            if self.inbox:
                dest, inp = self.inbox.popleft()
                self.step(dest, inp)
                continue
            due = [d for d in self.deadlines.values() if d is not None]
            self.now = max(self.now, min(due))
            assert self.now <= limit_ms, "cluster made no progress"
            for n, core in self.cores.items():
                if self.deadlines[n] is not None and self.deadlines[n] <= self.now:
                    self.apply(n, core.tick(self.now))

    def leaders(self) -> list[int]:
        return [n for n, c in self.cores.items() if isinstance(c.role, Leader)]


def test_three_cores_elect_one_leader_and_commit_records() -> None:
    cluster = Cluster(seed=1)
    cluster.run_until(lambda: len(cluster.leaders()) == 1 and not cluster.inbox)
    (leader_id,) = cluster.leaders()
    leader = cluster.cores[leader_id]
    ready = cluster.step(leader_id, ClientWrite((b"one", b"two")))
    assert ready.client_append is not None and ready.client_append.accepted
    target = ready.client_append.last_offset + 1
    cluster.run_until(lambda: all(c.high_watermark >= target for c in cluster.cores.values()))
    logs = {
        n: [(b.base_offset, b.partition_leader_epoch, b.records) for b in c.log.batches]
        for n, c in cluster.cores.items()
    }
    assert logs[1] == logs[2] == logs[3]
    assert {c.epoch for c in cluster.cores.values()} == {leader.epoch}
    assert all(c.leader_id == leader_id for c in cluster.cores.values())
    # ElectionSafety from the trace: one leader per epoch.
    became = [(e["state"]["epoch"], e["node"]) for e in cluster.trace if e["event"] == "BecomeLeader"]
    assert len({epoch for epoch, _ in became}) == len(became)
    for seq, event in enumerate(cluster.trace):
        jsonschema.validate({**event, "seq": seq}, SCHEMA)


def test_bootstrap_cluster_agrees_on_one_generated_cluster_id() -> None:
    cluster = Cluster(seed=4, cluster_id=None)
    cluster.run_until(lambda: all(c.cluster_id is not None for c in cluster.cores.values()))
    assert len({c.cluster_id for c in cluster.cores.values()}) == 1


def test_a_new_leader_is_elected_after_the_leader_goes_silent() -> None:
    cluster = Cluster(seed=2)
    cluster.run_until(lambda: len(cluster.leaders()) == 1 and not cluster.inbox)
    (old,) = cluster.leaders()
    old_epoch = cluster.cores[old].epoch
    dead = cluster.cores.pop(old)  # crash: it neither sends nor receives any more
    cluster.deadlines.pop(old)
    original_step = cluster.step

    def step(node: int, inp: Input) -> Ready | None:
        return None if node == old else original_step(node, inp)

    cluster.step = step  # type: ignore[method-assign]
    cluster.run_until(lambda: len(cluster.leaders()) == 1)
    (new,) = cluster.leaders()
    assert new != old and cluster.cores[new].epoch > old_epoch
    assert isinstance(dead.role, Leader)
