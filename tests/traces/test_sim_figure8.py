"""Raft's Figure 8 and capped Fetch answers in the simulator's default run (``kraft-tck simulate`` with no options).

KIP-595 "Fetch Request Handling" step 4 moves the high watermark only once an entry of the leader's own epoch is on a
majority; the follower's high watermark is min(the leader's, its log end) ("Fetch Response Handling"). Neither rule
matters while every Fetch answer carries the leader's whole tail: a follower then always ends where the leader ended,
and a new leader's LeaderChange record travels with the older entries it replicates. The default run caps answers
(``--fetch-max-bytes``, Kafka's fetch max bytes scaled to the simulated logs) and draws ``Figure8`` schedules; these
tests keep both able to catch the bugs those rules exist for, using the mutation suite's cores (tests/mutants), and
keep the correct core clean and the run deterministic.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.traces.sim import Figure8, SimConfig, simulate
from kraft_tck.traces.sim.faults import PROFILES, extra_schedule

from .mutants_sim_runner import load_runner

runner = load_runner()
registry = runner.load_registry()


def _default(seed: int, name: str = "none") -> SimConfig:
    m = registry.unmutated() if name == "none" else registry.MUTANTS[name]
    config: SimConfig = runner.sim_config(m, seed, runner.default_run())
    return config


def test_the_default_run_caps_fetch_answers_and_draws_figure8_schedules() -> None:
    d = runner.default_run()
    assert d["fetch_max_bytes"] == 1024
    assert _default(0).fetch_max_bytes == 1024
    assert PROFILES["default"].figure8_per_min > 0
    import random

    drawn = extra_schedule(random.Random("extra-faults-0"), [1, 2, 3], 60_000, PROFILES["default"])
    assert any(isinstance(f, Figure8) for f in drawn)
    # drawn after the other extra faults: a profile without them draws what it drew before
    without = dataclasses.replace(PROFILES["default"], figure8_per_min=0)
    assert extra_schedule(random.Random("extra-faults-0"), [1, 2, 3], 60_000, without) == [
        f for f in drawn if not isinstance(f, Figure8)
    ]


def test_hw_commits_old_epoch_is_caught_by_the_figure8_schedule() -> None:
    """``hw-commits-old-epoch`` (the leader counts replicas of an older epoch's entry, Raft's Figure 8): caught at
    seed 0 of the default run by LeaderCompleteness; the same seed without its Figure8 schedules lets it through, and
    so does the same schedule without capped answers (the follower gets the new leader's own entry in the same
    answer)."""
    m = registry.MUTANTS["hw-commits-old-epoch"]
    config = _default(0, m.name)
    caught = simulate(config, core_class=m.core)
    assert caught.violation is not None, "the Figure 8 schedule no longer catches hw-commits-old-epoch"
    assert caught.violation.invariant in (m.safety, *m.safety_also), str(caught.violation)
    assert caught.figure8_moments >= 1
    no_figure8 = dataclasses.replace(config, faults=tuple(f for f in caught.faults if not isinstance(f, Figure8)))
    assert simulate(no_figure8, core_class=m.core).violation is None
    whole_tail = simulate(dataclasses.replace(config, fetch_max_bytes=None), core_class=m.core)
    assert whole_tail.violation is None and whole_tail.figure8_moments >= 1
    # the correct core goes through the same moment clean
    correct = simulate(config)
    assert correct.violation is None, str(correct.violation)
    assert correct.figure8_moments >= 1


def test_follower_hw_ahead_of_log_is_caught_by_the_capped_answers() -> None:
    """``follower-hw-ahead-of-log`` (the follower takes the leader's high watermark past its own log end): only an
    answer that ends below the leader's high watermark shows it; the default run's cap gives one at seed 0."""
    m = registry.MUTANTS["follower-hw-ahead-of-log"]
    config = _default(0, m.name)
    v = simulate(config, core_class=m.core).violation
    assert v is not None and v.invariant == m.safety == "CommittedNeverTruncated", v
    assert "above its log end" in v.detail
    assert simulate(dataclasses.replace(config, fetch_max_bytes=None), core_class=m.core).violation is None


def test_the_default_run_with_figure8_and_capped_answers_is_deterministic(tmp_path: Path) -> None:
    config = _default(0)
    a, b = tmp_path / "a.ndjson", tmp_path / "b.ndjson"
    ra, rb = simulate(config, a), simulate(config, b)
    assert ra.violation is None and ra.figure8_moments >= 1
    assert a.read_bytes() == b.read_bytes()
    assert (ra.events, ra.committed, ra.figure8_moments) == (rb.events, rb.committed, rb.figure8_moments)


def test_a_figure8_schedule_cuts_the_second_leader_off_before_its_first_message() -> None:
    """The schedule's second leader is cut off in the step it became leader: none of its BeginQuorumEpoch requests
    of that epoch reaches anyone until the moment (or the schedule's end) lets it back."""
    config = SimConfig(seed=0, duration_ms=30_000, faults=(Figure8(2000, 4000),), brokers=0, fetch_max_bytes=1024)
    from kraft_tck.traces.sim.cluster import Simulation

    sim = Simulation(config)
    result = sim.run()
    assert result.violation is None, str(result.violation)
    run = sim._figure8
    assert run is not None and run.new is not None and run.old_epoch >= 0 and run.done
    assert result.figure8_moments == 1


needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_figure8_trace_without_a_cap_validates_against_kraft_tla(tmp_path: Path) -> None:
    """A Figure8 schedule's run is a behaviour of tla/KRaft.tla: its cuts are partitions (the second leader's from the
    step it became leader), the first leader leads again, the second one comes back at the schedule's end. Without a
    cap: the model's Fetch answers carry every record up to MaxFetchRecords, byte-capped answers are not modelled."""
    from kraft_tck.tla.trace_validate import validate_trace
    from kraft_tck.traces.sim.cluster import Simulation

    path = tmp_path / "figure8.ndjson"
    config = SimConfig(seed=0, duration_ms=16_000, profile="none", faults=(Figure8(2000, 3000),), brokers=0,
                       write_rate=5)
    sim = Simulation(config, path)
    result = sim.run()
    run = sim._figure8
    assert result.violation is None, str(result.violation)
    assert run is not None and run.new is not None and run.old_epoch >= 0 and run.done
    verdict = validate_trace(path, timeout=300)
    assert verdict.passed, (verdict.reason, verdict.failed_event, verdict.state_before)
