"""Trace validation of real traces: the deterministic simulator running the reference core.

Every trace the simulator writes must be a behaviour of tla/KRaft.tla (the
node's Restart at seq 0 is KRaft's Restart from the initial state, a long-poll
answer is an AnswerParkedFetch row derived from the leader's Send).  A copy of a
real trace doctored at one event must fail at exactly that event.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_merge import merge_node_traces
from kraft_tck.tla.trace_translate import NETWORK_EVENTS, _deliveries, translate
from kraft_tck.tla.trace_validate import validate_trace
from kraft_tck.traces.sim import SimConfig, simulate

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

# Long enough for an election (the first timeout fires after ~1-2 s), the cluster-id
# bootstrap record, client writes, long polls and HW advances; short enough to keep
# the whole file well under a minute.
DURATION_MS = 3500
SEEDS = (0, 1)


def _simulate(tmp_path: Path, seed: int, profile: str = "none", duration_ms: int = DURATION_MS) -> Path:
    path = tmp_path / f"seed-{seed}-{profile}.ndjson"
    result = simulate(SimConfig(seed=seed, nodes=3, duration_ms=duration_ms, profile=profile), trace_path=path)
    result.raise_for_violation()
    return path


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    """The header and events ``lines``, the events numbered 0, 1, 2, ... as the trace format wants (a
    doctored trace keeps its seqs in order; spec/trace.py's reader refuses a gap or a repeat)."""
    events = [dict(line, seq=k) if line.get("type") == "event" else line for k, line in enumerate(lines[1:])]
    path.write_text("".join(json.dumps(line) + "\n" for line in [lines[0], *events]))
    return path


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
@pytest.mark.parametrize("seed", SEEDS)
def test_simulator_traces_validate(tmp_path: Path, seed: int) -> None:
    path = _simulate(tmp_path, seed)
    lines = _lines(path)
    actions = [line["event"] for line in lines[1:] if "state" in line]
    # the trace exercises what the model had to learn: Restart at seq 0, an election, long polls
    assert actions[:3] == ["Restart"] * 3
    assert "BecomeLeader" in actions and "ClientAppend" in actions
    assert any("parked" in line.get("note", "") for line in lines[1:])
    verdict = validate_trace(path, timeout=300)
    assert verdict.passed, (verdict.reason, verdict.failed_event, verdict.state_before)
    assert verdict.events == len(translate(path).events) >= len(actions)


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_simulator_trace_with_loss_duplication_and_resends_validates(tmp_path: Path) -> None:
    # The default fault profile loses, duplicates and reorders messages; its seed 0 has an election
    # storm with lost and duplicated Vote traffic, which the translation turns into Drop/DuplicateMessage.
    path = _simulate(tmp_path, 0, profile="default", duration_ms=10_000)
    events = [e.event for e in translate(path).events]
    assert "DropMessage" in events and "DuplicateMessage" in events
    verdict = validate_trace(path, timeout=300)
    assert verdict.passed, (verdict.reason, verdict.failed_event, verdict.state_before)


def test_handler_rows_name_their_message_and_parked_answers_are_rows(tmp_path: Path) -> None:
    # Exact matching: each handler row carries KRaft.tla's record of the message it handles (from the
    # Receive before it) and each parked long poll the leader answers later is a row of its own.
    events = translate(_simulate(tmp_path, 0)).events
    handlers = [e for e in events if e.event.startswith("Handle") and e.event != "HandleDescribeQuorumRequest"]
    assert handlers
    for e in handlers:
        api = e.event.removeprefix("Handle")
        assert e.msg["type"] == api, (e.seq, e.event, e.msg)
        assert e.msg["to"] == e.node and "epoch" in e.msg, (e.seq, e.msg)
    answers = [e for e in events if e.event == "AnswerParkedFetch"]
    assert answers, "seed 0 has long polls answered later"
    for e in answers:
        assert e.msg["type"] == "ParkedFetch" and e.msg["to"] == e.node
        assert e.reply["type"] == "FetchResponse" and e.reply["to"] == e.msg["from"]
    parked = [e for e in events if e.event == "HandleFetchRequest" and e.reply.get("type") == "ParkedFetch"]
    assert len(parked) >= len(answers)


# Default-fault simulator seeds that once failed validation, each for its own reason: a TLC 2.15
# mis-evaluation of the message bag under any-message matching (4, 18); a duplicated fetch parked twice
# and answered twice (8); a duplicated fetch still in the network when the follower fetched again (116);
# a BeginQuorumEpoch resent with the cluster id the first send lacked (141); a DivergingEpoch for an
# epoch below every epoch of the leader's log, answered as Kafka does (145).
REGRESSION_SEEDS = ((4, 10_000), (8, 10_000), (18, 10_000), (116, 5_000), (141, 5_000), (145, 5_000))


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
@pytest.mark.parametrize(("seed", "duration_ms"), REGRESSION_SEEDS)
def test_default_fault_regression_seeds_validate(tmp_path: Path, seed: int, duration_ms: int) -> None:
    path = _simulate(tmp_path, seed, profile="default", duration_ms=duration_ms)
    verdict = validate_trace(path, timeout=300)
    assert verdict.passed, (verdict.reason, verdict.failed_event, verdict.state_before)


def _node_line(seq: int, ts: int, node: int, event: str, **extra: Any) -> dict[str, Any]:
    return {"type": "event", "seq": seq, "ts": ts, "node": node, "event": event, **extra}


def test_merged_node_traces_never_receive_before_send(tmp_path: Path) -> None:
    # node 2's clock says it received the Vote request (ts 5) before node 1 sent it (ts 6): the merge
    # must still put the Send first, and keep each node's own order.
    header = {
        "type": "header",
        "format": 1,
        "source": "node",
        "run": "r",
        "clusterId": "c",
        "voters": [1, 2, 3],
        "config": {},
    }
    st = {
        "role": "Candidate",
        "epoch": 1,
        "votedId": 1,
        "leaderId": -1,
        "logEndOffset": 0,
        "lastFetchedEpoch": -1,
        "highWatermark": 0,
    }
    msg = {
        "api": "Vote",
        "apiKey": 52,
        "kind": "request",
        "version": 1,
        "correlationId": 1,
        "from": 1,
        "to": 2,
        "body": {},
    }
    one = [
        header,
        _node_line(0, 1, 1, "Restart", state=dict(st, role="Unattached", epoch=0, votedId=-1)),
        _node_line(1, 6, 1, "StartElection", state=st),
        _node_line(2, 6, 1, "Send", msg=msg),
    ]
    two = [
        header,
        _node_line(0, 2, 2, "Restart", state=dict(st, role="Unattached", epoch=0, votedId=-1)),
        _node_line(1, 5, 2, "Receive", msg=msg),
        _node_line(2, 5, 2, "HandleVoteRequest", state=dict(st, role="Voted")),
    ]
    paths = [_write(tmp_path / "n1.ndjson", one), _write(tmp_path / "n2.ndjson", two)]
    merged = _lines(merge_node_traces(paths, tmp_path / "merged.ndjson"))
    order = [(line["node"], line["event"]) for line in merged[1:]]
    assert order == [
        (1, "Restart"),
        (2, "Restart"),
        (1, "StartElection"),
        (1, "Send"),
        (2, "Receive"),
        (2, "HandleVoteRequest"),
    ]
    assert [line["seq"] for line in merged[1:]] == list(range(6))
    assert not NETWORK_EVENTS & {e.event for e in translate(tmp_path / "merged.ndjson").events}


_HEADER = {"type": "header", "format": 1, "source": "node", "run": "r", "clusterId": "c", "voters": [1, 2, 3],
           "config": {}}


def _st(role: str, epoch: int, voted: int, leo: int) -> dict[str, Any]:
    return {"role": role, "epoch": epoch, "votedId": voted, "leaderId": -1, "logEndOffset": leo,
            "lastFetchedEpoch": -1, "highWatermark": 0}


def _vote(kind: str, src: int, dst: int, corr: int) -> dict[str, Any]:
    return {"api": "Vote", "apiKey": 52, "kind": kind, "version": 1, "correlationId": corr, "from": src, "to": dst,
            "body": {}}


def test_merge_pairs_a_reused_correlation_id_with_its_own_send(tmp_path: Path) -> None:
    # Correlation ids restart with each incarnation: node 2's second life sends the same key as its first.
    # Node 1's second Receive (same millisecond as that Send, and node 1 < node 2) must still follow it.
    first = [_HEADER, _node_line(0, 1, 2, "Restart", state=_st("Unattached", 0, -1, 0)),
             _node_line(1, 1, 2, "Send", msg=_vote("request", 2, 1, 1))]
    second = [_HEADER, _node_line(0, 5, 2, "Restart", state=_st("Unattached", 0, -1, 0)),
              _node_line(1, 10, 2, "Send", msg=_vote("request", 2, 1, 1))]
    one = [_HEADER, _node_line(0, 0, 1, "Restart", state=_st("Unattached", 0, -1, 0)),
           _node_line(1, 2, 1, "Receive", msg=_vote("request", 2, 1, 1)),
           _node_line(2, 10, 1, "Receive", msg=_vote("request", 2, 1, 1))]
    paths = [_write(tmp_path / n, t) for n, t in (("n1", one), ("n2a", first), ("n2b", second))]
    merged = _lines(merge_node_traces(paths, tmp_path / "merged.ndjson"))
    order = [(line["node"], line["event"], line["ts"]) for line in merged[1:]]
    assert order.index((2, "Send", 10)) < order.index((1, "Receive", 10))


def test_merge_leaves_out_a_step_kill_9_kept_from_disk(tmp_path: Path) -> None:
    # The node writes a step's trace before its disk changes: the StartElection the restart did not recover
    # (epoch and vote as before it) was torn by the kill and announced nothing; it is left out.
    torn = [_HEADER, _node_line(0, 1, 1, "Restart", state=_st("Unattached", 1, -1, 0)),
            _node_line(1, 2, 1, "StartElection", state=_st("Candidate", 2, 1, 0))]
    restarted = [_HEADER, _node_line(0, 9, 1, "Restart", state=_st("Unattached", 1, -1, 0))]
    merged = _lines(merge_node_traces([_write(tmp_path / "a", torn), _write(tmp_path / "b", restarted)],
                                      tmp_path / "merged.ndjson"))
    assert [line["event"] for line in merged[1:]] == ["Restart", "Restart"]
    # Announced (a Send after it): its effect had to survive, so the trace keeps it for TLC to judge.
    announced = [*torn, _node_line(2, 3, 1, "Send", msg=_vote("request", 1, 2, 1))]
    merged = _lines(merge_node_traces([_write(tmp_path / "a", announced), _write(tmp_path / "b", restarted)],
                                      tmp_path / "merged.ndjson"))
    assert [line["event"] for line in merged[1:]] == ["Restart", "StartElection", "Send", "Restart"]
    # Recovered state that no cut explains (a lost vote): kept, for validation to fail at the Restart.
    forgot = [_HEADER, _node_line(0, 9, 1, "Restart", state=_st("Unattached", 0, -1, 0))]
    merged = _lines(merge_node_traces([_write(tmp_path / "a", torn), _write(tmp_path / "b", forgot)],
                                      tmp_path / "merged.ndjson"))
    assert [line["event"] for line in merged[1:]] == ["Restart", "StartElection", "Restart"]
    # Only the ending incarnation is cut, never its Restart: a second life that recovered the vote and a
    # third that lost it stay as they are (the first life's last state matching the third says nothing).
    voted = [_HEADER, _node_line(0, 5, 1, "Restart", state=_st("Unattached", 2, 1, 0))]
    files = [_write(tmp_path / "a", restarted), _write(tmp_path / "b", voted), _write(tmp_path / "c", restarted)]
    merged = _lines(merge_node_traces(files, tmp_path / "merged.ndjson"))
    assert [line["state"]["epoch"] for line in merged[1:]] == [1, 2, 1]


def test_a_fetch_from_outside_the_quorum_is_no_kraft_action_unless_it_changes_the_state(tmp_path: Path) -> None:
    # ReplicaId -1 (e.g. the broker registry reading the log): KIP-595 keeps no fetch state for it, nor does
    # KRaft.tla, so the leader's HandleFetchRequest of it is no row, as long as its state did not change.
    leader = dict(_st("Leader", 1, 1, 1), leaderId=1)
    fetch = {"api": "Fetch", "apiKey": 1, "kind": "request", "version": 16, "correlationId": 1, "from": -1, "to": 1,
             "body": {"ReplicaId": -1, "Topics": [{"Partitions": [
                 {"PartitionIndex": 0, "CurrentLeaderEpoch": 1, "FetchOffset": 0, "LastFetchedEpoch": -1}]}]}}

    def rows(handled: dict[str, Any]) -> list[str]:
        lines = [_HEADER, _node_line(0, 1, 1, "BecomeLeader", state=leader),
                 _node_line(1, 2, 1, "Receive", msg=fetch), _node_line(2, 2, 1, "HandleFetchRequest", state=handled)]
        return [ev.event for ev in translate(_write(tmp_path / "reader.ndjson", lines)).events]

    assert rows(leader) == ["BecomeLeader"]
    assert rows(dict(leader, highWatermark=1)) == ["BecomeLeader", "HandleFetchRequest"]  # changed: TLC judges


def test_a_fetch_with_records_to_send_is_answered_even_after_a_later_action_of_its_step(tmp_path: Path) -> None:
    # One step of the leader: it handles a fetch from behind its log end (KRaft.tla cannot park that one) and
    # its linger timer fires in the same step (ClientAppend); the node writes the step's lines, then the
    # answers. The answer is the handler's reply, not a parked fetch answered later.
    leader = dict(_st("Leader", 1, 1, 5), leaderId=1, lastFetchedEpoch=1)
    part = {"PartitionIndex": 0, "CurrentLeaderEpoch": 1, "FetchOffset": 2, "LastFetchedEpoch": 1}
    fetch = {"api": "Fetch", "apiKey": 1, "kind": "request", "version": 16, "correlationId": 1, "from": 2, "to": 1,
             "body": {"ReplicaId": 2, "Topics": [{"Partitions": [part]}]}}
    answered = {"PartitionIndex": 0, "ErrorCode": 0, "HighWatermark": 0,
                "CurrentLeader": {"LeaderEpoch": 1, "LeaderId": 1}}
    answer = dict(fetch, kind="response", **{"from": 1, "to": 2},
                  body={"ErrorCode": 0, "Responses": [{"Partitions": [answered]}]})
    lines = [_HEADER, _node_line(0, 1, 2, "Restart", state=_st("Follower", 1, 1, 2)),
             _node_line(1, 1, 1, "BecomeLeader", state=leader),
             _node_line(2, 2, 2, "Send", msg=fetch), _node_line(3, 2, 1, "Receive", msg=fetch),
             _node_line(4, 2, 1, "HandleFetchRequest", state=leader),
             _node_line(5, 2, 1, "ClientAppend", state=dict(leader, logEndOffset=6)),
             _node_line(6, 2, 1, "Send", msg=answer)]
    rows = translate(_write(tmp_path / "late.ndjson", lines)).events
    handler = next(r for r in rows if r.event == "HandleFetchRequest")
    assert handler.reply["type"] == "FetchResponse" and handler.reply["fetchOffset"] == 2
    assert "AnswerParkedFetch" not in [r.event for r in rows]
    # Nor does a node that does not lead park a fetch, caught up or not: a Resigned voter refuses one at its
    # log end while its election timer fires in the same step (StartElection); the refusal is the reply.
    resigned = dict(leader, role="Resigned", logEndOffset=2)
    refusal = {"PartitionIndex": 0, "ErrorCode": 6, "HighWatermark": -1,
               "CurrentLeader": {"LeaderEpoch": 1, "LeaderId": 1}}
    lines[2] = _node_line(1, 1, 1, "BecomeLeader", state=dict(resigned, role="Leader"))
    lines[5] = _node_line(4, 2, 1, "HandleFetchRequest", state=resigned)
    lines[6] = _node_line(5, 2, 1, "StartElection", state=dict(resigned, role="Candidate", epoch=2, leaderId=-1))
    lines[7] = _node_line(6, 2, 1, "Send", msg=dict(answer, body={"ErrorCode": 0, "Responses": [
        {"Partitions": [refusal]}]}))
    rows = translate(_write(tmp_path / "late.ndjson", lines)).events
    handler = next(r for r in rows if r.event == "HandleFetchRequest")
    assert handler.reply["type"] == "FetchResponse" and handler.reply["error"] == "NOT_LEADER_OR_FOLLOWER"
    assert "AnswerParkedFetch" not in [r.event for r in rows]
    # Nor a diverging fetch at or past the leader's log end (a restarted old leader's longer log of an older
    # epoch): it is answered at once with DivergingEpoch, here after a ClientAppend of the same step.
    behind = dict(part, FetchOffset=7, LastFetchedEpoch=0)
    diverging = dict(answered, DivergingEpoch={"Epoch": 0, "EndOffset": 0})
    lines[2] = _node_line(1, 1, 1, "BecomeLeader", state=leader)
    lines[3] = _node_line(2, 2, 2, "Send", msg=dict(fetch, body={"ReplicaId": 2, "Topics": [{"Partitions": [behind]}]}))
    lines[4] = _node_line(3, 2, 1, "Receive", msg=lines[3]["msg"])
    lines[5] = _node_line(4, 2, 1, "HandleFetchRequest", state=leader)
    lines[6] = _node_line(5, 2, 1, "ClientAppend", state=dict(leader, logEndOffset=6))
    lines[7] = _node_line(6, 2, 1, "Send", msg=dict(answer, body={"ErrorCode": 0, "Responses": [
        {"Partitions": [diverging]}]}))
    rows = translate(_write(tmp_path / "late.ndjson", lines)).events
    handler = next(r for r in rows if r.event == "HandleFetchRequest")
    assert handler.reply["type"] == "FetchResponse" and handler.reply["fetchOffset"] == 7
    assert "AnswerParkedFetch" not in [r.event for r in rows]
    # Nor a fetch with MaxWaitMs 0 at the leader's log end (a removed voter fetching as an observer, KIP-853):
    # Kafka's handleFetchRequest completes it without the purgatory, even though the node traces the answer after
    # the check-quorum timer that fired in the same step (LeaderProgressTimeout); as a long poll it is parked.
    caught_up = dict(part, FetchOffset=5, LastFetchedEpoch=1)
    for max_wait, parked in ((0, False), (500, True)):
        request = dict(fetch, body={"MaxWaitMs": max_wait, "ReplicaId": 2, "Topics": [{"Partitions": [caught_up]}]})
        lines[3] = _node_line(2, 2, 2, "Send", msg=request)
        lines[4] = _node_line(3, 2, 1, "Receive", msg=request)
        lines[6] = _node_line(5, 2, 1, "LeaderProgressTimeout", state=dict(leader, role="Resigned"))
        lines[7] = _node_line(6, 2, 1, "Send", msg=answer)
        rows = translate(_write(tmp_path / "late.ndjson", lines)).events
        handler = next(r for r in rows if r.event == "HandleFetchRequest")
        assert ("AnswerParkedFetch" in [r.event for r in rows]) == parked
        if not parked:
            assert handler.reply["type"] == "FetchResponse" and handler.reply["fetchOffset"] == 5


def test_sends_and_receives_pair_up_in_order_across_incarnations() -> None:
    def line(node: int, event: str, msg: dict[str, Any] | None = None) -> dict[str, Any]:
        obj: dict[str, Any] = {"node": node, "event": event}
        if msg is not None:
            obj["msg"] = msg
        else:
            obj["state"] = {}
        return obj

    objs = list(enumerate([
        line(1, "StartElection"), line(3, "HandleVoteRequest"),
        line(3, "Send", _vote("response", 3, 1, 1)),  # 3: lost, node 1 restarts before reading it
        line(1, "Restart"),
        line(1, "Send", _vote("request", 1, 3, 1)), line(3, "Receive", _vote("request", 1, 3, 1)),
        line(3, "Send", _vote("response", 3, 1, 1)),  # 7: same key as line 3, received
        line(1, "Receive", _vote("response", 3, 1, 1)),  # 8
        line(1, "Receive", _vote("response", 3, 1, 1)),  # 9: a duplicate of line 7's copy
    ], start=1))
    dropped, copies_at = _deliveries(objs, {1, 3})
    assert dropped == {3}
    assert copies_at == {8: 1}


def _expect_failure_at_line(path: Path, line_number: int) -> None:
    verdict = validate_trace(path, timeout=300)
    assert not verdict.passed
    assert verdict.failed_event is not None, verdict.reason
    assert verdict.failed_event.line == line_number, (verdict.failed_event, verdict.reason)
    assert verdict.state_before is not None


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_second_leader_in_an_epoch_fails_at_that_event(tmp_path: Path) -> None:
    # ElectionSafety: right after the real BecomeLeader, another voter claims the same epoch.
    lines = _lines(_simulate(tmp_path, 0))
    at = next(k for k, line in enumerate(lines) if line.get("event") == "BecomeLeader")
    real = lines[at]
    other = next(v for v in lines[0]["voters"] if v != real["node"])
    fake = json.loads(json.dumps(real))
    fake["node"] = other
    fake["state"].update(votedId=other, leaderId=other)
    doctored = _write(tmp_path / "two-leaders.ndjson", [*lines[: at + 1], fake, *lines[at + 1 :]])
    _expect_failure_at_line(doctored, at + 2)  # 1-based line of the inserted event


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_high_watermark_going_backwards_fails_at_that_event(tmp_path: Path) -> None:
    # HighWatermarkMonotonic: in a later fetch response a follower's HW drops below the one it had.
    lines = _lines(_simulate(tmp_path, 1))
    last_hw: dict[int, int] = {}
    target = None
    for k, line in enumerate(lines[1:], start=1):
        if "state" not in line:
            continue
        node, hw = line["node"], line["state"]["highWatermark"]
        if line["event"] == "HandleFetchResponse" and last_hw.get(node, 0) > 0:
            target = k
            break
        last_hw[node] = hw
    assert target is not None, "the trace has no follower fetch response after a positive HW"
    lines[target]["state"]["highWatermark"] = last_hw[lines[target]["node"]] - 1
    doctored = _write(tmp_path / "hw-backwards.ndjson", lines)
    _expect_failure_at_line(doctored, target + 1)


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_wrong_diverging_epoch_fails_at_that_event(tmp_path: Path) -> None:
    # KIP-595 "Fetch Request Handling" step 3: a diverging fetch is answered with the largest epoch <= the
    # fetcher's LastFetchedEpoch and its end offset.  The doctored leader names an end offset one past it
    # (in its Send and in the follower's Receive alike): its HandleFetchRequest must fail.  Seed 2 of the
    # default fault profile has a follower with a stale tail after a leader change (seed 4 had one before
    # the leader's BeginQuorumEpoch heartbeat changed the run).
    lines = _lines(_simulate(tmp_path, 2, profile="default", duration_ms=10_000))
    sent = None
    for k, line in enumerate(lines[1:], start=1):
        msg = line.get("msg") or {}
        if line["event"] == "Send" and (msg.get("api"), msg.get("kind")) == ("Fetch", "response"):
            part = msg["body"]["Responses"][0]["Partitions"][0]
            if part.get("DivergingEpoch", {}).get("Epoch", -1) >= 0:
                sent = k
                break
    assert sent is not None, "the trace has no fetch answered with a DivergingEpoch"
    msg = lines[sent]["msg"]
    handler = max(
        k for k in range(1, sent) if lines[k]["node"] == msg["from"] and lines[k]["event"] not in ("Send", "Receive")
    )
    assert lines[handler]["event"] == "HandleFetchRequest"
    for line in lines[sent:]:
        other = line.get("msg") or {}
        if line["event"] in ("Send", "Receive") and all(
            other.get(f) == msg[f] for f in ("api", "kind", "from", "to", "correlationId")
        ):
            other["body"]["Responses"][0]["Partitions"][0]["DivergingEpoch"]["EndOffset"] += 1
    doctored = _write(tmp_path / "wrong-diverging-epoch.ndjson", lines)
    _expect_failure_at_line(doctored, handler + 1)
