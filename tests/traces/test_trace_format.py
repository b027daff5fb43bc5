"""The one trace format: the writer refuses invalid lines, the reader keeps and names bad ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kraft_tck.traces.trace import FORMAT_VERSION, TraceError, TraceWriter, line_errors, read_trace

HEADER = {"source": "node", "run": "t1", "voters": [1, 2, 3], "config": {"controller.quorum.election.timeout.ms": 1000}}
STATE = {"role": "Candidate", "epoch": 1, "votedId": 1, "leaderId": -1, "logEndOffset": 0,
         "lastFetchedEpoch": -1, "highWatermark": 0}


def _write(path: Path) -> None:
    with TraceWriter(path, HEADER) as w:
        w.emit({"ts": 0, "node": 1, "event": "StartElection", "cause": "ElectionTimeout", "state": STATE})
        w.emit({"ts": 1, "node": 1, "event": "Send", "msg": {
            "api": "Vote", "apiKey": 52, "kind": "request", "version": 0, "correlationId": 7, "from": 1, "to": 2,
            "body": {"ClusterId": None}}})


def test_round_trip(tmp_path: Path) -> None:
    p = tmp_path / "t.ndjson"
    _write(p)
    trace = read_trace(p)
    assert trace.ok and trace.header["format"] == FORMAT_VERSION
    assert [e["seq"] for e in trace.events] == [0, 1]
    assert [e["event"] for e in trace.events] == ["StartElection", "Send"]


def test_writer_refuses_unknown_event_name(tmp_path: Path) -> None:
    with TraceWriter(tmp_path / "t.ndjson", HEADER) as w, pytest.raises(TraceError, match="event"):
        w.emit({"ts": 0, "node": 1, "event": "HandleVoteReq", "state": STATE})


def test_action_events_need_state_and_messages_need_msg() -> None:
    assert line_errors({"type": "event", "seq": 0, "ts": 0, "node": 1, "event": "BecomeLeader"})
    assert line_errors({"type": "event", "seq": 0, "ts": 0, "node": 1, "event": "Receive"})


def test_bad_lines_are_kept_with_line_number_and_reason(tmp_path: Path) -> None:
    p = tmp_path / "t.ndjson"
    _write(p)
    with open(p, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "event", "seq": 5, "ts": 2, "node": 1, "event": "Restart", "state": STATE}) + "\n")
        fh.write('{"type": "event", "seq": 2, "ts"')  # a torn last line
    trace = read_trace(p)
    assert [b.line for b in trace.bad] == [4, 5]
    assert "seq 5 where 2 was expected" in trace.bad[0].reason
    assert "truncated" in trace.bad[1].reason
    assert len(trace.events) == 2


def test_newer_format_is_refused_by_name(tmp_path: Path) -> None:
    p = tmp_path / "t.ndjson"
    p.write_text(json.dumps({"type": "header", "format": FORMAT_VERSION + 1, "source": "node", "run": "x",
                             "voters": [1], "config": {}}) + "\n")
    with pytest.raises(TraceError, match="newer"):
        read_trace(p)


@pytest.mark.parametrize("content", ["", "hello world\n", '{"type": "event"}\n'])
def test_non_traces_are_refused(tmp_path: Path, content: str) -> None:
    p = tmp_path / "t.ndjson"
    p.write_text(content)
    with pytest.raises(TraceError):
        read_trace(p)
