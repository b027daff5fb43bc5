"""KIP-853 split schedules of the simulator's reconfig profile (``ChangeSplit``, ``RemovalSplit``: traces/sim).

Two rules of KIP-853 matter only under a voter change that meets a partition at a precise moment:

* a leader takes a voter change only once it has committed an entry of its own epoch (Kafka's AddVoterHandler /
  RemoveVoterHandler answer REQUEST_TIMED_OUT while the leader's high watermark is unknown,
  ``testAddVoterWithoutFencedPreviousLeaders``): Raft's single-server-change bug, which needs an even voter set, an
  uncommitted change of an older epoch on a minority, and a new leader whose epoch has committed nothing;
* a leader removed by its own VotersRecord stops counting toward the high watermark at the append (KIP-853 "High
  Watermark"; Kafka's LeaderState.maybeUpdateHighWatermark over the latest voter set), which needs four voters (an odd
  set remains) and a voter at the leader's side that gets the record and later entries in one answer.

The reconfig profile draws both schedules, set off by those voter changes. These tests keep them able to catch the
mutation suite's cores for those rules at named seeds of bench/mutants_sim.py's run (``make mutants-sim``), show that
the same seeds without the schedules let them through, and keep the correct core clean and the run deterministic.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from kraft_tck.tla.tlc import tlc_unavailable_reason
from kraft_tck.traces.sim import SimConfig, SimResult, simulate
from kraft_tck.traces.sim.cluster import Simulation
from kraft_tck.traces.sim.faults import (
    PROFILES,
    ChangeSplit,
    RemovalSplit,
    extra_schedule,
    random_schedule,
    reconfig_fault_schedule,
)

from .mutants_sim_runner import load_runner

#: Seeds of the mutants' run (bench/mutants_sim.py: ``kraft-tck simulate``'s defaults, the reconfig profile) at which
#: each split schedule catches its mutant (the first caught seed of ``make mutants-sim``).
CHANGE_SPLIT_SEED = 4
REMOVAL_SPLIT_SEED = 2



runner = load_runner()
registry = runner.load_registry()


def _mutants_run(seed: int, name: str) -> SimConfig:
    """Seed ``seed`` of mutant ``name``'s run in bench/mutants_sim.py (the reconfig profile for a KIP-853 mutant)."""
    m = registry.MUTANTS[name]
    assert m.sim_profile == "reconfig"
    config: SimConfig = runner.sim_config(m, seed, runner.default_run())
    return config


def _without(config: SimConfig, kind: type, faults: tuple[object, ...]) -> SimConfig:
    return dataclasses.replace(config, faults=tuple(f for f in faults if not isinstance(f, kind)))


def test_the_reconfig_profile_draws_split_schedules_from_a_stream_of_their_own() -> None:
    prof = PROFILES["reconfig"]
    assert prof.change_splits_per_min > 0 and prof.removal_splits_per_min > 0
    drawn = reconfig_fault_schedule(random.Random("reconfig-faults-0"), 60_000, prof)
    assert {type(f) for f in drawn} == {ChangeSplit, RemovalSplit}
    # no other profile draws any, so their seeds stay what they were
    assert all(reconfig_fault_schedule(random.Random("x"), 60_000, p) == [] for n, p in PROFILES.items()
               if n != "reconfig")
    # a reconfig seed's other faults are the ones drawn without the split schedules
    config = SimConfig(seed=0, profile="reconfig")
    sim = Simulation(config)
    others = random_schedule(random.Random(0), config.node_ids, config.duration_ms, prof)
    others += extra_schedule(random.Random("extra-faults-0"), config.node_ids, config.duration_ms, prof)
    assert sorted(map(repr, sim.faults)) == sorted(map(repr, [*others, *drawn]))


def _caught_only_with(name: str, seed: int, schedule: type[ChangeSplit | RemovalSplit]) -> tuple[SimResult, SimResult]:
    """Mutant ``name`` at ``seed`` of its run in bench/mutants_sim.py is caught by the invariant it names, and not
    without ``schedule``'s faults; the correct core goes through the same run clean. (The mutant's run, the correct
    core's.)"""
    m = registry.MUTANTS[name]
    config = _mutants_run(seed, m.name)
    caught = simulate(config, core_class=m.core)
    assert caught.violation is not None, f"the {schedule.__name__} schedule no longer catches the mutant"
    assert caught.violation.invariant in (m.safety, *m.safety_also), str(caught.violation)
    assert simulate(_without(config, schedule, caught.faults), core_class=m.core).violation is None
    correct = simulate(config)
    assert correct.violation is None, str(correct.violation)
    return caught, correct


def test_change_check_uses_stale_hw_is_caught_by_the_change_split() -> None:
    """``change-check-uses-stale-hw`` (a new leader takes a voter change before its epoch commits): the ChangeSplit
    schedule's new leader removes the cut-off old leader with the one voter left at its side, while the old leader's
    uncommitted change elects it again with the voter it was joined by: LeaderCompleteness at its election. The same
    seed without ChangeSplit schedules lets the mutant through; the correct core goes through the schedule clean (the
    removal is refused: REQUEST_TIMED_OUT)."""
    caught, correct = _caught_only_with("change-check-uses-stale-hw", CHANGE_SPLIT_SEED, ChangeSplit)
    assert caught.change_split_leaders >= 1
    assert correct.change_split_leaders >= 1 and correct.changes_timed_out >= 1


def test_leader_counts_itself_after_removal_is_caught_by_the_removal_split() -> None:
    """``leader-counts-itself-after-removal`` (a removed leader still counts its own log end): the RemovalSplit
    schedule's restarted voter reports the removal and later entries at once, the leader counts them committed with
    it alone, and the two voters that hold the removal alone elect one of them: LeaderCompleteness. Not caught
    without RemovalSplit schedules; the correct core commits nothing there and stays clean."""
    caught, correct = _caught_only_with("leader-counts-itself-after-removal", REMOVAL_SPLIT_SEED, RemovalSplit)
    assert caught.removal_splits >= 1 and correct.removal_splits >= 1


def test_a_change_split_moves_one_voter_of_the_new_set_to_the_old_leaders_side() -> None:
    """A ChangeSplit given as the only fault: set off by a voter change of an even set, its second cut at the next
    leader leaves the old leader with a majority of its record's voter set (itself, the voter it added if any, and
    the voter moved over), and the new leader on the other side."""
    config = SimConfig(seed=2, profile="reconfig", faults=(ChangeSplit(1000, 8000, 500),),
                       duration_ms=40_000)
    sim = Simulation(config)
    result = sim.run()
    assert result.violation is None, str(result.violation)
    run = sim._split
    assert run is not None and run.new is not None and result.change_splits == result.change_split_leaders == 1
    side = set(run.groups[0])
    assert run.old in side and run.new not in side and len(side & run.voters) > len(run.voters) // 2


def test_split_runs_are_deterministic(tmp_path: Path) -> None:
    for seed, name in ((CHANGE_SPLIT_SEED, "change-check-uses-stale-hw"),
                       (REMOVAL_SPLIT_SEED, "leader-counts-itself-after-removal")):
        config = _mutants_run(seed, name)
        a, b = tmp_path / f"{seed}-a.ndjson", tmp_path / f"{seed}-b.ndjson"
        ra, rb = simulate(config, a), simulate(config, b)
        assert ra.violation is None and ra.change_splits + ra.removal_splits >= 1
        assert a.read_bytes() == b.read_bytes()
        assert (ra.events, ra.committed, ra.change_splits, ra.removal_splits) == (
            rb.events, rb.committed, rb.change_splits, rb.removal_splits)


needs_tlc = pytest.mark.skipif(tlc_unavailable_reason() is not None, reason=str(tlc_unavailable_reason()))


@pytest.mark.tlc
@pytest.mark.slow
@needs_tlc
def test_a_split_trace_validates_against_kraft_tla(tmp_path: Path) -> None:
    """A reconfig run with both split schedules set off (the second ChangeSplit cut at a new leader, a RemovalSplit's
    restart and cut) is a behaviour of tla/KRaft.tla with Reconfig: the splits are partitions and a crash. Without
    a Fetch cap and an observer, like tests/tla/test_reconfig.py's simulator traces."""
    from kraft_tck.tla.trace_validate import validate_trace

    path = tmp_path / "splits.ndjson"
    result = simulate(SimConfig(seed=4, duration_ms=30_000, profile="reconfig"), trace_path=path)
    assert result.violation is None, str(result.violation)
    assert result.change_split_leaders >= 1 and result.removal_splits >= 1
    verdict = validate_trace(path, timeout=600)
    assert verdict.passed, (verdict.reason, verdict.failed_event, verdict.state_before)
