"""The deterministic cluster simulator: N unmodified reference cores, a virtual clock, a virtual network.

The simulator is the cores' shell (reference/io.py's contract): it feeds one input at a time, applies
each ``Ready`` bundle in the required order — quorum-state and log operations onto the node's "disk"
first, then messages — and keeps per node exactly what survives a crash: the last persisted
``ElectionState``, the log as of the last applied log operations, and the adopted cluster id
(meta.properties). A restart rebuilds the core from those alone via ``KRaftCore.restart``.

Determinism (FoundationDB / TigerBeetle VOPR style): time is an integer virtual millisecond; events sit
in one heap ordered by (time, insertion number); every random choice — network delays, loss,
duplication, reordering, clock skew, timer jitter, client writes, the fault schedule when drawn, and the
seed of each core's own rng — comes from one ``random.Random(seed)``, in event order. Same seed, same
trace, byte for byte. Wall-clock time never enters.

Trace timestamps (``ts``) are global virtual time; each node's core runs on its own skewed clock.

Observers (``SimConfig.observers``): replicas whose ids are not voters run the same core, which makes
them observers (``CoreConfig.is_voter``: they find the leader by asking the voters in turn, fetch from it,
never vote, never campaign and never count toward the high watermark); faults name voters only, so an
observer is never crashed nor partitioned. A foreign-cluster sender (``SimConfig.foreign_rate``) is a node
of another cluster that sends Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch requests with its own
cluster id to voters that know theirs: each must be answered INCONSISTENT_CLUSTER_ID and change nothing
(KIP-595: every handler checks the cluster id first), checked online as ``ClusterIdIsolation``.

Snapshots (KIP-630; ``FaultProfile.snapshot_bytes`` and the rest, on in the default profile): every node applies
its committed log to a state machine (``statemachine.py``: a digest of the committed records and the broker
registry) and, when ``SnapshotTrigger`` (reference/broker_driver.py, the node's rule) says so, writes a snapshot
of it into its in-memory snapshot directory (``disk.SnapshotFiles``, the core's ``SnapshotSource``), tells the
core (``SnapshotWritten``) and cleans its log (``CleanLogTo``). Every snapshot op of a ``Ready`` is mirrored
like the log ops; a completed download is frozen, the log emptied, the state machine loaded from it and the
core told (``SnapshotLoaded``). A restart deletes partial files, starts the log at the snapshot at its start
and the state machine from the latest snapshot. ``SnapshotCrash`` kills a node in the middle of a snapshot
write. The online checks add SnapshotAtCommittedOffset, SnapshotAgreement (same end offset, same epoch and
state; the committed log's digest), LogStartCoveredBySnapshot and SnapshotInstallResetsLog.

Dynamic voter sets (KIP-853; ``SimConfig.joiners`` or the ``reconfig`` fault profile): every node is formatted
kraft.version 1 with the voters 1..``nodes`` as its bootstrap set (``CoreConfig.bootstrap_voters``, Kafka's
``--initial-controllers`` written on every node), and the joiners (ids after the observers') start as observers. An
admin client (node ``SimConfig.admin_id`` in traces) sends AddRaftVoter/RemoveRaftVoter to the leader of the moment
on the schedule ``faults.reconfig_schedule`` draws (joiners added one by one, a follower removed, the leader removed,
then random changes, some right behind another), each with its fault: a crash of the joiner before the change
commits, a crash of the leader with its VotersRecord uncommitted, a partition of the leader. The leader's ApiVersions
probe of a joiner is answered by the simulator (a node's shell answers ApiVersions, not its core) when the joiner
runs and the link delivers, else never. A joiner's process starts ``JOINER_LEAD_MS`` before the change that adds it.
Snapshots (on in the reconfig profile) carry the KRaftVersionRecord and VotersRecord in force at their last offset
(``core.voters_at``; the node's header batch, reference/snapshot.py), and the core is told them on every load
(``SnapshotLoaded``, and ``start_snapshot`` at restart), so a joiner that arrives after the leader cleaned its log
catches up through FetchSnapshot with the right voter set. Online checks: AtMostOneUncommittedConfig,
CommittedConfigsDifferByOne, ElectionSafety's "a majority of the leader's own voter set" and SnapshotConfigAgreement
(a snapshot taken, installed or loaded holds the committed voter set at its end; the installing event reports it;
after a load the node's voter set is the snapshot's or a later one of its log) (``invariants.py``). No brokers there.
Two schedules of the reconfig profile are set off by voter changes (a stream of their own; ``_voters_appended``): a
``ChangeSplit`` cuts a leader of an even voter set off with its just-appended change, moves one voter to its side the
instant another node leads, and has the admin client ask the new leader to remove the old one (Raft's
single-server-change bug: KIP-853's "an entry of the leader's epoch committed first" rule is what refuses it); a
``RemovalSplit`` has the admin client ask a leader of an even set to remove itself and, at that removal, restarts one
remaining voter and cuts it off with the leader from the other two (a removed leader must stop counting itself).

Crash windows and deposed leaders (the "default" profile, drawn from a stream of their own so a seed's other faults
stay what they were): a ``VoteCrash`` kills a voter the instant a vote grant has left it and restarts it quickly — a
vote that was not durable before the response left is then gone, which the restart checks (VoteOnce: what the node
reads back, and the state its core resumes in, still hold the vote it granted in that epoch, unless it learned the
leader); an ``IsolateLeader`` cuts the leader of the moment off for seconds, and the client (``_client_write``) writes
to either leader while a deposed one still believes it leads, so the deposed leader comes back with a longer log of
an older epoch. ``SimConfig.persist_after_send_ms`` gives the simulator's shell a mutation test's bug: quorum-state
written after the step's messages left (a write-behind store, bench/mutants_sim.py). A ``Figure8`` schedule (default
profile; Raft's Figure 8) cuts the leader off, cuts the next leader off the instant it leads, lets the first one lead
again and, the instant it has answered a Fetch of a voter that now holds an older-epoch entry the other leader's log
lacks, swaps the two cuts: a leader that counted that entry committed by replication alone loses it.
``SimConfig.fetch_max_bytes`` caps each Fetch answer (whole batches; ``kraft-tck simulate``'s default run: 1 KB), so a
lagging voter catches up over several answers — the only way a follower's high watermark can run ahead of its log, and
what the Figure 8 moment needs in a 3-voter cluster. tla/KRaft.tla models a cap in records (MaxFetchRecords), not in
bytes: a capped trace's partial answers do not validate yet.

Brokers (``brokers.py``): every node drives a ``BrokerDriver`` (reference/broker_driver.py), the same one the
node process drives: it applies committed records to the node's broker registry (each change a
``BrokerEvent``), runs the controller while the node is the active controller, and says when a broker's
answer may leave. The simulator only routes: appends, answers and session-expiry timers.
"""

from __future__ import annotations

import base64
import dataclasses
import heapq
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from heapq import heappush
from pathlib import Path
from typing import Any

from kraft_tck.reference.broker_driver import BrokerAnswer, BrokerDriver, SnapshotTrigger, sized
from kraft_tck.reference.controller import Decision
from kraft_tck.reference.core import CLUSTER_ID_KEY, CoreConfig, KRaftCore, SafetyViolation
from kraft_tck.reference.io import (
    AbortSnapshotDownload,
    AdvanceLogStart,
    AppendBatches,
    CleanLogTo,
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
from kraft_tck.reference.log import Log, LogError
from kraft_tck.reference.messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BeginQuorumEpochRequest,
    Endpoint,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    ReplicaKey,
    Request,
    Response,
    SnapshotId,
    VoteRequest,
    VoteResponse,
    api_name,
)
from kraft_tck.reference.registry import BrokerChange, BrokerRegistry
from kraft_tck.spec.errors import Errors
from kraft_tck.spec.trace import TraceWriter, encode_line
from kraft_tck.traces.checker import SNAPSHOT_CONFIG_AGREEMENT, voters_after_load
from kraft_tck.traces.sim import statemachine
from kraft_tck.traces.sim.bodies import MessageBodies
from kraft_tck.traces.sim.brokers import BrokerFleet, SimBroker
from kraft_tck.traces.sim.disk import DiskLog, SnapshotFiles, voters_in
from kraft_tck.traces.sim.faults import (
    GRACE_MS,
    ChangeSplit,
    ClockConfig,
    Crash,
    Fault,
    Figure8,
    IsolateLeader,
    Lossy,
    NetConfig,
    OneWay,
    Partition,
    RemovalSplit,
    ScheduledVoterChange,
    SnapshotCrash,
    VoteCrash,
    extra_schedule,
    fault_sort_key,
    profile,
    random_schedule,
    reconfig_fault_schedule,
    reconfig_schedule,
    validate_schedule,
)
from kraft_tck.traces.sim.invariants import INVARIANTS, InvariantChecker, InvariantViolation
from kraft_tck.traces.sim.statemachine import SimStateMachine

IMPLEMENTATION = "kraft-tck-reference/0.1.0"

# Event kinds in the heap. Plain ints (not an Enum) because the loop dispatches on them millions of times.
_TICK, _REQUEST, _RESPONSE, _TIMEOUT, _FAULT_START, _FAULT_END, _RESTART, _CRASH, _WRITE = range(9)
# Broker events: a broker's own timer, its request reaching a node, the answer reaching it, its
# request timing out, and a controller's session-expiry check.
_BROKER_TIMER, _BROKER_REQUEST, _BROKER_RESPONSE, _BROKER_TIMEOUT, _FENCE = range(9, 14)
# A request of the foreign-cluster sender reaching a voter.
_FOREIGN = 14
# KIP-630: a node's snapshot work, run as an event of its own right after the step that called for it (never
# inside a step): take a snapshot ("take", the trigger's time rule "timer"), report a loaded one ("loaded").
_SNAPSHOT = 15
# KIP-853: the admin client's voter change (a ``ScheduledVoterChange``) is due, or one waiting for a leader retries.
_ADMIN = 16
# A write-behind shell's quorum-state write lands (``SimConfig.persist_after_send_ms``: a mutation test's shell).
_PERSIST = 17
#: KIP-853: how long before the change that adds it a joiner's process starts (it catches up as an observer first).
JOINER_LEAD_MS = 1500
#: The controller listener every simulated node advertises (VotersRecord endpoints, the ApiVersions probe's address).
LISTENER = "CONTROLLER"
# The other cluster's id (22 characters, like a formatted cluster id).
FOREIGN_CLUSTER_ID = "ForeignCluster00000000"
# The online check of the foreign-cluster sender's requests (KIP-595: each handler's cluster id check).
CLUSTER_ID_ISOLATION = "ClusterIdIsolation"

# The end of a message event's line per note ("lost", "duplicate", ...): '}\n' or ',"note":"..."}\n'.
_NOTES: dict[str | None, bytes] = {}
# How a core's trace event (a dict whose first key is "type") is encoded up to its second key: the
# line's "seq" goes in right there.
_EVENT_HEAD = b'{"type":"event",'
_EVENT_HEAD_LEN = len(_EVENT_HEAD)
# Trace lines are collected in memory and handed to the writer in chunks of about this size.
_FLUSH_BYTES = 1 << 20

# A broker request awaiting its answer: (broker id, broker generation, correlation id, api key).
_BrokerCall = tuple[int, int, int, int]


@dataclass(frozen=True)
class SimConfig:
    """One seed's run. ``faults=None`` draws the schedule from the seed and ``profile``; an explicit
    tuple (hypothesis, a reproduction) is used as given. ``net``/``clock`` default to the profile's.

    ``brokers``: simulated brokers registering with the active controller; 0 turns them off,
    and then a seed's trace is byte for byte what it was before brokers existed.

    ``observers``: observer replicas (ids ``nodes + 1`` ..), fetching from the leader like Kafka's brokers;
    ``foreign_rate``: requests per virtual second from a node of another cluster (id after the observers',
    cluster id ``FOREIGN_CLUSTER_ID``) to this cluster's voters. Both 0 by default: a seed's trace is then
    byte for byte what it was before they existed.
    """

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
    brokers: int = 3
    broker_heartbeat_interval_ms: int = 1000  # Kafka's broker.heartbeat.interval.ms (default 2000)
    broker_session_timeout_ms: int = 4000  # Kafka's broker.session.timeout.ms (default 9000)
    observers: int = 0
    foreign_rate: float = 0.0
    # KIP-996 pre-vote in every core (``CoreConfig.pre_vote``); off: Kafka 3.x elections, and a seed's trace is
    # byte for byte what it was before pre-vote existed.
    pre_vote: bool = False
    # KIP-630 snapshots (``FaultProfile.snapshot_bytes`` and the rest; None: the profile's). ``snapshot_bytes`` 0
    # turns snapshots off, and then a seed's trace is byte for byte what it was before snapshots existed.
    snapshot_bytes: int | None = None
    snapshot_interval_ms: int | None = None
    retention_bytes: int | None = None
    snapshot_chunk_bytes: int | None = None
    # KIP-853 (None: the profile's; 0 with a profile without voter changes: kraft.version 0, static voters, and a
    # seed's trace is byte for byte what it was before). Joining replicas, ids after the observers'; with any
    # joiner or voter change the cluster is formatted kraft.version 1 with the voters 1..``nodes`` as its bootstrap
    # set (``CoreConfig.bootstrap_voters``), and the admin client runs the profile's ``reconfig_schedule``.
    joiners: int | None = None
    # The shell's order of persist and send, for mutation tests only (tests/mutants, bench/mutants_sim.py): None is
    # reference/io.py's order (quorum-state written before any message of the step leaves). (lo, hi): a write-behind
    # shell that sends the step's messages first and writes quorum-state lo..hi virtual ms later (uniform, a stream
    # of its own); a crash before the write (``VoteCrash``) loses it. A seed's trace is byte for byte what it was
    # when this is None.
    persist_after_send_ms: tuple[int, int] | None = None
    # The most a Fetch response carries (Kafka's fetch max bytes; None: the core's default, 8 MB, more than any
    # simulated log): a smaller one makes a lagging follower catch up over several fetches. ``kraft-tck simulate``'s
    # default run sets 1024 (its ``--fetch-max-bytes``); None here keeps a seed's trace what it was.
    fetch_max_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")
        if self.duration_ms <= 0:
            raise ValueError(f"duration_ms must be > 0, got {self.duration_ms}")
        if self.write_rate < 0:
            raise ValueError(f"write_rate must be >= 0, got {self.write_rate}")
        if self.brokers < 0:
            raise ValueError(f"brokers must be >= 0, got {self.brokers}")
        if self.observers < 0:
            raise ValueError(f"observers must be >= 0, got {self.observers}")
        if self.foreign_rate < 0:
            raise ValueError(f"foreign_rate must be >= 0, got {self.foreign_rate}")
        if self.broker_heartbeat_interval_ms <= 0:
            raise ValueError(f"broker_heartbeat_interval_ms must be > 0, got {self.broker_heartbeat_interval_ms}")
        if self.broker_session_timeout_ms <= self.broker_heartbeat_interval_ms:
            raise ValueError(
                f"broker_session_timeout_ms ({self.broker_session_timeout_ms}) must exceed "
                f"broker_heartbeat_interval_ms ({self.broker_heartbeat_interval_ms}), or every broker is fenced"
            )
        profile(self.profile)  # names the choices when unknown
        for name in ("snapshot_bytes", "snapshot_interval_ms", "retention_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        if self.snapshot_chunk_bytes is not None and self.snapshot_chunk_bytes <= 0:
            raise ValueError(f"snapshot_chunk_bytes must be > 0, got {self.snapshot_chunk_bytes}")
        if self.joiners is not None and self.joiners < 0:
            raise ValueError(f"joiners must be >= 0, got {self.joiners}")
        late = self.persist_after_send_ms
        if late is not None and not 0 <= late[0] <= late[1]:
            raise ValueError(f"persist_after_send_ms needs 0 <= lo <= hi, got {late}")
        if self.faults is not None:
            validate_schedule(self.faults, self.node_ids)

    @property
    def node_ids(self) -> list[int]:
        """The voters."""
        return list(range(1, self.nodes + 1))

    def snapshot_setting(self, name: str) -> int:
        """A KIP-630 setting: this config's, or its profile's."""
        value = getattr(self, name)
        return int(getattr(profile(self.profile), name)) if value is None else int(value)

    @property
    def observer_ids(self) -> list[int]:
        return list(range(self.nodes + 1, self.nodes + self.observers + 1))

    @property
    def joiner_count(self) -> int:
        return int(profile(self.profile).joiners) if self.joiners is None else self.joiners

    @property
    def joiner_ids(self) -> list[int]:
        """KIP-853: replicas that start as observers and may be added as voters."""
        first = self.nodes + self.observers + 1
        return list(range(first, first + self.joiner_count))

    @property
    def dynamic(self) -> bool:
        """KIP-853: kraft.version 1 (a bootstrap voter set, voter changes possible)."""
        return self.joiner_count > 0 or profile(self.profile).voter_changes_per_min > 0

    @property
    def foreign_id(self) -> int:
        """The foreign-cluster sender's node id: no replica of this cluster has it."""
        return self.nodes + self.observers + self.joiner_count + 1

    @property
    def admin_id(self) -> int:
        """KIP-853: the admin client's id in traces (it sends AddRaftVoter/RemoveRaftVoter)."""
        return self.foreign_id + 1


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
    broker_events: int = 0  # BrokerEvent trace events (every node's registry changes)
    foreign_requests: int = 0  # requests of the foreign-cluster sender delivered to a voter
    max_epoch: int = 0  # the largest epoch any node reached (each election bumps it)
    # KIP-630: snapshots taken (CreateSnapshot), installed from a leader, log cleanings (AdvanceLogStart),
    # downloads given up (AbortSnapshotDownload), nodes that died writing a snapshot (torn: a partial file left),
    # partial files a restart deleted, and the largest log start offset any node reached.
    snapshots: int = 0
    installs: int = 0
    cleanings: int = 0
    downloads_aborted: int = 0
    snapshot_crashes: int = 0
    torn_writes: int = 0
    partials_dropped: int = 0
    max_log_start: int = 0
    # KIP-853 with snapshots: snapshots joiners installed from a leader (FetchSnapshot), each loaded with its voter set.
    joiner_installs: int = 0
    # KIP-853: voter changes asked for, answered NONE (committed), REQUEST_TIMED_OUT, refused with another error or
    # never answered; committed removals of the leader itself; the initial and the last committed voter set.
    changes_requested: int = 0
    changes_committed: int = 0
    changes_timed_out: int = 0
    changes_refused: int = 0
    leader_removals: int = 0
    initial_voters: tuple[int, ...] = ()
    final_voters: tuple[int, ...] = ()
    # Raft's Figure 8 (``Figure8``): schedules that reached their moment (a voter holding an older-epoch entry the
    # cut-off leader's log lacks, the leader cut off and the other leader back).
    figure8_moments: int = 0
    # KIP-853: ``ChangeSplit`` schedules set off by a voter change (and of those, the ones whose second cut began at a
    # new leader), ``RemovalSplit`` schedules set off by a leader's own removal.
    change_splits: int = 0
    change_split_leaders: int = 0
    removal_splits: int = 0

    @property
    def leader_changes(self) -> int:
        """Leaders elected after the first one (each epoch has at most one)."""
        return max(0, len(self.leaders) - 1)

    def raise_for_violation(self) -> None:
        if self.violation is not None:
            raise self.violation


class SimulationError(RuntimeError):
    """The simulation itself (or a core) crashed with something that is not an invariant violation."""


@dataclass(eq=False)
class _Node:
    id: int
    cfg: CoreConfig
    ppm: int  # clock skew
    durable: ElectionState
    disk: DiskLog = field(default_factory=DiskLog)  # the durable log: mirrors every applied log op
    cluster_id: str | None = None  # meta.properties
    core: KRaftCore | None = None
    incarnation: int = 0
    tick_at: int | None = None
    hw: int = 0  # the core's high watermark after its last step
    # correlation id -> (dest, api, the core's request id)
    inflight: dict[int, tuple[int, str, int]] = field(default_factory=dict)
    log: Log | None = None  # the core's log, made by ``_restart`` over ``disk``
    # Brokers (volatile, like node.py's): the broker driver (registry applied from the committed log,
    # controller, answers waiting for their records to commit), and the next session-expiry check.
    brokers: BrokerDriver | None = None
    fence_at: int | None = None
    # global_time's last answer: a core asks for the same deadline step after step.
    _gt_local: int = -1
    _gt_global: int = 0
    # KIP-630. Durable: the snapshot files; the largest end offset this node installed from a leader (its log
    # never goes below it again). Volatile: the state machine, the snapshot trigger, the pending time check, a
    # snapshot already asked for; and the SnapshotCrash waiting for this node's next snapshot.
    snaps: SnapshotFiles = field(default_factory=SnapshotFiles)
    installed: int = -1
    sm: SimStateMachine | None = None
    trigger: SnapshotTrigger | None = None
    snap_timer_at: int | None = None
    snap_wanted: bool = False
    armed: SnapshotCrash | None = None
    vote_armed: VoteCrash | None = None  # dies the instant its next vote grant has left it

    def local(self, now: int) -> int:
        """This node's clock reading at global virtual time ``now`` (monotonic in ``now``)."""
        return now + (now * self.ppm) // 1_000_000

    def global_time(self, local: int) -> int:
        """The earliest global time at which this node's clock reads ``local`` or later."""
        ppm = self.ppm
        if ppm == 0:
            return local
        if local == self._gt_local:
            return self._gt_global
        g = max(0, (local * 1_000_000) // (1_000_000 + ppm))
        while g + (g * ppm) // 1_000_000 < local:  # self.local(g), inlined: this runs after every step
            g += 1
        while g > 0 and (g - 1) + ((g - 1) * ppm) // 1_000_000 >= local:
            g -= 1
        self._gt_local, self._gt_global = local, g
        return g


@dataclass(eq=False)
class _Figure8Run:
    """A ``Figure8`` schedule under way: the first leader (cut off first), the second one (cut off the instant it
    led), the epoch in which the first one leads again, and whether the schedule is over."""

    fault: Figure8
    old: int
    new: int | None = None
    old_epoch: int = -1
    done: bool = False


@dataclass(eq=False)
class _SplitRun:
    """A ``ChangeSplit`` under way: the leader that appended the change, the voter set of its record, the nodes cut
    off on its side (the cut's groups: ``groups``), the next leader (None: none yet), when the cut ends."""

    fault: ChangeSplit
    old: int
    voters: frozenset[int]
    groups: tuple[tuple[int, ...], ...]
    ends_at: int
    new: int | None = None
    done: bool = False


class Simulation:
    """Run one seed. ``core_class`` lets tests run a deliberately broken core subclass, and
    ``registry_class`` a broken broker registry."""

    def __init__(
        self,
        config: SimConfig,
        trace_path: str | Path | None = None,
        core_class: type[KRaftCore] = KRaftCore,
        registry_class: type[BrokerRegistry] = BrokerRegistry,
    ) -> None:
        self.config = config
        self.core_class = core_class
        self.registry_class = registry_class
        prof = profile(config.profile)
        self.net = config.net or prof.net
        self.clock = config.clock or prof.clock
        self.rng = random.Random(config.seed)
        ids = config.node_ids
        if config.faults is None:
            drawn: list[Fault] = random_schedule(self.rng, ids, config.duration_ms, prof)
            # From a stream of its own: the other faults and every later draw stay what they were.
            drawn += extra_schedule(random.Random(f"extra-faults-{config.seed}"), ids, config.duration_ms, prof)
            # KIP-853's schedules set off by voter changes, likewise (only a profile that has them draws any)
            drawn += reconfig_fault_schedule(random.Random(f"reconfig-faults-{config.seed}"), config.duration_ms,
                                             prof)
            self.faults = tuple(sorted(drawn, key=fault_sort_key))
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
                pre_vote=config.pre_vote,
                fetch_snapshot_max_bytes=config.snapshot_setting("snapshot_chunk_bytes"),
            )
            if config.fetch_max_bytes is not None:
                cfg = dataclasses.replace(cfg, fetch_max_bytes=config.fetch_max_bytes)
            ppm = self.rng.randint(-skew, skew) if skew else 0
            self.nodes[i] = _Node(
                i, cfg, ppm, ElectionState(voters=tuple(ids)), cluster_id=config.cluster_id
            )
        for i in config.observer_ids:  # the same core; not in ``voters``, so an observer
            cfg = dataclasses.replace(cfg, node_id=i)
            ppm = self.rng.randint(-skew, skew) if skew else 0
            self.nodes[i] = _Node(
                i, cfg, ppm, ElectionState(voters=tuple(ids)), cluster_id=config.cluster_id
            )
        # KIP-853: kraft.version 1 nodes formatted with the initial voters (every node, joiners too, holds the
        # bootstrap checkpoint: Kafka's --initial-controllers), the joiners, the admin client's schedule.
        self.dynamic = config.dynamic
        self.joiner_set = frozenset(config.joiner_ids)
        self.joiner_start: dict[int, int] = {}  # KIP-853: when each joiner's process starts (``_make_dynamic``)
        self.fault_ids = ids
        self.addresses: dict[tuple[str, int], int] = {}
        self.changes: list[ScheduledVoterChange] = []
        self.change_counts = dict.fromkeys(("changes_requested", "changes_committed", "changes_timed_out",
                                            "changes_refused", "leader_removals"), 0)
        # the admin's requests waiting for an answer: correlation id -> (change, leader asked, target)
        self._admin_calls: dict[int, tuple[ScheduledVoterChange, int, int]] = {}
        self._admin_corr = 0
        if self.dynamic:
            self._make_dynamic(prof)
        # Drawn after everything above and from a stream of its own: brokers change no seed's schedule.
        self.fleet: BrokerFleet | None = None
        if config.brokers > 0 and not self.dynamic:
            self.fleet = BrokerFleet(
                config.seed,
                config.brokers,
                ids,
                config.duration_ms,
                config.broker_heartbeat_interval_ms,
                prof.broker_crashes_per_min,
                prof.broker_shutdowns_per_min,
            )
        self.checker = InvariantChecker(config.seed)
        if self.dynamic:
            self.checker.initial_voters = frozenset(ids)
        # KIP-630 (0: off): the trigger's and the cleaner's settings, and the counts of the result.
        self.snapshot_bytes = config.snapshot_setting("snapshot_bytes")
        self.snapshot_interval_ms = config.snapshot_setting("snapshot_interval_ms")
        self.retention_bytes = config.snapshot_setting("retention_bytes")
        self.snap_counts = dict.fromkeys(("snapshots", "installs", "cleanings", "downloads_aborted",
                                          "snapshot_crashes", "torn_writes", "partials_dropped", "max_log_start",
                                          "joiner_installs"), 0)
        # The torn write's cut: a stream of its own.
        self.snap_rng = random.Random(f"snapshots-{config.seed}")
        # The foreign sender draws from a stream of its own (what, when, to whom).
        self.foreign_rng = random.Random(f"foreign-{config.seed}") if config.foreign_rate > 0 else None
        # A write-behind shell's delays (mutation tests): a stream of its own.
        self.persist_rng = random.Random(f"persist-{config.seed}") if config.persist_after_send_ms else None
        self.foreign_requests = 0
        self._foreign_corr = 0
        self._foreign_reply: Response | None = None
        self.now = 0
        self.seq = 0  # trace sequence number of the next event (counted even when not tracing)
        self.broker_events = 0
        self._heap: list[tuple[int, int, int, Any, Any]] = []
        self._order = 0
        self._corr = 0
        self._blocked: dict[tuple[int, int], int] = {}  # (src, dst) -> active faults blocking it
        self._extra_loss: list[float] = []
        self._figure8: _Figure8Run | None = None  # the Figure8 schedule under way
        self.figure8_moments = 0
        # KIP-853: ChangeSplit and RemovalSplit schedules armed (waiting for their voter change), the ChangeSplit under
        # way, their counts, and their choices of voters (a stream of its own: drawn only when one is set off).
        self._splits_armed: list[ChangeSplit] = []
        self._removals_armed: list[RemovalSplit] = []
        self._split: _SplitRun | None = None
        self.split_counts = dict.fromkeys(("change_splits", "change_split_leaders", "removal_splits"), 0)
        self.split_rng = random.Random(f"splits-{config.seed}")
        self._link_clear: dict[tuple[int, int], int] = {}  # (src, dst) -> arrival time of its last message
        self._writes = 0
        self.writes_accepted = 0
        self.writes_refused = 0
        # The two draws of every message and step, randrange(span) inlined (``_fate``): span and its bits.
        self._getrandbits = self.rng.getrandbits
        self._delay_span = self.net.max_delay_ms + 1 - self.net.min_delay_ms
        self._delay_bits = self._delay_span.bit_length()
        self._jitter_span = self.clock.tick_jitter_ms + 1 if self.clock.tick_jitter_ms else 0
        self._jitter_bits = self._jitter_span.bit_length()
        self.trace_path = Path(trace_path) if trace_path is not None else None
        self._writer: TraceWriter | None = None
        self._lines: bytearray | None = None  # trace lines not yet handed to the writer (None: no trace)
        self._bodies = MessageBodies(config.pre_vote) if self.trace_path is not None else None

    def _make_dynamic(self, prof: Any) -> None:
        """KIP-853: every node's core gets the bootstrap voter set (the voters 1..nodes with their directory ids and
        controller endpoints) instead of static voters; joiners are added, observers until a change adds them."""
        from kraft_tck.reference.voters import VoterNode, VoterSet

        config = self.config
        ids = config.node_ids
        skew = self.clock.max_skew_ppm
        template = self.nodes[ids[0]].cfg
        for i in config.joiner_ids:
            ppm = self.rng.randint(-skew, skew) if skew else 0
            self.nodes[i] = _Node(i, dataclasses.replace(template, node_id=i), ppm, ElectionState(voters=tuple(ids)),
                                  cluster_id=config.cluster_id)
        for i in self.nodes:
            self.addresses[endpoint_of(i).host, endpoint_of(i).port] = i
        bootstrap = VoterSet(tuple(VoterNode(ReplicaKey(i, directory_id_of(i)), (endpoint_of(i),)) for i in ids))
        for i, node in self.nodes.items():
            node.cfg = dataclasses.replace(node.cfg, voters=frozenset(), bootstrap_voters=bootstrap,
                                           directory_id=directory_id_of(i), listeners=(endpoint_of(i),))
        self.fault_ids = ids + config.joiner_ids
        self.changes = reconfig_schedule(random.Random(f"reconfig-{config.seed}"), config.joiner_ids,
                                         config.duration_ms, prof)
        # A joiner is started JOINER_LEAD_MS before the change that adds it by name (Kafka's procedure: format the new
        # controller, start it as an observer, then add-controller), at 0 when none does: with snapshots on, the
        # leader has cleaned its log by then and the joiner catches up through FetchSnapshot.
        for i in config.joiner_ids:
            adds = [ch.at_ms for ch in self.changes if ch.op == "add" and ch.node == i]
            self.joiner_start[i] = max(0, adds[0] - JOINER_LEAD_MS) if adds else 0
        self.admin_rng = random.Random(f"admin-{config.seed}")

    # ------------------------------------------------------------------------------------ running

    def header(self) -> dict[str, Any]:
        c = self.config
        config: dict[str, Any] = {
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
        }
        if c.observers:  # only when asked for, like brokers
            config["observers"] = c.observer_ids
        if c.pre_vote:  # likewise (reference/config.py's key)
            config["reference.quorum.pre.vote"] = True
        if self.snapshot_bytes:  # likewise (Kafka's names)
            config["metadata.log.max.record.bytes.between.snapshots"] = self.snapshot_bytes
            config["metadata.log.max.snapshot.interval.ms"] = self.snapshot_interval_ms
            config["metadata.max.retention.bytes"] = self.retention_bytes
            config["fetch.snapshot.max.bytes"] = c.snapshot_setting("snapshot_chunk_bytes")
        if self.dynamic:  # KIP-853, only then
            config["kraft.version"] = 1
            config["joiners"] = c.joiner_ids
            config["joiners.start.ms"] = {str(i): at for i, at in self.joiner_start.items()}
            config["admin.node"] = c.admin_id
            config["voter.changes"] = [dataclasses.asdict(ch) for ch in self.changes]
        if c.fetch_max_bytes is not None:  # only when set
            config["fetch.max.bytes"] = c.fetch_max_bytes
        if c.persist_after_send_ms is not None:  # a mutation test's shell, only then
            config["shell.persist.after.send.ms"] = list(c.persist_after_send_ms)
        if self.foreign_rng is not None:
            config["foreign.rate"] = c.foreign_rate
            config["foreign.node"] = c.foreign_id
            config["foreign.clusterId"] = FOREIGN_CLUSTER_ID
        if self.fleet is not None:  # only then: a broker-less trace stays what it was before brokers
            config["brokers"] = sorted(self.fleet.brokers)
            config["broker.heartbeat.interval.ms"] = c.broker_heartbeat_interval_ms
            config["broker.session.timeout.ms"] = c.broker_session_timeout_ms
            config["broker.schedule"] = {str(b.id): [list(p) for p in b.plan] for b in self.fleet.brokers.values()}
        return {
            "source": "simulator",
            # a run of its own: the same seed without pre-vote is another run (checks and metrics are per run)
            "run": f"seed-{c.seed}" + ("+pre-vote" if c.pre_vote else ""),
            # the pipeline groups its metrics by implementation: pre-vote runs beside the others
            "implementation": IMPLEMENTATION + ("+pre-vote" if c.pre_vote else ""),
            "clusterId": c.cluster_id,
            "voters": c.node_ids,
            "config": config,
        }

    def run(self) -> SimResult:
        """Run to ``duration_ms`` or the first invariant violation (which ends this seed)."""
        started = time.perf_counter()
        violation: InvariantViolation | None = None
        if self.trace_path is not None:
            # Not validated line by line (tests validate whole files) nor fsynced: the seed writes it again.
            self._writer = TraceWriter(self.trace_path, self.header(), validate=False, fsync=False)
            self._lines = bytearray()
        try:
            self._schedule_start()
            self._loop()
        except InvariantViolation as exc:
            violation = exc
        finally:
            if self._writer is not None:
                self._flush_lines()
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
            broker_events=self.broker_events,
            foreign_requests=self.foreign_requests,
            max_epoch=max(n.core.epoch if n.core is not None else n.durable.leader_epoch
                          for n in self.nodes.values()),
            **self.snap_counts,
            **self.change_counts,
            figure8_moments=self.figure8_moments,
            **self.split_counts,
            initial_voters=tuple(self.config.node_ids) if self.dynamic else (),
            final_voters=tuple(sorted(self.checker.committed_configs[-1][1])) if self.checker.committed_configs
            else tuple(self.config.node_ids) if self.dynamic else (),
        )

    def _flush_lines(self) -> None:
        """Hand the collected lines to the writer: the events ``next_seq`` .. ``self.seq - 1``."""
        writer, lines = self._writer, self._lines
        assert writer is not None and lines is not None
        writer.emit_lines(lines, self.seq - writer.next_seq)
        lines.clear()

    def _push(self, at: int, kind: int, a: Any, b: Any = None) -> None:
        self._order += 1
        heapq.heappush(self._heap, (at, self._order, kind, a, b))

    def _schedule_start(self) -> None:
        for node in self.nodes.values():
            self._push(self.joiner_start.get(node.id, 0), _RESTART, node.id, node.incarnation)
        for f in self.faults:
            self._push(f.at_ms, _FAULT_START, f)
        if self.config.write_rate > 0:
            self._push(self._next_write_gap(), _WRITE, None)
        if self.foreign_rng is not None:
            self._push(self._next_foreign_gap(), _FOREIGN, None)
        for ch in self.changes:
            self._push(ch.at_ms, _ADMIN, ch, 0)
        if self.fleet is not None:
            for bid, at in self.fleet.start_times():
                self._push(at, _BROKER_TIMER, bid, (0, "start"))
            for broker in self.fleet.brokers.values():
                for kind, at in broker.plan:
                    self._push(at, _BROKER_TIMER, broker.id, (0, kind))

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
                    self._apply(node, node.core.tick(at + (at * node.ppm) // 1_000_000))
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
            elif kind == _BROKER_TIMER:
                self._broker_timer(a, b)
            elif kind == _BROKER_REQUEST:
                self._broker_request(nodes[a], b)
            elif kind == _BROKER_RESPONSE:
                self._broker_response(a, b)
            elif kind == _BROKER_TIMEOUT:
                self._broker_timeout(a, b)
            elif kind == _FENCE:
                self._fence(nodes[a], b)
            elif kind == _FOREIGN:
                self._foreign_request()
            elif kind == _SNAPSHOT:
                self._snapshot_event(nodes[a], b)
            elif kind == _ADMIN:
                self._voter_change(a, b)
            elif kind == _PERSIST:
                node = nodes[a]
                if node.core is not None and node.incarnation == b[0]:
                    node.durable = b[1]  # the write-behind store's write lands (lost with the process)
            else:  # pragma: no cover - the kinds above are exhaustive
                raise SimulationError(f"unknown event kind {kind}")

    # ------------------------------------------------------------------------------------ the shell

    def _step(self, node: _Node, inp: Input) -> Ready:
        assert node.core is not None
        now = self.now
        try:
            ready = node.core.step(inp, now + (now * node.ppm) // 1_000_000)  # node.local(now)
        except Exception as exc:
            raise self._from_core(node, exc) from exc
        self._apply(node, ready)
        return ready

    def _from_core(self, node: _Node, exc: Exception) -> InvariantViolation:
        """The core raised: a finding of this seed, reported like the checker's, so the run goes on with
        the next seed. A SafetyViolation is the core catching itself about to break the property it
        names; the log refusing an append whose epoch goes back is LogMatching (a batch that does not extend
        the node's log), refusing a truncation below its start (into its snapshot) CommittedNeverTruncated;
        anything else is a crash of the core (``CoreException``), e.g. on a peer's impossible answer, which a
        node must survive."""
        text = str(exc)
        if isinstance(exc, SafetyViolation):
            name = text.split(":", 1)[0]
            name, detail = (name if name in INVARIANTS else "SafetyViolation"), f"raised by the core: {text}"
        elif isinstance(exc, LogError) and "below the log's last epoch" in text:
            # The node's log refused an append whose epoch goes back: the batch would follow entries of a later
            # epoch, so at its offset this node would hold the sender's entry after another prefix (LogMatching).
            name, detail = "LogMatching", f"the core's log refused a batch that does not extend it: {text}"
        elif isinstance(exc, LogError) and text.startswith("truncate to offset") and "below the log start" in text:
            # Below the log start lies what the node's snapshot holds: committed entries (KIP-630). A truncation
            # there removes committed entries, which the log refuses (CommittedNeverTruncated).
            name, detail = "CommittedNeverTruncated", f"the core's log refused to truncate committed entries: {text}"
        else:
            name, detail = "CoreException", f"the core raised {type(exc).__name__}: {text}"
        epoch = node.core.epoch if node.core is not None else -1
        return self.checker.fail(name, node.id, epoch, self.seq, self.now, detail)

    def _apply(self, node: _Node, ready: Ready) -> None:
        """reference/io.py's order: quorum-state and log (the "fsync") before any message leaves. (Its one exception, a
        leader's Fetch answers between its log writes and their fsync, is the same order here: a simulated step is
        applied whole and crashes fall between steps.)"""
        now, checker, nid = self.now, self.checker, node.id
        core = node.core
        assert core is not None
        first_seq = self.seq
        late = None
        if ready.persist is not None:
            if self.persist_rng is None:
                node.durable = ready.persist
            else:
                late = ready.persist  # a write-behind shell: written after the step's messages left
        if ready.log_ops:
            disk, epoch = node.disk, core.epoch
            snapshot_ops = False
            for op in ready.log_ops:
                if type(op) is AppendBatches:
                    for batch in op.batches:
                        checker.check_append(nid, batch, first_seq, now)
                    disk.append(op.batches)
                    if self._splits_armed or self._removals_armed:  # KIP-853 schedules waiting for a voter change
                        for batch in op.batches:
                            ids = voters_in(batch)
                            if ids is not None:
                                self._voters_appended(node, batch.base_offset, ids)
                elif type(op) is TruncateTo:
                    checker.check_truncate(nid, op.offset, disk, epoch, first_seq, now)
                    disk.truncate_to(op.offset)
                else:
                    self._snapshot_op(node, op, first_seq)
                    snapshot_ops = True
            log = node.log
            core_end = log.end_offset if log is not None else -1  # the core's log (``_restart``)
            if disk.end_offset != core_end or (log is not None and disk.start != log.start_offset):
                raise SimulationError(
                    f"seed {self.config.seed}: node {nid}'s durable log is [{disk.start}, {disk.end_offset}) but "
                    f"its core's [{log.start_offset if log else -1}, {core_end}): Ready's log ops do not match "
                    "the core's log"
                )
            if snapshot_ops or node.installed >= 0:
                self._check_log_start(node, first_seq)
        if ready.cluster_id_adopted is not None:
            node.cluster_id = ready.cluster_id_adopted
        lines = self._lines
        check_state = checker.check_state
        seq = self.seq
        dynamic = self.dynamic
        try:
            for ev in ready.trace:
                ev["ts"] = now
                check_state(nid, ev["state"], seq, now)
                if lines is not None:
                    # The line TraceWriter.emit writes, its "seq" spliced in after the encoded "type" (the
                    # core's events start with it) instead of a copy of the dict without it.
                    data = encode_line(ev)
                    if data.startswith(_EVENT_HEAD):
                        data = data[_EVENT_HEAD_LEN:]
                    else:  # a core (subclass) that builds its events otherwise: without "type", as emit does
                        del ev["type"]
                        data = encode_line(ev)[1:]
                    lines += b'{"type":"event","seq":%d,%b\n' % (seq, data)
                seq += 1
                if ev["event"] == "BecomeLeader":
                    if self._figure8 is not None and not self._figure8.done:
                        self._figure8_leader(self._figure8, nid, ev["state"]["epoch"])
                    split = self._split
                    if split is not None and not split.done and split.new is None and nid != split.old:
                        self._split_leader(split, nid)
                    # After its line: the trace shows the election the offline checkers judge too.
                    latest = node.snaps.latest()
                    checker.check_leader_completeness(nid, ev["state"]["epoch"], node.disk, seq - 1, now,
                                                      latest.end_offset if latest is not None else 0)
                    voters = ev["state"].get("voters")
                    if voters is not None and ev["state"].get("kraftVersion", 0) >= 1:  # KIP-853: a majority of the
                        # voter set in force on the new leader
                        checker.check_leader_quorum(nid, ev["state"]["epoch"], frozenset(voters), seq - 1, now)
                elif dynamic and "snapshotId" in ev and ev["event"] == "HandleFetchSnapshotResponse":
                    # KIP-853: the install emptied the log, so the voter set it reports is the snapshot's (Kafka
                    # reloads it in that step: handleFetchSnapshotResponse -> partitionState.updateState)
                    state = ev["state"]
                    checker.check_install_config(nid, ev["snapshotId"]["endOffset"], state.get("voters", ()),
                                                 state["epoch"], seq - 1, now)
        finally:
            self.seq = seq
        hw = core.high_watermark
        if hw != node.hw:
            checker.note_high_watermark(nid, node.hw, hw, node.disk, core.epoch, seq - 1, now)
            node.hw = hw
            if node.brokers is not None:
                self._apply_committed_records(node)
            if node.sm is not None:
                self._apply_state_machine(node)
        if len(node.disk.configs) > 1:  # KIP-853: at most one VotersRecord above the committed prefix
            checker.check_configs(nid, node.disk, core.epoch, seq - 1, now)
        for out in ready.send:
            self._send_request(node, out)
        for rep in ready.replies:
            self._send_response(node, rep)
        if late is not None:
            lo, hi = self.config.persist_after_send_ms or (0, 0)
            assert self.persist_rng is not None
            self._push(now + self.persist_rng.randint(lo, hi), _PERSIST, nid, (node.incarnation, late))
        deadline = ready.next_deadline_ms
        if deadline is None:
            node.tick_at = None
        else:
            at = node.global_time(deadline)
            jitter = self._jitter_span
            if jitter:
                # rng.randrange(jitter + 1), inlined (see ``_fate``)
                bits = self._jitter_bits
                r = self._getrandbits(bits)
                while r >= jitter:
                    r = self._getrandbits(bits)
                at += r
            if at <= now:
                at = now + 1  # a deadline already due right after a step: never spin at one instant
            if at != node.tick_at:
                node.tick_at = at
                self._order += 1
                heappush(self._heap, (at, self._order, _TICK, nid, node.incarnation))
        if node.brokers is not None:
            self._sync_controller(node)
        if lines is not None and len(lines) > _FLUSH_BYTES:
            self._flush_lines()

    # ------------------------------------------------------------------------------------ network

    def _fate(self, src: int, dst: int) -> tuple[list[int], str | None]:
        """Arrival delays of the copies of one message (empty: lost), and why it was lost."""
        # The draws, in order, are the seed's: randrange(lo, hi + 1) is exactly randint(lo, hi). The delay's
        # randrange is inlined as CPython's Random._randbelow_with_getrandbits: the same getrandbits calls,
        # without randrange's argument checks, which cost more than the draw (a test compares the two).
        net, rng = self.net, self.rng
        link = (src, dst)
        if self._blocked and self._blocked.get(link):
            return [], "partitioned"
        loss = net.loss
        for extra in self._extra_loss:
            loss = 1 - (1 - loss) * (1 - extra)
        random_ = rng.random
        if loss and random_() < loss:
            return [], "lost"
        copies = 2 if net.duplicate and random_() < net.duplicate else 1
        delays = []
        now, clear, lo = self.now, self._link_clear, net.min_delay_ms
        span, bits, getrandbits = self._delay_span, self._delay_bits, self._getrandbits
        for _ in range(copies):
            d = getrandbits(bits)
            while d >= span:
                d = getrandbits(bits)
            d += lo
            if net.reorder and random_() < net.reorder:
                # Overtaken: this one copy leaves the link's FIFO order and arrives late.
                delays.append(d + rng.randrange(0, net.reorder_max_ms + 1))
                continue
            # Like one TCP connection per direction: a message never overtakes an earlier one on its link.
            arrive = now + d
            last = clear.get(link, 0)
            if last > arrive:
                arrive = last
            clear[link] = arrive
            delays.append(arrive - now)
        return delays, None

    def _send_request(self, node: _Node, out: OutboundRequest) -> None:
        src, dst, req = node.id, out.dest_id, out.request
        if node.installed >= 0 and type(req) is FetchRequest:
            assert node.core is not None
            self.checker.check_after_install(src, node.installed, 0, 0, node.core.epoch, self.seq, self.now,
                                             fetch_offset=req.fetch_offset)
        self._corr += 1
        corr = self._corr
        api = api_name(req)
        node.inflight[corr] = (dst, api, out.request_id)
        target = self.nodes.get(dst)
        if target is None and out.address is not None and out.address in self.addresses:
            dst = self.addresses[out.address]  # KIP-853: a node the core knows only by its endpoint
            target = self.nodes[dst]
        if target is None and (dst != self.config.foreign_id or self.foreign_rng is None):
            raise SimulationError(f"node {src} sent {api} to unknown node {dst}")
        delays: list[int]
        why: str | None
        now, heap = self.now, self._heap
        if target is None:  # a core that took the foreign node for one of its own: nothing comes back
            delays, why = [], "refused: another cluster's node"
            timeout_at = now + self.config.request_timeout_ms
        elif target.core is None:
            delays, why = [], "refused: destination down"
            timeout_at = now + self.net.min_delay_ms + 1
        else:
            delays, why = self._fate(src, dst)
            wait = req.max_wait_ms if type(req) is FetchRequest else 0
            timeout_at = now + self.config.request_timeout_ms + wait
        self._order += 1
        heappush(heap, (timeout_at, self._order, _TIMEOUT, src, (corr, node.incarnation)))
        msg: bytes | None = None
        bodies = self._bodies
        if bodies is not None:
            msg = bodies.request(req, corr, src, dst)
            self._message_event(src, b"Send", msg, why)
        else:
            self.seq += 1
        dup = False
        for d in delays:
            assert target is not None
            self._order += 1
            heappush(heap, (now + d, self._order, _REQUEST, dst, (src, corr, req, target.incarnation, dup, msg)))
            dup = True

    def _answer_probe(self, node: _Node, src: int, corr: int) -> None:
        """KIP-853: the leader's ApiVersions probe reached a running joining voter. A node's shell answers ApiVersions,
        not its core (reference/net.py), so the simulator does: the supported kraft.version range (0, 1), over the
        network like any answer. A crashed or unreachable node never answers (the leader's request times out)."""
        resp = ApiVersionsResponse(Errors.NONE, (0, 1))
        delays, why = self._fate(node.id, src)
        msg: bytes | None = None
        if self._bodies is not None:
            msg = self._bodies.response(resp, corr, node.id, src)
            self._message_event(node.id, b"Send", msg, why)
        else:
            self.seq += 1
        dup = False
        for d in delays:
            self._push(self.now + d, _RESPONSE, src, (node.id, corr, resp, dup, msg))
            dup = True

    def _send_response(self, node: _Node, rep: Reply) -> None:
        token = rep.reply_to
        assert isinstance(token, tuple), f"reply_to {token!r} is not a simulator token"
        dst, corr, candidate = token
        resp = rep.response
        if self.dynamic and dst == self.config.admin_id:
            self._admin_answer(node, corr, resp)
            return
        if type(resp) is VoteResponse and resp.vote_granted and candidate != -1:
            self.checker.check_vote_granted(node.id, resp.leader_epoch, candidate, self.seq, self.now)
            armed = node.vote_armed
            if armed is not None:
                # VoteCrash: the grant is on its way (sent below); the process dies before anything else runs.
                node.vote_armed = None
                self._push(self.now, _CRASH, node.id, node.incarnation)
                self._push(self.now + armed.down_ms, _RESTART, node.id, node.incarnation + 1)
        if corr < 0:  # the foreign sender's: judged by ``_foreign_request``, not sent over the network
            self._foreign_reply = resp
            if self._bodies is not None:
                self._message_event(node.id, b"Send", self._bodies.response(resp, -corr, node.id, dst), None)
            else:
                self.seq += 1
            return
        delays, why = self._fate(node.id, dst)
        msg: bytes | None = None
        bodies = self._bodies
        if bodies is not None:
            msg = bodies.response(resp, corr, node.id, dst)
            self._message_event(node.id, b"Send", msg, why)
        else:
            self.seq += 1
        now, dup = self.now, False
        for d in delays:
            self._order += 1
            heappush(self._heap, (now + d, self._order, _RESPONSE, dst, (node.id, corr, resp, dup, msg)))
            dup = True

    def _message_event(self, nid: int, event: bytes, msg: bytes, note: str | None) -> None:
        """The line of {"ts": now, "node": nid, "event": event, "msg": msg, "note": note (when given)},
        assembled from the message's encoding and the note's: ints and a handful of constant ASCII
        strings around them."""
        lines = self._lines
        assert lines is not None
        tail = _NOTES.get(note)
        if tail is None:
            tail = _NOTES[note] = b"}\n" if note is None else b',"note":%b}\n' % encode_line(note)
        seq = self.seq
        lines += b'{"type":"event","seq":%d,"ts":%d,"node":%d,"event":"%b","msg":%b%b' % (
            seq, self.now, nid, event, msg, tail
        )
        self.seq = seq + 1

    def _deliver_request(self, node: _Node, payload: tuple[int, int, Request, int, bool, bytes | None]) -> None:
        src, corr, req, incarnation, dup, msg = payload
        if node.core is None or node.incarnation != incarnation:
            return  # the connection died with the old process: the sender times out
        if msg is not None:  # tracing: the very msg of the Send event
            self._message_event(node.id, b"Receive", msg, "duplicate" if dup else None)
        else:
            self.seq += 1
        if type(req) is ApiVersionsRequest:  # KIP-853: the shell answers it, not the core
            self._answer_probe(node, src, corr)
            return
        # The token carries the candidate so a granted vote can be checked against the vote's real target;
        # -1 for a pre-vote (KIP-996), whose grant binds nothing and is no vote for VoteOnce.
        candidate = (-1 if req.pre_vote else req.candidate_id) if type(req) is VoteRequest else src
        self._step(node, RequestReceived(sender_id=src, reply_to=(src, corr, candidate), request=req))
        run = self._figure8
        if run is not None and run.old_epoch >= 0 and not run.done and node.id == run.old and type(req) is FetchRequest:
            self._figure8_fetch(run, node, req)

    def _deliver_response(self, node: _Node, payload: tuple[int, int, Response, bool, bytes | None]) -> None:
        src, corr, resp, dup, msg = payload
        pending = node.inflight.pop(corr, None) if node.core is not None else None
        if pending is None:
            return  # a late, duplicate or orphaned response: the client has no such correlation id
        if msg is not None:  # tracing: the very msg of the Send event
            self._message_event(node.id, b"Receive", msg, "duplicate" if dup else None)
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

    # ------------------------------------------------------------------------------------ voter changes (KIP-853)

    def _current_leader(self) -> _Node | None:
        """The running node that leads the highest epoch (what an admin client finds by asking around)."""
        best: _Node | None = None
        best_epoch = -1
        for n in self.nodes.values():
            core = n.core
            if core is not None and core.epoch > best_epoch and core.status().role == "Leader":
                best, best_epoch = n, core.epoch
        return best

    def _voter_change(self, ch: ScheduledVoterChange, attempt: int) -> None:
        """The admin client sends one AddRaftVoter/RemoveRaftVoter to the leader (Kafka's kafka-metadata-quorum
        add-controller / remove-controller), then sets off the change's fault. No leader now: it asks again 500 ms
        later, up to 10 times."""
        leader = self._current_leader()
        if leader is None or leader.core is None:
            if attempt < 10:
                self._push(self.now + 500, _ADMIN, ch, attempt + 1)
            return
        core = leader.core
        voters = core.voter_set().ids()
        rng = self.admin_rng
        req: Request
        if ch.op == "add":
            target = ch.node
            if target < 0 or target in voters or target not in self.nodes:
                cands = sorted(i for i, n in self.nodes.items() if i not in voters and n.core is not None)
                if not cands:
                    return
                target = rng.choice(cands)
            req = AddRaftVoterRequest(core.cluster_id, target, directory_id_of(target), (endpoint_of(target),),
                                      self.config.request_timeout_ms)
        else:
            target = ch.node
            if target == -1:
                target = leader.id
            elif target < 0 or target not in voters:
                others = sorted(voters - {leader.id})
                if not others:
                    return
                target = rng.choice(others)
            req = RemoveRaftVoterRequest(core.cluster_id, target, directory_id_of(target))
        self._admin_corr += 1
        corr, me = self._admin_corr, self.config.admin_id
        self._admin_calls[corr] = (ch, leader.id, target)
        self.change_counts["changes_requested"] += 1
        if self._bodies is not None:
            self._message_event(leader.id, b"Receive", self._bodies.request(req, corr, me, leader.id), "admin")
        else:
            self.seq += 1
        self._step(leader, RequestReceived(sender_id=me, reply_to=(me, corr, me), request=req))
        at = self.now + ch.delay_ms
        victim = target if ch.fault == "crash-joiner" else leader.id if ch.fault == "crash-leader" else None
        if victim is not None:
            node = self.nodes[victim]
            if node.core is not None:
                self._push(at, _CRASH, victim, node.incarnation)
                self._push(at + ch.down_ms, _RESTART, victim, node.incarnation + 1)
        elif ch.fault == "partition":
            rest = tuple(i for i in self.fault_ids if i != leader.id)
            self._push(at, _FAULT_START, Partition(at, ch.down_ms, (rest,)))

    def _admin_answer(self, node: _Node, corr: int, resp: Response) -> None:
        """The leader answered the admin client: counted by its error (NONE: the change committed)."""
        if self._bodies is not None:
            self._message_event(node.id, b"Send", self._bodies.response(resp, corr, node.id, self.config.admin_id),
                                None)
        else:
            self.seq += 1
        call = self._admin_calls.pop(corr, None)
        if call is None or type(resp) not in (AddRaftVoterResponse, RemoveRaftVoterResponse):
            return
        ch, leader, target = call
        error = getattr(resp, "error", None)
        if error is Errors.NONE:
            self.change_counts["changes_committed"] += 1
            if ch.op == "remove" and target == leader:
                self.change_counts["leader_removals"] += 1
        elif error is Errors.REQUEST_TIMED_OUT:
            self.change_counts["changes_timed_out"] += 1
        else:
            self.change_counts["changes_refused"] += 1

    # ------------------------------------------------------------------------------------ faults

    def _fault_start(self, f: Fault) -> None:
        if isinstance(f, VoteCrash):
            node = self.nodes[f.node]
            if node.core is not None:
                node.vote_armed = f  # dies the instant its next vote grant has left it
            return
        if isinstance(f, Figure8):
            self._figure8_start(f)
            return
        if isinstance(f, ChangeSplit):
            self._splits_armed.append(f)  # set off by the next voter change that fits (``_voters_appended``)
            return
        if isinstance(f, RemovalSplit):
            self._removals_armed.append(f)
            return
        if isinstance(f, IsolateLeader):
            leader = self._current_leader()
            if leader is None:
                return
            f = Partition(self.now, f.duration_ms, (tuple(i for i in self.fault_ids if i != leader.id),))
            self._push(self.now, _FAULT_START, f)  # the partition it is, ended like any other
            return
        if isinstance(f, SnapshotCrash):
            node = self.nodes[f.node]
            if node.core is not None and self.snapshot_bytes:
                node.armed = f  # dies in the middle of its next snapshot write
            return
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
        for pair in _blocked_pairs(f, self.fault_ids):
            self._blocked[pair] = self._blocked.get(pair, 0) + 1
        if isinstance(f, Lossy):
            self._extra_loss.append(f.loss)
        self._push(self.now + f.duration_ms, _FAULT_END, f)

    def _fault_end(self, f: Fault) -> None:
        if isinstance(f, Figure8):  # the schedule's last moment: the second leader's cut ends if it still runs
            run = self._figure8
            if run is not None and run.fault is f and not run.done:
                self._figure8_finish(run)
            return
        if isinstance(f, ChangeSplit):  # the end of the cut under way (an earlier phase's end is stale)
            split = self._split
            if split is not None and split.fault is f and not split.done and split.ends_at == self.now:
                split.done = True
                self._cut_groups(split.groups, -1)
            return
        for pair in _blocked_pairs(f, self.fault_ids):
            self._blocked[pair] -= 1
        if isinstance(f, Lossy):
            self._extra_loss.remove(f.loss)

    # ------------------------------------------------------------------------------------ Raft's Figure 8

    def _cut_off(self, node_id: int, by: int) -> None:
        """Cut ``node_id`` off from every other voter (``by`` 1) or take that cut back (``by`` -1), at once."""
        self._cut_groups(self._two_sides((node_id,)), by)

    def _figure8_start(self, f: Figure8) -> None:
        """``Figure8``'s first move: the leader of the moment cut off for ``duration_ms`` (one schedule at a time)."""
        leader = self._current_leader()
        if leader is None or (self._figure8 is not None and not self._figure8.done):
            return
        self._figure8 = _Figure8Run(f, leader.id)
        rest = (tuple(i for i in self.fault_ids if i != leader.id),)
        self._fault_start(Partition(self.now, f.duration_ms, rest))
        self._push(self.now + 2 * f.duration_ms, _FAULT_END, f)

    def _figure8_leader(self, run: _Figure8Run, nid: int, epoch: int) -> None:
        """A node became leader (its step's messages have not left yet): the first other leader (until the schedule's
        end) is cut off now; the first leader leading again with the other one cut off is noted."""
        if run.new is None and nid != run.old:
            run.new = nid
            self._cut_off(nid, 1)
        elif run.new is not None and nid == run.old:
            run.old_epoch = epoch

    def _figure8_fetch(self, run: _Figure8Run, node: _Node, req: FetchRequest) -> None:
        """The first leader, leading again, has answered a Fetch (the answer has left): when the fetching voter holds
        an entry of an older epoch at an offset where the cut-off leader's log differs, the leader is cut off and the
        other one comes back."""
        core = node.core
        new = self.nodes[run.new] if run.new is not None else None
        if (core is None or new is None or core.epoch != run.old_epoch or core.leader_id != node.id
                or req.replica_id not in self.fault_ids):
            return
        below = req.fetch_offset - 1
        mine = node.disk.batch_at(below) if below >= 0 else None
        if mine is None or mine.partition_leader_epoch >= run.old_epoch:
            return
        theirs = new.disk.batch_at(below)
        if theirs is not None and theirs.partition_leader_epoch == mine.partition_leader_epoch:
            return
        self._figure8_finish(run)
        self.figure8_moments += 1
        self._fault_start(Partition(self.now, run.fault.duration_ms, (tuple(i for i in self.fault_ids
                                                                             if i != node.id),)))

    def _figure8_finish(self, run: _Figure8Run) -> None:
        run.done = True
        if run.new is not None:
            self._cut_off(run.new, -1)

    # ------------------------------------------------------------------------------------ KIP-853 split schedules

    def _cut_groups(self, groups: tuple[tuple[int, ...], ...], by: int) -> None:
        """Cut the links between ``groups`` (``by`` 1) or take that cut back (``by`` -1), at once."""
        for pair in _blocked_pairs(Partition(self.now, 0, groups), self.fault_ids):
            self._blocked[pair] = self._blocked.get(pair, 0) + by

    def _two_sides(self, side: Sequence[int]) -> tuple[tuple[int, ...], ...]:
        """A partition's groups: ``side`` and every other node faults can hit."""
        return tuple(sorted(side)), tuple(i for i in self.fault_ids if i not in side)

    def _voters_appended(self, node: _Node, base: int, voters: frozenset[int]) -> None:
        """A VotersRecord (``voters``) was appended at ``base`` by ``node`` in the step being applied (its messages
        have not left yet): the leader's own append may set off an armed ``ChangeSplit`` or ``RemovalSplit``."""
        core = node.core
        if core is None or core.leader_id != node.id or not core.status().is_leader:
            return  # a follower's copy
        before = core.voters_at(base - 1)[1]
        if before is None:
            return
        old, me = before.ids(), node.id
        split = self._split
        if (self._splits_armed and me in voters and voters != old and len(old) >= 4 and len(old) % 2 == 0
                and (split is None or split.done)):
            # Two single-server changes from an odd set always have overlapping majorities; from an even one they
            # need not. A leader removed by its change never stands again: no use for the schedule.
            f = self._splits_armed.pop(0)
            groups = self._two_sides((me, *(voters - old)))
            self._split = _SplitRun(f, me, voters, groups, self.now + f.duration_ms)
            self._cut_groups(groups, 1)  # before this step's messages leave: only its side gets the record
            self._push(self.now + f.duration_ms, _FAULT_END, f)
            self.split_counts["change_splits"] += 1
        elif self._removals_armed and me in voters and len(voters) >= 4 and len(voters) % 2 == 0:
            # an even set: the admin client asks this leader to remove itself (which leaves an odd one)
            at = self.now + self._removals_armed[0].ask_ms
            self._push(at, _ADMIN, ScheduledVoterChange(at, "remove", -1), 0)
        elif self._removals_armed and me not in voters and len(voters) >= 3 and len(voters) % 2 == 1:
            # With an even remaining set the other side would be no majority of it.
            f2 = self._removals_armed.pop(0)
            remaining = sorted(voters)
            lagging = sorted(self.split_rng.sample(remaining, len(remaining) // 2))
            for i in lagging:  # after this step's messages (events at this instant run after the step)
                n = self.nodes[i]
                if n.core is not None:
                    self._push(self.now, _CRASH, i, n.incarnation)
                    self._push(self.now + f2.lag_ms, _RESTART, i, n.incarnation + 1)
            self._push(self.now, _FAULT_START, Partition(self.now, f2.duration_ms, self._two_sides((me, *lagging))))
            self.split_counts["removal_splits"] += 1

    def _split_leader(self, run: _SplitRun, nid: int) -> None:
        """A ``ChangeSplit``'s next leader (its step's messages have not left yet): one voter of the change's set other
        than both leaders leaves its side for the old leader's, now, for the schedule's duration."""
        self._cut_groups(run.groups, -1)
        run.new = nid
        choices = sorted(run.voters - set(run.groups[0]) - {nid})
        if not choices:
            run.done = True
            return
        moved = self.split_rng.choice(choices)
        run.groups = self._two_sides((*run.groups[0], moved))
        run.ends_at = self.now + run.fault.duration_ms
        self._cut_groups(run.groups, 1)
        self._push(run.ends_at, _FAULT_END, run.fault)
        # the admin client, finding the old leader unreachable, asks the new one to remove it
        at = self.now + run.fault.ask_ms
        self._push(at, _ADMIN, ScheduledVoterChange(at, "remove", run.old), 0)
        self.split_counts["change_split_leaders"] += 1

    def _crash(self, node: _Node) -> None:
        """Volatile state is gone; ``durable``, ``disk`` and ``cluster_id`` stay."""
        node.core = None
        node.inflight.clear()
        node.tick_at = None
        node.incarnation += 1
        # The registry and the controller are memory too (rebuilt from the log after the restart);
        # waiting brokers get no answer and time out, as from a dead process.
        node.brokers = None
        node.log = None
        node.fence_at = None
        node.sm = None
        node.trigger = None
        node.snap_timer_at = None
        node.snap_wanted = False
        node.armed = None
        node.vote_armed = None

    def _restart(self, node: _Node, incarnation: int) -> None:
        if node.core is not None or node.incarnation != incarnation:
            return
        cfg = dataclasses.replace(node.cfg, cluster_id=node.cluster_id)
        # VoteOnce across the restart: what the node reads back still holds the vote it granted in that epoch.
        durable = node.durable
        self.checker.check_restart_vote(node.id, durable.leader_epoch, durable.leader_id, durable.voted_id, self.seq,
                                        self.now, "read back")
        rng = random.Random(self.rng.getrandbits(64))
        if not self.snapshot_bytes and not node.snaps.frozen:
            log = Log(node.disk.batches)
            try:
                core, ready = self.core_class.restart(cfg, node.durable, log, rng, node.local(self.now))
            except Exception as exc:
                raise self._from_core(node, exc) from exc
        else:
            # KIP-630: partial snapshot files go (never read); the log starts at the snapshot at its start; the
            # core learns every frozen snapshot, and the state machine starts from the latest.
            self.snap_counts["partials_dropped"] += len(node.snaps.recover())
            start = node.snaps.at(node.disk.start) if node.disk.start > 0 else None
            if node.disk.start > 0 and start is None:
                raise self.checker.fail("LogStartCoveredBySnapshot", node.id, node.durable.leader_epoch, self.seq,
                                        self.now, f"restart: the log starts at {node.disk.start} but no snapshot "
                                        "ends there")
            log = Log(node.disk.batches, start=start)
            # KIP-853: the snapshot at the log start gives the voter set and kraft.version below the log's records.
            start_loaded = (self._load_snapshot(node, start, "loaded at restart")
                            if self.dynamic and start is not None else None)
            try:
                core, ready = self.core_class.restart(cfg, node.durable, log, rng, node.local(self.now),
                                                      snapshots=node.snaps, snapshot_ids=node.snaps.ids(),
                                                      start_snapshot=start_loaded)
            except Exception as exc:
                raise self._from_core(node, exc) from exc
        node.core, node.log = core, log
        # A restarted core's high watermark starts at its log start; its restart step may already move it (Kafka's
        # initialize: the only voter of its set is elected at once and commits), which ``_apply`` then notes.
        node.hw = core.log.start_offset
        if self.fleet is not None:
            node.brokers = BrokerDriver(
                self.config.broker_session_timeout_ms, cfg.is_voter, registry=self.registry_class())
        if self.snapshot_bytes:
            node.sm = SimStateMachine()
            node.trigger = SnapshotTrigger(self.snapshot_bytes, self.snapshot_interval_ms,
                                           last_snapshot_ms=node.local(self.now))
            latest = node.snaps.latest()
            if latest is not None and not any(type(op) is InstallSnapshot for op in ready.log_ops):
                self._load_snapshot(node, latest, "loaded at restart")
        self.checker.restarted(node.id)
        self._apply(node, ready)
        if node.core is core:  # and the state it resumes in
            state = core.state_snapshot()
            self.checker.check_restart_vote(node.id, state["epoch"], state["leaderId"], state["votedId"], self.seq - 1,
                                            self.now, "resumed in")

    # ------------------------------------------------------------------------------------ snapshots (KIP-630)

    def _snapshot_op(self, node: _Node, op: Any, seq: int) -> None:
        """Apply one of the core's snapshot log ops to the node's durable state."""
        snaps, disk, core, counts = node.snaps, node.disk, node.core, self.snap_counts
        assert core is not None
        kind = type(op)
        if kind is AdvanceLogStart:
            disk.advance_start(op.offset)
            counts["cleanings"] += 1
            counts["max_log_start"] = max(counts["max_log_start"], op.offset)
        elif kind is WriteSnapshotChunk:
            snaps.write_chunk(op.snapshot_id, op.position, op.data)
        elif kind is InstallSnapshot:
            sid = op.snapshot_id
            downloaded = sid in snaps.partial
            if downloaded:
                snaps.freeze(sid)
                counts["installs"] += 1
                node.installed = max(node.installed, sid.end_offset)
            elif sid not in snaps.frozen:
                raise SimulationError(f"seed {self.config.seed}: node {node.id} was told to install snapshot {sid}, "
                                      "which it neither downloaded nor has")
            disk.reset_to(sid.end_offset)
            counts["max_log_start"] = max(counts["max_log_start"], sid.end_offset)
            log = core.log
            self.checker.check_install(node.id, sid, disk, log.start_offset, log.end_offset, core.epoch, seq, self.now)
            loaded = self._load_snapshot(node, sid, "installed" if downloaded else "loaded at restart")
            if downloaded and node.id in self.joiner_set:
                counts["joiner_installs"] += 1
            self._push(self.now, _SNAPSHOT, node.id, (node.incarnation, "loaded", loaded))
        elif kind is AbortSnapshotDownload:
            snaps.abort(op.snapshot_id)
            counts["downloads_aborted"] += 1
        elif kind is DeleteSnapshot:
            snaps.delete(op.snapshot_id)
        else:
            raise SimulationError(f"seed {self.config.seed}: node {node.id}: unknown log op {op!r}")

    def _check_log_start(self, node: _Node, seq: int) -> None:
        """After log ops: the log starts within the node's latest snapshot, and never below one it installed."""
        disk, core = node.disk, node.core
        assert core is not None
        latest = node.snaps.latest()
        self.checker.check_log_start(node.id, disk, latest.end_offset if latest is not None else 0, core.epoch, seq,
                                     self.now)
        if node.installed >= 0:
            self.checker.check_after_install(node.id, node.installed, disk.start, disk.end_offset, core.epoch, seq,
                                             self.now)

    def _load_snapshot(self, node: _Node, sid: SnapshotId, how: str) -> SnapshotLoaded:
        """The state machine (and the broker registry) from a frozen snapshot; returns what the core is told of it
        (``SnapshotLoaded``): the cluster id it holds and, KIP-853, its header's kraft.version and voter set."""
        epoch = node.core.epoch if node.core is not None else node.durable.leader_epoch
        try:
            digest, count, records, kraft_version, voters = statemachine.decode(sid, node.snaps.frozen[sid])
        except Exception as exc:  # a corrupt or foreign file: never a partial one, those are never read
            raise self.checker.fail("SnapshotAgreement", node.id, epoch, self.seq, self.now,
                                    f"snapshot {sid.end_offset}-{sid.epoch} {how} cannot be read: {exc}") from exc
        self.checker.check_snapshot(node.id, sid, digest, count, epoch, self.seq, self.now)
        if self.dynamic:
            self.checker.check_snapshot_config(node.id, sid, None if voters is None else voters.ids(), epoch,
                                               self.seq, self.now, how)
        if node.sm is not None:
            node.sm.load(sid.end_offset, digest, count)
        if node.brokers is not None:
            try:
                node.brokers.load_snapshot(sid.end_offset, records)
            except Exception as exc:
                raise SimulationError(f"seed {self.config.seed}: node {node.id}'s registry refused snapshot "
                                      f"{sid}: {exc}") from exc
        if node.trigger is not None:
            node.trigger.snapshotted(sid.end_offset, node.local(self.now))
        cluster_id = next((r.value.decode() for r in records if r.key == CLUSTER_ID_KEY and r.value), None)
        return SnapshotLoaded(sid, cluster_id, kraft_version=kraft_version, voters=voters)

    def _check_voters_after_load(self, node: _Node, loaded: SnapshotLoaded) -> None:
        """KIP-853: after ``SnapshotLoaded`` the node's voter set in force is the latest VotersRecord of its log after
        the snapshot, else the snapshot's (``KRaftControlRecordStateMachine.maybeLoadSnapshot``): a replica that
        caught up through FetchSnapshot ends with the voter set the committed log had at the snapshot's end."""
        core, disk = node.core, node.disk
        assert core is not None
        if loaded.snapshot_id.end_offset != disk.start or loaded.voters is None:
            return  # a load that is not the log start's (the log moved on meanwhile): nothing to compare
        want = disk.configs[-1][1] if disk.configs else loaded.voters.ids()
        have = core.voter_set().ids()
        if have != want:
            sid = loaded.snapshot_id
            raise self.checker.fail(SNAPSHOT_CONFIG_AGREEMENT, node.id, core.epoch, self.seq - 1, self.now,
                                    voters_after_load(sid.end_offset, sid.epoch, sorted(have), sorted(want)))

    def _apply_state_machine(self, node: _Node) -> None:
        """The high watermark moved: apply the newly committed whole batches; snapshot when the trigger says so."""
        sm, trigger = node.sm, node.trigger
        assert sm is not None and trigger is not None
        done = sm.apply(node.disk.batches_from(sm.applied), node.hw)
        if done:
            trigger.committed(sum(statemachine.approx_size(b) for b in done), sm.applied, True)
        self._schedule_snapshot(node)

    def _schedule_snapshot(self, node: _Node) -> None:
        trigger = node.trigger
        assert trigger is not None
        if trigger.due(node.local(self.now)) is not None:
            if not node.snap_wanted:
                node.snap_wanted = True
                self._push(self.now, _SNAPSHOT, node.id, (node.incarnation, "take", None))
            return
        check = trigger.next_check_ms()
        if check is not None:
            at = max(node.global_time(check), self.now + 1)
            if at != node.snap_timer_at:
                node.snap_timer_at = at
                self._push(at, _SNAPSHOT, node.id, (node.incarnation, "timer", at))

    def _snapshot_event(self, node: _Node, payload: tuple[int, str, Any]) -> None:
        incarnation, kind, extra = payload
        if node.core is None or node.incarnation != incarnation:
            return
        if kind == "loaded":
            self._step(node, extra)
            if self.dynamic and node.core is not None:
                self._check_voters_after_load(node, extra)
        elif kind == "take":
            node.snap_wanted = False
            self._take_snapshot(node)
        elif kind == "timer" and node.snap_timer_at == extra:
            node.snap_timer_at = None
            self._take_snapshot(node)

    def _take_snapshot(self, node: _Node) -> None:
        """CreateSnapshot as the node shell does it: the state machine at a committed batch boundary, written and
        frozen first, then ``SnapshotWritten`` to the core; then the log is cleaned when retention says so."""
        core, sm, trigger = node.core, node.sm, node.trigger
        assert core is not None and sm is not None and trigger is not None
        local = node.local(self.now)
        end = sm.applied
        if trigger.due(local) is None:
            self._schedule_snapshot(node)
            return
        if node.brokers is not None and node.brokers.applied_offset != end:
            return  # the registry stands elsewhere (inside a batch): the next commit asks again
        latest = core.latest_snapshot_id
        if latest is not None and end <= latest.end_offset:
            trigger.snapshotted(latest.end_offset, local)
            return
        try:
            sid = core.snapshot_id_at(end)
        except ValueError:
            return
        records: list[tuple[bytes | None, bytes]] = [sm.record()]
        if node.brokers is not None:
            records += node.brokers.snapshot_records()
        elif core.cluster_id is not None:
            records.append((CLUSTER_ID_KEY, core.cluster_id.encode()))
        kraft_version, voters = 0, None
        if self.dynamic:
            # KIP-853: the header batch carries kraft.version and the voter set in force at the snapshot's last offset
            # (Kafka's KafkaRaftClient.createSnapshot: kraftVersionAtOffset, voterSetAtOffset), as the node writes it.
            kraft_version, voters = core.voters_at(sid.end_offset - 1)
        data = statemachine.encode(sid, records, local, kraft_version=kraft_version, voters=voters)
        armed = node.armed
        if armed is not None:
            # SnapshotCrash: the process dies in the middle of the write (torn: before the rename).
            node.armed = None
            self.snap_counts["snapshot_crashes"] += 1
            if armed.torn:
                node.snaps.partial[sid] = bytearray(data[: self.snap_rng.randrange(1, len(data))])
                self.snap_counts["torn_writes"] += 1
            else:
                node.snaps.frozen[sid] = data
            self._crash(node)
            self._push(self.now + armed.down_ms, _RESTART, node.id, node.incarnation)
            return
        node.snaps.frozen[sid] = data
        hw = core.high_watermark
        self._step(node, SnapshotWritten(sid))
        # After its line (the core's CreateSnapshot): the trace shows the snapshot the offline checkers judge too.
        self.checker.check_snapshot(node.id, sid, sm.digest, sm.count, core.epoch, self.seq - 1, self.now, hw=hw)
        if self.dynamic:
            self.checker.check_snapshot_config(node.id, sid, None if voters is None else voters.ids(), core.epoch,
                                               self.seq - 1, self.now)
        self.snap_counts["snapshots"] += 1
        trigger.snapshotted(end, local)
        if node.core is not None:
            self._maybe_clean(node)

    def _maybe_clean(self, node: _Node) -> None:
        """Retention (a stand-in for metadata.max.retention.bytes): once more than ``retention_bytes`` of the log
        lie below the latest snapshot, the log may start there."""
        core = node.core
        assert core is not None
        latest = core.latest_snapshot_id
        disk = node.disk
        if latest is None or latest.end_offset <= disk.start:
            return
        below = 0
        for batch in disk.batches:
            if batch.last_offset >= latest.end_offset:
                break
            below += statemachine.approx_size(batch)
        if below > self.retention_bytes:
            self._step(node, CleanLogTo(latest.end_offset))

    # ------------------------------------------------------------------------------------ client

    def _next_write_gap(self) -> int:
        return max(1, round(self.rng.expovariate(self.config.write_rate / 1000)))

    def _client_write(self) -> None:
        """A client writes 1-3 records to a leader: the current one (the highest-epoch live one), or, while a deposed
        leader still believes it leads (cut off, before its check-quorum timeout), either of them, half the time each
        (a client that has not heard of the new leader yet). A deposed leader's writes are never committed: its log
        grows longer than the new leader's in its older epoch, which the election restriction must see (KIP-595 "Vote
        Request Handling": the last epoch first, then the end offset) and followers must truncate."""
        leader: _Node | None = None
        leader_epoch = -1
        stale: _Node | None = None
        for node in self.nodes.values():
            core = node.core
            if core is not None and core.leader_id == node.id:  # leading or resigned: ask for the status
                status = core.status()
                if status.is_leader:
                    if status.epoch > leader_epoch:
                        leader, leader_epoch, stale = node, status.epoch, leader
                    else:
                        stale = node
        if stale is not None and self.rng.random() < 0.5:  # drawn only while two nodes lead: seeds stay otherwise
            leader = stale
        if leader is None:
            self.writes_refused += 1
        else:
            count = self.rng.randint(1, 3)
            values = tuple(f"seed-{self.config.seed}/write-{self._writes}/{i}".encode() for i in range(count))
            self._writes += 1
            assert leader.core is not None
            try:
                ready = leader.core.step(ClientWrite(values), leader.local(self.now))
            except Exception as exc:
                raise self._from_core(leader, exc) from exc
            result = ready.client_append
            if result is not None and result.accepted:
                self.writes_accepted += 1
            else:
                self.writes_refused += 1
            self._apply(leader, ready)
        self._push(self.now + self._next_write_gap(), _WRITE, None)

    # ------------------------------------------------------------------------------------ foreign sender

    def _next_foreign_gap(self) -> int:
        assert self.foreign_rng is not None
        return max(1, round(self.foreign_rng.expovariate(self.config.foreign_rate / 1000)))

    def _foreign_request(self) -> None:
        """A node of another cluster sends one request, with its cluster id, to a running voter that knows
        its own (an unformatted node accepts any id: KIP-595 "Cluster Bootstrapping"). The request claims a
        newer epoch and an up-to-date log, so a core that skips the cluster id check acts on it. KIP-595,
        every handler's step 1 (Kafka ``KafkaRaftClient.hasValidClusterId``): the answer is
        INCONSISTENT_CLUSTER_ID and the node's state stays as it was."""
        rng = self.foreign_rng
        assert rng is not None
        self._push(self.now + self._next_foreign_gap(), _FOREIGN, None)
        targets = [n for n in self.nodes.values()
                   if n.core is not None and n.core.config.is_voter and n.core.cluster_id is not None]
        # With snapshots, FetchSnapshot too (KIP-630: Kafka's handleFetchSnapshotRequest checks the cluster id
        # first); without, the draws of a seed's foreign requests are what they were before snapshots.
        api = rng.randrange(5 if self.snapshot_bytes else 4)
        bump = rng.randint(0, 3)
        if not targets:
            return
        node = rng.choice(targets)
        core = node.core
        assert core is not None
        status = core.status()
        me, epoch, end = self.config.foreign_id, status.epoch, status.log_end_offset
        req: Request
        if api == 0:
            req = VoteRequest(FOREIGN_CLUSTER_ID, epoch + bump + 1, me, epoch + bump, end + 100)
        elif api == 1:
            req = BeginQuorumEpochRequest(FOREIGN_CLUSTER_ID, me, epoch + bump)
        elif api == 2:
            leader = status.leader_id if status.leader_id >= 0 else me
            req = EndQuorumEpochRequest(FOREIGN_CLUSTER_ID, leader, epoch + bump, (node.id,))
        elif api == 3:
            req = FetchRequest(FOREIGN_CLUSTER_ID, me, epoch, end + 100, epoch)
        else:
            latest = core.latest_snapshot_id or SnapshotId(end, epoch)
            req = FetchSnapshotRequest(FOREIGN_CLUSTER_ID, me, epoch, latest, 0)
        self._foreign_corr += 1
        corr = self._foreign_corr
        self.foreign_requests += 1
        bodies = self._bodies
        if bodies is not None:
            self._message_event(node.id, b"Receive", bodies.request(req, corr, me, node.id), "another cluster")
        else:
            self.seq += 1
        before = core.state_snapshot()
        key = ("role", "epoch", "votedId", "leaderId")
        was = {k: before[k] for k in key}
        self._foreign_reply = None
        seq = self.seq
        ready = self._step(node, RequestReceived(sender_id=me, reply_to=(me, -corr, me), request=req))
        reply, self._foreign_reply = self._foreign_reply, None
        name = api_name(req)
        handled = next((ev for ev in ready.trace if ev["event"] == f"Handle{name}Request"), None)
        after = {k: handled["state"][k] for k in key} if handled is not None else was
        error: Errors | None = getattr(reply, "error", None)
        if after != was or error is not Errors.INCONSISTENT_CLUSTER_ID:
            answer = "no answer" if error is None else f"answered {error.name}"
            moved = ", ".join(f"{k} {was[k]} -> {after[k]}" for k in key if was[k] != after[k]) or "unchanged"
            raise self.checker.fail(
                CLUSTER_ID_ISOLATION,
                node.id,
                after["epoch"],
                seq,
                self.now,
                f"a {name} request of cluster {FOREIGN_CLUSTER_ID!r} (node {me}) reached a node of cluster "
                f"{core.cluster_id!r}: {answer} (KIP-595: INCONSISTENT_CLUSTER_ID), state {moved}",
            )

    # ------------------------------------------------------------------------------------ controller side

    def _apply_committed_records(self, node: _Node) -> None:
        """The driver applies newly committed records to the node's broker registry in log order, each
        change a ``BrokerEvent``, and releases the broker answers they complete."""
        brokers, log = node.brokers, node.log
        assert brokers is not None and log is not None
        done = brokers.commit(node.hw, sized(node.disk.batches_from), log.epoch_of)
        if done.errors:
            # A fatal fault on a controller (reference/broker_driver.py); on any node, a bug of this seed's controller.
            raise SimulationError(
                f"seed {self.config.seed}: node {node.id}'s broker registry refused committed records: "
                + "; ".join(str(e) for e in done.errors)
            )
        for change in done.changes:
            self._broker_event(node, change)
        if done.changes and brokers.active:
            self._schedule_fence(node)
        self._send_answers(node, done.answers)

    def _broker_event(self, node: _Node, change: BrokerChange) -> None:
        # KIP-631 "Register Flow": a broker comes online only once it has registered and caught up.
        latest = node.snaps.latest()
        self.checker.check_broker_event(node.id, change, node.disk, self.seq, self.now,
                                        latest.end_offset if latest is not None else 0)
        if self._lines is not None:
            data = encode_line(
                {"ts": self.now, "node": node.id, "event": "BrokerEvent", "broker": change.to_json(),
                 "note": change.record}
            )
            self._lines += b'{"type":"event","seq":%d,%b\n' % (self.seq, data[1:])  # as TraceWriter.emit
        self.seq += 1
        self.broker_events += 1

    def _sync_controller(self, node: _Node) -> None:
        """After every step: the driver says whether the node became, or stopped being, the active
        controller."""
        core, brokers = node.core, node.brokers
        assert core is not None and brokers is not None
        if not brokers.active and core.leader_id != node.id:
            return  # not leading, nothing to leave: every follower's step, the common case (no status built)
        change = brokers.leadership(core.status(), node.local(self.now))
        if change.activated:
            self._schedule_fence(node)
        elif change.deactivated:
            self._send_answers(node, change.answers)
            node.fence_at = None

    def _broker_request(self, node: _Node, payload: tuple[int, int, int, int, dict[str, Any], int]) -> None:
        """A broker's request reaches a node: the driver decides; records are appended; the answer leaves
        once they are committed (KIP-631: the broker epoch is the committed record's offset)."""
        bid, generation, corr, api, body, incarnation = payload
        if node.core is None or node.incarnation != incarnation:
            return  # the connection died with the old process: the broker times out
        brokers = node.brokers
        assert brokers is not None
        decision = brokers.decide(api, body, node.local(self.now), node.core.status())
        self._commit_decision(node, decision, (bid, generation, corr, api), api)
        if brokers.active:
            self._schedule_fence(node)

    def _commit_decision(self, node: _Node, decision: Decision, call: _BrokerCall | None, api: int) -> None:
        """Append the decision's records (one ClientWrite); answer now, or when the driver releases it."""
        brokers, log = node.brokers, node.log
        assert brokers is not None and log is not None
        result = None
        if decision.records:
            result = self._step(node, ClientWrite(tuple(r.value() for r in decision.records))).client_append
        change, answer = brokers.appended(decision, result, call, api, node.hw, log.epoch_of)
        if change.deactivated:
            self._send_answers(node, change.answers)
            node.fence_at = None
        if answer is not None:
            self._send_answers(node, (answer,))

    def _send_answers(self, node: _Node, answers: tuple[BrokerAnswer, ...]) -> None:
        """Send brokers their answers, with the node's high watermark alongside."""
        fleet = self.fleet
        assert fleet is not None
        net = self.net
        for answer in answers:
            call = answer.token
            assert isinstance(call, tuple)
            bid, generation, corr, api = call
            if fleet.lost(net.loss):
                continue
            at = self.now + fleet.delay(net.min_delay_ms, net.max_delay_ms)
            self._push(at, _BROKER_RESPONSE, bid, (generation, corr, api, answer.response, node.hw))

    def _schedule_fence(self, node: _Node) -> None:
        """The next session-expiry check: node.py polls; here it is one event at the earliest deadline."""
        brokers = node.brokers
        assert brokers is not None
        deadline = brokers.controller.next_deadline_ms()
        if deadline is None:
            node.fence_at = None
            return
        at = max(node.global_time(deadline), self.now + 1)
        if at != node.fence_at:
            node.fence_at = at
            self._push(at, _FENCE, node.id, (node.incarnation, at))

    def _fence(self, node: _Node, payload: tuple[int, int]) -> None:
        incarnation, at = payload
        if node.core is None or node.incarnation != incarnation or node.fence_at != at:
            return
        node.fence_at = None
        brokers = node.brokers
        assert brokers is not None
        if not brokers.active:
            return
        # KIP-631: no heartbeat within broker.session.timeout.ms: fence.
        decision = brokers.expire(node.local(self.now), node.core.status())
        if decision is not None:
            self._commit_decision(node, decision, None, 0)
        if brokers.active:
            self._schedule_fence(node)

    # ------------------------------------------------------------------------------------ broker side

    def _known_cluster_id(self) -> str | None:
        """What a broker is formatted with: the configured id, or the one the quorum bootstrapped."""
        if self.config.cluster_id is not None:
            return self.config.cluster_id
        for nid in sorted(self.nodes):
            cid = self.nodes[nid].cluster_id
            if cid is not None:
                return cid
        return None

    def _broker_timer(self, bid: int, payload: tuple[int, str]) -> None:
        fleet = self.fleet
        assert fleet is not None
        generation, action = payload
        broker = fleet.brokers[bid]
        if action == "send":
            if broker.running and generation == broker.generation and broker.inflight is None:
                self._broker_send(broker)
        elif action == "start":
            if not broker.running:
                fleet.start(broker)
                self._broker_send(broker)
        elif action == "crash":
            if broker.running:
                fleet.stop(broker, clean=False)
                self._push(self.now + fleet.downtime_ms(), _BROKER_TIMER, bid, (0, "start"))
        elif action == "shutdown":
            if broker.running and broker.epoch >= 0:
                broker.want_shutdown = True  # KIP-631 "Stopping": WantShutDown until ShouldShutDown
        else:  # pragma: no cover - the actions above are exhaustive
            raise SimulationError(f"unknown broker action {action!r}")

    def _broker_send(self, broker: SimBroker) -> None:
        fleet = self.fleet
        assert fleet is not None
        request = fleet.request(broker, self._known_cluster_id())
        if request is None:
            self._push(self.now + fleet.heartbeat_interval_ms, _BROKER_TIMER, broker.id, (broker.generation, "send"))
            return
        api, body = request
        corr = fleet.next_corr()
        broker.inflight = corr
        node = self.nodes[broker.target]
        net = self.net
        if node.core is None:
            timeout_at = self.now + net.min_delay_ms + 1  # connection refused
        else:
            timeout_at = self.now + self.config.request_timeout_ms
            if not fleet.lost(net.loss):
                at = self.now + fleet.delay(net.min_delay_ms, net.max_delay_ms)
                payload = (broker.id, broker.generation, corr, api, body, node.incarnation)
                self._push(at, _BROKER_REQUEST, node.id, payload)
        self._push(timeout_at, _BROKER_TIMEOUT, broker.id, (broker.generation, corr))

    def _broker_response(self, bid: int, payload: tuple[int, int, int, dict[str, Any], int]) -> None:
        fleet = self.fleet
        assert fleet is not None
        generation, corr, api, body, committed_end = payload
        broker = fleet.brokers[bid]
        if not broker.running or generation != broker.generation or corr != broker.inflight:
            return  # late, or meant for a process that is gone
        broker.inflight = None
        reply = fleet.on_response(broker, api, body, committed_end)
        if reply.stopped:
            fleet.stop(broker, clean=True)
            self._push(self.now + reply.restart_ms, _BROKER_TIMER, bid, (0, "start"))
        else:
            self._push(self.now + reply.delay_ms, _BROKER_TIMER, bid, (broker.generation, "send"))

    def _broker_timeout(self, bid: int, payload: tuple[int, int]) -> None:
        fleet = self.fleet
        assert fleet is not None
        generation, corr = payload
        broker = fleet.brokers[bid]
        if broker.running and generation == broker.generation and corr == broker.inflight:
            broker.inflight = None
            reply = fleet.on_timeout(broker)
            self._push(self.now + reply.delay_ms, _BROKER_TIMER, bid, (broker.generation, "send"))


def directory_id_of(node: int) -> str:
    """KIP-853: a simulated node's metadata directory id (Kafka's Uuid string: url-safe base64 of 16 bytes, no
    padding), fixed per node id so every seed's trace names the same ones; never Kafka's ZERO_UUID."""
    return base64.urlsafe_b64encode((node + 1).to_bytes(16, "big")).rstrip(b"=").decode()


def endpoint_of(node: int) -> Endpoint:
    """A simulated node's controller listener (a name only the simulator resolves)."""
    return Endpoint(LISTENER, f"sim-node-{node}", 9093)


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
    config: SimConfig,
    trace_path: str | Path | None = None,
    core_class: type[KRaftCore] = KRaftCore,
    registry_class: type[BrokerRegistry] = BrokerRegistry,
) -> SimResult:
    """Run one seed (see ``Simulation``)."""
    return Simulation(config, trace_path, core_class, registry_class).run()
