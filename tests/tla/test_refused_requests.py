"""TLC trace validation of malformed requests (conformance/test_validation.py, KIP-595/Validation/1-5).

KRaft.tla has no record of a request for another partition than __cluster_metadata-0, nor of a Fetch from
a negative offset; Kafka answers those and requests with malformed fields (a negative epoch or offset, a
LastOffsetEpoch not below the candidate's epoch, ...) INVALID_REQUEST before anything may change
(``KafkaRaftClient.handleVoteRequest``, ``handleFetchRequest``, ``RaftUtil.hasValidTopicPartition``).  The
translation (tla/trace_translate.py) leaves such a request out of the model's network and makes the answer
one ``RefuseRequest`` step that changes nothing (TraceKRaft.tla); a target that takes the request instead
(KIP-595 allows the older -1 sentinel of an empty log) goes through KRaft's own actions with -1 read as the
model's 0.  A target that answers INVALID_REQUEST but changed state must still fail.

Hand-written black-box harness traces with real TLC, then the cases themselves against a lenient and a
faulty node (tests/tla/lenient_node.py), with both TLC validations.

The story: virtual leader 2 announces epoch 1 (BeginQuorumEpoch) and the fresh target 1 follows it; v3
sends a malformed Vote; v2 resends BeginQuorumEpoch(1) to read the target's epoch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_translate import REFUSE_REQUEST, refusal, translate, unmodelled_request
from kraft_tck.tla.trace_validate import validate_trace

from .harness_rows import write_harness_trace

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

REPO = Path(__file__).resolve().parents[2]
LENIENT = Path(__file__).with_name("lenient_node.py")
TOPIC = "__cluster_metadata"
CLUSTER = "cluster-refused-test-1"
INVALID_REQUEST = 42
FENCED = 74
EPOCH_MAX = 2**31 - 1

Row = tuple[str, dict[str, Any]]


def _msg(api: str, kind: str, corr: int, src: int, dst: int, part: dict[str, Any], **top: Any) -> dict[str, Any]:
    key = {"Vote": 52, "BeginQuorumEpoch": 53, "Fetch": 1}[api]
    topic = top.pop("topic", TOPIC)
    if api == "Fetch" and kind == "request":
        body = {"ClusterId": CLUSTER, "MaxWaitMs": 150, "Topics": [{"Partitions": [dict(part, Partition=0)]}],
                "ReplicaState": {"ReplicaId": src, "ReplicaEpoch": -1}}  # fmt: skip
    elif kind == "request":
        body = {"ClusterId": CLUSTER, "Topics": [{"TopicName": topic, "Partitions": [dict(part, PartitionIndex=0)]}]}
    elif top.get("ErrorCode"):
        body = {"ErrorCode": top["ErrorCode"], "Topics": []}  # refused as a whole: no partition
    else:
        body = {"ErrorCode": 0, "Topics": [{"TopicName": TOPIC, "Partitions": [dict(part, PartitionIndex=0)]}]}
    return {"api": api, "apiKey": key, "kind": kind, "version": 17 if key == 1 else 1, "correlationId": corr,
            "from": src, "to": dst, "body": body}  # fmt: skip


def bqe(corr: int, epoch: int) -> Row:
    return "Send", _msg("BeginQuorumEpoch", "request", corr, 2, 1, {"LeaderId": 2, "LeaderEpoch": epoch})


def bqe_answer(corr: int, epoch: int, leader: int, error: int = 0) -> Row:
    part = {"ErrorCode": error, "LeaderId": leader, "LeaderEpoch": epoch}
    return "Receive", _msg("BeginQuorumEpoch", "response", corr, 1, 2, part)


def vote(corr: int, epoch: int, last_epoch: int, last_offset: int, topic: str = TOPIC) -> Row:
    part = {"CandidateEpoch": epoch, "CandidateId": 3, "LastOffsetEpoch": last_epoch, "LastOffset": last_offset}
    return "Send", _msg("Vote", "request", corr, 3, 1, part, topic=topic)


def vote_answer(corr: int, epoch: int, leader: int, granted: bool, error: int = 0, top_error: int = 0) -> Row:
    part = {"ErrorCode": error, "LeaderId": leader, "LeaderEpoch": epoch, "VoteGranted": granted}
    return "Receive", _msg("Vote", "response", corr, 1, 3, part, ErrorCode=top_error)


def target_fetch(corr: int, epoch: int) -> Row:
    part = {"CurrentLeaderEpoch": epoch, "FetchOffset": 0, "LastFetchedEpoch": 0}
    return "Receive", _msg("Fetch", "request", corr, 1, 2, part)


FOLLOW = [bqe(1, 1), bqe_answer(1, 1, 2)]
PROBE_KEPT = [bqe(2, 1), bqe_answer(2, 1, 2), target_fetch(100, 1)]
#: Kafka's answers: a Vote with LastOffsetEpoch -1, then one for another topic, both refused; the epoch kept
KAFKA = [
    *FOLLOW,
    vote(10, 2, -1, 1000),
    vote_answer(10, 1, 2, False, error=INVALID_REQUEST),
    vote(11, 3, 0, 0, topic="kraft-tck-not-metadata"),
    vote_answer(11, 0, 0, False, top_error=INVALID_REQUEST),
    *PROBE_KEPT,
]
#: A target reading LastOffsetEpoch -1 as an empty log (KIP-595 allows it): it votes in epoch 2
LENIENT_ROWS = [
    *FOLLOW,
    vote(10, 2, -1, 1000),
    vote_answer(10, 2, -1, True),
    bqe(2, 1),
    bqe_answer(2, 2, -1, FENCED),
]
#: The fault: answered INVALID_REQUEST, yet the target moved to the candidate's epoch
ADOPT_THEN_REFUSE = [
    *FOLLOW,
    vote(10, 2, -1, 1000),
    vote_answer(10, 1, 2, False, error=INVALID_REQUEST),
    bqe(2, 1),
    bqe_answer(2, 2, -1, FENCED),
]
#: Kafka adopts a Vote's epoch 2^31-1 (the reference refuses it): no election can follow it
ADOPT_EPOCH_MAX = [*FOLLOW, vote(10, EPOCH_MAX, 0, 0), vote_answer(10, EPOCH_MAX, -1, True), bqe(2, 1),
                   bqe_answer(2, EPOCH_MAX, -1, FENCED)]  # fmt: skip


def write(path: Path, rows: list[Row]) -> Path:
    return write_harness_trace(path, rows, run="refused", cluster_id=CLUSTER)


def test_requests_the_model_has_no_record_of() -> None:
    assert unmodelled_request(vote(1, 2, 0, 0)[1]) == ""
    assert unmodelled_request(vote(1, 2, -1, -1)[1]) == ""  # malformed fields have a reading in the model
    assert unmodelled_request(vote(1, 2, 0, 0, topic="other")[1]) == "not __cluster_metadata-0"
    fetch = _msg("Fetch", "request", 1, 2, 1, {"CurrentLeaderEpoch": 1, "FetchOffset": -1, "LastFetchedEpoch": 0})
    assert unmodelled_request(fetch) == "a negative FetchOffset"
    other_id = json.loads(json.dumps(fetch))
    other_id["body"]["Topics"][0].update(TopicId="6b726166-742d-7463-6b2d-6f7468657221")
    other_id["body"]["Topics"][0]["Partitions"][0]["FetchOffset"] = 0
    assert unmodelled_request(other_id) == "not __cluster_metadata-0"
    assert refusal(vote_answer(1, 1, 2, False, error=INVALID_REQUEST)[1])
    assert refusal(vote_answer(1, 0, 0, False, top_error=INVALID_REQUEST)[1])
    assert not refusal(vote_answer(1, 1, 2, False, error=FENCED)[1])


def test_a_refused_request_never_enters_the_network(tmp_path: Path) -> None:
    events = translate(write(tmp_path / "kafka.ndjson", KAFKA)).events
    assert [ev.event for ev in events] == [
        "EnvironmentSend", "EnvironmentReceive", REFUSE_REQUEST, REFUSE_REQUEST, "EnvironmentSend",
        "EnvironmentReceive", "EnvironmentReceive",
    ]  # fmt: skip
    assert [ev.seq for ev in events if ev.event == REFUSE_REQUEST] == [3, 5]  # where the target answered
    assert "INVALID_REQUEST" in events[2].msg["refused"] and "not __cluster_metadata-0" in events[3].msg["refused"]
    # taken, the same request is KRaft's Vote, the -1 sentinel read as the model's empty log (0)
    lenient = translate(write(tmp_path / "lenient.ndjson", LENIENT_ROWS)).events
    assert lenient[2].event == "EnvironmentSend" and lenient[2].msg["lastOffsetEpoch"] == 0
    assert REFUSE_REQUEST not in [ev.event for ev in lenient]


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
@pytest.mark.parametrize(
    ("name", "rows", "status", "failed_seq"),
    [
        ("kafka", KAFKA, "PASS", None),
        ("lenient", LENIENT_ROWS, "PASS", None),
        ("adopt-then-refuse", ADOPT_THEN_REFUSE, "FAIL", 5),
        ("adopt-epoch-max", ADOPT_EPOCH_MAX, "PASS", None),
    ],
)
def test_black_box_verdicts(tmp_path: Path, name: str, rows: list[Row], status: str, failed_seq: int | None) -> None:
    verdict = validate_trace(write(tmp_path / f"{name}.ndjson", rows), timeout=300)
    assert verdict.status == status, (verdict.reason, verdict.tlc.output[-2000:] if verdict.tlc else "")
    if failed_seq is not None:
        # the answer that shows the epoch the refused Vote moved the target to
        assert verdict.failed_event is not None and verdict.failed_event.seq == failed_seq, verdict.failed_event


# ---------------------------------------------------------------------------------------------- real nodes


def run_cases(tmp_path: Path, mode: str) -> tuple[dict[str, Any], subprocess.CompletedProcess[str]]:
    """conformance/test_validation.py against tests/tla/lenient_node.py in ``mode``, with both TLC checks."""
    report = tmp_path / "report"
    args = [sys.executable, "-m", "pytest", "conformance/test_validation.py", "-q", "-p", "no:cacheprovider",
            "--target-launcher", str(LENIENT), "--report", str(report)]  # fmt: skip
    env = {**os.environ, "KRAFT_TCK_LENIENT": mode}
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=420)
    results = report / "results.json"
    assert results.exists(), f"no results.json; pytest said:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
    return json.loads(results.read_text()), proc


@pytest.mark.tlc
@pytest.mark.slow
@pytest.mark.cluster
@needs_tlc
def test_a_lenient_target_passes_the_cases_and_both_validations(tmp_path: Path) -> None:
    doc, proc = run_cases(tmp_path, "lenient")
    cases = {c["id"]: c for c in doc["cases"]}
    assert {c["outcome"] for c in cases.values()} == {"passed"}, proc.stdout[-4000:]
    rows = {d["kafka"] for c in cases.values() for d in c["kafkaDifferences"]}
    assert {"vote.invalid-last-epoch", "fetch.invalid-last-fetched-epoch", "fetch.invalid-max-wait"} <= rows, rows
    # it adopted epoch 2^31-1 as Kafka does (the INFO check not met), and no election followed it in TLC
    assert [o["met"] for o in cases["KIP-595/Validation/5"]["observations"]] == [False, False]
    assert doc["tlcValidation"]["status"] == "PASS", doc["tlcValidation"]
    assert doc["tlcBlackBox"]["status"] == "PASS", doc["tlcBlackBox"]
    assert proc.returncode == 0, proc.stdout[-4000:]


@pytest.mark.tlc
@pytest.mark.slow
@pytest.mark.cluster
@needs_tlc
def test_a_target_that_changes_state_on_a_refused_request_fails_both_validations(tmp_path: Path) -> None:
    doc, proc = run_cases(tmp_path, "adopt-then-refuse")
    # the node's own trace: the refused Vote's handler step reports the candidate's epoch
    node = doc["tlcValidation"]
    assert node["status"] == "FAIL" and "RefuseRequest" in node["message"], node
    # black-box: the target's next answer shows the epoch no KRaft step of it explains
    assert doc["tlcBlackBox"]["status"] == "FAIL", doc["tlcBlackBox"]
    assert "KIP-595/Validation/1" in json.dumps(doc["tlcBlackBox"]["lives"]), doc["tlcBlackBox"]
    assert proc.returncode == 1
