"""The Spark pipeline: planted violations are found where they were planted, clean traces are clean, and
the Spark results equal the single-process checker's (kraft_tck.traces.checker)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kraft_tck.traces.checker import check_paths, trace_files
from kraft_tck.traces.pipeline import synth
from kraft_tck.traces.pipeline.run import EXIT_CLEAN, EXIT_VIOLATIONS, run_pipeline
from kraft_tck.traces.pipeline.tlc_fanout import default_validator, fan_out, schema_validator, tla_validator

pytestmark = pytest.mark.spark

EVENTS = 1500

PLANTS: dict[str, tuple[Callable[[list[dict[str, Any]]], tuple[int, int, int]], str]] = {
    "two leaders in one epoch": (synth.plant_two_leaders, "ElectionSafety"),
    "a second vote in an epoch": (synth.plant_second_vote, "VoteOnce"),
    "truncation below the high watermark": (synth.plant_truncation_below_hw, "CommittedNeverTruncated"),
    "diverging records at the same offset and epoch": (synth.plant_diverging_records, "LogMatching"),
    "high watermark going backwards": (synth.plant_hw_backwards, "HighWatermarkMonotonic"),
    "epoch going backwards": (synth.plant_epoch_backwards, "EpochMonotonic"),
    "a leader elected without a committed batch": (synth.plant_leader_without_committed_batch, "LeaderCompleteness"),
}


def _quiet(_: str) -> None:
    return None


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[str, int, int, int]]]:
    """Two clean runs plus one run per planted violation, each in its own file."""
    root = tmp_path_factory.mktemp("planted")
    synth.write_corpus(root, runs=2, events_per_run=EVENTS, seed=100)
    expected: dict[str, tuple[str, int, int, int]] = {}
    for i, (name, (plant, invariant)) in enumerate(PLANTS.items()):
        run = f"planted-{i}"
        events = synth.synth_run(run, 200 + i, EVENTS)
        seq, node, epoch = plant(events)
        synth.write_trace(root / f"{run}.ndjson", synth.header(run, 200 + i), events)
        expected[name] = (invariant, node, epoch, seq)
    return root, expected


@pytest.fixture(scope="module")
def planted_result(spark: Any, planted: tuple[Path, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    root, _ = planted
    return run_pipeline(spark, root, tmp_path_factory.mktemp("out"), validator=False, echo=_quiet)


@pytest.mark.parametrize("name", list(PLANTS))
def test_each_planted_violation_is_found_exactly_where_planted(name: str, planted: Any, planted_result: Any) -> None:
    _, expected = planted
    invariant, node, epoch, seq = expected[name]
    run = f"planted-{list(PLANTS).index(name)}"
    found = [(v.invariant, v.node, v.epoch, v.seq) for v in planted_result.violations if v.run == run]
    assert found == [(invariant, node, epoch, seq)]


def test_clean_runs_are_not_flagged(planted_result: Any) -> None:
    assert planted_result.violations, "the planted runs must be flagged"
    assert not [v for v in planted_result.violations if not v.run.startswith("planted-")]
    assert planted_result.exit_code == EXIT_VIOLATIONS


def test_spark_results_equal_the_python_checker(planted: Any, planted_result: Any) -> None:
    root, _ = planted
    py = check_paths(trace_files(root), validate=False)
    assert [v.key() for v in planted_result.violations] == [v.key() for v in py.violations]
    assert [v.detail for v in planted_result.violations] == [v.detail for v in py.violations]
    assert planted_result.counts["events accepted"] == py.accepted


def test_tables_and_report_are_written(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "in"
    synth.write_corpus(src, runs=2, events_per_run=800, seed=7)
    out = tmp_path / "out"
    res = run_pipeline(spark, src, out, validator=schema_validator, echo=_quiet)
    assert res.exit_code == EXIT_CLEAN, (res.violations, res.quarantine)
    for table in ("events", "messages", "appends", "transitions"):
        parts = sorted(p.name for p in (out / "tables" / table).iterdir() if p.is_dir())
        assert parts == ["source=simulator"], table
        runs = sorted(p.name for p in (out / "tables" / table / "source=simulator").iterdir() if p.is_dir())
        if table in ("events", "messages"):  # big: a directory per run
            assert runs == ["run=seed-7", "run=seed-8"], table
        else:  # small: run is a column (no directory of tiny files per run)
            assert runs == [], table
            rows = spark.read.parquet(str(out / "tables" / table)).select("run").distinct().collect()
            assert sorted(r["run"] for r in rows) == ["seed-7", "seed-8"], table
    events = spark.read.parquet(str(out / "tables" / "events"))
    assert events.count() == res.counts["events accepted"]
    assert events.where("line = seq + 2").count() == events.count()
    md = (out / "report.md").read_text()
    assert "## Safety violations" in md and "(none)" in md
    assert "fetch round trip (ms)" in md and "commit latency (ms)" in md
    assert list(out.glob("*.png")) and (out / "report.html").exists()
    # The pictures: a role/epoch timeline per run, commit latency over time, the invariants' results.
    assert "## Pictures" in md and "### Timeline: simulator seed-7" in md and "### Timeline: simulator seed-8" in md
    for png in ("timeline-simulator-seed-7.png", "timeline-simulator-seed-8.png", "commit-latency-over-time.png",
                "invariants.png"):
        assert (out / png).stat().st_size > 5_000, png
        assert f"]({png})" in md and f'src="{png}"' in (out / "report.html").read_text()
    assert res.verdicts and all(v.ok for v in res.verdicts)
    report = json.loads((out / "report.json").read_text())
    metrics = {m["metric"]: m for m in report["metrics"]}
    assert metrics["leader changes per run"]["n"] == 2
    assert metrics["commit latency (ms)"]["n"] > 10 and metrics["commit latency (ms)"]["min"] > 0
    assert metrics["fetch round trip (ms)"]["min"] > 0


@pytest.mark.tlc
def test_tla_validation_fans_out_with_the_same_verdicts_as_one_by_one(spark: Any, tmp_path: Path) -> None:
    """Each task runs TLC on its traces; the joined verdicts equal validating each file in this process."""
    name, fn = default_validator()
    assert fn is tla_validator, name  # kraft_tck.tla provides trace validation
    synth.write_corpus(tmp_path, runs=2, events_per_run=40, seed=11)
    files = [str(p) for p in trace_files(tmp_path)]
    fanned = fan_out(spark, files, fn, tasks=2)
    assert [v.file for v in fanned] == sorted(files)
    assert [(v.ok, v.first_bad_seq, v.message) for v in fanned] == [fn(f) for f in sorted(files)]


def test_fan_out_turns_a_crashing_validator_into_a_failed_verdict(spark: Any, tmp_path: Path) -> None:
    synth.write_corpus(tmp_path, runs=2, events_per_run=40, seed=12)
    files = [str(p) for p in trace_files(tmp_path)]

    def picky(path: str) -> tuple[bool, int | None, str]:
        if path.endswith("seed-13.ndjson"):
            raise RuntimeError("boom")
        return schema_validator(path)

    verdicts = fan_out(spark, files, picky, tasks=2)
    assert [(Path(v.file).name, v.ok) for v in verdicts] == [("seed-12.ndjson", True), ("seed-13.ndjson", False)]
    assert "validator failed: RuntimeError: boom" in verdicts[1].message


# ------------------------------------------------------------------------------------ brokers


def _plant_unregistered_online(lines: list[str]) -> list[tuple[str, int, int, int]]:
    """The first Online BrokerEvent now names a broker nobody registered."""
    i, ev = next((i, json.loads(t)) for i, t in enumerate(lines) if '"state":"Online"' in t)
    ev["broker"]["brokerId"] = 999
    lines[i] = json.dumps(ev)
    return [("OnlineRequiresRegistration", ev["node"], ev["broker"]["brokerEpoch"], ev["seq"])]


def _plant_uncommitted_registration(lines: list[str]) -> list[tuple[str, int, int, int]]:
    """The first RegisterBrokerRecord event now says its record sits far above any high watermark: every
    Online report of that broker epoch on that node lacks a committed registration."""
    i, reg = next((i, json.loads(t)) for i, t in enumerate(lines) if '"record":"RegisterBrokerRecord"' in t)
    reg["broker"]["offset"] = 10**9
    lines[i] = json.dumps(reg)
    node, broker, epoch = reg["node"], reg["broker"]["brokerId"], reg["broker"]["brokerEpoch"]
    onlines = [json.loads(t) for t in lines[i + 1:] if '"state":"Online"' in t]
    return [("OnlineRequiresRegistration", node, epoch, e["seq"]) for e in onlines
            if (e["node"], e["broker"]["brokerId"], e["broker"]["brokerEpoch"]) == (node, broker, epoch)]


BROKER_PLANTS = {"broker-unregistered": _plant_unregistered_online,
                 "broker-uncommitted": _plant_uncommitted_registration}


@pytest.fixture(scope="module")
def broker_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[tuple[str, int, int, int]]]]:
    """Simulated traces with brokers: two clean seeds, and one planted copy of another seed per plant."""
    from kraft_tck.traces.sim import SimConfig, simulate

    root = tmp_path_factory.mktemp("brokers")
    for seed in (0, 1):
        simulate(SimConfig(seed=seed, duration_ms=20_000), root / f"seed-{seed}.ndjson").raise_for_violation()
    expected = {}
    for i, (run, plant) in enumerate(BROKER_PLANTS.items()):
        path = root / f"{run}.ndjson"
        # seeds whose 20 s hold Online brokers to plant on (the default profile's Figure8 schedules can keep a
        # short run without a leader for most of it: seed 10's)
        simulate(SimConfig(seed=12 + i, duration_ms=20_000), path).raise_for_violation()
        lines = path.read_text().splitlines()
        head = json.loads(lines[0])
        head["run"] = run
        lines[0] = json.dumps(head)
        expected[run] = plant(lines)
        assert expected[run], f"{run}: nothing to plant on"
        path.write_text("\n".join(lines) + "\n")
    return root, expected


@pytest.fixture(scope="module")
def broker_result(spark: Any, broker_corpus: tuple[Path, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    root, _ = broker_corpus
    out = tmp_path_factory.mktemp("brokers-out")
    return out, run_pipeline(spark, root, out, validator=False, metrics=False, echo=_quiet)


def test_online_brokers_without_committed_registration_are_found_where_planted(broker_corpus: Any,
                                                                              broker_result: Any) -> None:
    _, expected = broker_corpus
    _, res = broker_result
    for run, want in expected.items():
        found = [(v.invariant, v.node, v.epoch, v.seq) for v in res.violations if v.run == run]
        assert found == sorted(want, key=lambda w: w[3]), run
    assert not [v for v in res.violations if v.run not in expected], "clean simulated traces are clean"
    assert res.exit_code == EXIT_VIOLATIONS


def test_broker_checks_equal_the_python_checker(broker_corpus: Any, broker_result: Any) -> None:
    root, _ = broker_corpus
    _, res = broker_result
    py = check_paths(trace_files(root), validate=False)
    assert [v.key() for v in res.violations] == [v.key() for v in py.violations]
    assert [v.detail for v in res.violations] == [v.detail for v in py.violations]


def test_broker_events_are_counted_in_the_events_table(spark: Any, broker_corpus: Any, broker_result: Any) -> None:
    root, _ = broker_corpus
    out, res = broker_result
    in_files = sum(json.loads(t).get("event") == "BrokerEvent" for p in trace_files(root)
                   for t in p.read_text().splitlines()[1:])
    events = spark.read.parquet(str(out / "tables" / "events"))
    brokers = events.where("event = 'BrokerEvent'")
    assert brokers.count() == in_files > 0
    assert brokers.where("brokerId IS NULL OR brokerState IS NULL OR brokerEpoch IS NULL").count() == 0
    assert {r["brokerState"] for r in brokers.select("brokerState").distinct().collect()} >= {"Fenced", "Online"}
    assert res.counts["events accepted"] == events.count()
    assert "OnlineRequiresRegistration" in (out / "report.md").read_text()
