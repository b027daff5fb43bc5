"""The imperative shell around the pure core: sockets, files, timers. No protocol logic lives here.

Every input (a request, a response, a failed request, a timer, a client write) goes through
``KRaftCore.step``/``tick``; every ``Ready`` bundle is applied in the order ``reference/io.py`` demands:
quorum-state and log first (fsync), meta.properties next, messages last — so a vote is on disk before
it is announced (KIP-595 "Vote Request Handling") and records are durable before they are acknowledged.

Core calls happen only on the event loop thread, one at a time, so the core needs no locking. Disk
writes block the loop briefly; that is deliberate: the ordering rule above is then trivially true.

Snapshots (KIP-630) are the shell's too: it writes one of its state machine (the broker registry, ``registry.py``)
when ``SnapshotTrigger`` says so, then tells the core (``SnapshotWritten``), then cleans the log as far as the
retention rules allow (``CleanLogTo``, then the core's ``AdvanceLogStart`` op). The content is O(brokers), a few KB
whatever the log's length, so it is written on the loop like an append (one file, fsync, rename, directory fsync).
A follower's download (``WriteSnapshotChunk``, ``InstallSnapshot``, ``AbortSnapshotDownload``) and serving chunks
(``_StoreSnapshots``, the core's ``SnapshotSource``) go through the snapshot store (``snapshot.py``).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import itertools
import logging
import os
import random
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft_tck.reference import bootstrap as disk_bootstrap
from kraft_tck.reference import controller as broker_controller
from kraft_tck.reference import describe_cluster, wire
from kraft_tck.reference import snapshot as disk_snapshot
from kraft_tck.reference.broker_driver import BrokerAnswer, BrokerDriver, SnapshotTrigger
from kraft_tck.reference.config import PRE_VOTE_KEY, ConfigError, NodeConfig
from kraft_tck.reference.controller import Decision
from kraft_tck.reference.core import CoreConfig, KRaftCore, SafetyViolation
from kraft_tck.reference.io import (
    AbortSnapshotDownload,
    AdvanceLogStart,
    AppendBatches,
    CleanLogTo,
    ClientAppendResult,
    ClientWrite,
    DeleteSnapshot,
    ElectionState,
    Input,
    InstallSnapshot,
    OutboundRequest,
    Ready,
    Reply,
    RequestFailed,
    RequestReceived,
    ResponseReceived,
    Shutdown,
    SnapshotLoaded,
    SnapshotWritten,
    TruncateTo,
    WriteSnapshotChunk,
)
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import (
    DescribeQuorumResponse,
    Endpoint,
    FetchRequest,
    FetchResponse,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kraft_tck.reference.net import (
    Answer,
    EncodedAnswer,
    KafkaClient,
    KafkaServer,
    PendingAnswer,
    RequestError,
    ServerRequest,
)
from kraft_tck.reference.registry import RegistryError
from kraft_tck.reference.roles import Leader
from kraft_tck.reference.security import REQUIRED_OPERATION
from kraft_tck.reference.storage import LogDir, MetaProperties, QuorumStateData, StorageError
from kraft_tck.reference.typed_wire import TypedCodec
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.trace import TraceWriter, to_jsonable

log = logging.getLogger("kraft_tck.reference.node")

IMPLEMENTATION = "kraft-tck-reference/0.1.0"
#: The highest Vote version of Kafka 3.9 (no PreVote field): what a node run without pre-vote serves and sends.
VOTE_VERSION_WITHOUT_PRE_VOTE = 1

#: A factory for the core; tests inject faults by passing a subclass (never a flag in the product).
CoreFactory = type[KRaftCore]

class WriteLost(Exception):
    """A client write was appended but truncated before it committed (its leader lost the epoch)."""


#: The most records a leader holds appended but not committed before it refuses client writes (see ``Node.write``):
#: about 64 ms of a 60,000 records/s load, so an overloaded leader queues that much and no more.
MAX_UNCOMMITTED_RECORDS = 4096

#: The most client writes (and records: a single larger write goes alone) the shell hands to the core in one
#: event-loop turn (``Node.write``). More wait in the shell's append queue, in order, and are handed over a slice per
#: later turn, so that the loop reads its sockets between slices: an operator's request (DescribeQuorum, ApiVersions,
#: a broker RPC) that arrives during a flood of client writes waits behind one slice of appends, not the whole flood.
#: Kafka keeps the two apart with threads: its raft thread answers DescribeQuorum from its own message queue
#: (KafkaRaftClient.handle/poll, handleDescribeQuorumRequest) while controller writes reach its BatchAccumulator from
#: the controller thread, and ApiVersions is answered by the request handler threads.
APPEND_SLICE_WRITES = 64
APPEND_SLICE_RECORDS = 2048


class WriteRefused(Exception):
    """The leader holds ``Node.max_uncommitted_records`` uncommitted records already: the write was not appended.
    ``error`` is Kafka's answer to a controller write it cannot take in time, REQUEST_TIMED_OUT (KafkaEventQueue
    fails an event still queued at its deadline with TimeoutException, which Errors.forException maps to
    REQUEST_TIMED_OUT; ControllerApis gives e.g. a BrokerHeartbeat broker.heartbeat.interval.ms / 2). Retriable."""

    error = Errors.REQUEST_TIMED_OUT


class NodeHalted(Exception):
    """The node stopped because its log directory failed or it was about to break a safety property
    (``Node.failure`` says which): it takes no more writes."""


def commit_outcome(
    log: Log, high_watermark: int, last_offset: int, epoch: int, held_back: tuple[int, int] | None = None
) -> str:
    """"committed", "lost" or "pending" for a write that ended at ``last_offset`` in ``epoch``.

    Offsets alone are not enough: after a leader change the same offset may hold another epoch's record,
    and the high watermark passing it says nothing about *our* write (Raft's log matching: same offset
    and epoch means same entry). ``held_back`` is the leader's ``(epoch, next append offset)``: a write
    past the log end but below that offset is still lingering in the leader's batch, not lost."""
    if held_back is not None and held_back[0] == epoch and log.end_offset <= last_offset < held_back[1]:
        return "pending"
    if log.epoch_of(last_offset) != epoch:
        return "lost"  # truncated away, or replaced by another epoch's record
    return "committed" if high_watermark > last_offset else "pending"


def _same_response(a: Any, b: Any) -> bool:
    """Equal responses, down to their batches' bytes (a FetchResponse's ``encoded`` is not in its equality).
    The core hands identical parked fetches one answer object: that case costs no comparison."""
    # The bytes first: a new batch's answer differs from the last one there, at the cost of one bytes comparison
    # instead of the dataclasses' field-by-field one.
    return a is b or (getattr(a, "encoded", None) == getattr(b, "encoded", None) and bool(a == b))


class StartupError(Exception):
    """The node cannot start; the message names the file or setting at fault."""


#: Kafka's KafkaRaftClient.MAX_FETCH_SIZE_BYTES: the most a leader returns for one Fetch.
MAX_FETCH_SIZE_BYTES = 8 * 1024 * 1024


def _probe_writable(directory: Path) -> None:
    """Raise OSError unless a file can be created in ``directory`` (read-only file systems, permissions):
    found at start rather than at the first vote, which would halt the node."""
    probe = directory / f".write-probe-{os.getpid()}"
    with open(probe, "wb") as f:
        f.write(b"probe")
    probe.unlink()


class _StoreReader:
    """One snapshot file's bytes, for the core (``io.RawSnapshotReader``, Kafka's FileRawSnapshotReader)."""

    def __init__(self, store: disk_snapshot.SnapshotStore, sid: SnapshotId) -> None:
        self._store, self._sid = store, sid

    def size_in_bytes(self) -> int:
        return self._store.size(self._sid)

    def slice(self, position: int, max_bytes: int) -> bytes:
        return self._store.read_chunk(self._sid, position, max_bytes)


class _StoreSnapshots:
    """The core's ``io.SnapshotSource``: the node's snapshot store (Kafka's ReplicatedLog.readSnapshot)."""

    def __init__(self, store: disk_snapshot.SnapshotStore) -> None:
        self._store = store

    def read_snapshot(self, snapshot_id: SnapshotId) -> _StoreReader | None:
        return _StoreReader(self._store, snapshot_id) if snapshot_id in self._store else None


#: Kafka's KafkaRaftClient runs the metadata log's cleaner (KafkaMetadataLog.maybeClean) every 60 s
#: (RaftMetadataLogCleanerManager); the node also tries right after each snapshot it writes.
CLEAN_INTERVAL_MS = 60_000


class Clock:
    """Wall-aligned milliseconds that never go backwards (DescribeQuorum reports wall-clock timestamps,
    KIP-836, while timers need monotonic time)."""

    def __init__(self) -> None:
        self._wall_minus_mono = time.time() - time.monotonic()

    def now_ms(self) -> int:
        return int((time.monotonic() + self._wall_minus_mono) * 1000)


@dataclass
class _Peer:
    """Outbound connection to one voter, with reconnect backoff (Kafka's reconnect.backoff.ms)."""

    node_id: int
    host: str
    port: int
    client: KafkaClient | None = None
    backoff_until: float = 0.0
    backoff_s: float = 0.05
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Node:
    """One reference KRaft voter (or observer) process: the shell that drives a ``KRaftCore``."""

    def __init__(
        self,
        config: NodeConfig,
        *,
        trace_file: str | Path | None = None,
        fsync: bool = True,
        core_factory: CoreFactory = KRaftCore,
        seed: int | None = None,
    ) -> None:
        self.config = config
        self._trace_path = Path(trace_file) if trace_file else None
        self._fsync = fsync
        self._core_factory = core_factory
        self._rng = random.Random(seed)
        self.clock = Clock()
        self._replies: dict[int, tuple[PendingAnswer, int]] = {}  # token -> (answer, api version)
        self._reply_ids = itertools.count()
        self._peers: dict[int, _Peer] = {}
        self._retired_peers: list[_Peer] = []  # replaced by a new address, closed at stop
        self._tasks: set[asyncio.Task[Any]] = set()
        self._outstanding = 0  # requests sent, awaiting their response (or failure)
        self._all_answered: asyncio.Future[None] | None = None  # graceful stop waits on it
        self._stopping = False
        self._commit_waiters: list[tuple[int, int, asyncio.Future[None]]] = []  # (last offset, epoch, waiter)
        # The registry's pending catch-up with the high watermark, queued behind a released writer (``_catch_up``).
        self._catch_up_handle: asyncio.Handle | None = None
        # ``wait_leading``'s futures, each with its timeout's timer: settled by the step that makes this node leader.
        self._leading_waiters: list[tuple[asyncio.Future[bool], asyncio.TimerHandle]] = []
        self.high_watermark = 0
        self.safety_refusals = 0  # inputs refused because they would have broken a safety property
        # A log-directory failure that halted the node (see ``_halt``); ``halted`` is set with it.
        self.failure: StorageError | OSError | SafetyViolation | RegistryError | None = None
        self.halted = asyncio.Event()
        self._halt_task: asyncio.Task[None] | None = None
        self.trace: TraceWriter | None = None
        self.storage: LogDir | None = None
        self.core: KRaftCore | None = None
        # The log the core runs on, made here (``start``): the shell reads it, releases its cache, and tools read
        # its memory use; the core's other state is read through ``core.status()``.
        self.metadata_log: Log | None = None
        self.server: KafkaServer | None = None
        self._server_tls: ssl.SSLContext | None = None  # the listener's TLS (security protocol SSL)
        self._denials: dict[tuple[str, int], int] = {}  # (principal, api key): requests refused by authorization
        self._client_tls: ssl.SSLContext | None = None  # TLS of our requests to the other voters
        self._tick_handle: asyncio.TimerHandle | None = None  # the one pending core.tick, at _tick_at
        self._tick_at: int | None = None
        # Kept from ``start``: on Python 3.11 each asyncio.get_running_loop() from a coroutine makes a
        # getpid() system call, once per write on the hot path otherwise.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._controller_task: asyncio.Task[None] | None = None
        self._deadline: int | None = None  # when the core wants its next tick
        self._peer_of_corr: dict[tuple[str, int], int] = {}  # for tracing responses' "to"
        self._last_answer: tuple[Any, int, EncodedAnswer] | None = None  # see _apply
        # Fetch read into and written from the core's messages (typed_wire.py), set by ``start`` unless
        # frames are traced: a frame trace records bodies as the dict path reads them off the wire.
        self.typed: TypedCodec | None = None
        # Where each voter listens on the controller listener's name: controller.quorum.voters (kraft.version 0),
        # then the voter set in force (KIP-853: VotersRecords and the bootstrap checkpoint; ``_learn_voters``).
        # Responses that redirect a client to the leader name its endpoint (NodeEndpoints, KIP-951).
        self._static_endpoints = {
            v.node_id: wire.ListenerEndpoint(config.listener.name, v.endpoint.host, v.endpoint.port)
            for v in config.voters
        }
        self._endpoints = dict(self._static_endpoints)
        self._voters_seen: object = None  # the core's voter set that ``_endpoints`` and ``_peers`` reflect
        self._leadership_seen: tuple[Any, ...] | None = None  # what ``_sync_controller`` last settled (see there)
        # KIP-631: the broker registry every node applies from the committed log and the controller logic
        # of the active controller, driven by the pure broker driver (broker_driver.py); the shell only routes.
        # A controller of a dynamic quorum (no controller.quorum.voters) counts as a voter here: any voter set may
        # come to name it, and Kafka's controllers halt on a committed record they cannot apply.
        controller = config.is_voter or (not config.voters and "controller" in config.process_roles)
        self.brokers = BrokerDriver(config.broker_session_timeout_ms, is_voter=controller)
        self._broker_answers: dict[int, asyncio.Future[dict[str, Any]]] = {}  # token -> the request's answer
        self._broker_tokens = itertools.count()
        # KIP-630: when to snapshot (set up by ``start``), a follower's download in progress, and a pending
        # snapshot check (scheduled from inside a step, run from the loop: steps never nest).
        self.snapshot_trigger = SnapshotTrigger(config.snapshot_max_new_record_bytes, config.snapshot_max_interval_ms)
        self._download: disk_snapshot.SnapshotDownload | None = None
        self._download_id: SnapshotId | None = None
        self._snapshot_check: asyncio.Handle | None = None
        self._last_clean_ms = 0
        self.snapshots_written = 0  # by this process (tests and benches read it)
        self.snapshot_write_ms: list[float] = []  # how long each write held the loop
        # Backpressure on client writes (``write``): the bound, and how many writes it refused.
        self.max_uncommitted_records = MAX_UNCOMMITTED_RECORDS
        self.writes_refused = 0
        # The append queue (``write``): client writes waiting for a later loop turn's slice, with their records'
        # count, what this turn has handed to the core so far, and the pending drain of the queue.
        self._appends: collections.deque[tuple[tuple[bytes, ...], asyncio.Future[ClientAppendResult]]] = \
            collections.deque()
        self._queued_records = 0
        self._slice_writes = self._slice_records = 0
        self._slice_reset: asyncio.Handle | None = None
        self._drain_handle: asyncio.Handle | None = None
        self.append_slices = 0  # slices the queue was drained in (tests and benches read it)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        # Generated codec functions for the APIs served, made before the first request rather than by it.
        codec.precompile([*wire.SERVED_API_VERSIONS, *broker_controller.SERVED_API_VERSIONS,
                          *describe_cluster.SERVED_API_VERSIONS, codec.API_VERSIONS_KEY])
        # TLS contexts first: a keystore that does not load stops the node before it touches its files.
        try:
            self._server_tls = cfg.ssl.server_context() if cfg.ssl is not None else None
            self._client_tls = cfg.ssl.client_context() if cfg.ssl is not None else None
        except ConfigError as exc:
            raise StartupError(str(exc)) from exc
        try:
            self.storage = LogDir.open(cfg.log_dir, fsync=self._fsync, segment_bytes=cfg.log_segment_bytes)
            _probe_writable(self.storage.partition_dir)
            meta = self.storage.read_meta()
            qs = self.storage.read_quorum_state()
            # KIP-853 "Bootstrapping": the voter set of the 0-0 checkpoint written by format --standalone or
            # --initial-controllers (None: none, a static quorum or a node formatted --no-initial-controllers).
            bootstrap_voters = disk_bootstrap.read_bootstrap_voters(Path(cfg.log_dir))
        except (StorageError, disk_bootstrap.BootstrapError) as exc:
            raise StartupError(str(exc)) from exc
        except OSError as exc:  # a file where the directory should be, a read-only or full file system...
            raise StartupError(f"log.dirs: {cfg.log_dir}: cannot use it as the log directory: "
                               f"{exc.strerror or exc}") from exc
        if meta is not None and meta.node_id != cfg.node_id:
            raise StartupError(
                f"{cfg.log_dir}/meta.properties: node.id={meta.node_id} but the config says node.id={cfg.node_id}"
            )
        durable = ElectionState(
            leader_epoch=qs.leader_epoch if qs else 0,
            leader_id=qs.leader_id if qs else -1,
            voted_id=qs.voted_id if qs else -1,
            voted_directory_id=qs.voted_directory if qs else None,
            voters=tuple(sorted(cfg.voter_ids)),
        )
        # KIP-630 restart: the latest valid snapshot, then the log after it. The store checked every snapshot
        # file when it opened (a torn or corrupt one is set aside, the previous one is used) and the log directory
        # starts at its persisted log start offset, which a snapshot covers.
        store = self.storage.snapshots
        snapshot_ids = store.ids()
        start_snapshot = self.storage.start_snapshot_id  # the snapshot ending at the log start (None at 0)
        # The core's log holds the newest reference.log.cache.bytes in memory and reads older batches from the
        # segment files: start-up streams the log through it, so memory never holds all of it.
        core_log = self.metadata_log = Log(cold=self.storage, start=start_snapshot)
        for batch, data in self.storage.iter_encoded():
            core_log.append((batch,), (data,))
            core_log.release(cfg.log_cache_bytes)
        latest = store.latest()
        start_loaded: SnapshotLoaded | None = None
        if latest is not None:
            try:
                snap = self._load_snapshot(latest)
                if start_snapshot is not None:
                    # KIP-853: the voter set and kraft.version at the log start come from the snapshot ending there
                    # (its header batch; Kafka's KRaftControlRecordStateMachine.maybeLoadSnapshot).
                    if start_snapshot != latest:
                        snap = store.read(start_snapshot)
                    start_loaded = SnapshotLoaded(start_snapshot, self.brokers.registry.cluster_id,
                                                  kraft_version=snap.kraft_version, voters=snap.voters)
            except (StorageError, RegistryError) as exc:
                self.storage.close()
                raise StartupError(f"{store.path(latest)}: cannot load the snapshot: {exc}") from exc
        self.snapshot_trigger = SnapshotTrigger(
            cfg.snapshot_max_new_record_bytes, cfg.snapshot_max_interval_ms,
            last_snapshot_offset=latest.end_offset if latest is not None else 0,
            last_snapshot_ms=self.clock.now_ms(), applied_offset=self.brokers.applied_offset)
        self._last_clean_ms = self.clock.now_ms()
        core_cfg = CoreConfig(
            node_id=cfg.node_id,
            voters=cfg.voter_ids,
            cluster_id=meta.cluster_id if meta else None,
            election_timeout_ms=cfg.election_timeout_ms,
            fetch_timeout_ms=cfg.fetch_timeout_ms,
            election_backoff_max_ms=cfg.election_backoff_max_ms,
            request_timeout_ms=cfg.request_timeout_ms,
            fetch_max_wait_ms=cfg.fetch_max_wait_ms,
            append_linger_ms=cfg.append_linger_ms,
            emit_trace=self._trace_path is not None,
            pre_vote=cfg.pre_vote,
            # KIP-853: this replica's key (meta.properties directory.id, Kafka's RaftManager metadataLogDirUuid), its
            # controller listener (the VotersRecord entry and LeaderEndpoints), the bootstrap checkpoint's voters and
            # controller.quorum.bootstrap.servers (ids -2, -3, ... in the core).
            directory_id=meta.directory_id if meta else None,
            listeners=(Endpoint(cfg.listener.name, cfg.listener.endpoint.host or "localhost",
                                cfg.listener.endpoint.port),),
            bootstrap_voters=bootstrap_voters,
            bootstrap_servers=tuple((e.host or "localhost", e.port) for e in cfg.bootstrap_servers),
        )
        if self._trace_path is not None:
            self.trace = TraceWriter(
                self._trace_path,
                {
                    "source": "node",
                    "run": f"node-{cfg.node_id}-{int(time.time())}",
                    "implementation": IMPLEMENTATION,
                    "clusterId": core_cfg.cluster_id,
                    # The voters the node starts with: controller.quorum.voters, else the bootstrap checkpoint's.
                    "voters": sorted(cfg.voter_ids or (bootstrap_voters.ids() if bootstrap_voters else ())),
                    "config": {
                        "controller.quorum.election.timeout.ms": cfg.election_timeout_ms,
                        "controller.quorum.fetch.timeout.ms": cfg.fetch_timeout_ms,
                        "controller.quorum.election.backoff.max.ms": cfg.election_backoff_max_ms,
                        "controller.quorum.request.timeout.ms": cfg.request_timeout_ms,
                        PRE_VOTE_KEY: cfg.pre_vote,
                    },
                },
                validate=True,
            )
        now = self.clock.now_ms()
        # KIP-595 "Persistence": the core comes back from quorum-state and the log only.
        self.core, first = self._core_factory.restart(
            core_cfg, durable, core_log, self._rng, now, snapshots=_StoreSnapshots(store), snapshot_ids=snapshot_ids,
            start_snapshot=start_loaded)
        for voter in cfg.voters:
            if voter.node_id != cfg.node_id:
                host = voter.endpoint.host or "127.0.0.1"
                self._peers[voter.node_id] = _Peer(voter.node_id, host, voter.endpoint.port)
        self._learn_voters()
        if not self._wants_frames():  # decided by the trace, opened above
            self.typed = TypedCodec()
            self.typed.precompile()
        self.server = KafkaServer(
            self._handle,
            {**self.served_api_versions(), **broker_controller.SERVED_API_VERSIONS,
             **describe_cluster.SERVED_API_VERSIONS},
            host=cfg.listener.endpoint.host or "0.0.0.0",
            port=cfg.listener.endpoint.port,
            max_frame_bytes=cfg.socket_request_max_bytes,
            observer=self._observe_server if self._wants_frames() else None,
            bodies=codec if self.typed is None else self.typed,
            # Kafka's network layer: one request per connection at a time (the channel is muted until its
            # response is sent), idle connections closed, request memory bounded as configured.
            one_in_flight=True,
            idle_timeout_ms=cfg.connections_max_idle_ms if cfg.connections_max_idle_ms >= 0 else None,
            queued_max_bytes=cfg.queued_max_request_bytes if cfg.queued_max_request_bytes > 0 else -1,
            ssl=self._server_tls,
            sasl=cfg.sasl,
            gate=self._authorize if cfg.authorizer is not None else None,
            # Operators first: a DescribeQuorum answer leaves before the disk work its step triggers (_apply_ready).
            answer_early=(wire.DESCRIBE_QUORUM,),
        )
        try:
            await self.server.start()
        except OSError as exc:  # port in use, unresolvable host, an address not of this machine
            self.storage.close()
            if self.trace is not None:
                self.trace.close()
            raise StartupError(f"listeners: cannot listen on {cfg.listener}: {exc.strerror or exc}") from exc
        self._apply(first)
        self._controller_task = asyncio.create_task(self._controller_loop())
        log.info("node %d listening on %s, voters %s", cfg.node_id, cfg.listener, sorted(self.core.voter_set().ids()))

    async def stop(self, graceful: bool = True, grace_s: float = 1.0) -> None:
        """Graceful stop resigns leadership first (KIP-595 EndQuorumEpoch) and gives it a moment to leave."""
        halt = self._halt_task
        if halt is not None and halt is not asyncio.current_task():
            await asyncio.shield(halt)  # a halt is under way: it is this node's stop
            return
        if self._stopping:
            return
        if graceful and self.core is not None:
            self._step(Shutdown())
            await asyncio.sleep(0)
            pending: list[asyncio.Future[Any]] = [t for t in self._tasks if not t.done()]
            if self._outstanding:
                self._all_answered = asyncio.get_running_loop().create_future()
                pending.append(self._all_answered)
            if pending:
                await asyncio.wait(pending, timeout=grace_s)
        self._stopping = True
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        if self._controller_task is not None:
            self._controller_task.cancel()
        # Unblock parked replies first: a connection waiting to write one would keep server.close() waiting.
        for reply, _ in self._replies.values():
            reply.cancel()
        if self.server is not None:
            await self.server.close()
        for task in list(self._tasks):
            task.cancel()
        for peer in [*self._peers.values(), *self._retired_peers]:
            if peer.client is not None:
                await peer.client.close()
        self._settle_leading_waiters(False)
        for _, _, fut in self._commit_waiters:
            if not fut.done():
                fut.set_exception(self._halted_error() if self.failure is not None else RuntimeError("node stopped"))
        if self._drain_handle is not None:
            self._drain_handle.cancel()
            self._drain_handle = None
        while self._appends:  # queued writes were never appended
            _, queued = self._appends.popleft()
            if not queued.done():
                queued.set_exception(self._halted_error() if self.failure is not None else RuntimeError("node stopped"))
        self._queued_records = 0
        if self._catch_up_handle is not None:
            # Committed records first (their broker answers included), as if applied in their commit's step.
            self._catch_up_handle.cancel()
            self._catch_up_handle = None
            try:
                self._apply_committed_records()
            except (StorageError, OSError) as exc:
                log.warning("node %d stops without its last commits applied: %s", self.config.node_id, exc)
        self._deliver(self.brokers.stop())
        if self.trace is not None:
            self.trace.close()
        if self.storage is not None:
            self.storage.close()

    # ------------------------------------------------------------------ the core loop

    def _step(self, inp: Input) -> Ready:
        assert self.core is not None
        if self._catch_up_handle is not None:
            self._catch_up()  # the registry at the high watermark before the core moves on
        if self.failure is not None:
            return Ready()  # halted: no more inputs
        try:
            ready = self.core.step(inp, self.clock.now_ms())
        except (StorageError, OSError) as exc:  # a released batch read back from a damaged segment
            self._halt(exc)
            return Ready()
        except SafetyViolation as exc:
            # A peer asked for something that would break safety (e.g. a DivergingEpoch below our high
            # watermark, a second leader for one epoch). The core checks before it changes anything, so
            # nothing was applied; like Kafka, whose raft thread fails there (KafkaRaftClient.handleFetchResponse
            # throws, the fault handler stops the process), the node then halts: one side has a bug.
            self.safety_refusals += 1
            log.error("SAFETY: refused %s from the network: %s", type(inp).__name__, exc)
            self._halt(exc)
            return Ready()
        self._apply(ready)
        return ready

    def _apply(self, ready: Ready) -> None:
        """``_apply_ready``, halting the node if its log directory fails on the way."""
        try:
            self._apply_ready(ready)
        except (StorageError, OSError) as exc:
            self._halt(exc)

    def _halt(self, exc: StorageError | OSError | SafetyViolation | RegistryError) -> None:
        """Fail-stop: a log directory that failed (a write refused, a segment that no longer reads) leaves
        the core's log and the disk disagreeing, and an answer sent now could claim what the disk lacks.
        Like Kafka, which halts when its metadata log directory fails, the node stops at once, without
        resigning (that would write more), and leaves its files to the next start's recovery."""
        if self.failure is not None:
            return
        self.failure = exc
        self.halted.set()
        log.critical("node %d halts: %s: %s", self.config.node_id, self.halt_reason, exc)
        if self._loop is not None:
            self._halt_task = self._loop.create_task(self.stop(graceful=False))

    @property
    def is_leader(self) -> bool:
        """``core.status().is_leader`` without building the status (the write workload asks before every write)."""
        return self.core is not None and isinstance(self.core.role, Leader)

    @property
    def halt_reason(self) -> str:
        """Why the node halted, in words (meaningful once ``failure`` is set)."""
        if isinstance(self.failure, SafetyViolation):
            return "safety violation"
        if isinstance(self.failure, RegistryError):
            return "a committed metadata record cannot be applied"
        return "its log directory failed"

    def _halted_error(self) -> NodeHalted:
        return NodeHalted(f"node {self.config.node_id} halted: {self.halt_reason}: {self.failure}")

    def _apply_ready(self, ready: Ready) -> None:
        """Apply one bundle: its trace lines, durable state, then the messages (reference/io.py's order).

        The trace goes first, as a write-ahead record: after a kill -9 the disk never holds an effect the
        trace lacks. A step torn by the kill (traced, not durable) announced nothing, since messages go
        last (a leader's Fetch answers after its batch's write, before the fsync: a kill -9 keeps the write);
        trace validation drops it (``merge_node_traces``)."""
        assert self.storage is not None and self.core is not None
        for event in ready.trace:
            self._emit(event)
        if self.trace is not None and ready.trace:
            self.trace.flush()  # in the kernel before the disk changes: kill -9 then loses no traced effect
        early = self._answer_operators_first(ready) if ready.replies and (ready.log_ops or ready.persist) else ()
        if ready.persist is not None:
            p = ready.persist
            # Kafka's FileQuorumStateStore: data_version = kraft.version (1 carries votedDirectoryId).
            self.storage.write_quorum_state(QuorumStateData.from_election(
                p, self.core.kraft_version(), tuple(sorted(self.config.voter_ids))))
        for op in ready.log_ops:
            if isinstance(op, AppendBatches):
                self.storage.append(op.batches, op.encoded)
            elif isinstance(op, TruncateTo):
                self.storage.truncate_to(op.offset)
            else:
                self._apply_snapshot_op(op)
        replies_left = bool(ready.replies)  # replies not answered yet
        if ready.log_ops:
            if replies_left and self._fetch_answers_lead_the_fsync(ready):
                # The rest below, after the fsync (none left: a leader's bundle of Fetch answers, the usual one).
                replies_left = self._answer_replies(ready, early, only=FetchResponse)
            self.storage.flush()
            assert self.metadata_log is not None
            self.metadata_log.release(self.config.log_cache_bytes)  # all of it is in the segment files now
        if ready.cluster_id_adopted is not None:
            self.storage.write_meta(MetaProperties(node_id=self.config.node_id, cluster_id=ready.cluster_id_adopted,
                                                   directory_id=self.core.config.directory_id))
        if ready.log_ops:  # the voter set in force changes only with the log (an append, a truncation, a snapshot)
            self._learn_voters()
        for out in ready.send:
            self._send(out)
        if replies_left:
            self._answer_replies(ready, early)
        if ready.high_watermark is not None:
            self.high_watermark = ready.high_watermark
            if self._release_commits() and self._loop is not None:
                # A client write just committed: its writer runs first, and the registry catches up in the
                # callback queued behind its wake-up (``_catch_up``), off the commit's latency.
                if self._catch_up_handle is None:
                    self._catch_up_handle = self._loop.call_soon(self._catch_up_soon)
            else:
                self._apply_committed_records()
        if ready.next_deadline_ms is not None:
            self._deadline = ready.next_deadline_ms
            self._schedule_tick()
        if self._catch_up_handle is None:  # else ``_catch_up`` settles the controller with the registry
            self._sync_controller()

    def _answer_replies(self, ready: Ready, early: tuple[Reply, ...], only: type | None = None) -> bool:
        """The bundle's replies (but ``early``'s, already answered; with ``only``, those of that type), each written
        to its connection from here: no event-loop round between the step and the send. A reply answered by an
        earlier call is skipped: its connection's place is no longer waiting. Whether ``only`` left any out."""
        # The last answer given, as (response, version, answer): every parked Fetch answered with the same
        # new batch in this bundle, or the next follower to ask from the same offset in a later one, gets
        # the same encoded bytes.
        shared = self._last_answer
        left_out = False
        for rep in ready.replies:
            if early and rep in early:
                continue
            if only is not None and not isinstance(rep.response, only):
                left_out = True
                continue
            waiting = self._replies.pop(rep.reply_to, None)
            if waiting is not None and not waiting[0].done():
                reply, version = waiting
                if shared is not None and shared[1] == version and _same_response(shared[0], rep.response):
                    answer = shared[2]
                else:
                    answer = self._answer_body(rep.response, version, several=len(ready.replies) > 1)
                    shared = (rep.response, version, answer)
                reply.answer(answer)
        if shared is not None and isinstance(shared[2], EncodedAnswer):
            self._last_answer = shared
        return left_out

    def _answer_operators_first(self, ready: Ready) -> tuple[Reply, ...]:
        """Answer the bundle's DescribeQuorum replies before its disk work; return them.

        A DescribeQuorum answer claims nothing of the bundle's durable state: the core computes it from the state
        the step began in (every earlier bundle already on disk), before the same step's timers append, e.g. the
        linger's batch (``KRaftCore.step``: the input first, then ``_poll``). So the operator does not wait for that
        batch's write; every other reply still leaves after the disk work, as reference/io.py orders it. The server
        takes the request's place in its connection before the handler runs (``answer_early``), so the answer is
        written from here. Kafka likewise completes a DescribeQuorum response from the raft thread's state when it
        handles the request (KafkaRaftClient.handleDescribeQuorumRequest), not after the thread's next append."""
        early = tuple(rep for rep in ready.replies if isinstance(rep.response, DescribeQuorumResponse))
        for rep in early:
            waiting = self._replies.pop(rep.reply_to, None)
            if waiting is not None and not waiting[0].done():
                reply, version = waiting
                reply.answer(self._answer_body(rep.response, version, several=False))
        return early

    def _fetch_answers_lead_the_fsync(self, ready: Ready) -> bool:
        """May a leader's Fetch answers leave once the bundle's batches are written, before the fsync that makes them
        durable? Kafka's leader does so (KafkaRaftClient.flushLeaderLog: "We update the end offset before flushing so
        that parked fetches can return sooner"): with fsync on, the leader's fsync then overlaps the followers' fetch
        round instead of preceding it. Safe because an answer claims nothing durable of this bundle: its records are in
        the segment file already (os.write: a kill -9 keeps them; only a power loss during the fsync could lose them,
        and then the followers hold records the leader lacks, which were never committed: the high watermark counts the
        leader's new end offset only in a later step, which runs after this fsync returned, and a new leader keeps or
        truncates them, KIP-595 "Fetch Response Handling"), and its high watermark is one an earlier, durable bundle
        published. So only: a leader's bundle whose log ops are all appends, with no quorum-state to write (a vote or a
        new epoch must be durable before anything is announced) and no high-watermark move (the only voter commits the
        batch it appends in the same step: its observers' answers must wait for the fsync)."""
        core, ops = self.core, ready.log_ops
        return ready.persist is None and ready.high_watermark is None and core is not None \
            and isinstance(core.role, Leader) and (  # one append (a client write's bundle) without a generator
                type(ops[0]) is AppendBatches if len(ops) == 1 else all(type(op) is AppendBatches for op in ops))

    # ------------------------------------------------------------------ snapshots (KIP-630)

    def _apply_snapshot_op(
        self, op: AdvanceLogStart | WriteSnapshotChunk | InstallSnapshot | AbortSnapshotDownload | DeleteSnapshot
    ) -> None:
        """The core's snapshot ops, durable before anything of the same step is sent (reference/io.py)."""
        assert self.storage is not None
        store = self.storage.snapshots
        if isinstance(op, AdvanceLogStart):
            # CleanLog: the core named a snapshot's end offset (Kafka's deleteBeforeSnapshot).
            sid = max((s for s in store.ids() if s.end_offset == op.offset), default=None)
            if sid is None or not (self.storage.delete_before_snapshot(sid) or self.storage.start_offset == op.offset):
                # The core's log and the disk would disagree on where the log starts: halt (as any failed write).
                raise StorageError(f"{self.storage.partition_dir}: cannot move the log start to {op.offset} "
                                   f"(snapshots {store.ids()}, log start {self.storage.start_offset})")
        elif isinstance(op, WriteSnapshotChunk):
            sid = op.snapshot_id
            if op.position == 0 or self._download is None or self._download_id != sid:
                self._abort_download()
                self._download, self._download_id = store.begin_download(sid), sid
            self._download.append(op.position, op.data)
        elif isinstance(op, InstallSnapshot):
            self._install_snapshot(op.snapshot_id)
        elif isinstance(op, AbortSnapshotDownload):
            if self._download_id == op.snapshot_id:
                self._abort_download()
        elif isinstance(op, DeleteSnapshot):
            sid = op.snapshot_id
            later = [s for s in store.ids() if s > sid]
            if sid in store and later:  # never the latest snapshot
                store.delete_before(later[0])

    def _abort_download(self) -> None:
        if self._download is not None:
            self._download.abort()
        self._download = self._download_id = None

    def _install_snapshot(self, sid: SnapshotId) -> None:
        """Freeze the download (validated, fsync, rename), empty the log to start and end at the snapshot's end
        offset (Kafka's truncateToLatestSnapshot), load the registry from it and tell the core which cluster id
        it holds. At restart the file is already frozen: only the log is emptied if it still needs to be."""
        assert self.storage is not None
        if self._download is not None and self._download_id == sid:
            download, self._download, self._download_id = self._download, None, None
            try:
                download.finish()
            except StorageError as exc:
                # Bytes from the leader that do not form a valid snapshot: the core already counts it installed, so
                # the node halts, as Kafka's controller does when a snapshot it loads fails its checks.
                raise StorageError(f"the snapshot {disk_snapshot.snapshot_filename(sid)} downloaded from the leader "
                                   f"is not valid: {exc}") from exc
        self.storage.reset_to_snapshot(sid)  # idempotent: at restart the log may be emptied already
        snap = self._load_snapshot(sid)
        now = self.clock.now_ms()
        self.snapshot_trigger.snapshotted(sid.end_offset, now)
        # KIP-853: the header's KRaftVersionRecord/VotersRecord are the voter set at the snapshot's last offset.
        loaded = SnapshotLoaded(sid, self.brokers.registry.cluster_id, kraft_version=snap.kraft_version,
                                voters=snap.voters)
        log.info("node %d installed snapshot %s (%d brokers)", self.config.node_id,
                 disk_snapshot.snapshot_filename(sid), len(self.brokers.registry))
        assert self._loop is not None
        self._loop.call_soon(self._deliver_loaded, loaded)

    def _deliver_loaded(self, loaded: SnapshotLoaded) -> None:
        if not self._stopping and self.failure is None:
            self._step(loaded)

    def _load_snapshot(self, sid: SnapshotId) -> disk_snapshot.Snapshot:
        """The state machine from a snapshot file (its data records; header and footer are not content)."""
        assert self.storage is not None
        snap = self.storage.snapshots.read(sid)
        self.brokers.load_snapshot(sid.end_offset, (rec for batch in snap.batches for rec in batch.records))
        return snap

    def _note_commit(self, nbytes: int) -> None:
        """After a commit was applied: feed the trigger and check it from the loop (not inside this step)."""
        trigger = self.snapshot_trigger
        trigger.committed(nbytes, self.brokers.applied_offset, self.brokers.applied_aligned)
        if self._snapshot_check is None and trigger.due(self.clock.now_ms()) is not None and self._loop is not None:
            self._snapshot_check = self._loop.call_soon(self._maybe_snapshot)

    def _maybe_snapshot(self) -> None:
        """KIP-630 CreateSnapshot: when the trigger says so, write the registry at the applied offset, tell the
        core, then clean. Runs from the loop, between steps."""
        self._snapshot_check = None
        core, storage = self.core, self.storage
        if core is None or storage is None or self._stopping or self.failure is not None:
            return
        now = self.clock.now_ms()
        reason = self.snapshot_trigger.due(now)
        if reason is None:
            return
        end = self.brokers.applied_offset
        if not self.brokers.applied_aligned:
            return  # inside a batch: the commit that completes it checks again
        try:
            sid = core.snapshot_id_at(end)  # the epoch of the record at end - 1; ValueError: not committed
        except ValueError as exc:
            log.debug("no snapshot at %d yet: %s", end, exc)
            return
        # KIP-853: the header batch carries kraft.version and the voter set in force at the snapshot's last
        # offset (Kafka's KafkaRaftClient.createSnapshot: kraftVersionAtOffset, voterSetAtOffset).
        kraft_version, voters = core.voters_at(sid.end_offset - 1)
        started = time.perf_counter()
        try:
            if sid not in storage.snapshots:  # a crash after the write and before the core heard of it
                storage.create_snapshot(sid, [self.brokers.snapshot_records()],
                                        last_contained_log_timestamp=self.brokers.applied_timestamp,
                                        timestamp_ms=now, kraft_version=kraft_version, voters=voters)
        except (StorageError, OSError) as exc:
            self._halt(exc)
            return
        self.snapshot_write_ms.append((time.perf_counter() - started) * 1000)
        self.snapshots_written += 1
        self.snapshot_trigger.snapshotted(end, now)
        log.info("node %d: created snapshot %s because %s", self.config.node_id,
                 disk_snapshot.snapshot_filename(sid), reason)
        self._step(SnapshotWritten(sid))
        self._maybe_clean(now)

    def _maybe_clean(self, now: int) -> None:
        """KIP-630 CleanLog by Kafka's retention rules (KafkaMetadataLog.maybeClean: metadata.max.retention.bytes,
        then metadata.max.retention.ms; at least one snapshot stays): the core first (``CleanLogTo``), whose
        ``AdvanceLogStart`` op then deletes the segments and older snapshots."""
        self._last_clean_ms = now
        storage, cfg = self.storage, self.config
        while storage is not None and self.failure is None and not self._stopping:
            target = storage.clean_target(now, retention_bytes=cfg.retention_max_bytes, retention_ms=cfg.retention_ms)
            if target is None or target.end_offset <= storage.start_offset:
                return
            before = storage.start_offset
            self._step(CleanLogTo(target.end_offset))
            if storage.start_offset == before:
                return  # the core refused it (it says why in its trace)
            log.info("node %d: log start offset %d -> %d (retention)", cfg.node_id, before, storage.start_offset)

    def _answer_body(self, response: Any, version: int, several: bool) -> Answer | EncodedAnswer:
        """The answer to send for ``response``; encoded once here when other replies may share the bytes
        (net frames each with its correlation id): several replies in one bundle, or a Fetch answer with
        records, which the other followers are about to ask for too. A Fetch answer the typed codec writes
        is always bytes: they cost nothing more to frame than a body would to encode."""
        if self.typed is not None and isinstance(response, FetchResponse):
            encoded = self.typed.encode_response_body(version, response, self._endpoints)
            if encoded is not None:
                return EncodedAnswer(None, encoded)
        body = wire.response_to_body(response, version, self._endpoints)
        if not several and not (isinstance(response, FetchResponse) and response.batches):
            return body
        try:
            return EncodedAnswer(body, codec.encode_response_body(wire.api_key(response), version, body))
        except Exception:
            return body  # net's own encoding reports it and closes the connection, as for any bad answer

    def _schedule_tick(self) -> None:
        """One event-loop timer for the core's next deadline. It is moved only when the deadline comes
        earlier; a later deadline (most steps push the fetch or check-quorum deadline out) leaves it be,
        and ``_on_tick`` re-arms it when it fires early. The hot path then costs no timer churn."""
        deadline = self._deadline
        if deadline is None or self._stopping:
            return
        if self._tick_handle is not None:
            assert self._tick_at is not None
            if self._tick_at <= deadline:
                return
            self._tick_handle.cancel()
        delay = max(0.0, (deadline - self.clock.now_ms()) / 1000)
        self._tick_at = deadline
        self._tick_handle = asyncio.get_running_loop().call_later(delay, self._on_tick)

    def _on_tick(self) -> None:
        self._tick_handle = self._tick_at = None
        if self._stopping or self.core is None or self._deadline is None:
            return
        now = self.clock.now_ms()
        if now < self._deadline:
            self._schedule_tick()  # the loop's clock and ours round differently: wait the rest
            return
        if self._catch_up_handle is not None:
            self._catch_up()  # as ``_step`` does
        try:
            ready = self.core.tick(now)
        except (StorageError, OSError) as exc:
            self._halt(exc)
            return
        self._apply(ready)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def served_api_versions(self) -> dict[int, tuple[int, int]]:
        """The KRaft RPCs and versions this node advertises (ApiVersions): Vote 0-2 with pre-vote (Kafka 4.x),
        Vote 0-1 without (Kafka 3.9, which knows no PreVote field)."""
        served = dict(wire.SERVED_API_VERSIONS)
        if not self.config.pre_vote:
            served[wire.VOTE] = (served[wire.VOTE][0], min(served[wire.VOTE][1], VOTE_VERSION_WITHOUT_PRE_VOTE))
        return served

    # ------------------------------------------------------------------ inbound requests

    def _authorize(self, req: ServerRequest) -> Answer:
        """The server's gate (``authorizer.class.name``): Kafka's ControllerApis asks CLUSTER_ACTION for the Raft
        and broker RPCs, DESCRIBE for DescribeQuorum, ALTER for DescribeCluster. A refused request is answered
        CLUSTER_AUTHORIZATION_FAILED here, before the frame trace and the core see it: it changes nothing."""
        authorizer = self.config.authorizer
        operation = REQUIRED_OPERATION.get(req.api_key)
        if authorizer is None or operation is None or authorizer.authorize(req.principal, operation):
            return None
        # Logged as Kafka's authorizer logger does, but only the 1st, 2nd, 4th, 8th... denial of a principal
        # and api: a client repeating refused requests cannot flood the log.
        key = (req.principal, req.api_key)
        n = self._denials[key] = self._denials.get(key, 0) + 1
        if n & (n - 1) == 0:
            log.warning("principal %s from %s denied %s on the cluster: %s refused (%d time(s))",
                        req.principal, req.peer, operation, codec.api_name(req.api_key), n)
        if req.api_key in broker_controller.SERVED_API_VERSIONS:
            return broker_controller.error_response(req.api_key, Errors.CLUSTER_AUTHORIZATION_FAILED)
        if req.api_key == describe_cluster.DESCRIBE_CLUSTER:
            return {"ThrottleTimeMs": 0, "ErrorCode": Errors.CLUSTER_AUTHORIZATION_FAILED,
                    "ErrorMessage": Errors.CLUSTER_AUTHORIZATION_FAILED.message, "EndpointType": 2,
                    "ClusterId": "", "ControllerId": -1, "Brokers": [], "ClusterAuthorizedOperations": -2147483648}
        return wire.error_response_body(req.api_key, req.api_version, Errors.CLUSTER_AUTHORIZATION_FAILED)

    def _handle(self, req: ServerRequest) -> Answer | PendingAnswer | Awaitable[Answer]:
        """The server's handler: the core answers most requests in the step that receives them, and then
        the body goes back at once; a parked Fetch is answered through a ``PendingAnswer``, by a later step."""
        if self._stopping:
            return None
        core_req = req.body
        if type(core_req) is FetchRequest:  # the typed codec's Fetch (nearly every request a leader gets)
            return self._handle_core(req, core_req)
        if req.api_key in broker_controller.SERVED_API_VERSIONS:
            return self._handle_broker_request(req)
        if req.api_key == wire.VOTE and not self.config.pre_vote and req.api_version > VOTE_VERSION_WITHOUT_PRE_VOTE:
            # Run as Kafka 3.9: Vote v2 is not a version it knows; like Kafka's request parsing, the connection
            # is closed without an answer (ApiVersions told the peer 0-1).
            log.warning("closing %s: Vote v%d is not served without pre-vote", req.peer, req.api_version)
            return None
        if req.api_key == describe_cluster.DESCRIBE_CLUSTER:  # KIP-919: kafka-metadata-quorum's ClusterId
            assert self.core is not None
            return describe_cluster.answer(
                req.body, req.api_version, self.core.cluster_id or "", self.core.leader_id,
                [(i, ep.host, ep.port) for i, ep in self._endpoints.items()])
        try:
            core_req = wire.request_from_kafka(req.api_key, req.api_version, req.body)
        except wire.WireError as exc:
            log.warning("refusing request from %s: %s", req.peer, exc)
            return wire.error_response_body(req.api_key, req.api_version, exc.error)
        if not getattr(core_req, "valid_partition", True) and isinstance(req.body, dict) and req.api_key != wire.FETCH:
            # Names chosen by the peer: the log handlers escape their control characters (workload.run_node).
            topics = ", ".join(str(t.get("TopicName")) for t in req.body.get("Topics") or [])
            log.info("%s from %s names topic %s, not __cluster_metadata partition 0: refused",
                     codec.api_name(req.api_key), req.peer, topics)
        return self._handle_core(req, core_req)

    def _handle_core(self, req: ServerRequest, core_req: Any) -> Answer | PendingAnswer:
        """A request for the core, read: one step, answered at once or later (a parked Fetch)."""
        if isinstance(core_req, FetchRequest) and core_req.max_bytes > MAX_FETCH_SIZE_BYTES:
            # Kafka's leader reads at most KafkaRaftClient.MAX_FETCH_SIZE_BYTES (8 MiB) per Fetch, whatever
            # MaxBytes asks (KafkaMetadataLog.read with maxFetchSizeInBytes; at least one batch).
            core_req = dataclasses.replace(core_req, max_bytes=MAX_FETCH_SIZE_BYTES)
        token = next(self._reply_ids)
        reply = req.reply if req.reply is not None else PendingAnswer()  # the server's own: answered at once
        self._replies[token] = (reply, req.api_version)
        self._step(RequestReceived(sender_id=wire.sender_of(core_req), reply_to=token, request=core_req))
        if reply.done() and not reply.cancelled:
            return reply.result()
        return reply  # Node.stop cancels it: the connection then closes without an answer

    # ------------------------------------------------------------------ outbound requests

    async def _client(self, peer: _Peer) -> KafkaClient:
        async with peer.lock:
            if peer.client is not None and peer.client.connected:
                return peer.client
            if time.monotonic() < peer.backoff_until:
                raise RequestError(f"node {peer.node_id}: reconnect backoff")
            client = KafkaClient(peer.host, peer.port, client_id=f"raft-client-{self.config.node_id}",
                                 observer=self._observe_client(peer.node_id) if self._wants_frames() else None,
                                 bodies=codec if self.typed is None else self.typed, ssl=self._client_tls,
                                 sasl=self.config.sasl.login if self.config.sasl is not None else None)
            try:
                await client.connect(timeout_s=self.config.request_timeout_ms / 1000)
            except RequestError:
                peer.backoff_until = time.monotonic() + peer.backoff_s
                peer.backoff_s = min(peer.backoff_s * 2, 1.0)
                await client.close()
                raise
            peer.backoff_s = 0.05
            peer.client = client
            return client

    def _learn_voters(self) -> None:
        """KIP-853: the address book follows the voter set in force (``core.voter_set()``: the bootstrap
        checkpoint's, then each VotersRecord appended or truncated away). A voter's endpoint on this node's
        controller listener name is where requests to it go and what NodeEndpoints name; controller.quorum.voters
        (kraft.version 0, no endpoints in the set) stays as configured."""
        core = self.core
        if core is None:
            return
        voters = core.voter_set()
        if voters is self._voters_seen or voters == self._voters_seen:
            return
        self._voters_seen = voters
        name, me = self.config.listener.name, self.config.node_id
        endpoints = dict(self._static_endpoints)
        for node in voters.nodes:
            ep = next((e for e in node.endpoints if e.name == name), None)
            if ep is None:
                continue
            endpoints[node.key.id] = wire.ListenerEndpoint(name, ep.host, ep.port)
            if node.key.id != me:
                self._peer(node.key.id, (ep.host, ep.port))
        self._endpoints = endpoints

    def _peer(self, dest: int, address: tuple[str, int] | None) -> _Peer | None:
        """The connection to ``dest``: at ``address`` when given (the core's ``OutboundRequest.address``: a node
        known from a VotersRecord or a response's NodeEndpoints, a joining voter, a bootstrap server), else
        the address book's. A node whose address changed gets a new connection; the old one closes."""
        peer = self._peers.get(dest)
        if address is None or (peer is not None and (peer.host, peer.port) == address):
            return peer
        if peer is not None:
            if peer.client is not None:
                self._spawn(peer.client.close())
                peer.client = None
            # A connection still being opened to the old address is closed at stop (the others are closed already).
            self._retired_peers = [p for p in self._retired_peers if p.client is not None]
            self._retired_peers.append(peer)
        peer = self._peers[dest] = _Peer(dest, address[0], address[1])
        return peer

    def _send(self, out: OutboundRequest) -> None:
        """Send at once on an open connection; otherwise connect first, in a task."""
        dest, request, request_id = out.dest_id, out.request, out.request_id
        peer = self._peer(dest, out.address)
        if peer is None:
            log.error("core asked to send %s to node %d, whose address is unknown",
                      codec.api_name(wire.api_key(request)), dest)
            # Reported from the loop (this runs inside _apply; steps never nest): the core stops waiting for it.
            asyncio.get_running_loop().call_soon(
                self._request_failed, dest, request, request_id, RequestError(f"node {dest}: no address"))
            return
        client = peer.client
        if client is not None and client.connected:
            self._send_on(client, dest, request, request_id)
        else:
            self._spawn(self._connect_and_send(peer, request, request_id))

    async def _connect_and_send(self, peer: _Peer, request: Any, request_id: int) -> None:
        try:
            client = await self._client(peer)
        except RequestError as exc:
            self._request_failed(peer.node_id, request, request_id, exc)
            return
        if not self._stopping:
            self._send_on(client, peer.node_id, request, request_id)

    def _send_on(self, client: KafkaClient, dest: int, request: Any, request_id: int) -> None:
        api_key = wire.api_key(request)
        try:
            version = client.best_version(api_key)
            if isinstance(request, VoteRequest):
                if not self.config.pre_vote:
                    version = min(version, VOTE_VERSION_WITHOUT_PRE_VOTE)  # as Kafka 3.9 would send it
                if request.pre_vote and version < 2:
                    self._pre_vote_unsupported(dest, request_id)
                    return
            # The typed codec writes the core's request itself (Fetch without a dict at all).
            body = request if self.typed is not None else wire.request_to_body(request, version)
            # A Fetch may be parked by the leader for MaxWaitMs: allow for it on top of the request timeout.
            timeout = (self.config.request_timeout_ms + wire.max_wait_ms(request)) / 1000
            # The response steps the core from the loop round that reads it (never from inside a step:
            # callbacks come from the connection's reads and timers). (A partial: called from C, no frame of its own.)
            client.send_with_callback(api_key, version, body, timeout,
                                      functools.partial(self._on_response, dest, request, version, request_id))
        except RequestError as exc:
            # Reported from the loop, not from here: this runs inside _apply, and steps never nest.
            asyncio.get_running_loop().call_soon(self._request_failed, dest, request, request_id, exc)
            return
        self._outstanding += 1

    def _pre_vote_unsupported(self, dest: int, request_id: int) -> None:
        """KIP-996 / Kafka 4.x: a pre-vote cannot be written below Vote v2. Kafka's network client fails the
        send (UnsupportedVersionException), and KafkaRaftClient.maybeSendRequest turns that into a Vote
        response with the top-level error UNSUPPORTED_VERSION; the core then becomes a candidate at once
        (handleVoteResponse). Stepped from the loop, not from inside this step."""
        answer = VoteResponse(-1, -1, False, error=Errors.UNSUPPORTED_VERSION)

        def deliver() -> None:
            if not self._stopping:
                self._step(ResponseReceived(sender_id=dest, response=answer, request_id=request_id))

        asyncio.get_running_loop().call_soon(deliver)

    def _on_response(self, dest: int, request: Any, version: int, request_id: int, body: Any,
                     exc: BaseException | None) -> None:
        """The callback of a request ``_send_on`` sent (``body`` read by the client's codec, or ``exc``)."""
        self._outstanding -= 1
        if self._outstanding == 0 and self._all_answered is not None and not self._all_answered.done():
            self._all_answered.set_result(None)
        if self._stopping:
            return
        if exc is None and type(body) is FetchResponse:
            response = body  # a Fetch answer comes as the core's message already (typed_wire)
        else:
            try:
                if exc is not None:
                    raise exc
                assert body is not None
                response = wire.response_from_kafka(wire.api_key(request), version, body)  # the codec's dict
            except (RequestError, wire.WireError, asyncio.CancelledError) as exc:
                self._request_failed(dest, request, request_id, exc)
                return
        self._step(ResponseReceived(sender_id=dest, response=response, request_id=request_id))

    def _request_failed(self, dest: int, request: Any, request_id: int, exc: BaseException) -> None:
        if self._stopping:
            return
        api = codec.api_name(wire.api_key(request))
        log.debug("%s to node %d failed: %s", api, dest, exc)
        peer = self._peers.get(dest)
        if peer is not None and peer.client is not None and not peer.client.connected:
            self._spawn(peer.client.close())
            peer.client = None
        self._step(RequestFailed(dest_id=dest, api=api, request_id=request_id))

    # ------------------------------------------------------------------ client writes

    async def write(self, values: list[bytes], wait_commit: bool = True) -> ClientAppendResult:
        """Append values on the leader (as one batch, possibly with other writes held back for
        ``controller.quorum.append.linger.ms``); with ``wait_commit`` return once the high watermark passes
        them. A leader already holding ``max_uncommitted_records`` uncommitted records (queued ones included) raises
        ``WriteRefused``. The core takes at most a slice of writes per event-loop turn (``APPEND_SLICE_WRITES``); a
        write past it waits in the append queue, in order, for a later turn."""
        if self.failure is not None:
            raise self._halted_error()
        core = self.core
        batch = tuple(values)
        # (``core.leader_id`` walks the roles: a Leader's is this node, asked first.)
        if core is not None and (isinstance(core.role, Leader) or core.leader_id == self.config.node_id):
            # A bounded queue, not growing memory: a leader that cannot commit as fast as it is written to refuses
            # the excess (one write is always taken when nothing is waiting, however large, as Kafka's non-strict
            # memory pool admits one request past its bound). Writes held back by the linger or queued count too.
            hw = self.high_watermark
            uncommitted = core.next_append_offset - (hw if hw > 0 else 0) + self._queued_records
            if uncommitted > 0 and uncommitted + len(batch) > self.max_uncommitted_records:
                self.writes_refused += 1
                raise WriteRefused(f"{uncommitted} records appended or queued and not yet committed (bound "
                                   f"{self.max_uncommitted_records}): {WriteRefused.error.name}")
        # (``_slice_has_room`` inline: the first write of a loop turn, the usual one, has room.)
        if self._appends or (self._slice_writes and not self._slice_has_room(len(batch))):
            assert self._loop is not None, "write before start"
            queued: asyncio.Future[ClientAppendResult] = self._loop.create_future()
            self._appends.append((batch, queued))
            self._queued_records += len(batch)
            if self._drain_handle is None:
                self._drain_handle = self._loop.call_soon(self._drain_appends)
            result = await queued
        else:
            result = self._append(batch)
        if result.accepted and wait_commit:
            assert self._loop is not None, "write before start"
            fut: asyncio.Future[None] = self._loop.create_future()
            self._commit_waiters.append((result.last_offset, result.epoch, fut))
            self._release_commits()
            await fut
        return result

    def wait_leading(self, timeout_s: float) -> asyncio.Future[bool]:
        """A future that becomes True once this node is the Raft leader (at once if it is), False after ``timeout_s``.

        The write workload waits on it while it follows: it wakes when the step that makes this node leader runs
        (``_sync_controller``), with no polling timer waking an idle follower in between (which cost a follower CPU
        at every poll, and a newly elected leader up to a poll interval before its first write)."""
        assert self._loop is not None, "wait_leading before start"
        fut: asyncio.Future[bool] = self._loop.create_future()
        if self.is_leader:
            fut.set_result(True)
            return fut
        timer = self._loop.call_later(timeout_s, self._leading_timeout, fut)
        self._leading_waiters.append((fut, timer))
        return fut

    def _leading_timeout(self, fut: asyncio.Future[bool]) -> None:
        self._leading_waiters = [(f, t) for f, t in self._leading_waiters if f is not fut]
        if not fut.done():
            fut.set_result(False)

    def _settle_leading_waiters(self, leading: bool) -> None:
        waiters, self._leading_waiters = self._leading_waiters, []
        for fut, timer in waiters:
            timer.cancel()
            if not fut.done():
                fut.set_result(leading)

    def _slice_has_room(self, records: int) -> bool:
        """May this loop turn hand the core another write of ``records`` records (``APPEND_SLICE_WRITES``)?"""
        return self._slice_writes < APPEND_SLICE_WRITES and (
            self._slice_records == 0 or self._slice_records + records <= APPEND_SLICE_RECORDS)

    def _append(self, batch: tuple[bytes, ...]) -> ClientAppendResult:
        """Hand one client write to the core, counted in this turn's slice."""
        if self._slice_writes == 0 and self._slice_reset is None and self._loop is not None:
            self._slice_reset = self._loop.call_soon(self._new_slice)  # the next turn starts a new slice
        self._slice_writes += 1
        self._slice_records += len(batch)
        result = self._step(ClientWrite(batch)).client_append
        assert result is not None, "the core answers every ClientWrite"
        return result

    def _new_slice(self) -> None:
        self._slice_reset = None
        self._slice_writes = self._slice_records = 0

    def _drain_appends(self) -> None:
        """One slice of the append queue, oldest first; the rest waits for the next turn (the loop reads its
        sockets in between)."""
        self._drain_handle = None
        if self._slice_reset is None:
            self._new_slice()  # no write of this turn yet: the slice is the drain's own
        self.append_slices += 1
        appends = self._appends
        while appends and self._slice_has_room(len(appends[0][0])):
            batch, fut = appends.popleft()
            self._queued_records -= len(batch)
            if fut.done():
                continue  # its writer gave up (cancelled): never appended
            if self.failure is not None or self._stopping:
                fut.set_exception(self._halted_error() if self.failure is not None else RuntimeError("node stopped"))
                continue
            fut.set_result(self._append(batch))
        if appends and self._loop is not None:
            self._drain_handle = self._loop.call_soon(self._drain_appends)

    def _release_commits(self) -> bool:
        """Settle the commit waiters the high watermark decides; whether any was."""
        assert self.core is not None and self.metadata_log is not None
        if not self._commit_waiters:
            return False
        keep = []
        # The leader's (epoch, next append offset), as ``core.status()`` gives them, without building a status:
        # this runs on every commit.
        role = self.core.role
        held_back = (role.epoch, self.core.next_append_offset) if isinstance(role, Leader) else None
        for offset, epoch, fut in self._commit_waiters:
            outcome = commit_outcome(self.metadata_log, self.high_watermark, offset, epoch, held_back)
            if outcome == "pending":
                keep.append((offset, epoch, fut))
            elif not fut.done():
                if outcome == "committed":
                    fut.set_result(None)
                else:
                    fut.set_exception(WriteLost(f"the write ending at offset {offset} (epoch {epoch}) was "
                                                "truncated before it committed: leadership changed"))
        released = len(keep) < len(self._commit_waiters)
        self._commit_waiters = keep
        return released

    # ------------------------------------------------------------------ brokers

    def _catch_up_soon(self) -> None:
        """The queued catch-up (see ``_catch_up``), run from the loop."""
        if self._stopping or self.core is None:
            return  # left set: ``stop`` applies the records
        self._catch_up_handle = None
        self._registry_catch_up()

    def _catch_up(self) -> None:
        """Bring the registry to the high watermark now if a catch-up is queued: before the core steps again, a
        broker request is decided, the controller's timer runs, or the node stops.

        A step that commits a client write settles its waiter first and leaves the registry behind the high
        watermark for one loop callback, queued behind the writer's wake-up (``_apply_ready``): the registry
        apply and the controller's check are then off the commit's latency. Kafka orders it alike: the raft
        client's handleCommit hands committed batches to the QuorumController, which replays them in its own event
        queue, after the raft thread's own work. The controller's decisions are unchanged: ``_sync_controller``
        does not run while the registry lags (it runs here, with it caught up), and nothing that reads the
        registry or the controller runs before this, so the active controller and every broker answer are as if
        the registry had moved in the commit's own step (a broker answer still waits for its records' replay)."""
        handle = self._catch_up_handle
        if handle is not None:
            handle.cancel()
            self._catch_up_handle = None
            self._registry_catch_up()

    def _registry_catch_up(self) -> None:
        try:
            self._apply_committed_records()
        except (StorageError, OSError) as exc:  # as in the commit's own step (``_apply``)
            self._halt(exc)
            return
        self._sync_controller()

    def _apply_committed_records(self) -> None:
        """Every node applies newly committed records to its broker registry, in log order (broker_driver.py)."""
        log_ = self.metadata_log
        assert log_ is not None
        brokers = self.brokers
        done = brokers.commit(self.high_watermark, log_.iter_sized, log_.epoch_of)
        if done.bytes or brokers.registry.next_offset != self.snapshot_trigger.applied_offset:
            self._note_commit(done.bytes)
        if done.changes:
            now = self.clock.now_ms()
            for change in done.changes:
                self._emit({"ts": now, "node": self.config.node_id, "event": "BrokerEvent",
                            "broker": change.to_json(), "note": change.record})
        for error in done.errors:
            log.error("broker registry refused a committed record: %s", error)
        if done.answers:
            self._deliver(done.answers)
        if done.fatal:
            # Kafka's QuorumController: a committed record that does not replay is a fatal fault.
            self._halt(done.errors[0])

    def _sync_controller(self) -> None:
        """Active controller = Raft leader whose epoch has committed an entry and whose registry holds the
        whole committed log (broker_driver.py ``leadership``)."""
        core = self.core
        if core is None:
            return
        brokers = self.brokers
        if not brokers.active and core.leader_id != self.config.node_id:
            return  # not leading, nothing to leave: every follower's step, the common case (no status built)
        if self._leading_waiters and isinstance(core.role, Leader):
            self._settle_leading_waiters(True)
        # A leader's step that changed nothing ``leadership`` decides on (nearly all of them, commits included: see
        # ``_leadership_inputs``) builds no status: once it has run, running it again on the same inputs changes
        # nothing.
        seen = self._leadership_inputs(core)
        if seen == self._leadership_seen:
            return
        status = core.status()
        change = brokers.leadership(status, self.clock.now_ms(), stopping=self._stopping)
        self._leadership_seen = self._leadership_inputs(core)
        if change.activated:
            log.info("node %d is the active controller (epoch %d, %d brokers)",
                     self.config.node_id, status.epoch, len(self.brokers.registry))
        elif change.deactivated:
            self._deliver(change.answers)
            log.info("node %d is no longer the active controller", self.config.node_id)

    def _leadership_inputs(self, core: KRaftCore) -> tuple[Any, ...]:
        """What ``BrokerDriver.leadership`` decides on: the status fields as ``core.status()`` computes them
        (is_leader, epoch, cluster_id), the controller's state, and its two offset conditions as they stand (the
        high watermark past the epoch's start offset; the registry's offset at or past the high watermark), not
        the offsets themselves: a commit moves both offsets, and on a leader whose registry keeps up changes
        neither condition, so the leader's commits build no status (this runs on every commit, in ``_catch_up``)."""
        role, brokers = core.role, self.brokers
        leading = isinstance(role, Leader)
        hw = core.high_watermark
        return (leading, role.epoch, leading and hw > role.epoch_start_offset, brokers.applied_offset >= hw,
                core.cluster_id, brokers.active, brokers.controller.epoch, self._stopping)

    async def _handle_broker_request(self, req: ServerRequest) -> dict[str, Any] | None:
        """BrokerRegistration / BrokerHeartbeat: the driver decides; the shell appends and waits."""
        assert self.core is not None
        self._catch_up()
        decision = self.brokers.decide(req.api_key, req.body, self.clock.now_ms(), self.core.status())
        if decision.note:
            log.debug("%s", decision.note)
        token = next(self._broker_tokens)
        answer = self._commit_decision(decision, token, req.api_key)
        if answer is not None:
            return answer.response
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._broker_answers[token] = fut
        heartbeat = req.api_key == broker_controller.BROKER_HEARTBEAT
        try:
            return await asyncio.wait_for(fut, self._broker_deadline_ms(heartbeat) / 1000)
        except TimeoutError:
            self._broker_answers.pop(token, None)
            self.brokers.forget(token)
            if heartbeat:
                # Kafka's answer to a heartbeat its controller did not complete by the deadline (see
                # _broker_deadline_ms): retriable; the broker heartbeats again and its session was kept.
                log.warning("broker heartbeat from broker %s timed out after %d ms: its records did not commit",
                            req.body.get("BrokerId"), self._broker_deadline_ms(True))
                return broker_controller.error_response(req.api_key, Errors.REQUEST_TIMED_OUT)
            return broker_controller.error_response(req.api_key, Errors.NOT_CONTROLLER)

    def _broker_deadline_ms(self, heartbeat: bool) -> int:
        """How long a broker request's answer may wait for its records to commit.

        A BrokerHeartbeat: broker.heartbeat.interval.ms / 2, answered REQUEST_TIMED_OUT past it, as Kafka does
        (ControllerApis.handleBrokerHeartBeatRequest gives the controller event that deadline; KafkaEventQueue
        fails an event not run by then with TimeoutException, which Errors.forException maps to
        REQUEST_TIMED_OUT, and QuorumController.processBrokerHeartbeat then keeps the broker's session alive,
        ReplicationControlManager.processExpiredBrokerHeartbeat). Kafka's deadline bounds the time the heartbeat
        waits in the controller's queue; this node decides a heartbeat the moment it reads it (its session is
        renewed then), so the only wait left to bound is the one for its records to commit. A heartbeat answer
        later than that is no use to the broker, which sends the next one an interval later.
        A BrokerRegistration has no deadline in Kafka (ControllerApis.handleBrokerRegistration); here it is
        bounded by the session timeout and answered NOT_CONTROLLER, so that a registration never waits forever
        on a leader that can no longer commit."""
        if heartbeat:
            return max(1, self.config.broker_heartbeat_interval_ms // 2)
        return self.config.broker_session_timeout_ms

    def _commit_decision(self, decision: Decision, token: int | None, api_key: int) -> BrokerAnswer | None:
        """Append the decision's records (one ClientWrite); the answer for ``token`` if it is known now."""
        assert self.metadata_log is not None
        result = None
        if decision.records:
            result = self._step(ClientWrite(tuple(r.value() for r in decision.records))).client_append
        change, answer = self.brokers.appended(
            decision, result, token, api_key, self.high_watermark, self.metadata_log.epoch_of)
        self._deliver(change.answers)
        return answer

    def _deliver(self, answers: tuple[BrokerAnswer, ...]) -> None:
        """Hand each broker answer to the request waiting for it (gone when it timed out)."""
        for answer in answers:
            fut = self._broker_answers.pop(answer.token, None)
            if fut is not None and not fut.done():
                fut.set_result(answer.response)

    async def _controller_loop(self) -> None:
        """Session expiry: fence brokers that stopped heartbeating (``broker.session.timeout.ms``)."""
        period = max(0.01, min(0.25, self.config.broker_session_timeout_ms / 4000))
        while not self._stopping:
            await asyncio.sleep(period)
            if self._stopping or self.core is None:
                continue
            self._catch_up()
            # KIP-630's time rules: metadata.log.max.snapshot.interval.ms (Kafka looks at it when a commit
            # arrives, and its controller commits a no-op every 500 ms; this node writes none) and the cleaner.
            now = self.clock.now_ms()
            if self.snapshot_trigger.due(now) is not None:
                self._maybe_snapshot()
            elif now - self._last_clean_ms >= CLEAN_INTERVAL_MS:
                self._maybe_clean(now)
            if not self.brokers.active:
                continue
            decision = self.brokers.expire(self.clock.now_ms(), self.core.status())
            if decision is not None:
                log.info("%s", decision.note)
                self._commit_decision(decision, None, 0)

    # ------------------------------------------------------------------ tracing

    def _wants_frames(self) -> bool:
        """Observe every frame? Only to trace them: decoding bodies for nothing costs CPU on the hot path."""
        return self.trace is not None

    def _emit(self, event: dict[str, Any]) -> None:
        if self.trace is not None:
            self.trace.emit(event)

    def _message_event(self, kind: str, direction: str, api_key: int, version: int, corr: int,
                       body: dict[str, Any], src: int, dst: int) -> None:
        if self.trace is None:
            return
        self._emit({
            "ts": self.clock.now_ms(),
            "node": self.config.node_id,
            "event": "Receive" if direction == "recv" else "Send",
            "msg": {"api": codec.api_name(api_key), "apiKey": api_key, "kind": kind, "version": version,
                    "correlationId": corr, "from": src, "to": dst, "body": to_jsonable(body)},
        })
        if direction == "send":
            # The observer runs before the frame is written: with the line in the kernel first, a kill -9
            # never leaves a peer's Receive without its Send (trace validation of merged node traces).
            self.trace.flush()

    def _observe_server(self, direction: str, api_key: int, version: int, corr: int,
                        body: dict[str, Any], peer: str) -> None:
        # The wire does not say who a connection belongs to; the request body does (CandidateId, ...).
        me = self.config.node_id
        if direction == "recv":
            if api_key in broker_controller.SERVED_API_VERSIONS:
                other = body.get("BrokerId", -1)
            else:
                try:
                    other = wire.sender_of(wire.request_from_kafka(api_key, version, body))
                except wire.WireError:
                    other = -1
            self._peer_of_corr[(peer, corr)] = other
            self._message_event("request", "recv", api_key, version, corr, body, other, me)
        else:
            other = self._peer_of_corr.pop((peer, corr), -1)
            self._message_event("response", "send", api_key, version, corr, body, me, other)

    def _observe_client(self, dest: int) -> Callable[[str, int, int, int, dict[str, Any], str], None]:
        me = self.config.node_id

        def observe(direction: str, api_key: int, version: int, corr: int, body: dict[str, Any], _peer: str) -> None:
            if api_key == 18:  # ApiVersions is transport negotiation, not protocol
                return
            if direction == "send":
                self._message_event("request", "send", api_key, version, corr, body, me, dest)
            else:
                self._message_event("response", "recv", api_key, version, corr, body, dest, me)

        return observe
