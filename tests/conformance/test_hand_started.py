"""``--target host:port`` against a reference node started by hand exactly as conformance/README.md says,
the harness coming up D seconds later: the cases pass, the black-box TLC item included (make test: four
sections; make gate-selfcheck: the whole catalog).

Until the harness listens the node's Vote requests reach nobody, so it runs elections on its own (an epoch
every election timeout or so): the harness finds it as the Candidate of some epoch, which black-box
validation must accept (tla/TraceKRaft.tla IsolatedCandidate) however many there were.  ``make
gate-selfcheck`` runs the same at D = 0, 5 and 30 s, five times each.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.tla.trace_translate import translate

from tests.conformance.hand_started_runs import hand_started_run


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.tlc
@pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))
@pytest.mark.parametrize("delay_s", [5])
def test_a_node_started_by_hand_before_the_harness_passes(delay_s: float, tmp_path: Path) -> None:
    # make test: the sections of the first life (the node found mid-election) and a few after it; make
    # gate-selfcheck runs the whole catalog at D = 0, 5 and 30 s.
    sections = ("Vote", "Election", "Divergence", "FetchErrors")
    run = hand_started_run(delay_s, tmp_path / "run", tuple(a for s in sections for a in ("--section", s)))
    assert run.blackbox == "PASS", run.failure + "\n" + (run.workdir / "pytest.out").read_text()[-4000:]
    assert run.returncode == 0, run.failure + "\n" + (run.workdir / "pytest.out").read_text()[-4000:]
    # the node did hold elections nobody heard: every message of it the harness received is of an epoch above
    # 0, so validation could only start it as the Candidate of one of them
    trace = translate(run.workdir / "report" / "traces" / "session-life-0.ndjson")
    assert trace.header.get("targetStartedBeforeHarness") is True
    assert trace.prelude >= 1, "the node held no election before the harness listened"
