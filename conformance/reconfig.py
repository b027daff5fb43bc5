"""KIP-853 (dynamic quorum) moves for conformance/test_reconfig.py: a life of the target formatted with
``--initial-controllers`` (the target and the virtual voters, each with a directory id), an admin client for
AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter (the role of Kafka's ``kafka-metadata-quorum add-controller`` /
``remove-controller``), and the voter set as the log says it (the last VotersRecord, committed or not).

Kafka is the authority where the KIP leaves room: KafkaRaftClient.handleAddVoterRequest / handleRemoveVoterRequest /
handleUpdateVoterRequest, internals/AddVoterHandler, RemoveVoterHandler, UpdateVoterHandler, LeaderState, and the
tests of KafkaRaftClientReconfigTest (3.9 / 4.0-SNAPSHOT, Oct 2024). The harness encodes every message with the
spec codec (spec/messages/*.json), never with the reference node's code.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from kraft_tck.conformance import bodies as B
from kraft_tck.conformance.scenario import Scenario
from kraft_tck.conformance.target import CommandTarget, DynamicQuorum, EmbeddedTarget
from kraft_tck.conformance.transport import KafkaClient, RequestError
from kraft_tck.conformance.virtual import (
    LISTENER,
    ZERO_UUID,
    VirtualVoter,
    VLog,
    directory_id_of,
    kafka_uuid,
)
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.records import ControlType

ADD_RAFT_VOTER = 80
REMOVE_RAFT_VOTER = 81
UPDATE_RAFT_VOTER = 82
DESCRIBE_QUORUM = 55
#: The node id the harness's admin client's frames carry (it is no replica: Kafka's admin tools have none).
ADMIN_ID = 900

#: Whether tla/TraceKRaft.tla validates the lives of these cases: the node trace (environment mode: the voter set
#: from the log's latest VotersRecord, bootstrap servers -2, -3, ... and the admin client as the environment) and
#: the black-box session trace (the voter changes the harness asks for are hidden steps of the target while they
#: are pending: TraceKRaft.tla PendingChanges). False leaves a life to the cases' own checks.
NODE_TRACE_MODELS_RECONFIG = True
#: After a case that changed the voter set, bring the initial set back through a virtual leader's VotersRecord
#: (``Reconf.restore``) rather than relaunching the target on a fresh directory.
RESTORE_VOTER_SET = True
BLACKBOX_MODELS_RECONFIG = True
#: A ``--standalone`` life (the target the only voter) is modelled in the node trace: a sole voter's leader moves
#: its high watermark as it appends (Kafka's LeaderState.updateLocalState), as tla/KRaft.tla's BecomeLeader and
#: ClientAppend do. False leaves such a life out of the node-trace validation.
TLC_MODELS_SOLE_VOTER = True
#: The black-box session trace of a ``--standalone`` life stays out: TraceKRaft.tla's black-box start is the static
#: voter set with empty logs, not a target formatted as the sole voter (its VotersRecord {target}).
BLACKBOX_MODELS_SOLE_VOTER = False


def target_directory_id(target_id: int) -> uuid.UUID:
    """The directory id the harness formats the target with (``--initial-controllers``: id@host:port:dirId)."""
    return directory_id_of(target_id, "-target")


def dynamic_quorum_of(sc: Scenario) -> DynamicQuorum:
    """The initial voter set: the target and every virtual voter, each with its endpoint and directory id."""
    t = sc.target
    voters = [(t.node_id, t.host, t.port, kafka_uuid(target_directory_id(t.node_id)))]
    voters += [(v.node_id, v.host, v.port, kafka_uuid(v.directory_id)) for v in sc.q.voters.values()]
    return DynamicQuorum(tuple(sorted(voters)))


def standalone_quorum_of(sc: Scenario) -> DynamicQuorum:
    """The target alone, formatted ``--standalone`` (KIP-853 "Bootstrapping"; Kafka's StorageTool
    createStandaloneDynamicVoters): the virtual voters are joiners of its quorum, not voters."""
    t = sc.target
    return DynamicQuorum(((t.node_id, t.host, t.port, kafka_uuid(target_directory_id(t.node_id))),), standalone=True)


def voter_ids(body: dict[str, Any]) -> list[int]:
    """The voter ids of a VotersRecord body, sorted."""
    return sorted(int(v["VoterId"]) for v in body.get("Voters") or [])


def voters_record(sc: Scenario, ids: list[int], extra: dict[int, VirtualVoter] | None = None) -> dict[str, Any]:
    """A VotersRecord body (spec/messages/VotersRecord.json) for ``ids``: each voter's key, its endpoint on the
    controller listener and the kraft.version range 0-1, as Kafka's DynamicVoter.toVoterNode writes them."""
    t = sc.target
    nodes = {**sc.q.voters, **(extra or {})}
    out = []
    for vid in sorted(ids):
        if vid == t.node_id:
            key, host, port = target_directory_id(vid), t.host, t.port
        else:
            v = nodes[vid]
            key, host, port = v.directory_id, v.host, v.port
        out.append({
            "VoterId": vid, "VoterDirectoryId": key,
            "Endpoints": [{"Name": LISTENER, "Host": host, "Port": port}],
            "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1},
        })  # fmt: skip
    return {"Version": 0, "Voters": out}


def errors_of(body: dict[str, Any]) -> int:
    return int(body.get("ErrorCode", -1))


def error_name(code: int) -> str:
    try:
        return Errors(code).name
    except ValueError:
        return str(code)


class Admin:
    """The harness's admin connection to the target (the role of Kafka's AdminClient): KIP-853 requests go over a
    connection of their own, since a Kafka server answers one request per connection at a time and an
    AddRaftVoter / RemoveRaftVoter is answered only once its VotersRecord commits."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.client: KafkaClient | None = None

    def _observe(self, direction: str, api_key: int, version: int, corr: int, body: dict[str, Any], _peer: str) -> None:
        t = self.sc.target_id
        src, dst, kind = (ADMIN_ID, t, "request") if direction == "send" else (t, ADMIN_ID, "response")
        self.sc.q.record(src, dst, api_key, kind, version, corr, body)

    async def connect(self) -> KafkaClient:
        if self.client is not None and self.client.connected:
            return self.client
        t = self.sc.q.target
        self.client = KafkaClient(t.host, t.port, client_id="kraft-tck-admin", observer=self._observe, ssl=t.ssl,
                                  sasl=t.sasl)  # fmt: skip
        await self.client.connect(timeout_s=self.sc.q.request_timeout_s)
        return self.client

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()

    async def request(self, api_key: int, body: dict[str, Any], timeout_s: float = 5.0) -> dict[str, Any]:
        client = await self.connect()
        version = client.best_version(api_key)
        try:
            return await client.request(api_key, version, body, timeout_s)
        except RequestError:
            await client.close()
            raise

    def cluster(self, cluster_id: Any) -> Any:
        return self.sc.q.cluster_id if cluster_id == "default" else cluster_id

    async def add_voter(
        self, voter_id: int, directory_id: uuid.UUID, listeners: list[dict[str, Any]], cluster_id: Any = "default",
    ) -> dict[str, Any]:
        """AddRaftVoter v0 (KIP-853): ClusterId, TimeoutMs, VoterId, VoterDirectoryId, Listeners."""
        body = {"ClusterId": self.cluster(cluster_id), "TimeoutMs": 5000, "VoterId": voter_id,
                "VoterDirectoryId": directory_id, "Listeners": listeners}  # fmt: skip
        return await self.request(ADD_RAFT_VOTER, body)

    async def remove_voter(self, voter_id: int, directory_id: uuid.UUID, cluster_id: Any = "default") -> dict[str, Any]:
        body = {"ClusterId": self.cluster(cluster_id), "VoterId": voter_id, "VoterDirectoryId": directory_id}
        return await self.request(REMOVE_RAFT_VOTER, body)

    async def update_voter(
        self, epoch: int, voter_id: int, directory_id: uuid.UUID, listeners: list[dict[str, Any]],
        kraft_range: tuple[int, int] = (0, 1), cluster_id: Any = "default",
    ) -> dict[str, Any]:
        body = {"ClusterId": self.cluster(cluster_id), "CurrentLeaderEpoch": epoch, "VoterId": voter_id,
                "VoterDirectoryId": directory_id, "Listeners": listeners,
                "KRaftVersionFeature": {"MinSupportedVersion": kraft_range[0],
                                        "MaxSupportedVersion": kraft_range[1]}}  # fmt: skip
        return await self.request(UPDATE_RAFT_VOTER, body)

    async def describe_quorum(self) -> tuple[int, dict[str, Any]]:
        client = await self.connect()
        version = client.best_version(DESCRIBE_QUORUM)
        body = {"Topics": [{"TopicName": "__cluster_metadata", "Partitions": [{"PartitionIndex": 0}]}]}
        return version, await client.request(DESCRIBE_QUORUM, version, body, 5.0)


class BlackHole:
    """A listener that accepts connections and never answers (a new voter whose ApiVersions answer never comes:
    the AddRaftVoter stays pending until its timer, KafkaRaftClientReconfigTest.testAddVoterTimeout's setup)."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.port = 0
        self.server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        #: set once a request's bytes arrived (the target's ApiVersions probe, never to be answered)
        self.received = asyncio.Event()

    async def start(self) -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._writers.append(writer)
            with contextlib.suppress(Exception):
                while await reader.read(4096):
                    self.received.set()

        self.server = await asyncio.start_server(serve, self.host, 0)
        self.port = int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        for w in self._writers:
            w.close()
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 1)


@dataclass
class Reconf:
    """One case's KIP-853 tools: the admin client, joiners, and the voter set as the harness log says it."""

    sc: Scenario
    admin: Admin
    initial: list[int]
    holes: list[BlackHole] = field(default_factory=list)
    #: a life formatted ``--standalone``: the initial set is the target alone (no restore: the next case relaunches)
    standalone: bool = False
    #: the background fetch loops of ``keep_fetching`` and the flag that ends them
    _loops: list[asyncio.Task[Any]] = field(default_factory=list)
    _stop: bool = False

    @property
    def q(self) -> Any:
        return self.sc.q

    @property
    def target_dir(self) -> uuid.UUID:
        return target_directory_id(self.sc.target_id)

    def joiner_id(self, k: int = 0) -> int:
        """The id of the ``k``-th voter to add: after every voter of the initial set."""
        return max(self.initial) + 1 + k

    async def joiner(self, k: int = 0, features: dict[str, tuple[int, int]] | None = None) -> VirtualVoter:
        return await self.q.add_joiner(self.joiner_id(k), features)

    async def black_hole(self) -> BlackHole:
        hole = BlackHole(next(iter(self.q.voters.values())).host)
        await hole.start()
        self.holes.append(hole)
        return hole

    def voters_records(self, start: int = 0) -> list[tuple[int, dict[str, Any]]]:
        return list(self.q.log.control_records(ControlType.KRAFT_VOTERS, start))

    def voters_in_log(self) -> tuple[int, list[int]]:
        """(offset, ids) of the last VotersRecord of the harness log; (-1, the initial ids) when it holds none
        (the set of the bootstrap checkpoint, Kafka's offset -1)."""
        recs = self.voters_records()
        return (recs[-1][0], voter_ids(recs[-1][1])) if recs else (-1, list(self.initial))

    async def wait_for(self, pred: Callable[[], bool], timeout_ms: float, step_s: float = 0.01) -> bool:
        deadline = time.monotonic() + timeout_ms / 1000
        while not pred():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(step_s)
        return True

    async def follow(self, voter: VirtualVoter, epoch: int, rounds: int = 10) -> dict[str, Any]:
        """Fetch from the target leader as ``voter`` (a virtual voter or a joiner) until nothing new comes back:
        the last Fetch was at the leader's log end (Kafka's LeaderState "caught up")."""
        resp: dict[str, Any] = {}
        for _ in range(rounds):
            resp = await self.sc.call(f"v{voter.node_id} fetches from the target leader", voter.follow_once(epoch))
            part = B.partition(resp)
            if part.get("ErrorCode", 0) or resp.get("ErrorCode", 0):
                return resp
            if not B.records_of(part) and B.diverging_of(part) is None:
                return resp
        return resp

    async def follow_until_voters_record(self, voter: VirtualVoter, epoch: int, since: int, voters: list[int],
                                         tries: int = 20) -> int:
        """``voter`` fetches (and mirrors) from the target leader until the log holds, at or after ``since``, a
        VotersRecord of exactly ``voters``: its offset, or -1 if none came in ``tries`` rounds."""
        for _ in range(tries):
            await self.follow(voter, epoch)
            offsets = [o for o, b in self.voters_records(since) if voter_ids(b) == voters]
            if offsets:
                return offsets[0]
            await asyncio.sleep(0.02)
        return -1

    def keep_fetching(self, voter_id: int, epoch: int, every_ms: int | None = None) -> None:
        """A virtual voter fetching from the target leader in the background (as ``Scenario.keep_fetching``) until
        ``quiesce``: the loop ends by itself at a flag, never by cancellation (Python 3.11's asyncio.wait_for can
        lose a cancellation that meets an answer arriving, and the loop would go on)."""
        voter = self.sc.q.voters[voter_id]
        period = (every_ms or max(20, self.sc.timeouts.fetch_ms // 6)) / 1000
        self._stop = False

        async def loop() -> None:
            while not self._stop:
                with contextlib.suppress(RequestError):
                    await voter.follow_once(epoch)
                await asyncio.sleep(period)

        self._loops.append(self.sc.q.spawn(loop()))

    def keep_fetching_at(self, voter_id: int, epoch: int, offset: int, every_ms: int | None = None) -> None:
        """A voter that keeps fetching from the target leader at ``offset`` and takes nothing from the answers: it
        keeps the leader in office (check quorum) but never holds what the leader appended after ``offset``, so it
        cannot help commit it (a lagging voter of the set in force)."""
        voter = self.sc.q.voters[voter_id]
        lfe = self.q.log.epoch_at(offset - 1) if offset > 0 else 0
        period = (every_ms or max(20, self.sc.timeouts.fetch_ms // 6)) / 1000
        self._stop = False

        async def loop() -> None:
            while not self._stop:
                with contextlib.suppress(RequestError):
                    await voter.fetch(epoch, offset, lfe)
                await asyncio.sleep(period)

        self._loops.append(self.sc.q.spawn(loop()))

    async def wait_leader(self, timeout_ms: float) -> tuple[int, dict[str, Any]] | None:
        """Ask the target (DescribeQuorum, as ``kafka-metadata-quorum describe``) until it leads; (its epoch, the
        answer's partition), or None when it does not lead within ``timeout_ms``."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            with contextlib.suppress(RequestError, TimeoutError, OSError):
                _version, resp = await self.admin.describe_quorum()
                part = B.partition_or_none(resp) or {}
                if not resp.get("ErrorCode") and not part.get("ErrorCode") and \
                        part.get("LeaderId") == self.sc.target_id:
                    return int(part.get("LeaderEpoch", -1)), part
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(0.05)

    async def quiesce(self) -> None:
        """End the background fetch loops (each ends after its current Fetch)."""
        self._stop = True
        loops, self._loops = self._loops, []
        if loops:
            await asyncio.wait(loops, timeout=2 * self.sc.q.request_timeout_s + 1)

    def mark_changed(self) -> None:
        """The target's voter set is no longer the initial one: the next case gets a fresh life (unless ``restore``
        brings it back first)."""
        self.sc.target.life_clean = False

    async def restore(self) -> bool:
        """After a case that changed the voter set: a virtual leader of a new epoch writes VotersRecord(the initial
        set) and commits it, and the target catches up: the target's voter set is the initial one again (one change
        away from any set a case leaves: Kafka's overlapping-majority rule holds), far cheaper than a relaunch.
        Best effort: False (and a relaunch before the next case) when any step does not go through."""
        sc, q = self.sc, self.sc.q
        try:
            await self.quiesce()
            for v in q.voters.values():
                if v.partitioned:
                    q.partition(v.node_id, False)
                v.vote_policy = lambda _c, _e, _p: False
            lead = sc.virtual_ids[0]
            epoch = await sc.make_follower(lead)
            q.log.append_control(epoch, ControlType.KRAFT_VOTERS, voters_record(sc, self.initial), commit=True)
            q.changed()
            await sc.catch_up(lead, epoch)
        except Exception as exc:  # a case that passed stays passed: the next case gets a fresh life instead
            sc.frames.note(sc.target_id, f"could not restore the initial voter set ({type(exc).__name__}): relaunch")
            return False
        sc.frames.note(sc.target_id, f"voter set {self.initial} restored by v{lead} in epoch {epoch}")
        sc.target.life_clean = True
        return True


@contextlib.asynccontextmanager
async def reconfig_life(sc: Scenario, *, changes_voters: bool, standalone: bool = False) -> AsyncIterator[Reconf]:
    """Run the case on a target formatted as a KIP-853 dynamic quorum (the target and the virtual voters,
    ``--initial-controllers``; kraft.version 1): a fresh life unless the current one is such a life whose voter
    set no case has changed. ``changes_voters``: this case changes it (the next case then gets a fresh life).
    ``standalone``: a fresh life of the target formatted ``--standalone`` instead, the only voter (KIP-853
    "Bootstrapping"); its directory id is then the target's own (``Reconf.wait_leader`` reads it).
    Skipped, saying what to do, when the target cannot be relaunched or formatted so, or does not serve
    AddRaftVoter (api key 80)."""
    sc.require("dynamic-quorum", "format the target as a KIP-853 dynamic quorum with --initial-controllers")
    if len(sc.q.voters) != 2:
        # each case counts majorities of a 3-voter set (e.g. AddVoter/1: 2 of 4 holding the VotersRecord is not
        # yet a majority, 3 of 4 is); a 5-voter quorum would need other counts, not written yet
        sc.skip(f"needs --quorum-size 3 (the default): the KIP-853 cases drive a dynamic quorum of the target and two "
                f"virtual voters, this run has {len(sc.q.voters) + 1} voters; run them without --quorum-size 5")
    sc.require("restart", "relaunch the target on a directory formatted with --initial-controllers")
    target = sc.target
    if isinstance(target, CommandTarget) and not isinstance(target, EmbeddedTarget) and (
            "{initial_controllers}" not in target.template):
        sc.skip("needs capability 'dynamic-quorum' (format the target with --initial-controllers): the --target-cmd "
                "template has no {initial_controllers} placeholder; pass it to your format step, e.g. "
                "kafka-storage format ... --initial-controllers {initial_controllers} (empty for a static quorum)")
    dyn = standalone_quorum_of(sc) if standalone else dynamic_quorum_of(sc)
    q = sc.q
    # a --standalone target picks its own directory id (learnt from DescribeQuorum by the case)
    q.dynamic, q.target_directory_id = True, None if standalone else target_directory_id(target.node_id)
    if target.life_dynamic != dyn or not target.life_clean:
        target.dynamic = dyn
        await sc.restart_target(wipe=True)
        q.log = VLog()
    # (also a dynamic life the session started itself: after a failed case, or a new life for TLC's sake)
    life = q.session.life
    if not NODE_TRACE_MODELS_RECONFIG or (standalone and not TLC_MODELS_SOLE_VOTER):
        target.unmodelled_lives.add(life)
    if not BLACKBOX_MODELS_RECONFIG or (standalone and not BLACKBOX_MODELS_SOLE_VOTER):
        target.blackbox_unmodelled_lives.add(life)
    client = await sc.v(0).connect()
    if ADD_RAFT_VOTER not in client.versions:
        sc.skip("needs capability 'dynamic-quorum': the target does not advertise AddRaftVoter (api key 80) in "
                "ApiVersions; a KIP-853 controller (Kafka 3.9+) does. If yours has no dynamic quorum, pass "
                "--target-profile FILE with 'dynamic-quorum: false'")
    if changes_voters:
        target.life_clean = False
    admin = Admin(sc)
    r = Reconf(sc, admin, [target.node_id] if standalone else sorted(q.voter_ids), standalone=standalone)
    try:
        yield r
        if not target.life_clean and RESTORE_VOTER_SET and not standalone:
            await r.restore()
    finally:
        await r.quiesce()
        await admin.close()
        for hole in r.holes:
            await hole.close()


def leave_dynamic_quorum(session: Any) -> None:
    """After the KIP-853 cases: the next cases get a target of the static quorum again (a wiped relaunch when
    the current life is a dynamic one)."""
    target = session.target
    q = session.quorum
    was_dynamic = target.life_dynamic is not None
    if was_dynamic:  # e.g. a life the session started after the last case failed: no case marked it
        if not NODE_TRACE_MODELS_RECONFIG:
            target.unmodelled_lives.add(q.session.life)
        if not BLACKBOX_MODELS_RECONFIG:
            target.blackbox_unmodelled_lives.add(q.session.life)
    target.dynamic = None
    q.dynamic, q.target_directory_id = False, None
    if was_dynamic and target.can_restart:
        session.heal()


__all__ = ["ZERO_UUID", "Admin", "Reconf", "errors_of", "leave_dynamic_quorum", "reconfig_life", "standalone_quorum_of",
           "voter_ids"]
