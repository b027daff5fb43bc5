"""Core tests: the only voter of its set starts an election as it starts, without waiting for its election timeout
(Kafka's ``KafkaRaftClient.initialize``: ``quorum.isOnlyVoter() && !quorum.isCandidate()`` -> candidate in 3.9;
Kafka 4.x with pre-vote: Unattached, Follower or Resigned -> prospective, short-circuited to candidate and leader).
Each test names the Kafka test it mirrors (``KafkaRaftClientTest``)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from kraft_tck.reference.core import CoreConfig, KRaftCore
from kraft_tck.reference.io import ElectionState, Ready
from kraft_tck.reference.log import Log
from kraft_tck.reference.messages import Endpoint, ReplicaKey
from kraft_tck.reference.roles import Leader, Unattached
from kraft_tck.reference.voters import VoterNode, VoterSet
from kraft_tck.spec.records import ControlType, data_batch

CID = "cid"
DIR = "AAAAAAAAAAAAAAAAAAAABA"


def start(durable: ElectionState | None = None, *, voters: frozenset[int] = frozenset({1}), log: Log | None = None,
          **kw: Any) -> tuple[KRaftCore, Ready]:
    cfg = CoreConfig(1, voters=voters, cluster_id=CID, **kw)
    return KRaftCore.restart(cfg, durable or ElectionState(), log or Log(), random.Random(3), 0)


def names(ready: Ready) -> list[str]:
    return [e["event"] for e in ready.trace]


@pytest.mark.parametrize("pre_vote", [False, True])
def test_initialize_single_member_quorum(pre_vote: bool) -> None:
    """testInitializeSingleMemberQuorum: a fresh sole voter leads epoch 1 as it starts (time 0: no election timeout
    waited), and its LeaderChange is committed at once (its own majority)."""
    core, ready = start(pre_vote=pre_vote)
    assert isinstance(core.role, Leader) and core.epoch == 1
    expected = ["Restart", "BecomeProspective", "StartElection", "BecomeLeader"] if pre_vote else [
        "Restart", "StartElection", "BecomeLeader"]
    assert names(ready) == expected
    assert ready.trace[1]["cause"] == "OnlyVoter"
    assert ready.persist is not None and (ready.persist.leader_epoch, ready.persist.leader_id) == (1, 1)
    assert core.high_watermark == core.log.end_offset == 1


def test_initialize_as_leader_from_state_store_single_member_quorum() -> None:
    """testInitializeAsLeaderFromStateStoreSingleMemberQuorum: quorum-state says it led epoch 2; it does not lead
    that epoch again (Resigned at restart) but campaigns at once: leader of epoch 3, its log's last epoch 3."""
    log = Log([data_batch(0, 2, (b"a",))])
    core, ready = start(ElectionState(2, 1, 1), log=log)
    assert isinstance(core.role, Leader) and core.epoch == 3
    assert names(ready) == ["Restart", "StartElection", "BecomeLeader"]
    assert core.log.last_fetched_epoch == 3 and core.high_watermark == core.log.end_offset == 2


def test_initialize_as_resigned_with_pre_vote_leads_two_epochs_on() -> None:
    """Kafka 4.x ``initialize`` makes a restarted Resigned sole voter Prospective in its own epoch (leader in epoch
    3 here); the core, as on every Resigned timeout (``become_prospective``, tla/KRaft.tla BecomeProspective), moves
    to epoch + 1 first: leader in epoch 4. Only the epoch number differs; it leads at once either way."""
    core, ready = start(ElectionState(2, 1, 1), pre_vote=True)
    assert isinstance(core.role, Leader) and core.epoch == 4
    assert names(ready) == ["Restart", "BecomeProspective", "StartElection", "BecomeLeader"]


def test_initialize_as_candidate_and_become_leader() -> None:
    """testInitializeAsCandidateAndBecomeLeader: quorum-state holds its own vote in epoch 2 (a Candidate); its own
    vote is the majority, so it leads epoch 2 at its first poll, no new election (``onBecomeCandidate``)."""
    core, ready = start(ElectionState(2, -1, 1))
    assert isinstance(core.role, Leader) and core.epoch == 2
    assert names(ready) == ["Restart", "BecomeLeader"]


def test_a_voter_of_three_still_waits_its_election_timeout() -> None:
    """testInitializeAsFollowerEmptyLog's counterpart: with other voters, nothing changes at start (Unattached until
    its election timeout)."""
    core, ready = start(voters=frozenset({1, 2, 3}))
    assert isinstance(core.role, Unattached) and core.epoch == 0
    assert names(ready) == ["Restart"]
    assert ready.next_deadline_ms is not None and ready.next_deadline_ms >= 1000


def test_standalone_node_leads_at_once_and_writes_its_voter_set() -> None:
    """KIP-853 ``format --standalone``: the bootstrap checkpoint names this node the only voter (kraft.version 1);
    it leads at start and its first batch holds LeaderChange, KRaftVersion and Voters
    (``KafkaRaftClientReconfigTest.testLeaderWritesBootstrapRecords``, with one voter)."""
    me = VoterNode(ReplicaKey(1, DIR), (Endpoint("CONTROLLER", "localhost", 9001),), 0, 1)
    core, _ = start(voters=frozenset(), bootstrap_voters=VoterSet((me,)), directory_id=DIR,
                        listeners=me.endpoints)
    assert isinstance(core.role, Leader) and core.epoch == 1
    [batch] = core.log.iter_batches()
    assert [int.from_bytes(r.key or b"", "big") for r in batch.records] == [
        ControlType.LEADER_CHANGE, ControlType.KRAFT_VERSION, ControlType.KRAFT_VOTERS]
    assert core.high_watermark == 3 and core.voter_set().ids() == {1}


def test_an_observer_does_not_campaign_at_start() -> None:
    """An observer (not in its voter set) is never a candidate (``QuorumState.transitionToCandidate`` throws)."""
    core, ready = start(voters=frozenset({2}))
    assert isinstance(core.role, Unattached) and core.epoch == 0
    assert "StartElection" not in names(ready)
