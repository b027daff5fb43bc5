"""Trace validation (tla/TraceKRaft.tla, real TLC) of traces with pre-vote (KIP-996, Vote v2 ``PreVote``).

* Node traces: simulator runs of reference cores with pre-vote, voters cut off and reconnected
  (BecomeProspective, pre-vote grants and refusals, AbandonProspective, StartElection from Prospective).
* Black-box harness traces, hand-written: a fresh target asks for pre-votes in its own epoch, then (with a
  majority of grants) for real votes in the next, and leads.  A target that bumps its epoch for the pre-vote
  fails.  (An election straight from a timeout stays valid for any node, pre-vote or not: Kafka 4.x falls
  back to it when a peer cannot take Vote v2, which a harness trace need not show; TraceKRaft.tla.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_translate import translate
from kraft_tck.tla.trace_validate import validate_trace
from kraft_tck.traces.sim import SimConfig, simulate

from .harness_rows import write_harness_trace

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

TOPIC = "__cluster_metadata"
CLUSTER = "cluster-prevote-test-1"


# --------------------------------------------------------------------------- node traces


@pytest.mark.tlc
@needs_tlc
@pytest.mark.parametrize(("seed", "profile"), [(0, "reconnect"), (3, "reconnect"), (9, "heavy")])
def test_simulated_node_traces_with_pre_vote_validate(tmp_path: Path, seed: int, profile: str) -> None:
    path = tmp_path / f"{profile}-{seed}.ndjson"
    config = SimConfig(seed=seed, duration_ms=20_000, profile=profile, brokers=0, write_rate=2, pre_vote=True)
    simulate(config, path).raise_for_violation()
    events = [ev.event for ev in translate(path).events]
    assert "BecomeProspective" in events and "HandleVoteRequest" in events
    verdict = validate_trace(path, timeout=300)
    assert verdict.status == "PASS", verdict.reason


@pytest.mark.tlc
@needs_tlc
def test_a_pre_vote_that_changed_the_voters_state_fails(tmp_path: Path) -> None:
    # The same trace with one pre-vote grant reported as a vote: the voter's reported votedId is not what
    # KRaft.tla's HandleVoteRequest leaves for a pre-vote (nothing persisted, KIP-996).
    path = tmp_path / "t.ndjson"
    simulate(SimConfig(seed=0, duration_ms=20_000, profile="reconnect", brokers=0, write_rate=2, pre_vote=True),
             path).raise_for_violation()
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines):
        obj = json.loads(line)
        if obj.get("event") == "HandleVoteRequest" and obj.get("preVote") and "granted" in obj.get("note", ""):
            candidate = int(obj["note"].rsplit(" ", 1)[1])
            assert obj["state"]["votedId"] != candidate
            obj["state"]["votedId"] = candidate
            lines[n] = json.dumps(obj)
            break
    else:
        pytest.fail("no granted pre-vote in the trace")
    path.write_text("\n".join(lines) + "\n")
    verdict = validate_trace(path, timeout=300)
    assert verdict.status == "FAIL"
    assert verdict.failed_event is not None and verdict.failed_event.event == "HandleVoteRequest"


# --------------------------------------------------------------------------- black-box harness traces


def _msg(api: str, kind: str, corr: int, src: int, dst: int, part: dict[str, Any], version: int) -> dict[str, Any]:
    key = {"Vote": 52, "BeginQuorumEpoch": 53}[api]
    body: dict[str, Any]
    if kind == "request":
        body = {"ClusterId": CLUSTER, "Topics": [{"TopicName": TOPIC, "Partitions": [dict(part, PartitionIndex=0)]}]}
    else:
        body = {"ErrorCode": 0, "Topics": [{"TopicName": TOPIC, "Partitions": [dict(part, PartitionIndex=0)]}]}
    return {"api": api, "apiKey": key, "kind": kind, "version": version, "correlationId": corr,
            "from": src, "to": dst, "body": body}  # fmt: skip


def target_vote(corr: int, to: int, epoch: int, pre_vote: bool) -> tuple[str, dict[str, Any]]:
    """The target's (node 1, empty log) Vote v2 request, received by virtual voter ``to``."""
    part = {"CandidateEpoch": epoch, "CandidateId": 1, "LastOffsetEpoch": 0, "LastOffset": 0, "PreVote": pre_vote}
    return "Receive", _msg("Vote", "request", corr, 1, to, part, 2)


def answer(corr: int, voter: int, epoch: int, granted: bool) -> tuple[str, dict[str, Any]]:
    part = {"ErrorCode": 0, "LeaderId": -1, "LeaderEpoch": epoch, "VoteGranted": granted}
    return "Send", _msg("Vote", "response", corr, voter, 1, part, 2)


def begin_epoch(corr: int, to: int, epoch: int) -> tuple[str, dict[str, Any]]:
    return "Receive", _msg("BeginQuorumEpoch", "request", corr, 1, to, {"LeaderId": 1, "LeaderEpoch": epoch}, 1)


#: A fresh target (epoch 0) asks both virtual voters for pre-votes in epoch 0; voter 2 grants; the target,
#: with two of three, becomes the candidate of epoch 1 and asks for real votes; voter 2 votes; it leads.
ELECTION = [
    target_vote(1, 2, 0, True), target_vote(2, 3, 0, True), answer(1, 2, 0, True),
    target_vote(3, 2, 1, False), target_vote(4, 3, 1, False), answer(3, 2, 1, True),
    begin_epoch(5, 2, 1), begin_epoch(6, 3, 1),
]  # fmt: skip


def _write(path: Path, rows: list[tuple[str, dict[str, Any]]]) -> Path:
    return write_harness_trace(path, rows, run="prevote", cluster_id=CLUSTER)


@pytest.mark.tlc
@needs_tlc
def test_a_black_box_pre_vote_election_passes(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.ndjson", ELECTION)
    trace = translate(path)
    assert trace.target == 1 and not trace.not_fresh
    verdict = validate_trace(path, timeout=300)
    assert verdict.status == "PASS", verdict.reason


def leader_begins(corr: int, epoch: int) -> tuple[str, dict[str, Any]]:
    return "Send", _msg("BeginQuorumEpoch", "request", corr, 2, 1, {"LeaderId": 2, "LeaderEpoch": epoch}, 1)


def target_begins_answer(corr: int, epoch: int) -> tuple[str, dict[str, Any]]:
    part = {"ErrorCode": 0, "LeaderId": 2, "LeaderEpoch": epoch}
    return "Receive", _msg("BeginQuorumEpoch", "response", corr, 1, 2, part, 1)


def target_fetch(corr: int, epoch: int, offset: int = 0, last_epoch: int = 0) -> tuple[str, dict[str, Any]]:
    part = {"Partition": 0, "CurrentLeaderEpoch": epoch, "FetchOffset": offset, "LastFetchedEpoch": last_epoch}
    body = {"ClusterId": CLUSTER, "MaxWaitMs": 150, "Topics": [{"Partitions": [part]}],
            "ReplicaState": {"ReplicaId": 1, "ReplicaEpoch": -1}}  # fmt: skip
    return "Receive", {"api": "Fetch", "apiKey": 1, "kind": "request", "version": 17, "correlationId": corr,
                       "from": 1, "to": 2, "body": body}  # fmt: skip


def leader_fetch_answer(corr: int, epoch: int) -> tuple[str, dict[str, Any]]:
    """The leader's LeaderChange record of ``epoch`` at offset 0."""
    batch = {"baseOffset": 0, "lastOffset": 0, "epoch": epoch, "control": True, "digest": "30ec10a2"}
    part = {"PartitionIndex": 0, "ErrorCode": 0, "HighWatermark": -1, "LogStartOffset": 0,
            "CurrentLeader": {"LeaderId": 2, "LeaderEpoch": epoch}, "Records": {"bytes": 80, "batches": [batch]}}
    body = {"ThrottleTimeMs": 0, "ErrorCode": 0, "SessionId": 0, "Responses": [{"Partitions": [part]}]}
    return "Send", {"api": "Fetch", "apiKey": 1, "kind": "response", "version": 17, "correlationId": corr,
                    "from": 2, "to": 1, "body": body}  # fmt: skip


def pre_vote_from_3(corr: int, epoch: int) -> tuple[str, dict[str, Any]]:
    part = {"CandidateEpoch": epoch, "CandidateId": 3, "LastOffsetEpoch": 1, "LastOffset": 1, "PreVote": True}
    return "Send", _msg("Vote", "request", corr, 3, 1, part, 2)


def target_pre_vote_answer(corr: int, epoch: int, granted: bool) -> tuple[str, dict[str, Any]]:
    part = {"ErrorCode": 0, "LeaderId": 2, "LeaderEpoch": epoch, "VoteGranted": granted}
    return "Receive", _msg("Vote", "response", corr, 1, 3, part, 2)


#: Virtual leader 2 announces epoch 1; the target follows and fetches, leader 2 answers with its LeaderChange
#: record and the target's next fetch, from offset 1, shows it took the answer; then voter 3, whose log is
#: as long (up to date), asks the target for a pre-vote in epoch 1.
FOLLOWING = [leader_begins(1, 1), target_begins_answer(1, 1), target_fetch(100, 1), leader_fetch_answer(100, 1),
             target_fetch(101, 1, offset=1, last_epoch=1)]


@pytest.mark.tlc
@needs_tlc
@pytest.mark.parametrize("granted", [False, True], ids=["refused", "granted"])
def test_a_follower_that_fetched_refuses_a_pre_vote(tmp_path: Path, granted: bool) -> None:
    # Kafka 4.x FollowerState.canGrantVote (KafkaRaftClientPreVoteTest.testHandlePreVoteRequestAsFollower):
    # a follower that has fetched from its leader refuses a pre-vote; granting it fails at that answer.
    # Before the leader's answer, the same pre-vote may be granted.
    rows = [*FOLLOWING, pre_vote_from_3(7, 1), target_pre_vote_answer(7, 1, granted)]
    verdict = validate_trace(_write(tmp_path / "t.ndjson", rows), timeout=300)
    if not granted:
        assert verdict.status == "PASS", verdict.reason
    else:
        assert verdict.status == "FAIL", verdict.reason
        assert verdict.failed_event is not None and verdict.failed_event.seq == len(rows) - 1
    early = [*FOLLOWING[:3], pre_vote_from_3(7, 1), target_pre_vote_answer(7, 1, True)]
    early[3][1]["body"]["Topics"][0]["Partitions"][0].update(LastOffsetEpoch=0, LastOffset=0)
    assert validate_trace(_write(tmp_path / "early.ndjson", early), timeout=300).status == "PASS"
