"""KIP-853 voter sets: pure data, no I/O.

A ``VoterSet`` is Kafka's ``org.apache.kafka.raft.VoterSet``: voters by id, each a ``VoterNode`` with its
``ReplicaKey`` (id, directory id), its listeners and the kraft.version range it supports. ``VoterHistory`` is
Kafka's ``internals/VoterSetHistory`` plus the kraft.version history of ``KRaftControlRecordStateMachine``: the
voter sets and kraft.version levels found in the log (and snapshot) by offset, so the set in force is the latest
one, committed or not (KIP-853 "Voter changes"), and truncation rolls it back.

Record bodies use the field names of spec/messages/VotersRecord.json and KRaftVersionRecord.json; a directory
id is Kafka's Uuid string in the core (None = ZERO_UUID) and a ``uuid.UUID`` in a record body (the codec's type).
"""

from __future__ import annotations

import base64
import bisect
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from kraft_tck.reference.messages import ZERO_UUID, Endpoint, ReplicaKey

#: ``ControlRecordUtils.KRAFT_VOTERS_CURRENT_VERSION`` / ``KRAFT_VERSION_CURRENT_VERSION``.
VOTERS_RECORD_VERSION = 0
KRAFT_VERSION_RECORD_VERSION = 0


def _uuid_of(directory_id: str | None) -> uuid.UUID:
    """A record body's uuid for a directory id (None -> ZERO_UUID)."""
    if directory_id is None:
        return uuid.UUID(int=0)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(directory_id + "=="))


def _directory_id_of(value: Any) -> str | None:
    """The core's directory id for a record body's uuid (or already a Uuid string); ZERO_UUID -> None."""
    if value is None:
        return None
    if isinstance(value, uuid.UUID):
        if value.int == 0:
            return None
        return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")
    text = str(value)
    return None if text == ZERO_UUID else text


@dataclass(frozen=True)
class VoterNode:
    """One voter (Kafka's ``VoterSet.VoterNode``): key, listeners (the first is the default controller
    listener when built by this node) and the supported kraft.version range."""

    key: ReplicaKey
    endpoints: tuple[Endpoint, ...] = ()
    kraft_min: int = 0
    kraft_max: int = 1

    @property
    def id(self) -> int:
        return self.key.id

    def is_voter(self, key: ReplicaKey) -> bool:
        """``VoterNode.isVoter``: same id and, when this node has a directory id, the same directory id (a node
        without one, e.g. from controller.quorum.voters, matches any directory id of that id)."""
        if self.key.id != key.id:
            return False
        return self.key.directory_id is None or self.key.directory_id == key.directory_id

    def endpoint(self, name: str | None = None) -> Endpoint | None:
        """The endpoint on listener ``name`` (None: the first one), or None."""
        if name is None:
            return self.endpoints[0] if self.endpoints else None
        for e in self.endpoints:  # (a loop, not next() over a generator: a follower asks on every Fetch it sends)
            if e.name == name:
                return e
        return None


@dataclass(frozen=True)
class VoterSet:
    """A voter set (Kafka's ``VoterSet``); ``nodes`` sorted by id, one per id."""

    nodes: tuple[VoterNode, ...] = ()
    _by_id: dict[int, VoterNode] = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)
    _ids: frozenset[int] = field(default=frozenset(), init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.nodes, key=lambda n: n.key.id))
        by_id = {n.key.id: n for n in ordered}
        if len(by_id) != len(ordered):
            raise ValueError(f"a voter set has one node per id: {[n.key.id for n in ordered]}")
        object.__setattr__(self, "nodes", ordered)
        object.__setattr__(self, "_by_id", by_id)
        object.__setattr__(self, "_ids", frozenset(by_id))

    @staticmethod
    def static(ids: Iterable[int]) -> VoterSet:
        """kraft.version 0's set from controller.quorum.voters: ids only, no directory ids or endpoints, supported
        kraft.version 0..0 (``VoterSet.fromInetSocketAddresses``)."""
        return VoterSet(tuple(VoterNode(ReplicaKey(i), (), 0, 0) for i in sorted(set(ids))))

    def __len__(self) -> int:
        return len(self.nodes)

    def ids(self) -> frozenset[int]:
        return self._ids

    def sorted_ids(self) -> tuple[int, ...]:
        return tuple(n.key.id for n in self.nodes)

    def keys(self) -> frozenset[ReplicaKey]:
        return frozenset(n.key for n in self.nodes)

    def is_voter(self, key: ReplicaKey) -> bool:
        """``VoterSet.isVoter``: the id is in the set and the directory ids match (a voter without a directory
        id matches any)."""
        node = self._by_id.get(key.id)  # ``VoterNode.is_voter`` inline (the leader asks on every Fetch): same id
        return node is not None and (node.key.directory_id is None or node.key.directory_id == key.directory_id)

    def is_only_voter(self, key: ReplicaKey) -> bool:
        return len(self.nodes) == 1 and self.is_voter(key)

    def majority(self) -> int:
        return len(self.nodes) // 2 + 1

    def node(self, voter_id: int) -> VoterNode | None:
        return self._by_id.get(voter_id)

    def add(self, node: VoterNode) -> VoterSet | None:
        """``VoterSet.addVoter``: None when the id is already a voter (whatever its directory id)."""
        if node.key.id in self._by_id:
            return None
        return VoterSet((*self.nodes, node))

    def remove(self, key: ReplicaKey) -> VoterSet | None:
        """``VoterSet.removeVoter``: None when the id is absent, the key is not exactly the voter's key, or it is
        the last voter."""
        old = self._by_id.get(key.id)
        if old is None or old.key != key or len(self.nodes) <= 1:
            return None
        return VoterSet(tuple(n for n in self.nodes if n.key.id != key.id))

    def update(self, node: VoterNode) -> VoterSet | None:
        """``VoterSet.updateVoter``: None unless ``node.key`` matches the voter (``VoterNode.isVoter``)."""
        old = self._by_id.get(node.key.id)
        if old is None or not old.is_voter(node.key):
            return None
        return VoterSet(tuple(node if n.key.id == node.key.id else n for n in self.nodes))

    def needs_update(self, node: VoterNode) -> bool:
        """``VoterSet.voterNodeNeedsUpdate``: ``node`` is a voter here but its entry differs."""
        old = self._by_id.get(node.key.id)
        return old is not None and old.is_voter(node.key) and old != node

    def overlapping_majority(self, other: VoterSet) -> bool:
        """``VoterSet.hasOverlappingMajority``: at most one key removed and at most one key added."""
        mine, theirs = self.keys(), other.keys()
        return len(mine - theirs) <= 1 and len(theirs - mine) <= 1


def voters_record(vs: VoterSet) -> dict[str, Any]:
    """The VotersRecord body of a voter set (``VoterSet.toVotersRecord``), voters in id order."""
    return {
        "Version": VOTERS_RECORD_VERSION,
        "Voters": [
            {
                "VoterId": n.key.id,
                "VoterDirectoryId": _uuid_of(n.key.directory_id),
                "Endpoints": [{"Name": e.name, "Host": e.host, "Port": e.port} for e in n.endpoints],
                "KRaftVersionFeature": {"MinSupportedVersion": n.kraft_min, "MaxSupportedVersion": n.kraft_max},
            }
            for n in vs.nodes
        ],
    }


def voter_set_from_record(body: dict[str, Any]) -> VoterSet:
    """``VoterSet.fromVotersRecord``. ValueError/KeyError/TypeError for a body that is no voter set."""
    nodes = []
    for v in body["Voters"]:
        feature = v.get("KRaftVersionFeature") or {}
        nodes.append(
            VoterNode(
                ReplicaKey(int(v["VoterId"]), _directory_id_of(v.get("VoterDirectoryId"))),
                tuple(Endpoint(str(e["Name"]), str(e["Host"]), int(e["Port"])) for e in v.get("Endpoints") or ()),
                int(feature.get("MinSupportedVersion", 0)),
                int(feature.get("MaxSupportedVersion", 0)),
            )
        )
    return VoterSet(tuple(nodes))


def kraft_version_record(version: int) -> dict[str, Any]:
    """The KRaftVersionRecord body for ``version``."""
    return {"Version": KRAFT_VERSION_RECORD_VERSION, "KRaftVersion": version}


@dataclass
class VoterHistory:
    """The voter sets and kraft.version levels by log offset (Kafka's ``VoterSetHistory`` and the kraft.version
    ``LogHistory`` of ``KRaftControlRecordStateMachine``). ``static`` is the set when the log has none
    (controller.quorum.voters; empty with only bootstrap servers). A snapshot's records sit at its end offset - 1,
    the bootstrap checkpoint's at -1."""

    static: VoterSet = field(default_factory=VoterSet)
    _voters: list[tuple[int, VoterSet]] = field(default_factory=list)
    _versions: list[tuple[int, int]] = field(default_factory=list)

    def add_voters_at(self, offset: int, vs: VoterSet, strict: bool = True) -> None:
        """``VoterSetHistory.addAt``: offsets strictly increase; a set following one read from the log (offset
        >= 0) must overlap it by a majority (Kafka 3.9.0; KAFKA-17973 relaxed this in 3.9.1: ``strict=False``
        skips it)."""
        if self._voters and offset <= self._voters[-1][0]:
            raise ValueError(f"voter set offset {offset} is not after {self._voters[-1][0]}")
        if (strict and self._voters and self._voters[-1][0] >= 0
                and not self._voters[-1][1].overlapping_majority(vs)):
            raise ValueError(
                f"voter set {vs.sorted_ids()} at offset {offset} has no overlapping majority with "
                f"{self._voters[-1][1].sorted_ids()}"
            )
        self._voters.append((offset, vs))

    def add_kraft_version_at(self, offset: int, version: int) -> None:
        if self._versions and offset <= self._versions[-1][0]:
            raise ValueError(f"kraft.version offset {offset} is not after {self._versions[-1][0]}")
        self._versions.append((offset, version))

    def last(self) -> VoterSet:
        """``lastValue``: the latest set, else the static one."""
        return self._voters[-1][1] if self._voters else self.static

    def last_offset(self) -> int | None:
        """Offset of the latest set read from the log/snapshot/bootstrap, None when only the static set exists."""
        return self._voters[-1][0] if self._voters else None

    def kraft_version(self) -> int:
        """The latest KRaftVersionRecord's level, 0 without one."""
        return self._versions[-1][1] if self._versions else 0

    def voters_at(self, offset: int) -> VoterSet | None:
        """``valueAtOrBefore(offset)``: the set in force at ``offset``, None when no record precedes it."""
        i = bisect.bisect_right([o for o, _ in self._voters], offset)
        return self._voters[i - 1][1] if i else None

    def kraft_version_at(self, offset: int) -> int:
        i = bisect.bisect_right([o for o, _ in self._versions], offset)
        return self._versions[i - 1][1] if i else 0

    def entries(self) -> tuple[tuple[int, VoterSet], ...]:
        return tuple(self._voters)

    def truncate_new(self, end_offset: int) -> None:
        """``truncateNewEntries``: drop entries at offsets >= ``end_offset`` (a follower's log truncation)."""
        self._voters = [(o, v) for o, v in self._voters if o < end_offset]
        self._versions = [(o, v) for o, v in self._versions if o < end_offset]

    def truncate_old(self, start_offset: int) -> None:
        """``truncateOldEntries``: keep only the latest entry at or below ``start_offset`` and those after it."""
        self._voters = _keep_last_at_or_below(self._voters, start_offset)
        self._versions = _keep_last_at_or_below(self._versions, start_offset)

    def clear(self) -> None:
        self._voters = []
        self._versions = []

    def copy(self) -> VoterHistory:
        return replace(self, _voters=list(self._voters), _versions=list(self._versions))


def _keep_last_at_or_below(entries: list[tuple[int, Any]], offset: int) -> list[tuple[int, Any]]:
    below = [e for e in entries if e[0] <= offset]
    return below[-1:] + [e for e in entries if e[0] > offset]
