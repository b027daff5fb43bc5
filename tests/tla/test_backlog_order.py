"""Trace validation of what a busy machine does to the order of the recorded messages.

Under load the harness reads its virtual voters' connections one after another, in backlogs: the target's
heartbeat to voter 3 (a BeginQuorumEpoch it sent while it led) is read after what it later told voter 2
(its resignation, its next election); a Vote request the target's request timeout resent while the
harness's answer was on its way is read after that answer; the target's requests are read after its
answers of a later state.  (And the node traces a fetch's answer after a timer that fired in the same step:
tests/tla/test_real_traces.py.)  None of these is a new step of the target.  Each story is a real failure of
`make conformance-runs` under load, here as a hand-written trace with real TLC; each has a twin that must
still fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_translate import translate
from kraft_tck.tla.trace_validate import validate_trace

from .harness_rows import Row, write_harness_trace

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

TOPIC = "__cluster_metadata"
CLUSTER = "cluster-backlog-test-1"


def _msg(api: str, kind: str, corr: int, src: int, dst: int, part: dict[str, Any]) -> dict[str, Any]:
    key = {"Vote": 52, "BeginQuorumEpoch": 53, "EndQuorumEpoch": 54}[api]
    part = dict(part, PartitionIndex=0)
    if kind == "request":
        body: dict[str, Any] = {"ClusterId": CLUSTER, "Topics": [{"TopicName": TOPIC, "Partitions": [part]}]}
    else:
        body = {"ErrorCode": 0, "Topics": [{"TopicName": TOPIC, "Partitions": [dict(part, ErrorCode=0)]}]}
    return {"api": api, "apiKey": key, "kind": kind, "version": 1, "correlationId": corr, "from": src, "to": dst,
            "body": body}  # fmt: skip


def vote(corr: int, voter: int, epoch: int, log_end: int = 0) -> Row:
    """The target (1) asks ``voter`` for its vote: from its empty log, or from the LeaderChange record its
    leadership of epoch 1 wrote (KIP-595 "Leader Election": a new leader appends one)."""
    part = {"CandidateEpoch": epoch, "CandidateId": 1, "LastOffsetEpoch": 1 if log_end else 0, "LastOffset": log_end}
    return "Receive", _msg("Vote", "request", corr, 1, voter, part)


def grant(corr: int, voter: int, epoch: int, granted: bool = True) -> Row:
    part = {"LeaderId": -1, "LeaderEpoch": epoch, "VoteGranted": granted}
    return "Send", _msg("Vote", "response", corr, voter, 1, part)


def begin(corr: int, voter: int, epoch: int) -> Row:
    """The target announces itself leader of ``epoch`` (BeginQuorumEpoch; again later as its heartbeat)."""
    return "Receive", _msg("BeginQuorumEpoch", "request", corr, 1, voter, {"LeaderId": 1, "LeaderEpoch": epoch})


def begun(corr: int, voter: int, epoch: int) -> Row:
    return "Send", _msg("BeginQuorumEpoch", "response", corr, voter, 1, {"LeaderId": 1, "LeaderEpoch": epoch})


def end(corr: int, voter: int, epoch: int) -> Row:
    """The target resigns ``epoch`` (check quorum: no voter fetched), naming both voters as successors."""
    part = {"LeaderId": 1, "LeaderEpoch": epoch, "PreferredCandidates": [{"CandidateId": 2}, {"CandidateId": 3}]}
    return "Receive", _msg("EndQuorumEpoch", "request", corr, 1, voter, part)


def ended(corr: int, voter: int, epoch: int) -> Row:
    return "Send", _msg("EndQuorumEpoch", "response", corr, voter, 1, {"LeaderId": 1, "LeaderEpoch": epoch})


# KIP-595 "Leader Election": the fresh target wins epoch 1 with both votes and announces it
ELECTED = [vote(1, 2, 1), vote(1, 3, 1), grant(1, 2, 1), grant(1, 3, 1), begin(2, 2, 1), begin(2, 3, 1),
           begun(2, 2, 1), begun(2, 3, 1)]  # fmt: skip


def write(path: Path, rows: list[Row]) -> Path:
    return write_harness_trace(path, rows, run="backlog", cluster_id=CLUSTER)


@needs_tlc
def test_a_heartbeat_read_after_the_targets_later_election_passes(tmp_path: Path) -> None:
    # Kafka 3.9+ (LeaderState's BeginQuorumEpoch timer): the leader's heartbeat to both voters; no voter
    # fetches, so check quorum (KIP-595 "Check Quorum") resigns it (EndQuorumEpoch) and it stands in epoch 2.
    # The harness reads voter 2's backlog first, then voter 3's: the heartbeat to 3 comes after Vote(2).
    backlog = [begin(3, 2, 1), end(4, 2, 1), vote(5, 2, 2, 1), begin(3, 3, 1), end(4, 3, 1), vote(5, 3, 2, 1)]
    answers = [begun(3, 2, 1), ended(4, 2, 1), grant(5, 2, 2, False), begun(3, 3, 1), ended(4, 3, 1),
               grant(5, 3, 2, False)]  # fmt: skip
    verdict = validate_trace(write(tmp_path / "heartbeat.ndjson", ELECTED + backlog + answers))
    assert verdict.passed, verdict.reason


@needs_tlc
def test_a_heartbeat_of_an_epoch_the_target_never_led_fails(tmp_path: Path) -> None:
    # the same backlog from a target that lost its election of epoch 1 (both voters refused): it never led
    # epoch 1, so no BeginQuorumEpoch of it can be in any backlog (KIP-595 "BeginQuorumEpoch": the leader's)
    lost = [vote(1, 2, 1), vote(1, 3, 1), grant(1, 2, 1, False), grant(1, 3, 1, False)]
    rows = [*lost, vote(5, 2, 2), begin(3, 3, 1), vote(5, 3, 2)]
    verdict = validate_trace(write(tmp_path / "never-led.ndjson", rows))
    assert not verdict.passed
    assert verdict.failed_event is not None and verdict.failed_event.seq == 5, verdict.reason


@needs_tlc
def test_a_vote_resent_after_its_answer_passes(tmp_path: Path) -> None:
    # the target's request timeout resends Vote(1) to voter 2 while the refusal was on its way: the harness
    # reads the resend after it answered; the same request again, no second election (KafkaRaftClient resends
    # a Vote until answered)
    rows = [vote(1, 2, 1), vote(1, 3, 1), grant(1, 2, 1, False), vote(2, 2, 1), grant(2, 2, 1, False),
            grant(1, 3, 1, False)]  # fmt: skip
    path = write(tmp_path / "resent.ndjson", rows)
    receives = [ev for ev in translate(path).events if ev.event == "EnvironmentReceive"]
    assert [(ev.msg["to"], ev.msg["epoch"]) for ev in receives] == [(2, 1), (3, 1)]
    verdict = validate_trace(path)
    assert verdict.passed, verdict.reason
    # ... but a Vote of a new epoch after the answers is a new election, a row the model must explain
    rows += [vote(3, 2, 2), vote(3, 3, 2)]
    events = translate(write(tmp_path / "next.ndjson", rows)).events
    receives = [ev for ev in events if ev.event == "EnvironmentReceive"]
    assert [(ev.msg["to"], ev.msg["epoch"]) for ev in receives] == [(2, 1), (3, 1), (2, 2), (3, 2)]


def announce(corr: int, epoch: int) -> Row:
    """Virtual voter 2 announces itself leader of ``epoch``."""
    return "Send", _msg("BeginQuorumEpoch", "request", corr, 2, 1, {"LeaderId": 2, "LeaderEpoch": epoch})


def follows(corr: int, epoch: int) -> Row:
    """The target's answer: it follows leader 2 in ``epoch``."""
    return "Receive", _msg("BeginQuorumEpoch", "response", corr, 1, 2, {"LeaderId": 2, "LeaderEpoch": epoch})


def fetch(corr: int, epoch: int) -> Row:
    """The target fetches from leader 2 in ``epoch``, from its empty log."""
    part = {"Partition": 0, "CurrentLeaderEpoch": epoch, "FetchOffset": 0, "LastFetchedEpoch": 0}
    body = {"ClusterId": CLUSTER, "MaxWaitMs": 150, "Topics": [{"Partitions": [part]}],
            "ReplicaState": {"ReplicaId": 1, "ReplicaEpoch": -1}}  # fmt: skip
    return "Receive", {"api": "Fetch", "apiKey": 1, "kind": "request", "version": 17, "correlationId": corr,
                       "from": 1, "to": 2, "body": body}  # fmt: skip


def fetched(corr: int, epoch: int) -> Row:
    """Leader 2 answers the target's Fetch: nothing new, high watermark unknown."""
    part = {"PartitionIndex": 0, "ErrorCode": 0, "HighWatermark": -1, "LogStartOffset": 0,
            "CurrentLeader": {"LeaderId": 2, "LeaderEpoch": epoch}, "Records": {"bytes": 0, "batches": []}}
    body = {"ThrottleTimeMs": 0, "ErrorCode": 0, "SessionId": 0, "Responses": [{"Partitions": [part]}]}
    return "Send", {"api": "Fetch", "apiKey": 1, "kind": "response", "version": 17, "correlationId": corr,
                    "from": 2, "to": 1, "body": body}  # fmt: skip


@needs_tlc
def test_a_fetch_of_the_old_epoch_read_after_the_answer_of_the_new_one_passes(tmp_path: Path) -> None:
    # KIP-595 "BeginQuorumEpoch Request Handling" (run 2 of 20, KIP-595/Divergence/3, at load 28): the target
    # follows leader 2 in epoch 1 and fetches.  Before it reads leader 2's announcement of epoch 2 it fetches
    # again in epoch 1, its fetch timeout makes it a candidate of epoch 2 (Votes to 3 and 2), and only then does
    # it follow leader 2 in epoch 2.  The harness reads its answer to the announcement (on the harness's own
    # connection) before the Fetch and the Votes (on the target's): three hidden steps before one row, more
    # than the model takes, so only the send order (trace_translate._read_in_send_order) has a behaviour
    rows = [announce(1, 1), follows(1, 1), fetch(1, 1), fetched(1, 1), announce(2, 2), follows(2, 2),
            vote(5, 3, 2), fetch(2, 1), vote(6, 2, 2), fetch(3, 2)]  # fmt: skip
    path = write(tmp_path / "backlog.ndjson", rows)
    recorded = [ev.seq for ev in translate(path).events]
    ordered = [ev.seq for ev in translate(path, send_order=True).events]
    assert recorded.index(5) < recorded.index(7) and ordered.index(7) < ordered.index(5)
    assert ordered.index(6) < ordered.index(5) and ordered.index(8) < ordered.index(5)
    verdict = validate_trace(path)
    assert verdict.passed, verdict.reason
    assert "send order" in verdict.reason


@needs_tlc
def test_an_epoch_going_back_on_one_connection_still_fails(tmp_path: Path) -> None:
    # the same Fetches in the other order on the target's one connection to voter 2 (TCP keeps it): a follower
    # of epoch 2 fetching in epoch 1 again, which no behaviour of KRaft does (epochs never go back)
    rows = [announce(1, 1), follows(1, 1), fetch(1, 1), fetched(1, 1), announce(2, 2), follows(2, 2), fetch(2, 2),
            fetched(2, 2), fetch(3, 1)]  # fmt: skip
    verdict = validate_trace(write(tmp_path / "back.ndjson", rows))
    assert not verdict.passed
    assert verdict.failed_event is not None and verdict.failed_event.seq == 8, verdict.reason


def fenced(corr: int, epoch: int) -> Row:
    """The target refuses leader 2's announcement: it is at ``epoch`` already and knows no leader of it."""
    part = {"PartitionIndex": 0, "ErrorCode": 74, "LeaderId": -1, "LeaderEpoch": epoch}
    body = {"ErrorCode": 0, "Topics": [{"TopicName": TOPIC, "Partitions": [part]}]}
    return "Receive", {"api": "BeginQuorumEpoch", "apiKey": 53, "kind": "response", "version": 1,
                       "correlationId": corr, "from": 1, "to": 2, "body": body}  # fmt: skip


def asked(corr: int, epoch: int) -> list[Row]:
    """Voter 3 asks the target, a candidate of ``epoch``, for its vote; the target refuses (it voted for itself)."""
    part = {"CandidateEpoch": epoch, "CandidateId": 3, "LastOffsetEpoch": 0, "LastOffset": 0}
    answer = {"LeaderId": -1, "LeaderEpoch": epoch, "VoteGranted": False}
    return [("Send", _msg("Vote", "request", corr, 3, 1, part)),
            ("Receive", _msg("Vote", "response", corr, 1, 3, answer))]


@needs_tlc
def test_a_candidates_refusal_read_before_its_vote_requests_passes(tmp_path: Path) -> None:
    # KIP-595/CrashWindow/2 at load 20: the target, following leader 2 in epoch 1, loses it and campaigns in
    # epoch 2 (Vote requests nobody answers), then in epoch 3; then it refuses leader 2's announcement of epoch
    # 2 (FENCED_LEADER_EPOCH, epoch 3, no leader), which the harness reads before the Vote requests of epoch 3
    # it sent first, on its own connections: three steps before one row in the recorded order.  An answer
    # naming no leader in epoch 3 comes after the target's Vote requests of epoch 3 (trace_translate._standing).
    story = [announce(1, 1), follows(1, 1), announce(2, 2), fenced(2, 3), vote(1, 2, 3), vote(1, 3, 3)]
    for corr in range(10, 19):  # the recording goes on (its end would excuse a lost message: NeverReceived)
        story += asked(corr, 3)
    path = write(tmp_path / "refusal.ndjson", story)
    ordered = [ev.seq for ev in translate(path, send_order=True).events]
    assert ordered.index(4) < ordered.index(3) and ordered.index(5) < ordered.index(3)
    verdict = validate_trace(path)
    assert verdict.passed, verdict.reason
    assert "send order" in verdict.reason  # the recorded order alone has no behaviour
