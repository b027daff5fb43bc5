"""Black-box validation explores a bounded number of states per row: a count, not a timing.

TLC's work on a black-box harness trace is the distinct states it meets; a row that lets the hidden steps of
the target branch without bound makes validation slow and, when the branches survive from row to row,
quadratic in the trace's length. These hand-written traces hold the patterns that did (tla/TraceKRaft.tla,
``Dead``, ``FollowerHas``, ``Tally``, ``NotStuck``): a caught-up follower fetching again and again with an
empty answer each time (every answer left unhandled was a state of its own, and with them their number, up
to the end of its leader's epoch), and a leader whose election left a vote in flight and whose voters
fetch and acknowledge heartbeats (which voter's grant it counted first, and every answer it could still
discard, told states apart). The bounds are the counts measured with the model of 2026-11-27 (3.9 and 2.0
distinct states per row), with room to spare; the model before it needed 64 and 11 per row on the same
traces, the follower's growing with the number of polls. A doctored row still fails where it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_translate import translate
from kraft_tck.tla.trace_validate import validate_trace

from .harness_rows import write_harness_trace
from .test_begin_heartbeat import ELECTED, rounds

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

CLUSTER = "cluster-states-test-1"
TARGET, LEADER = 1, 2
TOPIC_ID = "00000000-0000-0000-0000-000000000001"


def announce(corr: int) -> tuple[str, dict[str, Any]]:
    """Virtual voter 2 announces itself leader of epoch 1 (BeginQuorumEpoch)."""
    body = {"ClusterId": CLUSTER,
            "Topics": [{"TopicName": "__cluster_metadata", "Partitions": [{"PartitionIndex": 0, "LeaderId": LEADER,
                                                                         "LeaderEpoch": 1}]}]}  # fmt: skip
    return "Send", {"api": "BeginQuorumEpoch", "apiKey": 53, "kind": "request", "version": 1, "correlationId": corr,
                    "from": LEADER, "to": TARGET, "body": body}  # fmt: skip


def announced(corr: int) -> tuple[str, dict[str, Any]]:
    """The target's acknowledgement."""
    part = {"PartitionIndex": 0, "ErrorCode": 0, "LeaderId": LEADER, "LeaderEpoch": 1}
    body = {"ErrorCode": 0, "Topics": [{"TopicName": "__cluster_metadata", "Partitions": [part]}]}
    return "Receive", {"api": "BeginQuorumEpoch", "apiKey": 53, "kind": "response", "version": 1,
                       "correlationId": corr, "from": TARGET, "to": LEADER, "body": body}  # fmt: skip


def fetch(corr: int, offset: int, last_epoch: int) -> tuple[str, dict[str, Any]]:
    """The target fetches from the leader of epoch 1."""
    part = {"Partition": 0, "CurrentLeaderEpoch": 1, "FetchOffset": offset, "LastFetchedEpoch": last_epoch,
            "LogStartOffset": 0, "PartitionMaxBytes": 8388608}  # fmt: skip
    body = {"MaxWaitMs": 150, "MinBytes": 0, "MaxBytes": 8388608, "IsolationLevel": 0, "SessionId": 0,
            "SessionEpoch": -1, "Topics": [{"TopicId": TOPIC_ID, "Partitions": [part]}], "ForgottenTopicsData": [],
            "RackId": "", "ClusterId": CLUSTER, "ReplicaState": {"ReplicaId": TARGET, "ReplicaEpoch": -1}}  # fmt: skip
    return "Receive", {"api": "Fetch", "apiKey": 1, "kind": "request", "version": 17, "correlationId": corr,
                       "from": TARGET, "to": LEADER, "body": body}  # fmt: skip


def answer(corr: int, hw: int, batches: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The leader's answer: ``batches`` of its log, high watermark ``hw``."""
    part = {"PartitionIndex": 0, "ErrorCode": 0, "HighWatermark": hw, "LogStartOffset": 0,
            "CurrentLeader": {"LeaderId": LEADER, "LeaderEpoch": 1},
            "Records": {"bytes": 80 * len(batches), "batches": batches}}  # fmt: skip
    body = {"ThrottleTimeMs": 0, "ErrorCode": 0, "SessionId": 0,
            "Responses": [{"TopicId": TOPIC_ID, "Partitions": [part]}]}  # fmt: skip
    return "Send", {"api": "Fetch", "apiKey": 1, "kind": "response", "version": 17, "correlationId": corr,
                    "from": LEADER, "to": TARGET, "body": body}  # fmt: skip


LEADER_CHANGE = {"baseOffset": 0, "lastOffset": 0, "epoch": 1, "control": True, "digest": "0badc0de"}


def caught_up_follower(polls: int) -> list[tuple[str, dict[str, Any]]]:
    """The target follows leader 2, replicates its LeaderChange record, then polls ``polls`` times at its
    log end and gets nothing new each time."""
    rows = [announce(1), announced(1), fetch(2, 0, 0), answer(2, 0, [LEADER_CHANGE])]
    for corr in range(3, 3 + polls):
        rows += [fetch(corr, 1, 1), answer(corr, 1, [])]
    return rows


def _write(path: Path, rows: list[tuple[str, dict[str, Any]]]) -> Path:
    return write_harness_trace(path, rows, run="states", cluster_id=CLUSTER, target=TARGET)


def _states_per_row(path: Path) -> tuple[str, float]:
    verdict = validate_trace(path, timeout=300, state_before=False)
    assert verdict.tlc is not None and verdict.tlc.distinct_states is not None, verdict.reason
    return verdict.status, verdict.tlc.distinct_states / len(translate(path).events)


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_caught_up_follower_keeps_few_states_per_row(tmp_path: Path) -> None:
    """60 empty polls (124 rows): 3.9 distinct states per row measured (the HW the last answer gives, applied
    or not, times the hidden steps to the next poll); before, every empty answer the target had not handled
    yet was a state of its own, and their number: 64 per row, growing with the trace."""
    status, per_row = _states_per_row(_write(tmp_path / "follower.ndjson", caught_up_follower(60)))
    assert status == "PASS"
    assert per_row <= 6.0, f"{per_row:.1f} distinct states per row: the hidden steps branch again"


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_leader_with_a_vote_in_flight_keeps_few_states_per_row(tmp_path: Path) -> None:
    """The target wins with one grant while the other is in flight, then leads 30 acknowledged heartbeat
    rounds (66 rows): 2.0 distinct states per row measured, 11 before."""
    status, per_row = _states_per_row(_write(tmp_path / "leader.ndjson", [*ELECTED, *rounds(30)]))
    assert status == "PASS"
    assert per_row <= 4.0, f"{per_row:.1f} distinct states per row: the hidden steps branch again"


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_poll_past_the_records_served_still_fails_at_it(tmp_path: Path) -> None:
    """The same follower, whose last poll asks from offset 2 although only one record was ever served:
    no behaviour of KRaft produces it, dropped answers or not."""
    rows = caught_up_follower(10)
    rows[-2] = fetch(12, 2, 1)
    verdict = validate_trace(_write(tmp_path / "past.ndjson", rows), timeout=300)
    assert verdict.status == "FAIL", verdict.reason
    assert verdict.failed_event is not None and verdict.failed_event.seq == len(rows) - 2
