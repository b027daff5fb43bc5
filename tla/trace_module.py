"""NDJSON trace (spec/trace.schema.json) → the TLA+ module TraceData, and its validation.

TLC 2.15 has no Json module, so the trace reaches TLC as a module of constant
definitions that tla/TraceKRaft.tla extends.  Only action events take part: a
``Send``/``Receive`` event has no protocol step of its own (the handler's event
carries the state change), and ``HandleDescribeQuorumRequest``/``BrokerEvent``
change no KRaft state.

Two network faults leave marks only in ``Send``/``Receive`` events, so the
translation turns them into the KRaft network actions they stand for:

* a message received more often than it was sent (same sender, receiver,
  API, kind and correlation id) was duplicated: ``DuplicateMessage``
  rows go right before its first delivery's handler;
* a request the node resent on a timer (no action event sends it: the
  model's requests are re-delivered by duplication) is a copy of the same
  request sent earlier: ``DuplicateMessage`` rows go right after that send;
* a message sent and never received was lost (or was still in flight at the
  end): a ``DropMessage`` row goes right after its ``Send``, so that, as in
  the node, the sender's next fetch is not held back by a lost one.

Both only concern the messages the model has (Vote, BeginQuorumEpoch,
EndQuorumEpoch, Fetch).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
from kraft_tck.tla.tlc import SPEC_DIR, TlcResult, run_tlc

TRACE_FORMAT = 1
# Events without a KRaft state change of their own.
SKIPPED_EVENTS = frozenset({"Send", "Receive", "HandleDescribeQuorumRequest", "BrokerEvent"})
# Rows the translation adds for network faults (no state of the node to compare).
NETWORK_EVENTS = frozenset({"DuplicateMessage", "DropMessage"})
MODELLED_APIS = frozenset({"Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch"})
# The actions whose step sends each request; any other send of it is a resend (a timer in the node).
SENT_BY = {
    "Vote": frozenset({"StartElection", "Restart"}),
    "BeginQuorumEpoch": frozenset({"BecomeLeader"}),
    "EndQuorumEpoch": frozenset({"Resign", "LeaderProgressTimeout", "Restart"}),
    "Fetch": frozenset({"SendFetchRequest"}),
}
# A row's state where the event reports none (network rows).
_NO_STATE: dict[str, Any] = {
    "role": "Unattached",
    "epoch": -1,
    "votedId": -1,
    "leaderId": -1,
    "logEndOffset": -1,
    "lastFetchedEpoch": -1,
    "highWatermark": -1,
}
STATE_FIELDS = ("role", "epoch", "votedId", "leaderId", "logEndOffset", "lastFetchedEpoch", "highWatermark")
# Kafka answers a Fetch with as many records as fit in its byte limit; a trace
# does not say how many that was, so by default the leader sends all it has.
DEFAULT_MAX_FETCH_RECORDS = 1_000_000
# Black-box (harness) traces see only the target's messages: allow this many
# unrecorded steps between two recorded events.
HARNESS_HIDDEN_STEPS = 3


class TraceFormatError(ValueError):
    """The trace file is not a valid kraft-tck trace."""


@dataclass(frozen=True)
class TraceEvent:
    line: int
    seq: int
    node: int
    event: str
    state: dict[str, Any]
    # network rows: the KRaft message type (e.g. "FetchRequest") and the other end
    msg_type: str = ""
    peer: int = -1


@dataclass
class Trace:
    path: Path
    header: dict[str, Any]
    events: list[TraceEvent]
    total_lines: int


@dataclass
class TraceVerdict:
    path: Path
    passed: bool
    events: int
    failed_event: TraceEvent | None = None
    state_before: str | None = None
    reason: str = ""
    tlc: TlcResult | None = field(default=None, repr=False)


def _schema() -> dict[str, Any]:
    text = resources.files("kraft_tck.spec").joinpath("trace.schema.json").read_text()
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def read_trace(path: str | Path) -> Trace:
    """Read and schema-check an NDJSON trace; keep the action events."""
    path = Path(path)
    validator = jsonschema.Draft202012Validator(_schema())
    header: dict[str, Any] | None = None
    objs: list[tuple[int, dict[str, Any]]] = []
    lines = path.read_text().splitlines()
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise TraceFormatError(f"{path}:{number}: not JSON: {exc.msg}") from exc
        problem = jsonschema.exceptions.best_match(validator.iter_errors(obj))
        if problem is not None:
            where = "/".join(str(p) for p in problem.absolute_path) or "(line)"
            raise TraceFormatError(f"{path}:{number}: {where}: {problem.message}")
        if header is None:
            if obj.get("type") != "header":
                raise TraceFormatError(f"{path}:{number}: the first line must be the header")
            if obj["format"] != TRACE_FORMAT:
                raise TraceFormatError(f"{path}:{number}: trace format {obj['format']} is not supported")
            header = obj
            continue
        if obj.get("type") != "event":
            raise TraceFormatError(f"{path}:{number}: a second header")
        objs.append((number, obj))
    if header is None:
        raise TraceFormatError(f"{path}: empty trace, no header")
    events = _action_events(objs)
    for ev in events:
        if ev.node not in header["voters"] and ev.node not in header.get("observers", []):
            raise TraceFormatError(f"{path}:{ev.line}: node {ev.node} is neither a voter nor an observer")
    return Trace(path, header, events, len(lines))


def _message_key(msg: dict[str, Any]) -> str:
    # Not the body: a receiver's decoded body spells out defaults the sender's left implicit.  A
    # correlation id a restarted sender reuses only matters if exactly those copies are lost or
    # duplicated, since counts of sends and receives are compared.
    return json.dumps([msg["api"], msg["kind"], msg["from"], msg["to"], msg["correlationId"]])


def _message_type(msg: dict[str, Any]) -> str:
    return f"{msg['api']}{msg['kind'].capitalize()}"


def _action_events(objs: list[tuple[int, dict[str, Any]]]) -> list[TraceEvent]:
    """The action events, with DuplicateMessage/DropMessage rows for the network's faults."""
    sent: dict[str, int] = {}
    received: dict[str, int] = {}
    for _, obj in objs:
        msg = obj.get("msg")
        if obj["event"] in ("Send", "Receive") and msg is not None and msg["api"] in MODELLED_APIS:
            counts = sent if obj["event"] == "Send" else received
            counts[_message_key(msg)] = counts.get(_message_key(msg), 0) + 1
    # Only messages between nodes whose steps the trace records: a single node's trace or a black-box
    # harness trace does not see the other end, so a missing Send or Receive says nothing there.
    acting = {obj["node"] for _, obj in objs if obj["event"] not in ("Send", "Receive")}
    resent_after = _resends(objs, acting)
    events: list[TraceEvent] = []
    sends_seen: dict[str, int] = {}
    duplicated: set[str] = set()
    for number, obj in objs:
        msg = obj.get("msg")
        if obj["event"] in ("Send", "Receive") and msg is not None and msg["api"] in MODELLED_APIS:
            key = _message_key(msg)
            if msg["from"] not in acting or msg["to"] not in acting:
                continue
            if obj["event"] == "Receive" and key not in duplicated:
                duplicated.add(key)
                for _ in range(received[key] - sent.get(key, 0)):
                    events.append(
                        TraceEvent(
                            number,
                            obj["seq"],
                            obj["node"],
                            "DuplicateMessage",
                            dict(_NO_STATE),
                            _message_type(msg),
                            msg["from"],
                        )
                    )
            elif obj["event"] == "Send":
                for _ in range(resent_after.get(number, 0)):
                    events.append(
                        TraceEvent(
                            number,
                            obj["seq"],
                            msg["to"],
                            "DuplicateMessage",
                            dict(_NO_STATE),
                            _message_type(msg),
                            msg["from"],
                        )
                    )
                sends_seen[key] = sends_seen.get(key, 0) + 1
                if sends_seen[key] > received.get(key, 0):
                    events.append(
                        TraceEvent(
                            number,
                            obj["seq"],
                            obj["node"],
                            "DropMessage",
                            dict(_NO_STATE),
                            _message_type(msg),
                            msg["to"],
                        )
                    )
            continue
        if obj["event"] in SKIPPED_EVENTS:
            continue
        events.append(TraceEvent(number, obj["seq"], obj["node"], obj["event"], dict(obj["state"])))
    return events


def merge_node_traces(paths: Sequence[str | Path], out: str | Path) -> Path:
    """Write one trace of a cluster from the traces its nodes wrote (``kraft-tck node --trace-file``).

    Each node's files (one per incarnation, in the order given) keep their order; across nodes the
    events are merged by timestamp, except that a ``Receive`` never goes before the ``Send`` of the same
    message (clocks tick in milliseconds, so a message can be sent and received in the same one).
    """
    streams: dict[int, list[dict[str, Any]]] = {}
    header: dict[str, Any] | None = None
    for path in paths:
        lines = [json.loads(raw) for raw in Path(path).read_text().splitlines() if raw.strip()]
        if not lines or lines[0].get("type") != "header":
            raise TraceFormatError(f"{path}: the first line must be the header")
        if header is None:
            header = lines[0]
        elif (lines[0]["voters"], lines[0].get("clusterId")) != (header["voters"], header.get("clusterId")):
            raise TraceFormatError(f"{path}: voters or cluster id differ from {paths[0]}")
        for obj in lines[1:]:
            streams.setdefault(obj["node"], []).append(obj)
    if header is None:
        raise TraceFormatError("merge_node_traces: no trace files given")
    unsent: dict[str, int] = {}
    for stream in streams.values():
        for obj in stream:
            if obj["event"] == "Send" and "msg" in obj:
                key = _message_key(obj["msg"])
                unsent[key] = unsent.get(key, 0) + 1
    heads = {node: 0 for node in streams}
    merged: list[dict[str, Any]] = []

    def ready(obj: dict[str, Any]) -> bool:
        if obj["event"] != "Receive" or "msg" not in obj or obj["msg"]["from"] not in streams:
            return True
        key = _message_key(obj["msg"])
        # received more often than sent so far: only a duplicate of an earlier send (or of none at all)
        return unsent.get(key, 0) == 0 or sent_so_far.get(key, 0) > 0

    sent_so_far: dict[str, int] = {}
    while any(heads[n] < len(streams[n]) for n in streams):
        candidates = [n for n in streams if heads[n] < len(streams[n]) and ready(streams[n][heads[n]])]
        if not candidates:  # a Receive whose Send comes later everywhere: the clocks disagree, keep ts order
            candidates = [n for n in streams if heads[n] < len(streams[n])]
        node = min(candidates, key=lambda n: (streams[n][heads[n]]["ts"], n))
        obj = streams[node][heads[node]]
        heads[node] += 1
        if obj["event"] == "Send" and "msg" in obj:
            key = _message_key(obj["msg"])
            sent_so_far[key] = sent_so_far.get(key, 0) + 1
        merged.append(obj)
    out = Path(out)
    head = dict(header, run=f"merged:{header.get('run', '')}")
    with out.open("w") as f:
        f.write(json.dumps(head) + "\n")
        for seq, obj in enumerate(merged):
            f.write(json.dumps(dict(obj, seq=seq)) + "\n")
    return out


def _resends(objs: list[tuple[int, dict[str, Any]]], acting: set[int]) -> dict[int, int]:
    """Line of an earlier send -> how many resends of the same request follow it."""
    last_action: dict[int, str] = {}
    sent_since: dict[int, set[tuple[str, int]]] = {}
    last_send: dict[str, int] = {}  # (api, from, to, body) -> line of its latest send
    copies: dict[int, int] = {}
    for number, obj in objs:
        node, event, msg = obj["node"], obj["event"], obj.get("msg")
        if event not in ("Send", "Receive"):
            last_action[node] = event
            sent_since[node] = set()
            continue
        if event != "Send" or msg is None or msg["kind"] != "request" or msg["api"] not in MODELLED_APIS:
            continue
        if msg["to"] not in acting:
            continue
        content = json.dumps([msg["api"], msg["from"], msg["to"], msg.get("body")], sort_keys=True)
        dest = (msg["api"], msg["to"])
        fresh = last_action.get(node) in SENT_BY[msg["api"]] and dest not in sent_since.setdefault(node, set())
        sent_since[node].add(dest)
        if not fresh and content in last_send:
            copies[last_send[content]] = copies.get(last_send[content], 0) + 1
        else:
            last_send[content] = number
    return copies


def _tla_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _tla_value(value: Any) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _tla_string(value)
    raise TraceFormatError(f"cannot write {value!r} as a TLA+ value")


def trace_module(trace: Trace, hidden_steps: int | None = None) -> str:
    """The text of module TraceData for ``trace``."""
    header = trace.header
    if hidden_steps is None:
        hidden_steps = HARNESS_HIDDEN_STEPS if header["source"] == "harness" else 0
    cluster = header.get("clusterId") or "<none>"
    max_records = int(header["config"].get("fetch.max.records", DEFAULT_MAX_FETCH_RECORDS))
    rows = []
    for ev in trace.events:
        state = ", ".join(f"{k} |-> {_tla_value(ev.state[k])}" for k in STATE_FIELDS)
        rows.append(
            f"  [seq |-> {ev.seq}, node |-> {ev.node}, event |-> {_tla_string(ev.event)}, "
            f"msgType |-> {_tla_string(ev.msg_type)}, peer |-> {ev.peer}, state |-> [{state}]]"
        )
    body = ",\n".join(rows)
    voters = ", ".join(str(v) for v in header["voters"])
    observers = ", ".join(str(v) for v in header.get("observers", []))
    return (
        "---- MODULE TraceData ----\n"
        f"\\* Generated by kraft_tck.tla.trace_module from {trace.path.name}; do not edit.\n"
        "EXTENDS Integers, Sequences\n"
        f"TraceVoters == {{{voters}}}\n"
        f"TraceObservers == {{{observers}}}\n"
        f"TraceCluster == {_tla_string(cluster)}\n"
        f"TraceMaxFetchRecords == {max_records}\n"
        f"HiddenSteps == {hidden_steps}\n"
        f"TraceLog == <<\n{body}\n>>\n"
        "====\n"
    )


TRACE_CFG = """\
INIT TraceInit
NEXT TraceNext
INVARIANTS
    TraceNotDone
    TraceSafety
"""

# PrintT output of TraceKRaft's Record; TLC wraps long values over several lines.
_MATCHED = re.compile(r'<<\s*"TRACE-MATCHED",\s*(\d+),\s*(-?\d+),\s*(.*?),\s*"TRACE-END"\s*>>', re.S)


def validate_trace(
    path: str | Path,
    *,
    hidden_steps: int | None = None,
    workers: int = 1,
    java_opts: Sequence[str] = ("-XX:+UseParallelGC",),
    timeout: float | None = None,
) -> TraceVerdict:
    """Decide whether the trace at ``path`` is a behaviour of KRaft."""
    trace = read_trace(path)
    with tempfile.TemporaryDirectory(prefix="kraft-trace-") as tmp:
        work = Path(tmp)
        shutil.copy(SPEC_DIR / "KRaft.tla", work / "KRaft.tla")
        shutil.copy(SPEC_DIR / "TraceKRaft.tla", work / "TraceKRaft.tla")
        (work / "TraceData.tla").write_text(trace_module(trace, hidden_steps))
        (work / "TraceKRaft.cfg").write_text(TRACE_CFG)
        result = run_tlc(
            "TraceKRaft.tla",
            "TraceKRaft.cfg",
            spec_dir=work,
            workers=workers,
            java_opts=java_opts,
            timeout=timeout,
        )
    return verdict(trace, result)


def verdict(trace: Trace, result: TlcResult) -> TraceVerdict:
    """Read TLC's answer on TraceKRaft for ``trace``."""
    n = len(trace.events)
    if result.violated == "TraceNotDone":
        return TraceVerdict(trace.path, True, n, reason="every event matched", tlc=result)
    if result.errors:
        return TraceVerdict(trace.path, False, n, reason="TLC error: " + "; ".join(result.errors), tlc=result)
    if result.violated:
        failed = _failed_at(trace, result)
        return TraceVerdict(
            trace.path, False, n, failed, reason=f"{result.violated} is violated along the trace", tlc=result
        )
    reached = 0
    state: str | None = None
    for found in _MATCHED.finditer(result.output):
        if int(found.group(1)) >= reached:
            reached, state = int(found.group(1)), " ".join(found.group(3).split())
    if reached >= n:  # cannot happen when TraceNotDone holds; keep the verdict honest
        return TraceVerdict(trace.path, False, n, reason="TLC found no witness", tlc=result)
    failed = trace.events[reached]
    return TraceVerdict(
        trace.path,
        False,
        n,
        failed,
        state_before=state if reached else "the initial state",
        reason=f"no behaviour of KRaft produces event seq {failed.seq} ({failed.event} by node {failed.node})",
        tlc=result,
    )


def _failed_at(trace: Trace, result: TlcResult) -> TraceEvent | None:
    """The event whose step broke an invariant: the last one matched (l - 1)."""
    if not result.counterexample:
        return None
    try:
        matched = int(result.counterexample[-1].state.get("l", "0")) - 1
    except ValueError:
        return None
    return trace.events[matched - 1] if 1 <= matched <= len(trace.events) else None
