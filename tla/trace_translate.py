"""Translate: an NDJSON trace (spec/trace.schema.json) → the rows TLA+ trace validation walks.

The trace is read by ``kraft_tck.spec.trace.read_trace``, the one reader of the format; ``translate``
turns its events into ``TraceEvent`` rows of KRaft.tla's actions (``trace_render`` writes them as the
module TraceData, ``trace_validate`` runs TLC on it, ``trace_merge`` makes one trace of a cluster's node
traces).  Only action events take part: a
``Send``/``Receive`` event has no protocol step of its own (the handler's event
carries the state change), and ``HandleDescribeQuorumRequest``/``BrokerEvent``
change no KRaft state.

Steps that leave marks only in ``Send``/``Receive`` events become the KRaft actions they stand for
(see ``_action_events``): the leader answering a parked long poll (``AnswerParkedFetch``), and the
network's duplicates and losses (``DuplicateMessage``/``DropMessage``).  Every handler row names the
message it handles and the answer it sends by the fields of KRaft.tla's message record
(``model_message``), so TLC matches each event with one message, not any message in flight: one
successor per event, and time that grows with the trace instead of with its interleavings.

Only the messages the model has (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot) take part.

Snapshots (KIP-630): the events ``CreateSnapshot``, ``CleanLog``, ``SendFetchSnapshotRequest``,
``HandleFetchSnapshotRequest`` and ``HandleFetchSnapshotResponse`` are KRaft.tla's actions of those names; a
row's state carries the node's ``logStartOffset`` and the event's ``snapshotId`` (``snapshot_state``) when the
trace shows snapshots at all (``has_snapshots``, TraceKRaft's ``TraceSnapshots``).  A Fetch response names its
SnapshotId, a FetchSnapshot request the snapshot it asks for, a response the snapshot it carries and whether
it completes it (Position + the bytes of its UnalignedRecords = Size); KRaft.tla has no positions.

Voter changes (KIP-853): the events of ``RECONFIG_EVENTS`` are KRaft.tla's actions of those names; when the trace
shows them or a node reports kraft.version >= 1 (``has_reconfig``, TraceKRaft's ``TraceReconfig``) a row's state
carries the voter ids the node reported in force (``voters``, checked against KRaft.tla's ``Config``; only with
``kraftVersion`` >= 1, absent = the static set, not checked) and the id of the event's ``voterKey``.  A voter a
change names that the header does not list is an observer of the model.  A Fetch answer's control batch that
holds KIP-853 records is summarised with its records' types and its VotersRecord's voter ids
(``spec/trace.py`` ``batch_summary``: ``controlTypes``, ``voters``), so an environment leader's VotersRecords
reach a traced follower with their voter sets (``_records``).  The bootstrap servers a node's trace names (ids -2,
-3, ...: ``bootstrap_ids``) are environment nodes; an observer's fetch to one is TraceKRaft's ``BootstrapFetch``.  A
Vote answered INVALID_VOTER_KEY is a ``RefuseVoterKey`` row (the epoch adopted or not, no vote).  In a black-box
(harness) trace the AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter the harness asks for are hidden steps of the
target while pending (``_voter_changes``, TraceKRaft's ``PendingChanges``).

Malformed requests (``unmodelled_request``, ``refusal``): a request for another partition than
__cluster_metadata-0 or a Fetch from a negative offset has no record in KRaft.tla, and Kafka refuses those
and requests with malformed fields (INVALID_REQUEST) before anything may change.  Such a request never
enters the model's network; its answer is one ``RefuseRequest`` row, a step that changes nothing
(TraceKRaft.tla; in a node's trace the row is the node's handler step, so the state it reports must be the
one it had).  A request with malformed fields that the receiver takes (KIP-595 allows an empty log's older
-1 sentinel) is KRaft's own, -1 epochs read as the model's 0.  Left in the network, refused requests were
live forever: any later hidden step of a black-box target could handle each of them, and the combinations
took TLC past 400 s on a catalog run.

Environment mode: a node's own trace (the conformance harness's embedded target, say) shows its peers
only through their messages.  The voters and observers with no action event of their own are the
*environment* (``Trace.environment``): they take no steps; each message the traced node receives from
one enters the network first, with exactly the fields the trace recorded (an ``EnvironmentSend`` row:
the full KRaft.tla record, records of a Fetch response included), and each message the node sends to
one leaves it (``EnvironmentReceive``).  The traced node's own steps stay checked as everywhere else.

Black-box mode: a harness trace holds only ``Send``/``Receive`` events between the harness's virtual
voters and its target (header ``target``).  The voters are the environment as above; every step of the
target is hidden (TraceKRaft.tla ``TargetNext``, at most ``BLACKBOX_HIDDEN_STEPS`` in a row, only when
the next row needs them; its client appends, ``HiddenAppend``, are not counted) and each message it
sends must be in flight when the harness receives it (``_blackbox_events``); the harness's kill -9
restarts (header ``targetRestarts``) are ``TargetRestart`` rows.  The target starts in KRaft's initial
state (or, header ``targetStartedBeforeHarness``, as the Candidate of elections nobody heard: ``_prelude``),
so a trace that finds it in a state earlier cases left is NOT CHECKED (``_blackbox_start``), as
is any trace with no row to check: never PASS.  The conformance harness's session traces (one per life
of the target, header ``cases``) start from a fresh target and span every case.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jsonschema
from kraft_tck.spec import trace as trace_format
from kraft_tck.spec.errors import Errors

# Events without a KRaft state change of their own.
SKIPPED_EVENTS = frozenset({"Send", "Receive", "HandleDescribeQuorumRequest", "BrokerEvent"})
# Rows the translation adds for network faults (no state of the node to compare).
NETWORK_EVENTS = frozenset(
    {"DuplicateMessage", "DropMessage", "AnswerParkedFetch", "EnvironmentSend", "EnvironmentReceive", "TargetRestart"}
)
MODELLED_APIS = frozenset({"Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch", "FetchSnapshot"})
# The actions whose step sends each request; any other send of it is a resend (a timer in the node).
SENT_BY = {
    "Vote": frozenset({"StartElection", "Restart"}),
    "BeginQuorumEpoch": frozenset({"BecomeLeader"}),
    "EndQuorumEpoch": frozenset({"Resign", "LeaderProgressTimeout", "Restart"}),
    "Fetch": frozenset({"SendFetchRequest"}),
    "FetchSnapshot": frozenset({"SendFetchSnapshotRequest"}),
}
#: The snapshot actions (KIP-630); a trace with any of them, or with a FetchSnapshot, a SnapshotId or a log start
#: past 0, is a snapshot trace (``has_snapshots``).
SNAPSHOT_EVENTS = frozenset(
    {"CreateSnapshot", "CleanLog", "SendFetchSnapshotRequest", "HandleFetchSnapshotRequest",
     "HandleFetchSnapshotResponse"}
)
#: The fields a snapshot trace adds to a row's state (TraceKRaft.tla StateMatches): the log start, and the
#: snapshot id the event names (-1, -1 when none).
SNAPSHOT_STATE_FIELDS = ("logStartOffset", "snapshotEndOffset", "snapshotEpoch")
#: Voter changes (KIP-853): the events of the dynamic-quorum actions (TraceKRaft.tla maps them to KRaft.tla's).
RECONFIG_EVENTS = frozenset(
    {"HandleAddRaftVoterRequest", "HandleApiVersionsResponse", "HandleRemoveRaftVoterRequest",
     "HandleUpdateRaftVoterRequest", "SendUpdateRaftVoterRequest", "HandleUpdateRaftVoterResponse",
     "VoterChangeTimeout"}
)
#: The fields a reconfig trace adds to a row's state (TraceKRaft.tla StateMatches and Do): the voter ids in
#: force the node reported (``voters``, only with kraft.version >= 1; [] when not stated) and the voter the
#: event is about (``voterKey`` id; -1 when none).
RECONFIG_STATE_FIELDS = ("voters", "voterId")
#: The largest bootstrap-server id (KIP-853: -2, -3, ... in a message's from/to; -1 is "no replica").
BOOTSTRAP_MAX = -2
#: The voter-change RPCs: black-box validation does not model them (``_blackbox_start``).
RECONFIG_APIS = frozenset({"AddRaftVoter", "RemoveRaftVoter", "UpdateRaftVoter"})
# A row's state where the event reports none (network rows).
NO_STATE: dict[str, Any] = {
    "role": "Unattached",
    "epoch": -1,
    "votedId": -1,
    "leaderId": -1,
    "logEndOffset": -1,
    "lastFetchedEpoch": -1,
    "highWatermark": -1,
}
STATE_FIELDS = ("role", "epoch", "votedId", "leaderId", "logEndOffset", "lastFetchedEpoch", "highWatermark")
# Black-box traces: the target's own unobserved steps between two of its messages (handle what the
# harness sent, then a timer's step).  Every further one multiplies the states TLC explores: 3 took a
# fresh target's 11-row trace from 4 s to 30 s.
BLACKBOX_HIDDEN_STEPS = 2


class TraceFormatError(ValueError):
    """The trace file is not a valid kraft-tck trace."""


class VoterIds(tuple[int, ...]):
    """The voter ids of a VotersRecord (KIP-853), sorted: a TLA+ set in TraceData (``trace_render``), a list in
    JSON (a failed event's message in a report)."""

    __slots__ = ()


@dataclass(frozen=True)
class SnapshotContent:
    """The records of a snapshot an environment node sends (a FetchSnapshotResponse that completes it): the
    trace has its bytes only, so ``end_offset`` records of its ``epoch`` stand for them (TraceData ``Fill``);
    KRaft.tla reads only the snapshot's id from them."""

    end_offset: int
    epoch: int


@dataclass(frozen=True)
class TraceEvent:
    line: int
    seq: int
    node: int
    event: str
    state: dict[str, Any]
    # the fields of KRaft.tla's record of the message this row handles (network rows: drops,
    # duplicates, answers), and of the answer it sends; empty: any message of the action's type
    msg: dict[str, Any] = field(default_factory=dict)
    reply: dict[str, Any] = field(default_factory=dict)
    # node traces: how many records the Fetch answer this row sends carries (-1: no such answer), for a
    # trace whose answers are capped in bytes (TraceKRaft.tla FetchCap)
    fetched: int = -1


@dataclass(frozen=True)
class PendingVoterChange:
    """Black-box (KIP-853): an AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter request to the target (from the
    harness's admin client, or a voter's own UpdateRaftVoter), pending from row ``first`` (the first row after
    the request) to row ``last`` (the first row after its answer; one past the last row when unanswered), both
    1-based as TraceKRaft's ``l``: the target may handle it in a hidden step before any row in between."""

    kind: str  # "Add", "Remove", "Update"
    voter: int
    first: int
    last: int


@dataclass
class Trace:
    path: Path
    header: dict[str, Any]
    events: list[TraceEvent]
    total_lines: int
    # voters/observers without steps of their own: their messages are environment input
    environment: frozenset[int] = frozenset()
    cluster: str = "<none>"  # see trace_cluster
    observers: frozenset[int] = frozenset()  # the header's, and in a node's trace its unknown fetchers
    # black-box mode (a harness trace: messages only): the one node observed; None otherwise
    target: int | None = None
    # black-box: why the trace cannot be checked from a fresh node ("" when it can)
    not_fresh: str = ""
    # black-box: elections the target may have held before the harness listened (IsolatedCandidate)
    prelude: int = 0
    # black-box: the epochs of the target's Vote requests such a start may hold in flight (PreludeVoteEpochs)
    prelude_votes: frozenset[int] = frozenset()
    # the trace shows snapshots (KIP-630): rows carry SNAPSHOT_STATE_FIELDS, TraceKRaft's TraceSnapshots is TRUE
    snapshots: bool = False
    # the trace shows voter changes or kraft.version >= 1 (KIP-853): rows carry RECONFIG_STATE_FIELDS,
    # TraceKRaft's TraceReconfig is TRUE
    reconfig: bool = False
    # black-box: the voter changes asked of the target (TraceKRaft's TraceVoterChanges)
    voter_changes: tuple[PendingVoterChange, ...] = ()


def translate(path: str | Path, send_order: bool = False) -> Trace:
    """Read the NDJSON trace at ``path`` (``kraft_tck.spec.trace.read_trace``, schema-checked) and translate
    its events into rows; a trace with a bad line is refused (``TraceFormatError``) at its first one.
    ``send_order``: a black-box trace's requests of the target in the order it sent them, as far as their
    content tells (``_read_in_send_order``), not in the order the harness read them."""
    path = Path(path)
    try:
        read = trace_format.read_trace(path)
    except trace_format.TraceError as exc:
        raise TraceFormatError(str(exc)) from exc
    if read.bad:
        bad = read.bad[0]
        raise TraceFormatError(f"{path}:{bad.line}: {_why(bad)}")
    header = read.header
    if header["format"] != trace_format.FORMAT_VERSION:
        raise TraceFormatError(f"{path}:1: trace format {header['format']} is not supported")
    objs = [(number, obj) for number, obj in enumerate(read.events, start=2)]
    return rows_of(path, header, objs, read.lines, send_order)


def _why(bad: trace_format.BadLine) -> str:
    """A bad line's problem in one phrase: for a schema violation the most relevant error (jsonschema's
    ``best_match`` looks inside the event kinds the line could be) rather than every branch it failed."""
    try:
        obj = json.loads(bad.text)
    except json.JSONDecodeError:
        return bad.reason
    problem = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(trace_format.schema()).iter_errors(obj))
    if problem is None:
        return bad.reason  # not the schema: seq order, a second header
    where = "/".join(str(p) for p in problem.absolute_path) or "(line)"
    return f"{where}: {problem.message}"


def rows_of(
    path: Path,
    header: dict[str, Any],
    objs: list[tuple[int, dict[str, Any]]],
    total_lines: int,
    send_order: bool = False,
) -> Trace:
    """The rows of the trace with ``header`` and events ``objs`` ((line, event) pairs)."""
    trace = _rows_of(path, header, objs, total_lines, send_order)
    by_line = dict(objs)
    if has_snapshots(objs):
        events = [replace(ev, state=snapshot_state(ev.state, by_line.get(ev.line))) for ev in trace.events]
        trace = replace(trace, events=events, snapshots=True)
    if has_reconfig(objs):
        events = [replace(ev, state=reconfig_state(ev.state, by_line.get(ev.line))) for ev in trace.events]
        trace = replace(trace, events=events, reconfig=True)
    return trace


def has_reconfig(objs: list[tuple[int, dict[str, Any]]]) -> bool:
    """Does the trace show voter changes (KIP-853): an event of a voter-change action, a voterKey, or a node
    reporting kraft.version >= 1?  Only then do its rows carry the reconfig fields and may leaders write
    VotersRecords (TraceReconfig), so that a trace of static voters validates exactly as before."""
    for _, obj in objs:
        if obj["event"] in RECONFIG_EVENTS or obj.get("voterKey"):
            return True
        if (obj.get("state") or {}).get("kraftVersion", 0) >= 1:
            return True
        msg = obj.get("msg") or {}
        if msg.get("api") in RECONFIG_APIS:  # a harness trace: the voter-change RPCs
            return True
        if (msg.get("api"), msg.get("kind")) == ("Fetch", "response") and any(
            "KRAFT_VOTERS" in (batch.get("controlTypes") or [])
            for batch in (_partition(msg.get("body") or {}, "Responses").get("Records") or {}).get("batches") or []
        ):
            return True  # a harness trace: the target's VotersRecord (kraft.version 1)
    return False


def reconfig_state(state: dict[str, Any], obj: dict[str, Any] | None) -> dict[str, Any]:
    """A row's state in a reconfig trace: the voter ids the node reported in force (only with kraft.version
    >= 1: absent means the static set, not checked; [] then) and the id of the event's voterKey (-1: none)."""
    if state == NO_STATE or obj is None:
        return {**state, "voters": [], "voterId": -1}
    reported = obj.get("state") or {}
    voters = sorted(int(v) for v in reported.get("voters", [])) if reported.get("kraftVersion", 0) >= 1 else []
    key = obj.get("voterKey") or {}
    return {**state, "voters": voters, "voterId": int(key.get("id", -1))}


def has_snapshots(objs: list[tuple[int, dict[str, Any]]]) -> bool:
    """Does the trace show snapshots (KIP-630): a snapshot action, a log start past 0, a FetchSnapshot, or a
    Fetch answered with a SnapshotId?  Only then do its rows carry the snapshot fields and may TLC take
    snapshot steps (TraceSnapshots), so that a trace without them validates as fast as before."""
    for _, obj in objs:
        if obj["event"] in SNAPSHOT_EVENTS or obj.get("snapshotId"):
            return True
        if (obj.get("state") or {}).get("logStartOffset", 0) > 0:
            return True
        msg = obj.get("msg") or {}
        if msg.get("api") == "FetchSnapshot":
            return True
        if (msg.get("api"), msg.get("kind")) == ("Fetch", "response") and (
            _fetch_snapshot_id(_partition(msg.get("body") or {}, "Responses"))["snapshotEndOffset"] >= 0
        ):
            return True
    return False


def snapshot_state(state: dict[str, Any], obj: dict[str, Any] | None) -> dict[str, Any]:
    """A row's state in a snapshot trace: with the node's log start (absent in the trace: 0) and the snapshot
    id its event names (``snapshotId``; -1, -1 when none).  Network rows (``NO_STATE``) get -1s."""
    if state == NO_STATE or obj is None:
        return {**state, **dict.fromkeys(SNAPSHOT_STATE_FIELDS, -1)}
    snap = obj.get("snapshotId") or {}
    return {
        **state,
        "logStartOffset": int((obj.get("state") or {}).get("logStartOffset", 0)),
        "snapshotEndOffset": int(snap.get("endOffset", -1)),
        "snapshotEpoch": int(snap.get("epoch", -1)),
    }


def _rows_of(
    path: Path, header: dict[str, Any], objs: list[tuple[int, dict[str, Any]]], total_lines: int, send_order: bool
) -> Trace:
    observers = set(header.get("observers", []))
    acting = {obj["node"] for _, obj in objs if obj["event"] not in ("Send", "Receive")}
    if acting:
        # a node's trace shows observers only as the fetchers that ask it (KIP-595 observers are not
        # configured anywhere): they are observers of the model too
        observers |= {
            obj["msg"]["from"]
            for _, obj in objs
            if obj["event"] == "Receive"
            and ((obj.get("msg") or {}).get("api"), (obj.get("msg") or {}).get("kind")) == ("Fetch", "request")
            and obj["msg"]["from"] >= 0
            and obj["msg"]["from"] not in header["voters"]
            and _partition(obj["msg"].get("body") or {})
        }
    # KIP-853: a voter a change names that the header does not (a joiner) is an observer of the model
    named = {int(obj["voterKey"]["id"]) for _, obj in objs if obj.get("voterKey")}
    observers |= {v for v in named if v >= 0 and v not in header["voters"]}
    # KIP-853: the bootstrap servers a node's trace sends to and hears from (ids -2, -3, ...): environment
    # nodes of the model, which stand for voters whose ids the node does not know (TraceKRaft BootstrapFetch)
    observers |= bootstrap_ids(objs)
    members = set(header["voters"]) | observers
    target = header.get("target") if not acting and header["source"] == "harness" else None
    if target is not None:
        # black-box: the harness's virtual voters are the environment of the one node it drives
        environment = frozenset(members - {target})
        cluster = trace_cluster(header, objs)
        before_harness = bool(header.get(STARTED_BEFORE_HARNESS))
        fresh, prelude, vote_epochs = _blackbox_start(objs, target, before_harness)
        restarts = list(header.get("targetRestarts", []))
        events = [] if fresh else _blackbox_events(objs, target, environment, cluster, restarts)
        if send_order:
            events = _read_in_send_order(events, target)
        if before_harness and not fresh:
            prelude, vote_epochs = _prelude(events)
        return Trace(
            path, header, events, total_lines, environment, cluster, frozenset(observers), target, fresh, prelude,
            vote_epochs, voter_changes=_voter_changes(objs, target, events),
        )  # fmt: skip
    # with no step recorded at all there is no node to check and so no environment either
    environment = frozenset(members - acting) if acting else frozenset()
    events = _action_events(objs, environment, trace_cluster(header, objs))
    for ev in events:
        if ev.node not in header["voters"] and ev.node not in observers:
            raise TraceFormatError(f"{path}:{ev.line}: node {ev.node} is neither a voter nor an observer")
    return Trace(path, header, events, total_lines, environment, trace_cluster(header, objs), frozenset(observers))


def bootstrap_ids(objs: list[tuple[int, dict[str, Any]]]) -> set[int]:
    """The bootstrap-server ids the trace's messages name (KIP-853 ``controller.quorum.bootstrap.servers``: Kafka's
    KafkaRaftClient numbers them -2, -3, ...; the trace schema's ``peerId`` allows down to -1001)."""
    out: set[int] = set()
    for _, obj in objs:
        msg = obj.get("msg")
        if msg is not None:
            out |= {p for p in (msg["from"], msg["to"]) if p <= BOOTSTRAP_MAX}
    return out


def trace_cluster(header: dict[str, Any], objs: list[tuple[int, dict[str, Any]]]) -> str:
    """The cluster id of the traced nodes: the header's, or for a node that started unformatted and
    adopted one (KIP-595 "Cluster Bootstrapping"), the first it reported."""
    if header.get("clusterId"):
        return str(header["clusterId"])
    for _, obj in objs:
        cid = (obj.get("state") or {}).get("clusterId")
        if cid:
            return str(cid)
    return "<none>"


def message_key(msg: dict[str, Any]) -> str:
    # Not the body: a receiver's decoded body spells out defaults the sender's left implicit.  A
    # correlation id a restarted sender reuses only matters if exactly those copies are lost or
    # duplicated, since counts of sends and receives are compared.
    return json.dumps([msg["api"], msg["kind"], msg["from"], msg["to"], msg["correlationId"]])


def _request_key(resp: dict[str, Any]) -> str:
    """The key of the request ``resp`` answers (same correlation id, ends swapped)."""
    return json.dumps([resp["api"], "request", resp["to"], resp["from"], resp["correlationId"]])


def _message_type(msg: dict[str, Any]) -> str:
    return f"{msg['api']}{msg['kind'].capitalize()}"


def _partition(body: dict[str, Any], topics: str = "Topics") -> dict[str, Any]:
    for topic in body.get(topics) or []:
        for part in topic.get("Partitions") or []:
            return dict(part)
    return {}


def _epoch_of_log(epoch: int) -> int:
    # Kafka says -1 for "no record yet" where the model's LastEpoch of an empty log is 0.
    return max(epoch, 0)


_ERRORS = {0: "NONE", 6: "NOT_LEADER_OR_FOLLOWER", 74: "FENCED_LEADER_EPOCH", 75: "UNKNOWN_LEADER_EPOCH"}
# FetchSnapshot's errors in the model (KRaft.tla FetchSnapshotReply); POSITION_OUT_OF_RANGE has no counterpart
_SNAPSHOT_ERRORS = {**_ERRORS, 98: "SNAPSHOT_NOT_FOUND"}
_METADATA_TOPIC = "__cluster_metadata"
_METADATA_TOPIC_ID = "00000000-0000-0000-0000-000000000001"  # Kafka's Uuid.METADATA_TOPIC_ID
#: The largest int32: an epoch a node may adopt (Kafka does) but never go past (TraceKRaft.tla EpochMax).
EPOCH_MAX = 2**31 - 1
#: A row's event for a request its receiver refused or the model has no record of (TraceKRaft.tla RefuseRequest).
REFUSE_REQUEST = "RefuseRequest"
#: KIP-853: a Vote v1 addressed to another voter key (VoterId/VoterDirectoryId), answered INVALID_VOTER_KEY: the
#: receiver adopts a higher epoch first and votes for nobody (Kafka's KafkaRaftClient.handleVoteRequest:
#: transitionToUnattached, then isValidVoterKey). TraceKRaft.tla RefuseVoterKey.
REFUSE_VOTER_KEY = "RefuseVoterKey"


def voter_key_refusal(resp: dict[str, Any]) -> bool:
    """Is ``resp`` a Vote answer refusing its request for another voter key (INVALID_VOTER_KEY, KIP-853)?"""
    if (resp["api"], resp["kind"]) != ("Vote", "response"):
        return False
    body = resp.get("body") or {}
    return body.get("ErrorCode", 0) == 0 and _partition(body).get("ErrorCode", 0) == Errors.INVALID_VOTER_KEY


def unmodelled_request(msg: dict[str, Any]) -> str:
    """Why KRaft.tla has no record of request ``msg`` ("" when it has one): not for exactly one partition,
    __cluster_metadata-0 (``RaftUtil.hasValidTopicPartition``; Fetch names the topic by TopicId from v13),
    or a Fetch from a negative offset (the leader's answer would start before the log).

    Other malformed fields have a reading in the model and stay in it: an epoch -1 is an empty log's last
    epoch (the sentinel before Kafka's 0, ``_epoch_of_log``), a negative LastOffset a log behind every
    other, a LastOffsetEpoch not below the candidate's epoch or a LastFetchedEpoch above the leader's an
    ordinary (if odd) log, MaxWaitMs is not in the model. A target that refuses such a request (Kafka:
    INVALID_REQUEST) takes a RefuseRequest step; one that accepts it takes KRaft's."""
    if msg["kind"] != "request" or msg["api"] not in MODELLED_APIS:
        return ""
    body = msg.get("body") or {}
    if "Topics" not in body:
        return ""  # a trace that leaves the body out: taken as KRaft's
    topics = body["Topics"] or []
    if len(topics) != 1 or len(topics[0].get("Partitions") or []) != 1:
        return "not one partition"
    topic, part = topics[0], topics[0]["Partitions"][0]
    if msg["api"] == "Fetch":
        name = topic.get("TopicId", _METADATA_TOPIC_ID) == _METADATA_TOPIC_ID and (
            topic.get("Topic", _METADATA_TOPIC) == _METADATA_TOPIC
        )
        index = part.get("Partition", 0)
    elif msg["api"] == "FetchSnapshot":
        name, index = topic.get("Name", _METADATA_TOPIC) == _METADATA_TOPIC, part.get("Partition", 0)
    else:
        name, index = topic.get("TopicName", _METADATA_TOPIC) == _METADATA_TOPIC, part.get("PartitionIndex", 0)
    if not name or index != 0:
        return "not __cluster_metadata-0"
    if msg["api"] == "Fetch" and part.get("FetchOffset", 0) < 0:
        return "a negative FetchOffset"
    return ""


def refusal(resp: dict[str, Any]) -> bool:
    """Does response ``resp`` refuse its request as malformed (INVALID_REQUEST, top-level or for the
    partition)? Kafka checks the partition and the request's fields before anything may change
    (``KafkaRaftClient.handleVoteRequest``, ``handleFetchRequest``, ``RaftUtil.hasValidTopicPartition``)."""
    body = resp.get("body") or {}
    if body.get("ErrorCode", 0) == Errors.INVALID_REQUEST:
        return True
    part = _partition(body, "Responses" if resp["api"] == "Fetch" else "Topics")
    return bool(part) and part.get("ErrorCode", 0) == Errors.INVALID_REQUEST


def _refused_by_cluster(resp: dict[str, Any]) -> bool:
    """Does response ``resp`` refuse its whole request as one of another cluster (KIP-595 "Fetch Request
    Handling" step 1, and the same check of every KRaft RPC: ``KafkaRaftClient.hasValidClusterId``)?"""
    return (resp.get("body") or {}).get("ErrorCode", 0) == Errors.INCONSISTENT_CLUSTER_ID


def _refused_requests(
    objs: list[tuple[int, dict[str, Any]]],
    receivers: frozenset[int] | set[int],
    seen: str,
    refused: Callable[[dict[str, Any]], bool] | None = None,
) -> set[int]:
    """The lines of the requests from outside ``receivers`` to one of them that the model has no record of
    or that the receiver refused (``refusal``), each as the trace event ``seen`` ("Receive" in a node's
    trace, "Send" in a harness trace); a request and its answer pair up by key (a sender reuses a
    correlation id only once no answer can come: a new connection, a restarted node)."""
    out: set[int] = set()
    pending: dict[str, int] = {}  # request key -> the line of its latest request, until answered
    for number, obj in objs:
        msg = obj.get("msg")
        if obj["event"] not in ("Send", "Receive") or msg is None or msg["api"] not in MODELLED_APIS:
            continue
        inward = msg["to"] in receivers and msg["from"] not in receivers
        outward = msg["from"] in receivers and msg["to"] not in receivers
        if msg["kind"] == "request" and inward and obj["event"] == seen:
            if unmodelled_request(msg):
                out.add(number)
            pending[message_key(msg)] = number
        elif msg["kind"] == "response" and outward and obj["event"] != seen:
            line = pending.pop(_request_key(msg), None)
            if line is not None and (refused or refusal)(msg):
                out.add(line)
    return out


def refused_row(msg: dict[str, Any]) -> dict[str, Any]:
    """The ``msg`` of a RefuseRequest row: no message of the model (type ""), what was refused in words."""
    why = unmodelled_request(msg) or "INVALID_REQUEST"
    return {"type": "", "refused": f"{msg['api']} request from {msg['from']}: {why}"}


def _pre_vote(part: dict[str, Any]) -> bool:
    """A Vote request partition's PreVote (KIP-996, Vote v2); v0/v1 have none: a real vote."""
    return bool(part.get("PreVote", False))


def model_message(msg: dict[str, Any], request: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fields of KRaft.tla's message record that identify ``msg`` (a trace ``msg`` object).

    Only fields the trace states exactly are given; TraceKRaft matches a message in flight on all of
    them (``Matches``), so one handler event selects one message instead of any of its type.  A Fetch
    response does not repeat its request's FetchOffset/LastFetchedEpoch (the model's answer echoes them),
    so they come from ``request``, the Fetch request with the same correlation id, when the trace has it.
    """
    body = msg.get("body") or {}
    key: dict[str, Any] = {"type": _message_type(msg), "from": msg["from"], "to": msg["to"]}
    api, kind = msg["api"], msg["kind"]
    if api == "Vote":
        part = _partition(body)
        if kind == "request" and part:
            key.update(
                epoch=part["CandidateEpoch"],
                lastOffsetEpoch=_epoch_of_log(part["LastOffsetEpoch"]),
                lastOffset=part["LastOffset"],
                preVote=_pre_vote(part),
            )
        elif part and body.get("ErrorCode", 0) == 0 and part.get("ErrorCode", 0) in (0, 74):
            # FENCED_LEADER_EPOCH (74) is KRaft.tla's refusal of an older candidate epoch: a VoteResponse
            # with the voter's epoch and leader, not granted.  Left unnamed it would match any
            # VoteResponse in flight, and each choice a branch TLC follows to the end of the trace.
            key.update(epoch=part["LeaderEpoch"], leaderId=part["LeaderId"], granted=bool(part["VoteGranted"]))
            if request is not None:  # a Vote v2 response has no PreVote of its own: its request's
                key["preVote"] = _pre_vote(_partition(request.get("body") or {}) or {})
    elif api in ("BeginQuorumEpoch", "EndQuorumEpoch"):
        part = _partition(body)
        if part and kind == "request":
            key.update(epoch=part["LeaderEpoch"], leaderId=part["LeaderId"])
        elif part and body.get("ErrorCode", 0) == 0 and part.get("ErrorCode", 0) in _ERRORS:
            key.update(epoch=part["LeaderEpoch"], leaderId=part["LeaderId"], error=_ERRORS[part["ErrorCode"]])
    elif api == "Fetch":
        if kind == "request":
            part = _partition(body)
            if part:
                key.update(
                    epoch=part["CurrentLeaderEpoch"],
                    fetchOffset=part["FetchOffset"],
                    lastFetchedEpoch=_epoch_of_log(part["LastFetchedEpoch"]),
                )
        else:
            part = _partition(body, "Responses")
            if part and body.get("ErrorCode", 0) == 0 and part.get("ErrorCode", 0) in _ERRORS:
                leader = part.get("CurrentLeader") or {}
                diverging = part.get("DivergingEpoch") or {}
                error = _ERRORS[part["ErrorCode"]]
                key.update(
                    error=error,
                    epoch=leader.get("LeaderEpoch", -1),
                    leaderId=leader.get("LeaderId", -1),
                    divergingEpoch=diverging.get("Epoch", -1),
                    divergingEndOffset=diverging.get("EndOffset", -1),
                    **_fetch_snapshot_id(part),
                    # the model's leader publishes "none" (-1) where the reference core says 0: the same
                    # for a follower, whose HW never goes below 0
                    highWatermark=max(part.get("HighWatermark", -1), 0) or -1 if error == "NONE" else -1,
                )
                if request is not None:
                    req = model_message(request)
                    key.update({f: req[f] for f in ("fetchOffset", "lastFetchedEpoch") if f in req})
    elif api == "FetchSnapshot":
        if kind == "request":
            part = _partition(body)
            if part:
                snap = part.get("SnapshotId") or {}
                key.update(epoch=part["CurrentLeaderEpoch"], snapshotEndOffset=snap.get("EndOffset", -1),
                           snapshotEpoch=snap.get("Epoch", -1))
        else:
            part = _partition(body)
            if part and body.get("ErrorCode", 0) == 0 and part.get("ErrorCode", 0) in _SNAPSHOT_ERRORS:
                key.update(_fetch_snapshot_answer(part))
    return key



def _fetch_snapshot_id(part: dict[str, Any]) -> dict[str, int]:
    """KRaft.tla's SnapshotId fields of a Fetch response partition (KIP-630; -1, -1: none)."""
    snap = part.get("SnapshotId") or {}
    end, epoch = snap.get("EndOffset", -1), snap.get("Epoch", -1)
    if end < 0 or epoch < 0:
        return {"snapshotEndOffset": -1, "snapshotEpoch": -1}
    return {"snapshotEndOffset": end, "snapshotEpoch": epoch}


def snapshot_complete(part: dict[str, Any]) -> bool:
    """Does a FetchSnapshot response partition complete its snapshot (Position + its bytes = Size, Kafka's
    handleFetchSnapshotResponse: the follower freezes and installs it then)?"""
    records = part.get("UnalignedRecords") or {}
    got = records.get("bytes", 0) if isinstance(records, dict) else 0
    size = part.get("Size", -1)
    return size >= 0 and part.get("Position", 0) + got == size


def _fetch_snapshot_answer(part: dict[str, Any]) -> dict[str, Any]:
    """The fields of KRaft.tla's FetchSnapshotResponse that a trace states (not its records)."""
    leader = part.get("CurrentLeader") or {}
    error = _SNAPSHOT_ERRORS[part.get("ErrorCode", 0)]
    ids = _fetch_snapshot_id(part) if error == "NONE" else {"snapshotEndOffset": -1, "snapshotEpoch": -1}
    return dict(epoch=leader.get("LeaderEpoch", -1), leaderId=leader.get("LeaderId", -1), error=error,
                complete=error == "NONE" and snapshot_complete(part), **ids)


def parked_message(request: dict[str, Any]) -> dict[str, Any]:
    """The model's record of a parked long-poll fetch: the request, renamed."""
    return dict(model_message(request), type="ParkedFetch")


def _records(part: dict[str, Any]) -> list[dict[str, Any]]:
    """KRaft.tla's records of a Fetch response partition: one entry per offset, its batch's epoch; a
    control batch is the leader's LeaderChange, values of data records are abstract ("record")."""
    out: list[dict[str, Any]] = []
    for batch in (part.get("Records") or {}).get("batches") or []:
        value = "LeaderChange" if batch.get("control") else "record"
        count = int(batch["lastOffset"]) - int(batch["baseOffset"]) + 1
        epoch = int(batch["epoch"])
        types = batch.get("controlTypes")
        if batch.get("control") and isinstance(types, list) and len(types) == count:
            # KIP-853: a control batch whose summary names its records' types (spec/trace.py batch_summary)
            for ctype in types:
                if ctype == "KRAFT_VOTERS":
                    voters = VoterIds(sorted(set(batch.get("voters") or [])))
                    out.append({"epoch": epoch, "value": "VotersRecord", "voters": voters})
                else:
                    out.append({"epoch": epoch, "value": "KRaftVersionRecord" if ctype == "KRAFT_VERSION"
                                else "LeaderChange"})
            continue
        out.extend({"epoch": epoch, "value": value} for _ in range(count))
    return out


def _record_count(part: dict[str, Any]) -> int:
    """How many records a Fetch response partition carries (``len(_records(part))`` without building them)."""
    batches = (part.get("Records") or {}).get("batches") or []
    return sum(int(b["lastOffset"]) - int(b["baseOffset"]) + 1 for b in batches)


def environment_message(
    msg: dict[str, Any], cluster: str, request: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """KRaft.tla's whole record of ``msg``, a message from an environment node, or None when the model
    has no such message (an error outside the model, e.g. INCONSISTENT_CLUSTER_ID for the whole request).

    Unlike ``model_message`` (the fields that identify a message the model itself made), every field a
    KRaft handler reads must be there, since the message enters the network as it is.  A request without
    a cluster id (null: Kafka accepts it, KIP-595 "Cluster Bootstrapping") carries ``cluster``, the one
    the traced node belongs to.
    """
    body = msg.get("body") or {}
    if body.get("ErrorCode", 0) != 0:
        return None
    api, kind = msg["api"], msg["kind"]
    key: dict[str, Any] = {"type": _message_type(msg), "from": msg["from"], "to": msg["to"]}
    if kind == "request":
        key["clusterId"] = body.get("ClusterId") or cluster
    part = _partition(body, "Responses" if (api, kind) == ("Fetch", "response") else "Topics")
    if not part:
        return None
    if kind == "response" and part.get("ErrorCode", 0) not in (_SNAPSHOT_ERRORS if api == "FetchSnapshot" else _ERRORS):
        return None
    if api == "Vote" and kind == "request":
        key.update(
            epoch=part["CandidateEpoch"],
            lastOffsetEpoch=_epoch_of_log(part["LastOffsetEpoch"]),
            lastOffset=part["LastOffset"],
            preVote=_pre_vote(part),
        )
    elif api == "Vote":
        key.update(epoch=part["LeaderEpoch"], leaderId=part["LeaderId"], granted=bool(part["VoteGranted"]),
                   preVote=_pre_vote(_partition(request.get("body") or {}) or {}) if request else False)
    elif api in ("BeginQuorumEpoch", "EndQuorumEpoch"):
        key.update(epoch=part["LeaderEpoch"], leaderId=part["LeaderId"])
        if kind == "response":
            key["error"] = _ERRORS[part.get("ErrorCode", 0)]
    elif api == "FetchSnapshot" and kind == "request":
        snap = part.get("SnapshotId") or {}
        key.update(epoch=part["CurrentLeaderEpoch"], snapshotEndOffset=snap.get("EndOffset", -1),
                   snapshotEpoch=snap.get("Epoch", -1))
    elif api == "FetchSnapshot":
        key.update(_fetch_snapshot_answer(part))
        # the snapshot's records, which the trace has as bytes only: records of its epoch stand for them
        key["records"] = (
            SnapshotContent(key["snapshotEndOffset"], key["snapshotEpoch"]) if key["complete"] else []
        )
    elif kind == "request":
        key.update(
            epoch=part["CurrentLeaderEpoch"],
            fetchOffset=part["FetchOffset"],
            lastFetchedEpoch=_epoch_of_log(part["LastFetchedEpoch"]),
        )
    else:
        if request is None:
            return None  # the model's answer echoes its request, which the trace must hold
        req = model_message(request)
        if "fetchOffset" not in req:
            return None
        leader = part.get("CurrentLeader") or {}
        diverging = part.get("DivergingEpoch") or {}
        error = _ERRORS[part.get("ErrorCode", 0)]
        hw = part.get("HighWatermark", -1)
        key.update(
            error=error,
            epoch=leader.get("LeaderEpoch", -1),
            leaderId=leader.get("LeaderId", -1),
            fetchOffset=req["fetchOffset"],
            lastFetchedEpoch=req["lastFetchedEpoch"],
            records=_records(part) if error == "NONE" else [],
            divergingEpoch=diverging.get("Epoch", -1),
            divergingEndOffset=diverging.get("EndOffset", -1),
            **_fetch_snapshot_id(part),
            # the model says "none" (-1) where Kafka may say 0: the follower keeps its HW either way
            highWatermark=hw if error == "NONE" and hw > 0 else -1,
        )
    return key


def _action_events(
    objs: list[tuple[int, dict[str, Any]]], environment: frozenset[int] = frozenset(), cluster: str = ""
) -> list[TraceEvent]:
    """The action events with the message each one handles, plus the rows for steps seen only in messages.

    * a handler event names the message of the ``Receive`` right before it (same node) and, as its
      ``reply``, the answer it sends (the node's next ``Send`` of the response to that request), or for
      a fetch the leader parks (no answer before its next step) the parked fetch;
    * a Fetch response the leader sends for a parked fetch is that long poll being answered inside
      another step (new data, a new HW, MaxWaitMs, lost leadership): an ``AnswerParkedFetch`` row at
      that ``Send``; a parked fetch never answered (the leader restarted) is lost: a ``DropMessage`` row
      before its fetcher's next ``SendFetchRequest``;
    * network faults: ``DuplicateMessage`` rows for copies received more often than sent and for
      requests resent on a timer, ``DropMessage`` rows for messages sent and never received;
    * environment nodes (``environment``): an ``EnvironmentSend`` row puts each message received from
      one into the network (the handler row then names that whole record), an ``EnvironmentReceive``
      row takes each message sent to one out of it.
    """
    # Only messages between nodes whose steps the trace records: a single node's trace or a black-box
    # harness trace does not see the other end, so a missing Send or Receive says nothing there.
    acting = {obj["node"] for _, obj in objs if obj["event"] not in ("Send", "Receive")}
    dropped, copies_at = _deliveries(objs, acting)
    resent_after = _resends(objs, acting)
    requests: dict[str, dict[str, Any]] = {}  # request key -> its latest Send (a response's echo)
    receiving: dict[int, tuple[str, dict[str, Any]]] = {}  # node -> its latest Receive since its last step
    answering: dict[int, tuple[int, str]] = {}  # node -> (row, request key) of its handler awaiting a reply
    # request key -> (row, node) of a fetch handled with records to send (KRaft.tla cannot park it) whose
    # answer the node's trace shows after a later action of the same step (a timer that fired in it)
    late: dict[str, tuple[int, int]] = {}
    # request key -> the parked copies of a fetch request, until answered (a duplicated fetch parks twice)
    parked: dict[str, list[dict[str, Any]]] = {}
    events: list[TraceEvent] = []
    reading: set[int] = set()  # nodes whose latest Receive is a Fetch from outside the quorum (id -1)
    last_state: dict[int, dict[str, Any]] = {}  # node -> the state of its latest step
    fetch_row: dict[int, int] = {}  # node -> its SendFetchRequest row whose request is not traced yet

    # node -> what it received from the environment, not yet handled: (key, message, KRaft record or
    # None when the model has no such message); the node handles its inputs in order of arrival
    from_environment: dict[int, list[tuple[str, dict[str, Any], dict[str, Any] | None]]] = {}
    # (node, peer) -> correlation id of the node's one request in flight to that environment peer: an
    # answer to any other is stale and the node drops it without a step (reference core _answers_inflight)
    in_flight: dict[tuple[int, int], int] = {}
    # requests from the environment to a traced node that it refused or the model has no record of (a
    # sender -1 included: a node cannot read the sender of a request for another partition); their handler
    # row is a RefuseRequest, their answer no message of the model
    from_outside = {n for n, obj in objs if obj.get("msg") and (obj["msg"]["from"] in environment | {-1})}
    refused_lines = _refused_requests(objs, acting, "Receive") & from_outside
    # ... and requests of a stranger (a sender neither traced nor of the environment: the simulator's foreign
    # cluster sender) the receiver refused as another cluster's: no message of the model either, the
    # receiver must stay as it was (RefuseRequest)
    strangers = {n for n, obj in objs if obj.get("msg") and obj["msg"]["from"] not in acting | environment | {-1}}
    refused_lines |= _refused_requests(objs, acting, "Receive", _refused_by_cluster) & strangers
    refused_keys: set[str] = set()

    def network_row(number: int, obj: dict[str, Any], node: int, event: str, msg: dict[str, Any]) -> None:
        events.append(TraceEvent(number, obj["seq"], node, event, dict(NO_STATE), msg=msg))

    def _answered(number: int, obj: dict[str, Any], node: int, msg: dict[str, Any], model: dict[str, Any]) -> None:
        """A response ``node`` sends: its handler's reply, or the answer to a parked long poll."""
        answers = _request_key(msg)
        fetched = _record_count(_partition(msg["body"], "Responses")) if msg["api"] == "Fetch" and msg["body"] else -1
        if answers in refused_keys:
            refused_keys.discard(answers)
            return
        if msg["body"] and msg["body"].get("ErrorCode", 0) != 0:
            # an answer to the whole request (INCONSISTENT_CLUSTER_ID): outside the model, which drops
            # a foreign request without one
            if node in answering and answering[node][1] == answers:
                at = answering.pop(node)[0]
                events[at] = replace(events[at], reply={})
                if parked.get(answers):
                    _unpark(parked, answers)
            late.pop(answers, None)
            return
        if node in answering and answering[node][1] == answers:
            at = answering.pop(node)[0]
            if voter_key_refusal(msg) and events[at].event == "HandleVoteRequest":
                events[at] = replace(events[at], event=REFUSE_VOTER_KEY, reply={})
                return
            events[at] = replace(events[at], reply=model, fetched=fetched)
            if parked.get(answers):
                _unpark(parked, answers)
        elif answers in late:
            at = late.pop(answers)[0]
            events[at] = replace(events[at], reply=model, fetched=fetched)
        elif msg["api"] == "Fetch" and parked.get(answers):
            events.append(
                TraceEvent(
                    number,
                    obj["seq"],
                    node,
                    "AnswerParkedFetch",
                    dict(NO_STATE),
                    msg=parked_message(_unpark(parked, answers)),
                    reply=model,
                    fetched=fetched,
                )
            )

    for number, obj in objs:
        msg = obj.get("msg")
        node = obj["node"]
        if obj["event"] in ("Send", "Receive"):
            if msg is None or msg["api"] not in MODELLED_APIS:
                continue
            key = message_key(msg)
            if obj["event"] == "Send" and msg["kind"] == "request":
                requests[key] = msg
            request = requests.get(_request_key(msg)) if msg["kind"] == "response" else None
            model = model_message(msg, request)
            from_env, to_env = msg["from"] in environment, msg["to"] in environment
            if obj["event"] == "Receive" and number in refused_lines:
                refused_keys.add(key)
                from_environment.setdefault(node, []).append((key, msg, refused_row(msg)))
                continue
            if obj["event"] == "Send" and msg["kind"] == "response" and _request_key(msg) in refused_keys:
                _answered(number, obj, node, msg, model)
                continue  # no message of the model: the request was never in its network
            if obj["event"] == "Receive" and from_env and node in acting:
                if msg["kind"] == "response":
                    if in_flight.get((node, msg["from"])) != msg["correlationId"]:
                        continue  # stale
                    del in_flight[(node, msg["from"])]
                from_environment.setdefault(node, []).append((key, msg, environment_message(msg, cluster, request)))
                continue
            if obj["event"] == "Send" and to_env and node in acting:
                if msg["kind"] == "response":
                    _answered(number, obj, node, msg, model)
                else:
                    in_flight[(node, msg["to"])] = msg["correlationId"]
                    if msg["api"] == "Fetch" and msg["to"] <= BOOTSTRAP_MAX and node in fetch_row:
                        # KIP-853: the fetch goes to a bootstrap server: the row says which (BootstrapFetch)
                        row = fetch_row.pop(node)
                        events[row] = replace(events[row], reply=model)
                    # the step that made this request replaced the one in flight before the node got to
                    # an answer it had already received (the Send is traced after that step)
                    queue = from_environment.get(node, [])
                    queue[:] = [q for q in queue if q[1]["kind"] == "request" or q[1]["from"] != msg["to"]]
                network_row(number, obj, msg["to"], "EnvironmentReceive", model)
                continue
            if obj["event"] == "Receive" and msg["api"] == "Fetch" and msg["from"] < 0 and node in acting:
                reading.add(node)  # a Fetch with ReplicaId -1: a reader of the log, not a replica
            if msg["from"] not in acting or msg["to"] not in acting:
                continue
            if obj["event"] == "Receive":
                receiving[node] = (key, msg)
                for _ in range(copies_at.get(number, 0)):
                    network_row(number, obj, msg["to"], "DuplicateMessage", model)
                continue
            if msg["kind"] == "response":
                _answered(number, obj, node, msg, model)
            for _ in range(resent_after.get(number, 0)):
                network_row(number, obj, msg["to"], "DuplicateMessage", model)
            if number in dropped:
                network_row(number, obj, node, "DropMessage", model)
            continue
        if obj["event"] in SKIPPED_EVENTS:
            continue
        read = node in reading
        reading.discard(node)
        unchanged = last_state.get(node) == obj["state"]
        last_state[node] = obj["state"]
        if read and obj["event"] == "HandleFetchRequest" and unchanged:
            # KIP-595 keeps no fetch state for a reader outside the quorum (nor does the model): a step
            # that changed nothing the node reports is no KRaft action
            continue
        unanswered = answering.pop(node, None)
        if unanswered and events[unanswered[0]].event == "HandleFetchRequest" and unanswered[1] not in parked:
            late[unanswered[1]] = (unanswered[0], node)  # not parked: its answer is still to come
        handled = receiving.pop(node, None)
        whole: dict[str, Any] | None = None
        if obj["event"] == "Restart":  # a new incarnation: nothing in flight, nothing received yet
            for rkey in [k for k, (_, n) in late.items() if n == node]:
                del late[rkey]
            from_environment.pop(node, None)
            for pair in [p for p in in_flight if p[0] == node]:
                del in_flight[pair]
        elif obj["event"].startswith("Handle"):
            queue = from_environment.get(node, [])
            wanted = obj["event"].removeprefix("Handle")
            at = next((k for k, (_, m, _) in enumerate(queue) if _message_type(m) == wanted), None)
            if at is not None:
                hkey, hmsg, whole = queue.pop(at)
                handled = (hkey, hmsg)
                if whole is not None and whole.get("type") == "" and "refused" in whole:
                    # refused (or not KRaft's): the node must report the state it had (RefuseRequest)
                    events.append(TraceEvent(number, obj["seq"], node, REFUSE_REQUEST, dict(obj["state"]), msg=whole))
                    continue
                if whole is None:
                    whole = {"type": "", "outside": True}  # the node must not change state for it
                else:
                    network_row(number, obj, hmsg["from"], "EnvironmentSend", whole)
        if obj["event"] == "SendFetchRequest":
            # a parked fetch of this node the leader never answered is gone (the leader restarted)
            for rkey in [k for k, reqs in parked.items() if reqs and reqs[0]["from"] == node]:
                while parked.get(rkey):
                    network_row(number, obj, node, "DropMessage", parked_message(_unpark(parked, rkey)))
        msg_model: dict[str, Any] = {}
        reply: dict[str, Any] = {}
        if handled is not None and obj["event"].startswith("Handle"):
            hkey, hmsg = handled
            msg_model = model_message(hmsg, requests.get(_request_key(hmsg)) if hmsg["kind"] == "response" else None)
            if whole is not None:
                msg_model = whole
            if hmsg["kind"] == "request" and (hmsg["from"] in acting or hmsg["from"] in environment):
                answering[node] = (len(events), hkey)
                st = obj["state"]
                leo, last_epoch = st["logEndOffset"], _epoch_of_log(st["lastFetchedEpoch"])
                # KRaft.tla parks only a caught-up fetch of the leader's epoch: not diverging and at the log
                # end (one past it always diverges), i.e. FetchOffset = log end and LastFetchedEpoch = the
                # epoch of the leader's last record
                # A fetch with MaxWaitMs 0 (an observer's, KIP-853's removed voter's) is answered at once
                # (Kafka's handleFetchRequest completes it without the purgatory): its answer may still be
                # traced after a timer that fired in the same turn, a late reply, never a parked one
                if (obj["event"] == "HandleFetchRequest" and st["role"] == "Leader"
                        and (hmsg.get("body") or {}).get("MaxWaitMs", 1) != 0
                        and msg_model.get("epoch", st["epoch"]) == st["epoch"]
                        and msg_model.get("fetchOffset", leo) == leo
                        and msg_model.get("lastFetchedEpoch", last_epoch) == last_epoch):
                    # parked unless the answer follows before the node's next step
                    parked.setdefault(hkey, []).append(hmsg)
                    reply = parked_message(hmsg)
        fetch_row.pop(node, None)
        if obj["event"] == "SendFetchRequest":
            fetch_row[node] = len(events)
        events.append(
            TraceEvent(number, obj["seq"], node, obj["event"], dict(obj["state"]), msg=msg_model, reply=reply)
        )
    return events


def _deliveries(objs: list[tuple[int, dict[str, Any]]], acting: set[int]) -> tuple[set[int], dict[int, int]]:
    """Which copy of a message each Receive is, between ``acting`` nodes: the lines of the Sends nobody
    received (dropped), and, at the line of the first Receive of a Send, how many more copies of it were
    received (duplicated). A key recurs (correlation ids restart with each incarnation), so Sends and
    Receives of a key pair up first in, first out; a copy still on its way to a node that restarts is
    lost with the old incarnation's connections."""
    pending: dict[str, list[int]] = {}  # key -> lines of its Sends not received yet, oldest first
    towards: dict[int, set[str]] = {}  # receiver -> keys of copies pending to it
    last_received: dict[str, int] = {}  # key -> line of the Send its latest Receive was
    first_receive: dict[int, int] = {}  # Send line -> line of its first Receive
    more: dict[int, int] = {}  # Send line -> Receives after the first
    sends: list[int] = []
    for number, obj in objs:
        msg = obj.get("msg")
        if obj["event"] == "Restart":
            for key in towards.pop(obj["node"], set()):
                pending.pop(key, None)
            continue
        if obj["event"] not in ("Send", "Receive") or msg is None or msg["api"] not in MODELLED_APIS:
            continue
        if msg["from"] not in acting or msg["to"] not in acting:
            continue
        key = message_key(msg)
        if obj["event"] == "Send":
            sends.append(number)
            pending.setdefault(key, []).append(number)
            towards.setdefault(msg["to"], set()).add(key)
        elif pending.get(key):
            send = pending[key].pop(0)
            first_receive[send] = number
            last_received[key] = send
        elif key in last_received:
            more[last_received[key]] = more.get(last_received[key], 0) + 1
    dropped = {line for line in sends if line not in first_receive}
    return dropped, {first_receive[send]: n for send, n in more.items()}


#: Harness trace header: the target was running before the harness listened (``--target host:port``),
#: so it may have held elections nobody heard (TraceKRaft.tla IsolatedCandidate).
STARTED_BEFORE_HARNESS = "targetStartedBeforeHarness"


def _blackbox_start(
    objs: list[tuple[int, dict[str, Any]]], target: int, before_harness: bool = False
) -> tuple[str, int, frozenset[int]]:
    """Why a harness trace does not start from a fresh formatted target ("" when it does); for a trace
    without the header ``targetStartedBeforeHarness`` whose target's first request is a Vote from an empty
    log in an epoch nobody named, that epoch (elections nobody heard, TraceKRaft ``IsolatedCandidate``)
    and that Vote's epoch (``PreludeVoteEpochs``); with the header, ``_prelude`` bounds them instead.

    Black-box validation starts the target in KRaft's initial state (epoch 0, empty log, no vote) or, for
    a target that ran before the harness listened, as the Candidate of elections nobody heard.  A harness
    that drives one target through many cases leaves it in later cases with the state earlier ones made;
    the trace cannot show that state, so it is not guessed: such a trace is NOT CHECKED.  The tells: the
    target's first request states a log end beyond the records the harness gave it; for a target that ran
    before the harness listened, its first answer names a leader of an epoch the harness never named
    (elections nobody heard make no leader known: it ran with someone before); for a target the harness
    started itself, which is fresh when the session begins, such an answer is a wrong one and fails, and a
    first request in an epoch beyond every epoch the harness named and the few elections it could hold
    unobserved is a later case's trace.
    """
    records_given = 0
    epochs_seen = 0
    for _, obj in objs:
        msg = obj.get("msg")
        if obj["event"] not in ("Send", "Receive") or msg is None or msg["api"] not in MODELLED_APIS:
            continue
        body = msg.get("body") or {}
        if msg["to"] == target:
            if msg["kind"] == "request":
                part = _partition(body)
                epochs_seen = max(epochs_seen, part.get("LeaderEpoch", 0), part.get("CandidateEpoch", 0))
            else:
                part = _partition(body, "Responses") if msg["api"] == "Fetch" else _partition(body)
                epochs_seen = max(epochs_seen, (part.get("CurrentLeader") or {}).get("LeaderEpoch", 0))
                epochs_seen = max(epochs_seen, part.get("LeaderEpoch", 0))
                records_given += len(_records(part)) if msg["api"] == "Fetch" else 0
            continue
        if msg["from"] != target:
            continue
        if msg["kind"] == "response":
            if body.get("ErrorCode", 0) != 0:
                continue
            part = _partition(body, "Responses") if msg["api"] == "Fetch" else _partition(body)
            leader = (part.get("CurrentLeader") or {}) if msg["api"] == "Fetch" else part
            ldr, epoch = leader.get("LeaderId", -1), leader.get("LeaderEpoch", 0)
            if before_harness and isinstance(ldr, int) and ldr >= 0 and ldr != target and epoch > epochs_seen:
                return (
                    f"the target's first {msg['api']} answer names leader {ldr} of epoch {epoch}, which the "
                    "harness never announced: the trace does not start from a fresh node, whose state is unknown"
                ), 0, frozenset()
            continue
        part = _partition(body)
        if msg["api"] == "Fetch" and part:
            end, epoch = part["FetchOffset"], part["CurrentLeaderEpoch"]
        elif msg["api"] == "Vote" and part:
            end, epoch = part["LastOffset"], part["CandidateEpoch"]
        else:
            continue
        if end > records_given:
            return (
                f"the target's first {msg['api']} request states log end {end}, but the harness gave it only "
                f"{records_given} records: the trace does not start from a fresh node, whose state is unknown"
            ), 0, frozenset()
        if epoch > epochs_seen + BLACKBOX_HIDDEN_STEPS and not before_harness:
            if msg["api"] == "Vote" and end == 0:
                # a fresh node started before the harness listened: elections nobody heard
                return "", epoch, frozenset({epoch})
            return f"the target's first {msg['api']} request is in epoch {epoch}: not a fresh node", 0, frozenset()
        return "", 0, frozenset()
    return "", 0, frozenset()


def _prelude(events: Sequence[TraceEvent]) -> tuple[int, frozenset[int]]:
    """For a target started before the harness listened: the largest epoch it may start in as the
    Candidate of elections nobody heard (TraceKRaft ``IsolatedCandidate``), and the epochs of the Vote
    requests of such elections the harness may receive (``PreludeVoteEpochs``).

    Every message of the target in a KRaft behaviour carries the target's epoch when it sent it, which is
    at least the one it started in, except the Vote requests of its elections before the trace (epochs up
    to that one, from its empty log).  So the largest epoch of the target's rows bounds the start (a trace
    of only such Vote requests is explained as well by a start at the largest of them).  TLC drops every
    start a row refutes; the bound is not the smallest epoch of the target's other rows, though that
    bounds the start too, so that a trace no start explains fails at the first row that refutes the last
    start left, as it does for a target started by the harness.  The Vote epochs: those of the target's
    empty-log Vote requests (IsolatedCandidate(e) holds the ones up to e in flight).
    """
    received = [ev.msg for ev in events if ev.event == "EnvironmentReceive" and isinstance(ev.msg.get("epoch"), int)]
    votes = {m["epoch"] for m in received if m["type"] == "VoteRequest" and m.get("lastOffset") == 0}
    # not EPOCH_MAX: a target reaches it only by adopting a request's epoch (no election goes past it), and
    # 1..EPOCH_MAX starts would be far too many to try
    bound = max((m["epoch"] for m in received if m["epoch"] < EPOCH_MAX), default=0)
    return max(bound, 0), frozenset(e for e in votes if e >= 1)


def _blackbox_events(
    objs: list[tuple[int, dict[str, Any]]],
    target: int,
    environment: frozenset[int],
    cluster: str,
    restarts: Sequence[int] = (),
) -> list[TraceEvent]:
    """The rows of a black-box harness trace: each message of the harness (``environment``) to the target
    enters the network as recorded (``EnvironmentSend``); each message of the target to the harness is
    taken out of it (``EnvironmentReceive``), which in black-box mode it must be in flight for.

    A harness request the model has no record of or the target refused (``unmodelled_request``,
    ``refusal``) never enters the network: the target's answer to it is a ``RefuseRequest`` row.

    Not rows: messages the model has no record for (an error for the whole request, and the target's
    answer to it), and exact resends of a request the target sent before and the harness has not
    answered yet (a timer in the node: the model's first copy stands for them).

    ``restarts`` (header ``targetRestarts``): the seqs before which the harness killed the target and
    started it on the same directory; each is a ``TargetRestart`` row (KRaft's Restart).  A Fetch answer
    of the target names its records, and a Fetch request of it its log end: how many records the leader
    it was must hold (TraceKRaft MissingRecords; HiddenAppend appends them, outside the hidden-step count).
    """
    events: list[TraceEvent] = []
    pending_restarts = sorted(restarts)

    def restart_rows(before_seq: int | None, number: int) -> None:
        while pending_restarts and (before_seq is None or pending_restarts[0] <= before_seq):
            seq = pending_restarts.pop(0)
            events.append(TraceEvent(number, seq, target, "TargetRestart", dict(NO_STATE)))
            sent_before.clear()

    requests: dict[str, dict[str, Any]] = {}  # request key -> the request (a Fetch response's echo)
    unanswered: dict[str, tuple[int, str]] = {}  # target request key -> (destination, model content)
    # (destination, model content) of each Vote / EndQuorumEpoch request of the current incarnation: KRaft
    # sends each once per epoch and resends it until answered (DuplicateMessage); a resend the request
    # timeout fired while the harness's answer was still on its way reaches the harness after that answer,
    # and is no new request either
    sent_before: set[tuple[int, str]] = set()
    outside: set[str] = set()  # harness requests the model has no record for: the target's answer is none
    # harness requests the target refused, or the model has no record of: never in the network; the
    # target's answer is a RefuseRequest row (request key -> that row's msg)
    refused_lines = _refused_requests(objs, {target}, "Send")
    refused: dict[str, dict[str, Any]] = {}
    for number, obj in objs:
        restart_rows(obj["seq"], number)
        msg = obj.get("msg")
        if obj["event"] not in ("Send", "Receive") or msg is None or msg["api"] not in MODELLED_APIS:
            continue
        key = message_key(msg)
        if msg["kind"] == "request":
            requests[key] = msg
        request = requests.get(_request_key(msg)) if msg["kind"] == "response" else None
        if msg["to"] == target and msg["from"] in environment and number in refused_lines:
            refused[key] = refused_row(msg)
            continue
        if msg["from"] == target and msg["kind"] == "response" and _request_key(msg) in refused:
            row = refused.pop(_request_key(msg))
            events.append(TraceEvent(number, obj["seq"], target, REFUSE_REQUEST, dict(NO_STATE), msg=row))
            continue
        if msg["to"] == target and msg["from"] in environment:
            if msg["kind"] == "response":
                unanswered.pop(_request_key(msg), None)
            whole = environment_message(msg, cluster, request)
            if whole is None:
                if msg["kind"] == "request":
                    outside.add(key)
                continue
            if (whole["type"] == "BeginQuorumEpochResponse" and request is not None
                    and whole["epoch"] <= (_partition(request.get("body") or {}) or {}).get("LeaderEpoch", -1)):
                # An answer to the target's BeginQuorumEpoch that names no newer epoch: KRaft.tla's
                # HandleBeginQuorumEpochResponse discards it whenever it is taken, so it stays out of the
                # network, as if taken at once. Left in, the answers to the leader's heartbeat (Kafka 3.9+:
                # a round every fetch.timeout/2) pile up, and TLC tries taking any number of them at every
                # hidden step: 20 rounds took 58 s instead of 2 s.
                continue
            if (whole["type"] == "FetchResponse" and whole["error"] != "NONE" and whole["leaderId"] == -1
                    and request is not None
                    and whole["epoch"] <= (_partition(request.get("body") or {}) or {}).get("CurrentLeaderEpoch", -1)):
                # The same for a refused Fetch that names no leader, in the epoch the target fetched in or an
                # older one: HandleFetchResponse only discards it (the target's epoch never goes back, so it
                # learns no epoch and no leader from it). An observer that looks for the leader while the
                # voters elect none (KIP-853: a removed leader) gets one every few milliseconds: left in,
                # they piled up and a 700-row session trace did not finish in 10 minutes.
                continue
            events.append(TraceEvent(number, obj["seq"], target, "EnvironmentSend", dict(NO_STATE), msg=whole))
        elif msg["from"] == target and msg["to"] in environment:
            body = msg.get("body") or {}
            if msg["kind"] == "response" and (body.get("ErrorCode", 0) != 0 or _request_key(msg) in outside):
                continue
            if voter_key_refusal(msg) and request is not None:
                # the target handled the harness's Vote as one for another voter key (hidden until now)
                events.append(TraceEvent(number, obj["seq"], target, REFUSE_VOTER_KEY, dict(NO_STATE),
                                         msg=model_message(request)))
                continue
            model = model_message(msg, request)
            if msg["kind"] == "request":
                content = json.dumps(model, sort_keys=True)
                if (msg["to"], content) in unanswered.values():
                    continue  # an exact resend
                if msg["api"] in RESENT_APIS and (msg["to"], content) in sent_before:
                    continue  # an exact resend after its answer
                unanswered[key] = (msg["to"], content)
                if msg["api"] in RESENT_APIS:
                    sent_before.add((msg["to"], content))
            elif msg["api"] == "Fetch" and model.get("error") == "NONE":
                model["records"] = _records(_partition(body, "Responses"))
            events.append(TraceEvent(number, obj["seq"], msg["to"], "EnvironmentReceive", dict(NO_STATE), msg=model))
    restart_rows(None, len(objs) + 1)
    return events


#: Black-box: the target's requests KRaft resends on a timer until answered.  Not a Fetch (sent anew after each
#: answer) nor a BeginQuorumEpoch (Kafka 3.9+ sends it again every fetch.timeout/2 as the leader's heartbeat,
#: a row the model checks: only a leader of that epoch, or one that just resigned it, sends it).
RESENT_APIS = frozenset({"Vote", "EndQuorumEpoch"})

_CHANGE_KINDS = {"AddRaftVoter": "Add", "RemoveRaftVoter": "Remove", "UpdateRaftVoter": "Update"}
#: Black-box: how many rows after its answer a voter change stays available to hidden steps (``_voter_changes``).
CHANGE_SLACK_ROWS = 8
#: The answers of a voter change that may follow a VotersRecord written: NONE (committed), NOT_LEADER_OR_FOLLOWER
#: (leadership lost after the append), REQUEST_TIMED_OUT (the change timed out after the append, or was refused
#: while another was pending: the trace cannot tell).
_CHANGE_MAY_HAVE_APPENDED = frozenset({0, 6, 7})


#: Black-box: the target's requests whose content shows where it stood when it sent them (``_standing``).
_STANDING_REQUESTS = {"VoteRequest": 1, "FetchRequest": 3, "BeginQuorumEpochRequest": 3, "EndQuorumEpochRequest": 3,
                      "FetchSnapshotRequest": 3}  # fmt: skip


def _standing(ev: TraceEvent, target: int) -> tuple[int, int] | None:
    """Black-box: where the target stood when it sent the message of row ``ev``: its epoch, then 1 (campaigning:
    a Vote request), 2 (an answer naming no leader: campaigning, or a voter of that epoch that never campaigns
    in it, so never before its own Vote requests of the epoch) or 3 (leading or following: a leader's or a
    follower's message, or an answer naming a leader).  Within one incarnation it never goes back (KIP-595:
    epochs only grow, a candidate sends its Vote requests as it starts the epoch's election, and a candidate
    that learns its epoch's leader follows it, never the other way round).  None for rows that are not the
    target's, a pre-vote (its epoch is the next one), or a message without an epoch."""
    msg = ev.msg
    epoch = msg.get("epoch")
    if ev.event != "EnvironmentReceive" or msg.get("from") != target or not isinstance(epoch, int) or epoch < 0:
        return None
    if msg.get("preVote"):
        return None
    kind = msg.get("type", "")
    if kind in _STANDING_REQUESTS:
        return epoch, _STANDING_REQUESTS[kind]
    return epoch, 3 if msg.get("leaderId", -1) >= 0 else 2


def _read_in_send_order(events: list[TraceEvent], target: int) -> list[TraceEvent]:
    """Black-box: the target's requests in the order it sent them, as far as their content tells.

    The harness records what it reads, and under load it reads its connections in backlogs, one after another:
    a Fetch the target sent in epoch 30 on its connection to voter 2 can be read after its answer to a
    BeginQuorumEpoch of epoch 31 on another connection, a Vote of epoch 31 after that answer although the
    target followed leader 2 in epoch 31 only later.  TCP keeps each connection's order, nothing orders two
    connections; the model's hidden steps come just before the row that observes them, so a request is moved
    up to just before the first earlier row of the target that stands later (``_standing``), never past a
    request on its own connection nor past a restart.  Everything it depended on the harness had sent before
    the target sent it, so before that row too."""
    out: list[TraceEvent] = []
    start = 0  # the first row of the current incarnation in out
    for ev in events:
        if ev.event == "TargetRestart":
            out.append(ev)
            start = len(out)
            continue
        here = _standing(ev, target) if ev.msg.get("type") in _STANDING_REQUESTS else None
        at = None
        if here is not None:
            at = next((k for k in range(start, len(out)) if (_standing(out[k], target) or here) > here), None)
        if at is None:
            out.append(ev)
            continue
        # not before a request of its own connection (the target to the same voter)
        for k in range(at, len(out)):
            if (out[k].event == "EnvironmentReceive" and out[k].msg.get("from") == target
                    and out[k].msg.get("to") == ev.msg.get("to") and out[k].msg.get("type", "").endswith("Request")):
                at = k + 1
        out.insert(at, ev)
    return out


def _voter_changes(
    objs: list[tuple[int, dict[str, Any]]], target: int, events: Sequence[TraceEvent]
) -> tuple[PendingVoterChange, ...]:
    """Black-box (KIP-853): the voter changes asked of ``target`` (``PendingVoterChange``) with the rows between which
    it may have handled each: after the request was sent, before its answer came back.  Which of them it
    accepted the trace shows only through its log (VotersRecords in its Fetch answers) and its quorum."""
    lines = [ev.line for ev in events]
    # request key -> [(kind, voter, first row)] of the requests pending under it, and how many of them are
    # answered: an admin client's connections each count correlation ids from 0, so two requests on two
    # connections may share a key, and the trace does not say which of them an answer is for; each stays
    # pending until the last answer of its key (a wider window only lets TLC try more)
    pending: dict[str, tuple[list[tuple[str, int, int]], int]] = {}
    done: list[tuple[str, int, int, int, bool]] = []  # (kind, voter, first row, line of the answer, NONE)
    out: list[PendingVoterChange] = []

    def row_after(line: int) -> int:
        return sum(1 for n in lines if n <= line) + 1

    for number, obj in objs:
        msg = obj.get("msg")
        if msg is None or msg["api"] not in RECONFIG_APIS:
            continue
        if msg["kind"] == "request" and msg["to"] == target:
            voter = (msg.get("body") or {}).get("VoterId")
            if isinstance(voter, int):
                asked, answered = pending.get(message_key(msg), ([], 0))
                pending[message_key(msg)] = ([*asked, (_CHANGE_KINDS[msg["api"]], voter, row_after(number))],
                                             answered)
        elif msg["kind"] == "response" and msg["from"] == target and _request_key(msg) in pending:
            asked, answered = pending.pop(_request_key(msg))
            if answered + 1 < len(asked):
                pending[_request_key(msg)] = (asked, answered + 1)
            elif len(asked) > 1 or (msg.get("body") or {}).get("ErrorCode", 0) in _CHANGE_MAY_HAVE_APPENDED:
                done += [(kind, voter, first, number, len(asked) == 1 and not (msg.get("body") or {}).get("ErrorCode"))
                         for kind, voter, first in asked]
            # else refused at once (DUPLICATE_VOTER, VOTER_NOT_FOUND, INVALID_REQUEST, a fenced epoch, ...):
            # Kafka's handlers answer those before they write anything
    # Hidden steps are taken lazily, just before the row that observes them (a Fetch answer holding the new
    # VotersRecord), which may come a few rows after the change was answered: a change answered NONE (its
    # record certainly written) stays available for CHANGE_SLACK_ROWS rows after its answer, never past the next
    # change asked for. (Every change until the next one asked for: a 550-row session trace took minutes instead
    # of 16 s, the target trying the changes it had refused with REQUEST_TIMED_OUT at every hidden step.)
    asks = sorted(n for n, obj in objs if (obj.get("msg") or {}).get("api") in RECONFIG_APIS
                  and obj["msg"]["kind"] == "request" and obj["msg"]["to"] == target)
    for kind, voter, first, answer, accepted in done:
        later = [n for n in asks if n > answer]
        bound = row_after(later[0]) if later else len(events) + 1
        slack = CHANGE_SLACK_ROWS if accepted else 0
        out.append(PendingVoterChange(kind, voter, first, min(row_after(answer) + slack, bound)))
    out += [PendingVoterChange(kind, voter, first, len(events) + 1)
            for asked, _ in pending.values() for kind, voter, first in asked]
    return tuple(sorted(set(out), key=lambda c: (c.first, c.last, c.kind, c.voter)))


def _unpark(parked: dict[str, list[dict[str, Any]]], key: str) -> dict[str, Any]:
    copies = parked[key]
    request = copies.pop()
    if not copies:
        del parked[key]
    return request



def _resends(objs: list[tuple[int, dict[str, Any]]], acting: set[int]) -> dict[int, int]:
    """Line of an earlier send -> how many resends of the same request follow it."""
    last_action: dict[int, str] = {}
    sent_since: dict[int, set[tuple[str, int]]] = {}
    last_send: dict[str, int] = {}  # the request's model record -> line of its latest send
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
        # the same request as far as the model can tell (a resend may carry the cluster id the first
        # send did not have yet: the bootstrap record committed in between)
        content = json.dumps(model_message(msg), sort_keys=True)
        dest = (msg["api"], msg["to"])
        fresh = last_action.get(node) in SENT_BY[msg["api"]] and dest not in sent_since.setdefault(node, set())
        sent_since[node].add(dest)
        if not fresh and content in last_send:
            copies[last_send[content]] = copies.get(last_send[content], 0) + 1
        else:
            last_send[content] = number
            if not fresh and msg["api"] == "BeginQuorumEpoch":
                # the leader's heartbeat to a voter its BecomeLeader did not send to (KIP-853: added since):
                # a DuplicateMessage row here, which TraceKRaft takes as KRaft's SendBeginQuorumEpoch
                copies[number] = copies.get(number, 0) + 1
    return copies
