"""Black-box validation of an election nobody saw because the harness killed the target first.

Found by the catalog under load (KIP-595/CrashWindow/1): a target relaunched after a kill -9 had voted in epoch
44; its election timeout fired, it became the candidate of 45 and refused the next Vote of 44 with epoch 45 (the
answer the harness read), then opened its connections to the virtual voters (ApiVersions) and was killed again
before its Vote requests of 45 left it.  Its answer names epoch 45, so the spec must let it campaign in 45
although no row shows that election: a message of the target is lost when a kill cuts its life (KRaft loses
messages too; tla/TraceKRaft.tla ``SendsReceived``: an answer to a Vote in the next epoch naming no leader, a kill
within the window).  So may an election just before a kill, refused after the relaunch.  The same election with
no kill near still fails: a live candidate's Vote requests reach the harness.  Hand-written harness traces, real
TLC.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_validate import TraceVerdict, validate_trace

from .harness_rows import Row, write_harness_trace

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

CLUSTER = "cluster-unseen-election-1"
FENCED_LEADER_EPOCH = 74


def vote_request(candidate: int, epoch: int) -> Row:
    """A virtual voter asks the target (voter 1) for its vote, from an empty log."""
    part = {"PartitionIndex": 0, "CandidateEpoch": epoch, "CandidateId": candidate, "LastOffsetEpoch": 0,
            "LastOffset": 0}  # fmt: skip
    body = {"ClusterId": CLUSTER, "VoterId": 1, "Topics": [{"TopicName": "__cluster_metadata", "Partitions": [part]}]}
    return "Send", {"api": "Vote", "apiKey": 52, "kind": "request", "version": 1, "correlationId": 1,
                    "from": candidate, "to": 1, "body": body}  # fmt: skip


def vote_answer(candidate: int, epoch: int, granted: bool, error: int = 0) -> Row:
    """The target's answer to that candidate, in ``epoch``, naming no leader."""
    part = {"PartitionIndex": 0, "ErrorCode": error, "LeaderId": -1, "LeaderEpoch": epoch, "VoteGranted": granted}
    body = {"ErrorCode": 0, "Topics": [{"TopicName": "__cluster_metadata", "Partitions": [part]}]}
    return "Receive", {"api": "Vote", "apiKey": 52, "kind": "response", "version": 1, "correlationId": 1,
                       "from": 1, "to": candidate, "body": body}  # fmt: skip


def rows_until_refusal() -> list[Row]:
    # KIP-595 "Vote Request Handling": the target grants voter 2 in epoch 1 (it is then Voted, durably); its
    # election timeout makes it the candidate of epoch 2, so voter 3's Vote of epoch 1 is refused with
    # FENCED_LEADER_EPOCH, naming epoch 2 and no leader (row 3)
    return [vote_request(2, 1), vote_answer(2, 1, True), vote_request(3, 1),
            vote_answer(3, 2, False, FENCED_LEADER_EPOCH)]


def verdict_of(tmp_path: Path, name: str, restarts: list[int], more: int = 0) -> TraceVerdict:
    """The refusal of ``rows_until_refusal``, ``more`` refusals more after it, kill -9s before the events of seq
    ``restarts``."""
    rows = rows_until_refusal()
    for _ in range(more):
        rows += [vote_request(3, 1), vote_answer(3, 2, False, FENCED_LEADER_EPOCH)]
    return validate_trace(write_harness_trace(tmp_path / f"{name}.ndjson", rows, run="unseen election",
                                              cluster_id=CLUSTER, targetRestarts=restarts))  # fmt: skip


@needs_tlc
def test_an_election_cut_short_by_a_kill_passes(tmp_path: Path) -> None:
    # killed once more right after the refusal, before its Vote requests of epoch 2 left it
    verdict = verdict_of(tmp_path, "killed", [2, 4])
    assert verdict.passed, verdict.reason


@needs_tlc
def test_an_election_just_before_a_kill_passes(tmp_path: Path) -> None:
    # the other order: its election timer fired just before the kill -9 (row 2), which took its Vote requests with
    # it; relaunched in epoch 2, it refuses voter 3's Vote of epoch 1 (row 3), and lives on (20 more rows, no kill)
    verdict = verdict_of(tmp_path, "before", [2], more=10)
    assert verdict.passed, verdict.reason


@needs_tlc
def test_an_unseen_election_of_a_live_target_fails(tmp_path: Path) -> None:
    # no kill anywhere near: a candidate of epoch 2 sends its Vote requests, and 20 more rows (beyond the window
    # in which a message of the target is read) show none of them; the refusal has no behaviour
    verdict = verdict_of(tmp_path, "alive", [], more=10)
    assert not verdict.passed
    assert verdict.failed_event is not None and verdict.failed_event.seq == 3, verdict.reason
