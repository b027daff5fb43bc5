"""The leader's BeginQuorumEpoch heartbeat is a behaviour of tla/KRaft.tla (``SendBeginQuorumEpoch``).

Kafka 3.9+ (KAFKA-16536: ``KafkaRaftClient.maybeSendBeginQuorumEpochRequests``,
``KafkaRaftClientTest.testBeginQuorumEpochHeartbeat``) has a leader send BeginQuorumEpoch to every other
voter every fetch.timeout/2 for as long as it leads, after the voter acknowledged too; the reference node
does the same. A black-box harness trace sees such a request arrive after the harness answered the last
one: with no copy in flight the model must produce a new one, which only ``SendBeginQuorumEpoch`` does
(the black-box network neither copies nor loses). Hand-written harness traces, real TLC.

The story: target 1 campaigns in epoch 1 (Vote to the virtual voters 2 and 3), both grant it, it becomes
leader and announces itself (BeginQuorumEpoch), both acknowledge; then the heartbeat.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_translate import translate
from kraft_tck.tla.trace_validate import validate_trace

from .harness_rows import write_harness_trace

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

TOPIC = "__cluster_metadata"
CLUSTER = "cluster-heartbeat-test-1"
TARGET = 1


def _msg(api: str, kind: str, corr: int, src: int, dst: int, part: dict[str, Any]) -> dict[str, Any]:
    key = {"Vote": 52, "BeginQuorumEpoch": 53, "EndQuorumEpoch": 54}[api]
    body: dict[str, Any] = {"Topics": [{"TopicName": TOPIC, "Partitions": [dict(part, PartitionIndex=0)]}]}
    body.update({"ClusterId": CLUSTER} if kind == "request" else {"ErrorCode": 0})
    return {"api": api, "apiKey": key, "kind": kind, "version": 1, "correlationId": corr,
            "from": src, "to": dst, "body": body}  # fmt: skip


def target_vote(corr: int, voter: int) -> tuple[str, dict[str, Any]]:
    part = {"CandidateEpoch": 1, "CandidateId": TARGET, "LastOffsetEpoch": 0, "LastOffset": 0}
    return "Receive", _msg("Vote", "request", corr, TARGET, voter, part)


def grant(corr: int, voter: int) -> tuple[str, dict[str, Any]]:
    part = {"ErrorCode": 0, "LeaderId": -1, "LeaderEpoch": 1, "VoteGranted": True}
    return "Send", _msg("Vote", "response", corr, voter, TARGET, part)


def target_bqe(corr: int, voter: int, epoch: int = 1) -> tuple[str, dict[str, Any]]:
    part = {"LeaderId": TARGET, "LeaderEpoch": epoch}
    return "Receive", _msg("BeginQuorumEpoch", "request", corr, TARGET, voter, part)


def ack(corr: int, voter: int, epoch: int = 1, leader: int = TARGET, error: int = 0) -> tuple[str, dict[str, Any]]:
    part = {"ErrorCode": error, "LeaderId": leader, "LeaderEpoch": epoch}
    return "Send", _msg("BeginQuorumEpoch", "response", corr, voter, TARGET, part)


def rounds(n: int) -> list[tuple[str, dict[str, Any]]]:
    """``n`` heartbeat rounds after ELECTED, each acknowledged by both voters."""
    out = []
    for corr in range(3, 3 + n):
        out += [target_bqe(corr, 2), target_bqe(corr, 3), ack(corr, 2), ack(corr, 3)]
    return out


# elected and announced; both voters acknowledged (seq 0-7)
ELECTED = [target_vote(1, 2), target_vote(1, 3), grant(1, 2), grant(1, 3),
           target_bqe(2, 2), target_bqe(2, 3), ack(2, 2), ack(2, 3)]  # fmt: skip
# two heartbeat rounds after the acknowledgements (seq 8-13)
HEARTBEATS = [target_bqe(3, 2), target_bqe(3, 3), ack(3, 2), ack(3, 3), target_bqe(4, 2), target_bqe(4, 3)]


def write(path: Path, rows: list[tuple[str, dict[str, Any]]]) -> Path:
    return write_harness_trace(path, rows, run="heartbeat", cluster_id=CLUSTER, target=TARGET)


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_beginquorumepoch_after_the_acknowledgement_is_a_behaviour(tmp_path: Path) -> None:
    """Fails on a model whose leader sends BeginQuorumEpoch only when it wins (the KIP's rule, with
    DuplicateMessage for resends): the first heartbeat (seq 8) then has no behaviour."""
    verdict = validate_trace(write(tmp_path / "heartbeat.ndjson", ELECTED + HEARTBEATS), timeout=300)
    assert verdict.status == "PASS", verdict.reason


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_heartbeat_of_another_epoch_still_fails(tmp_path: Path) -> None:
    """The heartbeat carries the leader's own epoch: one naming epoch 2, which the target never reached,
    has no behaviour (the new action sends nothing else)."""
    rows = [*ELECTED, target_bqe(3, 2, epoch=2)]
    verdict = validate_trace(write(tmp_path / "wrong.ndjson", rows), timeout=300)
    assert verdict.status == "FAIL", verdict.reason
    assert verdict.failed_event is not None and verdict.failed_event.seq == 8


def test_acknowledgements_naming_no_newer_epoch_stay_out_of_the_network(tmp_path: Path) -> None:
    """KRaft.tla's HandleBeginQuorumEpochResponse discards an answer whose epoch is not above the target's,
    whenever it is taken; such an answer is no black-box row (as if the target took it at once). An answer
    naming a newer epoch deposes the leader and stays a row."""
    rows = [*ELECTED, *rounds(3), target_bqe(6, 2), ack(6, 2, epoch=4, leader=-1, error=74)]
    trace = translate(write(tmp_path / "acks.ndjson", rows))
    sends = [e for e in trace.events if e.event == "EnvironmentSend"]
    assert [e.msg["type"] for e in sends] == ["VoteResponse", "VoteResponse", "BeginQuorumEpochResponse"]
    assert sends[-1].msg["epoch"] == 4 and sends[-1].seq == len(rows) - 1
    assert sum(e.event == "EnvironmentReceive" for e in trace.events) == 2 + 2 + 3 * 2 + 1


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_long_reign_of_heartbeats_validates_in_linear_time(tmp_path: Path) -> None:
    """40 acknowledged rounds (a leader of 12 s with Kafka's default fetch timeout). With every answer in the
    network TLC tried taking any number of them at each hidden step: 20 rounds took 58 s, 40 several minutes."""
    verdict = validate_trace(write(tmp_path / "long.ndjson", [*ELECTED, *rounds(40)]), timeout=120)
    assert verdict.status == "PASS", verdict.reason


def target_eqe(corr: int, voter: int, epoch: int = 1) -> tuple[str, dict[str, Any]]:
    part = {"LeaderId": TARGET, "LeaderEpoch": epoch, "PreferredSuccessors": [2, 3]}
    return "Receive", _msg("EndQuorumEpoch", "request", corr, TARGET, voter, part)


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_heartbeat_sent_before_the_resignation_may_arrive_after_it(tmp_path: Path) -> None:
    """The leader's progress timeout fires while a heartbeat to v2 is on its way: v3 hears EndQuorumEpoch
    first, v2 the heartbeat, then its own EndQuorumEpoch (one connection keeps the order). A black-box
    trace cannot order the hidden send before the resignation, so the model takes it as the resigned
    leader's request of the epoch it led (a CI run of the catalog failed on exactly this, in
    LeaderProgress/1)."""
    rows = [*ELECTED, target_eqe(3, 3), target_bqe(4, 2), target_eqe(3, 2)]
    verdict = validate_trace(write(tmp_path / "late.ndjson", rows), timeout=300)
    assert verdict.status == "PASS", verdict.reason
    # ... but the resigned leader announces nothing newer than the epoch it led
    newer = [*ELECTED, target_eqe(3, 3), target_bqe(4, 2, epoch=2), target_eqe(3, 2)]
    verdict = validate_trace(write(tmp_path / "newer.ndjson", newer), timeout=300)
    assert verdict.status == "FAIL" and verdict.failed_event is not None, verdict.reason
    assert verdict.failed_event.seq == 9
