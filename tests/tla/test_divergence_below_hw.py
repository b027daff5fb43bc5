"""KRaft.tla refuses a DivergingEpoch below the follower's high watermark.

Kafka's follower throws on such an answer (``KafkaRaftClient.handleFetchResponse``: "The leader requested
truncation to offset ..., which is below the current high watermark"; ``KafkaMetadataLog.truncateTo``
refuses any offset below the HW) and the reference node refuses the answer (``KRaftCore._guard_truncation``).  The model
used to truncate to the DivergingEpoch and lower the HW with it, so a node trace that removed committed
entries on a faulty leader's word was a behaviour of KRaft.  Here node 2's own trace (environment mode:
leader 1 is a peer without a trace, its messages enter as recorded) follows leader 1 of epoch 1, copies
offsets 0..2 and then learns HW 3 or HW 0; the leader then answers DivergingEpoch (epoch 1, end offset 1)
and node 2 truncates to 1.  Below its HW (3) that must fail, at that event; above it (HW 0) it passes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_translate import translate
from kraft_tck.tla.trace_validate import validate_trace

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

TOPIC = "__cluster_metadata"


def _state(leo: int, lfe: int, hw: int) -> dict[str, Any]:
    return {"role": "Follower", "epoch": 1, "votedId": -1, "leaderId": 1, "logEndOffset": leo,
            "lastFetchedEpoch": lfe, "highWatermark": hw}  # fmt: skip


def _msg(api: str, key: int, kind: str, corr: int, src: int, dst: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"api": api, "apiKey": key, "kind": kind, "version": 1 if key == 53 else 17, "correlationId": corr,
            "from": src, "to": dst, "body": body}  # fmt: skip


def _fetch_request(corr: int, offset: int, last_epoch: int) -> dict[str, Any]:
    part = {"Partition": 0, "CurrentLeaderEpoch": 1, "FetchOffset": offset, "LastFetchedEpoch": last_epoch}
    body = {"ClusterId": "c1", "ReplicaId": 2, "MaxWaitMs": 0, "Topics": [{"Topic": TOPIC, "Partitions": [part]}]}
    return _msg("Fetch", 1, "request", corr, 2, 1, body)


def _fetch_response(corr: int, hw: int, batches: list[dict[str, Any]], diverging: tuple[int, int]) -> dict[str, Any]:
    part = {
        "PartitionIndex": 0, "ErrorCode": 0, "HighWatermark": hw,
        "DivergingEpoch": {"Epoch": diverging[0], "EndOffset": diverging[1]},
        "CurrentLeader": {"LeaderId": 1, "LeaderEpoch": 1}, "Records": {"batches": batches},
    }  # fmt: skip
    return _msg(
        "Fetch", 1, "response", corr, 1, 2, {"ErrorCode": 0, "Responses": [{"Topic": TOPIC, "Partitions": [part]}]}
    )


def _trace(path: Path, hw_learned: int, after: tuple[int, int, int]) -> Path:
    """Node 2's trace; ``after``: its state (log end, last epoch, HW) after the DivergingEpoch answer."""
    batch = {"baseOffset": 0, "lastOffset": 2, "epoch": 1, "control": False}
    bqe_part = {"PartitionIndex": 0, "LeaderId": 1, "LeaderEpoch": 1}
    bqe = {"ClusterId": "c1", "Topics": [{"TopicName": TOPIC, "Partitions": [bqe_part]}]}
    bqe_answer = {"ErrorCode": 0, "Topics": [{"TopicName": TOPIC, "Partitions": [dict(bqe_part, ErrorCode=0)]}]}
    rows: list[tuple[str, dict[str, Any]]] = [
        ("Receive", _msg("BeginQuorumEpoch", 53, "request", 0, 1, 2, bqe)),
        ("HandleBeginQuorumEpochRequest", _state(0, 0, 0)),
        ("Send", _msg("BeginQuorumEpoch", 53, "response", 0, 2, 1, bqe_answer)),
        ("SendFetchRequest", _state(0, 0, 0)),
        ("Send", _fetch_request(1, 0, 0)),
        ("Receive", _fetch_response(1, -1, [batch], (-1, -1))),
        ("HandleFetchResponse", _state(3, 1, 0)),
        ("SendFetchRequest", _state(3, 1, 0)),
        ("Send", _fetch_request(2, 3, 1)),
        ("Receive", _fetch_response(2, hw_learned, [], (-1, -1))),
        ("HandleFetchResponse", _state(3, 1, hw_learned)),
        ("SendFetchRequest", _state(3, 1, hw_learned)),
        ("Send", _fetch_request(3, 3, 1)),
        ("Receive", _fetch_response(3, hw_learned, [], (1, 1))),
        ("HandleFetchResponse", _state(*after)),
    ]
    header = {"type": "header", "format": 1, "source": "node", "run": "divergence below the HW", "clusterId": "c1",
              "voters": [1, 2, 3], "config": {}}  # fmt: skip
    lines = [json.dumps(header)]
    for seq, (event, payload) in enumerate(rows):
        line: dict[str, Any] = {"type": "event", "seq": seq, "ts": seq, "node": 2, "event": event}
        line["msg" if event in ("Send", "Receive") else "state"] = payload
        lines.append(json.dumps(line))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_answer_enters_the_model_as_a_diverging_epoch(tmp_path: Path) -> None:
    trace = translate(_trace(tmp_path / "t.ndjson", 3, (1, 1, 1)))
    assert trace.environment == frozenset({1, 3})
    sent = [ev.msg for ev in trace.events if ev.event == "EnvironmentSend" and ev.msg["type"] == "FetchResponse"]
    assert [(m["divergingEpoch"], m["divergingEndOffset"], m["highWatermark"]) for m in sent] == [
        (-1, -1, -1),
        (-1, -1, 3),
        (1, 1, 3),
    ]


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_truncating_committed_entries_on_a_diverging_epoch_fails(tmp_path: Path) -> None:
    verdict = validate_trace(_trace(tmp_path / "below.ndjson", 3, (1, 1, 1)), timeout=300)
    assert verdict.status == "FAIL", verdict.reason
    assert verdict.failed_event is not None
    assert (verdict.failed_event.event, verdict.failed_event.state["logEndOffset"]) == ("HandleFetchResponse", 1)
    assert verdict.failed_event.seq == 14


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_truncating_uncommitted_entries_on_a_diverging_epoch_passes(tmp_path: Path) -> None:
    """The control: the same answer with nothing committed yet is an ordinary truncation."""
    verdict = validate_trace(_trace(tmp_path / "above.ndjson", 0, (1, 1, 0)), timeout=300)
    assert verdict.status == "PASS", verdict.reason
