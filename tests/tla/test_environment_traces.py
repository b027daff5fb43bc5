"""Trace validation in environment mode: the embedded target's own node trace from a real harness run.

The conformance harness drives the reference node with virtual voters that write no trace; in the
node's trace they are the environment (tla/TraceKRaft.tla EnvironmentSend/EnvironmentReceive): their
messages enter the network exactly as recorded and only the node's own steps are KRaft actions, each
checked against the state it reported.  The harness's own traces (Send/Receive only) are checked in
black-box mode only from a fresh target, else NOT CHECKED, never PASS.  Doctored copies of the node
trace fail at the doctored event.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kraft_tck.tla.cli import validate_trace_command
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_merge import merge_node_traces
from kraft_tck.tla.trace_translate import environment_message, translate
from kraft_tck.tla.trace_validate import NOT_CHECKED_REASON, validate_trace

REPO = Path(__file__).resolve().parents[2]
needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))


@pytest.fixture(scope="module")
def harness_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Vote and HighWatermark cases against the embedded node: elections with grants, a vote
    request with LastOffset 1,000,000, kill -9 and restart (Vote/8), a virtual leader replicating
    records and moving the HW.  TLC is off here; the tests below run it themselves."""
    out = tmp_path_factory.mktemp("harness")
    args = [
        sys.executable, "-m", "pytest", "conformance/test_vote.py", "conformance/test_highwatermark.py",
        "-q", "-p", "no:cacheprovider", "--no-tlc", "--trace-dir", str(out),
    ]  # fmt: skip
    proc = subprocess.run(args, cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return out


def _node_trace(harness_run: Path, tmp_path: Path) -> Path:
    files = sorted((harness_run / "target").glob("target-trace-*.ndjson"), key=lambda p: int(p.stem.split("-")[-1]))
    assert len(files) >= 2, "Vote/8 restarts the target: one trace per incarnation"
    return merge_node_traces(files, tmp_path / "node.ndjson")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    # renumber: the doctored trace is a trace of its own
    out = [lines[0], *(dict(line, seq=k) for k, line in enumerate(lines[1:]))]
    path.write_text("".join(json.dumps(line) + "\n" for line in out))
    return path


def _expect_failure_at_line(path: Path, line_number: int) -> None:
    verdict = validate_trace(path, timeout=300)
    assert verdict.status == "FAIL", verdict.reason
    assert verdict.failed_event is not None, verdict.reason
    assert verdict.failed_event.line == line_number, (verdict.failed_event, verdict.reason)
    assert verdict.state_before is not None


# --------------------------------------------------------------------------- no vacuous PASS


@pytest.mark.slow
@pytest.mark.cluster
def test_harness_traces_are_not_checked(harness_run: Path) -> None:
    # black-box mode (tests/tla/test_blackbox_traces.py) checks a harness trace only from a fresh
    # target: the session's first case; every later case finds the state earlier cases left
    traces = sorted(harness_run.glob("KIP-*.ndjson"))
    assert len(traces) >= 8
    fresh = harness_run / "KIP-595_Vote_1.ndjson"
    for t in traces:
        verdict = validate_trace(t)
        if t == fresh:
            assert verdict.status == "PASS", verdict.reason
            continue
        assert (verdict.status, verdict.passed, verdict.checked) == ("NOT CHECKED", False, False), t
        # a later case's trace starts from an earlier case's state; a case skipped at this quorum size
        # (HighWatermark/6 needs 5 voters) holds no message of the target at all
        assert verdict.reason != NOT_CHECKED_REASON
        assert "not start from a fresh node" in verdict.reason or "sent no message" in verdict.reason, t
        assert verdict.tlc is None  # TLC did not even start
    result = CliRunner().invoke(validate_trace_command, [str(traces[0])])
    assert result.exit_code == 1, result.output
    assert "NOT CHECKED" in result.output and "PASS" not in result.output


# --------------------------------------------------------------------------- environment mode


def test_environment_message_is_the_whole_record_as_recorded() -> None:
    # KIP-595 "Fetch Response Handling": a virtual leader's records (a batch of 2 in epoch 3 after
    # the LeaderChange control record) and its HW reach the model as they were sent
    request = {
        "api": "Fetch", "kind": "request", "from": 1, "to": 2, "correlationId": 7,
        "body": {"Topics": [{"Partitions": [{"CurrentLeaderEpoch": 3, "FetchOffset": 0, "LastFetchedEpoch": -1}]}]},
    }  # fmt: skip
    batches = [
        {"baseOffset": 0, "lastOffset": 0, "epoch": 3, "control": True},
        {"baseOffset": 1, "lastOffset": 2, "epoch": 3, "control": False},
    ]
    part = {
        "ErrorCode": 0, "HighWatermark": 2, "Records": {"batches": batches},
        "DivergingEpoch": {"Epoch": -1, "EndOffset": -1}, "CurrentLeader": {"LeaderId": 2, "LeaderEpoch": 3},
    }  # fmt: skip
    response = {
        "api": "Fetch", "kind": "response", "from": 2, "to": 1, "correlationId": 7,
        "body": {"ErrorCode": 0, "Responses": [{"Partitions": [part]}]},
    }  # fmt: skip
    rec = environment_message(response, "c1", request)
    assert rec == {
        "type": "FetchResponse", "from": 2, "to": 1, "error": "NONE", "epoch": 3, "leaderId": 2,
        "fetchOffset": 0, "lastFetchedEpoch": 0,
        "records": [{"epoch": 3, "value": "LeaderChange"}, *[{"epoch": 3, "value": "record"}] * 2],
        "divergingEpoch": -1, "divergingEndOffset": -1, "highWatermark": 2,
        "snapshotEndOffset": -1, "snapshotEpoch": -1,  # no SnapshotId (KIP-630)
    }  # fmt: skip
    # KIP-595 "Vote Request Handling": nothing bounds LastOffset; a null cluster id is the node's own
    vote = {
        "api": "Vote", "kind": "request", "from": 3, "to": 1, "correlationId": 1,
        "body": {"ClusterId": None, "Topics": [{"Partitions": [
            {"CandidateEpoch": 9, "CandidateId": 3, "LastOffsetEpoch": 8, "LastOffset": 1_000_000}]}]},
    }  # fmt: skip
    assert environment_message(vote, "c1") == {
        "type": "VoteRequest", "from": 3, "to": 1, "clusterId": "c1", "epoch": 9,
        "lastOffsetEpoch": 8, "lastOffset": 1_000_000, "preVote": False,  # Vote v0-1: a real vote (KIP-996)
    }  # fmt: skip
    # INCONSISTENT_CLUSTER_ID for the whole request: the model has no such message
    assert environment_message({**response, "body": {"ErrorCode": 104}}, "c1", request) is None


@pytest.mark.slow
@pytest.mark.cluster
def test_node_trace_rows_take_the_virtual_voters_as_environment(harness_run: Path, tmp_path: Path) -> None:
    trace = translate(_node_trace(harness_run, tmp_path))
    # the virtual voters, and the observer HighWatermark/2 fetches as (known only from its fetches)
    assert trace.environment == {2, 3} | trace.observers and len(trace.observers) == 1
    events = [e.event for e in trace.events]
    assert events[0] == "Restart" and events.count("Restart") >= 2
    assert "EnvironmentSend" in events and "EnvironmentReceive" in events
    for k, e in enumerate(trace.events):
        if e.event.startswith("Handle") and e.msg.get("from") in trace.environment:
            # the handler takes exactly the record the row before it put into the network
            assert trace.events[k - 1].event == "EnvironmentSend" and trace.events[k - 1].msg == e.msg, (k, e)
    far = [e for e in trace.events if e.event == "EnvironmentSend" and e.msg.get("lastOffset", 0) >= 1_000_000]
    assert far, "Vote/2 asks with LastOffset 1,000,000"


@pytest.mark.tlc
@pytest.mark.slow
@pytest.mark.cluster
@needs_tlc
def test_embedded_node_trace_validates(harness_run: Path, tmp_path: Path) -> None:
    path = _node_trace(harness_run, tmp_path)
    verdict = validate_trace(path, timeout=300)
    assert verdict.status == "PASS", (verdict.reason, verdict.failed_event, verdict.state_before)
    assert verdict.events == len(translate(path).events) > 100


@pytest.mark.tlc
@pytest.mark.slow
@pytest.mark.cluster
@needs_tlc
def test_second_vote_in_an_epoch_fails_at_that_event(harness_run: Path, tmp_path: Path) -> None:
    # VoteOnce: right after the node grants a candidate, the other virtual voter asks in the same
    # epoch and the doctored node "grants" it too (KIP-595 "Vote Request Handling")
    lines = _lines(_node_trace(harness_run, tmp_path))
    at = next(
        k
        for k, line in enumerate(lines)
        if line.get("event") == "HandleVoteRequest"
        and line["state"]["role"] == "Voted"
        and lines[k - 1].get("msg", {}).get("api") == "Vote"
    )
    receive, grant = json.loads(json.dumps(lines[at - 1])), json.loads(json.dumps(lines[at]))
    other = next(v for v in (2, 3) if v != receive["msg"]["from"])
    receive["msg"].update(**{"from": other, "correlationId": 999_999})
    for topic in receive["msg"]["body"]["Topics"]:
        for part in topic["Partitions"]:
            part["CandidateId"] = other
    grant["state"]["votedId"] = other
    doctored = _write(tmp_path / "second-vote.ndjson", [*lines[: at + 1], receive, grant, *lines[at + 1 :]])
    _expect_failure_at_line(doctored, at + 3)  # 1-based line of the doctored grant


@pytest.mark.tlc
@pytest.mark.slow
@pytest.mark.cluster
@needs_tlc
def test_high_watermark_going_backwards_fails_at_that_event(harness_run: Path, tmp_path: Path) -> None:
    # HighWatermarkMonotonic: a later fetch response of the virtual leader leaves the follower's HW
    # below the one it had (KIP-595 "Fetch Response Handling")
    lines = _lines(_node_trace(harness_run, tmp_path))
    last_hw = 0
    target = None
    for k, line in enumerate(lines[1:], start=1):
        if "state" not in line:
            continue
        if line["event"] == "Restart":
            last_hw = 0  # the HW is volatile
        elif line["event"] == "HandleFetchResponse" and line["state"]["role"] == "Follower" and last_hw > 0:
            target = k
            break
        last_hw = line["state"]["highWatermark"]
    assert target is not None, "the trace has no follower fetch response after a positive HW"
    lines[target]["state"]["highWatermark"] = last_hw - 1
    _expect_failure_at_line(_write(tmp_path / "hw-backwards.ndjson", lines), target + 1)
