"""A small broker, as a controller sees one: register, heartbeat, follow the metadata log, shut down.

It speaks only the wire protocol (KIP-631 BrokerRegistration/BrokerHeartbeat, KIP-595 Fetch and
DescribeQuorum), so it plays a broker against any controller: the reference node's cluster tests use
it, and so can the conformance scenarios. What it does, in KIP-631's words:

* "Register Flow": find the active controller (the quorum leader: the one node that answers
  DescribeQuorum), send BrokerRegistration; a NOT_CONTROLLER answer or a dead connection sends it
  looking again (``following NOT_CONTROLLER to the leader``).
* It replays the committed metadata log into its own ``BrokerRegistry`` by fetching
  ``__cluster_metadata`` as an observer — "the normal metadata fetches act both as heartbeats and a
  way to propagate information" — and reports how far it got as ``CurrentMetadataOffset``: the
  controller unfences it once that passes its registration record.
* Heartbeats every ``heartbeat_interval_ms`` (Kafka's broker.heartbeat.interval.ms); an answer of
  BROKER_ID_NOT_REGISTERED or STALE_BROKER_EPOCH makes it register again.
* ``controlled_shutdown()``: WantShutDown until the controller answers ShouldShutDown ("Stopping").
* ``stop()`` just stops — to the controller that is a crashed broker whose session will expire.

``read_registry`` is the same log reader used once, for ``kraft-tck quorum ... describe --brokers``.

Once the leader has snapshotted and cleaned its log (KIP-630), the log no longer starts at 0: a Fetch below the
log start (or from 0 while a snapshot exists) is answered with a ``SnapshotId`` and no records. The reader then
does what Kafka's followers and observers do (``KafkaRaftClient.handleFetchResponse`` /
``handleFetchSnapshotResponse``): it asks for that snapshot with FetchSnapshot, chunk by chunk from Position 0
until Size, validates the whole file (``snapshot.decode_snapshot``), rebuilds the registry from it
(``BrokerRegistry.from_snapshot``) and fetches the log from the snapshot's end offset on. SNAPSHOT_NOT_FOUND (the
leader made a newer snapshot and deleted this one meanwhile) starts again from a Fetch, as Kafka does; any other
problem (POSITION_OUT_OF_RANGE, a chunk that does not fit, a corrupt snapshot) is a ``BrokerError`` naming it,
and the registry is left as it was — never half a snapshot.

Every connection speaks the client security in force (``quorum_client.CLIENT_SECURITY``: TLS and SASL from
``--command-config``), or the ``security`` a ``BrokerClient`` is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft_tck.reference import wire
from kraft_tck.reference.controller import BROKER_HEARTBEAT, BROKER_REGISTRATION
from kraft_tck.reference.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    SnapshotId,
)
from kraft_tck.reference.net import KafkaClient, RequestError
from kraft_tck.reference.quorum_client import CLIENT_SECURITY, QuorumError, QuorumInfo, new_client, secured
from kraft_tck.reference.quorum_client import find_leader as quorum_find_leader
from kraft_tck.reference.registry import BrokerRegistration, BrokerRegistry, BrokerState, RegistryError
from kraft_tck.reference.security import ClientSecurity
from kraft_tck.reference.snapshot import decode_snapshot, snapshot_filename
from kraft_tck.reference.storage import CorruptFileError
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import RecordBatch

log = logging.getLogger("kraft_tck.reference.broker_client")

Endpoint = tuple[str, int]
PLAINTEXT = 0  # Kafka's SecurityProtocol id


class BrokerError(Exception):
    """The broker could not get an answer it can act on; the message says what it tried."""


def parse_endpoints(text: str) -> list[Endpoint]:
    """``host:port[,host:port...]`` (an ``id@`` prefix, as in controller.quorum.voters, is allowed)."""
    out: list[Endpoint] = []
    for item in text.split(","):
        item = item.strip().split("@", 1)[-1]
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"expected host:port, got {item!r} in {text!r}")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("no controller endpoints given")
    return out


async def find_leader(endpoints: Sequence[Endpoint], timeout_s: float) -> tuple[Endpoint, QuorumInfo]:
    """The endpoint of the quorum leader: the node that answers DescribeQuorum (KIP-595 "Tooling"); a
    node that is not the leader is asked where it is (``quorum_client.find_leader``), so one follower's
    address is enough."""
    try:
        return await quorum_find_leader(endpoints, timeout_s)
    except QuorumError as exc:
        raise BrokerError(str(exc)) from exc


# ============================================================================================ the log reader


class SnapshotGone(BrokerError):
    """SNAPSHOT_NOT_FOUND in the middle of a download: the leader has a newer snapshot and deleted this one
    (Kafka's ``handleFetchSnapshotResponse`` then drops the download and sends a Fetch again)."""


@dataclass
class MetadataReader:
    """Replays the committed prefix of ``__cluster_metadata`` (read from the leader) into a registry; starts from
    the leader's snapshot when the leader says so (see the module docstring)."""

    replica_id: int = -1  # -1: a tool; a broker fetches as an observer under its own id, as Kafka's do
    cluster_id: str | None = None
    registry: BrokerRegistry = field(default_factory=BrokerRegistry)
    high_watermark: int = 0
    _last_epoch: int = 0  # epoch of the record before registry.next_offset (0: none yet, as Kafka)
    on_change: Callable[[BrokerRegistration | None, int], None] | None = None
    #: FetchSnapshot MaxBytes: the most one chunk carries (Kafka's followers use their fetch max bytes).
    snapshot_max_bytes: int = 1 << 20
    #: Snapshots loaded, in order; FetchSnapshot chunks received; downloads dropped on SNAPSHOT_NOT_FOUND.
    snapshots_loaded: list[SnapshotId] = field(default_factory=list)
    snapshot_chunks: int = 0
    snapshot_restarts: int = 0
    _gone_in_a_row: int = 0

    @property
    def metadata_offset(self) -> int:
        """The last offset replayed (KIP-631 CurrentMetadataOffset), -1 before the first record."""
        return self.registry.next_offset - 1

    async def fetch_once(self, client: KafkaClient, leader_epoch: int, max_wait_ms: int, timeout_s: float) -> int:
        """One Fetch from the leader; applies what is committed; returns the leader's high watermark. An answer
        with a SnapshotId downloads and loads that snapshot instead (the next Fetch goes on from its end); if the
        leader deleted it meanwhile (SNAPSHOT_NOT_FOUND) nothing changes and the next Fetch starts over."""
        version = client.best_version(wire.FETCH)
        req = FetchRequest(
            cluster_id=self.cluster_id,
            replica_id=self.replica_id,
            current_leader_epoch=leader_epoch,
            fetch_offset=self.registry.next_offset,
            last_fetched_epoch=self._last_epoch,
            max_wait_ms=max_wait_ms,
            max_bytes=1 << 20,
        )
        body = await client.request(wire.FETCH, version, wire.request_to_body(req, version),
                                    timeout_s + max_wait_ms / 1000)
        resp = wire.response_from_kafka(wire.FETCH, version, body)
        assert isinstance(resp, FetchResponse)
        error = resp.error if resp.error != Errors.NONE else resp.partition_error
        if error != Errors.NONE or resp.diverging_epoch is not None:
            raise BrokerError(f"Fetch from the leader: {error.name}, diverging {resp.diverging_epoch}")
        self.high_watermark = max(self.high_watermark, resp.high_watermark)
        if resp.snapshot_id is not None:
            try:
                await self.load_snapshot(client, leader_epoch, resp.snapshot_id, timeout_s)
            except SnapshotGone as exc:
                self.snapshot_restarts += 1
                self._gone_in_a_row += 1
                log.info("%s; fetching again", exc)
                if self._gone_in_a_row > 1:  # the first time at once (Kafka); then do not spin on the leader
                    await asyncio.sleep(min(0.01 * self._gone_in_a_row, 0.2))
            else:
                self._gone_in_a_row = 0
            return resp.high_watermark
        self._apply(resp.batches)
        return resp.high_watermark

    # ------------------------------------------------------------------------------------ snapshots (KIP-630)

    async def load_snapshot(self, client: KafkaClient, leader_epoch: int, sid: SnapshotId, timeout_s: float) -> None:
        """Download snapshot ``sid`` from the leader (FetchSnapshot from Position 0 until Size, all on this one
        connection), validate it whole and make the registry the snapshot's. Raises ``SnapshotGone`` on
        SNAPSHOT_NOT_FOUND and ``BrokerError`` on anything else that is wrong; the registry is then unchanged."""
        where = f"snapshot {sid.end_offset}-{sid.epoch} from {client.peer}"
        if sid.end_offset < 0 or sid.epoch < 0:
            raise BrokerError(f"the leader {client.peer} answered the Fetch with an invalid SnapshotId {sid}")
        if sid in self.snapshots_loaded and self.registry.next_offset == sid.end_offset:
            # Kafka's follower never downloads a snapshot it holds; a leader pointing at it again would loop.
            raise BrokerError(f"the leader {client.peer} sent {where} again, at its end offset")
        data = await self._download(client, leader_epoch, sid, where, timeout_s)
        try:
            snap = decode_snapshot(Path(client.peer) / snapshot_filename(sid), data, sid)
        except CorruptFileError as exc:
            raise BrokerError(f"{where} is not a valid snapshot: {exc.problem}") from None
        try:
            loaded = BrokerRegistry.from_snapshot(sid.end_offset, (r for b in snap.batches for r in b.records))
        except RegistryError as exc:
            raise BrokerError(f"{where} holds a registry that does not apply: {exc}") from None
        before = {b.broker_id: b for b in self.registry.brokers()}
        self.registry.replace_with(loaded)
        self._last_epoch = sid.epoch
        self.high_watermark = max(self.high_watermark, sid.end_offset)
        self.snapshots_loaded.append(sid)
        log.info("loaded %s (%d bytes, %d brokers)", where, len(data), len(loaded))
        if self.on_change is not None:
            after = {b.broker_id: b for b in loaded.brokers()}
            for broker_id in sorted(before.keys() | after.keys()):
                if before.get(broker_id) != after.get(broker_id):
                    self.on_change(after.get(broker_id), broker_id)

    async def _download(self, client: KafkaClient, leader_epoch: int, sid: SnapshotId, where: str,
                        timeout_s: float) -> bytes:
        chunks: list[bytes] = []
        position, size = 0, -1
        while size < 0 or position < size:
            resp = await self.fetch_snapshot_chunk(client, leader_epoch, sid, position, timeout_s)
            if resp.error != Errors.NONE:
                raise BrokerError(f"FetchSnapshot of {where}: {resp.error.name}")
            # Kafka's order: any other error first (maybeHandleCommonResponse), then SNAPSHOT_NOT_FOUND or no id.
            if resp.partition_error not in (Errors.NONE, Errors.SNAPSHOT_NOT_FOUND):
                raise BrokerError(f"FetchSnapshot of {where} at position {position}: {resp.partition_error.name}")
            if resp.partition_error == Errors.SNAPSHOT_NOT_FOUND or resp.snapshot_id is None \
                    or resp.snapshot_id.end_offset < 0 or resp.snapshot_id.epoch < 0:
                raise SnapshotGone(f"{where}: {resp.partition_error.name} at position {position} (a newer snapshot "
                                   "replaced it)")
            if resp.snapshot_id != sid or resp.position != position:
                raise BrokerError(f"FetchSnapshot of {where} at position {position} was answered for snapshot "
                                  f"{resp.snapshot_id.end_offset}-{resp.snapshot_id.epoch} at position {resp.position}")
            if size >= 0 and resp.size != size:
                raise BrokerError(f"FetchSnapshot of {where}: its size changed from {size} to {resp.size} bytes")
            size = resp.size
            if size <= 0 or not resp.records or position + len(resp.records) > size:
                raise BrokerError(f"FetchSnapshot of {where} at position {position}: {len(resp.records)} bytes of "
                                  f"a {size}-byte snapshot")
            chunks.append(resp.records)
            position += len(resp.records)
            self.snapshot_chunks += 1
        return b"".join(chunks)

    async def fetch_snapshot_chunk(self, client: KafkaClient, leader_epoch: int, sid: SnapshotId, position: int,
                                   timeout_s: float) -> FetchSnapshotResponse:
        """One FetchSnapshot request (KIP-630) and its decoded answer."""
        version = client.best_version(wire.FETCH_SNAPSHOT)
        req = FetchSnapshotRequest(self.cluster_id, self.replica_id, leader_epoch, sid, position,
                                   self.snapshot_max_bytes)
        body = await client.request(wire.FETCH_SNAPSHOT, version, wire.request_to_body(req, version), timeout_s)
        resp = wire.response_from_kafka(wire.FETCH_SNAPSHOT, version, body)
        assert isinstance(resp, FetchSnapshotResponse)
        return resp

    # ------------------------------------------------------------------------------------ the log

    def _apply(self, batches: Sequence[RecordBatch]) -> None:
        changes, errors = self.registry.apply_committed(batches, self.high_watermark)
        for error in errors:
            log.warning("metadata log: %s", error)
        for batch in batches:
            if batch.base_offset < self.registry.next_offset:
                self._last_epoch = batch.partition_leader_epoch
        if self.on_change is not None:
            for change in changes:
                self.on_change(self.registry.get(change.broker_id), change.broker_id)


async def read_registry(endpoints: Sequence[Endpoint], timeout_s: float = 5.0, *,
                        reader: MetadataReader | None = None) -> tuple[BrokerRegistry, QuorumInfo]:
    """The broker registry of the committed log, read from the leader (``describe --brokers``): its latest
    snapshot when it has cleaned its log, then the log after it. ``reader``: a fresh one by default."""
    (host, port), info = await find_leader(endpoints, timeout_s)
    reader = reader if reader is not None else MetadataReader()
    client = new_client(host, port, "kraft-tck-brokers")
    deadline = time.monotonic() + timeout_s
    try:
        await client.connect(timeout_s)
        while True:
            hw = await reader.fetch_once(client, info.leader_epoch, 0, timeout_s)
            if reader.registry.next_offset >= hw:
                return reader.registry, info
            if time.monotonic() > deadline:
                dropped = (f" ({reader.snapshot_restarts} snapshot downloads dropped: the leader replaced them)"
                           if reader.snapshot_restarts else "")
                raise BrokerError(f"log not read up to the high watermark {hw} within {timeout_s}s{dropped}")
    except RequestError as exc:
        raise BrokerError(f"{host}:{port}: {exc}") from exc
    finally:
        await client.close()


def render_brokers(registry: BrokerRegistry, info: QuorumInfo) -> str:
    header = ("BrokerId", "State", "BrokerEpoch", "IncarnationId", "Rack", "Listeners")
    rows = [header]
    for b in registry.brokers():
        rows.append((str(b.broker_id), str(b.state), str(b.broker_epoch), str(b.incarnation_id),
                     b.rack or "-", ",".join(str(x) for x in b.listeners)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


# ============================================================================================ the broker


@dataclass(frozen=True)
class RegistrationResult:
    error: Errors
    broker_epoch: int


@dataclass(frozen=True)
class HeartbeatResult:
    error: Errors
    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


class BrokerClient:
    """One broker process, reduced to what the controller sees of it."""

    def __init__(
        self,
        broker_id: int,
        cluster_id: str,
        controllers: Sequence[Endpoint],
        *,
        listeners: Sequence[tuple[str, str, int]] = (),
        rack: str | None = None,
        incarnation_id: uuid.UUID | None = None,
        heartbeat_interval_ms: int = 200,
        request_timeout_ms: int = 2000,
        retry_backoff_ms: int = 50,
        fetch_metadata: bool = True,
        security: ClientSecurity | None = None,
    ) -> None:
        self.broker_id = broker_id
        #: TLS / SASL of every connection to the controllers (default: the CLIENT_SECURITY in force now).
        self.security = security if security is not None else CLIENT_SECURITY.get()
        self.cluster_id = cluster_id
        self.controllers = list(controllers)
        self.listeners = list(listeners) or [("PLAINTEXT", "127.0.0.1", 9092 + broker_id % 1000)]
        self.rack = rack
        self.incarnation_id = incarnation_id or uuid.uuid4()
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000
        self.timeout_s = request_timeout_ms / 1000
        self.backoff_s = retry_backoff_ms / 1000
        self.fetch_metadata = fetch_metadata
        self.broker_epoch = -1
        self.last_heartbeat: HeartbeatResult | None = None
        self.want_shutdown = False
        self.shut_down = asyncio.Event()
        self.reader = MetadataReader(replica_id=broker_id, cluster_id=cluster_id)
        #: Every state of this broker the committed log showed, in order (from its own replay).
        self.states_seen: list[BrokerState] = []
        self.reader.on_change = self._note_change
        self._controller: KafkaClient | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._changed = asyncio.Event()

    # ------------------------------------------------------------------------------------ state

    @property
    def registry(self) -> BrokerRegistry:
        return self.reader.registry

    @property
    def metadata_offset(self) -> int:
        return self.reader.metadata_offset

    def state_in_log(self) -> BrokerState | None:
        """This broker's state as the committed log it has replayed says (None: not registered there)."""
        reg = self.registry.get(self.broker_id)
        return reg.state if reg is not None and reg.broker_epoch == self.broker_epoch else None

    def _note_change(self, reg: BrokerRegistration | None, broker_id: int) -> None:
        mine = broker_id == self.broker_id and reg is not None
        if mine and reg is not None and (not self.states_seen or self.states_seen[-1] != reg.state):
            self.states_seen.append(reg.state)
        self._changed.set()

    async def wait_until(self, predicate: Callable[[], bool], timeout_s: float) -> None:
        """Wait until ``predicate()`` holds (re-checked on every log change and heartbeat)."""
        deadline = time.monotonic() + timeout_s
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"broker {self.broker_id}: condition not met within {timeout_s}s "
                                   f"(log state {self.state_in_log()}, last heartbeat {self.last_heartbeat})")
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 0.1))

    # ------------------------------------------------------------------------------------ single requests

    def registration_body(self, *, cluster_id: str | None = None, incarnation_id: uuid.UUID | None = None,
                          previous_broker_epoch: int = -1) -> dict[str, Any]:
        return {
            "BrokerId": self.broker_id,
            "ClusterId": self.cluster_id if cluster_id is None else cluster_id,
            "IncarnationId": incarnation_id or self.incarnation_id,
            "Listeners": [{"Name": n, "Host": h, "Port": p, "SecurityProtocol": PLAINTEXT}
                          for n, h, p in self.listeners],
            "Features": [],
            "Rack": self.rack,
            "IsMigratingZkBroker": False,
            "LogDirs": [],
            "PreviousBrokerEpoch": previous_broker_epoch,
        }

    async def register(self, **overrides: Any) -> RegistrationResult:
        """One BrokerRegistration (following NOT_CONTROLLER); on success ``broker_epoch`` is set."""
        body = await self.controller_request(BROKER_REGISTRATION, self.registration_body(**overrides))
        result = RegistrationResult(Errors(body["ErrorCode"]), body["BrokerEpoch"])
        if result.error == Errors.NONE and not overrides:
            self.broker_epoch = result.broker_epoch
            self._changed.set()
        return result

    async def heartbeat(self, *, want_fence: bool = False, want_shutdown: bool | None = None,
                        broker_epoch: int | None = None, metadata_offset: int | None = None) -> HeartbeatResult:
        """One BrokerHeartbeat (following NOT_CONTROLLER) with this broker's epoch and log position."""
        body = await self.controller_request(BROKER_HEARTBEAT, {
            "BrokerId": self.broker_id,
            "BrokerEpoch": self.broker_epoch if broker_epoch is None else broker_epoch,
            "CurrentMetadataOffset": self.metadata_offset if metadata_offset is None else metadata_offset,
            "WantFence": want_fence,
            "WantShutDown": self.want_shutdown if want_shutdown is None else want_shutdown,
            "OfflineLogDirs": [],
        })
        result = HeartbeatResult(Errors(body["ErrorCode"]), body["IsCaughtUp"], body["IsFenced"],
                                 body["ShouldShutDown"])
        if broker_epoch is None:
            self.last_heartbeat = result
            self._changed.set()
        return result

    async def controller_request(self, api_key: int, body: dict[str, Any], attempts: int = 40) -> dict[str, Any]:
        """Send to the active controller; rediscover it on NOT_CONTROLLER or a dead connection."""
        last = "no attempt"
        for _ in range(attempts):
            try:
                client = await self._controller_client()
                version = client.best_version(api_key)
                resp = await client.request(api_key, version, body, self.timeout_s)
            except (RequestError, BrokerError) as exc:
                last = str(exc)
                await self._drop_controller()
                await asyncio.sleep(self.backoff_s)
                continue
            if resp["ErrorCode"] == Errors.NOT_CONTROLLER:
                last = f"NOT_CONTROLLER from {client.peer}"
                await self._drop_controller()
                await asyncio.sleep(self.backoff_s)
                continue
            return resp
        raise BrokerError(f"broker {self.broker_id}: no active controller answered api {api_key} ({last})")

    async def _controller_client(self) -> KafkaClient:
        if self._controller is not None and self._controller.connected:
            return self._controller
        with secured(self.security):
            (host, port), _ = await find_leader(self.controllers, self.timeout_s)
            client = new_client(host, port, f"broker-{self.broker_id}")
        await client.connect(self.timeout_s)
        self._controller = client
        return client

    async def _drop_controller(self) -> None:
        if self._controller is not None:
            await self._controller.close()
            self._controller = None

    # ------------------------------------------------------------------------------------ the running broker

    async def start(self) -> None:
        """Run: metadata replay and register-then-heartbeat, in the background."""
        if self.fetch_metadata:
            self._tasks.append(asyncio.create_task(self._fetch_loop()))
        self._tasks.append(asyncio.create_task(self._heartbeat_loop()))

    async def controlled_shutdown(self, timeout_s: float) -> None:
        """WantShutDown until the controller says ShouldShutDown (KIP-631 "Stopping"), then stop."""
        self.want_shutdown = True
        await self.wait_until(self.shut_down.is_set, timeout_s)
        await self.stop()

    async def stop(self) -> None:
        """Stop everything at once: to the controller, this broker crashed."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        await self._drop_controller()

    async def _heartbeat_loop(self) -> None:
        while True:
            try:
                if self.broker_epoch < 0:
                    reg = await self.register()
                    if reg.error != Errors.NONE:
                        log.warning("broker %d: registration refused: %s", self.broker_id, reg.error.name)
                        await asyncio.sleep(self.heartbeat_interval_s)
                        continue
                hb = await self.heartbeat()
                if hb.error in (Errors.BROKER_ID_NOT_REGISTERED, Errors.STALE_BROKER_EPOCH):
                    self.broker_epoch = -1  # the controller forgot us: register again
                    continue
                if hb.should_shut_down:
                    self.shut_down.set()
                    self._changed.set()
                    return
            except BrokerError as exc:
                log.info("%s", exc)
            await asyncio.sleep(self.heartbeat_interval_s)

    async def _fetch_loop(self) -> None:
        client: KafkaClient | None = None
        epoch = -1
        while True:
            try:
                if client is None or not client.connected:
                    with secured(self.security):
                        (host, port), info = await find_leader(self.controllers, self.timeout_s)
                        client = new_client(host, port, f"broker-{self.broker_id}-metadata")
                    await client.connect(self.timeout_s)
                    epoch = info.leader_epoch
                await self.reader.fetch_once(client, epoch, int(self.heartbeat_interval_s * 1000), self.timeout_s)
            except (BrokerError, RequestError, wire.WireError) as exc:
                log.debug("broker %d metadata fetch: %s", self.broker_id, exc)
                if client is not None:
                    await client.close()
                client = None
                await asyncio.sleep(self.backoff_s)
