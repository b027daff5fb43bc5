"""The deterministic cluster simulator: N unmodified reference cores, a virtual clock, a virtual network.

The simulator is the cores' shell (reference/io.py's contract): it feeds one input at a time, applies
each ``Ready`` bundle in the required order — quorum-state and log operations onto the node's "disk"
first, then messages — and keeps per node exactly what survives a crash: the last persisted
``QuorumStateSnapshot``, the log as of the last applied log operations, and the adopted cluster id
(meta.properties). A restart rebuilds the core from those alone via ``KRaftCore.restart``.

Determinism (FoundationDB / TigerBeetle VOPR style): time is an integer virtual millisecond; events sit
in one heap ordered by (time, insertion number); every random choice — network delays, loss,
duplication, reordering, clock skew, timer jitter, client writes, the fault schedule when drawn, and the
seed of each core's own rng — comes from one ``random.Random(seed)``, in event order. Same seed, same
trace, byte for byte. Wall-clock time never enters.

Trace timestamps (``ts``) are global virtual time; each node's core runs on its own skewed clock.
"""

from __future__ import annotations

import dataclasses
import heapq
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft_tck.reference.core import CoreConfig, KRaftCore, SafetyViolation
from kraft_tck.reference.io import (
    AppendBatches,
    ClientWrite,
    OutboundRequest,
    QuorumStateSnapshot,
    Ready,
    Reply,
    RequestFailed,
    RequestReceived,
    ResponseReceived,
    Shutdown,
    TruncateTo,
)
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import FetchRequest, Request, Response, VoteRequest, VoteResponse, api_name
from kraft_tck.traces.sim.bodies import MessageBodies
from kraft_tck.traces.sim.faults import (
    GRACE_MS,
    ClockConfig,
    Crash,
    Fault,
    Lossy,
    NetConfig,
    OneWay,
    Partition,
    fault_sort_key,
    profile,
    random_schedule,
    validate_schedule,
)
from kraft_tck.traces.sim.invariants import INVARIANTS, InvariantChecker, InvariantViolation
from kraft_tck.traces.trace import TraceWriter

IMPLEMENTATION = "kraft-tck-reference/0.1.0"

# Event kinds in the heap. Plain ints (not an Enum) because the loop dispatches on them millions of times.
_TICK, _REQUEST, _RESPONSE, _TIMEOUT, _FAULT_START, _FAULT_END, _RESTART, _CRASH, _WRITE = range(9)


@dataclass(frozen=True)
class SimConfig:
    """One seed's run. ``faults=None`` draws the schedule from the seed and ``profile``; an explicit
    tuple (hypothesis, a reproduction) is used as given. ``net``/``clock`` default to the profile's."""

    seed: int
    nodes: int = 3
    duration_ms: int = 60_000
    profile: str = "default"
    write_rate: float = 10.0  # client writes per virtual second, on the leader
    faults: tuple[Fault, ...] | None = None
    net: NetConfig | None = None
    clock: ClockConfig | None = None
    cluster_id: str | None = None  # None: the first leader bootstraps one (KIP-595 "Cluster Bootstrapping")
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    fetch_max_wait_ms: int = 500

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")
        if self.duration_ms <= 0:
            raise ValueError(f"duration_ms must be > 0, got {self.duration_ms}")
        if self.write_rate < 0:
            raise ValueError(f"write_rate must be >= 0, got {self.write_rate}")
        profile(self.profile)  # names the choices when unknown
        if self.faults is not None:
            validate_schedule(self.faults, self.node_ids)

    @property
    def node_ids(self) -> list[int]:
        return list(range(1, self.nodes + 1))


@dataclass
class SimResult:
    seed: int
    events: int
    virtual_ms: int
    wall_s: float
    leaders: dict[int, int]  # epoch -> leader
    committed: int  # offsets below this were committed
    writes_accepted: int
    writes_refused: int
    faults: tuple[Fault, ...]
    violation: InvariantViolation | None = None
    trace_path: Path | None = None

    def raise_for_violation(self) -> None:
        if self.violation is not None:
            raise self.violation


class SimulationError(RuntimeError):
    """The simulation itself (or a core) crashed with something that is not an invariant violation."""


@dataclass
class _Node:
    id: int
    cfg: CoreConfig
    ppm: int  # clock skew
    durable: QuorumStateSnapshot
    disk: Log = field(default_factory=Log)  # the durable log: mirrors every applied log op
    cluster_id: str | None = None  # meta.properties
    core: KRaftCore | None = None
    incarnation: int = 0
    tick_at: int | None = None
    hw: int = 0  # the core's high watermark after its last step
    # correlation id -> (dest, api, the core's request id)
    inflight: dict[int, tuple[int, str, int]] = field(default_factory=dict)

    def local(self, now: int) -> int:
        """This node's clock reading at global virtual time ``now`` (monotonic in ``now``)."""
        return now + (now * self.ppm) // 1_000_000

    def global_time(self, local: int) -> int:
        """The earliest global time at which this node's clock reads ``local`` or later."""
        if self.ppm == 0:
            return local
        g = max(0, (local * 1_000_000) // (1_000_000 + self.ppm))
        while self.local(g) < local:
            g += 1
        while g > 0 and self.local(g - 1) >= local:
            g -= 1
        return g


class Simulation:
    """Run one seed. ``core_class`` lets tests run a deliberately broken core subclass."""

    def __init__(
        self,
        config: SimConfig,
        trace_path: str | Path | None = None,
        core_class: type[KRaftCore] = KRaftCore,
    ) -> None:
        self.config = config
        self.core_class = core_class
        prof = profile(config.profile)
        self.net = config.net or prof.net
        self.clock = config.clock or prof.clock
        self.rng = random.Random(config.seed)
        ids = config.node_ids
        if config.faults is None:
            self.faults = tuple(random_schedule(self.rng, ids, config.duration_ms, prof))
        else:
            self.faults = tuple(sorted(config.faults, key=fault_sort_key))
        voters = frozenset(ids)
        skew = self.clock.max_skew_ppm
        self.nodes: dict[int, _Node] = {}
        for i in ids:
            cfg = CoreConfig(
                node_id=i,
                voters=voters,
                cluster_id=config.cluster_id,
                election_timeout_ms=config.election_timeout_ms,
                fetch_timeout_ms=config.fetch_timeout_ms,
                election_backoff_max_ms=config.election_backoff_max_ms,
                request_timeout_ms=config.request_timeout_ms,
                fetch_max_wait_ms=config.fetch_max_wait_ms,
            )
            ppm = self.rng.randint(-skew, skew) if skew else 0
            self.nodes[i] = _Node(
                i, cfg, ppm, QuorumStateSnapshot(voters=tuple(ids)), cluster_id=config.cluster_id
            )
        self.checker = InvariantChecker(config.seed)
        self.now = 0
        self.seq = 0  # trace sequence number of the next event (counted even when not tracing)
        self._heap: list[tuple[int, int, int, Any, Any]] = []
        self._order = 0
        self._corr = 0
        self._blocked: dict[tuple[int, int], int] = {}  # (src, dst) -> active faults blocking it
        self._extra_loss: list[float] = []
        self._link_clear: dict[tuple[int, int], int] = {}  # (src, dst) -> arrival time of its last message
        self._writes = 0
        self.writes_accepted = 0
        self.writes_refused = 0
        self.trace_path = Path(trace_path) if trace_path is not None else None
        self._writer: TraceWriter | None = None
        self._bodies = MessageBodies() if self.trace_path is not None else None

    # ------------------------------------------------------------------------------------ running

    def header(self) -> dict[str, Any]:
        c = self.config
        return {
            "source": "simulator",
            "run": f"seed-{c.seed}",
            "implementation": IMPLEMENTATION,
            "clusterId": c.cluster_id,
            "voters": c.node_ids,
            "config": {
                "controller.quorum.election.timeout.ms": c.election_timeout_ms,
                "controller.quorum.fetch.timeout.ms": c.fetch_timeout_ms,
                "controller.quorum.election.backoff.max.ms": c.election_backoff_max_ms,
                "controller.quorum.request.timeout.ms": c.request_timeout_ms,
                "controller.quorum.fetch.max.wait.ms": c.fetch_max_wait_ms,
                "seed": c.seed,
                "nodes": c.nodes,
                "duration.ms": c.duration_ms,
                "faults.profile": c.profile,
                "write.rate": c.write_rate,
                "net": dataclasses.asdict(self.net),
                "clock": dataclasses.asdict(self.clock),
                "clock.skew.ppm": {str(n.id): n.ppm for n in self.nodes.values()},
                "schedule": [{"kind": type(f).__name__, **_fault_fields(f)} for f in self.faults],
            },
        }

    def run(self) -> SimResult:
        """Run to ``duration_ms`` or the first invariant violation (which ends this seed)."""
        started = time.perf_counter()
        violation: InvariantViolation | None = None
        if self.trace_path is not None:
            self._writer = TraceWriter(self.trace_path, self.header(), validate=False)
        try:
            self._schedule_start()
            self._loop()
        except InvariantViolation as exc:
            violation = exc
        finally:
            if self._writer is not None:
                self._writer.close()
        return SimResult(
            seed=self.config.seed,
            events=self.seq,
            virtual_ms=self.now,
            wall_s=time.perf_counter() - started,
            leaders=dict(sorted(self.checker.leaders.items())),
            committed=self.checker.committed_end,
            writes_accepted=self.writes_accepted,
            writes_refused=self.writes_refused,
            faults=self.faults,
            violation=violation,
            trace_path=self.trace_path,
        )

    def _push(self, at: int, kind: int, a: Any, b: Any = None) -> None:
        self._order += 1
        heapq.heappush(self._heap, (at, self._order, kind, a, b))

    def _schedule_start(self) -> None:
        for node in self.nodes.values():
            self._push(0, _RESTART, node.id, node.incarnation)
        for f in self.faults:
            self._push(f.at_ms, _FAULT_START, f)
        if self.config.write_rate > 0:
            self._push(self._next_write_gap(), _WRITE, None)

    def _loop(self) -> None:
        heap, end, pop = self._heap, self.config.duration_ms, heapq.heappop
        nodes = self.nodes
        while heap:
            at, _, kind, a, b = pop(heap)
            if at > end:
                self.now = end
                break
            self.now = at
            if kind == _TICK:
                node = nodes[a]
                if node.core is not None and node.incarnation == b and node.tick_at == at:
                    node.tick_at = None
                    self._apply(node, node.core.tick(node.local(at)))
            elif kind == _REQUEST:
                self._deliver_request(nodes[a], b)
            elif kind == _RESPONSE:
                self._deliver_response(nodes[a], b)
            elif kind == _TIMEOUT:
                self._timeout(nodes[a], b)
            elif kind == _FAULT_START:
                self._fault_start(a)
            elif kind == _FAULT_END:
                self._fault_end(a)
            elif kind == _RESTART:
                self._restart(nodes[a], b)
            elif kind == _CRASH:
                node = nodes[a]
                if node.core is not None and node.incarnation == b:
                    self._crash(node)
            elif kind == _WRITE:
                self._client_write()
            else:  # pragma: no cover - the kinds above are exhaustive
                raise SimulationError(f"unknown event kind {kind}")

    # ------------------------------------------------------------------------------------ the shell

    def _step(self, node: _Node, inp: Any) -> None:
        assert node.core is not None
        try:
            ready = node.core.step(inp, node.local(self.now))
        except SafetyViolation as exc:
            raise self._from_core(node, exc) from exc
        self._apply(node, ready)

    def _from_core(self, node: _Node, exc: SafetyViolation) -> InvariantViolation:
        """The core caught itself about to break a property: report it like the checker would."""
        text = str(exc)
        name = text.split(":", 1)[0]
        epoch = node.core.epoch if node.core is not None else -1
        return self.checker.fail(
            name if name in INVARIANTS else "SafetyViolation",
            node.id,
            epoch,
            self.seq,
            self.now,
            f"raised by the core: {text}",
        )

    def _apply(self, node: _Node, ready: Ready) -> None:
        """reference/io.py's order: quorum-state and log (the "fsync") before any message leaves."""
        now, checker, nid = self.now, self.checker, node.id
        core = node.core
        assert core is not None
        first_seq = self.seq
        if ready.persist is not None:
            node.durable = ready.persist
        if ready.log_ops:
            disk, epoch = node.disk, core.epoch
            for op in ready.log_ops:
                if isinstance(op, AppendBatches):
                    for batch in op.batches:
                        checker.check_append(nid, batch, first_seq, now)
                    disk.append(op.batches)
                elif isinstance(op, TruncateTo):
                    checker.check_truncate(nid, op.offset, disk, epoch, first_seq, now)
                    disk.truncate_to(op.offset)
            if disk.end_offset != core.log.end_offset:
                raise SimulationError(
                    f"seed {self.config.seed}: node {nid}'s durable log ends at {disk.end_offset} but "
                    f"its core's at {core.log.end_offset}: Ready's log ops do not match the core's log"
                )
        if ready.cluster_id_adopted is not None:
            node.cluster_id = ready.cluster_id_adopted
        writer = self._writer
        for ev in ready.trace:
            ev["ts"] = now
            checker.check_state(nid, ev["state"], self.seq, now)
            self.seq += 1
            if writer is not None:
                del ev["type"]
                writer.emit(ev)
        hw = core.high_watermark
        if hw != node.hw:
            checker.note_high_watermark(nid, node.hw, hw, core.log, core.epoch, self.seq - 1, now)
            node.hw = hw
        for out in ready.send:
            self._send_request(node, out)
        for rep in ready.replies:
            self._send_response(node, rep)
        deadline = ready.next_deadline_ms
        if deadline is None:
            node.tick_at = None
        else:
            at = node.global_time(deadline)
            jitter = self.clock.tick_jitter_ms
            if jitter:
                at += self.rng.randrange(jitter + 1)
            if at <= now:
                at = now + 1  # a deadline already due right after a step: never spin at one instant
            if at != node.tick_at:
                node.tick_at = at
                self._push(at, _TICK, nid, node.incarnation)

    # ------------------------------------------------------------------------------------ network

    def _fate(self, src: int, dst: int) -> tuple[list[int], str | None]:
        """Arrival delays of the copies of one message (empty: lost), and why it was lost."""
        net, rng = self.net, self.rng
        if self._blocked.get((src, dst)):
            return [], "partitioned"
        loss = net.loss
        for extra in self._extra_loss:
            loss = 1 - (1 - loss) * (1 - extra)
        if loss and rng.random() < loss:
            return [], "lost"
        copies = 2 if net.duplicate and rng.random() < net.duplicate else 1
        delays = []
        link = (src, dst)
        for _ in range(copies):
            d = rng.randint(net.min_delay_ms, net.max_delay_ms)
            if net.reorder and rng.random() < net.reorder:
                # Overtaken: this one copy leaves the link's FIFO order and arrives late.
                delays.append(d + rng.randint(0, net.reorder_max_ms))
                continue
            # Like one TCP connection per direction: a message never overtakes an earlier one on its link.
            arrive = max(self.now + d, self._link_clear.get(link, 0))
            self._link_clear[link] = arrive
            delays.append(arrive - self.now)
        return delays, None

    def _send_request(self, node: _Node, out: OutboundRequest) -> None:
        src, dst, req = node.id, out.dest_id, out.request
        self._corr += 1
        corr = self._corr
        api = api_name(req)
        node.inflight[corr] = (dst, api, out.request_id)
        target = self.nodes.get(dst)
        if target is None:
            raise SimulationError(f"node {src} sent {api} to unknown node {dst}")
        delays: list[int]
        why: str | None
        if target.core is None:
            delays, why = [], "refused: destination down"
            self._push(self.now + self.net.min_delay_ms + 1, _TIMEOUT, src, (corr, node.incarnation))
        else:
            delays, why = self._fate(src, dst)
            wait = req.max_wait_ms if isinstance(req, FetchRequest) else 0
            self._push(
                self.now + self.config.request_timeout_ms + wait, _TIMEOUT, src, (corr, node.incarnation)
            )
        if self._writer is not None:
            self._message_event(src, "Send", self._bodies_req(req, corr, src, dst), why)
        else:
            self.seq += 1
        for i, d in enumerate(delays):
            self._push(self.now + d, _REQUEST, dst, (src, corr, req, target.incarnation, i > 0))

    def _send_response(self, node: _Node, rep: Reply) -> None:
        token = rep.reply_to
        assert isinstance(token, tuple), f"reply_to {token!r} is not a simulator token"
        dst, corr, candidate = token
        resp = rep.response
        if type(resp) is VoteResponse and resp.vote_granted:
            self.checker.check_vote_granted(node.id, resp.leader_epoch, candidate, self.seq, self.now)
        delays, why = self._fate(node.id, dst)
        if self._writer is not None:
            self._message_event(node.id, "Send", self._bodies_resp(rep.response, corr, node.id, dst), why)
        else:
            self.seq += 1
        for i, d in enumerate(delays):
            self._push(self.now + d, _RESPONSE, dst, (node.id, corr, rep.response, i > 0))

    def _bodies_req(self, req: Request, corr: int, src: int, dst: int) -> dict[str, Any]:
        assert self._bodies is not None
        return self._bodies.request(req, corr, src, dst)

    def _bodies_resp(self, resp: Response, corr: int, src: int, dst: int) -> dict[str, Any]:
        assert self._bodies is not None
        return self._bodies.response(resp, corr, src, dst)

    def _message_event(self, nid: int, event: str, msg: dict[str, Any], note: str | None) -> None:
        assert self._writer is not None
        ev: dict[str, Any] = {"ts": self.now, "node": nid, "event": event, "msg": msg}
        if note is not None:
            ev["note"] = note
        self._writer.emit(ev)
        self.seq += 1

    def _deliver_request(self, node: _Node, payload: tuple[int, int, Request, int, bool]) -> None:
        src, corr, req, incarnation, dup = payload
        if node.core is None or node.incarnation != incarnation:
            return  # the connection died with the old process: the sender times out
        if self._writer is not None:
            self._message_event(
                node.id, "Receive", self._bodies_req(req, corr, src, node.id), "duplicate" if dup else None
            )
        else:
            self.seq += 1
        # The token carries the candidate so a granted vote can be checked against the vote's real target.
        candidate = req.candidate_id if type(req) is VoteRequest else src
        self._step(node, RequestReceived(sender_id=src, reply_to=(src, corr, candidate), request=req))

    def _deliver_response(self, node: _Node, payload: tuple[int, int, Response, bool]) -> None:
        src, corr, resp, dup = payload
        pending = node.inflight.pop(corr, None) if node.core is not None else None
        if pending is None:
            return  # a late, duplicate or orphaned response: the client has no such correlation id
        if self._writer is not None:
            self._message_event(
                node.id, "Receive", self._bodies_resp(resp, corr, src, node.id), "duplicate" if dup else None
            )
        else:
            self.seq += 1
        self._step(node, ResponseReceived(sender_id=src, response=resp, request_id=pending[2]))

    def _timeout(self, node: _Node, payload: tuple[int, int]) -> None:
        corr, incarnation = payload
        if node.core is None or node.incarnation != incarnation:
            return
        pending = node.inflight.pop(corr, None)
        if pending is not None:
            self._step(node, RequestFailed(dest_id=pending[0], api=pending[1], request_id=pending[2]))

    # ------------------------------------------------------------------------------------ faults

    def _fault_start(self, f: Fault) -> None:
        if isinstance(f, Crash):
            node = self.nodes[f.node]
            if node.core is None:
                return  # already down: this crash (and its restart) do not happen
            if f.graceful:
                self._step(node, Shutdown())
                self._push(self.now + GRACE_MS, _CRASH, node.id, node.incarnation)
                self._push(self.now + GRACE_MS + f.down_ms, _RESTART, node.id, node.incarnation + 1)
            else:
                self._crash(node)
                self._push(self.now + f.down_ms, _RESTART, node.id, node.incarnation)
            return
        for pair in _blocked_pairs(f, self.config.node_ids):
            self._blocked[pair] = self._blocked.get(pair, 0) + 1
        if isinstance(f, Lossy):
            self._extra_loss.append(f.loss)
        self._push(self.now + f.duration_ms, _FAULT_END, f)

    def _fault_end(self, f: Fault) -> None:
        for pair in _blocked_pairs(f, self.config.node_ids):
            self._blocked[pair] -= 1
        if isinstance(f, Lossy):
            self._extra_loss.remove(f.loss)

    def _crash(self, node: _Node) -> None:
        """Volatile state is gone; ``durable``, ``disk`` and ``cluster_id`` stay."""
        node.core = None
        node.inflight.clear()
        node.tick_at = None
        node.incarnation += 1

    def _restart(self, node: _Node, incarnation: int) -> None:
        if node.core is not None or node.incarnation != incarnation:
            return
        cfg = dataclasses.replace(node.cfg, cluster_id=node.cluster_id)
        rng = random.Random(self.rng.getrandbits(64))
        log = Log(node.disk.batches)
        try:
            core, ready = self.core_class.restart(cfg, node.durable, log, rng, node.local(self.now))
        except SafetyViolation as exc:
            raise self._from_core(node, exc) from exc
        node.core = core
        node.hw = core.high_watermark
        self.checker.restarted(node.id)
        self._apply(node, ready)

    # ------------------------------------------------------------------------------------ client

    def _next_write_gap(self) -> int:
        return max(1, round(self.rng.expovariate(self.config.write_rate / 1000)))

    def _client_write(self) -> None:
        """A client that knows the current leader (the highest-epoch live one) writes 1-3 records."""
        leader: _Node | None = None
        leader_epoch = -1
        for node in self.nodes.values():
            core = node.core
            if core is not None and core.role.name == "Leader" and core.epoch > leader_epoch:
                leader, leader_epoch = node, core.epoch
        if leader is None:
            self.writes_refused += 1
        else:
            count = self.rng.randint(1, 3)
            values = tuple(f"seed-{self.config.seed}/write-{self._writes}/{i}".encode() for i in range(count))
            self._writes += 1
            assert leader.core is not None
            try:
                ready = leader.core.step(ClientWrite(values), leader.local(self.now))
            except SafetyViolation as exc:
                raise self._from_core(leader, exc) from exc
            result = ready.client_append
            if result is not None and result.accepted:
                self.writes_accepted += 1
            else:
                self.writes_refused += 1
            self._apply(leader, ready)
        self._push(self.now + self._next_write_gap(), _WRITE, None)


def _blocked_pairs(f: Fault, ids: Sequence[int]) -> list[tuple[int, int]]:
    """Directed links a partition-like fault cuts, in a fixed order."""
    if isinstance(f, OneWay):
        return [(f.src, f.dst)]
    if isinstance(f, Partition):
        group_of = {n: gi for gi, g in enumerate(f.groups) for n in g}
        return [
            (a, b)
            for a in ids
            for b in ids
            if a != b and (a not in group_of or b not in group_of or group_of[a] != group_of[b])
        ]
    return []


def _fault_fields(f: Fault) -> dict[str, Any]:
    out = dataclasses.asdict(f)
    if isinstance(f, Partition):
        out["groups"] = [list(g) for g in f.groups]
    return out


def simulate(
    config: SimConfig, trace_path: str | Path | None = None, core_class: type[KRaftCore] = KRaftCore
) -> SimResult:
    """Run one seed (see ``Simulation``)."""
    return Simulation(config, trace_path, core_class).run()
