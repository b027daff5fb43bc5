"""Black-box validation of a target started before the harness listened (``--target host:port``).

Until the harness listens, such a target's Vote requests reach nobody: KRaft lets it do nothing but start
election after election (and restart, which brings a Candidate back as that Candidate: Kafka's
``QuorumState.initialize``).  So the harness may first meet it as the Candidate of any epoch, having
voted for itself.  A harness trace whose header says ``targetStartedBeforeHarness`` starts the target
in KRaft's initial state or as such a Candidate (tla/TraceKRaft.tla ``IsolatedCandidate``); the verdict
must not depend on how many elections that was, and a target that breaks KRaft after such a start still
fails.  Hand-written harness traces, real TLC.

The story of each trace: virtual leader 2 announces epoch 1 (BeginQuorumEpoch); the target, at epoch 7
after six or seven elections nobody heard, refuses it (FENCED_LEADER_EPOCH, epoch 7); leader 2 announces
epoch 8; the target follows and fetches from it.
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
CLUSTER = "cluster-prelude-test-1"


def _msg(api: str, kind: str, corr: int, src: int, dst: int, part: dict[str, Any]) -> dict[str, Any]:
    key = {"Vote": 52, "BeginQuorumEpoch": 53, "Fetch": 1}[api]
    if api == "Fetch" and kind == "request":
        body = {"ClusterId": CLUSTER, "MaxWaitMs": 150, "Topics": [{"Partitions": [dict(part, Partition=0)]}],
                "ReplicaState": {"ReplicaId": src, "ReplicaEpoch": -1}}  # fmt: skip
    elif kind == "request":
        body = {"ClusterId": CLUSTER, "Topics": [{"TopicName": TOPIC, "Partitions": [dict(part, PartitionIndex=0)]}]}
    else:
        body = {"ErrorCode": 0, "Topics": [{"TopicName": TOPIC, "Partitions": [dict(part, PartitionIndex=0)]}]}
    return {"api": api, "apiKey": key, "kind": kind, "version": 17 if key == 1 else 1, "correlationId": corr,
            "from": src, "to": dst, "body": body}  # fmt: skip


def bqe(corr: int, epoch: int) -> tuple[str, dict[str, Any]]:
    return "Send", _msg("BeginQuorumEpoch", "request", corr, 2, 1, {"LeaderId": 2, "LeaderEpoch": epoch})


def bqe_answer(corr: int, epoch: int, leader: int, error: int) -> tuple[str, dict[str, Any]]:
    part = {"ErrorCode": error, "LeaderId": leader, "LeaderEpoch": epoch}
    return "Receive", _msg("BeginQuorumEpoch", "response", corr, 1, 2, part)


def vote(corr: int, candidate: int, epoch: int) -> tuple[str, dict[str, Any]]:
    part = {"CandidateEpoch": epoch, "CandidateId": candidate, "LastOffsetEpoch": 0, "LastOffset": 0}
    return "Send", _msg("Vote", "request", corr, candidate, 1, part)


def vote_answer(corr: int, candidate: int, epoch: int, granted: bool) -> tuple[str, dict[str, Any]]:
    part = {"ErrorCode": 0, "LeaderId": -1, "LeaderEpoch": epoch, "VoteGranted": granted}
    return "Receive", _msg("Vote", "response", corr, 1, candidate, part)


def target_vote(corr: int, epoch: int) -> tuple[str, dict[str, Any]]:
    """The target's own Vote request to voter 2, from its empty log."""
    part = {"CandidateEpoch": epoch, "CandidateId": 1, "LastOffsetEpoch": 0, "LastOffset": 0}
    return "Receive", _msg("Vote", "request", corr, 1, 2, part)


def target_fetch(corr: int, epoch: int) -> tuple[str, dict[str, Any]]:
    part = {"CurrentLeaderEpoch": epoch, "FetchOffset": 0, "LastFetchedEpoch": 0}
    return "Receive", _msg("Fetch", "request", corr, 1, 2, part)


STORY = [bqe(1, 1), bqe_answer(1, 7, -1, 74), bqe(2, 8), bqe_answer(2, 8, 2, 0), target_fetch(100, 8)]


def write(path: Path, rows: list[tuple[str, dict[str, Any]]], *, before_harness: bool = True) -> Path:
    extra = {"targetStartedBeforeHarness": True} if before_harness else {}
    return write_harness_trace(path, rows, run="prelude", cluster_id=CLUSTER, **extra)


def test_the_start_epoch_is_bounded_by_the_targets_largest(tmp_path: Path) -> None:
    trace = translate(write(tmp_path / "t.ndjson", STORY))
    assert (trace.not_fresh, trace.prelude, trace.prelude_votes) == ("", 8, frozenset())
    # an empty-log Vote of an earlier election, received late, may still be in flight from the start
    late = translate(write(tmp_path / "late.ndjson", [*STORY[:2], target_vote(50, 5), *STORY[2:]]))
    assert (late.prelude, late.prelude_votes) == (8, frozenset({5}))
    # without the header the harness started the target itself: it starts at epoch 0
    assert translate(write(tmp_path / "own.ndjson", STORY, before_harness=False)).prelude == 0


def test_a_first_answer_naming_an_unannounced_leader_is_not_a_fresh_node(tmp_path: Path) -> None:
    """No election nobody heard makes a leader known: that target ran with someone before."""
    rows = [bqe(1, 1), bqe_answer(1, 7, 3, 74), *STORY[2:]]
    trace = translate(write(tmp_path / "t.ndjson", rows))
    assert "names leader 3 of epoch 7" in trace.not_fresh


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
@pytest.mark.parametrize("epoch", [1, 7, 40])
def test_any_number_of_unheard_elections_passes(tmp_path: Path, epoch: int) -> None:
    rows = [bqe(1, 1), bqe_answer(1, epoch, -1, 74) if epoch > 1 else bqe_answer(1, 1, 2, 0)]
    rows += [bqe(2, epoch + 1), bqe_answer(2, epoch + 1, 2, 0), target_fetch(100, epoch + 1)]
    verdict = validate_trace(write(tmp_path / f"e{epoch}.ndjson", rows), timeout=300)
    assert verdict.status == "PASS", verdict.reason


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_late_vote_of_an_unheard_election_passes(tmp_path: Path) -> None:
    """The harness receives a Vote request of epoch 5 after the target said it is at epoch 7: sent by an
    election nobody heard (the harness was not listening yet), delivered late."""
    rows = [*STORY[:2], target_vote(50, 5), *STORY[2:]]
    verdict = validate_trace(write(tmp_path / "late.ndjson", rows), timeout=300)
    assert verdict.status == "PASS", verdict.reason


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_without_the_header_the_same_trace_fails_at_the_first_answer(tmp_path: Path) -> None:
    """The reported failure: a model that starts every target at epoch 0 finds no behaviour for it."""
    verdict = validate_trace(write(tmp_path / "own.ndjson", STORY, before_harness=False), timeout=300)
    assert verdict.status == "FAIL"
    assert verdict.failed_event is not None and verdict.failed_event.seq == 1


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_second_vote_in_the_candidates_own_epoch_fails(tmp_path: Path) -> None:
    """At epoch 7 the target is a Candidate that voted for itself: granting candidate 3 in epoch 7 is a
    second vote in one epoch (KIP-595 "Vote Request Handling"), whatever happened before the harness."""
    rows = [*STORY[:2], vote(9, 3, 7), vote_answer(9, 3, 7, True)]
    verdict = validate_trace(write(tmp_path / "twice.ndjson", rows), timeout=300)
    assert verdict.status == "FAIL", verdict.reason
    assert verdict.failed_event is not None and verdict.failed_event.seq == 3


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_an_epoch_going_back_fails(tmp_path: Path) -> None:
    """After saying epoch 7 the target fetches in epoch 5: no start explains both."""
    rows = [*STORY[:2], target_fetch(100, 5)]
    verdict = validate_trace(write(tmp_path / "back.ndjson", rows), timeout=300)
    assert verdict.status == "FAIL", verdict.reason
    assert verdict.failed_event is not None and verdict.failed_event.seq == 2


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_late_vote_of_an_epoch_above_the_start_fails(tmp_path: Path) -> None:
    """A Vote request of epoch 9 from a target that said epoch 7 and then followed leader 2 in epoch 8:
    it never held an election in epoch 9 the harness could have missed.  (The recording goes on after it:
    voter 3 asks the target for votes and is refused; a trace that ended at that Vote could have lost the
    election's Vote to voter 3 with the end of the recording, tla/TraceKRaft.tla NeverReceived.)"""
    rows = [*STORY, target_vote(50, 9)]
    for corr in range(60, 69):
        rows += [vote(corr, 3, 9), vote_answer(corr, 3, 9, False)]
    verdict = validate_trace(write(tmp_path / "ahead.ndjson", rows), timeout=300)
    assert verdict.status == "FAIL", verdict.reason
    assert verdict.failed_event is not None and verdict.failed_event.seq == 5
