"""KIP-853 voter sets (reference/voters.py) against Kafka's ``VoterSetTest`` and ``VoterSetHistoryTest``, and the
VotersRecord/KRaftVersionRecord bodies against spec/messages (encoded and decoded by the spec codec)."""

from __future__ import annotations

import uuid

import pytest
from kraft_tck.reference.messages import ZERO_UUID, Endpoint, ReplicaKey
from kraft_tck.reference.voters import (
    VoterHistory,
    VoterNode,
    VoterSet,
    kraft_version_record,
    voter_set_from_record,
    voters_record,
)
from kraft_tck.spec import codec
from kraft_tck.spec.records import CONTROL_SCHEMAS, ControlType

D1, D2, D3, D4 = "AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw", "AAAAAAAAAAAAAAAAAAAABA"


def node(i: int, d: str | None, port: int | None = None) -> VoterNode:
    return VoterNode(ReplicaKey(i, d), (Endpoint("CONTROLLER", "localhost", port or 9990 + i),), 0, 1)


def three() -> VoterSet:
    return VoterSet((node(3, D3), node(1, D1), node(2, D2)))


def test_nodes_are_sorted_and_ids_unique() -> None:
    vs = three()
    assert vs.sorted_ids() == (1, 2, 3) and vs.ids() == frozenset({1, 2, 3})
    assert vs.majority() == 2 and len(vs) == 3
    with pytest.raises(ValueError):
        VoterSet((node(1, D1), node(1, D2)))


def test_static_set_has_no_directory_ids_and_matches_any() -> None:
    """``VoterSet.fromInetSocketAddresses``: ZERO_UUID keys, kraft.version 0..0; ``VoterNode.isVoter`` then
    matches any directory id of that id (VoterSetTest.testIsVoterWithoutDirectoryId)."""
    vs = VoterSet.static({3, 1, 2})
    assert vs.sorted_ids() == (1, 2, 3)
    assert vs.node(1) == VoterNode(ReplicaKey(1), (), 0, 0)
    assert vs.is_voter(ReplicaKey(1, D4)) and vs.is_voter(ReplicaKey(1))
    assert not vs.is_voter(ReplicaKey(4))


def test_is_voter_with_directory_id() -> None:
    """VoterSetTest.testIsVoterWithDirectoryId: a voter with a directory id matches only that one."""
    vs = three()
    assert vs.is_voter(ReplicaKey(1, D1))
    assert not vs.is_voter(ReplicaKey(1, D2)) and not vs.is_voter(ReplicaKey(1))
    assert vs.is_only_voter(ReplicaKey(1, D1)) is False
    assert VoterSet((node(1, D1),)).is_only_voter(ReplicaKey(1, D1))


def test_add_voter() -> None:
    """VoterSetTest.testAddVoter: an id already present (any directory id) cannot be added."""
    vs = three()
    assert vs.add(node(1, D4)) is None
    added = vs.add(node(4, D4))
    assert added is not None and added.sorted_ids() == (1, 2, 3, 4) and vs.sorted_ids() == (1, 2, 3)


def test_remove_voter() -> None:
    """VoterSetTest.testRemoveVoter: the key must match exactly; the last voter stays."""
    vs = three()
    assert vs.remove(ReplicaKey(4, D4)) is None
    assert vs.remove(ReplicaKey(1, D2)) is None
    assert vs.remove(ReplicaKey(1)) is None  # exact key: no directory id is not D1
    removed = vs.remove(ReplicaKey(1, D1))
    assert removed is not None and removed.sorted_ids() == (2, 3)
    assert VoterSet((node(1, D1),)).remove(ReplicaKey(1, D1)) is None


def test_update_voter() -> None:
    """VoterSetTest.testUpdateVoter: only a node whose key matches (``isVoter``) is replaced."""
    vs = three()
    moved = node(1, D1, port=7000)
    updated = vs.update(moved)
    assert updated is not None and updated.node(1) == moved
    assert vs.update(node(1, D2)) is None and vs.update(node(4, D4)) is None
    assert vs.needs_update(moved) and not vs.needs_update(node(1, D1)) and not vs.needs_update(node(1, D2))
    static = VoterSet.static({1, 2})
    assert static.update(node(1, D1)) is not None  # no directory id matches any


def test_overlapping_majority() -> None:
    """VoterSetTest.testOverlappingMajority: at most one key removed and at most one added."""
    vs = three()
    assert vs.overlapping_majority(vs)
    plus = vs.add(node(4, D4))
    minus = vs.remove(ReplicaKey(3, D3))
    assert plus is not None and minus is not None
    assert vs.overlapping_majority(plus) and vs.overlapping_majority(minus)
    swapped = minus.add(node(4, D4))
    assert swapped is not None and vs.overlapping_majority(swapped)
    assert not minus.overlapping_majority(plus)  # 3 and 4 differ one way, 4 the other: 2 added
    other_dir = VoterSet((node(1, D4), node(2, D4), node(3, D3)))
    assert not vs.overlapping_majority(other_dir)


def test_voters_record_round_trip_through_codec() -> None:
    """``toVotersRecord`` / ``fromVotersRecord`` with the field names of spec/messages/VotersRecord.json."""
    vs = VoterSet((node(1, D1), VoterNode(ReplicaKey(2), (), 0, 0)))
    body = voters_record(vs)
    assert body["Version"] == 0
    assert body["Voters"][0] == {
        "VoterId": 1,
        "VoterDirectoryId": uuid.UUID(int=1),
        "Endpoints": [{"Name": "CONTROLLER", "Host": "localhost", "Port": 9991}],
        "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1},
    }
    assert body["Voters"][1]["VoterDirectoryId"] == uuid.UUID(int=0)
    schema = CONTROL_SCHEMAS[ControlType.KRAFT_VOTERS]
    decoded = codec.decode_data(schema, 0, codec.encode_data(schema, 0, body))
    assert voter_set_from_record(decoded) == vs
    assert voter_set_from_record(body) == vs
    # A Uuid string body (as a hand-written record) reads too; ZERO_UUID is no directory id.
    text = {"Voters": [{"VoterId": 5, "VoterDirectoryId": ZERO_UUID, "Endpoints": [],
                        "KRaftVersionFeature": {"MinSupportedVersion": 0, "MaxSupportedVersion": 1}}]}
    assert voter_set_from_record(text).node(5) == VoterNode(ReplicaKey(5, None), (), 0, 1)


def test_kraft_version_record_through_codec() -> None:
    body = kraft_version_record(1)
    assert body == {"Version": 0, "KRaftVersion": 1}
    schema = CONTROL_SCHEMAS[ControlType.KRAFT_VERSION]
    decoded = codec.decode_data(schema, 0, codec.encode_data(schema, 0, body))
    assert decoded["KRaftVersion"] == 1


def test_history_latest_and_static_fallback() -> None:
    """VoterSetHistoryTest.testStaticVoterSet / testAddAt: the latest entry, else the static set."""
    static = VoterSet.static({1, 2, 3})
    h = VoterHistory(static)
    assert h.last() == static and h.last_offset() is None and h.kraft_version() == 0
    vs = three()
    h.add_voters_at(-1, vs)  # the bootstrap checkpoint
    h.add_kraft_version_at(-1, 1)
    assert h.last() == vs and h.last_offset() == -1 and h.kraft_version() == 1
    plus = vs.add(node(4, D4))
    assert plus is not None
    h.add_voters_at(10, plus)
    assert h.voters_at(9) == vs and h.voters_at(10) == plus and h.voters_at(-2) is None
    assert h.kraft_version_at(5) == 1 and h.kraft_version_at(-2) == 0
    with pytest.raises(ValueError):
        h.add_voters_at(10, plus)  # offsets strictly increase


def test_history_refuses_non_overlapping_change_after_a_log_entry() -> None:
    """VoterSetHistoryTest.testAddAtNonOverlappingMajority (Kafka 3.9.0); entries from config or the
    bootstrap checkpoint (offset < 0) are exempt."""
    h = VoterHistory()
    h.add_voters_at(-1, VoterSet((node(9, D4),)))
    h.add_voters_at(5, three())  # after a bootstrap entry: no overlap needed
    with pytest.raises(ValueError):
        h.add_voters_at(6, VoterSet((node(1, D2), node(2, D1), node(3, D4))))


def test_history_truncation_rolls_back() -> None:
    """VoterSetHistoryTest.testTruncateTo / testTrimPrefixTo: truncation drops entries at and after the offset;
    cleaning keeps the latest entry at or before the new start."""
    vs = three()
    plus, minus = vs.add(node(4, D4)), vs.remove(ReplicaKey(3, D3))
    assert plus is not None and minus is not None
    h = VoterHistory(VoterSet.static({1}))
    h.add_kraft_version_at(0, 1)
    h.add_voters_at(0, vs)
    h.add_voters_at(10, plus)
    h.add_voters_at(20, vs)
    h.add_voters_at(30, minus)
    copy = h.copy()
    h.truncate_new(20)
    assert h.last() == plus and h.last_offset() == 10 and h.kraft_version() == 1
    h.truncate_new(0)
    assert h.last() == VoterSet.static({1}) and h.kraft_version() == 0
    assert copy.last() == minus  # a copy is independent
    copy.truncate_old(25)
    assert [o for o, _ in copy.entries()] == [20, 30]
    copy.truncate_old(30)
    assert [o for o, _ in copy.entries()] == [30]
    copy.clear()
    assert copy.last_offset() is None
