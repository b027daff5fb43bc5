"""What can go wrong in a simulated cluster, as plain data.

A fault schedule is a list of small frozen dataclasses with virtual start times. Being data (not
callbacks) is what lets hypothesis generate and shrink schedules, and lets a failing seed be printed
and replayed. The network's steady behaviour (delay, loss, duplication, reordering) and the clocks'
skew are separate settings (``NetConfig``, ``ClockConfig``); faults are the timed disturbances on top.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Crash:
    """``node`` dies at ``at_ms`` (volatile state lost, disk kept) and restarts ``down_ms`` later.

    ``graceful``: the node first gets ``Shutdown`` (a leader resigns, KIP-595 "EndQuorumEpoch") and
    dies ``GRACE_MS`` later, like a controlled restart.
    """

    at_ms: int
    node: int
    down_ms: int
    graceful: bool = False


@dataclass(frozen=True, slots=True)
class Partition:
    """Symmetric partition: nodes in different ``groups`` cannot reach each other for ``duration_ms``.
    A node in no group is cut off from everyone."""

    at_ms: int
    duration_ms: int
    groups: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class OneWay:
    """One-way link failure: messages from ``src`` to ``dst`` are lost for ``duration_ms``."""

    at_ms: int
    duration_ms: int
    src: int
    dst: int


@dataclass(frozen=True, slots=True)
class Lossy:
    """Every message is additionally lost with probability ``loss`` for ``duration_ms``."""

    at_ms: int
    duration_ms: int
    loss: float


@dataclass(frozen=True, slots=True)
class SnapshotCrash:
    """KIP-630: ``node`` dies while it writes its next snapshot after ``at_ms`` and restarts ``down_ms`` later.

    ``torn``: the file is cut short (a ``.checkpoint.part`` file, never renamed): the restart must delete it and
    go on from the previous snapshot (Kafka's ``Snapshots.deleteIfExists`` of stray partial files). Otherwise the
    file was frozen (fsync, rename) but the core never heard of it: the restart loads it as the latest snapshot.
    A node that takes no snapshot after ``at_ms`` never dies of it.
    """

    at_ms: int
    node: int
    down_ms: int
    torn: bool = True


@dataclass(frozen=True, slots=True)
class VoteCrash:
    """``node`` dies the instant the first vote it grants after ``at_ms`` has left it (the granted VoteResponse is
    on the wire, nothing after it ran), and restarts ``down_ms`` later. KIP-595 "Vote Request Handling": the vote
    is persisted before the response is sent, so the restarted voter must still hold it; a shell or core that
    writes it later (or never) comes back able to vote again in that epoch. The simulator's counterpart of the
    conformance kit's kill -9 at the moment a Vote grant leaves the target (conformance/test_crashwindow.py). A
    node that grants no vote after ``at_ms`` never dies of it.
    """

    at_ms: int
    node: int
    down_ms: int


@dataclass(frozen=True, slots=True)
class IsolateLeader:
    """At ``at_ms`` the node leading then (the highest epoch's leader; none: nothing happens) is cut off from every
    other node for ``duration_ms``. Raft's classic: the cut-off leader takes client writes it can never commit until
    its check-quorum timeout, the others elect a new leader, and when the cut heals the deposed leader's log is
    longer than theirs in an older epoch — the case the election restriction (KIP-595 "Vote Request Handling": last
    epoch first, then the end offset) and the follower's truncation (DivergingEpoch) exist for.
    """

    at_ms: int
    duration_ms: int


@dataclass(frozen=True, slots=True)
class Figure8:
    """Raft's Figure 8 (Ongaro and Ousterhout, "In Search of an Understandable Consensus Algorithm", §5.4.2), the
    reason for KIP-595 "Fetch Request Handling" step 4 (the high watermark moves only once an entry of the leader's
    own epoch is on a majority). At ``at_ms`` the leader of the moment (none: nothing happens) is cut off from every
    other voter for ``duration_ms``; the client still writes to it, so it appends entries of its epoch nobody else
    gets. The first other voter that becomes leader meanwhile is cut off the instant it leads, before any message of
    that step leaves: its LeaderChange record sits alone in its log, at an offset where the first leader holds
    entries of the older epoch. When the first leader is back and leads again (a later epoch: the remaining voter
    grants it, its log being the longer one of that older epoch), the instant it has answered a Fetch of a voter
    that now holds one of those older-epoch entries at an offset where the cut-off leader's log differs (a majority
    holds it, none of the leader's own epoch above it yet), it is cut off for ``duration_ms`` and the other leader
    comes back, which a majority (the voter that fetched, whose last epoch is older than its own) can elect: it
    overwrites that entry. A leader that counted the entry committed by replication alone has lost a committed
    entry (LeaderCompleteness, CommittedNeverTruncated). The voter holds older entries without the new leader's own
    entry above them only when Fetch answers are capped (``SimConfig.fetch_max_bytes``): without a cap the answer
    that brings them brings the leader's LeaderChange record too, and the other leader can no longer win that
    voter's vote. The second leader's cut ends then, or ``2 x duration_ms`` after ``at_ms`` at the latest.
    """

    at_ms: int
    duration_ms: int


@dataclass(frozen=True, slots=True)
class ChangeSplit:
    """Raft's single-server-change bug (Ongaro, raft-dev 2015, "bug in single-server membership changes"; KRaft.tla
    ConfigQuorumsOverlap), the reason for KIP-853's rule that a leader takes a voter change only once it has committed
    an entry of its own epoch (Kafka's AddVoterHandler/RemoveVoterHandler: REQUEST_TIMED_OUT while the leader's high
    watermark is unknown; ``testAddVoterWithoutFencedPreviousLeaders``). Armed at ``at_ms``; the first time after it
    that a leader whose voter set in force has an even number (4 or more) of voters appends a VotersRecord that keeps
    it a voter, it is cut off, before any message of that step leaves, together with the voter the record adds (if
    any) from every other replica: the record sits uncommitted on that minority. The first other node that leads
    meanwhile (the old set's remaining voters elect it) is, the instant it leads, cut off from one voter of the new
    set other than both leaders, which joins the old leader's side, for ``duration_ms``; ``ask_ms`` later the admin
    client, finding the old leader unreachable, asks the new one to remove it. The new leader's LeaderChange record
    reaches no majority of its set, so its epoch has committed nothing and the removal must wait (REQUEST_TIMED_OUT).
    Taken anyway, the removal would commit with a majority of the changed set (the new leader and the voter left at
    its side), disjoint from the majority of the uncommitted set on the other side, which elects the old leader
    again: two changes from one even set need not have overlapping majorities. The first cut ends when the second
    begins, or ``duration_ms`` after the trigger."""

    at_ms: int
    duration_ms: int
    ask_ms: int


@dataclass(frozen=True, slots=True)
class RemovalSplit:
    """KIP-853 "High Watermark" with the leader's own removal (a removed leader leads until the removal commits, then
    resigns: RemoveVoterHandler.highWatermarkUpdated; only the voters of the latest VotersRecord count, Kafka's
    LeaderState.maybeUpdateHighWatermark). Armed at ``at_ms``. While armed, a leader that appends a VotersRecord
    leaving an even voter set (4 or more) with itself in it is asked by the admin client ``ask_ms`` later to remove
    itself (an operator retiring the active controller). The first time a leader appends a VotersRecord removing
    itself that leaves an odd number (3 or more) of voters (that removal or any other), once that step's messages
    have left (the other voters' parked fetches carry the record): a minority of the remaining voters (one of three)
    restarts (down ``lag_ms``) and, with the leader, is cut off from the rest for ``duration_ms``. The restarted
    voter follows the leader again and fetches from before the record, so one answer brings it the record and the
    entries the leader appended after it; the others hold the record alone and, a majority of the new set, elect one
    of them. No majority of the new set reported to the leader past the record, so nothing after it may count as
    committed: a leader that counts itself after its removal commits them with the one voter at its side, and the
    new leader lacks them."""

    at_ms: int
    duration_ms: int
    lag_ms: int
    ask_ms: int


Fault = (Crash | Partition | OneWay | Lossy | SnapshotCrash | VoteCrash | IsolateLeader | Figure8 | ChangeSplit
         | RemovalSplit)


@dataclass(frozen=True, slots=True)
class ScheduledVoterChange:
    """KIP-853: at ``at_ms`` an admin client asks the leader of that moment to change the voter set.

    ``op``: ``"add"`` (AddRaftVoter of ``node``; -1: any running replica that is not a voter then) or ``"remove"``
    (RemoveRaftVoter of ``node``; -1: the leader itself, -2: a voter other than the leader). ``fault``: what goes
    wrong during the change — ``""`` nothing; ``"crash-joiner"`` the added node dies ``delay_ms`` after the leader
    took the request, before the change can commit, and restarts ``down_ms`` later; ``"crash-leader"`` the leader
    dies ``delay_ms`` after it took the request (with its VotersRecord uncommitted); ``"partition"`` the leader is
    cut off from every other node from ``delay_ms`` after the request for ``down_ms``.
    """

    at_ms: int
    op: str
    node: int = -1
    fault: str = ""
    delay_ms: int = 0
    down_ms: int = 0


VOTER_CHANGE_FAULTS = ("", "crash-joiner", "crash-leader", "partition")

#: How long a gracefully stopping node keeps running after ``Shutdown`` (to send EndQuorumEpoch).
GRACE_MS = 200
#: How long an isolated voter stays cut off (``FaultProfile.isolations_per_min``): [low, high) virtual ms,
#: past the simulator's default fetch (2 s) and election (1-2 s) timeouts.
ISOLATION_MS = (3000, 8000)
#: How long a lagging voter stays cut off (``FaultProfile.lags_per_min``): [low, high) virtual ms.
LAG_MS = (6000, 15000)


@dataclass(frozen=True, slots=True)
class NetConfig:
    """The network's steady behaviour. Delays are integer virtual milliseconds, drawn uniformly.

    Each directed link is FIFO, like the TCP connection per direction Kafka uses: a message's delay
    never lets it overtake an earlier one on the same link (messages on different links do race).
    ``reorder``: probability that a message leaves that order with an extra delay of up to
    ``reorder_max_ms`` — beyond what TCP allows, an adversarial setting (the "heavy" profile).
    ``duplicate``: probability that a message arrives twice.
    """

    min_delay_ms: int = 1
    max_delay_ms: int = 10
    loss: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    reorder_max_ms: int = 100

    def __post_init__(self) -> None:
        if not 0 <= self.min_delay_ms <= self.max_delay_ms:
            raise ValueError(
                f"need 0 <= min_delay_ms <= max_delay_ms, got {self.min_delay_ms}, {self.max_delay_ms}"
            )
        for name in ("loss", "duplicate", "reorder"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} is a probability in [0, 1], got {p}")
        if self.reorder_max_ms < 0:
            raise ValueError(f"reorder_max_ms must be >= 0, got {self.reorder_max_ms}")


@dataclass(frozen=True, slots=True)
class ClockConfig:
    """Per-node clock skew. Each node's clock runs at ``1 + ppm/1e6`` of virtual time, with ``ppm`` drawn
    uniformly from ``[-max_skew_ppm, max_skew_ppm]``; each timer fires up to ``tick_jitter_ms`` late."""

    max_skew_ppm: int = 0
    tick_jitter_ms: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.max_skew_ppm < 1_000_000:
            raise ValueError(f"max_skew_ppm must be in [0, 1000000), got {self.max_skew_ppm}")
        if self.tick_jitter_ms < 0:
            raise ValueError(f"tick_jitter_ms must be >= 0, got {self.tick_jitter_ms}")


@dataclass(frozen=True, slots=True)
class FaultProfile:
    """How a seed's random environment is drawn (``kraft-tck simulate --faults NAME``)."""

    name: str
    net: NetConfig
    clock: ClockConfig
    crashes_per_min: float
    partitions_per_min: float
    one_ways_per_min: float
    lossy_per_min: float
    # Per simulated broker: crashes (heartbeats stop) and controlled shutdowns per minute.
    broker_crashes_per_min: float = 0.0
    broker_shutdowns_per_min: float = 0.0
    # A voter cut off from every other node, then reconnected (a ``Partition`` whose one group is the other
    # voters): ISOLATION_MS long, so the voter's fetch and election timers fire while it is away (KIP-996
    # "Motivation": without pre-vote it comes back with a higher epoch and forces an election).
    isolations_per_min: float = 0.0
    # KIP-630. Snapshots: every node snapshots its state machine once this many committed bytes were applied
    # since its latest one (Kafka's metadata.log.max.record.bytes.between.snapshots; 0: no snapshots at all),
    # or this long after it with new records (metadata.log.max.snapshot.interval.ms; 0: no time rule); it
    # cleans its log up to the latest snapshot once more than ``retention_bytes`` lie below it (a stand-in for
    # metadata.max.retention.bytes: the log alone is counted); FetchSnapshot chunks are at most
    # ``snapshot_chunk_bytes`` (so a download takes several round trips that faults can interrupt).
    snapshot_bytes: int = 0
    snapshot_interval_ms: int = 0
    retention_bytes: int = 0
    snapshot_chunk_bytes: int = 512
    # Crashes in the middle of writing a snapshot (``SnapshotCrash``), per minute; ``torn_fraction`` of them torn.
    snapshot_crashes_per_min: float = 0.0
    torn_fraction: float = 0.7
    # Voters cut off for ``LAG_MS`` (longer than ISOLATION_MS): the leader snapshots and cleans meanwhile, so they
    # come back below its log start and catch up through its snapshot.
    lags_per_min: float = 0.0
    # KIP-853. Joining replicas (observers that may be added as voters) and a voter-change schedule
    # (``reconfig_schedule``): the cluster is formatted kraft.version 1 with the initial voters as its bootstrap set.
    joiners: int = 0
    voter_changes_per_min: float = 0.0
    # Crashes the instant a voter's vote grant has left it (``VoteCrash``), and the leader of the moment cut off for
    # ISOLATION_MS (``IsolateLeader``), per minute (``extra_schedule``).
    vote_crashes_per_min: float = 0.0
    leader_isolations_per_min: float = 0.0
    # Raft's Figure 8 schedules (``Figure8``), per minute (``extra_schedule``).
    figure8_per_min: float = 0.0
    # KIP-853 schedules triggered by a voter change (``reconfig_fault_schedule``): Raft's single-server-change bug
    # (``ChangeSplit``) and the leader's own removal with a lagging voter at its side (``RemovalSplit``), per minute.
    change_splits_per_min: float = 0.0
    removal_splits_per_min: float = 0.0


PROFILES: dict[str, FaultProfile] = {
    "none": FaultProfile("none", NetConfig(1, 10), ClockConfig(), 0, 0, 0, 0),
    "default": FaultProfile(
        "default",
        NetConfig(1, 20, loss=0.01, duplicate=0.01),
        ClockConfig(max_skew_ppm=20_000, tick_jitter_ms=5),
        crashes_per_min=2,
        partitions_per_min=2,
        one_ways_per_min=1,
        lossy_per_min=1,
        broker_crashes_per_min=0.5,
        broker_shutdowns_per_min=0.5,
        # KIP-630 on by default: a snapshot every ~4 KB of committed records (every few virtual seconds), logs
        # cleaned at once; the crashes, partitions and loss above interrupt downloads and leave followers behind
        # the log start. Crashes in the middle of a snapshot write and long lags: the "snapshots" profile.
        snapshot_bytes=4096,
        snapshot_interval_ms=10_000,
        # A crash the instant a vote grant leaves a voter, then a quick restart (``VoteCrash``): a vote that was
        # not durable before its response left is forgotten, and the voter may vote again in that epoch.
        vote_crashes_per_min=4,
        # The leader of the moment cut off for 3-8 s (``IsolateLeader``): it comes back with a longer log of an older
        # epoch than the new leader's.
        leader_isolations_per_min=2,
        # Raft's Figure 8 (``Figure8``): a leader's uncommitted entries, a second leader's entry at the same offset,
        # the first leader back in a later epoch replicating its older entries. With capped Fetch answers (``kraft-tck
        # simulate``'s ``--fetch-max-bytes``) it reaches the moment the commit rule of step 4 exists for.
        figure8_per_min=1,
    ),
    # Only partitions that heal, each cutting one voter off: the leader changes pre-vote avoids
    # (``kraft-tck simulate --faults reconnect --compare-pre-vote``).
    "reconnect": FaultProfile(
        "reconnect", NetConfig(1, 10), ClockConfig(), 0, 0, 0, 0, isolations_per_min=4,
    ),
    # KIP-630 under faults: snapshots every ~2 KB of committed records (every few seconds at the default write
    # rate), logs cleaned at once, small FetchSnapshot chunks; crashes while writing a snapshot, voters cut off
    # long enough to fall below the leader's log start, message loss that interrupts downloads.
    "snapshots": FaultProfile(
        "snapshots",
        NetConfig(1, 20, loss=0.01, duplicate=0.01),
        ClockConfig(max_skew_ppm=20_000, tick_jitter_ms=5),
        crashes_per_min=2,
        partitions_per_min=1,
        one_ways_per_min=1,
        lossy_per_min=2,
        broker_crashes_per_min=0.5,
        broker_shutdowns_per_min=0.5,
        snapshot_bytes=2048,
        snapshot_interval_ms=5000,
        retention_bytes=0,
        snapshot_chunk_bytes=256,
        snapshot_crashes_per_min=3,
        lags_per_min=3,
    ),
    # KIP-853 under faults: two joiners are added one by one, a follower and then the leader itself are removed,
    # then random adds and removes; some changes meet a crash of the joiner before the commit, a crash of the
    # leader with its VotersRecord uncommitted, or a partition of the leader. Light steady faults besides. Snapshots
    # every ~2 KB of committed records with their voter set (KIP-853: the header's KRaftVersion/Voters records), logs
    # cleaned at once: a joiner, started shortly before its add, catches up through FetchSnapshot. No brokers.
    "reconfig": FaultProfile(
        "reconfig",
        NetConfig(1, 20, loss=0.01, duplicate=0.01),
        ClockConfig(max_skew_ppm=20_000, tick_jitter_ms=5),
        crashes_per_min=1,
        partitions_per_min=1,
        one_ways_per_min=0,
        lossy_per_min=1,
        snapshot_bytes=2048,
        snapshot_interval_ms=5000,
        retention_bytes=0,
        snapshot_chunk_bytes=256,
        joiners=2,
        voter_changes_per_min=12,
        # A voter change of an even voter set split off with its leader, the next leader cut off from one voter
        # (``ChangeSplit``); the leader's own removal with a restarted voter at its side (``RemovalSplit``).
        change_splits_per_min=3,
        removal_splits_per_min=3,
    ),
    "heavy": FaultProfile(
        "heavy",
        NetConfig(1, 50, loss=0.05, duplicate=0.05, reorder=0.1, reorder_max_ms=300),
        ClockConfig(max_skew_ppm=100_000, tick_jitter_ms=20),
        crashes_per_min=6,
        partitions_per_min=6,
        one_ways_per_min=4,
        lossy_per_min=4,
        broker_crashes_per_min=2,
        broker_shutdowns_per_min=2,
    ),
}


def profile(name: str) -> FaultProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown fault profile {name!r}; choose one of {', '.join(PROFILES)}") from None


def _draw_count(rng: random.Random, rate: float, minutes: float) -> int:
    """How many faults of a kind at ``rate`` per minute over ``minutes``: the whole part of the expectation, and one
    more with the chance of its fraction (one draw from ``rng``)."""
    expected = rate * minutes
    return int(expected) + (1 if rng.random() < expected - int(expected) else 0)


def random_schedule(
    rng: random.Random, nodes: Sequence[int], duration_ms: int, prof: FaultProfile
) -> list[Fault]:
    """Draw a fault schedule for one seed: Poisson-ish counts per kind, uniform start times.

    The first second is left quiet so every run starts with an undisturbed first election to compare
    against; faults may run past ``duration_ms`` (the run simply ends).
    """
    faults: list[Fault] = []
    minutes = duration_ms / 60_000
    start = min(1000, duration_ms)
    node_list = sorted(nodes)

    def count(rate: float) -> int:  # draws even at rate 0: the stream's later draws stay where they were
        return _draw_count(rng, rate, minutes)

    def when() -> int:
        return rng.randrange(start, max(start + 1, duration_ms))

    for _ in range(count(prof.crashes_per_min)):
        faults.append(Crash(when(), rng.choice(node_list), rng.randrange(100, 5000), rng.random() < 0.3))
    for _ in range(count(prof.partitions_per_min)):
        shuffled = node_list[:]
        rng.shuffle(shuffled)
        cut = rng.randrange(1, len(shuffled)) if len(shuffled) > 1 else 1
        groups = (tuple(sorted(shuffled[:cut])), tuple(sorted(shuffled[cut:])))
        faults.append(Partition(when(), rng.randrange(200, 8000), groups))
    for _ in range(count(prof.one_ways_per_min)):
        src, dst = rng.sample(node_list, 2) if len(node_list) > 1 else (node_list[0], node_list[0])
        faults.append(OneWay(when(), rng.randrange(200, 8000), src, dst))
    for _ in range(count(prof.lossy_per_min)):
        faults.append(Lossy(when(), rng.randrange(200, 5000), round(rng.uniform(0.1, 0.6), 2)))
    # drawn only when asked for: the other profiles' schedules keep their random stream
    if prof.isolations_per_min > 0 and len(node_list) > 1:
        for _ in range(count(prof.isolations_per_min)):
            cut_off = rng.choice(node_list)
            rest = tuple(n for n in node_list if n != cut_off)
            faults.append(Partition(when(), rng.randrange(*ISOLATION_MS), (rest,)))
    if prof.lags_per_min > 0 and len(node_list) > 1:
        for _ in range(count(prof.lags_per_min)):
            cut_off = rng.choice(node_list)
            rest = tuple(n for n in node_list if n != cut_off)
            faults.append(Partition(when(), rng.randrange(*LAG_MS), (rest,)))
    if prof.snapshot_crashes_per_min > 0:
        for _ in range(count(prof.snapshot_crashes_per_min)):
            faults.append(SnapshotCrash(when(), rng.choice(node_list), rng.randrange(100, 3000),
                                        rng.random() < prof.torn_fraction))
    faults.sort(key=fault_sort_key)
    return faults


#: How long a ``VoteCrash`` victim stays down: [low, high) virtual ms, below the election timeout, so it is back
#: while the other candidates of the epoch it voted in may still ask for its vote.
VOTE_CRASH_DOWN_MS = (5, 800)


def extra_schedule(
    rng: random.Random, nodes: Sequence[int], duration_ms: int, prof: FaultProfile
) -> list[VoteCrash | IsolateLeader | Figure8]:
    """A seed's ``VoteCrash`` faults (``prof.vote_crashes_per_min``), ``IsolateLeader`` faults
    (``prof.leader_isolations_per_min``) and ``Figure8`` schedules (``prof.figure8_per_min``, drawn after the others,
    so a profile without them draws what it drew before), at uniform times after the first second. Drawn from a
    stream of its own (``Simulation``): the seed's other faults and draws stay what they were, and a run of the correct
    core changes only from the first of these faults that hits on."""
    out: list[VoteCrash | IsolateLeader | Figure8] = []
    minutes = duration_ms / 60_000
    start = min(1000, duration_ms)
    node_list = sorted(nodes)

    def count(rate: float) -> int:
        return _draw_count(rng, rate, minutes) if rate > 0 else 0

    for _ in range(count(prof.vote_crashes_per_min)):
        out.append(VoteCrash(rng.randrange(start, max(start + 1, duration_ms)), rng.choice(node_list),
                             rng.randrange(*VOTE_CRASH_DOWN_MS)))
    for _ in range(count(prof.leader_isolations_per_min)):
        out.append(IsolateLeader(rng.randrange(start, max(start + 1, duration_ms)), rng.randrange(*ISOLATION_MS)))
    for _ in range(count(prof.figure8_per_min)):
        out.append(Figure8(rng.randrange(start, max(start + 1, duration_ms)), rng.randrange(*ISOLATION_MS)))
    return out


def reconfig_schedule(
    rng: random.Random, joiners: Sequence[int], duration_ms: int, prof: FaultProfile
) -> list[ScheduledVoterChange]:
    """Draw a seed's voter changes (KIP-853): from 2 s on, one every ~60/``voter_changes_per_min`` s (±40 %): each
    joiner added in turn, a follower removed, the leader removed, then adds of any non-voter and removes of any
    voter (the leader one time in four) at random. Each change meets one of ``VOTER_CHANGE_FAULTS`` (a third of
    them a fault); a quarter of them are followed 1-30 ms later by another change (KIP-853: refused while the first
    one is uncommitted). Drawn from a stream of its own: the other faults of the seed stay what they were."""
    if prof.voter_changes_per_min <= 0:
        return []
    gap = 60_000 / prof.voter_changes_per_min
    plan: list[tuple[str, int]] = [("add", j) for j in joiners] + [("remove", -2), ("remove", -1)]
    out: list[ScheduledVoterChange] = []
    at = 2000 + rng.randrange(int(gap))
    while at < duration_ms:
        if plan:
            op, node = plan.pop(0)
        else:
            op = rng.choice(("add", "remove"))
            node = -1 if op == "add" else rng.choice((-1, -2, -2, -2))
        fault = rng.choice(VOTER_CHANGE_FAULTS[1:]) if rng.random() < 1 / 3 else ""
        if fault == "crash-joiner" and op != "add":
            fault = ""
        out.append(ScheduledVoterChange(at, op, node, fault, rng.randrange(1, 40), rng.randrange(500, 4000)))
        if rng.random() < 0.25:  # a second change right behind it, likely while the first is uncommitted
            when, op2 = at + rng.randrange(1, 30), rng.choice(("add", "remove"))  # draws in this order: seeds stay
            out.append(ScheduledVoterChange(when, op2, -1 if rng.random() < 0.5 else -2))
        at += int(gap * rng.uniform(0.6, 1.4))
    return out


#: How long a ``ChangeSplit``'s or ``RemovalSplit``'s cut lasts: [low, high) virtual ms, long enough for each side to
#: elect a leader of its own set if it can (fetch timeout, election timeouts, a split vote or two) and for the admin
#: client's request to reach the new leader.
SPLIT_MS = (6000, 12000)
#: How long a ``RemovalSplit``'s restarted voter is down: [low, high) virtual ms, a few client writes' worth (10/s).
SPLIT_LAG_MS = (200, 800)
#: When the admin client asks (``ChangeSplit``, ``RemovalSplit``): [low, high) virtual ms after the triggering event.
SPLIT_ASK_MS = (100, 1500)


def reconfig_fault_schedule(
    rng: random.Random, duration_ms: int, prof: FaultProfile
) -> list[ChangeSplit | RemovalSplit]:
    """A seed's ``ChangeSplit`` and ``RemovalSplit`` schedules (``prof.change_splits_per_min``,
    ``prof.removal_splits_per_min``), armed at uniform times after the first second. Drawn only for a profile that
    has them, from a stream of their own (``Simulation``): the seed's other faults and draws stay what they were, and
    a run changes only from the first voter change one of them acts on."""
    out: list[ChangeSplit | RemovalSplit] = []
    minutes = duration_ms / 60_000
    start = min(1000, duration_ms)

    def count(rate: float) -> int:
        return _draw_count(rng, rate, minutes) if rate > 0 else 0

    for _ in range(count(prof.change_splits_per_min)):
        out.append(ChangeSplit(rng.randrange(start, max(start + 1, duration_ms)), rng.randrange(*SPLIT_MS),
                               rng.randrange(*SPLIT_ASK_MS)))
    for _ in range(count(prof.removal_splits_per_min)):
        out.append(RemovalSplit(rng.randrange(start, max(start + 1, duration_ms)), rng.randrange(*SPLIT_MS),
                                rng.randrange(*SPLIT_LAG_MS), rng.randrange(*SPLIT_ASK_MS)))
    return out


def fault_sort_key(f: Fault) -> tuple[int, str, str]:
    """A total order on faults (time, kind, repr) so the schedule's order never depends on hashing."""
    return f.at_ms, type(f).__name__, repr(f)


def validate_schedule(faults: Sequence[Fault], nodes: Sequence[int]) -> None:
    """Bad input → a clear error naming the fault, before anything runs."""
    known = set(nodes)
    for f in faults:
        if f.at_ms < 0:
            raise ValueError(f"{f}: at_ms must be >= 0")
        if isinstance(f, Crash | SnapshotCrash | VoteCrash):
            if f.node not in known:
                raise ValueError(f"{f}: node {f.node} is not in the cluster {sorted(known)}")
            if f.down_ms < 0:
                raise ValueError(f"{f}: down_ms must be >= 0")
        elif isinstance(f, IsolateLeader | Figure8 | ChangeSplit | RemovalSplit):
            if f.duration_ms < 0 or (isinstance(f, ChangeSplit | RemovalSplit) and f.ask_ms < 0) or (
                    isinstance(f, RemovalSplit) and f.lag_ms < 0):
                raise ValueError(f"{f}: durations must be >= 0")
        elif isinstance(f, Partition | OneWay | Lossy):
            if f.duration_ms < 0:
                raise ValueError(f"{f}: duration_ms must be >= 0")
            if isinstance(f, Partition):
                members = [n for g in f.groups for n in g]
                if len(members) != len(set(members)) or not set(members) <= known:
                    raise ValueError(f"{f}: groups must be disjoint sets of cluster nodes {sorted(known)}")
            elif isinstance(f, OneWay) and not {f.src, f.dst} <= known:
                raise ValueError(f"{f}: src and dst must be cluster nodes {sorted(known)}")
            elif isinstance(f, Lossy) and not 0.0 <= f.loss <= 1.0:
                raise ValueError(f"{f}: loss is a probability in [0, 1]")
        else:
            raise TypeError(f"not a fault: {f!r}")
