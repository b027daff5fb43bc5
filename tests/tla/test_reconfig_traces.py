"""Trace validation of dynamic-quorum (KIP-853) lives of the conformance harness: the target's own node trace and
the harness's black-box traces, from a real run of KIP-853 cases against the embedded reference node.

* Node trace (environment mode): the voter set in force is the log's latest VotersRecord (KRaft.tla Config); the
  bootstrap servers the node fetches from when it looks for a leader (ids -2, -3, ...: Kafka's
  KafkaRaftClient numbering of controller.quorum.bootstrap.servers) are environment nodes (TraceKRaft.tla
  BootstrapFetch); a Vote answered INVALID_VOTER_KEY is a RefuseVoterKey row (the epoch adopted, no vote).
* Black-box: the AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter the harness asks for are hidden steps of the
  target while they are pending (TraceKRaft.tla PendingChanges, AddVoterAtOnce).
* Doctored copies fail at the event that breaks the rule: a follower that ignores a VotersRecord it appended,
  a leader that counts a voter it removed toward the high watermark, a target whose Fetch answer carries a
  VotersRecord with a voter nobody asked it to add.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_translate import translate
from kraft_tck.tla.trace_validate import validate_trace

REPO = Path(__file__).resolve().parents[2]
needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

# VoterKey/1 first: the life's first case (a fresh target: its per-case trace is checked in black-box mode);
# AddVoter/1 (a joiner added), RemoveVoter/1 and HighWatermark/1 (a follower removed by the target leader),
# FollowerView/1 (the target removed by an uncommitted VotersRecord: it looks for a leader through the
# bootstrap servers).
CASES = ("KIP-853/VoterKey/1", "KIP-853/AddVoter/1", "KIP-853/RemoveVoter/1", "KIP-853/HighWatermark/1",
         "KIP-853/FollowerView/1")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The KIP-853 cases above against the embedded reference node, TLC off: the per-case harness traces and the
    target's node traces (``target/target-trace-N.ndjson``, one per life)."""
    out = tmp_path_factory.mktemp("reconfig-traces")
    args = [sys.executable, "-m", "pytest", "conformance/test_reconfig.py", "-q", "-p", "no:cacheprovider",
            "--no-tlc", "--trace-dir", str(out)]
    for case in CASES:
        args += ["--case", case]
    proc = subprocess.run(args, cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return out


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(obj) + "\n" for obj in lines))
    return path


def _dynamic_node_trace(run: Path) -> Path:
    """The target's node trace of the dynamic life (kraft.version 1 in its states)."""
    for path in sorted((run / "target").glob("target-trace-*.ndjson")):
        if any((obj.get("state") or {}).get("kraftVersion") == 1 for obj in _lines(path)[1:]):
            return path
    raise AssertionError(f"no node trace of a dynamic life in {run / 'target'}")


def test_the_dynamic_node_trace_has_bootstrap_fetches_and_voter_key_refusals(run: Path) -> None:
    trace = translate(_dynamic_node_trace(run))
    assert trace.reconfig
    assert -2 in trace.observers and -2 in trace.environment  # bootstrap servers: environment
    boot = [ev for ev in trace.events if ev.event == "SendFetchRequest" and ev.reply.get("to", 0) <= -2]
    assert boot, "FollowerView/1: the removed target looks for a leader through the bootstrap servers"
    assert sum(ev.event == "RefuseVoterKey" for ev in trace.events) == 2  # VoterKey/1: two misaddressed Votes


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_the_dynamic_node_trace_passes(run: Path) -> None:
    verdict = validate_trace(_dynamic_node_trace(run), timeout=300)
    assert verdict.status == "PASS", (verdict.reason, verdict.failed_event)


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_follower_that_ignores_a_voters_record_fails_there(run: Path, tmp_path: Path) -> None:
    # FollowerView/1: the target appends VotersRecord(without itself) from its leader's Fetch answer and reports
    # the new set. Doctored: it keeps reporting the old set (ignores the record) from that event on.
    lines = _lines(_dynamic_node_trace(run))
    at = next(k for k, obj in enumerate(lines[1:], start=1) if obj.get("event") == "HandleFetchResponse"
              and obj["node"] not in obj["state"].get("voters", [obj["node"]]))
    before = next(obj["state"]["voters"] for obj in reversed(lines[1:at]) if obj.get("state"))
    assert lines[at]["node"] in before
    for obj in lines[at:]:
        if obj.get("state") and obj["node"] not in obj["state"].get("voters", []):
            obj["state"]["voters"] = before
    verdict = validate_trace(_write(tmp_path / "ignores.ndjson", lines), timeout=300)
    assert verdict.status == "FAIL"
    assert verdict.failed_event is not None and verdict.failed_event.seq == lines[at]["seq"], verdict.reason


def _removed_voter_fetch_at_log_end(lines: list[dict[str, Any]]) -> tuple[int, int]:
    """The HandleFetchRequest (line index) of the target leader for a fetch, at its log end, of a voter it removed
    (before it commits the removal: the high watermark is below that end), and that end."""
    for k, obj in enumerate(lines):
        if (obj.get("event") != "HandleRemoveRaftVoterRequest" or obj["state"]["role"] != "Leader"
                or obj.get("voterKey", {}).get("id") == obj["node"]):
            continue
        removed, end = obj["voterKey"]["id"], obj["state"]["logEndOffset"]
        for j in range(k + 1, len(lines) - 1):
            here, msg = lines[j], lines[j].get("msg") or {}
            if here.get("event") == "HandleRemoveRaftVoterRequest":
                break
            if (here.get("event") == "Receive" and msg.get("api") == "Fetch" and msg.get("from") == removed
                    and msg["body"]["Topics"][0]["Partitions"][0]["FetchOffset"] == end
                    and lines[j + 1].get("event") == "HandleFetchRequest"
                    and lines[j + 1]["state"]["highWatermark"] < end):
                return j + 1, end
    raise AssertionError("no fetch of a removed voter at the leader's log end in the trace")


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_leader_counting_a_removed_voter_fails_there(run: Path, tmp_path: Path) -> None:
    # HighWatermark/1: the target leader appends VotersRecord(without v), then v fetches at the new log end: v no
    # longer counts, so the high watermark stays. Doctored: the leader advances it on v's fetch alone.
    lines = _lines(_dynamic_node_trace(run))
    at, end = _removed_voter_fetch_at_log_end(lines)
    lines[at]["state"]["highWatermark"] = end
    verdict = validate_trace(_write(tmp_path / "counts.ndjson", lines), timeout=300)
    assert verdict.status == "FAIL"
    assert verdict.failed_event is not None and verdict.failed_event.seq == lines[at]["seq"], verdict.reason


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_black_box_traces_of_voter_key_refusals_and_an_added_voter_pass(run: Path) -> None:
    voter_key = translate(run / "KIP-853_VoterKey_1.ndjson")
    assert sum(ev.event == "RefuseVoterKey" for ev in voter_key.events) == 2
    add = translate(run / "KIP-853_AddVoter_1.ndjson")
    assert not add.not_fresh and add.reconfig
    assert any(c.kind == "Add" for c in add.voter_changes)
    for path in (voter_key.path, add.path):
        verdict = validate_trace(path, timeout=300)
        assert verdict.status == "PASS", (path.name, verdict.reason, verdict.failed_event)


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_black_box_voters_record_nobody_asked_for_fails_there(run: Path, tmp_path: Path) -> None:
    # AddVoter/1: the harness asks the target leader to add the joiner, and the target's Fetch answers carry
    # VotersRecord(old + joiner). Doctored: the record names another voter than the one asked for.
    lines = _lines(run / "KIP-853_AddVoter_1.ndjson")
    asked = next(obj["msg"]["body"]["VoterId"] for obj in lines[1:]
                 if (obj.get("msg") or {}).get("api") == "AddRaftVoter" and obj["msg"]["kind"] == "request")
    at = None
    for k, obj in enumerate(lines[1:], start=1):
        msg = obj.get("msg") or {}
        if (msg.get("api"), msg.get("kind")) != ("Fetch", "response") or msg.get("from") != 1:
            continue
        for part in (t["Partitions"][0] for t in msg["body"].get("Responses") or []):
            for batch in (part.get("Records") or {}).get("batches") or []:
                if asked in (batch.get("voters") or []):
                    batch["voters"] = sorted({*batch["voters"], 99} - {asked})
                    at = k
        if at is not None:
            break
    assert at is not None, "no Fetch answer of the target with the new VotersRecord"
    verdict = validate_trace(_write(tmp_path / "unasked.ndjson", lines), timeout=300)
    assert verdict.status == "FAIL"
    assert verdict.failed_event is not None and verdict.failed_event.seq == lines[at]["seq"], verdict.reason
