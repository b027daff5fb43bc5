"""Trace validation in black-box mode: the conformance harness's own trace of a real run.

A harness trace holds only the messages between the harness's virtual voters and the target.  The
voters are the environment (tla/TraceKRaft.tla EnvironmentSend), every step of the target is hidden
(TargetNext, at most BLACKBOX_HIDDEN_STEPS in a row), and each message the target sent must be in
flight in the spec when the harness receives it (EnvironmentReceive with BlackBox).  The target starts
fresh (KRaft's Init); a case that finds it in the state earlier cases left is NOT CHECKED, never PASS.
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
from kraft_tck.tla.trace_translate import translate
from kraft_tck.tla.trace_validate import validate_trace

from tests.tla.test_real_traces import _lines, _write

REPO = Path(__file__).resolve().parents[2]
needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))


def _harness_traces(out: Path, *selection: str) -> Path:
    """Conformance cases (a pytest selection) against the embedded reference node, TLC off: one harness
    trace per case in ``out``."""
    args = [
        sys.executable, "-m", "pytest", *selection,
        "-q", "-p", "no:cacheprovider", "--no-tlc", "--trace-dir", str(out),
    ]  # fmt: skip
    proc = subprocess.run(args, cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def vote_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Vote cases, one harness trace per case.  Vote/1 is the session's first case: the target is
    freshly formatted, follows virtual leader 2 in epoch 1 and grants candidate 3 its vote in epoch 2."""
    return _harness_traces(tmp_path_factory.mktemp("blackbox"), "conformance/test_vote.py")


def _vote_exchange(lines: list[dict[str, Any]], candidate: int, granted: bool) -> list[dict[str, Any]]:
    """A Vote request from ``candidate`` in the epoch of the trace's last vote, and the target's answer."""
    request = next(obj for obj in reversed(lines) if obj.get("msg", {}).get("api") == "Vote" and obj["event"] == "Send")
    response = next(
        obj for obj in reversed(lines) if obj.get("msg", {}).get("api") == "Vote" and obj["event"] == "Receive"
    )
    req = json.loads(json.dumps(request))
    resp = json.loads(json.dumps(response))
    seq = lines[-1]["seq"]
    req.update(seq=seq + 1, node=candidate)
    req["msg"].update({"from": candidate, "correlationId": 99})
    req["msg"]["body"]["Topics"][0]["Partitions"][0]["CandidateId"] = candidate
    resp.update(seq=seq + 2, node=candidate)
    resp["msg"].update({"to": candidate, "correlationId": 99})
    resp["msg"]["body"]["Topics"][0]["Partitions"][0]["VoteGranted"] = granted
    return [req, resp]


@needs_tlc
def test_fresh_harness_trace_passes(vote_run: Path) -> None:
    path = vote_run / "KIP-595_Vote_1.ndjson"
    trace = translate(path)
    assert trace.target == 1 and trace.environment == frozenset({2, 3}) and not trace.not_fresh
    kinds = [ev.event for ev in trace.events]
    assert kinds.count("EnvironmentReceive") >= 4, kinds  # BQE response, fetches, the vote
    verdict = validate_trace(path, timeout=120)
    assert verdict.status == "PASS", verdict.reason
    result = CliRunner().invoke(validate_trace_command, [str(path)])
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output and "NOT CHECKED" not in result.output


def test_later_cases_start_from_an_unknown_state(vote_run: Path) -> None:
    # the shared target carries the log of earlier cases: its first Fetch says so, nothing is guessed
    verdict = validate_trace(vote_run / "KIP-595_Vote_2.ndjson")
    assert verdict.status == "NOT CHECKED"
    assert "fresh node" in verdict.reason


@needs_tlc
def test_second_vote_in_one_epoch_fails_at_it(vote_run: Path, tmp_path: Path) -> None:
    # KIP-595 "Vote Request Handling": a voter grants at most one vote per epoch.  Candidate 2 asks in the
    # epoch the target already voted for candidate 3 in: a refusal is a behaviour, a grant is not.
    lines = _lines(vote_run / "KIP-595_Vote_1.ndjson")
    refused = _write(tmp_path / "refused.ndjson", lines + _vote_exchange(lines, 2, granted=False))
    assert validate_trace(refused, timeout=120).status == "PASS"
    doctored = _write(tmp_path / "granted.ndjson", lines + _vote_exchange(lines, 2, granted=True))
    verdict = validate_trace(doctored, timeout=120)
    assert verdict.status == "FAIL", verdict.reason
    assert verdict.failed_event is not None and verdict.failed_event.seq == lines[-1]["seq"] + 2
    assert verdict.failed_event.event == "EnvironmentReceive"


@needs_tlc
def test_wrong_epoch_in_an_answer_fails_at_it(vote_run: Path, tmp_path: Path) -> None:
    # KIP-595 "BeginQuorumEpoch Request Handling": the target answers in the leader's epoch it adopted
    lines = _lines(vote_run / "KIP-595_Vote_1.ndjson")
    at = next(
        k
        for k, obj in enumerate(lines)
        if obj.get("msg", {}).get("api") == "BeginQuorumEpoch" and obj["event"] == "Receive"
    )
    lines[at]["msg"]["body"]["Topics"][0]["Partitions"][0]["LeaderEpoch"] += 1
    verdict = validate_trace(_write(tmp_path / "bqe.ndjson", lines), timeout=120)
    assert verdict.status == "FAIL", verdict.reason
    assert verdict.failed_event is not None and verdict.failed_event.seq == lines[at]["seq"]


@pytest.fixture(scope="module")
def election_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Election/2 alone: the target wins epoch 2, appends its LeaderChange record and serves virtual voter
    2's fetches (the high watermark reaches 1)."""
    out = tmp_path_factory.mktemp("blackbox-election")
    return _harness_traces(out, "conformance/test_election.py", "-k", "majority")


def _deposed_leader_fetches(lines: list[dict[str, Any]], fetch_offset: int, last_epoch: int) -> list[dict[str, Any]]:
    """Virtual voter 2 announces itself leader of the next epoch; the target (leader until then) answers
    and fetches from 2 at ``fetch_offset`` with ``last_epoch``, copied from a real Fetch request of it."""
    bqe = next(o for o in lines if o.get("msg", {}).get("api") == "BeginQuorumEpoch"
               and o["event"] == "Receive" and o["msg"]["kind"] == "response")  # fmt: skip
    fetch = next(o for o in lines if o.get("msg", {}).get("api") == "Fetch"
                 and o["event"] == "Receive" and o["msg"]["kind"] == "request")  # fmt: skip
    epoch = max(o["msg"]["body"]["Topics"][0]["Partitions"][0].get("LeaderEpoch", 0)
                for o in lines if o.get("msg", {}).get("api") == "BeginQuorumEpoch")  # fmt: skip
    seq, ts = lines[-1]["seq"], lines[-1]["ts"]
    announce = json.loads(json.dumps(bqe))
    announce.update(seq=seq + 1, ts=ts + 1, event="Send")
    announce["msg"].update({"kind": "request", "from": 2, "to": 1, "correlationId": 901, "body": {
        "ClusterId": "a3JhZnQtdGNrLWNvbmZvcg", "VoterId": 1, "LeaderEndpoints": [],
        "Topics": [{"TopicName": "__cluster_metadata",
                    "Partitions": [{"PartitionIndex": 0, "LeaderId": 2, "LeaderEpoch": epoch + 1}]}]}})  # fmt: skip
    follow = json.loads(json.dumps(fetch))
    follow.update(seq=seq + 2, ts=ts + 2)
    follow["msg"]["correlationId"] = 902
    part = follow["msg"]["body"]["Topics"][0]["Partitions"][0]
    part.update(CurrentLeaderEpoch=epoch + 1, FetchOffset=fetch_offset, LastFetchedEpoch=last_epoch)
    answer = json.loads(json.dumps(bqe))
    answer.update(seq=seq + 3, ts=ts + 3)
    answer["msg"]["correlationId"] = 901
    answer["msg"]["body"]["Topics"][0]["Partitions"][0].update(LeaderId=2, LeaderEpoch=epoch + 1)
    return [announce, follow, answer]


@needs_tlc
def test_a_deposed_leaders_fetch_shows_records_no_answer_served(election_run: Path, tmp_path: Path) -> None:
    # A leader's log grows by client writes the harness cannot see (KIP-631 broker records, say); a Fetch
    # answer that serves them says how many there are.  When the leader is deposed before any answer
    # served them, its first Fetch as a follower is what says so: FetchOffset past them, LastFetchedEpoch
    # its own old epoch (KIP-595 "Fetch": from the log end, with the epoch of the last record).  A
    # conformance run under load met exactly this (the controller fenced three brokers right before a
    # virtual voter took over): TLC found no behaviour for it.
    lines = _lines(election_run / "KIP-595_Election_2.ndjson")
    # the epoch the target announced itself leader of (its log: that epoch's LeaderChange record, offset 0)
    (epoch,) = {o["msg"]["body"]["Topics"][0]["Partitions"][0]["LeaderEpoch"] for o in lines
                if o.get("msg", {}).get("api") == "BeginQuorumEpoch" and o["msg"]["kind"] == "request"
                and o["msg"]["from"] == 1}  # fmt: skip
    ok = _write(tmp_path / "appended.ndjson", lines + _deposed_leader_fetches(lines, 4, epoch))
    verdict = validate_trace(ok, timeout=180)
    assert verdict.status == "PASS", verdict.reason
    # control: records of an epoch the target never led cannot be its own appends
    doctored = lines + _deposed_leader_fetches(lines, 4, epoch + 1)
    verdict = validate_trace(_write(tmp_path / "foreign.ndjson", doctored), timeout=180)
    assert verdict.status == "FAIL", verdict.reason
    assert verdict.failed_event is not None and verdict.failed_event.seq == doctored[-2]["seq"]
