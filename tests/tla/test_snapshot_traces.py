"""Trace validation of snapshots (KIP-630) against tla/TraceKRaft.tla, with hand-written node traces.

The valid trace: node 1 is elected and replicates a batch to node 2 until the HW covers it (the election and
replication of test_trace_validation.py), snapshots its state machine at the HW (CreateSnapshot) and cleans its
log up to it (CleanLog: log start 3).  Node 3, which missed all of it, learns the leader, fetches from offset 0
and is answered with the SnapshotId (Kafka's tryCompleteFetchRequest: an empty log and a snapshot), downloads the
snapshot (SendFetchSnapshotRequest, HandleFetchSnapshotRequest) and installs it (HandleFetchSnapshotResponse:
log start = log end = HW = 3), then fetches on from the snapshot's end.  The doctored traces break one rule each
and must fail at that event.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_render import trace_data
from kraft_tck.tla.trace_translate import SnapshotContent, environment_message, translate
from kraft_tck.tla.trace_validate import validate_trace

from tests.tla.test_trace_validation import ELECTION, REPLICATION, st, write_trace

needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))

Event = tuple[int, str, dict[str, Any]]


def snap(state: dict[str, Any], log_start: int = 0, snapshot: tuple[int, int] | None = None) -> dict[str, Any]:
    """A state with the log start (the trace leaves it out at 0, as the core does) and, for the events that
    name one, the snapshot id (written as the event's ``snapshotId`` by ``write_snapshot_trace``)."""
    out = dict(state)
    if log_start:
        out["logStartOffset"] = log_start
    if snapshot is not None:
        out["_snapshotId"] = {"endOffset": snapshot[0], "epoch": snapshot[1]}
    return out


FOLLOWER3 = st("Follower", 1, -1, 1, 0, 0, 0)
SNAPSHOT_AND_INSTALL: list[Event] = [
    (1, "CreateSnapshot", snap(st("Leader", 1, 1, 1, 3, 1, 3), snapshot=(3, 1))),
    (1, "CleanLog", snap(st("Leader", 1, 1, 1, 3, 1, 3), log_start=3)),
    (3, "HandleBeginQuorumEpochRequest", FOLLOWER3),
    (3, "SendFetchRequest", FOLLOWER3),
    (1, "HandleFetchRequest", snap(st("Leader", 1, 1, 1, 3, 1, 3), log_start=3)),
    (3, "HandleFetchResponse", FOLLOWER3),
    (3, "SendFetchSnapshotRequest", FOLLOWER3),
    (1, "HandleFetchSnapshotRequest", snap(st("Leader", 1, 1, 1, 3, 1, 3), log_start=3)),
    (3, "HandleFetchSnapshotResponse", snap(st("Follower", 1, -1, 1, 3, 1, 3), log_start=3, snapshot=(3, 1))),
    (3, "SendFetchRequest", snap(st("Follower", 1, -1, 1, 3, 1, 3), log_start=3)),
]


def write_snapshot_trace(path: Path, events: list[Event]) -> Path:
    """``write_trace`` with the ``snapshotId`` of the events that name one moved out of the state."""
    plain = [(n, e, {k: v for k, v in s.items() if k != "_snapshotId"}) for n, e, s in events]
    write_trace(path, plain)
    lines = path.read_text().splitlines()
    ids = iter(s.get("_snapshotId") for _, _, s in events)
    out = [lines[0]]
    for line in lines[1:]:
        obj = json.loads(line)
        if obj["event"] != "Receive":
            snapshot_id = next(ids)
            if snapshot_id is not None:
                obj["snapshotId"] = snapshot_id
        out.append(json.dumps(obj))
    path.write_text("\n".join(out) + "\n")
    return path


# --------------------------------------------------------------------------- translation


def test_a_trace_without_snapshots_renders_as_before(tmp_path: Path) -> None:
    text = trace_data(translate(write_trace(tmp_path / "t.ndjson", ELECTION + REPLICATION)))
    assert "TraceSnapshots == FALSE" in text
    assert "St(a1, a2, a3, a4, a5, a6, a7) ==" in text


def test_a_snapshot_trace_states_log_start_and_snapshot_ids(tmp_path: Path) -> None:
    path = write_snapshot_trace(tmp_path / "s.ndjson", ELECTION + REPLICATION + SNAPSHOT_AND_INSTALL)
    trace = translate(path)
    assert trace.snapshots
    text = trace_data(trace)
    assert "TraceSnapshots == TRUE" in text
    assert "logStartOffset |-> a8, snapshotEndOffset |-> a9, snapshotEpoch |-> a10" in text
    create = next(ev for ev in trace.events if ev.event == "CreateSnapshot")
    assert [create.state[f] for f in ("logStartOffset", "snapshotEndOffset", "snapshotEpoch")] == [0, 3, 1]
    install = next(ev for ev in trace.events if ev.event == "HandleFetchSnapshotResponse")
    assert (install.state["logStartOffset"], install.state["snapshotEndOffset"]) == (3, 3)


def _fetch_snapshot_response(position: int, got: int, size: int, error: int = 0) -> dict[str, Any]:
    part = {"Index": 0, "ErrorCode": error, "SnapshotId": {"EndOffset": 40, "Epoch": 3},
            "CurrentLeader": {"LeaderId": 1, "LeaderEpoch": 3}, "Size": size, "Position": position,
            "UnalignedRecords": {"bytes": got}}
    return {"api": "FetchSnapshot", "apiKey": 59, "kind": "response", "version": 0, "correlationId": 7,
            "from": 1, "to": 2, "body": {"ErrorCode": 0, "Topics": [{"Name": "__cluster_metadata",
                                                                    "Partitions": [part]}]}}


def test_an_environment_fetch_snapshot_answer_completes_at_its_size() -> None:
    # Kafka's handleFetchSnapshotResponse installs once Position + the chunk's bytes = Size
    last = environment_message(_fetch_snapshot_response(100, 50, 150), "c1")
    assert last is not None
    assert last["complete"] and last["records"] == SnapshotContent(40, 3)
    assert (last["snapshotEndOffset"], last["snapshotEpoch"], last["error"]) == (40, 3, "NONE")
    chunk = environment_message(_fetch_snapshot_response(0, 100, 150), "c1")
    assert chunk is not None and not chunk["complete"] and chunk["records"] == []
    missing = environment_message(_fetch_snapshot_response(0, 0, -1, error=98), "c1")
    assert missing is not None and missing["error"] == "SNAPSHOT_NOT_FOUND" and missing["snapshotEndOffset"] == -1


# --------------------------------------------------------------------------- real TLC


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_snapshot_clean_and_install_trace_passes(tmp_path: Path) -> None:
    path = write_snapshot_trace(tmp_path / "good.ndjson", ELECTION + REPLICATION + SNAPSHOT_AND_INSTALL)
    verdict = validate_trace(path, timeout=300)
    assert verdict.passed, (verdict.reason, verdict.failed_event, verdict.tlc.output[-3000:] if verdict.tlc else "")


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_restart_keeps_the_snapshot_and_the_log_after_it(tmp_path: Path) -> None:
    # KIP-630: a restarted node loads its latest snapshot, then the log after it; its HW starts at the log
    # start (everything below it is committed; the core's restart, Kafka's UnifiedLog).  The leader comes back
    # Resigned (Kafka's QuorumState.initialize) with log start 3, log end 3 and its snapshot (3, 1).
    restart = (1, "Restart", snap(st("Resigned", 1, 1, 1, 3, 1, 3), log_start=3, snapshot=(3, 1)))
    events = ELECTION + REPLICATION + SNAPSHOT_AND_INSTALL[:2] + [restart]
    verdict = validate_trace(write_snapshot_trace(tmp_path / "restart.ndjson", events), timeout=300)
    assert verdict.passed, (verdict.reason, verdict.failed_event)
    # ... and one that lost its log start on the way fails there
    lost = (1, "Restart", snap(st("Resigned", 1, 1, 1, 3, 1, 3), snapshot=(3, 1)))
    events = ELECTION + REPLICATION + SNAPSHOT_AND_INSTALL[:2] + [lost]
    verdict = validate_trace(write_snapshot_trace(tmp_path / "lost.ndjson", events), timeout=300)
    assert not verdict.passed
    assert verdict.failed_event is not None and verdict.failed_event.event == "Restart", verdict.reason


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_snapshot_above_the_high_watermark_fails(tmp_path: Path) -> None:
    # KIP-630 / Kafka's KafkaMetadataLog.createNewSnapshot: a snapshot only at a committed offset.  Here the
    # leader snapshots its batch while its HW is still 1 (before node 2 fetched it).
    events = ELECTION + REPLICATION[:4] + [
        (1, "CreateSnapshot", snap(st("Leader", 1, 1, 1, 3, 1, 0), snapshot=(3, 1))),
    ]
    verdict = validate_trace(write_snapshot_trace(tmp_path / "uncommitted.ndjson", events), timeout=300)
    assert not verdict.passed
    assert verdict.failed_event is not None and verdict.failed_event.event == "CreateSnapshot", verdict.reason


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_an_install_that_keeps_the_old_log_fails(tmp_path: Path) -> None:
    # Kafka's truncateToLatestSnapshot: the installed snapshot empties the log, log start = log end = its end
    # offset.  The doctored follower reports its old empty log after the install.
    events = ELECTION + REPLICATION + SNAPSHOT_AND_INSTALL
    at = next(k for k, (_, e, _) in enumerate(events) if e == "HandleFetchSnapshotResponse")
    events = [*events[:at], (3, "HandleFetchSnapshotResponse", snap(FOLLOWER3, snapshot=(3, 1)))]
    verdict = validate_trace(write_snapshot_trace(tmp_path / "kept.ndjson", events), timeout=300)
    assert not verdict.passed
    assert verdict.failed_event is not None and verdict.failed_event.event == "HandleFetchSnapshotResponse"


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_simulator_traces_with_snapshots_validate(tmp_path: Path) -> None:
    # The simulator's KIP-630 fault profile: every node snapshots and cleans its log as it goes, voters are cut off
    # long enough to need the leader's snapshot, and nodes crash, also between writing a snapshot's file and
    # telling the core (the Restart then names a snapshot no CreateSnapshot recorded: TraceKRaft RestartFinding).
    from kraft_tck.traces.sim import SimConfig, simulate

    installs = 0
    for seed in (2, 3, 7):
        path = tmp_path / f"seed-{seed}.ndjson"
        simulate(SimConfig(seed=seed, nodes=3, duration_ms=15_000, profile="snapshots"), trace_path=path)
        events = [json.loads(raw) for raw in path.read_text().splitlines()[1:] if raw.strip()]
        assert any(e["event"] == "CleanLog" for e in events), seed
        installs += sum(1 for e in events if e["event"] == "HandleFetchSnapshotResponse" and e.get("snapshotId"))
        verdict = validate_trace(path, timeout=600)
        assert verdict.passed, (seed, verdict.reason, verdict.failed_event)
        assert translate(path).snapshots
    assert installs > 0  # a follower did install a leader's snapshot in one of them
