"""The KIP-853 voter-set invariants in the Spark pipeline (AtMostOneUncommittedConfig, CommittedConfigsDifferByOne,
ElectionSafety's second half, SnapshotConfigAgreement): each hand-made violation (`synth.reconfig_run`) is found
where it was planted, with the single-process checker's words; simulated reconfig runs are clean; the report has
the "Membership changes" table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kraft_tck.spec.trace import ACTIONS, schema
from kraft_tck.traces.checker import check_paths, trace_files
from kraft_tck.traces.pipeline import synth
from kraft_tck.traces.pipeline.run import EXIT_VIOLATIONS, run_pipeline

SIM_SEEDS = (1, 5)  # 20 s each: changes commit and joiners install snapshots in both

pytestmark = pytest.mark.skipif(
    "voters" not in schema()["$defs"]["state"]["properties"] or "HandleRemoveRaftVoterRequest" not in ACTIONS,
    reason="spec/trace.schema.json lacks the KIP-853 state field `voters` or events: the pipeline's Spark schema is "
    "derived from it, so it would drop them")


def _quiet(_: str) -> None:
    return None


@pytest.fixture(scope="module")
def reconfig_pipeline(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, dict[str, Any]]:
    from kraft_tck.traces.sim import SimConfig, simulate

    root = tmp_path_factory.mktemp("reconfig")
    expected = {}
    for kind in synth.RECONFIG_KINDS:
        events, want = synth.reconfig_run(kind)
        synth.write_trace(root / f"{kind}.ndjson", synth.header(kind, 0), events)
        expected[kind] = want
    for seed in SIM_SEEDS:
        r = simulate(SimConfig(seed=seed, duration_ms=20_000, profile="reconfig"), root / f"sim-{seed}.ndjson")
        r.raise_for_violation()
        assert r.changes_committed and r.joiner_installs, seed
    out = tmp_path_factory.mktemp("reconfig-out")
    return root, run_pipeline(spark, root, out, validator=False, echo=_quiet), expected


@pytest.mark.spark
def test_spark_finds_each_voter_set_violation_where_planted(reconfig_pipeline: Any) -> None:
    root, res, expected = reconfig_pipeline
    for kind, want in expected.items():
        assert [(v.invariant, v.node, v.epoch, v.seq) for v in res.violations if v.run == kind] == (
            [want] if want else []), kind
    assert not [v for v in res.violations if v.run not in expected], "simulated reconfig runs are clean"
    assert res.exit_code == EXIT_VIOLATIONS and res.counts["quarantined"] == 0
    py = check_paths(trace_files(root), validate=False)
    assert [v.key() for v in res.violations] == [v.key() for v in py.violations]
    assert [v.detail for v in res.violations] == [v.detail for v in py.violations]


@pytest.mark.spark
def test_the_report_has_the_membership_changes_table(reconfig_pipeline: Any) -> None:
    _, res, _ = reconfig_pipeline
    text = res.report.read_text()
    assert "## Membership changes" in text
    row = next(line for line in text.splitlines() if line.startswith("| simulator | kraft-tck-reference"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert int(cells[2]) == len(SIM_SEEDS) and int(cells[3]) >= int(cells[4]) > 0, cells
