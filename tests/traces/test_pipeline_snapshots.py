"""The snapshot invariants (KIP-630) in the Spark pipeline and the single-process checker: each planted
violation is found exactly where it was planted, by both, with the same words; clean traces with snapshots,
cleaned logs and installs (synthetic and simulated) are clean, LeaderCompleteness included."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.traces.checker import check_paths, trace_files
from kraft_tck.traces.pipeline import synth
from kraft_tck.traces.pipeline.run import EXIT_VIOLATIONS, run_pipeline

EVENTS = 3000
SEED = 50  # a synthetic history with snapshots, cleanings and two installs

PLANTS: dict[str, tuple[Callable[[list[dict[str, Any]]], tuple[int, int, int]], str]] = {
    "snap-above-hw": (synth.plant_snapshot_above_hw, "SnapshotAtCommittedOffset"),
    "snap-epoch": (synth.plant_snapshot_epoch_disagrees, "SnapshotAgreement"),
    "snap-log-start": (synth.plant_log_start_above_snapshot, "LogStartCoveredBySnapshot"),
    "snap-install-reset": (synth.plant_install_not_reset, "SnapshotInstallResetsLog"),
    "snap-fetch-below": (synth.plant_fetch_below_install, "SnapshotInstallResetsLog"),
    # The older invariants over logs that start above 0.
    "snap-leader-incomplete": (synth.plant_leader_without_committed_batch, "LeaderCompleteness"),
    "snap-truncation": (synth.plant_truncation_below_hw, "CommittedNeverTruncated"),
}


def _quiet(_: str) -> None:
    return None


def planted_corpus(root: Path, with_sim: bool) -> dict[str, tuple[str, int, int, int]]:
    """Two clean synthetic runs with snapshots, one planted run per entry of PLANTS, and (``with_sim``) two
    simulated runs of the ``snapshots`` fault profile."""
    synth.write_corpus(root, runs=2, events_per_run=EVENTS, seed=52, snapshots=True)
    expected = {}
    for run, (plant, invariant) in PLANTS.items():
        events = synth.synth_run(run, SEED, EVENTS, snapshots=True)
        seq, node, epoch = plant(events)
        synth.write_trace(root / f"{run}.ndjson", synth.header(run, SEED), events)
        expected[run] = (invariant, node, epoch, seq)
    if with_sim:
        from kraft_tck.traces.sim import SimConfig, simulate

        for seed in (0, 1):
            result = simulate(SimConfig(seed=seed, duration_ms=30_000, profile="snapshots"),
                              root / f"sim-{seed}.ndjson")
            result.raise_for_violation()
            assert result.installs and result.snapshots, seed
    return expected


def test_the_checker_finds_each_planted_snapshot_violation(tmp_path: Path) -> None:
    expected = planted_corpus(tmp_path, with_sim=False)
    result = check_paths(trace_files(tmp_path), validate=True)
    assert not result.quarantined, result.quarantined[:3]
    for run, want in expected.items():
        assert [(v.invariant, v.node, v.epoch, v.seq) for v in result.violations if v.run == run] == [want], run
    assert not [v for v in result.violations if v.run not in expected]


@pytest.fixture(scope="module")
def spark_run(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, dict[str, Any]]:
    root = tmp_path_factory.mktemp("snapshots")
    expected = planted_corpus(root, with_sim=True)
    out = tmp_path_factory.mktemp("snapshots-out")
    return root, run_pipeline(spark, root, out, validator=False, metrics=False, echo=_quiet), expected


@pytest.mark.spark
def test_spark_finds_each_planted_snapshot_violation_where_planted(spark_run: Any) -> None:
    _, res, expected = spark_run
    for run, want in expected.items():
        assert [(v.invariant, v.node, v.epoch, v.seq) for v in res.violations if v.run == run] == [want], run
    assert not [v for v in res.violations if v.run not in expected], "clean runs with snapshots are clean"
    assert res.exit_code == EXIT_VIOLATIONS
    assert res.counts["quarantined"] == 0


@pytest.mark.spark
def test_spark_snapshot_results_equal_the_python_checker(spark_run: Any) -> None:
    root, res, _ = spark_run
    py = check_paths(trace_files(root), validate=False)
    assert [v.key() for v in res.violations] == [v.key() for v in py.violations]
    assert [v.detail for v in res.violations] == [v.detail for v in py.violations]
    assert res.counts["events accepted"] == py.accepted


def test_snapshot_agreement_rules_of_the_replay() -> None:
    """SnapshotAgreement's three rules in `checker.Completeness` (the replay Spark runs per run too): the first
    snapshot of an end offset sets its epoch; an empty prefix has epoch 0; the committed batch holding the last
    offset has the snapshot's epoch."""
    from kraft_tck.traces.checker import Completeness

    lc = Completeness()
    batch = (0, 2, 9, "d")  # offsets 0..9, epoch 2
    lc.feed(1, 0, "ClientAppend", 2, 0, None, [batch])
    lc.feed(1, 1, "HandleFetchRequest", 2, 10, None, [])  # counted committed by node 1
    lc.feed(1, 2, "CreateSnapshot", 2, 10, None, [], (10, 2))  # agrees
    lc.feed(2, 3, "HandleFetchSnapshotResponse", 3, 10, None, [], (10, 3))  # same end, another epoch
    lc.feed(3, 4, "CreateSnapshot", 3, 0, None, [], (0, 1))  # the empty prefix in epoch 1
    lc.feed(3, 5, "CreateSnapshot", 3, 5, None, [], (5, 1))  # offset 4 is in the committed batch of epoch 2
    found = [(v.invariant, v.node, v.seq) for v in lc.violations("s", "r")]
    assert found == [("SnapshotAgreement", 2, 3), ("SnapshotAgreement", 3, 4), ("SnapshotAgreement", 3, 5)]
