"""NDJSON trace (spec/trace.schema.json) → the TLA+ module TraceData, and its validation.

TLC 2.15 has no Json module, so the trace reaches TLC as a module of constant
definitions that tla/TraceKRaft.tla extends.  Only action events take part: a
``Send``/``Receive`` event has no protocol step of its own (the handler's event
carries the state change), and ``HandleDescribeQuorumRequest``/``BrokerEvent``
change no KRaft state.
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
    events: list[TraceEvent] = []
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
        if obj["event"] in SKIPPED_EVENTS:
            continue
        events.append(TraceEvent(number, obj["seq"], obj["node"], obj["event"], dict(obj["state"])))
    if header is None:
        raise TraceFormatError(f"{path}: empty trace, no header")
    for ev in events:
        if ev.node not in header["voters"] and ev.node not in header.get("observers", []):
            raise TraceFormatError(f"{path}:{ev.line}: node {ev.node} is neither a voter nor an observer")
    return Trace(path, header, events, len(lines))


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
        rows.append(f"  [seq |-> {ev.seq}, node |-> {ev.node}, event |-> {_tla_string(ev.event)}, state |-> [{state}]]")
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
