"""The harness's verdict levels (MUST / KAFKA / INFO), the Kafka rows its KAFKA checks name, and the
metadata log the virtual leaders write (what a Kafka controller replays)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
import yaml
from kraft_tck.conformance.catalog import catalog
from kraft_tck.conformance.report import difference_line
from kraft_tck.conformance.scenario import INFO, KAFKA, MUST, ConformanceFailure, Scenario
from kraft_tck.conformance.session import CaseResult
from kraft_tck.conformance.target import Target, Timeouts
from kraft_tck.conformance.virtual import METADATA_VERSION_LEVEL, Quorum, TargetAddress, VLog
from kraft_tck.reference.registry import BrokerRegistry
from kraft_tck.spec import codec
from kraft_tck.spec.records import decode_batches, encode_batches

REPO = Path(__file__).resolve().parents[2]


def _scenario() -> Scenario:
    quorum = Quorum(TargetAddress(1, "127.0.0.1", 1), "cid", {2: 0, 3: 0}, "127.0.0.1")
    target = cast(Target, SimpleNamespace(node_id=1))
    return Scenario(catalog()["KIP-595/Vote/1"], quorum, target, Timeouts(300, 600, 100, 500, 150, 1500))


# ---------------------------------------------------------------------------------------------- levels


def test_a_must_miss_fails_the_case() -> None:
    sc = _scenario()
    assert sc.check(True, "w", "e", "a") is True
    with pytest.raises(ConformanceFailure) as info:
        sc.check(False, "the vote", "VoteGranted=true", "VoteGranted=false", level=MUST)
    assert info.value.expected == "VoteGranted=true" and info.value.actual == "VoteGranted=false"
    assert not sc.kafka_differences and not sc.observations


def test_a_kafka_miss_is_recorded_with_its_row_and_the_case_goes_on() -> None:
    sc = _scenario()
    assert sc.check(True, "ok", "e", "a", level=KAFKA, kafka="describe.non-leader") is True
    assert not sc.kafka_differences  # a met KAFKA check is not a difference
    assert sc.check(False, "no hint", "LeaderId 0", "LeaderId 2", level=KAFKA, kafka="describe.non-leader") is False
    sc.fail("path", "EndQuorumEpoch", "Vote", level=KAFKA, kafka="checkquorum.resign-not-elect")
    assert [d["kafka"] for d in sc.kafka_differences] == ["describe.non-leader", "checkquorum.resign-not-elect"]
    d = sc.kafka_differences[0]
    assert (d["level"], d["check"], d["expected"], d["actual"], d["met"]) == (
        "KAFKA", "no hint", "LeaderId 0", "LeaderId 2", False
    )
    assert d["clause"] == str(sc.case.clause)
    line = "differs from Kafka [describe.non-leader]: no hint: expected LeaderId 0; actual LeaderId 2"
    assert difference_line(d) == line
    notes = [f.summary() for f in sc.frames.frames if f.kind == "note"]
    assert any(n.startswith("differs from Kafka: no hint") for n in notes), notes


def test_a_kafka_check_must_name_its_row() -> None:
    with pytest.raises(ValueError, match=r"names its spec/kafka-behaviour\.yaml row"):
        _scenario().check(False, "w", "e", "a", level=KAFKA)


def test_info_checks_are_recorded_met_or_not_and_never_differences() -> None:
    sc = _scenario()
    sc.check(True, "form", "22 chars", "abc", level=INFO)
    sc.check(False, "form", "22 chars", "abc", level=INFO)
    assert [o["met"] for o in sc.observations] == [True, False]
    assert not sc.kafka_differences
    assert difference_line(sc.observations[1]).startswith("info (not met): form")


def test_case_result_carries_the_differences_to_results_json() -> None:
    result = CaseResult(catalog()["KIP-595/Vote/1"])
    result.kafka_differences = [{"level": "KAFKA", "check": "c", "expected": "e", "actual": "a", "kafka": "r"}]
    doc = result.to_json()
    assert doc["kafkaDifferences"] == result.kafka_differences and doc["observations"] == []


def test_every_kafka_row_the_harness_names_is_in_the_table() -> None:
    table = yaml.safe_load((REPO / "spec" / "kafka-behaviour.yaml").read_text())
    rows = {r["id"]: r for r in table["rows"]}
    named: set[str] = set()
    for path in (REPO / "conformance").glob("*.py"):
        text = path.read_text()
        named |= set(re.findall(r'kafka="([^"]+)"', text))
        named |= set(re.findall(r'^ROW_\w+ = "([^"]+)"', text, re.M))
    assert named, "the harness names no Kafka row"
    missing = sorted(named - set(rows))
    assert not missing, f"KAFKA-level checks name rows spec/kafka-behaviour.yaml lacks: {missing}"


# ---------------------------------------------------------------------------------------------- the log


def test_virtual_leaders_write_a_metadata_log_a_kafka_controller_replays() -> None:
    log = VLog()
    log.append_leader_change(3, 2, [1, 2, 3])
    log.append_metadata(3, 3)
    log.append_metadata(4, 2, commit=False)
    batches = decode_batches(encode_batches(log.batches))  # as the target receives them
    assert batches[0].is_control
    data = [b for b in batches if not b.is_control]
    assert len(data) == 5 and all(len(b.records) == 1 for b in data)  # one record per batch, as Kafka appends
    values = []
    for b in data:
        assert (b.producer_id, b.producer_epoch, b.base_sequence) == (-1, -1, -1)
        rec = b.records[0]
        assert rec.key is None and not rec.headers and rec.value is not None
        values.append(codec.decode_metadata_record(rec.value))
    # a new log starts with metadata.version (ActivationRecordsGenerator.recordsForEmptyLog), then no-ops
    assert values[0] == ("FeatureLevelRecord", 0, {"Name": "metadata.version", "FeatureLevel": METADATA_VERSION_LEVEL})
    assert all(v == ("NoOpRecord", 0, {}) for v in values[1:])
    # the ApiMessageAndVersion frame: uvarints frame version 1, api key 20, version 0, then the body
    assert data[1].records[0].value == bytes([1, 20, 0, 0])
    # the reference controller's replay takes them (no broker record, no error)
    changes, errors = BrokerRegistry().apply_committed(batches, log.end)
    assert (changes, errors) == ([], [])
    # epoch 4 starts with its leader's LeaderChange (LeaderState.appendStartOfEpochControlRecords)
    assert [b.is_control for b in batches] == [True, False, False, False, True, False, False]
    assert log.committed == 4 and log.end == 7


def test_only_a_log_without_data_starts_with_metadata_version() -> None:
    log = VLog()
    log.append_metadata(1, 1)
    log.append_metadata(1, 1)
    names = [codec.decode_metadata_record(b.records[0].value or b"")[0] for b in log.batches if not b.is_control]
    assert names == ["FeatureLevelRecord", "NoOpRecord"]
    log.append_metadata(2, 0)  # nothing to append, not even a LeaderChange
    assert log.end == 3
