"""Virtual voters: the harness's share of the target's quorum, speaking the real Kafka wire protocol.

The target is one voter of a 3- (or 5-) voter quorum; every other voter is a ``VirtualVoter`` run here:
an asyncio ``KafkaServer`` that answers the target's requests as scripted, plus a ``KafkaClient`` per
voter through which the harness sends Vote / BeginQuorumEpoch / EndQuorumEpoch / Fetch /
DescribeQuorum to the target. Because the virtual voters are a majority, the harness decides who leads.

Every frame in both directions is recorded in the current scenario's ``FrameLog`` (what the report and
the failure messages show, and what the per-scenario trace is written from), and in the session-long
``SessionLog`` (frames between cases too, cut into lives of the target), which the session harness
traces are written from: black-box trace validation of everything the target did, case after case.

The virtual voters share one log, ``VLog``: the quorum's history as the harness knows it. A virtual
leader serves it to the target (KIP-595 "Fetch Request Handling" 1-4, implemented independently of the
reference node so a bug there cannot hide itself); a virtual follower mirrors the target's log into it.
The harness never truncates it below what it has seen committed: scenarios may create uncommitted
suffixes on the target that a later virtual leader makes it truncate, which is the protocol at work.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from ssl import SSLContext
from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance import snapshots as S
from kraft_tck.conformance.security import Login, SaslAccounts
from kraft_tck.conformance.transport import KafkaClient, KafkaServer, RequestError, ServerRequest
from kraft_tck.spec import codec
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import ControlType, RecordBatch, control_batch, data_batch

log = logging.getLogger("kraft_tck.conformance.virtual")

#: A parked fetch (nothing new for the target) is answered after at most this long, even if the target
#: asked for a longer MaxWaitMs: short parks keep scenario hand-overs fast.
MAX_PARK_MS = 200
#: The metadata.version a log the harness begins starts with: FeatureLevelRecord("metadata.version", 7),
#: Kafka's MetadataVersion.IBP_3_3_IV3, the lowest level every KRaft controller from 3.3 on still reads
#: (Kafka's own bootstrap writes the metadata.version record first: ActivationRecordsGenerator
#: .recordsForEmptyLog).
METADATA_VERSION_LEVEL = 7


def metadata_value(name: str, body: dict[str, Any] | None = None, version: int = 0) -> bytes:
    """A metadata record value as a Kafka controller writes and replays it: ApiMessageAndVersion framing
    (unsigned varints frame version 1, api key, record version, then the record body), Kafka's
    ``AbstractApiMessageSerde.write`` / ``MetadataRecordSerde``."""
    return codec.encode_metadata_record(name, version, body or {})


NOOP_VALUE = metadata_value("NoOpRecord")
METADATA_VERSION_VALUE = metadata_value(
    "FeatureLevelRecord", {"Name": "metadata.version", "FeatureLevel": METADATA_VERSION_LEVEL}
)


class HarnessError(RuntimeError):
    """The harness itself was asked to do something impossible (a bug in a scenario, not the target)."""


# ---------------------------------------------------------------------------------------------- KIP-853 ids

#: Kafka's Uuid.ZERO_UUID: "no directory id" (ReplicaKey.of(id, ZERO_UUID) has none).
ZERO_UUID = uuid.UUID(int=0)
#: The listener name of every endpoint the harness announces (the target's controller.listener.names).
LISTENER = "CONTROLLER"
#: The kraft.version range the virtual voters support (KIP-853: 0 static, 1 dynamic quorum).
KRAFT_VERSION_RANGE = (0, 1)


def kafka_uuid(u: uuid.UUID | None) -> str:
    """Kafka's string form of a Uuid: URL-safe base64 of its 16 bytes, no padding (Uuid.toString)."""
    return base64.urlsafe_b64encode((u or ZERO_UUID).bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def directory_id_of(node_id: int, salt: str = "") -> uuid.UUID:
    """A fixed, valid directory id for a harness node (never one of Kafka's reserved low Uuids)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"kraft-tck/virtual-voter/{node_id}{salt}")


# ---------------------------------------------------------------------------------------------- frames


@dataclass
class Frame:
    """One message seen by a virtual voter. ``src``/``dst`` are node ids (-1: unknown, e.g. an observer)."""

    seq: int
    ts_ms: float  # monotonic, since the frame log started
    wall_ms: int
    src: int
    dst: int
    api: str
    api_key: int
    kind: str  # "request" | "response" | "note"
    version: int
    correlation_id: int
    body: dict[str, Any]
    # the target-side address of the connection a request to a virtual voter came on ("" otherwise): a
    # connection open when the target was killed is its previous process's (FrameLog.stale)
    peer: str = ""

    @property
    def part(self) -> dict[str, Any]:
        return B.partition_or_none(self.body) or {}

    def summary(self) -> str:
        if self.kind == "note":
            return str(self.body.get("text", ""))
        return B.describe(self.api, self.kind, self.body)


class FrameLog:
    """The frames of one scenario, with waiting: ``await wait_for(pred, timeout)``."""

    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.waited_s = 0.0  # time spent waiting on the target (the benchmark's "protocol wait" share)
        self.restarts: list[int] = []  # frame indexes before which the target was killed and restarted
        # connections the target had open to virtual voters when it was killed: what still arrives on them
        # after the kill was sent by the killed process (read from the socket after it died)
        self.killed_peers: set[str] = set()
        self._t0 = time.monotonic()
        self._changed = asyncio.Event()

    def now_ms(self) -> float:
        return (time.monotonic() - self._t0) * 1000

    def add(self, src: int, dst: int, api_key: int, kind: str, version: int, corr: int, body: dict[str, Any],
            peer: str = "") -> Frame:
        api = codec.api_name(api_key) if api_key >= 0 else "note"
        fr = Frame(
            len(self.frames), self.now_ms(), int(time.time() * 1000), src, dst, api, api_key, kind, version, corr, body,
            peer,
        )
        self.frames.append(fr)
        self._changed.set()
        return fr

    def note(self, node: int, text: str) -> None:
        """A harness-side remark in the sequence (raw bytes sent, a restart, a kill -9)."""
        self.add(node, node, -1, "note", 0, -1, {"text": text})

    def mark(self) -> int:
        return len(self.frames)

    def stale(self, fr: Frame) -> bool:
        """Sent by a process of the target that was killed since (a message it wrote before kill -9, read after)."""
        return bool(fr.peer) and fr.peer in self.killed_peers

    async def wait_for(self, pred: Callable[[Frame], bool], timeout_s: float, start: int = 0) -> Frame | None:
        t0 = time.monotonic()
        try:
            return await self._wait_for(pred, timeout_s, start)
        finally:
            self.waited_s += time.monotonic() - t0

    async def _wait_for(self, pred: Callable[[Frame], bool], timeout_s: float, start: int) -> Frame | None:
        deadline = time.monotonic() + timeout_s
        i = start
        while True:
            while i < len(self.frames):
                fr = self.frames[i]
                i += 1
                if fr.kind != "note" and pred(fr):
                    return fr
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)

    def select(self, pred: Callable[[Frame], bool], start: int = 0) -> list[Frame]:
        return [f for f in self.frames[start:] if f.kind != "note" and pred(f)]


@dataclass(frozen=True)
class LoggedFrame:
    """A frame as the session saw it: when (ms since the session started), in which case (None: between
    cases), in which life of the target."""

    ts_ms: float
    case: str | None
    life: int
    frame: Frame


class SessionLog:
    """Every frame of the session in order, each stamped with the case it came in and the target's life.

    A life starts with the target on a fresh (or wiped) directory; kill -9 restarts on the same directory
    stay in it.  Only the loop thread touches it (``Quorum.record`` runs there; the session calls
    ``begin_case``/``end_case``/``new_life`` through the loop)."""

    def __init__(self) -> None:
        self.entries: list[LoggedFrame] = []
        self.case: str | None = None
        self.life = 0
        #: (entry index, life): the target was killed and restarted on the same directory before that entry
        self.restarts: list[tuple[int, int]] = []
        self._t0 = time.monotonic()

    def add(self, frame: Frame) -> None:
        self.entries.append(LoggedFrame((time.monotonic() - self._t0) * 1000, self.case, self.life, frame))

    def begin_case(self, case_id: str) -> None:
        self.case = case_id

    def end_case(self) -> None:
        self.case = None

    def new_life(self) -> None:
        self.life += 1

    def restart(self) -> None:
        self.restarts.append((len(self.entries), self.life))


# ---------------------------------------------------------------------------------------------- the log


class VLog:
    """The virtual voters' log: batches in offset order from 0, with Kafka's epoch-end-offset rule.

    A virtual leader may also hold a snapshot of a committed prefix (KIP-630): ``take_snapshot`` builds it
    and moves ``start`` (the log start offset a virtual leader serves from) to its end offset. The batches
    below ``start`` stay in the harness's memory (the harness's own history of the quorum); a virtual
    leader no longer serves them: a Fetch below ``start`` is answered with the snapshot's id."""

    def __init__(self) -> None:
        self.batches: list[RecordBatch] = []
        self.committed = 0  # the highest high watermark the harness announced or was told
        self.start = 0  # the log start offset a virtual leader serves from (KIP-630)
        self.snapshot: S.HarnessSnapshot | None = None
        # who writes (the virtual leader, Quorum.set_leader) and the voter set, for its LeaderChange records
        self.writer_id = -1
        self.voters: list[int] = []
        self.granting: list[int] = []

    @property
    def end(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else 0

    @property
    def last_epoch(self) -> int:
        """The epoch of the last record; 0 for an empty log, as Kafka sends it (KafkaMetadataLog
        .lastFetchedEpoch; a negative LastFetchedEpoch or LastOffsetEpoch is INVALID_REQUEST in
        KafkaRaftClient.handleFetchRequest / handleVoteRequest)."""
        return self.batches[-1].partition_leader_epoch if self.batches else 0

    def epochs(self) -> list[tuple[int, int]]:
        """(epoch, start offset) per epoch, increasing."""
        out: list[tuple[int, int]] = []
        for b in self.batches:
            if not out or b.partition_leader_epoch > out[-1][0]:
                out.append((b.partition_leader_epoch, b.base_offset))
        return out

    def epoch_end_offset(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch``, the offset where it ends) — KIP-595 "Fetch Request Handling" 3.

        As in Kafka's leader-epoch cache: when every epoch is larger, ``(epoch, first start offset)``;
        an empty log gives ``(0, 0)`` (KafkaMetadataLog.endOffsetForEpoch: the log end and its last
        fetched epoch, 0).
        """
        eps = self.epochs()
        if not eps:
            return self.last_epoch, self.end
        keys = [e for e, _ in eps]
        i = bisect.bisect_right(keys, epoch)
        if i == 0:
            return epoch, eps[0][1]
        end = eps[i][1] if i < len(eps) else self.end
        return eps[i - 1][0], end

    def diverging(self, fetch_offset: int, last_fetched_epoch: int) -> tuple[int, int] | None:
        """The DivergingEpoch a correct leader with this log answers, or None when the fetch is consistent.
        FetchOffset 0 agrees with every log (Kafka's ReplicatedLog.validateOffsetAndEpoch)."""
        if fetch_offset == 0:
            return None
        epoch, end = self.epoch_end_offset(last_fetched_epoch)
        if epoch == last_fetched_epoch and fetch_offset <= end:
            return None
        return epoch, end

    def epoch_at(self, offset: int) -> int:
        """The epoch of the record at ``offset``; 0 before the first record (as an empty log's)."""
        for b in self.batches:
            if b.base_offset <= offset <= b.last_offset:
                return b.partition_leader_epoch
        return 0

    def read(self, offset: int, limit: int = 64) -> list[RecordBatch]:
        return [b for b in self.batches if b.last_offset >= max(offset, self.start)][:limit]

    def take_snapshot(self, end_offset: int | None = None) -> S.HarnessSnapshot:
        """A snapshot of the committed prefix [0, ``end_offset``) (default: the committed offset), as a Kafka
        controller writes one: its state (FeatureLevelRecord(metadata.version) once the log holds it), the id
        (end offset, epoch of the record before it); the log start moves to its end (KIP-630 "When to Increase
        the LogStartOffset")."""
        end = self.committed if end_offset is None else end_offset
        if end > self.committed or end <= 0:
            raise HarnessError(f"snapshot at {end}: must be committed (<= {self.committed}) and past offset 0")
        if not any(b.last_offset + 1 == end for b in self.batches):
            raise HarnessError(f"snapshot at {end}: not a batch boundary of the harness log")
        below = [b for b in self.batches if b.last_offset < end]
        state = [METADATA_VERSION_VALUE] if any(
            r.value == METADATA_VERSION_VALUE for b in below if not b.is_control for r in b.records
        ) else []
        self.snapshot = S.build_snapshot(end, self.epoch_at(end - 1), state, below[-1].max_timestamp)
        self.start = end
        return self.snapshot

    def forget_snapshot(self) -> None:
        """Serve the whole log again, from offset 0 (between cases: a fresh target catches up by Fetch)."""
        self.snapshot, self.start = None, 0

    def validate_fetch(self, offset: int, last_fetched_epoch: int) -> tuple[str, tuple[int, int] | None]:
        """How a leader with this log answers Fetch(``offset``, ``last_fetched_epoch``), as Kafka's
        KafkaRaftClient.tryCompleteFetchRequest / ReplicatedLog.validateOffsetAndEpoch:
        ("snapshot", id) — FetchOffset 0 while a snapshot exists, or below the log start, or at it with
        another epoch than the snapshot's, or a LastFetchedEpoch below the snapshot's epoch;
        ("diverging", (epoch, end)) — KIP-595 "Fetch Request Handling" 3; ("valid", None) otherwise."""
        snap = self.snapshot
        if snap is not None and (
            offset == 0
            or offset < self.start
            or (offset == self.start and last_fetched_epoch != snap.epoch)
            or last_fetched_epoch < snap.epoch
        ):
            return "snapshot", snap.id
        div = self.diverging(offset, last_fetched_epoch)
        return ("diverging", div) if div is not None else ("valid", None)

    def append_metadata(self, epoch: int, count: int, commit: bool = True) -> None:
        """``count`` metadata records as a virtual leader writes them: a valid KRaft metadata log that a
        Kafka controller replays (it treats a committed record it cannot read as fatal). A log that holds
        no data batch yet starts with FeatureLevelRecord(metadata.version); every other record is a
        NoOpRecord (KIP-835), each in a batch of its own as Kafka's controller appends them. The first write
        in a new epoch starts with the leader's LeaderChange control batch."""
        if count <= 0:
            return
        values = [NOOP_VALUE] * count
        if not any(not b.is_control for b in self.batches):
            values[0] = METADATA_VERSION_VALUE
        if epoch > self.last_epoch:
            # The leader's first batch of its epoch is LeaderChange (KafkaRaftClient.onBecomeLeader ->
            # LeaderState.appendStartOfEpochControlRecords), as in every epoch of a Kafka controller's log.
            self.append_leader_change(epoch, self.writer_id, self.voters, self.granting)
        self.append_values(epoch, values, commit)

    def append_values(self, epoch: int, values: list[bytes], commit: bool = True) -> None:
        """One single-record batch per value, so any offset is a batch boundary a follower can cut at.
        Scenarios use ``append_metadata``: a value here is replayed as a metadata record by the target."""
        if epoch < self.last_epoch:
            raise HarnessError(f"append in epoch {epoch} after epoch {self.last_epoch}")
        for v in values:
            self.batches.append(data_batch(self.end, epoch, [v], timestamp=int(time.time() * 1000)))
        if commit:
            self.committed = self.end

    def append_leader_change(
        self, epoch: int, leader_id: int, voters: list[int], granting: list[int] | None = None
    ) -> None:
        """LeaderChange as Kafka writes it at the start of an epoch (KafkaRaftClient.onBecomeLeader ->
        LeaderState.appendStartOfEpochControlRecords): a one-record control batch, LeaderChangeMessage v0
        (ControlRecordUtils.LEADER_CHANGE_CURRENT_VERSION) naming the leader, the voters and those that
        granted its election (``granting``; default: every voter)."""
        body = {
            "Version": 0,
            "LeaderId": leader_id,
            "Voters": [{"VoterId": v} for v in voters],
            "GrantingVoters": [{"VoterId": v} for v in (voters if granting is None else granting)],
        }
        now = int(time.time() * 1000)
        self.batches.append(control_batch(self.end, epoch, ControlType.LEADER_CHANGE, body, timestamp=now))

    def append_control(self, epoch: int, ctype: ControlType, body: dict[str, Any], commit: bool = True) -> int:
        """One control record (KIP-853's KRaftVersionRecord or VotersRecord) in a batch of its own, as a virtual
        leader writes it (the epoch's LeaderChange first, as ``append_metadata``); returns its offset."""
        if epoch < self.last_epoch:
            raise HarnessError(f"append in epoch {epoch} after epoch {self.last_epoch}")
        if epoch > self.last_epoch:
            self.append_leader_change(epoch, self.writer_id, self.voters, self.granting)
        offset = self.end
        self.batches.append(control_batch(offset, epoch, ctype, body, timestamp=int(time.time() * 1000)))
        if commit:
            self.committed = self.end
        return offset

    def control_records(self, ctype: ControlType, start: int = 0) -> list[tuple[int, dict[str, Any]]]:
        """(offset, body) of every control record of ``ctype`` in the log from ``start`` on (KIP-853: the
        voter set in force is the last VotersRecord, committed or not)."""
        from kraft_tck.spec.records import decode_control

        out: list[tuple[int, dict[str, Any]]] = []
        for b in self.batches:
            if not b.is_control or b.last_offset < start:
                continue
            for k, r in enumerate(b.records):
                with contextlib.suppress(Exception):
                    t, body = decode_control(r)
                    if t == ctype and b.base_offset + k >= start:
                        out.append((b.base_offset + k, body))
        return out

    def append_batches(self, batches: list[RecordBatch]) -> int:
        """Append fetched batches that continue the log; returns how many were taken."""
        taken = 0
        for b in batches:
            if b.base_offset != self.end:
                continue  # an overlap (already have it) or a gap (a later fetch fills it)
            self.batches.append(b)
            taken += 1
        return taken

    def truncate(self, offset: int) -> None:
        if offset < self.committed:
            raise HarnessError(f"truncate the harness log to {offset}, below its committed offset {self.committed}")
        if offset >= self.end:
            return
        keep = [b for b in self.batches if b.last_offset < offset]
        if (keep[-1].last_offset + 1 if keep else 0) != offset:
            raise HarnessError(f"offset {offset} falls inside a batch of the harness log")
        self.batches = keep


# ---------------------------------------------------------------------------------------------- voters


#: Decides a vote: (candidate id, candidate epoch, request partition) -> granted?
VotePolicy = Callable[[int, int, dict[str, Any]], bool]
#: Overrides a virtual leader's Fetch answer: (request body, version) -> response body, or None for the
#: normal answer.
FetchHook = Callable[[dict[str, Any], int], dict[str, Any] | None]
#: Overrides a virtual voter's Vote answer the same way (e.g. a top-level UNSUPPORTED_VERSION: a voter that
#: cannot take a pre-vote, KIP-996's mixed-version case).
VoteHook = Callable[[dict[str, Any], int], dict[str, Any] | None]


def refuse_all(_candidate: int, _epoch: int, _part: dict[str, Any]) -> bool:
    return False


def grant_to(candidate: int) -> VotePolicy:
    """Grant ``candidate`` (once per epoch) and answer everyone else VoteGranted=false: with ``refuse_all``
    on the other voters, a split vote whose grants the scenario counts (KIP-595 "Vote Response Handling")."""

    def policy(cand: int, _epoch: int, _part: dict[str, Any]) -> bool:
        return cand == candidate

    return policy


@dataclass
class TargetAddress:
    node_id: int
    host: str
    port: int
    #: TLS to a secured target (``--target-command-config``); None: plaintext
    ssl: SSLContext | None = None
    #: SASL login to a secured target; None: none
    sasl: Login | None = None


@dataclass
class VirtualVoter:
    node_id: int
    quorum: Quorum
    host: str
    port: int
    vote_policy: VotePolicy = refuse_all
    partitioned: bool = False  # requests from the target are held, then the connection is closed
    #: the target's real Votes (not its pre-votes) get no answer (the connection is closed on them): a
    #: candidate nobody answers, reached through a pre-vote the voters did answer (KIP-996)
    silent_votes: bool = False
    fetch_hook: FetchHook | None = None
    #: KIP-996: decides a pre-vote (Vote v2 PreVote=true) as (candidate, its current epoch, partition) ->
    #: granted?; None: the harness's rule (``_pre_vote_granted``). A pre-vote never records a vote.
    pre_vote_policy: VotePolicy | None = None
    vote_hook: VoteHook | None = None
    #: a virtual leader serves at most this many bytes of its snapshot per FetchSnapshot answer (KIP-630:
    #: "up to at most MaxBytes"; less is allowed), so a target downloads it in several chunks
    snapshot_chunk_bytes: int = 1 << 20
    #: overrides a virtual leader's FetchSnapshot answer: (request body, version) -> response body, or None
    fetch_snapshot_hook: FetchHook | None = None
    #: the epoch this voter resigned with EndQuorumEpoch (-1: none): a resigned leader is no live leader
    resigned_epoch: int = -1
    #: KIP-853: this replica's directory id (its ReplicaKey is (node_id, directory_id)); fixed per node id
    directory_id: uuid.UUID = ZERO_UUID
    #: the features its ApiVersions answers advertise (KIP-853: kraft.version; None: none, a pre-3.9 node)
    features: dict[str, tuple[int, int]] | None = field(default_factory=lambda: {"kraft.version": KRAFT_VERSION_RANGE})
    votes: dict[int, int] = field(default_factory=dict)  # epoch -> candidate: a virtual voter votes once
    server: KafkaServer | None = None
    client: KafkaClient | None = None
    #: correlation id -> observer id of the fetches sent for an observer through this voter's connection
    _observer_fetches: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.directory_id == ZERO_UUID:
            self.directory_id = directory_id_of(self.node_id)

    @property
    def endpoint(self) -> dict[str, Any]:
        """This voter's listener as KIP-853 messages carry it (VotersRecord Endpoints, AddRaftVoter Listeners)."""
        return {"Name": LISTENER, "Host": self.host, "Port": self.port}

    async def start(self) -> None:
        ranges = {k: codec.supported_versions(k) for k in B.KRAFT_APIS.values()}
        lo, hi = ranges[B.FETCH]
        ranges[B.FETCH] = (max(lo, B.MIN_FETCH_VERSION), hi)
        ranges[S.FETCH_SNAPSHOT] = codec.supported_versions(S.FETCH_SNAPSHOT)  # KIP-630: a leader serves snapshots
        # KIP-853: a follower voter whose entry differs from its listeners sends its leader UpdateRaftVoter
        ranges[B.UPDATE_RAFT_VOTER] = codec.supported_versions(B.UPDATE_RAFT_VOTER)
        self.server = KafkaServer(self._handle, ranges, host=self.host, port=self.port, observer=self._observe_server,
                                  ssl=self.quorum.server_ssl, sasl=self.quorum.server_sasl)
        self.server.supported_features = dict(self.features or {})
        try:
            await self.server.start()
        except OSError as exc:
            raise HarnessError(
                f"virtual voter {self.node_id} cannot listen on {self.host}:{self.port}: {exc} "
                "(choose free ports with --harness-ports)"
            ) from exc
        self.port = self.server.port

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()
        if self.server is not None:
            await self.server.close()

    # ---------------------------------------------------------------- frames

    def _observe_server(
        self, direction: str, api_key: int, version: int, corr: int, body: dict[str, Any], peer: str
    ) -> None:
        t = self.quorum.target.node_id
        src, dst, kind = (t, self.node_id, "request") if direction == "recv" else (self.node_id, t, "response")
        if direction == "recv" and api_key == B.FETCH:
            src = B.fetch_replica_id(body)
        self.quorum.record(src, dst, api_key, kind, version, corr, body, peer)

    def _observe_client(
        self, direction: str, api_key: int, version: int, corr: int, body: dict[str, Any], _peer: str
    ) -> None:
        t = self.quorum.target.node_id
        src, dst, kind = (self.node_id, t, "request") if direction == "send" else (t, self.node_id, "response")
        if api_key == B.FETCH and direction == "send" and B.fetch_replica_id(body) != self.node_id:
            src = B.fetch_replica_id(body)  # an observer's fetch sent through this connection
            self._observer_fetches[corr] = src
        elif api_key == B.FETCH and direction != "send" and corr in self._observer_fetches:
            dst = self._observer_fetches.pop(corr)  # ... and the answer goes to that observer
        self.quorum.record(src, dst, api_key, kind, version, corr, body)

    # ---------------------------------------------------------------- serving the target

    async def _handle(self, req: ServerRequest) -> dict[str, Any] | None:
        q = self.quorum
        part = B.partition_or_none(req.body) or {}
        if self.silent_votes and req.api_key == B.VOTE and not part.get("PreVote"):
            # No answer to a real Vote; the connection is dropped at once (holding the request would hold the
            # answers to the pre-votes behind it too: a connection answers in order).
            return None
        if self.partitioned:
            # A partition: nothing comes back. Hold the request, then drop the connection.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(q.wait_unpartitioned(self), 10)
            return None
        if req.api_key == B.VOTE:
            if self.vote_hook is not None:
                scripted = self.vote_hook(req.body, req.api_version)
                if scripted is not None:
                    return scripted
            cand, epoch = int(part.get("CandidateId", -1)), int(part.get("CandidateEpoch", -1))
            if part.get("PreVote"):
                return self._answer_pre_vote(cand, epoch, part)
            granted = False
            if epoch > q.leader_epoch_of(self.node_id) and self.votes.get(epoch, cand) == cand:
                granted = self.vote_policy(cand, epoch, part)
            if granted:
                self.votes[epoch] = cand
            q.observe_epoch(epoch)
            return B.election_response(B.VOTE, -1, max(epoch, q.known_epoch), granted=granted)
        if req.api_key in (B.BEGIN_QUORUM_EPOCH, B.END_QUORUM_EPOCH):
            epoch = int(part.get("LeaderEpoch", -1))
            q.observe_epoch(epoch)
            return B.election_response(req.api_key, int(part.get("LeaderId", -1)), epoch)
        if req.api_key == B.FETCH:
            return await self._serve_fetch(req.body, req.api_version)
        if req.api_key == S.FETCH_SNAPSHOT:
            return self._serve_fetch_snapshot(req.body, req.api_version)
        if req.api_key == B.DESCRIBE_QUORUM:
            return B.describe_quorum_response(q.leader_id, q.known_epoch, Errors.NOT_LEADER_OR_FOLLOWER)
        if req.api_key == B.UPDATE_RAFT_VOTER:
            return self._answer_update_voter(req.body)
        return None

    def _answer_update_voter(self, body: dict[str, Any]) -> dict[str, Any]:
        """KIP-853 UpdateRaftVoter to a virtual voter, Kafka's checks up to the leader's (KafkaRaftClient
        .handleUpdateVoterRequest: cluster id, then validateLeaderOnlyRequest on CurrentLeaderEpoch): the virtual
        leader of that epoch answers NONE naming itself; a case that wants the leader's VotersRecord writes it."""
        q = self.quorum
        cid = body.get("ClusterId")
        leading = q.leader_id == self.node_id
        epoch = q.leader_epoch if leading else q.known_epoch
        req_epoch = int(body.get("CurrentLeaderEpoch", -1))
        if cid is not None and q.cluster_id is not None and cid != q.cluster_id:
            error = Errors.INCONSISTENT_CLUSTER_ID
        elif req_epoch < epoch:
            error = Errors.FENCED_LEADER_EPOCH
        elif req_epoch > epoch:
            error = Errors.UNKNOWN_LEADER_EPOCH
        else:
            error = Errors.NONE if leading else Errors.NOT_LEADER_OR_FOLLOWER
        return B.update_raft_voter_response(error, q.leader_id, epoch, (self.host, self.port) if leading else None)

    def _answer_pre_vote(self, cand: int, epoch: int, part: dict[str, Any]) -> dict[str, Any]:
        """KIP-996 pre-vote, in the candidate's current epoch: answered, nothing recorded (no vote, Kafka 4.x
        ``canGrantVote(..., isPreVote=true)``). The harness's rule unless ``pre_vote_policy`` decides: a
        virtual voter that follows a live virtual leader (one not partitioned) refuses and names it, as a
        Kafka follower that has fetched does (``FollowerState.canGrantVote``), while one that resigned with
        EndQuorumEpoch grants (``ResignedState.canGrantVote``) and so do the rest; a stale epoch is fenced;
        otherwise granted, the log check being left to the scenario's real vote policy (so a target that
        loses a real election still gets to try again, as cases without pre-vote expect)."""
        q = self.quorum
        lead = q.leader_id
        live = (lead not in (-1, q.target.node_id) and lead in q.voters and not q.voters[lead].partitioned
                and q.voters[lead].resigned_epoch != q.leader_epoch)
        if epoch < q.leader_epoch_of(self.node_id) and lead != -1:
            return B.election_response(B.VOTE, lead, q.leader_epoch, error=Errors.FENCED_LEADER_EPOCH, granted=False)
        granted = self.pre_vote_policy(cand, epoch, part) if self.pre_vote_policy is not None else not live
        if live:
            return B.election_response(B.VOTE, lead, max(epoch, q.leader_epoch), granted=granted)
        return B.election_response(B.VOTE, -1, max(epoch, q.known_epoch), granted=granted)

    async def _serve_fetch(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        """KIP-595 "Fetch Request Handling" as a correct leader (or a NOT_LEADER_OR_FOLLOWER non-leader)."""
        q = self.quorum
        if self.fetch_hook is not None:
            scripted = self.fetch_hook(body, version)
            if scripted is not None:
                return scripted
        part = B.partition(body)
        cid = body.get("ClusterId")
        if cid is not None and q.cluster_id is not None and cid != q.cluster_id:  # None: the harness knows none
            return B.fetch_response(version, top_error=Errors.INCONSISTENT_CLUSTER_ID)
        deadline = time.monotonic() + min(int(body.get("MaxWaitMs", 0)), MAX_PARK_MS) / 1000
        while True:
            if q.leader_id != self.node_id:
                return B.fetch_response(
                    version, error=Errors.NOT_LEADER_OR_FOLLOWER, leader=(q.leader_id, q.known_epoch)
                )
            epoch = q.leader_epoch
            req_epoch = int(part.get("CurrentLeaderEpoch", -1))
            if req_epoch < epoch:
                return B.fetch_response(version, error=Errors.FENCED_LEADER_EPOCH, leader=(self.node_id, epoch))
            if req_epoch > epoch:
                return B.fetch_response(version, error=Errors.UNKNOWN_LEADER_EPOCH, leader=(self.node_id, epoch))
            offset, lfe = int(part["FetchOffset"]), int(part["LastFetchedEpoch"])
            hw = min(q.log.committed, q.log.end)
            start = q.log.start
            kind, at = q.log.validate_fetch(offset, lfe)
            if kind == "snapshot":  # KIP-630 "Handling Fetch Request": fetch the snapshot first
                return B.fetch_response(version, high_watermark=hw, snapshot_id=at, log_start=start,
                                        leader=(self.node_id, epoch))
            if kind == "diverging":
                return B.fetch_response(version, high_watermark=hw, diverging=at, log_start=start,
                                        leader=(self.node_id, epoch))
            batches = q.log.read(offset)
            left = deadline - time.monotonic()
            if batches or left <= 0 or offset < hw or q.answer_at_once:
                return B.fetch_response(version, high_watermark=hw, batches=batches, log_start=start,
                                        leader=(self.node_id, epoch))
            await q.wait_change(left)

    def _serve_fetch_snapshot(self, body: dict[str, Any], version: int) -> dict[str, Any]:
        """KIP-630 "Fetch Snapshot" request handling as Kafka's leader (KafkaRaftClient.handleFetchSnapshotRequest):
        the cluster id, then the leader epoch (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH /
        NOT_LEADER_OR_FOLLOWER), the snapshot (SNAPSHOT_NOT_FOUND), the position (POSITION_OUT_OF_RANGE), then
        the bytes from Position, at most min(MaxBytes, ``snapshot_chunk_bytes``)."""
        q = self.quorum
        if self.fetch_snapshot_hook is not None:
            scripted = self.fetch_snapshot_hook(body, version)
            if scripted is not None:
                return scripted
        cid = body.get("ClusterId")
        if cid is not None and q.cluster_id is not None and cid != q.cluster_id:
            return S.fetch_snapshot_response(top_error=Errors.INCONSISTENT_CLUSTER_ID)
        part = B.partition(body)
        leading = q.leader_id == self.node_id
        epoch = q.leader_epoch if leading else q.known_epoch
        leader = (q.leader_id, epoch)
        req_epoch = int(part.get("CurrentLeaderEpoch", -1))
        if req_epoch < epoch:
            return S.fetch_snapshot_response(error=Errors.FENCED_LEADER_EPOCH, leader=leader)
        if req_epoch > epoch:
            return S.fetch_snapshot_response(error=Errors.UNKNOWN_LEADER_EPOCH, leader=leader)
        if not leading:
            return S.fetch_snapshot_response(error=Errors.NOT_LEADER_OR_FOLLOWER, leader=leader)
        snap = q.log.snapshot
        sid = S.snapshot_id_of(part)
        if snap is None or sid != snap.id:
            return S.fetch_snapshot_response(error=Errors.SNAPSHOT_NOT_FOUND, leader=leader)
        pos = int(part.get("Position", -1))
        if pos < 0 or pos >= snap.size:
            return S.fetch_snapshot_response(error=Errors.POSITION_OUT_OF_RANGE, leader=leader)
        n = max(1, min(int(body.get("MaxBytes", 0x7FFFFFFF)), self.snapshot_chunk_bytes))
        return S.fetch_snapshot_response(snapshot_id=snap.id, leader=leader, size=snap.size, position=pos,
                                         chunk=snap.data[pos : pos + n])

    # ---------------------------------------------------------------- talking to the target

    async def connect(self) -> KafkaClient:
        if self.client is not None and self.client.connected:
            return self.client
        if self.client is not None:
            await self.client.close()
        t = self.quorum.target
        client = KafkaClient(
            t.host, t.port, client_id=f"kraft-tck-harness-{self.node_id}", observer=self._observe_client, ssl=t.ssl,
            sasl=t.sasl,
        )
        await client.connect(timeout_s=self.quorum.request_timeout_s)
        self.client = client
        return client

    async def request(
        self, api_key: int, build: Callable[[int], dict[str, Any]], timeout_s: float | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Send a request at the highest common version; returns (version, response body)."""
        client = await self.connect()
        version = client.best_version(api_key)
        body = build(version)
        try:
            resp = await client.request(api_key, version, body, timeout_s or self.quorum.request_timeout_s)
        except RequestError:
            await client.close()
            raise
        return version, resp

    async def vote(
        self, epoch: int, last_epoch: int, last_offset: int, cluster_id: Any = "default", candidate: int | None = None,
        pre_vote: bool = False, voter_id: int | None = None, voter_directory_id: uuid.UUID | None = None,
    ) -> dict[str, Any]:
        """A Vote to the target; ``pre_vote``: KIP-996's (Vote v2 PreVote=true; ``epoch`` is then the voter's
        current epoch). A pre-vote needs a target that advertises Vote v2 (a HarnessError otherwise).
        From v1 (KIP-853) it names the candidate's directory id and the recipient's voter key: ``voter_id`` /
        ``voter_directory_id`` (default: the target's id and the directory id the harness knows for it)."""
        cid = self.quorum.cluster_id if cluster_id == "default" else cluster_id
        cand = self.node_id if candidate is None else candidate
        t = self.quorum.target.node_id if voter_id is None else voter_id
        vdir = self.quorum.target_directory_id if voter_directory_id is None else voter_directory_id

        def build(version: int) -> dict[str, Any]:
            body = B.vote_request(cid, epoch, cand, last_epoch, last_offset, t)
            if version >= 1:
                p = body["Topics"][0]["Partitions"][0]
                p["CandidateDirectoryId"] = self.directory_id
                p["VoterDirectoryId"] = vdir or ZERO_UUID
            if pre_vote:
                if version < 2:
                    raise HarnessError(f"a pre-vote needs Vote v2; the target speaks v{version}")
                body["Topics"][0]["Partitions"][0]["PreVote"] = True
            return body

        _, resp = await self.request(B.VOTE, build)
        return resp

    async def begin_quorum_epoch(
        self, epoch: int, cluster_id: Any = "default", voter_id: int | None = None,
        voter_directory_id: uuid.UUID | None = None,
    ) -> dict[str, Any]:
        """BeginQuorumEpoch to the target; from v1 (KIP-853) with the recipient's voter key (``voter_id`` /
        ``voter_directory_id``, default: the target's) and, in a dynamic quorum, this leader's endpoint."""
        cid = self.quorum.cluster_id if cluster_id == "default" else cluster_id
        t = self.quorum.target.node_id if voter_id is None else voter_id
        vdir = self.quorum.target_directory_id if voter_directory_id is None else voter_directory_id

        def build(version: int) -> dict[str, Any]:
            body = B.begin_quorum_epoch_request(cid, self.node_id, epoch, t)
            if version >= 1:
                body["Topics"][0]["Partitions"][0]["VoterDirectoryId"] = vdir or ZERO_UUID
                if self.quorum.dynamic:
                    body["LeaderEndpoints"] = [self.endpoint]
            return body

        _, resp = await self.request(B.BEGIN_QUORUM_EPOCH, build)
        return resp

    async def end_quorum_epoch(self, epoch: int, successors: list[int], cluster_id: Any = "default") -> dict[str, Any]:
        cid = self.quorum.cluster_id if cluster_id == "default" else cluster_id
        self.resigned_epoch = epoch  # before the target can act on it: its pre-votes may come at once
        q = self.quorum

        def build(v: int) -> dict[str, Any]:
            body = B.end_quorum_epoch_request(cid, self.node_id, epoch, successors, v)
            if v >= 1 and q.dynamic:  # KIP-853: each preferred candidate by its ReplicaKey, this leader's endpoint
                for c in body["Topics"][0]["Partitions"][0].get("PreferredCandidates", []):
                    cand = int(c["CandidateId"])
                    voter = q.voters.get(cand) or q.joiners.get(cand)
                    key = q.target_directory_id if cand == q.target.node_id else voter.directory_id if voter else None
                    c["CandidateDirectoryId"] = key or ZERO_UUID
                body["LeaderEndpoints"] = [self.endpoint]
            return body

        _, resp = await self.request(B.END_QUORUM_EPOCH, build)
        return resp

    async def fetch(
        self,
        epoch: int,
        offset: int,
        last_fetched_epoch: int,
        *,
        max_wait_ms: int = 0,
        replica_id: int | None = None,
        cluster_id: Any = "default",
        timeout_s: float | None = None,
        replica_directory_id: uuid.UUID | None = None,
    ) -> dict[str, Any]:
        cid = self.quorum.cluster_id if cluster_id == "default" else cluster_id
        rid = self.node_id if replica_id is None else replica_id
        if offset > self.quorum.log.end:
            # Claiming records the harness does not hold would let the target commit what no virtual
            # voter can later serve back.
            raise HarnessError(f"fetch claims offset {offset} beyond the harness log end {self.quorum.log.end}")
        # KIP-853 (Fetch v17): in a dynamic quorum a replica fetches under its ReplicaKey (id, directory id); a
        # voter fetching without its directory id does not count as that voter (Kafka's ReplicaState.matchesKey)
        dir_id = replica_directory_id
        if dir_id is None and self.quorum.dynamic:
            dir_id = self.directory_id if rid == self.node_id else ZERO_UUID

        def build(v: int) -> dict[str, Any]:
            body = B.fetch_request(v, cid, rid, epoch, offset, last_fetched_epoch, max_wait_ms)
            if v >= 17 and dir_id is not None:
                body["Topics"][0]["Partitions"][0]["ReplicaDirectoryId"] = dir_id
            return body

        _, resp = await self.request(
            B.FETCH, build, timeout_s=timeout_s or (self.quorum.request_timeout_s + max_wait_ms / 1000),
        )
        return resp

    async def fetch_snapshot(
        self,
        epoch: int,
        snapshot_id: tuple[int, int],
        position: int,
        *,
        max_bytes: int = 0x7FFFFFFF,
        replica_id: int | None = None,
        cluster_id: Any = "default",
    ) -> dict[str, Any]:
        """A FetchSnapshot (KIP-630) to the target, as this voter (``replica_id``: another replica)."""
        cid = self.quorum.cluster_id if cluster_id == "default" else cluster_id
        rid = self.node_id if replica_id is None else replica_id
        _, resp = await self.request(
            S.FETCH_SNAPSHOT, lambda _v: S.fetch_snapshot_request(cid, rid, epoch, snapshot_id, position, max_bytes)
        )
        return resp

    async def describe_quorum(self) -> dict[str, Any]:
        _, resp = await self.request(B.DESCRIBE_QUORUM, lambda _v: B.describe_quorum_request())
        return resp

    async def follow_once(self, epoch: int, max_wait_ms: int = 0) -> dict[str, Any]:
        """One Fetch as a follower of the target at ``epoch``, applying the answer to the shared log
        (KIP-595 "Fetch Response Handling": append records, truncate on DivergingEpoch, learn the HW)."""
        q = self.quorum
        resp = await self.fetch(epoch, q.log.end, q.log.last_epoch, max_wait_ms=max_wait_ms)
        part = B.partition(resp)
        if resp.get("ErrorCode", 0) or part.get("ErrorCode", 0):
            return resp
        div = B.diverging_of(part)
        if div is not None:
            own_epoch, own_end = q.log.epoch_end_offset(div[0])
            cut = min(own_end, div[1]) if own_epoch == div[0] else own_end
            q.log.truncate(cut)
        q.log.append_batches(B.records_of(part))
        hw = int(part.get("HighWatermark", -1))
        if hw >= 0:
            q.log.committed = max(q.log.committed, min(hw, q.log.end))
        q.changed()
        return resp


# ---------------------------------------------------------------------------------------------- the quorum


class Quorum:
    """The target plus the virtual voters, alive for the whole session (the target keeps connections)."""

    def __init__(
        self,
        target: TargetAddress,
        cluster_id: str | None,
        voter_ports: dict[int, int],
        host: str,
        request_timeout_s: float = 2.0,
        server_ssl: SSLContext | None = None,
        server_sasl: SaslAccounts | None = None,
    ) -> None:
        self.target = target
        self.server_ssl = server_ssl  # the virtual voters' listeners serve TLS to a secured target
        self.server_sasl = server_sasl  # ... and SASL, accepting these logins
        self.cluster_id = cluster_id
        self.request_timeout_s = request_timeout_s
        self.log = VLog()
        self.voters = {vid: VirtualVoter(vid, self, host, port) for vid, port in voter_ports.items()}
        self.frames = FrameLog()
        self.session = SessionLog()
        self.known_epoch = 0  # the highest epoch seen anywhere: new harness epochs go above it
        #: KIP-853: the target's directory id as the harness formatted it (None: unknown, a static quorum)
        self.target_directory_id: uuid.UUID | None = None
        #: KIP-853: the target runs a dynamic quorum (kraft.version 1): virtual voters fetch with their
        #: directory ids and announce their endpoints
        self.dynamic = False
        #: KIP-853: harness replicas that are not voters of the initial set (a voter to add), started by a case
        self.joiners: dict[int, VirtualVoter] = {}
        self.leader_id = -1  # the virtual voter leading, or -1
        self.leader_epoch = -1
        #: A virtual leader answers a Fetch with nothing new at once instead of parking it up to its MaxWaitMs (an
        #: upper bound a leader may answer before): set while a scenario waits for the target's next Fetch only to
        #: know that it processed the answer before (``Scenario.catch_up``), so that wait takes a round trip, not
        #: a park.
        self.answer_at_once = False
        self._change = asyncio.Event()
        self._unpartitioned = asyncio.Event()
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def voter_ids(self) -> list[int]:
        return sorted([self.target.node_id, *self.voters])

    async def start(self) -> None:
        for v in self.voters.values():
            await v.start()

    async def close(self) -> None:
        await self.stop_tasks()
        await self.close_joiners()
        for v in self.voters.values():
            await v.close()

    async def add_joiner(
        self, node_id: int, features: dict[str, tuple[int, int]] | None = None, port: int = 0
    ) -> VirtualVoter:
        """A harness replica outside the voter set (KIP-853: the voter an AddRaftVoter adds), listening on its own
        port for the target's ApiVersions probe (``features``: what that answer advertises; default kraft.version
        0-1) and, once added, its BeginQuorumEpoch. It fetches from the target with ``fetch(replica_id=...)``."""
        if node_id in self.joiners:
            return self.joiners[node_id]
        host = next(iter(self.voters.values())).host if self.voters else "127.0.0.1"
        j = VirtualVoter(node_id, self, host, port)
        j.features = {"kraft.version": KRAFT_VERSION_RANGE} if features is None else features
        await j.start()
        self.joiners[node_id] = j
        return j

    async def close_joiners(self) -> None:
        for j in list(self.joiners.values()):
            await j.close()
        self.joiners.clear()

    def record(
        self, src: int, dst: int, api_key: int, kind: str, version: int, corr: int, body: dict[str, Any],
        peer: str = "",
    ) -> None:
        self.session.add(self.frames.add(src, dst, api_key, kind, version, corr, body, peer))
        part = B.partition_or_none(body) or {}
        for key in ("CandidateEpoch", "LeaderEpoch", "CurrentLeaderEpoch"):
            if isinstance(part.get(key), int):
                self.observe_epoch(int(part[key]))

    def observe_epoch(self, epoch: int) -> None:
        self.known_epoch = max(self.known_epoch, epoch)

    def next_epoch(self) -> int:
        """A fresh epoch above everything seen (and above every epoch in the shared log)."""
        self.known_epoch = max(self.known_epoch, self.log.last_epoch) + 1
        return self.known_epoch

    def leader_epoch_of(self, voter_id: int) -> int:
        return self.leader_epoch if self.leader_id != -1 else self.known_epoch - 1

    def set_leader(self, voter_id: int, epoch: int) -> None:
        """Make a virtual voter leader of ``epoch`` (-1: no virtual leader). Its first write in the epoch
        starts with a LeaderChange naming it (``VLog.append_values``); the virtual voters are its votes."""
        self.leader_id, self.leader_epoch = voter_id, epoch
        if voter_id != -1:
            self.log.writer_id, self.log.voters = voter_id, self.voter_ids
            self.log.granting = sorted(self.voters)
        self.observe_epoch(epoch)
        self.changed()

    def changed(self) -> None:
        self._change.set()
        self._change = asyncio.Event()

    async def wait_change(self, timeout_s: float) -> None:
        ev = self._change
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(ev.wait(), timeout_s)

    def partition(self, voter_id: int, on: bool = True) -> None:
        self.voters[voter_id].partitioned = on
        if not on:
            self._unpartitioned.set()
            self._unpartitioned = asyncio.Event()

    def silence_votes(self, voter_id: int, on: bool = True) -> None:
        """Answer none of the target's real Votes to ``voter_id`` (its pre-votes are): see ``silent_votes``."""
        self.voters[voter_id].silent_votes = on

    async def wait_unpartitioned(self, voter: VirtualVoter) -> None:
        while voter.partitioned:
            await self._unpartitioned.wait()

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop_tasks(self) -> None:
        # Python 3.11's asyncio.wait_for can lose a cancellation that arrives as its inner future completes
        # (fixed in 3.12): such a task survives one cancel() and an unbounded ``await task`` hangs the case's
        # end. Cancel again until every task is done, for at most about 5 s.
        tasks = list(self._tasks)
        pending = set(tasks)
        for _ in range(50):
            pending = {t for t in pending if not t.done()}
            if not pending:
                break
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=0.1)
        for task in tasks:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved, so asyncio does not log it as never retrieved

    async def reset(self) -> FrameLog:
        """Between scenarios: every virtual voter passive (refuses votes, leads nothing), a new frame log."""
        await self.stop_tasks()
        for v in self.voters.values():
            v.vote_policy = refuse_all
            v.fetch_hook = None
            v.fetch_snapshot_hook = None
            v.snapshot_chunk_bytes = 1 << 20
            v.pre_vote_policy = None
            v.vote_hook = None
            v.resigned_epoch = -1
            if v.partitioned:
                self.partition(v.node_id, False)
            v.silent_votes = False
        await self.close_joiners()
        self.answer_at_once = False
        if self.leader_id != -1:
            self.set_leader(-1, -1)
        self.log.forget_snapshot()
        self.frames = FrameLog()
        return self.frames
