"""The one NDJSON trace format (spec/trace.schema.json): write, read, validate.

Every producer (reference node, harness, simulator) writes through `TraceWriter`; every consumer (TLA+
trace validation, the Spark pipeline, tests) reads through `read_trace`. A trace is a header line, then
events with `seq` 0, 1, 2, ... without gaps.
"""

from __future__ import annotations

import copy
import json
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import IO, Any, cast

import fastjsonschema
import orjson
from jsonschema import Draft202012Validator

FORMAT_VERSION = 1
DRAFT7 = "http://json-schema.org/draft-07/schema#"

#: Action names of the vocabulary (spec/README.md), in the order the README lists them.
ACTIONS: tuple[str, ...] = (
    "StartElection",
    "HandleVoteRequest",
    "HandleVoteResponse",
    "BecomeLeader",
    "HandleBeginQuorumEpochRequest",
    "HandleBeginQuorumEpochResponse",
    "SendFetchRequest",
    "HandleFetchRequest",
    "HandleFetchResponse",
    "ClientAppend",
    "LeaderProgressTimeout",
    "Resign",
    "HandleEndQuorumEpochRequest",
    "HandleEndQuorumEpochResponse",
    "HandleDescribeQuorumRequest",
    "Restart",
    "BecomeProspective",
    "AbandonProspective",
    # KIP-630 snapshots
    "CreateSnapshot",
    "CleanLog",
    "SendFetchSnapshotRequest",
    "HandleFetchSnapshotRequest",
    "HandleFetchSnapshotResponse",
    # KIP-853 dynamic quorum (voter changes)
    "HandleAddRaftVoterRequest",
    "HandleApiVersionsResponse",
    "HandleRemoveRaftVoterRequest",
    "HandleUpdateRaftVoterRequest",
    "SendUpdateRaftVoterRequest",
    "HandleUpdateRaftVoterResponse",
    "VoterChangeTimeout",
)
MESSAGE_EVENTS: tuple[str, ...] = ("Send", "Receive")
#: Events of the broker layer above the quorum (KIP-631 registry changes a node applies from its log).
BROKER_EVENTS: tuple[str, ...] = ("BrokerEvent",)

#: The ``cause`` of a StartElection (spec/README.md "Actions"): which timer or message started it (and of a Resign).
CAUSES: tuple[str, ...] = (
    "ElectionTimeout", "FetchTimeout", "ElectionBackoff", "EndQuorumEpoch",
    # KIP-996 (pre-vote): a Prospective became Candidate on a majority of pre-vote grants, or at once because
    # a voter cannot take Vote v2; a pre-vote refused by a majority ends it (AbandonProspective).
    "PreVoteGranted", "UnsupportedVersion", "PreVoteRejected",
    # KIP-853: the cause of a Resign of a leader whose own removal has committed (Kafka's requestResign)
    "RemovedFromVoters",
    # the only voter of its set starts an election at once when it starts (Kafka's KafkaRaftClient.initialize)
    "OnlyVoter",
)

#: Steps of tla/KRaft.tla's Next that are no node action of the vocabulary, and why no trace line names them.
MODEL_STEPS: dict[str, str] = {
    "AnswerParkedFetch": "the leader answers a parked long poll inside another step (new data, a new HW, "
                         "MaxWaitMs, lost leadership); trace validation inserts it (core: _answer_parked_fetch)",
    "SendBeginQuorumEpoch": "the leader's BeginQuorumEpoch heartbeat (Kafka 3.9+), a timer's send inside a step "
                            "with no action of its own; a node trace shows it as a Send only "
                            "(core: _send_begin_quorum_epoch)",
    "DropMessage": "environment: the network loses a message",
    "DuplicateMessage": "environment: the network delivers a message again (and a sender resends one)",
    "ForeignClusterCopy": "environment: a node of another cluster sends the same request with its cluster id",
}
#: Actions of the vocabulary that change no state, so tla/KRaft.tla's Next leaves them out.
#: (KIP-853: UpdateRaftVoter's follower side only carries endpoints, which the model leaves out, over a request
#: outside its network; the leader's HandleUpdateRaftVoterRequest is a step of Next.)
READ_ONLY_ACTIONS: tuple[str, ...] = (
    "HandleDescribeQuorumRequest", "SendUpdateRaftVoterRequest", "HandleUpdateRaftVoterResponse",
)


class TraceError(ValueError):
    """A trace that cannot be read at all (not a trace, newer format, no header)."""


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    text = resources.files("kraft_tck.spec").joinpath("trace.schema.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    return Draft202012Validator(schema())


@lru_cache(maxsize=1)
def _accepts() -> Callable[[Any], Any]:
    """The trace schema compiled by fastjsonschema: it clears a valid line in ~20 µs where jsonschema takes
    ~400 µs. It speaks draft-07, and the schema uses only keywords whose meaning draft-07 and 2020-12 share
    (``$ref`` into ``$defs`` is a plain JSON pointer), so it is a fast yes only: a line it refuses goes to
    jsonschema, the authority, which decides and words the problems (tests/traces/test_trace_format.py
    checks that it never accepts a line jsonschema refuses)."""
    # A deep copy: fastjsonschema rewrites every $ref of the document it is given into an absolute URI,
    # and schema() is shared (the pipeline derives its Spark schema from it).
    return cast(Callable[[Any], Any], fastjsonschema.compile(copy.deepcopy(schema()) | {"$schema": DRAFT7}))


def line_errors(obj: Any) -> list[str]:
    """Schema problems of one decoded trace line, as readable strings (empty when valid)."""
    try:
        _accepts()(obj)
        return []
    except fastjsonschema.JsonSchemaException:
        pass
    problems = []
    for err in sorted(_validator().iter_errors(obj), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "<line>"
        problems.append(f"{where}: {err.message}")
    return problems


def to_jsonable(value: Any) -> Any:
    """Decoded message bodies → JSON: uuids as strings, raw record bytes as batch summaries."""
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return summarize_records(bytes(value))
    return value


def summarize_records(data: bytes) -> dict[str, Any]:
    """Record bytes in a trace are summarised (offsets, epoch, digest), never stored whole."""
    from kraft_tck.spec.errors import DecodeError
    from kraft_tck.spec.records import decode_batches

    try:
        batches = decode_batches(data)
    except DecodeError as exc:
        return {"bytes": len(data), "undecodable": str(exc)}
    return {"bytes": len(data), "batches": [batch_summary(b) for b in batches]}


def batch_summary(batch: Any) -> dict[str, Any]:
    from kraft_tck.spec.records import batch_digest

    out = {
        "baseOffset": batch.base_offset,
        "lastOffset": batch.last_offset,
        "epoch": batch.partition_leader_epoch,
        "control": batch.is_control,
        "digest": batch_digest(batch),
    }
    if _holds_voters(batch):
        out.update(_control_summary(batch))
    return out


def _holds_voters(batch: Any) -> bool:
    """A control batch with a KIP-853 record (KRaftVersionRecord/VotersRecord: control types 5, 6)."""
    return bool(batch.is_control) and any(
        r.key is not None and len(r.key) == 4 and int.from_bytes(r.key[2:4], "big") in (5, 6) for r in batch.records
    )


def _control_summary(batch: Any) -> dict[str, Any]:
    """KIP-853: the control types of a control batch's records, in order ("controlTypes"), and the voter ids of
    its last VotersRecord ("voters"), so that trace validation knows which voter set a VotersRecord in a Fetch
    answer carries (tla/trace_translate.py ``_records``)."""
    from kraft_tck.spec.errors import DecodeError
    from kraft_tck.spec.records import ControlType, decode_control

    types: list[str] = []
    voters: list[int] | None = None
    for record in batch.records:
        try:
            ctype, body = decode_control(record)
        except DecodeError:
            return {}
        types.append(ctype.name)
        if ctype is ControlType.KRAFT_VOTERS:
            voters = sorted(int(v["VoterId"]) for v in body.get("Voters") or [])
    return {"controlTypes": types, **({"voters": voters} if voters is not None else {})}


class Encoded:
    """A value already encoded by ``encode_line``, to be put in several lines without being built and
    encoded again (the simulator's Send and Receive events of one message carry the same ``msg``)."""

    __slots__ = ("data",)

    def __init__(self, value: Any) -> None:
        self.data = encode_line(value)


def _json_default(value: Any) -> Any:
    """What ``to_jsonable`` does for the types JSON encoders do not know (bytes, non-dict mappings)."""
    if isinstance(value, Encoded):
        return json.loads(value.data)  # encode_line's output, so json writes the same bytes again
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, bytes | bytearray | memoryview):
        return summarize_records(bytes(value))
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"a trace line holds a {type(value).__name__}, which has no JSON form: {value!r}")


def _orjson_default(value: Any) -> Any:
    if type(value) is Encoded:
        return orjson.Fragment(value.data)  # orjson copies these bytes into the line as they are
    return _json_default(value)


# orjson writes what json.dumps(separators=(",", ":")) writes except for: non-ASCII text and DEL (json's
# ensure_ascii escapes them), non-finite floats (json: NaN/Infinity, orjson: null) and floats below 1e-4
# (json: 1.5e-05, orjson: 0.000015 or 1e-7). Lines that may hold any of these are encoded by json.
_ORJSON_OPTS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
_SMALL_FLOAT = re.compile(rb"[:,\[]-?(?:0\.0000|[0-9]+(?:\.[0-9]+)?e-)")


def encode_line(obj: Any) -> bytes:
    """One trace line, without its newline: byte for byte ``json.dumps(obj, separators=(",", ":"))`` (ASCII
    only), with bytes summarised and uuids as strings like ``to_jsonable``; orjson does the common case."""
    try:
        out = orjson.dumps(obj, default=_orjson_default, option=_ORJSON_OPTS)
    except TypeError:  # orjson.JSONEncodeError: ints beyond 64 bits, non-str keys, ...: json knows them
        return _json_line(obj)
    # find, not `in`: bytes.__contains__ first tries its argument as an int and raises and clears a
    # TypeError. Every float orjson writes below 1e-4 holds "e-" or "0.0000", so a "." (a memchr) stands
    # in for the longer, slower search.
    find = out.find
    if (
        not out.isascii()
        or find(b"\x7f") >= 0
        or find(b"null") >= 0
        or ((find(b".") >= 0 or find(b"e-") >= 0) and _SMALL_FLOAT.search(out) is not None)
    ):
        return _json_line(obj)
    return out


def _json_line(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), default=_json_default).encode("ascii")


class TraceWriter:
    """Appends events to one NDJSON trace, numbering them; optionally validates each line.

    Validation costs ~tens of microseconds per line, so hot producers (the simulator) turn it off and
    validate the finished file instead (`validate_file`). ``fsync``: make the file durable on close; a
    producer that can write the same trace again (the simulator, from its seed) skips that wait.
    """

    def __init__(
        self, path: str | os.PathLike[str], header: Mapping[str, Any], *, validate: bool = True, fsync: bool = True
    ):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._validate = validate
        self._fsync = fsync
        self._seq = 0
        head = {"type": "header", "format": FORMAT_VERSION, **header}
        if validate and (problems := line_errors(head)):
            raise TraceError(f"{self.path}: refusing to write an invalid trace header: {'; '.join(problems)}")
        # The file appears under its name only with its header in it: a process killed while starting
        # (validation above can take a while on a loaded machine) leaves no trace, or a `.part` file no
        # reader globs, never a headerless trace. The open handle follows the rename.
        part = self.path.with_name(self.path.name + ".part")
        # A larger buffer than io's 8 KiB: fewer write calls; the node flushes after each step regardless.
        self._fh: IO[bytes] | None = open(part, "wb", buffering=1 << 16)  # noqa: SIM115 - closed in close()
        self._fh.write(encode_line(head) + b"\n")
        self._fh.flush()
        os.replace(part, self.path)

    def _write(self, obj: Mapping[str, Any]) -> None:
        if self._validate:
            problems = line_errors(obj)
            if problems:
                raise TraceError(f"{self.path}: refusing to write an invalid trace line: {'; '.join(problems)}")
        assert self._fh is not None, "trace writer used after close()"
        self._fh.write(encode_line(obj) + b"\n")

    def emit(self, event: Mapping[str, Any]) -> int:
        """Write one event (without `type`/`seq`); returns its sequence number."""
        if not self._validate and event and "type" not in event and "seq" not in event:
            # The line {"type":"event","seq":N,...event} without building that dict (emit_encoded).
            return self.emit_encoded(encode_line(event))
        seq = self._seq
        self._write({"type": "event", "seq": seq, **event})
        self._seq += 1
        return seq

    def emit_encoded(self, event: bytes) -> int:
        """Write one event given as ``encode_line`` writes it (a JSON object, without `type`/`seq`): for
        producers that assemble lines from parts they encoded once (the simulator's message events)."""
        if not event.startswith(b"{") or event == b"{}":
            raise TraceError(f"{self.path}: an encoded event must be a non-empty JSON object, got {event[:40]!r}")
        if self._validate:
            return self.emit(json.loads(event))
        seq = self._seq
        assert self._fh is not None, "trace writer used after close()"
        # the event's own encoding, with the two leading keys spliced in after its opening brace
        self._fh.write(b'{"type":"event","seq":%d,%b\n' % (seq, event[1:]))
        self._seq += 1
        return seq

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next event gets."""
        return self._seq

    def emit_lines(self, lines: bytes | bytearray, count: int) -> None:
        """Write ``count`` complete event lines, each ``{"type":"event","seq":N,...}`` and its newline,
        numbered from ``next_seq`` on: for a producer that numbers its events itself and assembles their
        lines from parts it encoded (the simulator, which hands over many lines per call). Unchecked,
        like ``emit`` without validation; such a producer's tests validate whole files."""
        assert self._fh is not None, "trace writer used after close()"
        self._fh.write(lines)
        self._seq += count

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            if self._fsync:
                os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class BadLine:
    """A line that failed to parse or validate: kept, counted, never silently dropped."""

    line: int
    reason: str
    text: str


@dataclass
class Trace:
    path: Path
    header: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    lines: int = 0

    @property
    def ok(self) -> bool:
        return not self.bad


def iter_lines(path: Path) -> Iterator[tuple[int, str]]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, text in enumerate(fh, start=1):
            yield n, text.rstrip("\n")


def read_trace(path: str | os.PathLike[str], *, validate: bool = True) -> Trace:
    """Read a trace; bad lines are collected in `Trace.bad` with line number and reason.

    Raises TraceError when the file is not a trace at all: empty, no header first, or a newer format.
    """
    p = Path(path)
    trace: Trace | None = None
    expected_seq = 0
    for n, text in iter_lines(p):
        if trace is None:
            trace = Trace(path=p, header=_parse_header(p, text))
            trace.lines = 1
            continue
        trace.lines = n
        if not text.strip():
            trace.bad.append(BadLine(n, "empty line", text))
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            trace.bad.append(BadLine(n, f"not JSON ({exc.msg} at column {exc.colno}); a truncated line?", text))
            continue
        problems = line_errors(obj) if validate else []
        if not problems and obj.get("type") != "event":
            problems = ["a second header line"]
        if not problems and obj.get("seq") != expected_seq:
            problems = [f"seq {obj.get('seq')} where {expected_seq} was expected"]
        if problems:
            trace.bad.append(BadLine(n, "; ".join(problems), text))
            continue
        expected_seq += 1
        trace.events.append(obj)
    if trace is None:
        raise TraceError(f"{p}: empty file, not a trace")
    return trace


def _parse_header(path: Path, text: str) -> dict[str, Any]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}: line 1 is not JSON ({exc.msg}); not a kraft-tck trace") from exc
    if not isinstance(obj, dict) or obj.get("type") != "header":
        raise TraceError(f"{path}: line 1 is not a trace header (expected {{\"type\": \"header\", ...}})")
    fmt = obj.get("format")
    if isinstance(fmt, int) and fmt > FORMAT_VERSION:
        raise TraceError(
            f"{path}: trace format {fmt} is newer than this kraft-tck reads ({FORMAT_VERSION}); upgrade kraft-tck"
        )
    problems = line_errors(obj)
    if problems:
        raise TraceError(f"{path}: invalid trace header: {'; '.join(problems)}")
    return obj


def validate_file(path: str | os.PathLike[str]) -> list[BadLine]:
    """All problems of a finished trace file (empty list when it is valid)."""
    return read_trace(path).bad
