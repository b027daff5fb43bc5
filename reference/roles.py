"""The seven role states of a KRaft node (Kafka's QuorumState names), one type each.

``Voted`` is Kafka 4.x's ``UnattachedState`` with a ``votedKey`` (Kafka 3.x had a VotedState of its own):
the kit keeps it as a role of its own name so traces and the TLA+ model say "Voted". ``Prospective``
(KIP-996, Kafka 4.0's ``ProspectiveState``) exists only when the node runs with pre-vote
(``CoreConfig.pre_vote``).

Each type holds only what that role needs; a transition replaces the whole value (see the table at the
top of ``core.py``). Within one role, its timers, vote tally and replica progress are updated in place,
as in Kafka's EpochState classes (LeaderState keeps a mutable ReplicaState per replica): the core does
this on every fetch, and a fresh copy of the role each time was a measurable share of its cost. The
identity, epoch and kind of a role never change in place. Timers are absolute deadlines in the core's
milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from kraft_tck.reference.messages import Endpoint, ReplicaKey, SnapshotId


@dataclass(slots=True)
class Unattached:
    """Knows the epoch but neither a leader nor a vote. ``election_deadline_ms`` is None for observers,
    which never elect themselves and instead ask voters who leads."""

    name: ClassVar[str] = "Unattached"
    epoch: int
    election_deadline_ms: int | None


@dataclass(slots=True)
class Voted:
    """Voted for ``voted_id`` in ``epoch`` (persisted before the vote was sent). An observer may vote too
    (Kafka 3.9+, ``UnattachedState.canGrantVote``); its ``election_deadline_ms`` is None, as it never
    elects itself."""

    name: ClassVar[str] = "Voted"
    epoch: int
    voted_id: int
    election_deadline_ms: int | None
    voted_directory_id: str | None = None  # KIP-853: the candidate's directory id (quorum-state v1)


@dataclass(slots=True)
class Prospective:
    """KIP-996 pre-vote (Kafka 4.x ``ProspectiveState``): a voter whose fetch or election timer ran out asks
    the voters, with Vote v2 ``PreVote=true`` in its *current* epoch, whether they would vote for it. Nothing
    is persisted on the way in (``QuorumState.transitionToProspective`` is a memory transition). It keeps
    the leader it followed (``leader_id``, -1 if none) and the vote it cast in this epoch (``voted_id``),
    as Kafka's state does; ``granted`` / ``rejected`` are the pre-vote tally (its own grant included,
    ``EpochElection``). A majority of grants makes it a Candidate (epoch + 1); a majority of refusals or
    ``election_deadline_ms`` sends it back to Follower (leader known) or Unattached. ``retries`` carries
    over from a Candidate that lost, so the election backoff keeps growing."""

    name: ClassVar[str] = "Prospective"
    epoch: int
    leader_id: int
    voted_id: int
    granted: frozenset[int]
    rejected: frozenset[int]
    retries: int
    election_deadline_ms: int
    voted_directory_id: str | None = None  # KIP-853: with ``voted_id`` (Kafka's votedKey of ProspectiveState)


@dataclass(slots=True)
class Candidate:
    """Asking for votes in ``epoch``; it voted for itself. After a lost or timed-out election it waits
    ``backoff_until_ms`` before trying again with a higher epoch; ``retries`` grows the backoff."""

    name: ClassVar[str] = "Candidate"
    epoch: int
    granted: frozenset[int]
    rejected: frozenset[int]
    retries: int
    election_deadline_ms: int
    backoff_until_ms: int | None = None


@dataclass(slots=True)
class ReplicaProgress:
    """The leader's view of one replica (voter or observer): KIP-595 fetch state plus KIP-836 times.

    ``last_fetch_leader_end_offset`` is the leader's log end offset at that replica's previous fetch;
    it lets ``LastCaughtUpTimestamp`` credit a fetch that reached what the leader had back then.
    """

    replica_id: int
    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    last_fetch_leader_end_offset: int = -1
    directory_id: str | None = None  # KIP-853: the fetcher's ReplicaDirectoryId (Kafka's ReplicaState.replicaKey)

    @property
    def key(self) -> ReplicaKey:
        return ReplicaKey(self.replica_id, self.directory_id)


@dataclass(slots=True)
class VoterChange:
    """A leader's voter change in progress (KIP-853; Kafka's ``AddVoterHandlerState`` / ``RemoveVoterHandlerState``).
    ``kind`` "add" or "remove"; ``reply_to`` the AddRaftVoter/RemoveRaftVoter request's token, answered when the
    high watermark passes ``offset`` (the VotersRecord's offset; None while an add waits for the ApiVersions
    answer of the new voter), or with REQUEST_TIMED_OUT at ``deadline_ms``."""

    kind: str
    key: ReplicaKey
    reply_to: object
    deadline_ms: int
    endpoints: tuple[Endpoint, ...] = ()
    offset: int | None = None


@dataclass(slots=True)
class Leader:
    """Leads ``epoch``. ``epoch_start_offset`` is the log end offset when it won: the high watermark
    may only move past it (an entry of this epoch on a majority). ``begin_epoch_deadline_ms`` is the
    BeginQuorumEpoch heartbeat timer (Kafka 3.9+ ``LeaderState.beginQuorumEpochTimer``, KAFKA-16536):
    when it passes, the leader sends BeginQuorumEpoch to every other voter and restarts it at half the
    fetch timeout; it starts expired, so the first round leaves with the win. ``fetched_voters``
    collects voters whose valid fetches arrived since the check-quorum timer (``progress_deadline_ms``,
    1.5 x the fetch timeout as Kafka's LeaderState) was last reset."""

    name: ClassVar[str] = "Leader"
    epoch: int
    epoch_start_offset: int
    granting_voters: frozenset[int]
    replicas: dict[int, ReplicaProgress]
    begin_epoch_deadline_ms: int
    progress_deadline_ms: int
    fetched_voters: frozenset[int] = frozenset()
    # KIP-853: the one voter change in progress (Kafka's LeaderState add/remove handler state) and whether the
    # leader must resign because a committed VotersRecord removed it (``LeaderState.requestResign``).
    voter_change: VoterChange | None = None
    resign_requested: bool = False
    # Set by the first poll after the request: the resignation happens at the NEXT poll, as Kafka's
    # ``pollLeader`` acts on ``requestResign`` in a later poll, never inside the step that committed the removal
    # (whose answers are then traced before the ``Resign``).
    resign_due: bool = False
    # KIP-853: replica states under a key whose id already has another key's state in ``replicas`` (a fetch under a
    # voter's id with another directory id, an observer displaced by a voter of its id). Kafka keys observer states
    # by ReplicaKey (``LeaderState.observerStates``): each is an observer of its own, never a voter.
    other_keys: dict[ReplicaKey, ReplicaProgress] = field(default_factory=dict)


@dataclass(slots=True)
class Follower:
    """Follows ``leader_id`` in ``epoch`` and fetches from it. When ``fetch_deadline_ms`` passes
    without a successful fetch a voter starts an election with ``deadline_cause`` ("FetchTimeout", or
    "EndQuorumEpoch" when a resigning leader shortened the wait). ``voted_id`` keeps the vote this node
    cast in the epoch, if any (one vote per epoch survives restarts). A download of a snapshot (KIP-630) belongs
    to this role: a new role abandons it."""

    name: ClassVar[str] = "Follower"
    epoch: int
    leader_id: int
    fetch_deadline_ms: int
    voted_id: int = -1
    deadline_cause: str = "FetchTimeout"
    voted_directory_id: str | None = None  # KIP-853: with ``voted_id`` (quorum-state v1 votedDirectoryId)
    # KIP-996: a successful fetch from the leader in this role (Kafka 4.x ``FollowerState.hasFetchedFromLeader``).
    # A follower that has one refuses pre-votes: its leader is alive.
    fetched: bool = False
    # KIP-630: the snapshot being downloaded from the leader (Kafka's ``FollowerState.fetchingSnapshot``) and how
    # many of its bytes have arrived; while set, the follower sends FetchSnapshot instead of Fetch.
    fetching_snapshot: SnapshotId | None = None
    snapshot_position: int = 0
    # KIP-853: the download's first batch (its header: SnapshotHeader, KRaftVersion, Voters records) as its bytes
    # arrive, so the voter set the snapshot holds is in force the moment it is installed.
    snapshot_head: bytes = b""
    # KIP-853: when a voter next checks whether its VotersRecord entry needs an UpdateRaftVoter (Kafka's
    # ``FollowerState.updateVoterPeriodTimer``, 3 x the fetch timeout); None until its first request.
    update_voter_deadline_ms: int | None = None


@dataclass(slots=True)
class Resigned:
    """A former leader of ``epoch`` that gave up (shutdown or lost quorum). It tells the voters still in
    ``awaiting_end_epoch`` with EndQuorumEpoch and becomes a candidate at ``election_deadline_ms``."""

    name: ClassVar[str] = "Resigned"
    epoch: int
    preferred_successors: tuple[int, ...]
    awaiting_end_epoch: frozenset[int]
    election_deadline_ms: int
    cause: str = field(default="Resign")


Role = Unattached | Voted | Prospective | Candidate | Leader | Follower | Resigned
