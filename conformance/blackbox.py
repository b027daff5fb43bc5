"""Harness traces and their black-box validation with TLC.

A harness trace (spec/trace.schema.json, ``source: harness``) holds only the messages between the
virtual voters and the target.  One is written per case (the case's evidence in the report), and one per
*life* of the target for the whole session (``session-life-N.ndjson``): every frame from the moment the
target started on a fresh directory, case after case and between cases, until the session ends or a
restart on a wiped directory starts the next life.  Its header lists the cases it spans (``cases``:
id, firstSeq, lastSeq), so a failed event maps back to the case it came in.

TLC checks a session trace in black-box mode (tla/trace_translate.py): the target starts in KRaft's
initial state (a ``--target host:port`` node, which ran before the harness listened, may also start as the
Candidate of elections nobody heard: header ``targetStartedBeforeHarness``) and its steps are hidden.
Only the first case's own trace starts from a fresh target, so the session traces are what covers every
later case.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraft_tck.conformance.virtual import Frame, LoggedFrame, SessionLog
from kraft_tck.spec.trace import TraceWriter, to_jsonable

if TYPE_CHECKING:
    from kraft_tck.tla.trace_validate import TraceVerdict


def harness_event(f: Frame, ts_ms: float, virtual: set[int], target_id: int) -> dict[str, Any] | None:
    """The trace event of one frame, recorded at the virtual voter's end (None: a harness note)."""
    if f.kind == "note" or f.api_key < 0:
        return None
    sender_is_virtual = f.src in virtual or (f.dst == target_id and f.src != target_id)
    node = f.src if sender_is_virtual and f.src >= 0 else f.dst
    return {
        "ts": round(ts_ms, 3), "node": node, "event": "Send" if sender_is_virtual else "Receive",
        "msg": {"api": f.api, "apiKey": f.api_key, "kind": f.kind, "version": f.version,
                "correlationId": f.correlation_id, "from": f.src, "to": f.dst, "body": to_jsonable(f.body)},
    }  # fmt: skip


def observers_of(events: Sequence[dict[str, Any]], voters: Sequence[int]) -> list[int]:
    """The observers among the fetchers (KIP-595: a replica that fetches without being a voter)."""
    return sorted({
        ev["msg"]["from"] for ev in events
        if ev["msg"]["api"] == "Fetch" and ev["msg"]["kind"] == "request" and ev["msg"]["from"] >= 0
        and ev["msg"]["from"] not in voters
    })  # fmt: skip


def write_harness_trace(path: Path, header: dict[str, Any], events: Sequence[dict[str, Any]]) -> Path:
    """A harness trace of ``events``; the header names the observers that fetched in it."""
    observers = observers_of(events, header["voters"])
    if observers:
        header = dict(header, observers=observers)
    with TraceWriter(path, header, validate=False) as tw:
        for ev in events:
            tw.emit(ev)
    return path


@dataclass
class SessionTrace:
    """One life's session harness trace: its file and the seq span of each case in it."""

    life: int
    path: Path
    events: int
    cases: list[dict[str, Any]]  # {"id", "firstSeq", "lastSeq"}, in order

    def case_of(self, seq: int) -> str:
        """The case a seq of this trace came in, or where between cases it fell."""
        before = None
        for c in self.cases:
            if c["firstSeq"] <= seq <= c["lastSeq"]:
                return str(c["id"])
            if c["lastSeq"] < seq:
                before = c["id"]
            elif c["firstSeq"] > seq:
                where = f"after case {before} " if before else ""
                return f"between cases ({where}before case {c['id']})"
        return f"after the last case ({before})" if before else "before any case"


def read_session_trace(path: Path) -> SessionTrace:
    """A session harness trace written by ``write_session_traces`` (its header's cases), e.g. to validate
    it again with ``validate_session_traces``."""
    lines = [raw for raw in path.read_text().splitlines() if raw.strip()]
    header = json.loads(lines[0])
    stem = path.stem.rpartition("-")[2]
    life = int(stem) if stem.isdigit() else 0
    return SessionTrace(life, path, len(lines) - 1, list(header.get("cases", [])))


def write_session_traces(
    log: SessionLog,
    out_dir: Path,
    header: dict[str, Any],
    virtual: set[int],
    target_id: int,
    lives: set[int] | None = None,
    cut_at: dict[int, int] | None = None,
) -> list[SessionTrace]:
    """One harness trace per life of the target (or per life in ``lives``), with the cases it spans and the
    kill -9 restarts of the target (``targetRestarts``: the seq of the first event after each) in its header.
    ``cut_at`` maps a life to the index in ``log.entries`` where traffic the black-box model has no steps for
    begins: that life's trace ends just before it (a life with nothing before its cut gets no trace)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[SessionTrace] = []
    by_life: dict[int, list[tuple[int, LoggedFrame]]] = {}
    for k, e in enumerate(list(log.entries)):  # a copy: the harness's loop may be logging a later life
        if (lives is None or e.life in lives) and (cut_at is None or k < cut_at.get(e.life, k + 1)):
            by_life.setdefault(e.life, []).append((k, e))
    for life, entries in sorted(by_life.items()):
        events: list[dict[str, Any]] = []
        cases: list[dict[str, Any]] = []
        restarts: list[int] = []
        pending = sorted(k for k, of in log.restarts if of == life)
        for k, e in entries:
            while pending and pending[0] <= k:
                restarts.append(len(events))
                pending.pop(0)
            ev = harness_event(e.frame, e.ts_ms, virtual, target_id)
            if ev is None:
                continue
            seq = len(events)
            events.append(ev)
            if e.case is None:
                continue
            if cases and cases[-1]["id"] == e.case:
                cases[-1]["lastSeq"] = seq
            else:
                cases.append({"id": e.case, "firstSeq": seq, "lastSeq": seq})
        restarts += [len(events)] * len(pending)
        path = out_dir / f"session-life-{life}.ndjson"
        head = dict(header, run=f"session life {life}", cases=cases)
        if restarts:
            head["targetRestarts"] = restarts
        write_harness_trace(path, head, events)
        written.append(SessionTrace(life, path, len(events), cases))
    return written


@dataclass
class BlackBoxValidation:
    """TLC's black-box verdict on the session harness traces, one per life of the target."""

    status: str  # PASS | FAIL | NOT CHECKED | OFF
    message: str = ""
    seconds: float = 0.0
    events: int = 0
    lives: list[dict[str, Any]] = field(default_factory=list)
    #: case id -> what the report says about the case's share of the session traces
    by_case: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status, "message": self.message, "seconds": round(self.seconds, 2),
            "events": self.events, "lives": self.lives,
        }  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BlackBoxValidation:
        return cls(data["status"], data["message"], data["seconds"], data["events"], list(data["lives"]))


def merge_blackbox(parts: list[BlackBoxValidation]) -> BlackBoxValidation:
    """One verdict from the verdicts on several lives (or several workers' targets): FAIL if any failed,
    NOT CHECKED / OFF only if all are, PASS otherwise; ``seconds`` is TLC's time, summed. A case cut by a
    wiped restart is in two lives: a FAIL or NOT CHECKED in either one stands."""
    if not parts:
        return BlackBoxValidation("NOT CHECKED", "no frame was exchanged with the target")
    if len(parts) == 1:
        return parts[0]
    merged = BlackBoxValidation("PASS", seconds=sum(p.seconds for p in parts), events=sum(p.events for p in parts),
                                lives=[life for p in parts for life in p.lives])  # fmt: skip
    for p in parts:
        for case, text in p.by_case.items():
            prior = merged.by_case.get(case)
            if prior is None or prior.endswith(": PASS"):
                merged.by_case[case] = text
    failed = [p.message for p in parts if p.status == "FAIL"]
    statuses = {p.status for p in parts}
    if failed:
        merged.status, merged.message = "FAIL", "\n".join(failed)
    elif len(statuses) == 1 and statuses != {"PASS"}:
        merged.status = parts[0].status
        merged.message = "; ".join(dict.fromkeys(p.message for p in parts))
    else:
        checked = [life for life in merged.lives if life.get("status") == "PASS"]
        unchecked = [f"{Path(life['file']).name}: {life['reason']}" for life in merged.lives
                     if life.get("status") == "NOT CHECKED"]  # fmt: skip
        merged.message = (
            f"{merged.events} rows of {len(checked)} session harness trace(s) match KRaft"
            + (f" (NOT CHECKED: {'; '.join(unchecked)})" if unchecked else "")
        )
    return merged


def validate_session_traces(
    traces: list[SessionTrace], processes: int = 2, timeout_s: float = 900.0
) -> BlackBoxValidation:
    """Validate each life's session trace in black-box mode (several in one TLC run, at most ``processes``
    TLC runs at once: ``validate_traces``)."""
    from kraft_tck.tla.trace_validate import validate_traces

    if not traces:
        return BlackBoxValidation("NOT CHECKED", "no frame was exchanged with the target")
    t0 = time.monotonic()
    verdicts = validate_traces([t.path for t in traces], timeout=timeout_s, processes=processes)
    return blackbox_result(traces, verdicts, time.monotonic() - t0)


def blackbox_result(traces: list[SessionTrace], verdicts: list[TraceVerdict], seconds: float) -> BlackBoxValidation:
    """The black-box verdict of a target's lives from TLC's verdicts on their session traces."""
    result = BlackBoxValidation("PASS", seconds=seconds)
    problems: list[str] = []
    for t, v in zip(traces, verdicts, strict=True):
        entry: dict[str, Any] = {
            "life": t.life, "file": str(t.path), "status": v.status, "messages": t.events,
            "events": v.events if v.checked else 0, "reason": v.reason, "cases": [c["id"] for c in t.cases],
        }  # fmt: skip
        if v.checked:
            result.events += v.events
        verdict_text = f"checked as part of {t.path.name}: {v.status}"
        if not v.checked:
            verdict_text = f"NOT CHECKED in {t.path.name}: {v.reason}"
        for c in t.cases:
            # a case cut by a wiped restart is in two lives: a FAIL or NOT CHECKED in either one stands
            prior = result.by_case.get(c["id"])
            if prior is not None and not prior.endswith(": PASS"):
                continue
            result.by_case[c["id"]] = verdict_text
        if v.failed_event is not None:
            ev = v.failed_event
            case = t.case_of(ev.seq)
            entry["failedEvent"] = {"seq": ev.seq, "case": case, "event": ev.event, "message": ev.msg}
            entry["failedCase"] = case
            if case in result.by_case:
                result.by_case[case] = (
                    f"checked as part of {t.path.name}: FAIL (the first event no behaviour of KRaft can produce, "
                    f"seq {ev.seq}, is this case's)"
                )
        if v.state_before is not None:
            entry["stateBefore"] = v.state_before
        result.lives.append(entry)
        if v.status == "FAIL":
            text = f"{t.path.name} (life {t.life}): {v.reason}"
            if v.failed_event is not None:
                ev = v.failed_event
                text += (
                    f"\n  first unmatched event: seq {ev.seq} in case {t.case_of(ev.seq)}: {ev.event} "
                    f"{_describe(ev.msg)}"
                )
            if v.state_before is not None:
                text += f"\n  spec state before it: {v.state_before}"
            problems.append(text)
    if problems:
        result.status, result.message = "FAIL", "\n".join(problems)
    elif all(not v.checked for v in verdicts):
        result.status = "NOT CHECKED"
        result.message = "; ".join(f"{t.path.name}: {v.reason}" for t, v in zip(traces, verdicts, strict=True))
    else:
        unchecked = [f"{t.path.name}: {v.reason}" for t, v in zip(traces, verdicts, strict=True) if not v.checked]
        result.message = (
            f"{result.events} rows of {sum(v.checked for v in verdicts)} session harness trace(s) match KRaft"
            + (f" (NOT CHECKED: {'; '.join(unchecked)})" if unchecked else "")
        )
    return result


def _describe(msg: dict[str, Any]) -> str:
    """A model message record, short: its type and fields."""
    if not msg:
        return ""
    fields = ", ".join(f"{k}={v}" for k, v in msg.items() if k not in ("type", "records"))
    return f"{msg.get('type', '')}({fields})"
