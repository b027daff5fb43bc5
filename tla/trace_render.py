"""Render: translated trace rows → the text of the TLA+ module TraceData that tla/TraceKRaft.tla extends.

TLC 2.15 has no Json module, so the trace reaches TLC as a module of constant definitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kraft_tck.tla.trace_translate import (
    BLACKBOX_HIDDEN_STEPS,
    NO_STATE,
    RECONFIG_STATE_FIELDS,
    SNAPSHOT_STATE_FIELDS,
    STATE_FIELDS,
    SnapshotContent,
    Trace,
    TraceEvent,
    TraceFormatError,
    VoterIds,
)

# Kafka answers a Fetch with as many records as fit in its byte limit; a trace
# does not say how many that was, so by default the leader sends all it has.
DEFAULT_MAX_FETCH_RECORDS = 1_000_000
# Black-box (harness) traces see only the target's messages: allow this many
# unrecorded steps between two recorded events.
HARNESS_HIDDEN_STEPS = 3
# Black-box traces: a message a hidden step of the target sends must be received within this many rows
# (TraceKRaft.tla SendsReceived): the harness records what the target sends within moments.
RECEIVE_WINDOW = 16
# The invariants over whole logs (LogMatching, LeaderCompleteness) cost a pass over every log; a long
# trace has them checked this many times along the way and at its end, not after every event.
LOG_CHECKS = 64

def _tla_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _tla_value(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _tla_string(value)
    if isinstance(value, SnapshotContent):  # the records of a snapshot the environment sends
        return f"Fill({value.end_offset}, {value.epoch})"
    if isinstance(value, list):  # a Fetch response's records
        return "<<" + ", ".join(_tla_value(v) for v in value) + ">>"
    if isinstance(value, frozenset | VoterIds):  # a VotersRecord's voter set (KIP-853)
        return "{" + ", ".join(_tla_value(v) for v in sorted(value)) + "}"
    if isinstance(value, dict) and set(value) == {"epoch", "value", "voters"}:  # a VotersRecord of a log
        return f"VRec({_tla_value(value['epoch'])}, {_tla_value(value['voters'])})"
    if isinstance(value, dict) and set(value) == {"epoch", "value"}:  # one record of a log
        return f"Rec({_tla_value(value['epoch'])}, {_tla_value(value['value'])})"
    if isinstance(value, dict) and value:
        return "[" + ", ".join(f"{k} |-> {_tla_value(v)}" for k, v in value.items()) + "]"
    raise TraceFormatError(f"cannot write {value!r} as a TLA+ value")


class _Shapes:
    """One record constructor per set of message fields (``M1(a1, a2, a3) == [type |-> a1, ...]``): a row
    names its message by an application, about half the text of a record literal.  SANY's parsing of
    TraceData grows with its text and was half of a long trace's validation time."""

    def __init__(self) -> None:
        self.names: dict[tuple[str, ...], str] = {}

    def message(self, fields: dict[str, Any]) -> str:
        if not fields:
            return "NoMsg"  # TLA+ has no empty record; type "" stands for "no message named" (Matches)
        shape = tuple(fields)
        name = self.names.setdefault(shape, f"M{len(self.names) + 1}")
        return f"{name}({', '.join(_tla_value(v) for v in fields.values())})"

    def definitions(self) -> str:
        out = []
        for shape, name in self.names.items():
            params = ", ".join(f"a{k}" for k in range(1, len(shape) + 1))
            body = ", ".join(f"{field} |-> a{k}" for k, field in enumerate(shape, start=1))
            out.append(f"{name}({params}) == [{body}]\n")
        return "".join(out)


class _Shared:
    """A message or state a trace names more than once (a node's trace has each message in the row that sends
    it and the one that handles it, and long runs of one state) is defined once (``V1 == M4(...)``) and rows
    name it: TraceData's text, which SANY parses and TLC's start-up walks, shrinks by about 30% for node
    traces (a conformance run's node lives: 10% less TLC CPU, bench_validate --lives), and TLC evaluates each
    definition once either way, so TraceLog's value is the same."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.names: dict[str, str] = {}

    def see(self, text: str) -> str:
        self.counts[text] = self.counts.get(text, 0) + 1
        return text

    def name(self, text: str) -> str:
        # short texts (NoMsg, NoState) cost no more than a name
        if self.counts[text] < 2 or len(text) <= 8:
            return text
        return self.names.setdefault(text, f"V{len(self.names) + 1}")

    def definitions(self) -> str:
        return "".join(f"{name} == {text}\n" for text, name in self.names.items())


def _held(events: Sequence[TraceEvent]) -> list[tuple[int, int]]:
    """Black-box: (voter, row) for each request of the target a virtual voter received at that row (1-based) and
    never answered (a partitioned voter holds it): from then on its connection reads nothing more of the target
    (TraceKRaft.tla NeverReceived)."""
    asked: dict[tuple[str, int], int] = {}  # (answer type, voter) -> row of the latest request, while unanswered
    for row, ev in enumerate(events, start=1):
        kind = ev.msg.get("type", "")
        if ev.event == "EnvironmentReceive" and kind.endswith("Request"):
            asked.setdefault((kind.removesuffix("Request") + "Response", ev.msg["to"]), row)
        elif ev.event == "EnvironmentSend" and kind.endswith("Response"):
            asked.pop((kind, ev.msg["from"]), None)
    return sorted({(voter, row) for (_, voter), row in asked.items()})


def _fetch_caps(trace: Trace, events: Sequence[TraceEvent]) -> dict[int, int]:
    """A trace whose Fetch answers are capped in bytes (config ``fetch.max.bytes``): row (1-based) -> the records
    the Fetch answer of that row carries (TraceKRaft.tla FetchCap); none for any other trace."""
    if int(trace.header["config"].get("fetch.max.bytes") or 0) <= 0:
        return {}
    return {row: ev.fetched for row, ev in enumerate(events, start=1) if ev.fetched > 0}


def _late_heartbeats(events: Sequence[TraceEvent]) -> list[int]:
    """Black-box: the rows (1-based) that receive a BeginQuorumEpoch of the target after a row of the previous
    ``RECEIVE_WINDOW`` received, on another voter's connection, something the target did later (a message of a
    later epoch, or its EndQuorumEpoch): a heartbeat read late (TraceKRaft.tla HeartbeatReceived)."""
    late = []
    for row, ev in enumerate(events, start=1):
        if ev.event != "EnvironmentReceive" or ev.msg.get("type") != "BeginQuorumEpochRequest":
            continue
        epoch, to = ev.msg["epoch"], ev.msg["to"]
        for before in events[max(0, row - 1 - RECEIVE_WINDOW):row - 1]:
            msg = before.msg
            if before.event == "EnvironmentReceive" and msg.get("from") == ev.msg["from"] and msg.get("to") != to and (
                    msg.get("type") == "EndQuorumEpochRequest" or msg.get("epoch", -1) > epoch):
                late.append(row)
                break
    return late


def trace_data(
    trace: Trace, hidden_steps: int | None = None, events: Sequence[TraceEvent] | None = None, stop: int = 0
) -> str:
    """The text of module TraceData for ``trace`` (or for its rows ``events``, e.g. a prefix); with
    ``stop`` > 0, behaviours end once they matched the first ``stop`` rows (``TraceStop``).

    Row l of ``TraceLog`` is ``events[l - 1]``: a record [node, event, msg, reply, state] written as
    constructor applications (``Row``, ``St``, ``M1``...), which TLC evaluates once when it starts.
    """
    header = trace.header
    if hidden_steps is None:
        if trace.target is not None:
            hidden_steps = BLACKBOX_HIDDEN_STEPS
        else:
            hidden_steps = HARNESS_HIDDEN_STEPS if header["source"] == "harness" else 0
    cluster = trace.cluster
    max_records = int(header["config"].get("fetch.max.records", DEFAULT_MAX_FETCH_RECORDS))
    shapes = _Shapes()
    rows = []
    events = trace.events if events is None else events
    # a snapshot trace's rows also state the log start and the snapshot id an event names
    fields = STATE_FIELDS + SNAPSHOT_STATE_FIELDS if trace.snapshots else STATE_FIELDS
    # a reconfig trace's rows also state the voter ids in force and the voter a change names (KIP-853)
    if trace.reconfig:
        fields = fields + RECONFIG_STATE_FIELDS
    no_state_values = {**NO_STATE, **dict.fromkeys(SNAPSHOT_STATE_FIELDS, -1), "voters": [], "voterId": -1}
    shared = _Shared()
    for ev in events:
        plain = all(ev.state.get(k) == no_state_values[k] for k in fields)
        state = "NoState" if plain else f"St({', '.join(_tla_value(ev.state[k]) for k in fields)})"
        rows.append((ev.node, ev.event, shared.see(shapes.message(ev.msg)), shared.see(shapes.message(ev.reply)),
                     shared.see(state)))  # fmt: skip
    body = ",\n".join(
        f"Row({node}, {_tla_string(event)}, {shared.name(msg)}, {shared.name(reply)}, {shared.name(state)})"
        for node, event, msg, reply, state in rows
    )
    # Pre-vote steps only for a trace that shows pre-vote (a Prospective, or a Vote with PreVote=true): a
    # node without it never takes them, and offering them as hidden steps multiplies the states TLC
    # explores for every Kafka 3.x-style trace.
    pre_vote = any(
        ev.event in ("BecomeProspective", "AbandonProspective") or ev.msg.get("preVote") or ev.reply.get("preVote")
        for ev in trace.events
    )
    voters = ", ".join(str(v) for v in header["voters"])
    observers = ", ".join(str(v) for v in sorted(trace.observers))
    state_params = ", ".join(f"a{k}" for k in range(1, len(fields) + 1))
    state_body = ", ".join(f"{field} |-> a{k}" for k, field in enumerate(fields, start=1))
    no_state = ", ".join(_tla_value(no_state_values[k]) for k in fields)
    # black-box: the last row that receives each kind of message (TraceKRaft NeverReceived)
    last_receive: dict[tuple[str, int, int, int], int] = {}
    for row, ev in enumerate(events, start=1):
        if ev.event == "EnvironmentReceive" and ev.msg.get("type"):
            epoch = ev.msg.get("epoch", -1)
            last_receive[(ev.msg["type"], ev.msg["from"], ev.msg["to"], epoch if isinstance(epoch, int) else -1)] = row
    receives = " @@ ".join(
        f"(<<{_tla_string(t)}, {f}, {to}, {e}>> :> {row})" for (t, f, to, e), row in sorted(last_receive.items())
    ) if trace.target is not None and last_receive else "<<>>"
    held = ", ".join(f"[node |-> {node}, first |-> {first}]" for node, first in _held(events))
    caps = _fetch_caps(trace, events)
    cap_counts = sorted(set(caps.values()) | {max_records}) if caps else []
    caps_at = " @@ ".join(f"({row} :> {n})" for row, n in caps.items()) if caps else "[x \\in {} |-> 0]"
    changes = ", ".join(
        f"[kind |-> {_tla_string(c.kind)}, voter |-> {c.voter}, first |-> {c.first}, last |-> {c.last}]"
        for c in trace.voter_changes
    )
    return (
        "---- MODULE TraceData ----\n"
        f"\\* Generated by kraft_tck.tla.trace_render from {trace.path.name}; do not edit.\n"
        "EXTENDS Integers, Sequences, TLC\n"
        f"TraceVoters == {{{voters}}}\n"
        f"TraceObservers == {{{observers}}}\n"
        f"TraceEnvironment == {{{', '.join(str(v) for v in sorted(trace.environment))}}}\n"
        f"TraceCluster == {_tla_string(cluster)}\n"
        f"TraceMaxFetchRecords == {max_records}\n"
        f"TraceFetchCapAt == {caps_at}\n"
        f"TraceFetchCaps == {{{', '.join(str(n) for n in cap_counts)}}}\n"
        f"TracePreVote == {'TRUE' if pre_vote else 'FALSE'}\n"
        f"TraceSnapshots == {'TRUE' if trace.snapshots else 'FALSE'}\n"
        f"TraceReconfig == {'TRUE' if trace.reconfig else 'FALSE'}\n"
        f"TraceVoterChanges == {{{changes}}}\n"
        f"TraceLastReceive == {receives}\n"
        f"TraceHeld == {{{held}}}\n"
        f"TraceLateHeartbeats == {{{', '.join(str(r) for r in _late_heartbeats(events))}}}\n"
        f"HiddenSteps == {hidden_steps}\n"
        f"ReceiveWindow == {RECEIVE_WINDOW}\n"
        f"PreludeElections == {trace.prelude}\n"
        f"PreludeVoteEpochs == {{{', '.join(str(e) for e in sorted(trace.prelude_votes))}}}\n"
        f"TraceStop == {stop + 1 if stop > 0 else len(events) + 1}\n"
        f"BlackBox == {'TRUE' if trace.target is not None else 'FALSE'}\n"
        f"TraceTarget == {trace.target if trace.target is not None else -1}\n"
        f"TraceLogCheckEvery == {max(1, len(events) // LOG_CHECKS)}\n"
        "Row(a1, a2, a3, a4, a5) == [node |-> a1, event |-> a2, msg |-> a3, reply |-> a4, state |-> a5]\n"
        f"St({state_params}) == [{state_body}]\n"
        f"NoState == St({no_state})\n"
        'NoMsg == [type |-> ""]\n'
        "Rec(a1, a2) == [epoch |-> a1, value |-> a2]\n"
        'VRec(a1, a2) == [epoch |-> a1, value |-> "VotersRecord", voters |-> a2]\n'
        'Fill(n, e) == [k \\in 1..n |-> Rec(e, "record")]\n'
        f"{shapes.definitions()}"
        f"{shared.definitions()}"
        f"TraceLog == <<\n{body}\n>>\n"
        "====\n"
    )
