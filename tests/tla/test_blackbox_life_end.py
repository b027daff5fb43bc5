"""Black-box validation at the end of a target's life: what it sent just before the harness stopped it.

A case that relaunches the target (a wiped directory for a dynamic quorum, say) ends the current life the
moment it decides to: a fresh target that has just started an election sent its Vote requests to both
virtual voters in one step (KRaft.tla ``StartElection``), the harness read the one to voter 2, and the one to
voter 3 was still in the socket when the target was killed.  KRaft loses messages too, so the trace is a
behaviour of the spec (tla/TraceKRaft.tla ``NeverReceived``: the trace's last rows).  A wrong message at the
same place still fails.  Hand-written harness traces, real TLC.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_validate import validate_trace

from .harness_rows import Row, write_harness_trace

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

CLUSTER = "cluster-life-end-test-1"


def target_vote(epoch: int, last_offset_epoch: int, last_offset: int) -> Row:
    """The target (voter 1) asks voter 2 for its vote; voter 3's copy is never read."""
    part = {"PartitionIndex": 0, "CandidateEpoch": epoch, "CandidateId": 1, "LastOffsetEpoch": last_offset_epoch,
            "LastOffset": last_offset}  # fmt: skip
    body = {"ClusterId": CLUSTER, "Topics": [{"TopicName": "__cluster_metadata", "Partitions": [part]}]}
    return "Receive", {"api": "Vote", "apiKey": 52, "kind": "request", "version": 1, "correlationId": 1, "from": 1,
                       "to": 2, "body": body}  # fmt: skip


def refusal(epoch: int) -> Row:
    """Voter 2, already at a later epoch of the quorum the wiped target rejoins, refuses."""
    part = {"PartitionIndex": 0, "ErrorCode": 0, "LeaderId": -1, "LeaderEpoch": epoch, "VoteGranted": False}
    body = {"ErrorCode": 0, "Topics": [{"TopicName": "__cluster_metadata", "Partitions": [part]}]}
    return "Send", {"api": "Vote", "apiKey": 52, "kind": "response", "version": 1, "correlationId": 1, "from": 2,
                    "to": 1, "body": body}  # fmt: skip


@needs_tlc
def test_an_election_cut_short_by_the_end_of_the_life_passes(tmp_path: Path) -> None:
    # KIP-595 "Leader Election": a fresh voter's election timeout makes it a candidate of epoch 1 that sends
    # Vote requests from its empty log (offset 0, epoch 0); only voter 2's is read before the relaunch
    path = write_harness_trace(tmp_path / "life.ndjson", [target_vote(1, 0, 0), refusal(78)], run="life end",
                               cluster_id=CLUSTER)  # fmt: skip
    verdict = validate_trace(path)
    assert verdict.passed, verdict.reason


def target_fetch(epoch: int) -> Row:
    """The target fetches from voter 2 as its leader of ``epoch``."""
    part = {"Partition": 0, "CurrentLeaderEpoch": epoch, "FetchOffset": 0, "LastFetchedEpoch": 0}
    body = {"ClusterId": CLUSTER, "MaxWaitMs": 150, "Topics": [{"Partitions": [part]}],
            "ReplicaState": {"ReplicaId": 1, "ReplicaEpoch": -1}}  # fmt: skip
    return "Receive", {"api": "Fetch", "apiKey": 1, "kind": "request", "version": 17, "correlationId": 2, "from": 1,
                       "to": 2, "body": body}  # fmt: skip


@needs_tlc
def test_a_wrong_step_at_the_end_of_the_life_still_fails(tmp_path: Path) -> None:
    # KIP-595 "Vote Response Handling": the refusal names no leader of epoch 78, so the target cannot follow
    # voter 2 in it; the lost Vote to voter 3 must not excuse the row after it
    rows = [target_vote(1, 0, 0), refusal(78), target_fetch(78)]
    path = write_harness_trace(tmp_path / "life.ndjson", rows, run="life end", cluster_id=CLUSTER)
    verdict = validate_trace(path)
    assert not verdict.passed
    assert verdict.failed_event is not None and verdict.failed_event.seq == 2, verdict.reason
