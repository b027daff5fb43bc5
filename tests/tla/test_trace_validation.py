"""Trace validation against tla/TraceKRaft.tla with hand-written traces.

The valid trace is an election of node 1 (KIP-595 "Vote Request Handling",
"Vote Response Handling" 2), BeginQuorumEpoch to node 2, and replication of a
client batch until the HW covers it ("Fetch Request Handling" 4, "Fetch
Response Handling").  Each doctored trace changes one event; validation must
fail at exactly that event.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kraft_tck.tla import tlc as tlc_module
from kraft_tck.tla.cli import validate_trace_command
from kraft_tck.tla.tlc import SPEC_DIR, cds_archive_path, find_jar, find_java, tlc_unavailable_reason
from kraft_tck.tla.trace_render import trace_data
from kraft_tck.tla.trace_translate import TraceFormatError, translate
from kraft_tck.tla.trace_validate import batch_modules, validate_trace, validate_traces

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

Event = tuple[int, str, dict[str, Any]]


def st(role: str, epoch: int, voted: int, leader: int, leo: int, lfe: int, hw: int) -> dict[str, Any]:
    return {
        "role": role,
        "epoch": epoch,
        "votedId": voted,
        "leaderId": leader,
        "logEndOffset": leo,
        "lastFetchedEpoch": lfe,
        "highWatermark": hw,
    }


ELECTION: list[Event] = [
    (1, "StartElection", st("Candidate", 1, 1, -1, 0, 0, 0)),
    (2, "HandleVoteRequest", st("Voted", 1, 1, -1, 0, 0, 0)),
    (1, "HandleVoteResponse", st("Candidate", 1, 1, -1, 0, 0, 0)),
    (1, "BecomeLeader", st("Leader", 1, 1, 1, 1, 1, 0)),
    (2, "HandleBeginQuorumEpochRequest", st("Follower", 1, 1, 1, 0, 0, 0)),
]
REPLICATION: list[Event] = [
    (2, "SendFetchRequest", st("Follower", 1, 1, 1, 0, 0, 0)),
    (1, "HandleFetchRequest", st("Leader", 1, 1, 1, 1, 1, 0)),
    (2, "HandleFetchResponse", st("Follower", 1, 1, 1, 1, 1, 0)),
    (1, "ClientAppend", st("Leader", 1, 1, 1, 3, 1, 0)),
    (2, "SendFetchRequest", st("Follower", 1, 1, 1, 1, 1, 0)),
    (1, "HandleFetchRequest", st("Leader", 1, 1, 1, 3, 1, 1)),
    (2, "HandleFetchResponse", st("Follower", 1, 1, 1, 3, 1, 1)),
    (2, "SendFetchRequest", st("Follower", 1, 1, 1, 3, 1, 1)),
    (1, "HandleFetchRequest", st("Leader", 1, 1, 1, 3, 1, 3)),
    (2, "HandleFetchResponse", st("Follower", 1, 1, 1, 3, 1, 3)),
]
NEXT_FETCH: list[Event] = [
    (2, "SendFetchRequest", st("Follower", 1, 1, 1, 3, 1, 3)),
    (1, "HandleFetchRequest", st("Leader", 1, 1, 1, 3, 1, 3)),
]


def write_trace(
    path: Path, events: list[Event], *, with_messages: bool = True, observers: tuple[int, ...] = ()
) -> Path:
    header: dict[str, Any] = {
        "type": "header",
        "format": 1,
        "source": "node",
        "run": "hand-written",
        "clusterId": "c1",
        "voters": [1, 2, 3],
        "config": {},
    }
    if observers:
        header["observers"] = list(observers)
    lines = [json.dumps(header)]
    seq = 0
    for node, event, state in events:
        if with_messages and event.startswith("Handle"):
            # a node trace has Receive before the handler's event; validation skips it
            msg = {
                "api": "Fetch",
                "apiKey": 1,
                "kind": "request",
                "version": 17,
                "correlationId": seq,
                "from": 0,
                "to": node,
                "body": {},
            }
            line = {"type": "event", "seq": seq, "ts": seq, "node": node, "event": "Receive", "msg": msg}
            lines.append(json.dumps(line))
            seq += 1
        line = {"type": "event", "seq": seq, "ts": seq, "node": node, "event": event, "state": state}
        lines.append(json.dumps(line))
        seq += 1
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------- conversion


def test_trace_data_lists_action_events_only(tmp_path: Path) -> None:
    trace = translate(write_trace(tmp_path / "t.ndjson", ELECTION))
    assert [e.event for e in trace.events] == [e for _, e, _ in ELECTION]
    text = trace_data(trace)
    assert text.startswith("---- MODULE TraceData ----")
    assert "TraceVoters == {1, 2, 3}" in text
    assert 'TraceCluster == "c1"' in text
    assert "HiddenSteps == 0" in text
    # one Row(node, event, msg, reply, state) per event; St(...) lists the state in STATE_FIELDS order
    assert [line.split(", ")[1] for line in text.splitlines() if line.startswith("Row(") and "==" not in line] == [
        f'"{e}"' for _, e, _ in ELECTION
    ]
    # a message or state named more than once is defined once (V1 == ...) and named by the rows
    shared = dict(re.findall(r"^(V\d+) == (.*)$", text, re.M))
    rows = re.sub(r"\bV\d+\b", lambda m: shared[m.group(0)], text.split("TraceLog ==")[1])
    assert 'Row(1, "StartElection", NoMsg, NoMsg, St("Candidate", 1, 1, -1, 0, 0, 0))' in rows
    assert "St(a1, a2, a3, a4, a5, a6, a7) == [role |-> a1, epoch |-> a2, votedId |-> a3, leaderId |-> a4" in text


def test_harness_traces_allow_hidden_steps(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.ndjson", ELECTION)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["source"] = "harness"
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert "HiddenSteps == 3" in trace_data(translate(path))


def test_schema_violation_names_the_line(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.ndjson", ELECTION)
    lines = path.read_text().splitlines()
    bad = json.loads(lines[1])
    bad["state"]["role"] = "King"
    lines[1] = json.dumps(bad)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceFormatError, match=r"t\.ndjson:2: state/role: .King. is not one of"):
        translate(path)


def test_unknown_node_is_rejected(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.ndjson", [(7, "StartElection", st("Candidate", 1, 7, -1, 0, 0, 0))])
    with pytest.raises(TraceFormatError, match="node 7 is neither a voter nor an observer"):
        translate(path)


def test_missing_header_is_rejected(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.ndjson", ELECTION)
    path.write_text("\n".join(path.read_text().splitlines()[1:]) + "\n")
    with pytest.raises(TraceFormatError, match="line 1 is not a trace header"):
        translate(path)


# --------------------------------------------------------------------------- real TLC


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_valid_election_and_append_trace_passes(tmp_path: Path) -> None:
    verdict = validate_trace(write_trace(tmp_path / "good.ndjson", ELECTION + REPLICATION), timeout=300)
    assert verdict.passed, (verdict.reason, verdict.failed_event, verdict.state_before)
    assert verdict.events == len(ELECTION + REPLICATION)


# The leader of ELECTION restarts (Resigned: it tells the voters with EndQuorumEpoch) while the others elect
# node 3 in epoch 2. Node 2, Voted in epoch 2, refuses without a leader: node 1 learns epoch 2 only. The new
# leader's refusal names it: node 1 follows it in its own epoch (Kafka's maybeHandleCommonResponse; the
# core's _maybe_transition; KRaft.tla LearnLeader). Seen first in a real 3-process kill -9 run.
RESIGNED_LEARNS_LEADER: list[Event] = [
    *ELECTION,
    (3, "HandleVoteRequest", st("Voted", 1, 1, -1, 0, 0, 0)),
    (1, "Restart", st("Resigned", 1, 1, 1, 1, 1, 0)),
    (3, "StartElection", st("Candidate", 2, 3, -1, 0, 0, 0)),
    (2, "HandleVoteRequest", st("Voted", 2, 3, -1, 0, 0, 0)),
    (2, "HandleEndQuorumEpochRequest", st("Voted", 2, 3, -1, 0, 0, 0)),
    (1, "HandleEndQuorumEpochResponse", st("Unattached", 2, -1, -1, 1, 1, 0)),
    (3, "HandleVoteResponse", st("Candidate", 2, 3, -1, 0, 0, 0)),
    (3, "BecomeLeader", st("Leader", 2, 3, 3, 1, 2, 0)),
    (3, "HandleEndQuorumEpochRequest", st("Leader", 2, 3, 3, 1, 2, 0)),
    (1, "HandleEndQuorumEpochResponse", st("Follower", 2, -1, 3, 1, 1, 0)),
]


# After ELECTION, node 3 campaigns in epoch 1. Node 2, the Follower of node 1 in that epoch, refuses and
# names its leader: node 3 follows node 1, keeping its own vote (Kafka's maybeHandleCommonResponse, third
# case; the core's _handle_common_response; KRaft.tla LearnLeader in HandleVoteResponse).
CANDIDATE_LEARNS_LEADER: list[Event] = [
    *ELECTION,
    (3, "StartElection", st("Candidate", 1, 3, -1, 0, 0, 0)),
    (2, "HandleVoteRequest", st("Follower", 1, 1, 1, 0, 0, 0)),
    (3, "HandleVoteResponse", st("Follower", 1, 3, 1, 0, 0, 0)),
]


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
@pytest.mark.parametrize(("events", "stays"), [
    pytest.param(RESIGNED_LEARNS_LEADER, (1, "HandleEndQuorumEpochResponse", st("Unattached", 2, -1, -1, 1, 1, 0)),
                 id="a restarted leader, from a refusal"),
    pytest.param(CANDIDATE_LEARNS_LEADER, (3, "HandleVoteResponse", st("Candidate", 1, 3, -1, 0, 0, 0)),
                 id="a candidate, from a vote answered without error"),
])
def test_an_answer_naming_the_leader_of_the_own_epoch_is_followed(
    tmp_path: Path, events: list[Event], stays: Event
) -> None:
    verdict = validate_trace(write_trace(tmp_path / "learn.ndjson", events), timeout=300)
    assert verdict.passed, (verdict.reason, verdict.failed_event, verdict.state_before)
    # and only so: not following after that answer is no behaviour of KRaft
    _expect_failure_at(tmp_path, [*events[:-1], stays], len(events) - 1)


# Observer 4 fetches node 2 while node 2 has voted for node 1 in epoch 1 and knows no leader: the refusal
# moves it to epoch 1 without a leader. Its next fetch goes to node 1, now the leader of epoch 1, whose
# answer without error names itself and carries the LeaderChange record. The observer follows node 1 and
# appends the record in the same step (Kafka's maybeHandleCommonResponse, third case: the answer still goes
# to handleFetchResponse; the core's _handle_common_response; KRaft.tla HandleFetchResponse).
OBSERVER_LEARNS_LEADER_AND_APPENDS: list[Event] = [
    *ELECTION[:2],
    (4, "SendFetchRequest", st("Unattached", 0, -1, -1, 0, 0, 0)),
    (2, "HandleFetchRequest", st("Voted", 1, 1, -1, 0, 0, 0)),
    (4, "HandleFetchResponse", st("Unattached", 1, -1, -1, 0, 0, 0)),
    *ELECTION[2:4],
    (4, "SendFetchRequest", st("Unattached", 1, -1, -1, 0, 0, 0)),
    (1, "HandleFetchRequest", st("Leader", 1, 1, 1, 1, 1, 0)),
    (4, "HandleFetchResponse", st("Follower", 1, -1, 1, 1, 1, 0)),
]


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_fetch_answer_naming_the_leader_of_the_own_epoch_is_followed_and_appended(tmp_path: Path) -> None:
    events = OBSERVER_LEARNS_LEADER_AND_APPENDS
    path = write_trace(tmp_path / "learn.ndjson", events, observers=(4,))
    verdict = validate_trace(path, timeout=300)
    assert verdict.passed, (verdict.reason, verdict.failed_event, verdict.state_before)
    # following without appending the answer's record is no behaviour of KRaft
    _expect_failure_at(
        tmp_path, [*events[:-1], (4, "HandleFetchResponse", st("Follower", 1, -1, 1, 0, 0, 0))], len(events) - 1,
        observers=(4,),
    )


def _expect_failure_at(tmp_path: Path, events: list[Event], index: int, *, observers: tuple[int, ...] = ()) -> None:
    path = write_trace(tmp_path / "doctored.ndjson", events, observers=observers)
    verdict = validate_trace(path, timeout=300)
    assert not verdict.passed
    assert verdict.failed_event is not None, verdict.reason
    node, event, state = events[index]
    assert (verdict.failed_event.node, verdict.failed_event.event) == (node, event)
    assert verdict.failed_event.state == state
    assert verdict.state_before is not None


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_second_vote_in_an_epoch_fails(tmp_path: Path) -> None:
    # node 3 campaigns in epoch 1; node 2, which voted for 1, "grants" it too
    events = [
        *ELECTION[:2],
        (3, "StartElection", st("Candidate", 1, 3, -1, 0, 0, 0)),
        (2, "HandleVoteRequest", st("Voted", 1, 3, -1, 0, 0, 0)),
        *ELECTION[2:],
    ]
    _expect_failure_at(tmp_path, events, 3)


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_two_leaders_in_one_epoch_fails(tmp_path: Path) -> None:
    events = [
        *ELECTION,
        (3, "StartElection", st("Candidate", 1, 3, -1, 0, 0, 0)),
        (3, "BecomeLeader", st("Leader", 1, 3, 3, 1, 1, 0)),
    ]
    _expect_failure_at(tmp_path, events, len(ELECTION) + 1)


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_truncation_below_the_high_watermark_fails(tmp_path: Path) -> None:
    events = [*ELECTION, *REPLICATION, *NEXT_FETCH, (2, "HandleFetchResponse", st("Follower", 1, 1, 1, 1, 1, 1))]
    _expect_failure_at(tmp_path, events, len(events) - 1)


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_high_watermark_going_backwards_fails(tmp_path: Path) -> None:
    events = [*ELECTION, *REPLICATION, *NEXT_FETCH, (2, "HandleFetchResponse", st("Follower", 1, 1, 1, 3, 1, 1))]
    _expect_failure_at(tmp_path, events, len(events) - 1)


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_cli_prints_pass_and_fail(tmp_path: Path) -> None:
    good = write_trace(tmp_path / "good.ndjson", ELECTION)
    bad = write_trace(tmp_path / "bad.ndjson", [*ELECTION[:1], (1, "BecomeLeader", st("Leader", 1, 1, 1, 1, 1, 0))])
    result = CliRunner().invoke(validate_trace_command, [str(good), str(bad)])
    assert result.exit_code == 1, result.output
    # The console wraps at its width (80 under CliRunner): a long tmp path (pytest-xdist's popen-gwN) is cut
    # across lines, so compare the output with its line breaks removed.
    output = result.output.replace("\n", "")
    assert f"PASS {good}" in output
    assert f"FAIL {bad}" in output
    assert "BecomeLeader" in output and "spec state before it" in output


# --------------------------------------------------------------------------- several traces in one TLC run


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_one_tlc_run_validates_several_traces_and_each_failure_stays_at_its_event(tmp_path: Path) -> None:
    """validate_traces: the passing traces share one TLC run (TraceBatch); every doctored trace of the batch
    fails at exactly the event it fails at alone, with the spec state before it."""
    good = [
        write_trace(tmp_path / "good-election.ndjson", ELECTION),
        write_trace(tmp_path / "good-replication.ndjson", ELECTION + REPLICATION),
    ]
    doctored = {
        # node 2, which voted for 1, "grants" node 3 too (a row no behaviour produces)
        "second-vote": ([*ELECTION[:2], (3, "StartElection", st("Candidate", 1, 3, -1, 0, 0, 0)),
                         (2, "HandleVoteRequest", st("Voted", 1, 3, -1, 0, 0, 0)), *ELECTION[2:]], 3),
        # the high watermark goes backwards
        "hw-backwards": ([*ELECTION, *REPLICATION, *NEXT_FETCH,
                          (2, "HandleFetchResponse", st("Follower", 1, 1, 1, 3, 1, 1))], 17),
    }  # fmt: skip
    bad = {name: write_trace(tmp_path / f"{name}.ndjson", events) for name, (events, _) in doctored.items()}
    verdicts = validate_traces([*good, *bad.values()], timeout=300)
    assert [v.path for v in verdicts] == [*good, *bad.values()]
    assert [v.status for v in verdicts] == ["PASS", "PASS", "FAIL", "FAIL"]
    # one run for the passing traces: the batch module's output, shared
    assert verdicts[0].tlc is verdicts[1].tlc and verdicts[0].tlc is not None
    assert "BATCH-MATCHED" in verdicts[0].tlc.output
    for v, (events, index) in zip(verdicts[2:], doctored.values(), strict=True):
        alone = validate_trace(v.path, timeout=300)
        node, event, state = events[index]
        assert v.failed_event is not None and alone.failed_event is not None
        assert (v.failed_event.node, v.failed_event.event, v.failed_event.state) == (node, event, state)
        assert v.failed_event.seq == alone.failed_event.seq
        assert v.state_before == alone.state_before is not None


def test_a_batch_module_gives_each_trace_its_own_instance_of_the_spec(tmp_path: Path) -> None:
    traces = [translate(write_trace(tmp_path / f"t{k}.ndjson", ELECTION[: k + 2])) for k in range(3)]
    modules = batch_modules(traces)
    assert {"TraceBatch.tla", "TraceBatch.cfg", "TraceData.tla", "TraceData3.tla", "TraceKRaft.tla"} <= set(modules)
    # one TraceKRaft for SANY to parse, not a copy per trace; its TraceData declares the rows' names as constants
    assert not any(name.startswith("TraceKRaft") and name != "TraceKRaft.tla" for name in modules)
    assert modules["TraceKRaft.tla"] == (SPEC_DIR / "TraceKRaft.tla").read_text()
    assert "CONSTANTS " in modules["TraceData.tla"] and "TraceLog" in modules["TraceData.tla"]
    assert "MODULE TraceData2 " in modules["TraceData2.tla"]
    # node traces: the whole state space, as alone (no exit once matched)
    assert "BatchDoneExit" not in modules["TraceBatch.cfg"]
    assert "D3 == INSTANCE TraceData3" in modules["TraceBatch.tla"]
    assert "T3 == INSTANCE TraceKRaft WITH " in modules["TraceBatch.tla"]
    assert "TraceLog <- D3!TraceLog" in modules["TraceBatch.tla"]


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_black_box_traces_share_a_run_that_ends_once_each_matched(tmp_path: Path) -> None:
    """Black-box harness traces in one run: a trace stops once a behaviour matched all its rows, the run once
    every trace did (BATCH-DONE), and a doctored trace still fails at its row."""
    from .test_blackbox_prelude import STORY, target_fetch, target_vote, vote, vote_answer, write

    good = [write(tmp_path / "story.ndjson", STORY),
            write(tmp_path / "late.ndjson", [*STORY[:2], target_vote(50, 5), *STORY[2:]])]  # fmt: skip
    bad = [write(tmp_path / "twice.ndjson", [*STORY[:2], vote(9, 3, 7), vote_answer(9, 3, 7, True)]),
           write(tmp_path / "back.ndjson", [*STORY[:2], target_fetch(100, 5)])]  # fmt: skip
    passing = validate_traces(good, timeout=300)
    assert [v.status for v in passing] == ["PASS", "PASS"], [v.reason for v in passing]
    assert passing[0].tlc is passing[1].tlc and passing[0].tlc is not None
    assert "BATCH-DONE" in passing[0].tlc.output
    # with traces that never match all rows in the batch, the run explores to its end, then each of those
    # is validated again alone
    verdicts = validate_traces([*good, *bad], timeout=300)
    assert [v.status for v in verdicts] == ["PASS", "PASS", "FAIL", "FAIL"], [v.reason for v in verdicts]
    assert verdicts[0].tlc is verdicts[1].tlc
    assert [v.failed_event.seq if v.failed_event else None for v in verdicts[2:]] == [3, 2]


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_node_and_black_box_traces_share_a_run(tmp_path: Path) -> None:
    """A conformance run's lives of both kinds in one TLC run (one start-up, not two): the node traces explore
    their whole state space as alone, the black-box traces stop at their first full match but end no run (no
    BATCH-DONE exit, which would cut the node traces short), and a doctored trace of either kind still fails at
    its row."""
    from .test_blackbox_prelude import STORY, target_fetch, write

    node = [write_trace(tmp_path / "node-election.ndjson", ELECTION),
            write_trace(tmp_path / "node-replication.ndjson", ELECTION + REPLICATION)]  # fmt: skip
    blackbox = [write(tmp_path / "story.ndjson", STORY)]
    traces = [translate(p) for p in (*node, *blackbox)]
    modules = batch_modules(traces)
    assert "BatchDoneExit" not in modules["TraceBatch.cfg"]
    # the black-box trace's guard (no step once it matched every row), not the node traces'
    assert "batchTrace = 3 /\\ TLCGet(103) <= Len(D3!TraceLog) /\\ T3!TraceNext" in modules["TraceBatch.tla"]
    assert "batchTrace = 1 /\\ T1!TraceNext" in modules["TraceBatch.tla"]
    passing = validate_traces([*node, *blackbox], timeout=300)
    assert [v.status for v in passing] == ["PASS", "PASS", "PASS"], [v.reason for v in passing]
    assert passing[0].tlc is passing[2].tlc and passing[0].tlc is not None  # one run
    backwards = (2, "HandleFetchResponse", st("Follower", 1, 1, 1, 3, 1, 1))  # the high watermark goes back
    hw_back = write_trace(tmp_path / "hw-backwards.ndjson", [*ELECTION, *REPLICATION, *NEXT_FETCH, backwards])
    back = write(tmp_path / "back.ndjson", [*STORY[:2], target_fetch(100, 5)])
    verdicts = validate_traces([*node, hw_back, *blackbox, back], timeout=300)
    assert [v.status for v in verdicts] == ["PASS", "PASS", "FAIL", "PASS", "FAIL"], [v.reason for v in verdicts]
    failed = verdicts[2].failed_event
    assert failed is not None and (failed.node, failed.event, failed.state) == backwards
    assert verdicts[4].failed_event is not None and verdicts[4].failed_event.seq == 2


# --------------------------------------------------------------------------- TLC's class-data sharing archive


def test_the_class_data_archive_is_named_by_the_jar_and_the_jvm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KRAFT_TCK_CACHE", str(tmp_path / "cache"))
    jar, java = tmp_path / "tla2tools.jar", tmp_path / "java"
    jar.write_bytes(b"jar")
    java.write_bytes(b"java")
    first = cds_archive_path(str(java), jar)
    assert first.parent == tmp_path / "cache" and first == cds_archive_path(str(java), jar)
    jar.write_bytes(b"jar2")  # another size
    second = cds_archive_path(str(java), jar)
    assert second != first
    os.utime(jar, ns=(1, 1))  # same size, another mtime
    assert cds_archive_path(str(java), jar) not in (first, second)
    java.write_bytes(b"java17")  # another JVM
    assert cds_archive_path(str(java), jar) not in (first, second)


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_fresh_cache_gets_an_archive_and_a_bad_one_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on a fresh clone: no cache directory yet. The first run writes the archive, later runs use it; a
    file that is no archive changes no verdict and is replaced."""
    monkeypatch.setenv("KRAFT_TCK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("KRAFT_TCK_TLC_CDS", raising=False)
    good = write_trace(tmp_path / "good.ndjson", ELECTION)
    archive = cds_archive_path(find_java(), find_jar())
    assert not archive.exists()
    assert validate_trace(good, timeout=300).passed
    assert archive.is_file()
    verdict = validate_trace(good, timeout=300)
    assert verdict.passed and verdict.tlc is not None and "[cds" not in verdict.tlc.output
    # an archive of another JVM (it says so) and a file that is no archive at all (it would not say)
    archive.chmod(0o644)
    archive.write_bytes(b"not an archive")
    tlc_module._CDS._checked.clear()
    verdict = validate_trace(good, timeout=300)
    assert verdict.passed and verdict.tlc is not None and "[cds" not in verdict.tlc.output
    assert archive.is_file() and archive.read_bytes()[:4] == bytes.fromhex("a8ab0bf0")  # written anew
