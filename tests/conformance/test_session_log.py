"""The session's frame log and the session harness traces written from it (no TLC, no target)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kraft_tck.conformance.blackbox import read_session_trace, write_session_traces
from kraft_tck.conformance.virtual import Frame, SessionLog
from kraft_tck.spec.trace import line_errors
from kraft_tck.tla.trace_translate import translate

VOTE = 52


def _vote(seq: int, src: int, dst: int, kind: str, epoch: int) -> Frame:
    part: dict[str, Any] = (
        {"PartitionIndex": 0, "CandidateEpoch": epoch, "CandidateId": src, "LastOffsetEpoch": -1, "LastOffset": 0}
        if kind == "request"
        else {"PartitionIndex": 0, "ErrorCode": 0, "LeaderId": -1, "LeaderEpoch": epoch, "VoteGranted": False}
    )
    topics = [{"TopicName": "__cluster_metadata", "Partitions": [part]}]
    body = {"ClusterId": "c", "Topics": topics} if kind == "request" else {"ErrorCode": 0, "Topics": topics}
    return Frame(seq, float(seq), 0, src, dst, "Vote", VOTE, kind, 0, seq, body)


def _log() -> SessionLog:
    """Case A (two frames), two frames between cases, case B with a kill -9 in it, a wiped restart, case C."""
    log = SessionLog()
    log.begin_case("A")
    log.add(_vote(0, 2, 1, "request", 1))
    log.add(_vote(1, 1, 2, "response", 1))
    log.end_case()
    log.add(_vote(2, 1, 3, "request", 2))
    log.add(_vote(3, 3, 1, "response", 2))
    log.begin_case("B")
    log.add(_vote(4, 2, 1, "request", 3))
    log.restart()
    log.add(_vote(5, 1, 2, "response", 3))
    log.end_case()
    log.new_life()
    log.begin_case("C")
    log.add(_vote(6, 2, 1, "request", 1))
    log.end_case()
    return log


def _header() -> dict[str, Any]:
    return {"source": "harness", "run": "session", "voters": [1, 2, 3], "target": 1, "clusterId": "c", "config": {}}


def test_one_trace_per_life_with_case_spans_and_restarts(tmp_path: Path) -> None:
    traces = write_session_traces(_log(), tmp_path, _header(), {2, 3}, 1)
    assert [t.path.name for t in traces] == ["session-life-0.ndjson", "session-life-1.ndjson"]
    first, second = (json.loads(t.path.read_text().splitlines()[0]) for t in traces)
    assert first["cases"] == [{"id": "A", "firstSeq": 0, "lastSeq": 1}, {"id": "B", "firstSeq": 4, "lastSeq": 5}]
    assert first["targetRestarts"] == [5] and "targetRestarts" not in second
    assert second["cases"] == [{"id": "C", "firstSeq": 0, "lastSeq": 0}]
    for t in traces:  # schema-valid, header included
        assert all(not line_errors(json.loads(raw)) for raw in t.path.read_text().splitlines())
    assert [ev.event for ev in translate(traces[0].path).events].count("TargetRestart") == 1
    again = read_session_trace(traces[0].path)
    assert again.life == 0 and again.cases == first["cases"]
    assert again.case_of(5) == "B" and again.case_of(2) == "between cases (after case A before case B)"


def test_the_schema_checks_the_new_header_fields() -> None:
    good = {"type": "header", "format": 1, **_header(), "cases": [{"id": "A", "firstSeq": 0, "lastSeq": 3}]}
    assert not line_errors(dict(good, targetRestarts=[2]))
    assert line_errors(dict(good, cases=[{"id": "A", "firstSeq": 0}]))
    assert line_errors(dict(good, targetRestarts=[-1]))
    assert line_errors(dict(good, cases=[{"id": "A", "firstSeq": 0, "lastSeq": 1, "extra": 1}]))
