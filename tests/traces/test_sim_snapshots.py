"""Snapshots (KIP-630) in the simulator: nodes snapshot their state machine and clean their logs, lagging
followers catch up through the leader's snapshot, a node that dies while writing a snapshot never uses the
partial file, and the online checks (SnapshotAtCommittedOffset, SnapshotAgreement, LogStartCoveredBySnapshot,
SnapshotInstallResetsLog) catch cores that break them. The offline checker agrees on the same traces."""

from __future__ import annotations

import bisect
import json
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.reference.core import KRaftCore
from kraft_tck.reference.io import InstallSnapshot
from kraft_tck.reference.messages import SnapshotId
from kraft_tck.spec.records import RecordBatch, data_batch
from kraft_tck.spec.trace import read_trace
from kraft_tck.traces.checker import check_paths
from kraft_tck.traces.sim import SimConfig, simulate
from kraft_tck.traces.sim.disk import DiskLog, SnapshotFiles
from kraft_tck.traces.sim.faults import Partition, SnapshotCrash
from kraft_tck.traces.sim.invariants import InvariantChecker, InvariantViolation
from kraft_tck.traces.sim.statemachine import SimStateMachine, decode, encode

VALUES = [b"same bytes"]


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(t) for t in path.read_text().splitlines()[1:]]


def _installs(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "HandleFetchSnapshotResponse" and "snapshotId" in e]


# ------------------------------------------------------------------------------------------ runs


def test_the_snapshots_profile_snapshots_cleans_installs_and_breaks_nothing(tmp_path: Path) -> None:
    """A few seeds of the ``snapshots`` fault profile: every kind of snapshot work happens, no invariant breaks
    online, and the offline checker finds nothing in the traces either (which validate against the schema)."""
    totals = dict.fromkeys(("snapshots", "installs", "cleanings", "snapshot_crashes", "torn_writes"), 0)
    paths = []
    for seed in range(4):
        path = tmp_path / f"seed-{seed}.ndjson"
        result = simulate(SimConfig(seed=seed, duration_ms=40_000, profile="snapshots"), path)
        assert result.violation is None, result.violation
        for k in totals:
            totals[k] += getattr(result, k)
        assert result.max_log_start > 0
        paths.append(path)
    assert all(totals.values()), totals
    checked = check_paths(paths, validate=True)
    assert not checked.quarantined, checked.quarantined[:3]
    assert checked.violations == []
    events = [e for p in paths for e in _events(p)]
    names = {e["event"] for e in events}
    assert {"CreateSnapshot", "CleanLog", "SendFetchSnapshotRequest", "HandleFetchSnapshotRequest",
            "HandleFetchSnapshotResponse"} <= names
    # Everything the trace says about snapshots is what the run counted.
    assert sum(e["event"] == "CreateSnapshot" for e in events) == totals["snapshots"]
    assert len(_installs(events)) == totals["installs"]


def test_same_seed_same_trace_with_snapshots(tmp_path: Path) -> None:
    config = SimConfig(seed=7, duration_ms=20_000, profile="snapshots")
    simulate(config, tmp_path / "a.ndjson").raise_for_violation()
    simulate(config, tmp_path / "b.ndjson").raise_for_violation()
    assert (tmp_path / "a.ndjson").read_bytes() == (tmp_path / "b.ndjson").read_bytes()
    assert b'"CreateSnapshot"' in (tmp_path / "a.ndjson").read_bytes()


def test_snapshots_off_keeps_the_trace_as_it_was(tmp_path: Path) -> None:
    """``snapshot_bytes=0`` is the simulator without snapshots: no snapshot event, no logStartOffset, no
    snapshot settings in the header."""
    path = tmp_path / "off.ndjson"
    simulate(SimConfig(seed=3, duration_ms=10_000, snapshot_bytes=0), path).raise_for_violation()
    text = path.read_text()
    assert "Snapshot" not in text and "logStartOffset" not in text and "CleanLog" not in text


def test_a_follower_cut_off_while_the_leader_cleans_catches_up_through_its_snapshot(tmp_path: Path) -> None:
    """KIP-630: a follower below the leader's log start can only catch up through a snapshot. Node 3 is cut
    off for 12 s while the others commit, snapshot and clean; it comes back, installs a snapshot (log start =
    log end = its end offset) and then fetches on from there."""
    path = tmp_path / "lag.ndjson"
    faults = (Partition(3_000, 12_000, ((1, 2),)),)
    result = simulate(SimConfig(seed=11, duration_ms=30_000, profile="none", faults=faults, snapshot_bytes=1024,
                                brokers=0), path)
    result.raise_for_violation()
    events = _events(path)
    installs = [e for e in _installs(events) if e["node"] == 3]
    assert installs, "node 3 never installed a snapshot"
    first = installs[0]
    end = first["snapshotId"]["endOffset"]
    assert first["ts"] >= 15_000 and end > 0
    assert first["state"]["logStartOffset"] == first["state"]["logEndOffset"] == end
    later_fetches = [e for e in events if e["event"] == "Send" and e["node"] == 3 and e["seq"] > first["seq"]
                     and e["msg"]["api"] == "Fetch" and e["msg"]["kind"] == "request"]
    offsets = [e["msg"]["body"]["Topics"][0]["Partitions"][0]["FetchOffset"] for e in later_fetches]
    assert offsets and min(offsets) == end  # the next Fetch goes from the snapshot's end, never below
    assert result.installs >= 1 and result.committed > end


@pytest.mark.parametrize("torn", [True, False])
def test_a_node_that_dies_while_writing_a_snapshot_comes_back_from_the_previous_one(tmp_path: Path,
                                                                                      torn: bool) -> None:
    """A crash in the middle of a snapshot write: torn, the partial file is deleted at restart and never read
    (the node restarts from the snapshot before it and its log); whole but never announced to the core, the
    restart loads it as the latest (the Restart event names it)."""
    path = tmp_path / "crash.ndjson"
    faults = (SnapshotCrash(8_000, 2, 1_000, torn=torn),)
    result = simulate(SimConfig(seed=5, duration_ms=25_000, profile="none", faults=faults, snapshot_bytes=512),
                      path)
    result.raise_for_violation()
    assert result.snapshot_crashes == 1
    assert (result.torn_writes, result.partials_dropped) == ((1, 1) if torn else (0, 0))
    events = _events(path)
    restart = next(e for e in events if e["event"] == "Restart" and e["node"] == 2 and e["ts"] > 8_000)
    created = [e["snapshotId"] for e in events if e["event"] == "CreateSnapshot" and e["node"] == 2
               and e["seq"] < restart["seq"]]
    loaded = restart.get("snapshotId")
    if torn:
        assert loaded == (created[-1] if created else None)  # the previous snapshot, not the torn one
    else:
        assert loaded is not None and (not created or loaded["endOffset"] > created[-1]["endOffset"])
    assert check_paths([path], validate=True).violations == []


def test_snapshot_files_never_read_a_partial_one() -> None:
    files = SnapshotFiles()
    sid = SnapshotId(10, 2)
    data = encode(sid, [SimStateMachine().record()])
    files.partial[sid] = bytearray(data[:7])
    assert files.read_snapshot(sid) is None and files.ids() == [] and files.latest() is None
    assert files.recover() == [sid] and not files.partial
    files.write_chunk(sid, 0, data[:20])
    files.write_chunk(sid, 20, data[20:])
    files.freeze(sid)
    reader = files.read_snapshot(sid)
    assert reader is not None and reader.size_in_bytes() == len(data) and reader.slice(5, 3) == data[5:8]
    digest, count, rest, kraft_version, voters = decode(sid, data)
    assert (digest, count, rest, kraft_version, voters) == (SimStateMachine().digest, 0, [], 0, None)
    with pytest.raises(Exception, match="torn"):
        decode(sid, data[:-3])


# ------------------------------------------------------------------------------------------ broken cores


class SnapshotsInTheLeaderEpoch(KRaftCore):
    """Planted bug: a snapshot is named with the node's current epoch instead of the epoch of the record at its
    end offset - 1 (KIP-630: the snapshot id's epoch is the last contained record's), and the core no longer
    checks it."""

    def snapshot_id_at(self, end_offset: int) -> SnapshotId:
        return SnapshotId(super().snapshot_id_at(end_offset).end_offset, self.epoch)

    def _snapshot_allowed(self, snapshot_id: SnapshotId) -> None:
        return None


class InstallKeepsTheLog(KRaftCore):
    """Planted bug: a follower installs a downloaded snapshot (tells the shell to) but keeps its own log as it
    was (Kafka: log.truncateToLatestSnapshot)."""

    def _install_snapshot(self, snapshot_id: SnapshotId) -> None:
        self._out.log_ops.append(InstallSnapshot(snapshot_id))
        if snapshot_id not in self._snapshot_ids:
            bisect.insort(self._snapshot_ids, snapshot_id)


@pytest.mark.parametrize(("core", "invariant"), [(SnapshotsInTheLeaderEpoch, "SnapshotAgreement"),
                                                 (InstallKeepsTheLog, "SnapshotInstallResetsLog")])
def test_the_simulator_catches_a_core_that_breaks_a_snapshot_rule(tmp_path: Path, core: type[KRaftCore],
                                                                   invariant: str) -> None:
    found = []
    for seed in range(6):
        path = tmp_path / f"seed-{seed}.ndjson"
        result = simulate(SimConfig(seed=seed, duration_ms=40_000, profile="snapshots"), path, core_class=core)
        if result.violation is not None:
            found.append(result.violation.invariant)
            if result.violation.invariant == invariant and invariant == "SnapshotAgreement":
                # The trace up to the violation holds the bad snapshot: the offline checker says so too.
                offline = {v.invariant for v in check_paths([path], validate=False).violations}
                assert invariant in offline, offline
    assert invariant in found, found
    assert set(found) == {invariant}, found


# ------------------------------------------------------------------------------------------ online checks


def _committed_log(checker: InvariantChecker, *batches: RecordBatch) -> DiskLog:
    log = DiskLog()
    log.append(batches)
    hw = batches[-1].last_offset + 1
    checker.check_state(1, {"epoch": 5, "role": "Follower", "votedId": -1, "highWatermark": hw}, 1, 0)
    checker.note_high_watermark(1, 0, hw, log, 5, 1, 0)
    return log


def _state_of(*batches: RecordBatch) -> SimStateMachine:
    sm = SimStateMachine()
    sm.apply(batches, batches[-1].last_offset + 1)
    return sm


def test_online_snapshot_checks() -> None:
    checker = InvariantChecker(seed=0)
    a, b = data_batch(0, 2, VALUES), data_batch(len(VALUES), 3, [b"x"])
    _committed_log(checker, a, b)
    good = _state_of(a)
    checker.check_snapshot(1, SnapshotId(a.last_offset + 1, 2), good.digest, good.count, 5, 2, 0, hw=5)
    with pytest.raises(InvariantViolation, match="SnapshotAtCommittedOffset"):
        checker.check_snapshot(2, SnapshotId(b.last_offset + 1, 3), b"", 0, 5, 3, 0, hw=b.last_offset)
    with pytest.raises(InvariantViolation, match=r"SnapshotAgreement.*epoch 4"):  # another epoch, same end
        checker.check_snapshot(2, SnapshotId(a.last_offset + 1, 4), good.digest, good.count, 5, 3, 0)
    with pytest.raises(InvariantViolation, match=r"SnapshotAgreement.*another state"):  # other content
        checker.check_snapshot(2, SnapshotId(a.last_offset + 1, 2), _state_of(b).digest, 1, 5, 3, 0)
    other = SimStateMachine()
    other.apply([data_batch(0, 3, [b"y"]), b], b.last_offset + 1)
    with pytest.raises(InvariantViolation, match=r"SnapshotAgreement.*a state .* other than the committed log"):
        checker.check_snapshot(2, SnapshotId(b.last_offset + 1, 3), other.digest, other.count, 5, 3, 0)
    log = DiskLog()
    log.reset_to(9)
    with pytest.raises(InvariantViolation, match="LogStartCoveredBySnapshot"):
        checker.check_log_start(1, log, 8, 5, 4, 0)
    checker.check_log_start(1, log, 9, 5, 4, 0)
    with pytest.raises(InvariantViolation, match="SnapshotInstallResetsLog"):
        checker.check_install(1, SnapshotId(9, 2), log, 0, 9, 5, 4, 0)  # the core's log still starts at 0
    with pytest.raises(InvariantViolation, match=r"SnapshotInstallResetsLog.*fetches at offset 8"):
        checker.check_after_install(1, 9, 0, 0, 5, 4, 0, fetch_offset=8)
    with pytest.raises(InvariantViolation, match=r"SnapshotInstallResetsLog.*log start 7"):
        checker.check_after_install(1, 9, 7, 9, 5, 4, 0)


def test_leader_completeness_counts_what_the_leaders_snapshot_holds() -> None:
    checker = InvariantChecker(seed=0)
    a, b = data_batch(0, 2, VALUES), data_batch(len(VALUES), 3, [b"x"])
    _committed_log(checker, a, b)
    cleaned = DiskLog()
    cleaned.reset_to(a.last_offset + 1)
    cleaned.append([b])
    checker.check_leader_completeness(2, 6, cleaned, 9, 0, covered=a.last_offset + 1)  # a is in its snapshot
    with pytest.raises(InvariantViolation, match="LeaderCompleteness"):
        checker.check_leader_completeness(2, 6, cleaned, 9, 0, covered=0)


def test_cli_simulate_takes_the_snapshots_profile(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from kraft_tck.traces.cli import COMMANDS

    cmd = next(c for c in COMMANDS if c.name == "simulate")
    res = CliRunner().invoke(cmd, ["--seeds", "1", "--duration", "15s", "--faults", "snapshots", "--out",
                                   str(tmp_path), "--snapshot-bytes", "1024"])
    assert res.exit_code == 0, res.output
    trace = read_trace(tmp_path / "seed-0.ndjson")
    assert trace.header["config"]["metadata.log.max.record.bytes.between.snapshots"] == 1024
    assert "snapshots taken" in res.output


def test_a_node_that_installs_a_snapshot_never_adopts_its_own_uncommitted_cluster_id() -> None:
    """Found by the simulator (heavy faults, seed 74): node 3 led epoch 1 and wrote its own bootstrap
    cluster-id record, which never committed; installing the leader's snapshot later must not make that record's
    id the node's (the log it was in is gone; KIP-595 "Cluster Bootstrapping": an id is adopted once committed,
    and only the snapshot's content says what was). The core used to adopt it and then refuse the snapshot's id."""
    result = simulate(SimConfig(seed=74, duration_ms=60_000, profile="heavy", snapshot_bytes=2048))
    assert result.violation is None, result.violation
    assert result.installs


def _download_requests(path: Path) -> list[tuple[int, int, int, int]]:
    """(node, snapshot end offset, epoch, position) of each FetchSnapshot request a node of the cluster sent."""
    out = []
    for e in _events(path):
        msg = e.get("msg")
        if e["event"] != "Send" or msg is None or msg["api"] != "FetchSnapshot" or msg["kind"] != "request":
            continue
        if msg["from"] != e["node"]:
            continue
        part = msg["body"]["Topics"][0]["Partitions"][0]
        out.append((msg["from"], part["SnapshotId"]["EndOffset"], part["SnapshotId"]["Epoch"], part["Position"]))
    return out


def test_interrupted_downloads_are_resumed_or_started_over_and_still_install(tmp_path: Path) -> None:
    """Loss and leader changes interrupt downloads: a chunk is asked for again at the same position (a lost
    request or answer), a download given up (the leader changed, AbortSnapshotDownload) starts over at 0 or
    gives way to the new leader's snapshot; downloads still complete and nothing breaks."""
    resent = restarted = aborted = installs = 0
    for seed in (9, 17, 19, 20, 21):  # of the first 30 seeds, 9, 17 and 19 ask for a chunk again
        path = tmp_path / f"seed-{seed}.ndjson"
        result = simulate(SimConfig(seed=seed, duration_ms=60_000, profile="snapshots"), path)
        result.raise_for_violation()
        aborted += result.downloads_aborted
        installs += result.installs
        seen: set[tuple[int, int, int, int]] = set()
        furthest: dict[tuple[int, int, int], int] = {}
        for req in _download_requests(path):
            key, position = req[:3], req[3]
            resent += req in seen
            restarted += position == 0 and furthest.get(key, 0) > 0
            seen.add(req)
            furthest[key] = max(furthest.get(key, 0), position)
    assert resent and restarted and aborted and installs, (resent, restarted, aborted, installs)
