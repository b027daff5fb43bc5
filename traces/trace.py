"""The one NDJSON trace format (spec/trace.schema.json): write, read, validate.

Every producer (reference node, harness, simulator) writes through `TraceWriter`; every consumer (TLA+
trace validation, the Spark pipeline, tests) reads through `read_trace`. A trace is a header line, then
events with `seq` 0, 1, 2, ... without gaps.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import IO, Any

from jsonschema import Draft202012Validator

FORMAT_VERSION = 1

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
)
MESSAGE_EVENTS: tuple[str, ...] = ("Send", "Receive")


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


def line_errors(obj: Any) -> list[str]:
    """Schema problems of one decoded trace line, as readable strings (empty when valid)."""
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

    return {
        "baseOffset": batch.base_offset,
        "lastOffset": batch.last_offset,
        "epoch": batch.partition_leader_epoch,
        "control": batch.is_control,
        "digest": batch_digest(batch),
    }


class TraceWriter:
    """Appends events to one NDJSON trace, numbering them; optionally validates each line.

    Validation costs ~tens of microseconds per line, so hot producers (the simulator) turn it off and
    validate the finished file instead (`validate_file`).
    """

    def __init__(self, path: str | os.PathLike[str], header: Mapping[str, Any], *, validate: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._validate = validate
        self._seq = 0
        self._fh: IO[str] | None = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        head = {"type": "header", "format": FORMAT_VERSION, **header}
        self._write(head)
        self.flush()  # a process killed right after start still leaves a readable (header-only) trace

    def _write(self, obj: Mapping[str, Any]) -> None:
        if self._validate:
            problems = line_errors(obj)
            if problems:
                raise TraceError(f"{self.path}: refusing to write an invalid trace line: {'; '.join(problems)}")
        assert self._fh is not None, "trace writer used after close()"
        self._fh.write(json.dumps(obj, separators=(",", ":"), sort_keys=False) + "\n")

    def emit(self, event: Mapping[str, Any]) -> int:
        """Write one event (without `type`/`seq`); returns its sequence number."""
        seq = self._seq
        self._write({"type": "event", "seq": seq, **event})
        self._seq += 1
        return seq

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.flush()
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
