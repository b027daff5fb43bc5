"""A virtual leader's log is a KRaft log: the first batch it writes in its epoch is LeaderChange.

Kafka's leader appends a LeaderChangeMessage control batch as the first batch of its epoch
(``KafkaRaftClient.onBecomeLeader`` -> ``LeaderState.appendStartOfEpochControlRecords``: one control record,
LeaderChangeMessage v0 naming the leader, the voters and the voters that granted it), so every epoch of a
Kafka controller's metadata log starts with one. A harness leader that writes metadata records without it
hands a Kafka target a log no Kafka leader writes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.conformance.virtual import Quorum, TargetAddress
from kraft_tck.spec import codec
from kraft_tck.spec.records import ControlType, decode_batches, decode_control, encode_batches

REPO = Path(__file__).resolve().parents[2]


def test_a_virtual_leaders_first_batch_of_its_epoch_is_leader_change() -> None:
    q = Quorum(TargetAddress(1, "127.0.0.1", 1), "cid", {2: 0, 3: 0}, "127.0.0.1")
    q.set_leader(2, 5)
    q.log.append_metadata(5, 2)
    q.log.append_metadata(5, 1)  # the same epoch: no second LeaderChange
    q.set_leader(3, 7)
    q.log.append_metadata(7, 1, commit=False)
    batches = decode_batches(encode_batches(q.log.batches))  # the bytes a target fetches
    assert [(b.partition_leader_epoch, b.is_control) for b in batches] == [
        (5, True), (5, False), (5, False), (5, False), (7, True), (7, False)
    ]
    changes: list[tuple[ControlType, dict[str, Any]]] = []
    for b in batches:
        if b.is_control:
            assert len(b.records) == 1 and b.base_offset == q.log.epochs()[len(changes)][1]
            changes.append(decode_control(b.records[0]))
    assert changes == [
        (ControlType.LEADER_CHANGE, {"Version": 0, "LeaderId": 2, "Voters": [{"VoterId": v} for v in (1, 2, 3)],
                                     "GrantingVoters": [{"VoterId": 2}, {"VoterId": 3}]}),
        (ControlType.LEADER_CHANGE, {"Version": 0, "LeaderId": 3, "Voters": [{"VoterId": v} for v in (1, 2, 3)],
                                     "GrantingVoters": [{"VoterId": 2}, {"VoterId": 3}]}),
    ]  # fmt: skip
    # the data batches are still metadata records a controller replays
    names = [codec.decode_metadata_record(b.records[0].value or b"")[0] for b in batches if not b.is_control]
    assert names == ["FeatureLevelRecord", "NoOpRecord", "NoOpRecord", "NoOpRecord"]
    assert q.log.committed == 4 and q.log.end == 6


@pytest.mark.slow
@pytest.mark.cluster
def test_the_target_holds_a_leader_change_first_in_every_epoch_a_virtual_leader_wrote(tmp_path: Path) -> None:
    """Cases with virtual leaders of several epochs (one of them with a truncated, rewritten tail) against
    the reference node: in the target's own log (its node trace's appends), every epoch's first batch is
    a control batch, and every case still passes."""
    report = tmp_path / "report"
    args = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", "--no-tlc",
            "--case", "KIP-595/BeginQuorumEpoch/1", "--case", "KIP-595/Divergence/1",
            "--case", "KIP-595/Divergence/2", "--report", str(report)]  # fmt: skip
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=240)
    results = report / "results.json"
    assert results.exists(), f"no results.json:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
    outcomes = {c["id"]: c["outcome"] for c in json.loads(results.read_text())["cases"]}
    assert outcomes == dict.fromkeys(("KIP-595/BeginQuorumEpoch/1", "KIP-595/Divergence/1",
                                      "KIP-595/Divergence/2"), "passed"), proc.stdout[-3000:]  # fmt: skip
    traces = sorted((report / "traces" / "target").glob("target-trace-*.ndjson"))
    assert traces
    first_of_epoch: dict[int, bool] = {}  # epoch -> is the first batch the target appended in it control
    for path in traces:
        for line in path.read_text().splitlines():
            event = json.loads(line)
            for batch in (event.get("log") or {}).get("appended", []):
                first_of_epoch.setdefault(batch["epoch"], batch["control"])
    assert len(first_of_epoch) >= 4, first_of_epoch  # several harness epochs were written
    assert all(first_of_epoch.values()), f"epochs whose first batch is not LeaderChange: {first_of_epoch}"
